// Megatron-Core's EP A2A overlap (ep_overlap.hpp; docs/cost-model.md §3): which plans Megatron accepts
// it for, the share of micro-batch phases that run merged, and the exposed all-to-all of a merged
// pass, each written out by hand.
#include "mgt/cost_model/ep_overlap.hpp"

#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/ir/cluster_spec.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mgt::cost {
namespace {

ir::Plan moe_plan(int64_t ep, int64_t pp, int64_t vpp, ir::Recompute recompute) {
  ir::Plan p;
  p.dp_shard = ep;
  p.ep = ep;
  p.pp = pp;
  p.vpp = vpp;
  p.recompute = recompute;
  return p;
}

// transformer_config.py asserts ep > 1, no full recompute, and a virtual pipeline when pp > 1.
TEST(EpOverlap, MegatronAcceptsItWithExpertsAndNeitherFullRecomputeNorAPlainPipeline) {
  EXPECT_TRUE(ep_a2a_overlap_allowed(moe_plan(8, 1, 1, ir::Recompute::none)));
  EXPECT_TRUE(ep_a2a_overlap_allowed(moe_plan(8, 1, 1, ir::Recompute::selective)));
  EXPECT_TRUE(ep_a2a_overlap_allowed(moe_plan(8, 4, 2, ir::Recompute::none)));
  EXPECT_FALSE(ep_a2a_overlap_allowed(moe_plan(1, 1, 1, ir::Recompute::none)));
  EXPECT_FALSE(ep_a2a_overlap_allowed(moe_plan(8, 1, 1, ir::Recompute::full)));
  EXPECT_FALSE(ep_a2a_overlap_allowed(moe_plan(8, 4, 1, ir::Recompute::none)));
}

// pp 1, ga 4: the first forward and the last backward run alone, 3 of 4 phases pair up.
// pp 4, vpp 2, ga 8: 16 chunk phases per rank; Megatron's warm-up (pp - rank - 1) x 2 + (vpp - 1) x pp
// averages (pp - 1) + (vpp - 1) x pp = 3 + 4 = 7 over the ranks: 9 / 16 merged.
// pp 2, vpp 2, ga 1: warm-up 1 + 2 = 3 of 2 chunks: none.
TEST(EpOverlap, MergedShareIsTheSteadyStateOfTheSchedule) {
  EXPECT_DOUBLE_EQ(ep_merged_fraction(moe_plan(8, 1, 1, ir::Recompute::none), 4, 0.9), 0.75);
  EXPECT_DOUBLE_EQ(ep_merged_fraction(moe_plan(8, 1, 1, ir::Recompute::none), 1, 0.9), 0.0);
  EXPECT_DOUBLE_EQ(ep_merged_fraction(moe_plan(8, 4, 2, ir::Recompute::none), 8, 0.9), 9.0 / 16.0);
  EXPECT_DOUBLE_EQ(ep_merged_fraction(moe_plan(8, 2, 2, ir::Recompute::none), 1, 0.9), 0.0);
  // Off, or refused by Megatron: nothing merged.
  EXPECT_DOUBLE_EQ(ep_merged_fraction(moe_plan(8, 1, 1, ir::Recompute::none), 4, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(ep_merged_fraction(moe_plan(8, 1, 1, ir::Recompute::full), 4, 0.9), 0.0);
  EXPECT_DOUBLE_EQ(ep_merged_fraction(moe_plan(8, 4, 1, ir::Recompute::none), 8, 0.9), 0.0);
}

// One MoE block with a dispatch and a combine of B bytes each way over 8 ranks inside one NVLink
// domain. In a merged pass the forward's all-to-alls hide under the partner's backward kernels:
// exposed = c - min(h c, bwd) + s min(h c, bwd), with c the forward's all-to-all time, h the hidden
// share, s the kernels' slow-down; the backward's under the partner's forward kernels likewise.
TEST(EpOverlap, MergedPassHidesTheShareUnderThePartnersKernels) {
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  CostParams params = cost_params_for(cluster.gpu, framework_profile("megatron-core"));
  params.ep_comm_hidden_fraction = 0.8;
  params.overlap_compute_slowdown = 0.1;
  LinkEstimate link;
  link.bus_bytes_per_s = 100e9;
  link.latency_s = 0;
  const TokenRouting routing{8, 128};
  const int64_t bytes = int64_t(1) << 30;
  BlockCost cost;
  BlockCollective a2a;
  a2a.axis = BlockCollective::Axis::ep;
  a2a.kind = CollectiveKind::all_to_all;
  a2a.bytes = bytes;
  cost.fwd_collectives = {a2a, a2a};  // dispatch, combine
  cost.bwd_collectives = cost.fwd_collectives;
  // The pricing of one all-to-all is ep_dispatch_time_s's (collective_test.cpp); the overlap reuses it.
  const double c = 2 * ep_dispatch_time_s(cluster, 8, bytes, link, routing, params.moe_hierarchical_dispatch);
  ASSERT_GT(c, 0.0);

  // Long partner kernels: 80 % of each phase's all-to-all hides, paying 10 % of it as slow-down.
  cost.fwd_compute_s = cost.bwd_compute_s = 10 * c;
  EpPhaseTimes t = ep_phase_times(cost, cluster, 8, link, routing, params);
  EXPECT_NEAR(t.fwd_comm_s, c, 1e-12);
  EXPECT_NEAR(t.fwd_merged_s, c - 0.8 * c + 0.1 * 0.8 * c, 1e-12);
  EXPECT_NEAR(t.bwd_merged_s, c - 0.8 * c + 0.1 * 0.8 * c, 1e-12);
  // Three of four phases merged (pp 1, ga 4): exposed = c - 0.75 (c - merged).
  EXPECT_NEAR(t.fwd_exposed_s(0.75), c - 0.75 * (0.8 * c - 0.08 * c), 1e-12);
  EXPECT_NEAR(t.fwd_share(0.75), 1 - 0.75 * 0.72, 1e-12);
  EXPECT_DOUBLE_EQ(t.fwd_share(0.0), 1.0);

  // Short partner kernels cap what hides: the backward's all-to-alls under a forward of c / 4.
  cost.fwd_compute_s = c / 4;
  t = ep_phase_times(cost, cluster, 8, link, routing, params);
  EXPECT_NEAR(t.bwd_merged_s, c - c / 4 + 0.1 * c / 4, 1e-12);
  EXPECT_NEAR(t.fwd_merged_s, c - 0.8 * c + 0.1 * 0.8 * c, 1e-12);  // still under the long backward

  // No expert-parallel collectives: nothing to hide, share 1.
  BlockCost dense;
  dense.fwd_compute_s = dense.bwd_compute_s = 1.0;
  const EpPhaseTimes none = ep_phase_times(dense, cluster, 8, link, routing, params);
  EXPECT_EQ(none.fwd_comm_s, 0.0);
  EXPECT_DOUBLE_EQ(none.bwd_share(0.75), 1.0);
}

// The feature belongs to Megatron-Core: named there it sets the hidden share; for a framework
// without it (torchtitan) it changes nothing and says so.
TEST(EpOverlap, TheFeatureIsMegatronCores) {
  const FrameworkSelection mcore = select_framework("megatron-core", {"ep-a2a-overlap"});
  EXPECT_TRUE(mcore.profile.ep_a2a_overlap);
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  EXPECT_DOUBLE_EQ(cost_params_for(cluster.gpu, mcore.profile).ep_comm_hidden_fraction, mcore.profile.comm_hidden_fraction);
  EXPECT_TRUE(select_framework("Megatron-Bridge", {"overlap-moe-expert-parallel-comm"}).profile.ep_a2a_overlap);
  EXPECT_TRUE(select_framework("megatron-core ep-a2a-overlap").profile.ep_a2a_overlap);  // a phrase
  EXPECT_FALSE(framework_profile("megatron-core").ep_a2a_overlap);                     // off by default
  EXPECT_DOUBLE_EQ(cost_params_for(cluster.gpu, framework_profile("megatron-core")).ep_comm_hidden_fraction, 0.0);

  const FrameworkSelection titan = select_framework("torchtitan", {"ep-a2a-overlap"});
  EXPECT_FALSE(titan.profile.ep_a2a_overlap);
  bool said = false;
  for (const auto& n : titan.notes) said = said || n.find("\"ep-a2a-overlap\" changes nothing") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace mgt::cost
