#include "mgt/cost_model/tp_overlap.hpp"

#include "mgt/cost_model/collective.hpp"

#include <vector>

namespace mgt::cost {

namespace {
double tp_time_s(const std::vector<BlockCollective>& collectives, const ir::ClusterSpec& cluster, int64_t tp,
                 const LinkEstimate& link) {
  double total = 0;
  for (const auto& c : collectives)
    if (c.axis == BlockCollective::Axis::tp) total += collective_time_s(cluster, c.kind, tp, c.bytes, link);
  return total;
}
}  // namespace

TpPhaseTimes tp_phase_times(const BlockCost& cost, const ir::ClusterSpec& cluster, int64_t tp, const LinkEstimate& link,
                            const CostParams& params) {
  TpPhaseTimes t;
  t.fwd_comm_s = tp_time_s(cost.fwd_collectives, cluster, tp, link);
  t.bwd_comm_s = tp_time_s(cost.bwd_collectives, cluster, tp, link);
  t.fwd_exposed_s = exposed_under_overlap(t.fwd_comm_s, cost.fwd_compute_s, params.tp_comm_hidden_fraction,
                                          params.overlap_compute_slowdown);
  t.bwd_exposed_s = exposed_under_overlap(t.bwd_comm_s, cost.bwd_compute_s, params.tp_comm_hidden_fraction,
                                          params.overlap_compute_slowdown);
  return t;
}

double TpExposedShares::share(size_t block, bool forward, const LinkEstimate& link) {
  auto it = by_block_.find(block);
  if (it == by_block_.end())
    it = by_block_.emplace(block, tp_phase_times(block_cost(graph_.blocks[block], ctx_, cluster_, params_), cluster_,
                                                 ctx_.tp, link, params_)).first;
  return forward ? it->second.fwd_share() : it->second.bwd_share();
}

}  // namespace mgt::cost
