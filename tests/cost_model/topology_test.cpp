// Tests for the cluster graph and link_for_group / link_between, with hand-computed expectations
// from the preset numbers and fixed link efficiencies (nvlink 0.80, network 0.85, pcie 0.70).
#include "mgt/cost_model/topology.hpp"
#include "mgt/cost_model/collective.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>

namespace mgt::cost {
namespace {

GroupPlacement group(std::vector<AxisPlacement> axes) { return GroupPlacement{std::move(axes)}; }

// The link efficiencies these expectations use, fixed here so calibration of the defaults cannot move them.
CostParams link_params() {
  CostParams params;
  params.nvlink_efficiency = 0.80;
  params.network_efficiency = 0.85;
  params.pcie_efficiency = 0.70;
  return params;
}

Topology topo(const std::string& preset, int64_t num_gpus) {
  return Topology(ir::cluster_preset(preset), num_gpus, link_params());
}

TEST(link_for_group, h100_tp8_stays_on_nvlink) {
  Topology t = topo("h100-sxm", 8);
  LinkEstimate result = t.link_for_group(group({{.size = 8, .stride = 1}}));
  EXPECT_DOUBLE_EQ(result.bus_bytes_per_s, 450e9 * 0.80);
  EXPECT_DOUBLE_EQ(result.latency_s, 2e-6);  // nvlink_latency_s
  EXPECT_EQ(result.domains_spanned, 1);
  EXPECT_EQ(result.members_per_domain, 8);
  EXPECT_FALSE(result.crosses_network());
}

TEST(link_for_group, h100_strided_group_inside_node) {
  Topology t = topo("h100-sxm", 8);
  LinkEstimate result = t.link_for_group(group({{.size = 4, .stride = 2}}));
  EXPECT_DOUBLE_EQ(result.bus_bytes_per_s, 360e9);
  EXPECT_EQ(result.members_per_domain, 4);
}

TEST(link_for_group, h100_dp_one_member_per_node_gets_one_nic) {
  // 32 GPUs = 4 nodes; dp group {0, 8, 16, 24}: 1 member per node, the 8 translates share 8 NICs.
  Topology t = topo("h100-sxm", 32);
  LinkEstimate result = t.link_for_group(group({{.size = 4, .stride = 8}}));
  EXPECT_DOUBLE_EQ(result.bus_bytes_per_s, 50e9 * 0.85);
  EXPECT_DOUBLE_EQ(result.latency_s, 6e-6);  // network_latency_s, GPU to GPU
  EXPECT_EQ(result.domains_spanned, 4);
  EXPECT_EQ(result.members_per_domain, 1);
  EXPECT_TRUE(result.crosses_network());
}

TEST(link_for_group, h100_full_nodes_use_all_nics) {
  // 16 GPUs over 2 nodes: NVLink hops give 360 GB/s, the node cut 8 NICs x 50 GB/s x 0.85 = 340 GB/s.
  Topology t = topo("h100-sxm", 16);
  LinkEstimate result = t.link_for_group(group({{.size = 16, .stride = 1}}));
  EXPECT_DOUBLE_EQ(result.bus_bytes_per_s, std::min(360e9, 8 * 50e9 * 0.85));
  EXPECT_EQ(result.domains_spanned, 2);
  EXPECT_EQ(result.members_per_domain, 8);
  EXPECT_DOUBLE_EQ(result.latency_s, 6e-6);
}

TEST(link_for_group, all_to_all_across_nodes_is_bound_by_every_members_nic) {
  // 16 GPUs over 2 nodes: each member sends 8/16 of its buffer off its node, the node's 8 members
  // share 8 NICs x 50 GB/s x 0.85 = 340 GB/s, so busbw = (n-1)/(n-g) x 340 / g = 15/8 x 42.5 GB/s.
  Topology t = topo("h100-sxm", 16);
  LinkEstimate across = t.link_for_group(group({{.size = 16, .stride = 1}}));
  EXPECT_DOUBLE_EQ(across.all_to_all_bus_bytes_per_s, 15.0 / 8.0 * 340e9 / 8.0);
  // 64 GPUs, one member per node (dp {0, 8, ..., 56}): g = 1, its NIC share 50 x 0.85, so
  // (n-1)/(n-1) x 42.5 GB/s: the ring's rate.
  Topology wide = topo("h100-sxm", 64);
  LinkEstimate sparse = wide.link_for_group(group({{.size = 8, .stride = 8}}));
  EXPECT_DOUBLE_EQ(sparse.all_to_all_bus_bytes_per_s, 50e9 * 0.85);
  // Inside one node an all-to-all runs at the ring link's rate (field left 0).
  EXPECT_DOUBLE_EQ(t.link_for_group(group({{.size = 8, .stride = 1}})).all_to_all_bus_bytes_per_s, 0.0);
  // An all-to-all of 1.6 GB over the two nodes: bytes x 15/16 / busbw + 15 steps x 6 us.
  EXPECT_NEAR(collective_time_s(CollectiveKind::all_to_all, 16, 1'600'000'000, across),
              1.6e9 * 15.0 / 16.0 / (15.0 / 8.0 * 42.5e9) + 15 * 6e-6, 1e-12);
}

TEST(link_for_group, a100_two_nodes_match_nccl_tests_range) {
  // nccl-tests all_reduce across 2 DGX A100 reports ~170-190 GB/s busbw; 8 x 25 GB/s x 0.85 = 170.
  Topology t = topo("a100-80g-sxm", 16);
  LinkEstimate result = t.link_for_group(group({{.size = 16, .stride = 1}}));
  EXPECT_DOUBLE_EQ(result.bus_bytes_per_s, 8 * 25e9 * 0.85);
}

TEST(link_for_group, multi_axis_group_and_axis_order) {
  // 64 GPUs, mesh (dp_shard 4, cp 2, tp 8): the FSDP group over dp_shard x cp has one member per node.
  Topology t = topo("h100-sxm", 64);
  LinkEstimate result = t.link_for_group(group({{.size = 2, .stride = 8}, {.size = 4, .stride = 16}}));
  EXPECT_DOUBLE_EQ(result.bus_bytes_per_s, 50e9 * 0.85);
  EXPECT_EQ(result.domains_spanned, 8);
  EXPECT_EQ(result.members_per_domain, 1);
  // Same member set, axes listed in the other order and with a size-1 axis: same answer.
  LinkEstimate swapped =
      t.link_for_group(group({{.size = 4, .stride = 16}, {.size = 1, .stride = 1}, {.size = 2, .stride = 8}}));
  EXPECT_DOUBLE_EQ(swapped.bus_bytes_per_s, result.bus_bytes_per_s);
  EXPECT_EQ(swapped.domains_spanned, result.domains_spanned);
  // tp x cp = 16 GPUs over 2 nodes.
  LinkEstimate tp_cp = t.link_for_group(group({{.size = 8, .stride = 1}, {.size = 2, .stride = 8}}));
  EXPECT_DOUBLE_EQ(tp_cp.bus_bytes_per_s, 340e9);
}

TEST(link_for_group, interleaved_axes_ring_in_rank_order) {
  // Axes that do not nest (stride 4 x 3, stride 5 x 2) enumerate out of rank order: members
  // {0, 4, 8, 5, 9, 13}. Sorted, the ring is 0-4-5 | 8-9-13 over 2 nodes: 3 members per node, so the
  // cut carries 3 NICs x 50 GB/s x 0.85 (the NVLink hops are wider).
  Topology t = topo("h100-sxm", 16);
  LinkEstimate result = t.link_for_group(group({{.size = 3, .stride = 4}, {.size = 2, .stride = 5}}));
  EXPECT_DOUBLE_EQ(result.bus_bytes_per_s, 3 * 50e9 * 0.85);
  EXPECT_EQ(result.members_per_domain, 3);
  EXPECT_EQ(result.domains_spanned, 2);
  LinkEstimate swapped = t.link_for_group(group({{.size = 2, .stride = 5}, {.size = 3, .stride = 4}}));
  EXPECT_DOUBLE_EQ(swapped.bus_bytes_per_s, result.bus_bytes_per_s);
  EXPECT_DOUBLE_EQ(swapped.latency_s, result.latency_s);
}

TEST(link_for_group, gb200_nvl72_group_of_64_stays_in_nvlink) {
  Topology t = topo("gb200-nvl72", 144);
  LinkEstimate result = t.link_for_group(group({{.size = 64, .stride = 1}}));
  EXPECT_DOUBLE_EQ(result.bus_bytes_per_s, 900e9 * 0.80);
  EXPECT_EQ(result.domains_spanned, 1);
  EXPECT_EQ(result.members_per_domain, 64);
  EXPECT_DOUBLE_EQ(result.latency_s, 2e-6);
}

TEST(link_for_group, gb200_across_racks) {
  Topology t = topo("gb200-nvl72", 144);
  // One member per rack: one NIC's worth (50 GB/s, PCIe Gen5 63 GB/s does not bind).
  LinkEstimate dp = t.link_for_group(group({{.size = 2, .stride = 72}}));
  EXPECT_DOUBLE_EQ(dp.bus_bytes_per_s, 50e9 * 0.85);
  EXPECT_EQ(dp.domains_spanned, 2);
  EXPECT_EQ(dp.members_per_domain, 1);
  // Whole racks: 72 NICs per rack carry the cut, NVLink (720 GB/s) binds.
  LinkEstimate full = t.link_for_group(group({{.size = 144, .stride = 1}}));
  EXPECT_DOUBLE_EQ(full.bus_bytes_per_s, 720e9);
  EXPECT_EQ(full.domains_spanned, 2);
  EXPECT_DOUBLE_EQ(full.latency_s, 6e-6);
}

TEST(link_for_group, rtx4090_uses_pcie_and_shares_one_nic) {
  Topology t8 = topo("rtx4090-pcie", 8);
  LinkEstimate node = t8.link_for_group(group({{.size = 8, .stride = 1}}));
  EXPECT_DOUBLE_EQ(node.bus_bytes_per_s, 31.5e9 * 0.70);
  EXPECT_DOUBLE_EQ(node.latency_s, 5e-6);
  EXPECT_EQ(node.domains_spanned, 1);  // without NVLink the domain is the node
  EXPECT_EQ(node.members_per_domain, 8);

  Topology t16 = topo("rtx4090-pcie", 16);
  // The single 12.5 GB/s NIC per node is the cut: 8 members x 12.5/8 GB/s x 0.85.
  EXPECT_DOUBLE_EQ(t16.link_for_group(group({{.size = 16, .stride = 1}})).bus_bytes_per_s, 12.5e9 * 0.85);
  // One member per node: the 8 concurrent dp groups share that NIC.
  EXPECT_DOUBLE_EQ(t16.link_for_group(group({{.size = 2, .stride = 8}})).bus_bytes_per_s, 12.5e9 / 8 * 0.85);
}

TEST(link_for_group, size_one_group) {
  Topology t = topo("h100-sxm", 8);
  LinkEstimate result = t.link_for_group(group({{.size = 1, .stride = 1}}));
  EXPECT_EQ(result.domains_spanned, 1);
  EXPECT_DOUBLE_EQ(result.latency_s, 0.0);
}

TEST(link_for_group, invalid_groups_throw) {
  Topology t = topo("h100-sxm", 16);
  EXPECT_THROW(t.link_for_group(group({{.size = 32, .stride = 1}})), std::out_of_range);
  EXPECT_THROW(t.link_for_group(group({{.size = 2, .stride = 1}, {.size = 2, .stride = 1}})), std::invalid_argument);
  EXPECT_THROW(t.link_for_group(group({{.size = 0, .stride = 1}})), std::invalid_argument);
}

TEST(link_between, point_to_point) {
  Topology t = topo("h100-sxm", 16);
  LinkEstimate nvlink = t.link_between(0, 1);
  EXPECT_DOUBLE_EQ(nvlink.bus_bytes_per_s, 360e9);
  EXPECT_DOUBLE_EQ(nvlink.latency_s, 2e-6);
  EXPECT_EQ(nvlink.domains_spanned, 1);
  LinkEstimate network = t.link_between(3, 11);
  EXPECT_DOUBLE_EQ(network.bus_bytes_per_s, 50e9 * 0.85);
  EXPECT_DOUBLE_EQ(network.latency_s, 6e-6);
  EXPECT_EQ(network.domains_spanned, 2);
  EXPECT_THROW(t.link_between(0, 16), std::out_of_range);
}

// Issue 18 item 2: the slowest stage boundary, not the first one, is the pipeline's link. pp 16 on two
// DGX nodes: stages 7 -> 8 cross the network although 0 -> 1 is NVLink.
TEST(pipeline_link, the_boundary_that_leaves_the_node_prices_the_pipeline) {
  Topology t = topo("h100-sxm", 16);
  const LinkEstimate across = t.pipeline_link(/*stride=*/1, /*stages=*/16, /*wraps=*/false);
  EXPECT_DOUBLE_EQ(across.bus_bytes_per_s, 50e9 * 0.85);  // one NIC share at network efficiency
  EXPECT_DOUBLE_EQ(across.latency_s, 6e-6);
  EXPECT_EQ(across.domains_spanned, 2);
  // pp 4 with stride 4 (dp 4 inside each stage): stage 1 on ranks 4-7, stage 2 on 8-11.
  EXPECT_DOUBLE_EQ(t.pipeline_link(4, 4, false).bus_bytes_per_s, 50e9 * 0.85);
  // A pipeline inside one node stays on NVLink; the wrap of an interleaved pipeline is included.
  EXPECT_DOUBLE_EQ(t.pipeline_link(1, 8, false).bus_bytes_per_s, 360e9);
  EXPECT_DOUBLE_EQ(t.pipeline_link(2, 4, true).bus_bytes_per_s, 360e9);
  EXPECT_THROW(t.pipeline_link(2, 16, false), std::invalid_argument);  // 16 stages 2 apart need 31 ranks
}

// Construction time is a benchmark (bench/search_bench.cpp), not a test; here: the graph stays bounded.
TEST(topology, huge_cluster_builds_a_bounded_graph) {
  Topology t = topo("h100-sxm", 131072);
  EXPECT_LT(t.num_vertices(), 100);
  EXPECT_EQ(t.num_gpus(), 131072);
  // dp over 16384 nodes, one member each.
  LinkEstimate dp = t.link_for_group(group({{.size = 16384, .stride = 8}}));
  EXPECT_DOUBLE_EQ(dp.bus_bytes_per_s, 50e9 * 0.85);
  EXPECT_EQ(dp.domains_spanned, 16384);

  Topology nvl = topo("gb200-nvl72", 131072 / 64 * 72);
  EXPECT_LT(nvl.num_vertices(), 300);  // 19 trays: one NVL72 rack plus one tray of the next
}

TEST(topology, graph_size_small_cases) {
  // 1 fabric switch + per node (1 root + 8 PCIe switches + 8 NICs + 8 GPUs) + 1 NVSwitch per domain.
  EXPECT_EQ(topo("h100-sxm", 8).num_vertices(), 1 + 25 + 1);
  EXPECT_EQ(topo("h100-sxm", 16).num_vertices(), 1 + 2 * 26);
  // rtx4090: per node 1 root + 1 PCIe switch + 1 NIC + 8 GPUs, no NVSwitch.
  EXPECT_EQ(topo("rtx4090-pcie", 8).num_vertices(), 1 + 11);
}

// The cached path must answer exactly what the first (graph) computation answered; its speed is
// measured in bench/search_bench.cpp (BM_LinkForGroupCached).
TEST(link_for_group, cached_answer_equals_first_answer) {
  Topology t = topo("h100-sxm", 16384);
  GroupPlacement g = group({{.size = 8, .stride = 1}, {.size = 2, .stride = 8}, {.size = 64, .stride = 16}});
  const LinkEstimate first = t.link_for_group(g);
  for (int i = 0; i < 3; ++i) {
    const LinkEstimate again = t.link_for_group(g);
    EXPECT_DOUBLE_EQ(again.bus_bytes_per_s, first.bus_bytes_per_s);
    EXPECT_DOUBLE_EQ(again.latency_s, first.latency_s);
    EXPECT_EQ(again.domains_spanned, first.domains_spanned);
  }
  // The stride-1 axis fills a node (8 members); the stride-8 and stride-16 axes step across nodes:
  // 1024 members over 128 nodes.
  EXPECT_EQ(first.domains_spanned, 128);
  EXPECT_EQ(first.members_per_domain, 8);
  EXPECT_GT(first.bus_bytes_per_s, 0);
}

}  // namespace
}  // namespace mgt::cost
