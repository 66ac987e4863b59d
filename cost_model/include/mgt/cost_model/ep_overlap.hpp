// Expert-parallel all-to-alls under Megatron-Core's EP A2A overlap (--overlap-moe-expert-parallel-comm
// with --delay-wgrad-compute; FrameworkProfile::ep_a2a_overlap, CostParams::ep_comm_hidden_fraction):
// one pricing that the estimator and the simulator share, so `simulate` and `estimate` hide the same
// part of a MoE block's dispatch and combine (docs/cost-model.md §3).
//
// What Megatron-Core does (megatron/core/transformer/moe/README.md, "EP A2A Overlap: overlaps
// All-to-All with computation by merging FWD-BWD passes of adjacent microbatches"): in the 1F1B
// steady state the forward of micro-batch i+1 and the backward of micro-batch i run as one merged
// pass, layer by layer, so the forward's dispatch / combine run beside the backward's kernels and the
// backward's beside the forward's. The warm-up forwards and the cool-down backwards have no partner:
// their all-to-alls stay exposed. transformer_config.py refuses it without ep > 1, with full
// recompute (or any recompute method / layer count), and with pp > 1 but no virtual pipeline.
#pragma once

#include "mgt/cost_model/collective.hpp"
#include "mgt/cost_model/cost_params.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/plan.hpp"

#include <cstdint>
#include <unordered_map>

namespace mgt::cost {

/// Whether Megatron-Core accepts EP A2A overlap for `plan` (transformer_config.py): ep > 1, no full
/// recompute (nor a recompute method or layer count), and a virtual pipeline when pp > 1.
bool ep_a2a_overlap_allowed(const ir::Plan& plan);

/// Share of a rank's micro-batch phases that run merged with a partner phase, 0 when the overlap is
/// off (`hidden_fraction` 0) or Megatron-Core refuses it for this plan (ep 1, full recompute, pp > 1
/// without vpp). pp 1: every micro-batch but the first forward and the last backward pairs up,
/// (ga - 1) / ga. Interleaved 1F1B: the chunk phases outside the warm-up, 1 - warm-up / (ga x vpp),
/// with the warm-up Megatron's schedules.py gives a rank, (pp - rank - 1) x 2 + (vpp - 1) x pp,
/// averaged over the ranks: (pp - 1) + (vpp - 1) x pp.
double ep_merged_fraction(const ir::Plan& plan, int64_t grad_accum, double hidden_fraction);

/// One block's expert-parallel collective time per micro-batch, forward and backward: all of it, and
/// what stays exposed in a merged pass, where the forward's all-to-alls run beside the partner's
/// backward kernels of the same layer and the backward's beside the partner's forward kernels
/// (exposed_under_overlap: capped by those kernels, paying their slow-down).
struct EpPhaseTimes {
  double fwd_comm_s = 0, bwd_comm_s = 0, fwd_merged_s = 0, bwd_merged_s = 0;
  /// Exposed seconds when a share `merged` of the phases runs merged (ep_merged_fraction).
  double fwd_exposed_s(double merged) const { return fwd_comm_s - merged * (fwd_comm_s - fwd_merged_s); }
  double bwd_exposed_s(double merged) const { return bwd_comm_s - merged * (bwd_comm_s - bwd_merged_s); }
  /// The exposed share of a phase's collectives (1 when there are none): the simulator scales each
  /// expert-parallel collective of that phase by it.
  double fwd_share(double merged) const { return fwd_comm_s > 0 ? fwd_exposed_s(merged) / fwd_comm_s : 1.0; }
  double bwd_share(double merged) const { return bwd_comm_s > 0 ? bwd_exposed_s(merged) / bwd_comm_s : 1.0; }
};

/// The block's expert-parallel collectives (BlockCollective::Axis::ep) over `ep` ranks on `link`:
/// all-to-alls at ep_dispatch_time_s (the dispatcher's routing), any other at collective_time_s.
EpPhaseTimes ep_phase_times(const BlockCost& cost, const ir::ClusterSpec& cluster, int64_t ep, const LinkEstimate& link,
                            const TokenRouting& routing, const CostParams& params);

/// ep_phase_times of each block of `graph` under one shard context, memoised: the simulator scales an
/// expert-parallel collective by the exposed share of its block phase (recompute counts as forward).
class EpExposedShares {
 public:
  EpExposedShares(const ir::Graph& graph, const ir::ClusterSpec& cluster, const CostParams& params,
                  const ShardContext& ctx, const TokenRouting& routing, double merged)
      : graph_(graph), cluster_(cluster), params_(params), ctx_(ctx), routing_(routing), merged_(merged) {}
  double share(size_t block, bool forward, int64_t ep, const LinkEstimate& link);

 private:
  const ir::Graph& graph_;
  const ir::ClusterSpec& cluster_;
  const CostParams& params_;
  ShardContext ctx_;
  const TokenRouting& routing_;
  double merged_;
  std::unordered_map<size_t, EpPhaseTimes> by_block_;  // one run: one EP link
};

}  // namespace mgt::cost
