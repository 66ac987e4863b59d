// Named, documented constants of the cost model. Each is a physical quantity; docs/cost-model.md gives
// the derivation. For a GPU they come from cost_params_for (framework_profile.hpp): the hardware side
// from the kernel model's fit to kernel measurements, the software side from the training
// framework's profile. The member defaults below are only what a hand-built CostParams starts from.
#pragma once

#include "mgt/cost_model/attention_curve.hpp"
#include "mgt/cost_model/host_dispatch.hpp"
#include "mgt/ir/cluster_spec.hpp"

#include <cstdint>
#include <optional>

namespace mgt::cost {

/// What a framework's selective recompute drops and redoes in each transformer layer.
///   norms_and_activations: the norm and activation outputs (recomputed from the kept inputs); every
///     GEMM output and attention's q, k, v and output are kept (Megatron-style; mgt's default).
///   every_second_matmul: torchtitan's op-level selective AC: the layer input, attention's output and
///     the output of every odd weight matmul are kept; every even one, the grouped-expert GEMMs (not
///     in its save list) and every other op are recomputed.
///   megatron_modules: Megatron-Core's --recompute-modules layernorm moe_act mla_up_proj: the norm in
///     front of a router (the only norm TE does not fuse into the next GEMM), the experts' activation,
///     and MLA's up-projections with their RoPE are recomputed; everything else is kept (a dense MLP's
///     activation too: Megatron-Core has no module for it, "mlp" checkpoints the whole MLP).
enum class SelectiveRecompute { norms_and_activations, every_second_matmul, megatron_modules };

/// DeepSpeed ZeRO-3's limits on what a rank holds gathered and reduces at once, in parameter
/// elements (deepspeed/runtime/zero/config.py; the keys `--emit deepspeed` writes). ZeRO-3 there
/// gathers one submodule's parameters at a time (a Hugging Face Linear or Embedding: one tensor),
/// prefetching ahead only while fewer than max_live_parameters are gathered, where FSDP2 gathers a
/// whole transformer block (docs/cost-model.md §4.3).
struct Zero3SubmoduleLimits {
  int64_t max_live_parameters = 0;          ///< stage3_max_live_parameters
  int64_t prefetch_bucket_size = 0;         ///< stage3_prefetch_bucket_size: prefetched per fetch call
  int64_t max_reuse_distance = 0;           ///< stage3_max_reuse_distance
  int64_t param_persistence_threshold = 0;  ///< stage3_param_persistence_threshold: tensors this small stay gathered
  int64_t reduce_bucket_size = 0;           ///< reduce_bucket_size: the gradient (IPG) bucket
  /// DeepSpeed v0.3.12-v0.5.4 (ZeRO-3's first releases, before #1188 in v0.5.5): each parameter is
  /// gathered on its own after torch.cuda.synchronize(), into a zero-filled buffer, by a list
  /// all_gather that PyTorch's ProcessGroupNCCL copies out one chunk per rank; each gradient is
  /// reduce-scattered on its own (one copy-in per rank). Nothing overlaps compute
  /// (Estimator::zero3_blocks_compute, estimator.cpp fsdp_block_comm; docs/cost-model.md §4.3).
  bool per_tensor_blocking = false;
  bool operator==(const Zero3SubmoduleLimits&) const = default;
};

/// Bytes of DeepSpeed ZeRO-3's gather and gradient-reduce buffers on one rank, an upper bound at every
/// moment of the step (docs/cost-model.md §4.3 derives each term from DeepSpeed's source), in bf16, for
/// a stage whose largest parameter tensor has `largest_param` elements, whose tensors at or below the
/// persistence threshold sum to `persistent_params` elements, and whose gradients reduce-scatter over
/// `reduce_ranks` ranks. Throws std::invalid_argument for a negative count or reduce_ranks < 1.
int64_t zero3_submodule_buffer_bytes(const Zero3SubmoduleLimits& limits, int64_t largest_param, int64_t persistent_params,
                                     int64_t reduce_ranks);

struct CostParams {
  // --- compute (docs/cost-model.md §2) ---
  /// Best achieved / peak for a large bf16 GEMM inside a training step. cuBLAS alone reaches ~0.75 of
  /// dense peak at 8k x 8k x 8k on H100 (public cuBLAS benchmarks); 0.70 leaves the launch gaps and
  /// clock throttling of a real step (MosaicML llm-foundry MPT-7B at seq 2048 on 8 H100: MFU 0.46).
  double gemm_max_efficiency = 0.70;
  /// The same for GEMMs in fp8 (Transformer Engine linears), as a fraction of the fp8 peak: fp8
  /// kernels reach a smaller share of their doubled peak (scaling, casts, amax bookkeeping).
  double fp8_gemm_max_efficiency = 0.45;
  /// Dimension at which a GEMM reaches half of its best efficiency along that dimension (tile
  /// quantisation and wave effects; 128 is one CUTLASS tile edge).
  double gemm_half_efficiency_dim = 77.0;
  /// Flash-attention forward efficiency relative to dense peak (FlashAttention-2 paper §4: 50-73 % of
  /// A100 peak fwd, ~35-45 % of H100 peak; FA3 reaches 0.6-0.75 on H100). Backward runs at
  /// `attention_bwd_efficiency` (FA2 backward is ~20 % slower per FLOP than forward).
  double attention_fwd_efficiency = 0.45;
  double attention_bwd_efficiency = 0.35;
  /// The kernel model's shape curve (attention_curve.hpp: executed keys per row, mask edges, head
  /// dim). All 0 = flat (the efficiencies above at every shape).
  AttentionCurve attention_curve;
  /// Eager attention (no flash kernel): the s x s scores are written to HBM, softmaxed and read back,
  /// and both batched GEMMs run over the full square even when causal (docs/cost-model.md §9).
  bool attention_materialised = false;
  /// Fraction of HBM bandwidth that elementwise / norm / softmax kernels reach in eager PyTorch
  /// (fitted 0.60: unfused kernels re-read their inputs; STREAM-like copies reach ~0.9).
  double hbm_efficiency = 0.60;
  /// Bytes an implementation moves per byte of the fused kernel's traffic for norms, gated
  /// activations and the loss (1 = fused; framework_profile.cpp counts the eager ATen kernels).
  double norm_traffic_factor = 1.0;
  double activation_traffic_factor = 1.0;
  double loss_traffic_factor = 1.0;
  /// Launch + tail floor of one kernel (CUDA launch ~3-5 us plus tail; Megatron profiles).
  double kernel_floor_s = 4.0e-6;
  /// The MoE token dispatcher synchronises the host with the GPU once per MoE layer forward
  /// (FrameworkProfile::moe_dispatch_host_sync): after it the GPU queue is empty and the layer's
  /// kernels run at the host's launch rate, one kernel_floor_s of host time per launch, until the
  /// host gets ahead (moe_host_sync_stall_s, layer_cost.hpp; docs/cost-model.md §9).
  bool moe_dispatch_host_sync = false;
  /// The expert-parallel dispatch sends each token once per remote NVLink domain and fans out over
  /// NVLink there (FrameworkProfile::moe_hierarchical_dispatch; ep_dispatch_time_s, collective.hpp).
  bool moe_hierarchical_dispatch = false;
  /// FrameworkProfile::eager_expert_epilogue: routed-expert biases and the gated unit's clamp run as
  /// separate memory-bound kernels (bf16 / fp8 per-tensor; not under MXFP8 / NVFP4).
  bool eager_expert_epilogue = false;
  /// FrameworkProfile::linears_save_quantized_input: a low-precision linear layer keeps its quantised
  /// input for backward instead of the bf16 one (LinearFormatCost::saved_input_bytes_per_element).
  bool linears_save_quantized_input = false;
  /// What selective recompute keeps (FrameworkProfile::selective_recompute; layer_cost.cpp).
  SelectiveRecompute selective_recompute = SelectiveRecompute::norms_and_activations;
  /// Bytes per element of the gradient buffer and of its data-parallel reduction
  /// (FrameworkProfile::gradient_bytes): 4 = fp32, 2 = bf16.
  int64_t gradient_bytes = 4;
  /// Host seconds per kernel launch under the framework's dispatch (FrameworkProfile::dispatch): an
  /// eager step pays Python, ATen dispatch and autograd bookkeeping per launch; CUDA graphs replay
  /// without the host (0). A block phase whose kernels take less than its launches' host time runs at
  /// the host's rate (host_dispatch.hpp; docs/cost-model.md §9, "Host dispatch"). 0 = never host bound.
  double host_launch_s = 0;
  /// Kernels each op launches under the framework's fusion (host_dispatch.hpp).
  KernelLaunchCounts launches{};
  /// Projections that read one input are one GEMM launch (FrameworkProfile::fused_projections).
  bool fused_projections = false;

  // --- communication (docs/cost-model.md §3) ---
  /// NCCL busbw / raw link bandwidth inside an NVLink domain (nccl-tests all_reduce on DGX H100:
  /// ~360-380 GB/s of 450 GB/s per direction, i.e. 0.80-0.85; the fit sits at the upper bound).
  double nvlink_efficiency = 0.85;
  /// NCCL busbw / raw NIC bandwidth across nodes (InfiniBand with GPUDirect RDMA: ~0.85-0.92; fitted
  /// 0.92).
  double network_efficiency = 0.92;
  /// NCCL busbw / raw bandwidth over PCIe (no NVLink), through host bridges.
  double pcie_efficiency = 0.70;
  /// Slow-down of compute kernels while a communication kernel shares the SMs (NCCL uses 8-32 SMs
  /// of 132 on H100; measured 5-15 % in overlap studies, e.g. Megatron "Reducing activation
  /// recomputation" §5, torchtitan FSDP2 notes).
  double overlap_compute_slowdown = 0.10;
  /// Share of the communication that the framework overlaps which really hides under compute
  /// (FrameworkProfile::comm_hidden_fraction where it overlaps, else 0 / 1 as below):
  ///   TP all-gather / reduce-scatter under the block's GEMMs (TE userbuffers, async TP), capped by
  ///   the block's compute; 0 = every TP collective is exposed.
  double tp_comm_hidden_fraction = 0.0;
  ///   DP gradient reduction (DDP buckets, ZeRO-1/2 reduce-scatter) under backward, as a share of the
  ///   backward window; 1 = the whole window hides it (PyTorch DDP).
  double dp_grad_reduce_hidden_fraction = 1.0;
  ///   ZeRO-1/2 parameter all-gather under the next forward, as a share of the forward window.
  double dp_param_gather_hidden_fraction = 1.0;
  ///   Pipeline sends / receives beside compute; 0 = exposed.
  double p2p_hidden_fraction = 0.0;
  ///   Expert-parallel dispatch / combine beside the kernels of another micro-batch's opposite phase
  ///   (Megatron-Core's EP A2A overlap, ep_overlap.hpp), in the phases that run merged; 0 = exposed.
  double ep_comm_hidden_fraction = 0.0;
  /// A stage boundary without sequence parallel crosses as 1/tp per TP rank
  /// (FrameworkProfile::pipeline_scatter_gather; layer_cost.cpp boundary_bytes).
  bool pipeline_scatter_gather = false;
  /// Whether a rank runs its streams concurrently (GPUs: CUDA streams overlap communication with
  /// compute). The CPU backend runs a rank's instructions one after another in program order, so
  /// the simulator then serialises every stream of a program (docs/simulator.md §1).
  bool concurrent_streams = true;

  // --- memory (docs/cost-model.md §4) ---
  /// CUDA context + cuBLAS/cuDNN workspaces per GPU (~0.5-1 GiB on H100 with PyTorch).
  int64_t cuda_context_bytes = 768ll << 20;
  /// NCCL internal buffers per communicator (NCCL_BUFFSIZE 4 MiB x channels x peers, ~200 MiB for the
  /// few communicators a 4-D mesh creates).
  int64_t nccl_buffer_bytes = 256ll << 20;
  /// PyTorch caching-allocator fragmentation: reserved / allocated at peak (5-15 % typical; fitted
  /// 0.115 on the measured peaks of BLOOM and nanotron).
  double allocator_fragmentation = 0.115;

  // --- fixed costs (docs/cost-model.md §5) ---
  /// Host-side overhead per micro-batch (Python dispatch, data loader hand-off).
  double per_microbatch_overhead_s = 1.4e-3;
  /// Per optimizer step (zero_grad, scheduler, logging, synchronisation).
  double per_step_overhead_s = 10.0e-3;

  // --- memory, continued (docs/cost-model.md §4.3) ---
  /// ZeRO-3 gathers per submodule under these limits (DeepSpeed) rather than a whole block at a time
  /// with the next one prefetched (FSDP2, the default): they bound its buffers instead.
  std::optional<Zero3SubmoduleLimits> zero3_submodule_limits;
};

/// What a collective of `comm_s` seconds adds when a framework overlaps `hidden_fraction` of it with
/// `compute_s` of kernels (TP comm overlap): the hidden part, at most the compute, costs only the
/// kernels' slow-down while NCCL shares the SMs; the rest is exposed.
inline double exposed_under_overlap(double comm_s, double compute_s, double hidden_fraction, double slowdown) {
  const double hidden = hidden_fraction * comm_s < compute_s ? hidden_fraction * comm_s : compute_s;
  return comm_s - hidden + slowdown * hidden;
}

/// The constants for `gpu` when no framework is named: cost_params_for(gpu, the pytorch-fsdp profile)
/// (framework_profile.hpp). What `Estimator` uses unless given explicit params.
CostParams default_cost_params(const ir::GpuSpec& gpu);

/// The CPU backend's constants (gpu.arch cpu; docs/calibration.md): what the executor itself does,
/// whatever framework a GPU run would use.
CostParams cpu_cost_params();

}  // namespace mgt::cost
