// Tensor-parallel collectives under a framework's TP communication overlap (TE userbuffers, async
// TP; CostParams::tp_comm_hidden_fraction): one pricing that the estimator and the simulator share,
// so `simulate` and `estimate` hide the same part of a block's TP traffic (docs/cost-model.md §3).
#pragma once

#include "mgt/cost_model/cost_params.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"

#include <cstdint>
#include <unordered_map>

namespace mgt::cost {

/// One block's TP collective time per micro-batch, forward and backward: all of it, and what stays
/// exposed when the framework overlaps `hidden_fraction` of it with the same phase's kernels
/// (exposed_under_overlap, capped by the phase's compute and paying the kernels' slow-down).
struct TpPhaseTimes {
  double fwd_comm_s = 0, fwd_exposed_s = 0, bwd_comm_s = 0, bwd_exposed_s = 0;
  /// The exposed share of a phase's collectives (1 when there are none): the simulator scales each
  /// TP collective of that phase by it.
  double fwd_share() const { return fwd_comm_s > 0 ? fwd_exposed_s / fwd_comm_s : 1.0; }
  double bwd_share() const { return bwd_comm_s > 0 ? bwd_exposed_s / bwd_comm_s : 1.0; }
};

/// The block's TP collectives (BlockCollective::Axis::tp) over `tp` ranks on `link`.
TpPhaseTimes tp_phase_times(const BlockCost& cost, const ir::ClusterSpec& cluster, int64_t tp, const LinkEstimate& link,
                            const CostParams& params);

/// tp_phase_times of each block of `graph` under one shard context, memoised: the simulator scales a
/// TP collective by the exposed share of its block phase (recompute counts as forward).
class TpExposedShares {
 public:
  TpExposedShares(const ir::Graph& graph, const ir::ClusterSpec& cluster, const CostParams& params,
                  const ShardContext& ctx)
      : graph_(graph), cluster_(cluster), params_(params), ctx_(ctx) {}
  double share(size_t block, bool forward, const LinkEstimate& link);

 private:
  const ir::Graph& graph_;
  const ir::ClusterSpec& cluster_;
  const CostParams& params_;
  ShardContext ctx_;
  std::unordered_map<size_t, TpPhaseTimes> by_block_;  // one run: one TP link
};

}  // namespace mgt::cost
