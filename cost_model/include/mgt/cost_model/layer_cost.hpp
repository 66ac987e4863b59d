// Cost of one copy of a Block for one micro-batch on one GPU under a tensor / sequence / context
// sharding: compute time per phase, the TP and CP collectives it issues, the activation bytes it
// saves for backward under each recompute mode, and its parameter counts. Derived from the ops' einsum
// specs and kinds, never from the model's family: see docs/cost-model.md §2 and §4.
#pragma once

#include "mgt/cost_model/collective.hpp"
#include "mgt/cost_model/cost_params.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/ir/schedule.hpp"
#include "mgt/ir/training_settings.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mgt::cost {

/// How one micro-batch is laid out on a GPU. Dims a, k, f, v split over tp (v rounded up, as
/// Megatron pads the vocabulary); s splits over cp, and over cp * tp for tensors outside tensor-
/// parallel regions when sequence_parallel (Korthikanti et al. 2022, §4.2.2).
struct ShardContext {
  int64_t micro_batch = 1;
  int64_t seq_len = 1;
  int64_t tp = 1;
  int64_t cp = 1;
  bool sequence_parallel = false;
  ir::DType dtype = ir::DType::bf16;  ///< activations and compute
  int64_t ep = 1;                     ///< expert parallel: routed-expert weights split over ep ranks
  bool fp8_linears = false;           ///< weight GEMMs in a low-precision format (activations stay in `dtype`)
  ir::LinearFormat linear_format = ir::LinearFormat::none;  ///< that format (fp8 when only fp8_linears is set)
  ir::Task task = ir::Task::pretrain;  ///< lora / qlora: frozen base weights, adapters on lora.targets
  ir::LoraSettings lora{};
  /// Expert tensor parallel: routed-expert weights split their FFN dim over etp ranks instead of tp
  /// (Megatron --expert-tensor-parallel-size); 0 = tp.
  int64_t expert_tp = 0;
  /// Packed documents of this many tokens (ir::TrainingSettings::document_tokens); 0 = none.
  int64_t document_tokens = 0;
};

/// The shard context of one micro-batch under `plan` (its sequence_parallel resolved or derived).
ShardContext shard_context(const ir::Plan& plan, const ir::TrainingSettings& settings);

/// Returns true for dims that tensor parallelism splits (a, k, f, v).
bool is_tp_dim(char name);
/// Whether `tensor` has such a dim (it lies inside a tensor-parallel region).
bool has_tp_dim(const ir::TensorDecl& tensor);

/// Local size of `dim` in a tensor that is (`in_tp_region`) or is not inside a tensor-parallel region.
int64_t local_dim_size(const ir::Dim& dim, const ShardContext& ctx, bool in_tp_region);

/// Local element count of `tensor` under `ctx` (its own region decides how s is split).
/// The most elements one tensor may hold per micro-batch on one GPU (2^44, 32 TiB in bf16): beyond it
/// local_elements throws ir::InputError, so that byte counts and their sums cannot overflow int64.
inline constexpr int64_t kMaxLocalElements = int64_t{1} << 44;
int64_t local_elements(const ir::TensorDecl& tensor, const ShardContext& ctx);

/// One collective a block issues, over the tp or the cp axis.
struct BlockCollective {
  enum class Axis { tp, cp, ep } axis = Axis::tp;
  CollectiveKind kind = CollectiveKind::all_reduce;
  int64_t bytes = 0;  ///< as nccl-tests counts them (collective.hpp)
  /// What it moves, for the runtime (ir::Collective::tensors): activation names of the block,
  /// "grad(<name>)" for their gradients, "loss(...)" for the vocab-parallel loss statistics.
  std::vector<std::string> tensors;
  /// Issued before the op's kernel (the kernel reads what it gathers), else after it (it moves
  /// what the kernel wrote). Backward collectives are placed around the op's bwd_data kernel.
  bool before = false;
  ir::ReduceOp reduce = ir::ReduceOp::sum;
  bool operator==(const BlockCollective&) const = default;
};

struct BlockCost {
  double fwd_compute_s = 0;           ///< all kernels of the forward pass
  double bwd_compute_s = 0;           ///< data and weight gradients
  double selective_recompute_s = 0;   ///< forward time of the ops selective recompute redoes
  /// Of fwd_compute_s + bwd_compute_s: the GPU's wait for an eager host's kernel launches
  /// (host_dispatch.hpp), 0 when the kernels outlast them.
  double host_wait_s = 0;
  double attention_fwd_s = 0;         ///< part of fwd_compute_s spent in attention cores (CP overlap)
  double attention_bwd_s = 0;
  std::vector<BlockCollective> fwd_collectives;
  std::vector<BlockCollective> bwd_collectives;
  int64_t saved_bytes_none = 0;       ///< activations kept for backward, recompute none
  int64_t saved_bytes_selective = 0;  ///< ... recompute selective (norm and activation outputs dropped)
  int64_t saved_bytes_full = 0;       ///< ... recompute full (the block's input only)
  int64_t largest_tensor_bytes = 0;   ///< the biggest activation tensor (backward transients)
  int64_t logits_bytes = 0;           ///< loss working set: logits bf16 + fp32 upcast + fp32 grad
  int64_t param_elements_local = 0;   ///< after tp (and ep for routed experts), before data-parallel sharding
  int64_t param_elements_total = 0;   ///< unsharded
  int64_t expert_param_elements_local = 0;  ///< the routed-expert part of param_elements_local
  int64_t adapter_param_elements_local = 0;  ///< LoRA A and B of the targeted contractions, after tp (not in param_elements_*)
  int64_t nf4_param_elements_local = 0;      ///< QLoRA: the part of param_elements_local stored in NF4
  int64_t largest_param_elements_local = 0;  ///< the biggest single parameter tensor (ZeRO-3 gathers per tensor under DeepSpeed)
  int64_t persistent_param_elements_local = 0;  ///< tensors DeepSpeed ZeRO-3 keeps gathered (CostParams::zero3_submodule_limits)
  int64_t gathered_param_tensors = 0;  ///< the other tensors, each one gather (and one gradient reduce-scatter) under DeepSpeed ZeRO-3
  int64_t boundary_bytes = 0;         ///< the block input one pipeline stage sends the next (b, s, h local)
  double model_flops = 0;             ///< fwd + bwd FLOPs of this copy, whole micro-batch, all GPUs:
                                      ///< 6 * active matmul params * tokens + causal attention
  bool operator==(const BlockCost&) const = default;
};

/// Costs `block` under `ctx`. Comm bytes are per GPU; times exclude communication.
/// The routing of the graph's first MoE layer (its router op's top_k, its expert parameters' 'e'
/// extent); {0, 0} when the model has no routed experts.
TokenRouting token_routing(const ir::Graph& graph);

BlockCost block_cost(const ir::Block& block, const ShardContext& ctx, const ir::ClusterSpec& cluster,
                     const CostParams& params);

/// The share of one op in its block's cost, for the schedule lowering and the simulator: the same
/// numbers block_cost sums, so a simulated schedule and the estimator price kernels identically.
struct OpCost {
  double fwd_s = 0;
  double bwd_data_s = 0;        ///< gradient with respect to the op's activation inputs
  double bwd_weight_s = 0;      ///< gradient with respect to its parameters (0 for weightless ops)
  double selective_recompute_s = 0;
  double fwd_flops = 0;         ///< local FLOPs of the forward kernel(s)
  std::vector<BlockCollective> fwd_collectives;  ///< issued after the op's forward kernel
  std::vector<BlockCollective> bwd_collectives;  ///< issued around its backward
  bool operator==(const OpCost&) const = default;
};

/// Per-op costs of `block` in op order (sums equal block_cost's totals).
std::vector<OpCost> op_costs(const ir::Block& block, const ShardContext& ctx, const ir::ClusterSpec& cluster,
                             const CostParams& params);

}  // namespace mgt::cost
