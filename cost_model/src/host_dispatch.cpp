// Kernel launch counts per op and the host bound of a block (host_dispatch.hpp; docs/cost-model.md §9).
#include "mgt/cost_model/host_dispatch.hpp"

#include <algorithm>

namespace mgt::cost {

KernelLaunchCounts eager_launch_counts() {
  KernelLaunchCounts c;
  c.rms_norm_fwd = 8, c.rms_norm_bwd = 16;
  c.layer_norm_fwd = 2, c.layer_norm_bwd = 2;
  c.rope_fwd = 5, c.rope_bwd = 7;
  c.gated_activation_fwd = 2, c.gated_activation_bwd = 3;
  c.loss_fwd = 3, c.loss_bwd = 3;
  return c;
}

OpLaunches op_launches(const ir::Op& op, const KernelLaunchCounts& counts, const LaunchContext& ctx) {
  switch (op.kind) {
    case ir::OpKind::contraction: {
      OpLaunches l{1, ctx.trainable_weights ? 2 : 1};
      if (op.inputs.size() > 2) l.bwd += 1;  // the bias gradient's reduction over tokens
      if (ctx.low_precision_linears) l.fwd += 1, l.bwd += 1;  // quantise the input, the output gradient
      return l;
    }
    case ir::OpKind::norm:
      return op.norm == ir::NormKind::rms ? OpLaunches{counts.rms_norm_fwd, counts.rms_norm_bwd}
                                          : OpLaunches{counts.layer_norm_fwd, counts.layer_norm_bwd};
    case ir::OpKind::rope: return {counts.rope_fwd, counts.rope_bwd};
    case ir::OpKind::attention_core:
      return ctx.materialised_attention ? OpLaunches{5, 7} : OpLaunches{counts.attention_fwd, counts.attention_bwd};
    case ir::OpKind::activation: {
      const bool gated = op.activation == ir::ActivationKind::silu_glu || op.activation == ir::ActivationKind::gelu_glu;
      return gated ? OpLaunches{counts.gated_activation_fwd, counts.gated_activation_bwd} : OpLaunches{1, 1};
    }
    case ir::OpKind::residual: return {1, 1};
    case ir::OpKind::embedding: return {1, 1};
    case ir::OpKind::router: return {14, 8};
    case ir::OpKind::softmax_cross_entropy: return {counts.loss_fwd, counts.loss_bwd};
    case ir::OpKind::ssm_scan: return {1, 2};
  }
  return {1, 1};
}

std::vector<OpLaunches> block_launches(const ir::Block& block, const KernelLaunchCounts& counts, const LaunchContext& ctx) {
  std::vector<OpLaunches> out;
  out.reserve(block.ops.size());
  const ir::Op* previous = nullptr;
  for (const auto& op : block.ops) {
    const bool fused = ctx.fused_projections && op.kind == ir::OpKind::contraction && previous &&
                       previous->kind == ir::OpKind::contraction && !op.inputs.empty() && !previous->inputs.empty() &&
                       op.inputs[0] == previous->inputs[0];
    out.push_back(fused ? OpLaunches{} : op_launches(op, counts, ctx));
    previous = &op;
  }
  return out;
}

double host_bound_extra_s(double gpu_s, double host_s) { return std::max(0.0, host_s - gpu_s); }

}  // namespace mgt::cost
