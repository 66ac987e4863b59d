// The walk over one block's ops that block_cost and op_costs share (layer_cost.cpp), and the
// selective-recompute policies that decide, op by op, what a framework's selective recompute redoes
// (selective_policy.cpp). Internal to the cost model.
#pragma once

#include "mgt/cost_model/compute.hpp"
#include "mgt/cost_model/cost_params.hpp"
#include "mgt/cost_model/expert_epilogue.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/task_cost.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mgt::cost::layer_walk {

// Everything block_cost needs while walking the ops of one block.
struct Walk {
  const ir::Block& block;
  const ShardContext& ctx;
  const ir::ClusterSpec& cluster;
  const CostParams& params;
  BlockCost cost;
  std::set<std::string> saved;            // tensors kept for backward
  std::set<std::string> recomputed;       // outputs selective recompute drops
  std::set<std::string> gathered_inputs;  // SP all-gathers already issued (q, k, v share one)
  std::set<std::string> produced;
  std::set<std::string> expert_weights;   // parameters sharded over ep (routed experts)
  std::set<std::string> nf4_weights;      // QLoRA: the linear weights bitsandbytes stores in NF4
  std::set<std::string> quantized;        // activations already quantised for a low-precision GEMM (q, k, v share x)
  // Inputs of low-precision linears kept quantised for backward (CostParams::linears_save_quantized_input),
  // with their bytes per element; a tensor another op also saves in bf16 (attention's output) is kept twice.
  std::map<std::string, double> saved_quantized;
  // SelectiveRecompute::every_second_matmul: bf16 weight matmuls seen so far, and the outputs kept.
  int64_t plain_matmuls = 0;
  std::set<std::string> op_sac_kept;
  int64_t extra_saved_bytes = 0;          // saved state that is not a declared tensor (lse)
  int64_t selective_dropped_bytes = 0;    // saved unless selective recompute drops it: eager attention's
                                          // probabilities, the eager clamp's copy of fc1's output
  double bwd_weight_s = 0;                // the weight-gradient part of cost.bwd_compute_s
  double fwd_flops = 0;                   // local forward FLOPs so far
  // SelectiveRecompute::megatron_modules: normed MLA latents, and what their up-projections produce.
  std::set<std::string> latent_normed;
  std::set<std::string> mla_up;

  const ir::TensorDecl& tensor(const std::string& name) const {
    // ir::verify guarantees names resolve; the graph is verified on load.
    return *ir::find_tensor(block, name);
  }
  int64_t act_bytes(const ir::TensorDecl& t) const { return local_elements(t, ctx) * ir::dtype_bytes(ctx.dtype); }
  int64_t tp_region_bytes(const ir::TensorDecl& t) const {
    int64_t n = 1;
    for (const auto& d : t.dims) n *= local_dim_size(d, ctx, /*in_tp_region=*/true);
    return n * ir::dtype_bytes(ctx.dtype);
  }
  void tp_collective(std::vector<BlockCollective>& into, CollectiveKind kind, int64_t bytes,
                     std::vector<std::string> tensors, bool before = false, ir::ReduceOp reduce = ir::ReduceOp::sum) {
    if (ctx.tp > 1 && bytes > 0) into.push_back({BlockCollective::Axis::tp, kind, bytes, std::move(tensors), before, reduce});
  }
  void cp_collective(std::vector<BlockCollective>& into, CollectiveKind kind, int64_t bytes,
                     std::vector<std::string> tensors, bool before) {
    if (ctx.cp > 1 && bytes > 0) into.push_back({BlockCollective::Axis::cp, kind, bytes, std::move(tensors), before});
  }
  void ep_collective(std::vector<BlockCollective>& into, CollectiveKind kind, int64_t bytes) {
    if (ctx.ep > 1 && bytes > 0) into.push_back({BlockCollective::Axis::ep, kind, bytes, {}, false, ir::ReduceOp::sum});
  }
  double memory_time(int64_t bytes) const { return memory_bound_time_s(bytes, cluster, params); }
  /// A non-GEMM kernel: `work` / the measured rate of (op, phase) when the cluster's kernel_table
  /// has it (ir::KernelMeasurement defines the work unit per op), else `bytes` at memory bandwidth.
  double kernel_time(const char* op, const char* phase, double work, int64_t bytes) const {
    const double rate = ir::measured_kernel_rate(cluster, op, phase);
    if (rate > 0) return work > 0 ? work / rate + params.kernel_floor_s : 0.0;
    return memory_time(int64_t(std::llround(double(bytes) * traffic_factor(op))));
  }
  /// The framework's bytes per fused-kernel byte for this op (CostParams::*_traffic_factor).
  double traffic_factor(const char* op) const {
    const std::string_view name(op);
    if (name == "norm") return params.norm_traffic_factor;
    if (name == "activation") return params.activation_traffic_factor;
    if (name == "softmax_cross_entropy") return params.loss_traffic_factor;
    return 1.0;
  }
  /// Books a non-GEMM kernel's forward and backward (kernel_time of each phase, over `work`);
  /// returns the forward seconds, which selective recompute repeats for norms and activations.
  /// Whether the framework runs the eager expert epilogue at this precision (expert_epilogue.hpp).
  bool epilogue_runs() const { return eager_expert_epilogue_runs(params.eager_expert_epilogue, ctx.linear_format); }
  /// Books that epilogue's passes when it runs; returns its forward seconds.
  double add_epilogue(EpilogueBytes bytes) {
    if (!epilogue_runs()) return 0.0;
    const double fwd = memory_time(bytes.fwd);
    cost.fwd_compute_s += fwd;
    cost.bwd_compute_s += memory_time(bytes.bwd);
    return fwd;
  }
  double add_kernel(const char* op, double work, int64_t fwd_bytes, int64_t bwd_bytes) {
    const double fwd = kernel_time(op, "fwd", work, fwd_bytes);
    cost.fwd_compute_s += fwd;
    cost.bwd_compute_s += kernel_time(op, "bwd", work, bwd_bytes);
    return fwd;
  }
};

/// Whether a router reads `tensor`, or the logits a projection computes from it.
bool feeds_router(const ir::Block& block, const std::string& tensor);
/// torchtitan's op-level selective AC, applied after `op` was costed (`before`: the totals before it).
void op_sac_policy(Walk& w, const ir::Op& op, const BlockCost& before);
/// Megatron-Core's mla_up_proj module, applied after `op` was costed.
void mla_up_proj_policy(Walk& w, const ir::Op& op, const BlockCost& before);

}  // namespace mgt::cost::layer_walk
