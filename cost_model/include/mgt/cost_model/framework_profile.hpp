// What the training software does, as data (docs/cost-model.md §9): which attention kernel it runs,
// which non-GEMM kernels it fuses, which communication it overlaps, its host overhead, its memory
// overheads, and which pipeline schedules and ZeRO stages it offers. The hardware side (how fast a
// GEMM, an attention kernel family, HBM and NCCL run on a GPU generation) comes from the kernel model
// (kernel_model.hpp), fitted to kernel measurements only; cost_params_for combines the two into the
// estimator's CostParams. Only the few `fitted` members below are fitted to training runs
// (bench/calibrate.cpp), each bounded (kProfileFits).
#pragma once

#include "mgt/cost_model/cost_params.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/training_settings.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgt::cost {

/// The attention implementation a framework runs. `eager` materialises the s x s scores (two batched
/// GEMMs around a softmax kernel, no flash attention); the others are kernel-model families.
enum class AttentionImpl { eager, fa2, fa3, cudnn, triton };
std::string to_string(AttentionImpl impl);

/// How the host launches a micro-batch's kernels.
enum class HostDispatch { eager, torch_compile, cuda_graphs };
std::string to_string(HostDispatch dispatch);

struct FrameworkProfile {
  std::string name;  ///< canonical name (framework_profile_names)
  // --- kernels ---
  AttentionImpl attention = AttentionImpl::fa2;
  bool fused_norm = false;           ///< one kernel per norm (apex / TE / Triton), else eager ATen ops
  bool fused_activation = false;     ///< gated activation in one kernel (silu(a) * b), else two
  bool fused_cross_entropy = false;  ///< vocab-parallel / fused CE without an fp32 copy of the logits
  /// q, k, v projections as one GEMM and a gated MLP's gate and up as one (Megatron's linear_qkv and
  /// linear_fc1); else one GEMM launch each. Changes launches only, not GEMM time.
  bool fused_projections = false;
  HostDispatch dispatch = HostDispatch::eager;
  /// The MoE token dispatcher waits on the host for the routed-token counts before its expert-
  /// parallel all-to-all (Megatron-Core's dropless alltoall dispatcher), once per MoE layer forward.
  bool moe_dispatch_host_sync = false;
  /// Across NVLink domains the expert-parallel dispatcher is hierarchical: each token crosses the
  /// network once per destination domain, then fans out over NVLink (DeepEP's internode kernels,
  /// HybridEP); else a flat all-to-all sends one copy per remote expert.
  bool moe_hierarchical_dispatch = false;
  /// Routed experts with biases or a clamped gated unit (GPT-OSS) run their bias adds and the clamp
  /// as separate eager kernels around the grouped GEMMs (Megatron-Core TEGroupedMLP), except where the
  /// precision takes a fused grouped MLP (block-scaled MXFP8 / NVFP4: TE's CuTe-DSL grouped GEMM with
  /// the GLU in its epilogue). Priced in layer_cost.cpp (expert_epilogue_*).
  bool eager_expert_epilogue = false;
  /// Its low-precision linear layers (Transformer Engine's Linear, LayerNormLinear, GroupedLinear)
  /// keep for the weight-gradient GEMM the quantised copy of their input they made for the forward
  /// GEMM, not the bf16 input; false: the high-precision input is saved and re-quantised in backward.
  bool linears_save_quantized_input = false;
  /// What its selective activation recompute keeps (CostParams::selective_recompute).
  SelectiveRecompute selective_recompute = SelectiveRecompute::norms_and_activations;
  // --- communication it overlaps with compute ---
  bool tp_comm_overlap = false;       ///< TP all-gather / reduce-scatter pipelined with the GEMMs (TE userbuffers, async TP)
  bool overlap_grad_reduce = true;    ///< DP gradient reduction under backward (DDP buckets, FSDP, --overlap-grad-reduce)
  bool overlap_param_gather = true;   ///< ZeRO-1/2 parameter all-gather under the next forward
  bool p2p_overlap = false;           ///< pipeline sends / receives beside compute
  /// Expert-parallel all-to-alls beside another micro-batch's kernels: Megatron-Core's EP A2A overlap
  /// (--overlap-moe-expert-parallel-comm --delay-wgrad-compute; ep_overlap.hpp), the "ep-a2a-overlap"
  /// feature. Off by default: Megatron-Core's default is off, and Megatron-Bridge's performance
  /// recipes set it per model, GPU and precision.
  bool ep_a2a_overlap = false;
  /// Without sequence parallel, each TP rank sends its 1/tp slice of the stage boundary and the
  /// receivers all-gather it over the TP group (Megatron-LM's scatter/gather optimisation).
  bool pipeline_scatter_gather = false;
  // --- what it offers the planner ---
  bool offers_pipeline = false;
  bool offers_interleaved = false;  ///< interleaved 1F1B (virtual pipeline stages)
  /// Places pipeline layers by its own compute estimate (nanotron), not by Megatron's rules
  /// (ir::TrainingSettings::pipeline_balanced_by_compute).
  bool pipeline_balanced_by_compute = false;
  bool offers_zero[4] = {true, false, false, false};  ///< ZeRO stages 0-3 (3 = FSDP-style sharding)
  /// Full recompute of only some layers per (virtual) pipeline stage, the rest keeping their
  /// activations (Megatron-Core --recompute-method block --recompute-num-layers N; ir::Plan::recompute_layers).
  bool offers_partial_recompute = false;
  /// The first year its releases offer selective recompute, 0 = every version it describes: a stated
  /// version from an earlier year (apply_framework_version) offers none and full only.
  int selective_recompute_since_year = 0;
  /// Bytes per element of the gradient buffer and its data-parallel reduction. 4: fp32 (Megatron-LM's
  /// --bf16 turns on --accumulate-allreduce-grads-in-fp32; FSDP and DeepSpeed keep fp32 gradients for
  /// the optimizer). 2: bf16, the "bf16-grad-reduce" feature (NeMo's and Megatron-Bridge's
  /// performance configurations: grad_reduce_in_fp32 = False).
  int64_t gradient_bytes = 4;
  bool offers_selective_recompute = true;
  /// ZeRO-3 gathers per submodule under these limits (DeepSpeed; `--emit deepspeed` writes them);
  /// none: whole blocks with the next one prefetched (FSDP2).
  std::optional<Zero3SubmoduleLimits> zero3_submodule_limits;
  /// FSDP under a pipeline gathers each parameter once per step and reduce-scatters once (torchtitan:
  /// ir::TrainingSettings::fsdp_gathers_once_under_pipeline); false: every micro-batch gathers and reduces.
  bool fsdp_gathers_once_under_pipeline = false;
  // --- memory overheads per GPU ---
  int64_t context_bytes = 768ll << 20;     ///< CUDA context + cuBLAS / cuDNN / TE workspaces
  int64_t nccl_buffer_bytes = 256ll << 20;
  double allocator_fragmentation = 0.115;  ///< reserved / allocated - 1 at peak
  // --- fitted on training rows, one value for every profile (bounds and priors in kProfileFits;
  // docs/cost-model.md §9); the initialisers are that fit (the robust objective of §7, bench/calibrate.cpp)
  // on every row of shared/validation ---
  /// Share of the kernel-benchmark rate that kernels reach inside a training step on Ampere (launch
  /// gaps, power-limited clocks, cache interference), applied to GEMM and attention.
  double in_step_kernel_fraction = 0.95;
  /// The same on Hopper and Blackwell: a 700 W board holds a lower share of its boost clock under
  /// dense tensor-core load than a 400 W A100, and the kernels most rows ran were tuned for Ampere.
  double in_step_kernel_fraction_hopper = 0.714;
  /// Share of the kernel family's benchmark rate that a training step's attention call reaches (older
  /// kernel releases than the benchmarks; padding, layout transposes and mask handling around the
  /// kernel).
  double attention_in_step_fraction = 0.638;
  /// Host time per micro-batch that the GPU waits for (dispatch, data loader hand-off), seconds.
  double host_overhead_per_microbatch_s = 0.224e-3;
  /// Share of the communication a framework overlaps that really hides (the rest waits: first and
  /// last chunks, stream synchronisation, SM contention beyond overlap_compute_slowdown).
  double comm_hidden_fraction = 0.9975;
};

/// A fitted member with its physical bounds, its prior and the GPU generation whose rows it is
/// fitted on. The fitted members describe what kernels and NCCL reach inside a training step on a
/// GPU generation, not what one framework documents (that enters as the profile's claims: attention
/// family, fused kernels, overlap), so one value serves every profile: a source alone in its profile
/// is still predicted with values fitted on the other sources (docs/cost-model.md §9).
struct ProfileFit {
  const char* name;
  double FrameworkProfile::*member;
  double lo, hi;
  double prior;                      ///< the value before any fit (the reason beside kProfileFits)
  std::optional<ir::GpuArch> arch;   ///< rows of this generation only (the member is read only there); nullopt: every row
};
/// Priors, derived without training rows:
///   in-step kernel fraction: the kernel benchmarks run a few seconds at boost clock; a training
///     step runs at the clock the board's power limit sustains under dense tensor-core load (A100
///     400 W: ~1.3-1.4 of 1.41 GHz, 0.95; H100 SXM 700 W: ~1.6-1.75 of 1.98 GHz, 0.85).
///   attention in-step fraction: the same clock share (0.9) for the attention call.
///   host overhead per micro-batch: the step's one synchronisation per micro-batch (loss, grad
///     accumulation bookkeeping, data-loader hand-off), ~0.5 ms in PyTorch profiles.
///   comm hidden fraction: 0.9, the share left after the first and last bucket of a prefetched or
///     bucketed collective, which cannot overlap (1 of ~10 buckets).
inline constexpr ProfileFit kProfileFits[] = {
    {"in_step_kernel_fraction", &FrameworkProfile::in_step_kernel_fraction, 0.6, 1.0, 0.95, ir::GpuArch::ampere},
    {"in_step_kernel_fraction_hopper", &FrameworkProfile::in_step_kernel_fraction_hopper, 0.6, 1.0, 0.85, ir::GpuArch::hopper},
    {"attention_in_step_fraction", &FrameworkProfile::attention_in_step_fraction, 0.3, 1.0, 0.9, std::nullopt},
    {"host_overhead_per_microbatch_s", &FrameworkProfile::host_overhead_per_microbatch_s, 0.0, 20e-3, 0.5e-3, std::nullopt},
    {"comm_hidden_fraction", &FrameworkProfile::comm_hidden_fraction, 0.0, 1.0, 0.9, std::nullopt},
};

/// Canonical profile names, in table order.
std::vector<std::string> framework_profile_names();

/// The profile a framework name selects: a canonical name or an alias (nemo and megatron-bridge are
/// megatron-core; llm-foundry, accelerate, axolotl and metaseq run PyTorch FSDP). nullopt-like
/// behaviour for unknown names: `known` false and the default profile (pytorch-fsdp).
struct FrameworkSelection {
  FrameworkProfile profile;
  bool known = true;
  std::vector<std::string> notes;  ///< what was read and how (aliases, features applied or ignored)
};
/// `name` (case-insensitive) with `features` applied (transformer-engine, tp-comm-overlap,
/// overlap-grad-reduce, overlap-param-gather, torch.compile, float8, fsdp2, zero-1 ...; unknown
/// features are listed in notes and change nothing).
FrameworkSelection select_framework(const std::string& name, const std::vector<std::string>& features = {});

/// The profile without features; unknown names give the default profile.
FrameworkProfile framework_profile(const std::string& name);

/// What a stated framework version changes: a version from before the profile's
/// selective_recompute_since_year (the earliest year written in it, e.g. "README, commit 5281919420
/// (2020-09-11)") turns offers_selective_recompute off. Returns a note saying so, or nullopt.
std::optional<std::string> apply_framework_version(FrameworkProfile& profile, const std::string& version);

/// The default for a caller that names no framework: pytorch-fsdp (what the calibration set mostly
/// measured, and what default_cost_params describes).
const FrameworkProfile& default_framework_profile();

/// Prints `message` to stderr the first time it is given in this process (thread-safe): an unknown
/// framework name in many rows is said once.
void warn_once(const std::string& message);

/// The estimator's constants for `gpu` under `profile`: kernel efficiencies from the kernel model's
/// per-generation fit (kernel_model_params, attention_peak_fraction of the profile's family) times
/// the profile's in-step fraction; memory-bound kernels at the kernel model's copy bandwidth with
/// the profile's unfused traffic; NCCL efficiencies from the kernel model; overlap, host overhead and
/// memory overheads from the profile. A CPU cluster (gpu.arch cpu) ignores the profile.
CostParams cost_params_for(const ir::GpuSpec& gpu, const FrameworkProfile& profile);

/// What the framework does to a plan's meaning, as the settings every layout is resolved with
/// (ir::resolve), so that the estimator, the lowering and the runtime read one answer: where it
/// places pipeline layers, and whether it runs FSDP under a pipeline as ZeRO-1.
void apply_plan_semantics(const FrameworkProfile& profile, ir::TrainingSettings& settings);

}  // namespace mgt::cost
