// Framework profiles (docs/cost-model.md §9): one row of data per training framework, with where
// its documentation or code says each claim, and how a profile and the kernel model become the
// estimator's CostParams.
#include "mgt/cost_model/framework_profile.hpp"

#include "mgt/cost_model/kernel_model.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <iostream>
#include <mutex>
#include <optional>
#include <regex>
#include <set>

namespace mgt::cost {

std::string to_string(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::eager: return "eager";
    case AttentionImpl::fa2: return "fa2";
    case AttentionImpl::fa3: return "fa3";
    case AttentionImpl::cudnn: return "cudnn";
    case AttentionImpl::triton: return "triton";
  }
  return "?";
}

std::string to_string(HostDispatch dispatch) {
  switch (dispatch) {
    case HostDispatch::eager: return "eager";
    case HostDispatch::torch_compile: return "torch.compile";
    case HostDispatch::cuda_graphs: return "cuda-graphs";
  }
  return "?";
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The profile table. Each claim names where the framework says it; the fitted members are one value
// for every profile (FrameworkProfile's initialisers, fitted by bench/calibrate.cpp on every row of
// examples/validation; docs/cost-model.md §9), so no profile carries a number fitted on its own rows.
std::vector<FrameworkProfile> profile_table() {
  std::vector<FrameworkProfile> t;
  {
    // Megatron-LM as published 2021-2023 (Narayanan et al. 2021; Korthikanti et al. 2022), before
    // Transformer Engine and megatron/core.
    FrameworkProfile p;
    p.name = "megatron-lm";
    // megatron/model/fused_softmax.py FusedScaleMaskSoftmax: the s x s scores are materialised and
    // softmaxed by one CUDA kernel (megatron/fused_kernels); flash attention arrived with
    // --use-flash-attn in mid-2023.
    p.attention = AttentionImpl::eager;
    // megatron/model/fused_layer_norm.py MixedFusedLayerNorm (apex); megatron/model/fused_bias_gelu.py
    // (--bias-gelu-fusion). Cross entropy: mpu/cross_entropy.py _VocabParallelCrossEntropy, several
    // fp32 kernels (not fused).
    p.fused_norm = true;
    p.fused_activation = true;
    // megatron/model/transformer.py ParallelAttention.query_key_value (one ColumnParallelLinear of
    // 3 x projection size) and ParallelMLP.dense_h_to_4h (2 x ffn for swiglu).
    p.fused_projections = true;
    // Selective recompute (--recompute-activations) arrived with Korthikanti et al. 2022 (Megatron-LM
    // v3.0); the 2019-21 releases checkpoint whole layers (--checkpoint-activations) or nothing.
    p.selective_recompute_since_year = 2022;
    // megatron/training.py train_step: model.allreduce_gradients() after the backward of the last
    // micro-batch (no bucketed overlap); the distributed optimizer (2022) all-gathers parameters
    // after optimizer.step(); p2p_communication.py blocks on its sends in the 1F1B schedule.
    p.overlap_grad_reduce = false;
    p.overlap_param_gather = false;
    // schedules.py: forward_backward_pipelining_without_interleaving and _with_interleaving
    // (--num-layers-per-virtual-pipeline-stage); --use-distributed-optimizer (ZeRO-1, 2022).
    p.offers_pipeline = p.offers_interleaved = true;
    p.offers_zero[1] = true;
    // Narayanan et al. 2021 §4.1 (used for every run of its §5): each of the t TP ranks sends 1/t of
    // the boundary over its own NIC (megatron/p2p_communication.py _communicate:
    // split_tensor_into_1d_equal_chunks, then gather_split_1d_tensor, an all-gather over the TP group,
    // after the receive; --no-scatter-gather-tensors-in-pipeline turns it off; skipped under
    // --sequence-parallel, whose boundary is already split).
    p.pipeline_scatter_gather = true;
    // Its own code has no ZeRO-2/3 (not offered, so never searched); a run that states ZeRO-3 ran
    // DeepSpeed's, integrated into Megatron (Narayanan et al. 2021, Table 2), of the era: v0.3.12-
    // v0.5.4, whose every fetch gathered one tensor at a time and blocked (partition_parameters.py
    // _allgather_param: torch.cuda.synchronize(), a list all_gather; DeepSpeed #1188, v0.5.5: "the
    // async version is not async at all, because each all_gather calls torch.cuda.synchronize()").
    // Limits: that version's defaults (runtime/zero/constants.py).
    p.zero3_submodule_limits = Zero3SubmoduleLimits{.max_live_parameters = 1'000'000'000,
                                                    .prefetch_bucket_size = 50'000'000,
                                                    .max_reuse_distance = 1'000'000'000,
                                                    .param_persistence_threshold = 100'000,
                                                    .reduce_bucket_size = 500'000'000,
                                                    .per_tensor_blocking = true};
    t.push_back(p);
  }
  {
    // Megatron-Core (megatron/core, 2023-), also NeMo 2 and Megatron-Bridge, which build on it.
    FrameworkProfile p;
    p.name = "megatron-core";
    // TE DotProductAttention: cuDNN fused attention on Hopper and later, flash attention otherwise
    // (--attention-backend auto); TE LayerNormLinear fuses the norm into the GEMM's input; bias_swiglu
    // fusion (--swiglu with fused bias-activation); --cross-entropy-loss-fusion.
    p.attention = AttentionImpl::cudnn;
    p.fused_norm = p.fused_activation = p.fused_cross_entropy = true;
    // transformer/attention.py SelfAttention.linear_qkv and mlp.py MLP.linear_fc1 (2 x ffn when
    // gated_linear_unit): one GEMM each for q, k, v and for gate and up.
    p.fused_projections = true;
    // The tuned setup of the Megatron-LM README and NeMo recipes: --tp-comm-overlap (TE userbuffers),
    // --overlap-grad-reduce and --overlap-param-gather with --use-distributed-optimizer, and
    // overlap_p2p_comm (default on for interleaved schedules, core/model_parallel_config.py).
    p.tp_comm_overlap = true;
    p.overlap_grad_reduce = p.overlap_param_gather = true;
    p.p2p_overlap = true;
    p.offers_pipeline = p.offers_interleaved = true;
    p.offers_zero[1] = true;
    p.offers_zero[3] = true;  // --use-megatron-fsdp / --use-torch-fsdp2
    // transformer_block.py _checkpointed_forward, recompute_method "block": the first
    // recompute_num_layers layers of each (virtual) stage are checkpointed, the rest are not (the
    // Megatron-Bridge perf recipes set it, e.g. llama/h100/llama3.py: full, block, 5 layers).
    // The 2021-23 megatron-lm profile does not offer it: its --checkpoint-num-layers chunked every
    // layer (block arrived with selective recompute, Korthikanti et al. 2022).
    p.offers_partial_recompute = true;
    // --recompute-granularity selective with --recompute-modules layernorm moe_act mla_up_proj, what
    // `--emit megatron` writes and the MoE perf recipes set (Megatron-Bridge gpt_oss: layernorm moe_act;
    // deepseek: mla_up_proj): the MoE pre-MLP norm, the experts' activation and MLA's up-projections
    // are recomputed; TE's fused dense norms and a dense MLP's activation are kept
    // (transformer_config.py recompute_modules; transformer_layer.py; multi_latent_attention.py). Its
    // default module, core_attn, would redo fused attention's forward to save nothing it does not
    // already keep, so mgt does not price or write it.
    p.selective_recompute = SelectiveRecompute::megatron_modules;
    // --moe-token-dispatcher-type alltoall (the MoE perf recipes up to container 26.04), dropless:
    // MoEAlltoAllTokenDispatcher.preprocess sets cuda_sync_point = "before_ep_alltoall" (ep > 1 or
    // several local experts; "before_finish" otherwise) and token_permutation calls
    // torch.cuda.current_stream().synchronize() there, because the all-to-all's input / output
    // splits and the grouped GEMM's m_splits are host lists (megatron/core/transformer/moe/
    // token_dispatcher.py). The backward reuses those host lists: no second sync.
    p.moe_dispatch_host_sync = true;
    // An expert-parallel group that leaves the NVLink domain runs the flex dispatcher
    // (--moe-token-dispatcher-type flex, --moe-flex-dispatcher-backend deepep | hybridep): DeepEP's
    // internode kernels and HybridEP send each token over RDMA once per destination node and forward
    // it over NVLink there (DeepEP README, "normal kernels ... forwarding data from NVLink domain to
    // RDMA domain"). Megatron-Bridge's perf recipes set it for every cross-node EP layout (e.g.
    // perf_recipes/qwen/h100/qwen3_moe.py: EP 16 on two DGX-H100, hybridep; deepseek/b200: EP 32,
    // deepep); inside one domain the flat all-to-all and it cost the same here.
    p.moe_hierarchical_dispatch = true;
    // GPT-OSS experts (biases, clamped quick-GEGLU with linear offset) outside the fused grouped MLP:
    // TEGroupedMLP runs fc1 / fc2 with skip_bias_add and adds the biases in _apply_bias, one `t + b`
    // (fc2: `t + b * probs`) per local expert over torch.split, then torch.cat
    // (megatron/core/transformer/moe/experts.py); weighted_bias_quick_geglu_impl clamps the two halves
    // of fc1's output and torch.cat's them back before its fused kernel
    // (megatron/core/fusions/fused_bias_geglu.py). Megatron-Bridge's GPT-OSS recipes take the fused
    // path (cutedsl_fused_grouped_mlp, TE's CuTe-DSL grouped GEMM, block-scaled fp8 / fp4 only) in
    // MXFP8 and the eager one in BF16 (scripts/performance/configs/gpt_oss/*_workload_base_configs.py).
    p.eager_expert_epilogue = true;
    // Its linears are Transformer Engine modules (TELayerNormColumnParallelLinear, TERowParallelLinear,
    // TEGroupedLinear). Under fp8 / MXFP8 / NVFP4, TE's _Linear.forward quantises the input and, when
    // backward needs it, saves that quantised tensor with only the layout wgrad reads
    // (update_usage(rowwise_usage=False, columnwise_usage=True); rowwise only where sequence parallel
    // re-gathers it) instead of the bf16 input (transformer_engine/pytorch/module/linear.py,
    // layernorm_linear.py, grouped_linear.py; save_original_input off by default).
    p.linears_save_quantized_input = true;
    t.push_back(p);
  }
  {
    // Megatron-DeepSpeed (the BigScience and Microsoft forks of 2021-era Megatron-LM on DeepSpeed).
    FrameworkProfile p;
    p.name = "megatron-deepspeed";
    // The Megatron-LM 2021 model code: FusedScaleMaskSoftmax, MixedFusedLayerNorm, bias-gelu fusion,
    // the fused query_key_value projection.
    p.attention = AttentionImpl::eager;
    p.fused_norm = p.fused_activation = p.fused_projections = true;
    // DeepSpeed's PipelineEngine reduces gradients once per step after the last backward
    // (_exec_reduce_grads) and its ZeRO-1 / BF16_Optimizer all-gathers the updated bf16 weights
    // after the step; overlap_comm defaults to false (deepspeed/runtime/zero/config.py).
    p.overlap_grad_reduce = false;
    p.overlap_param_gather = false;
    // deepspeed/runtime/pipe/schedule.py TrainSchedule: 1F1B only; ZeRO-2/3 are not supported with
    // pipeline parallelism (engine asserts), so the offered stages are 0 and 1.
    p.offers_pipeline = true;
    p.offers_zero[1] = true;
    t.push_back(p);
  }
  {
    // DeepSpeed with Hugging Face models (ZeRO 0-3, no tensor-parallel model code of its own).
    FrameworkProfile p;
    p.name = "deepspeed";
    // transformers' sdpa / flash_attention_2 implementations (FA2 kernels); eager ATen norms and
    // activations.
    p.attention = AttentionImpl::fa2;
    // zero_optimization.overlap_comm: default false for stages 1-2 (deepspeed/runtime/zero/config.py).
    p.overlap_grad_reduce = false;
    p.overlap_param_gather = false;
    p.offers_pipeline = true;  // PipelineModule, TrainSchedule (1F1B)
    p.offers_zero[1] = p.offers_zero[2] = p.offers_zero[3] = true;
    // ZeRO-3 fetches each submodule's own parameters (a Hugging Face Linear or Embedding holds one
    // tensor) and prefetches along the recorded trace (runtime/zero/partitioned_param_coordinator.py);
    // the limits are DeepSpeedZeroConfig's defaults (runtime/zero/config.py: max_live_parameters 1e9,
    // prefetch_bucket_size 5e7, param_persistence_threshold 1e5, reduce_bucket_size 5e8) except
    // max_reuse_distance, 1e9 by default, which keeps up to that many elements gathered for reuse: 0
    // releases every parameter after its use, at the cost of gathering the last submodules again at
    // the forward/backward turn (config.py: "Smaller values use less memory, but perform more
    // communication"); full recompute gathers them again there anyway.
    p.zero3_submodule_limits = Zero3SubmoduleLimits{.max_live_parameters = 1'000'000'000,
                                                    .prefetch_bucket_size = 50'000'000,
                                                    .max_reuse_distance = 0,
                                                    .param_persistence_threshold = 100'000,
                                                    .reduce_bucket_size = 500'000'000};
    t.push_back(p);
  }
  {
    // PyTorch FSDP (FullyShardedDataParallel, Zhao et al. 2023), as llm-foundry / Composer,
    // Accelerate, axolotl and metaseq drive it.
    FrameworkProfile p;
    p.name = "pytorch-fsdp";
    // F.scaled_dot_product_attention dispatches to its flash backend, FlashAttention-2 since torch 2.2
    // (llm-foundry attn_impl: flash); eager ATen norms and activations under autocast.
    p.attention = AttentionImpl::fa2;
    // BackwardPrefetch.BACKWARD_PRE and the post-backward reduce-scatter hooks overlap communication
    // with compute (torch.distributed.fsdp docs); DDP buckets (NO_SHARD) likewise.
    // ShardingStrategy NO_SHARD (0), SHARD_GRAD_OP (2), FULL_SHARD / HYBRID_SHARD (3); no pipeline.
    p.offers_zero[2] = p.offers_zero[3] = true;
    t.push_back(p);
  }
  {
    // torchtitan (FSDP2 fully_shard, DTensor TP, torch.distributed.pipelining).
    FrameworkProfile p;
    p.name = "torchtitan";
    p.attention = AttentionImpl::fa2;  // SDPA flash backend (models/llama attention)
    // FSDP2 prefetches the next all-gather and reduce-scatters under backward; pipelining offers
    // ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B, ScheduleLoopedBFS, ScheduleInterleavedZeroBubble.
    p.offers_pipeline = p.offers_interleaved = true;
    // FSDP2 reshard_after_forward=False is ZeRO-2; True is ZeRO-3; DDP (data_parallel_replicate) is 0.
    p.offers_zero[2] = p.offers_zero[3] = true;
    // Under a pipeline it is ZeRO-1: apply_fsdp's default policy is reshard_after_forward = not
    // pp_enabled ("to avoid per-microbatch all-gathers", models/llama3/infra/parallelize.py), and
    // torch.distributed.pipelining's stage backward sets reshard_after_backward and
    // requires_gradient_sync to False for every micro-batch but the last (stage.py
    // backward_maybe_with_nosync): one all-gather and one reduce-scatter per step, the parameters and
    // the unsharded fp32 gradients held in between.
    p.fsdp_gathers_once_under_pipeline = true;
    // activation_checkpoint.mode "selective", selective_ac_option "op" (its selective recompute):
    // _apply_ac_to_transformer_block's policy saves the ops of _save_list (aten.mm, the SDPA flash and
    // efficient kernels, reduce_scatter, max) "except every second mm", counting mms per block, and
    // recomputes everything else (models/llama3/parallelize_llama.py, 2024-2025;
    // distributed/activation_checkpoint.py since). A float8 linear's mm reaches the policy as aten.mm
    // on torchao's float8 tensor subclass (hence max, its amax, in the list); _grouped_mm is not in it.
    p.selective_recompute = SelectiveRecompute::every_second_matmul;
    t.push_back(p);
  }
  {
    // nanotron (Hugging Face): README lists DP+TP+PP, AFAB and 1F1B schedules, ZeRO-1; interleaved
    // 1F1B and ZeRO-3 on its roadmap.
    FrameworkProfile p;
    p.name = "nanotron";
    // flash_attn's flash_attn_varlen_func (FA2) and its fused RMSNorm (TritonRMSNorm); eager activation;
    // models/llama.py CausalSelfAttention.qkv_proj and MLP.gate_up_proj (one column-parallel linear each).
    p.attention = AttentionImpl::fa2;
    p.fused_norm = p.fused_projections = true;
    // DDP-style gradient buckets with hooks under backward; ZeRO-1 all-gathers the updated
    // parameters after the optimizer step (optim/zero.py), not under the next forward.
    p.overlap_param_gather = false;
    p.offers_pipeline = true;
    // models/base.py build_model "Balance compute across PP blocks": layers are cut where the running
    // get_block_compute_costs crosses each rank's share, the LM head weighing vocab x hidden.
    p.pipeline_balanced_by_compute = true;
    p.offers_zero[1] = true;
    t.push_back(p);
  }
  return t;
}

const std::vector<FrameworkProfile>& table() {
  static const std::vector<FrameworkProfile> t = profile_table();
  return t;
}

struct Alias {
  const char* name;
  const char* profile;
  std::initializer_list<const char*> features = {};  ///< what its publication says it adds (apply_feature)
};
// Frameworks that run another profile's code paths, or publish the same techniques.
const Alias kAliases[] = {
    // NeMo 2 trains through megatron.core (MegatronStrategy). The performance configurations behind
    // NeMo's and Megatron-Bridge's published tables reduce gradients in bf16: NeMo 2 recipes'
    // performance_mode and scripts/performance set plugins.grad_reduce_in_fp32 = False, NeMo 1's
    // launcher examples +training.model.optim.grad_sync_dtype=bf16, Megatron-Bridge's
    // perf_recipes/_common.py _benchmark_common and _perf_precision grad_reduce_in_fp32 = False.
    {"nemo", "megatron-core", {"bf16-grad-reduce"}},
    {"megatron-bridge", "megatron-core", {"bf16-grad-reduce"}},
    {"megatron", "megatron-core"},      // --emit megatron writes Megatron-Core flags
    {"llm-foundry", "pytorch-fsdp"},    // Composer's FSDP integration
    {"accelerate", "pytorch-fsdp"},     // FullyShardedDataParallelPlugin
    {"axolotl", "pytorch-fsdp"},        // through Accelerate
    {"metaseq", "pytorch-fsdp"},        // fairscale FSDP, the PyTorch FSDP prototype (Zhao et al. 2023 §1)
    {"fsdp", "pytorch-fsdp"},
    {"fairscale", "pytorch-fsdp"},      // FullyShardedDataParallel's origin, the same sharding
    {"composer", "pytorch-fsdp"},       // MosaicML Composer, what llm-foundry trains with
    {"hf-accelerate", "pytorch-fsdp"},
    {"litgpt", "pytorch-fsdp"},         // Lightning Fabric's FSDPStrategy
    {"lit-gpt", "pytorch-fsdp"},
    // OLMo (Groeneveld et al. 2024 §3.1): "the ZeRO optimizer strategy via PyTorch's FSDP framework".
    {"olmo", "pytorch-fsdp"},
    // GPT-NeoX (its README): Megatron-LM's model code on DeepSpeed's ZeRO and pipeline engine.
    {"gpt-neox", "megatron-deepspeed"},
    {"mcore", "megatron-core"},
    {"pai-megatron-patch", "megatron-core"},  // Alibaba's wrapper around megatron.core
    // MegaScale (Jiang et al., NSDI'24) is built on Megatron-LM; §3.2 overlaps TP/SP all-gather and
    // reduce-scatter with the adjacent GEMMs, prefetches the ZeRO all-gather under forward and the
    // reduce-scatter under backward, and decouples pipeline sends from compute; §3.3 uses
    // FlashAttention-2 and fused LayerNorm / GeLU (the megatron-core profile's TE kernels).
    {"megascale", "megatron-core", {"tp-comm-overlap", "overlap-grad-reduce", "overlap-param-gather", "overlap-p2p"}},
    // Meta's Llama 3 training (Dubey et al. 2024 §3.3.2): 4D parallelism with FSDP that does not
    // reshard after forward, all-gather context parallelism and interleaved 1F1B with asynchronous
    // point-to-point sends; torchtitan is the published PyTorch-native implementation of the same
    // (FSDP2 under torch.distributed.pipelining keeps parameters gathered, interleaved schedules).
    {"meta-internal", "torchtitan", {"overlap-p2p"}},
};

// A framework name as sources spell it, compared without case, surrounding blanks, or the choice of
// blank, underscore or hyphen between words ("PyTorch FSDP", "megatron_core").
std::string normalized_name(const std::string& raw) {
  std::string n;
  for (const char c : lower(raw)) n += (c == ' ' || c == '_') ? '-' : c;
  const size_t first = n.find_first_not_of('-'), last = n.find_last_not_of('-');
  return first == std::string::npos ? std::string() : n.substr(first, last - first + 1);
}

const Alias* alias_of(const std::string& raw) {
  const std::string n = normalized_name(raw);
  for (const auto& a : kAliases)
    if (n == a.name) return &a;
  return nullptr;
}

std::string canonical(const std::string& raw) {
  const Alias* a = alias_of(raw);
  return a ? a->profile : normalized_name(raw);
}

// Returns true when `word` stands in `text` as a word of its own: not inside a longer name
// ("deepspeed" in "megatron-deepspeed" does not count), a version number may follow ("fsdp2").
bool has_word(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]));
    const size_t end = at + word.size();
    const bool ends = end == text.size() || !std::isalpha(static_cast<unsigned char>(text[end]));
    if (starts && ends) return true;
  }
  return false;
}

// A name that is a phrase ("Megatron-LM (Megatron-Core)", "PyTorch FSDP2", "DeepSpeed ZeRO-3",
// "torchtitan + torch.compile"): the known name it contains, the product before the library it is
// built on (NeMo and Megatron-Bridge run megatron.core; GPT-NeoX Megatron-DeepSpeed), Megatron-Core
// before Megatron-LM (the repository that ships it), and the features it names. nullopt when none.
std::optional<std::pair<std::string, std::vector<std::string>>> name_in_phrase(const std::string& raw) {
  static const char* const kByPriority[] = {
      "megatron-bridge", "nemo", "megascale", "meta-internal", "gpt-neox", "megatron-deepspeed", "pai-megatron-patch",
      "megatron-core", "mcore", "megatron-lm", "torchtitan", "nanotron", "llm-foundry", "composer", "axolotl", "accelerate",
      "litgpt", "lit-gpt", "olmo", "metaseq", "fairscale", "deepspeed", "pytorch-fsdp", "fsdp", "megatron"};
  static const char* const kFeatures[] = {"torch.compile", "float8", "fsdp2", "cuda-graphs", "transformer-engine",
                                          "tp-comm-overlap", "ep-a2a-overlap", "fa3"};
  const std::string n = normalized_name(raw);
  for (const char* name : kByPriority) {
    if (!has_word(n, name)) continue;
    std::vector<std::string> features;
    for (const char* f : kFeatures)
      if (has_word(n, f)) features.push_back(f);
    return std::pair{std::string(name), features};
  }
  return std::nullopt;
}

// A stated feature: what it changes. Returns false when the feature is not one we know.
bool apply_feature(const std::string& raw, FrameworkProfile& p) {
  const std::string f = lower(raw);
  if (f == "transformer-engine" || f == "te") {
    // TE: fused norm + GEMM, fused activations, cuDNN attention (fused_attn) on Hopper+.
    p.attention = AttentionImpl::cudnn;
    p.fused_norm = p.fused_activation = true;
  } else if (f == "tp-comm-overlap" || f == "async-tp") {
    p.tp_comm_overlap = true;
  } else if (f == "overlap-grad-reduce") {
    p.overlap_grad_reduce = true;
  } else if (f == "overlap-param-gather") {
    p.overlap_param_gather = true;
    p.offers_zero[1] = true;  // Megatron: needs --use-distributed-optimizer
  } else if (f == "bf16-grad-reduce" || f == "grad-reduce-in-bf16") {
    p.gradient_bytes = 2;
  } else if (f == "ep-a2a-overlap" || f == "moe-a2a-overlap" || f == "overlap-moe-expert-parallel-comm") {
    // Megatron-Core's merged forward-backward passes (ep_overlap.hpp); no other framework has it.
    if (p.name != "megatron-core") return false;
    p.ep_a2a_overlap = true;
  } else if (f == "overlap-p2p" || f == "overlap-p2p-comm") {
    p.p2p_overlap = true;
  } else if (f == "torch.compile" || f == "compile") {
    // Inductor fuses the elementwise chains (norms, activations, CE) into Triton kernels.
    p.dispatch = HostDispatch::torch_compile;
    p.fused_norm = p.fused_activation = p.fused_cross_entropy = true;
  } else if (f == "cuda-graphs" || f == "cuda-graph") {
    p.dispatch = HostDispatch::cuda_graphs;
  } else if (f == "hybridep" || f == "moe-hybridep") {
    // The flex dispatcher's HybridEP backend sizes its buffers on the device and runs inside a
    // full-iteration CUDA graph (recipes from 26.06): no host sync. DeepEP's normal kernels still
    // wait on the host for the received counts, so "deepep" keeps the sync. Both dispatch
    // hierarchically across domains (moe_hierarchical_dispatch).
    p.moe_dispatch_host_sync = false;
    p.moe_hierarchical_dispatch = true;
  } else if (f == "deepep") {
    p.moe_hierarchical_dispatch = true;
  } else if (f == "alltoall-dispatcher") {
    p.moe_dispatch_host_sync = true;
    p.moe_hierarchical_dispatch = false;
  } else if (f == "flash-attention" || f == "flash-attn" || f == "fa2") {
    p.attention = AttentionImpl::fa2;
  } else if (f == "fa3" || f == "flash-attention-3") {
    p.attention = AttentionImpl::fa3;
  } else if (f == "cudnn-attention") {
    p.attention = AttentionImpl::cudnn;
  } else if (f == "zero-1" || f == "distributed-optimizer") {
    p.offers_zero[1] = true;
  } else if (f == "zero-2") {
    p.offers_zero[2] = true;
  } else if (f == "zero-3" || f == "fsdp2" || f == "pytorch-fsdp") {
    p.offers_zero[3] = true;
  } else if (f == "float8" || f == "fp8") {
    // Precision is a row / CLI setting (TrainingSettings::fp8_linears), not a profile property.
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> framework_profile_names() {
  std::vector<std::string> out;
  for (const auto& p : table()) out.push_back(p.name);
  return out;
}

const FrameworkProfile& default_framework_profile() {
  static const FrameworkProfile p = *std::find_if(table().begin(), table().end(),
                                                  [](const FrameworkProfile& q) { return q.name == "pytorch-fsdp"; });
  return p;
}

FrameworkSelection select_framework(const std::string& name, const std::vector<std::string>& features) {
  FrameworkSelection out;
  const std::string c = canonical(name);
  const auto it = std::find_if(table().begin(), table().end(), [&c](const FrameworkProfile& p) { return p.name == c; });
  if (it == table().end()) {
    if (const auto found = name_in_phrase(name)) {
      std::vector<std::string> all = found->second;
      all.insert(all.end(), features.begin(), features.end());
      out = select_framework(found->first, all);
      out.notes.insert(out.notes.begin(), "framework \"" + name + "\" read as " + found->first +
                                              (found->second.empty() ? "" : " with the features it names"));
      return out;
    }
    out.known = false;
    out.profile = default_framework_profile();
    out.notes.push_back("framework \"" + name + "\" has no profile: the default " + out.profile.name + " is used");
  } else {
    out.profile = *it;
    if (c != normalized_name(name)) out.notes.push_back("framework " + name + ": the " + c + " profile");
    if (const Alias* a = alias_of(name); a && a->features.size() > 0) {
      std::string implied;
      for (const char* f : a->features) {
        apply_feature(f, out.profile);
        implied += std::string(implied.empty() ? "" : ", ") + f;
      }
      out.notes.push_back("framework " + name + " implies " + implied + " (what its publication says it runs)");
    }
  }
  for (const auto& f : features)
    if (!apply_feature(f, out.profile)) out.notes.push_back("framework feature \"" + f + "\" changes nothing in the model");
  return out;
}

FrameworkProfile framework_profile(const std::string& name) { return select_framework(name).profile; }

std::optional<std::string> apply_framework_version(FrameworkProfile& profile, const std::string& version) {
  if (profile.selective_recompute_since_year == 0) return std::nullopt;
  // The earliest year (2015-2099) written in the version: a commit date, a paper's year.
  // A year stands alone: "(2020-09-11)", "v2.4 (2021)"; not inside a number or a commit hash.
  static const std::regex year_re(R"((?:^|[^0-9A-Za-z])(20[1-9][0-9])(?![0-9A-Za-z]))");
  int earliest = 0;
  for (std::sregex_iterator it(version.begin(), version.end(), year_re), end; it != end; ++it) {
    const int year = std::stoi((*it)[1].str());
    if (year >= 2015 && (earliest == 0 || year < earliest)) earliest = year;
  }
  if (earliest == 0 || earliest >= profile.selective_recompute_since_year) return std::nullopt;
  profile.offers_selective_recompute = false;
  return "framework version \"" + version + "\" (" + std::to_string(earliest) + ") predates " + profile.name +
         "'s selective recompute (" + std::to_string(profile.selective_recompute_since_year) + "): none or full only";
}

void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(message).second) std::cerr << "mgt-plan: " << message << "\n";
}

namespace {

// The kernel model's family for a profile's attention on `arch`, falling back to a family that runs
// there when the kernel rows have none for the requested one (FA3 and cuDNN on Ampere run at FA2's
// rate; Blackwell has cuDNN and FA4 rows only); nullopt when none of them runs there (Ada). It sets
// both the peak fraction and the attention curve's MMA rate.
std::optional<AttentionKernel> measured_attention_kernel(AttentionImpl impl, ir::GpuArch arch) {
  AttentionKernel wanted = AttentionKernel::flash_attention_2;
  switch (impl) {
    case AttentionImpl::fa3: wanted = AttentionKernel::flash_attention_3; break;
    case AttentionImpl::cudnn: wanted = AttentionKernel::cudnn; break;
    case AttentionImpl::triton: wanted = AttentionKernel::triton; break;
    default: break;
  }
  for (AttentionKernel k : {wanted, AttentionKernel::flash_attention_2, AttentionKernel::cudnn, AttentionKernel::flash_attention_4})
    if (attention_peak_fraction(k, arch, false, ir::DType::bf16) > 0) return k;
  return std::nullopt;
}

double attention_fraction(AttentionImpl impl, ir::GpuArch arch, bool backward) {
  if (const auto k = measured_attention_kernel(impl, arch)) return attention_peak_fraction(*k, arch, backward, ir::DType::bf16);
  return 0.3;  // no family measured on this generation (Ada): a mid-range flash-attention rate
}

// Bytes an unfused implementation moves per byte a fused kernel moves (counted from the ATen kernels
// each launches under bf16 autocast; docs/cost-model.md §9):
//   norm: autocast runs layer_norm / the RMSNorm chain in fp32, so the output is written (and the
//     next op reads it) at 4 bytes: 6 bytes per element forward instead of 4.
//   gated activation: silu(a) and the product are two kernels: a, silu(a), b read, silu(a), out
//     written: 5 tensor passes instead of 3.
//   cross entropy: the estimator's loss (10 bytes per logit each way) already is the eager fp32
//     path; a fused kernel reads the bf16 logits once and writes the bf16 gradient once: 4 of 10.
constexpr double kEagerNormTraffic = 1.5;
constexpr double kEagerActivationTraffic = 5.0 / 3.0;
constexpr double kFusedLossTraffic = 0.4;

// Host seconds per kernel launch, per dispatch (docs/cost-model.md §9, "Host dispatch"; the rows are
// in shared/validation/kernels/memory_launch.json):
//   eager: the Hugging Face Llama-3.2-1B rows on one B200 (batch 1 x 512, bf16, SDPA;
//     mleng_b200_torchcompile_llama32_1b_b1_s512) run 4-6x slower eager than replayed from CUDA
//     graphs, so the eager times are the host's. The inference forward, 8.1 ms over the 618 launches
//     host_dispatch.hpp counts for it (16 layers of 38, the embedding, the final norm, the LM head),
//     is 13.1 us per launch; forward + backward with gradient checkpointing, 48.8 ms over 2,339
//     launches (the forward with the loss, the recomputed layers, the backward), is 20.9 us: an
//     autograd step costs the host more than an inference call. One constant for both: their
//     geometric mean, 16.5 us, each row then within 26 % (tests/cost_model/host_dispatch_test.cpp).
//     Bounds: 3 us (a bare cuLaunchKernel, tritonbench PR #1017) to 50 us.
//   torch.compile: Inductor's per-kernel launcher (CachingAutotuner.run) costs 6.8-9.1 us of host
//     time on GB200 (tritonbench1017_gb200_nop_inductor_per_kernel), 8 us; its kernels are fused.
//   CUDA graphs: the graph replays its kernels without the host.
constexpr double kEagerHostLaunchS = 16.5e-6;
constexpr double kCompiledHostLaunchS = 8.0e-6;

double host_launch_s(HostDispatch dispatch) {
  switch (dispatch) {
    case HostDispatch::eager: return kEagerHostLaunchS;
    case HostDispatch::torch_compile: return kCompiledHostLaunchS;
    case HostDispatch::cuda_graphs: return 0.0;
  }
  return kEagerHostLaunchS;
}

// What each op launches: the fused kernel where the profile fuses, the ATen chain where it does not.
// Rotary embeddings go with the norms: every profile that fuses its norms also fuses rope (TE fused
// rope, flash-attn's rotary kernel in nanotron, Inductor) and none fuses one without the other.
KernelLaunchCounts launch_counts(const FrameworkProfile& profile) {
  KernelLaunchCounts c;
  const KernelLaunchCounts eager = eager_launch_counts();
  if (!profile.fused_norm) {
    c.rms_norm_fwd = eager.rms_norm_fwd, c.rms_norm_bwd = eager.rms_norm_bwd;
    c.layer_norm_fwd = eager.layer_norm_fwd, c.layer_norm_bwd = eager.layer_norm_bwd;
    c.rope_fwd = eager.rope_fwd, c.rope_bwd = eager.rope_bwd;
  }
  if (!profile.fused_activation) c.gated_activation_fwd = eager.gated_activation_fwd, c.gated_activation_bwd = eager.gated_activation_bwd;
  if (!profile.fused_cross_entropy) c.loss_fwd = eager.loss_fwd, c.loss_bwd = eager.loss_bwd;
  return c;
}

}  // namespace

void apply_plan_semantics(const FrameworkProfile& profile, ir::TrainingSettings& settings) {
  settings.pipeline_balanced_by_compute = profile.pipeline_balanced_by_compute;
  settings.fsdp_gathers_once_under_pipeline = profile.fsdp_gathers_once_under_pipeline;
}

CostParams cost_params_for(const ir::GpuSpec& gpu, const FrameworkProfile& profile) {
  if (gpu.arch == ir::GpuArch::cpu) return cpu_cost_params();
  const KernelModelParams k = kernel_model_params(gpu);
  CostParams p;
  const bool hopper_or_later = gpu.arch == ir::GpuArch::hopper || gpu.arch == ir::GpuArch::blackwell;
  const double in_step = hopper_or_later ? profile.in_step_kernel_fraction_hopper : profile.in_step_kernel_fraction;
  p.gemm_max_efficiency = k.gemm_peak_fraction * in_step;
  // Transformer Engine fp8 linears also cast, transpose and track amax per GEMM; the kernel model's
  // fp8 fraction is for the GEMM alone, so fp8 keeps the bf16 share of it.
  p.fp8_gemm_max_efficiency = k.gemm_fp8_peak_fraction * in_step;
  p.attention_materialised = profile.attention == AttentionImpl::eager;
  const double attention_in_step = profile.attention_in_step_fraction;
  p.attention_fwd_efficiency = attention_fraction(profile.attention, gpu.arch, false) * attention_in_step;
  p.attention_bwd_efficiency = attention_fraction(profile.attention, gpu.arch, true) * attention_in_step;
  const auto kernel = measured_attention_kernel(profile.attention, gpu.arch);
  p.attention_curve = kernel ? k.attention_curve.with_mma_rate(attention_mma_rate_fraction(*kernel, gpu.arch)) : k.attention_curve;
  p.hbm_efficiency = k.hbm_copy_fraction;
  p.norm_traffic_factor = profile.fused_norm ? 1.0 : kEagerNormTraffic;
  p.activation_traffic_factor = profile.fused_activation ? 1.0 : kEagerActivationTraffic;
  p.loss_traffic_factor = profile.fused_cross_entropy ? kFusedLossTraffic : 1.0;
  p.nvlink_efficiency = k.nvlink_fraction;
  p.network_efficiency = k.network_fraction;
  const double hidden = profile.comm_hidden_fraction;
  p.tp_comm_hidden_fraction = profile.tp_comm_overlap ? hidden : 0.0;
  p.dp_grad_reduce_hidden_fraction = profile.overlap_grad_reduce ? hidden : 0.0;
  p.dp_param_gather_hidden_fraction = profile.overlap_param_gather ? hidden : 0.0;
  p.p2p_hidden_fraction = profile.p2p_overlap ? hidden : 0.0;
  p.ep_comm_hidden_fraction = profile.ep_a2a_overlap ? hidden : 0.0;
  p.pipeline_scatter_gather = profile.pipeline_scatter_gather;
  p.per_microbatch_overhead_s = profile.host_overhead_per_microbatch_s;
  p.moe_dispatch_host_sync = profile.moe_dispatch_host_sync;
  p.moe_hierarchical_dispatch = profile.moe_hierarchical_dispatch;
  p.eager_expert_epilogue = profile.eager_expert_epilogue;
  p.linears_save_quantized_input = profile.linears_save_quantized_input;
  p.selective_recompute = profile.selective_recompute;
  p.gradient_bytes = profile.gradient_bytes;
  p.host_launch_s = host_launch_s(profile.dispatch);
  p.launches = launch_counts(profile);
  p.fused_projections = profile.fused_projections;
  p.cuda_context_bytes = profile.context_bytes;
  p.nccl_buffer_bytes = profile.nccl_buffer_bytes;
  p.allocator_fragmentation = profile.allocator_fragmentation;
  p.zero3_submodule_limits = profile.zero3_submodule_limits;
  return p;
}

}  // namespace mgt::cost
