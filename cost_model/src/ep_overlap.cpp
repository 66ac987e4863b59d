#include "mgt/cost_model/ep_overlap.hpp"

#include <algorithm>
#include <vector>

namespace mgt::cost {

bool ep_a2a_overlap_allowed(const ir::Plan& plan) {
  return plan.ep > 1 && plan.recompute != ir::Recompute::full && (plan.pp <= 1 || plan.vpp > 1);
}

double ep_merged_fraction(const ir::Plan& plan, int64_t grad_accum, double hidden_fraction) {
  if (hidden_fraction <= 0 || !ep_a2a_overlap_allowed(plan)) return 0.0;
  const double ga = double(std::max<int64_t>(1, grad_accum));
  if (plan.pp <= 1) return (ga - 1.0) / ga;
  const double chunks = ga * double(plan.vpp);
  const double warmup = double(plan.pp - 1) + double(plan.vpp - 1) * double(plan.pp);
  return std::clamp(1.0 - warmup / chunks, 0.0, 1.0);
}

namespace {
double ep_time_s(const std::vector<BlockCollective>& collectives, const ir::ClusterSpec& cluster, int64_t ep,
                 const LinkEstimate& link, const TokenRouting& routing, const CostParams& params) {
  double total = 0;
  for (const auto& c : collectives) {
    if (c.axis != BlockCollective::Axis::ep) continue;
    total += c.kind == CollectiveKind::all_to_all
                 ? ep_dispatch_time_s(cluster, ep, c.bytes, link, routing, params.moe_hierarchical_dispatch)
                 : collective_time_s(cluster, c.kind, ep, c.bytes, link);
  }
  return total;
}
}  // namespace

EpPhaseTimes ep_phase_times(const BlockCost& cost, const ir::ClusterSpec& cluster, int64_t ep, const LinkEstimate& link,
                            const TokenRouting& routing, const CostParams& params) {
  EpPhaseTimes t;
  t.fwd_comm_s = ep_time_s(cost.fwd_collectives, cluster, ep, link, routing, params);
  t.bwd_comm_s = ep_time_s(cost.bwd_collectives, cluster, ep, link, routing, params);
  // Merged pass: the forward's all-to-alls under the partner's backward kernels, and the reverse.
  t.fwd_merged_s = exposed_under_overlap(t.fwd_comm_s, cost.bwd_compute_s, params.ep_comm_hidden_fraction,
                                         params.overlap_compute_slowdown);
  t.bwd_merged_s = exposed_under_overlap(t.bwd_comm_s, cost.fwd_compute_s, params.ep_comm_hidden_fraction,
                                         params.overlap_compute_slowdown);
  return t;
}

double EpExposedShares::share(size_t block, bool forward, int64_t ep, const LinkEstimate& link) {
  auto it = by_block_.find(block);
  if (it == by_block_.end())
    it = by_block_.emplace(block, ep_phase_times(block_cost(graph_.blocks[block], ctx_, cluster_, params_), cluster_, ep,
                                                 link, routing_, params_)).first;
  return forward ? it->second.fwd_share(merged_) : it->second.bwd_share(merged_);
}

}  // namespace mgt::cost
