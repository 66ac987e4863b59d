// MoE dispatcher host sync (moe_host_sync.hpp; docs/cost-model.md §9).
#include "mgt/cost_model/moe_host_sync.hpp"

#include <algorithm>

namespace mgt::cost {

double host_sync_stall_s(double host_launch_s, const std::vector<double>& kernel_gpu_s) {
  if (kernel_gpu_s.empty() || host_launch_s <= 0) return 0.0;
  double worst = 0, queued_s = 0;
  for (size_t k = 0; k < kernel_gpu_s.size(); ++k) {
    worst = std::max(worst, double(k + 1) * host_launch_s - queued_s);
    queued_s += kernel_gpu_s[k];
  }
  return host_launch_s + worst;
}

namespace {

// Routed experts on this rank: the expert weight's e extent over ep.
int64_t local_experts(const ir::Block& block, const ir::Op& op, const ShardContext& ctx) {
  const ir::TensorDecl* w = ir::find_tensor(block, op.inputs[1]);
  for (const auto& d : w->dims)
    if (d.name == 'e') return std::max<int64_t>(1, (d.size + ctx.ep - 1) / std::max<int64_t>(1, ctx.ep));
  return 1;
}

bool is_expert_gemm(const ir::Op& op, const std::set<std::string>& expert_weights) {
  return op.kind == ir::OpKind::contraction && op.inputs.size() > 1 && expert_weights.count(op.inputs[1]) > 0;
}

}  // namespace

std::vector<double> moe_kernels_after_sync(const ir::Block& block, size_t router_index, const ShardContext& ctx,
                                           const std::vector<double>& op_fwd_s,
                                           const std::set<std::string>& expert_weights, double kernel_floor_s) {
  const std::string& routing = block.ops[router_index].output;
  int64_t experts = 1;
  for (size_t i = router_index + 1; i < block.ops.size(); ++i)
    if (is_expert_gemm(block.ops[i], expert_weights)) {
      experts = local_experts(block, block.ops[i], ctx);
      break;
    }
  std::vector<double> out{0.0};               // dispatch all-to-all
  if (experts > 1) out.push_back(0.0);        // sort_chunks_by_idxs by local expert
  for (size_t i = router_index + 1; i < block.ops.size(); ++i) {
    const ir::Op& op = block.ops[i];
    const bool combine = std::find(op.inputs.begin(), op.inputs.end(), routing) != op.inputs.end();
    if (combine) {
      if (experts > 1) out.push_back(0.0);    // sort back
      out.push_back(0.0);                     // combine all-to-all
      out.push_back(op_fwd_s[i]);             // unpermute (weighted by the routing probabilities)
      break;
    }
    if (!is_expert_gemm(op, expert_weights)) {
      out.push_back(op_fwd_s[i]);
      continue;
    }
    // fc1 fuses the expert contractions that read the same input (gate and up); one GEMM per expert.
    // Each op's time carries one kernel floor; the per-expert GEMMs carry one each.
    double work_s = std::max(0.0, op_fwd_s[i] - kernel_floor_s);
    while (i + 1 < block.ops.size() && is_expert_gemm(block.ops[i + 1], expert_weights) &&
           block.ops[i + 1].inputs[0] == op.inputs[0])
      work_s += std::max(0.0, op_fwd_s[++i] - kernel_floor_s);
    const double per_expert_s = work_s / double(experts) + kernel_floor_s;
    out.insert(out.end(), size_t(experts), per_expert_s);
  }
  return out;
}

}  // namespace mgt::cost
