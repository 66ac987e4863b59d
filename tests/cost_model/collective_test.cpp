// Tests for the alpha-beta collective model (nccl-tests bus factors) and the measured-table lookup.
#include "mgt/cost_model/collective.hpp"
#include "mgt/ir/cluster_spec.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <utility>

namespace mgt::cost {
namespace {

TEST(bus_factor, nccl_tests_definitions) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::all_reduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::all_gather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::reduce_scatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::all_to_all, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::send_recv, 2), 1.0);
  for (auto kind : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::send_recv})
    EXPECT_DOUBLE_EQ(bus_factor(kind, 1), 0.0);
}

TEST(latency_steps, ring_steps) {
  EXPECT_EQ(latency_steps(CollectiveKind::all_reduce, 8), 14);
  EXPECT_EQ(latency_steps(CollectiveKind::all_gather, 8), 7);
  EXPECT_EQ(latency_steps(CollectiveKind::reduce_scatter, 8), 7);
  EXPECT_EQ(latency_steps(CollectiveKind::all_to_all, 8), 7);
  EXPECT_EQ(latency_steps(CollectiveKind::send_recv, 2), 1);
  EXPECT_EQ(latency_steps(CollectiveKind::all_reduce, 1), 0);
}

TEST(collective_time_s, all_reduce_1gib_on_h100_tp8) {
  LinkEstimate link{.bus_bytes_per_s = 360e9, .latency_s = 2e-6};
  const int64_t bytes = int64_t(1) << 30;
  // 14 steps x 2 us + 1 GiB x 1.75 / 360 GB/s = 28 us + 5.2196 ms.
  double correct = 14 * 2e-6 + 1073741824.0 * 1.75 / 360e9;
  double result = collective_time_s(CollectiveKind::all_reduce, 8, bytes, link);
  EXPECT_NEAR(result, correct, 1e-15);
  EXPECT_NEAR(result, 5.2475783e-3, 1e-9);
}

TEST(collective_time_s, all_gather_and_send_recv) {
  LinkEstimate link{.bus_bytes_per_s = 42.5e9, .latency_s = 6e-6};
  EXPECT_DOUBLE_EQ(collective_time_s(CollectiveKind::all_gather, 4, 4000000000, link),
                   3 * 6e-6 + 4e9 * 0.75 / 42.5e9);
  EXPECT_DOUBLE_EQ(collective_time_s(CollectiveKind::send_recv, 2, 85000000, link), 6e-6 + 2e-3);
}

TEST(collective_time_s, nothing_to_do_is_free) {
  LinkEstimate link{.bus_bytes_per_s = 360e9, .latency_s = 2e-6};
  EXPECT_EQ(collective_time_s(CollectiveKind::all_reduce, 1, 1 << 20, link), 0.0);
  EXPECT_EQ(collective_time_s(CollectiveKind::all_reduce, 8, 0, link), 0.0);
}

TEST(hierarchical_dispatch_network_share, uniform_routing_by_hand) {
  // 4 experts on 2 domains, top-2: a token misses the remote domain when both experts are local,
  // C(2,2) / C(4,2) = 1/6; it crosses once (5/6 of tokens) where a flat all-to-all sends
  // k x (D-1)/D = 1 copy per token on average: share 5/6.
  EXPECT_NEAR(hierarchical_dispatch_network_share({.top_k = 2, .experts = 4}, 2), 5.0 / 6.0, 1e-12);
  // 128 experts on 8 domains, top-4: miss = (112 x 111 x 110 x 109) / (128 x 127 x 126 x 125);
  // share = (1 - miss) x 8 / 4.
  const double miss = (112.0 * 111 * 110 * 109) / (128.0 * 127 * 126 * 125);
  EXPECT_NEAR(hierarchical_dispatch_network_share({.top_k = 4, .experts = 128}, 8), (1 - miss) * 2.0, 1e-12);
  // Nothing to save: top-1, one domain, no routing.
  EXPECT_DOUBLE_EQ(hierarchical_dispatch_network_share({.top_k = 1, .experts = 64}, 8), 1.0);
  EXPECT_DOUBLE_EQ(hierarchical_dispatch_network_share({.top_k = 8, .experts = 64}, 1), 1.0);
  EXPECT_DOUBLE_EQ(hierarchical_dispatch_network_share({}, 4), 1.0);
}

TEST(ep_dispatch_time_s, hierarchical_is_the_slower_of_fan_out_and_network_share) {
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  LinkEstimate link;
  link.bus_bytes_per_s = 300e9;             // the ring's rate: NVLink fan-out inside each domain
  link.all_to_all_bus_bytes_per_s = 80e9;   // the cut's all-to-all rate
  link.domains_spanned = 2;
  link.members_per_domain = 8;
  const int64_t bytes = 1'600'000'000;
  const TokenRouting routing{.top_k = 2, .experts = 4};  // share 5/6 (above)
  const double flat = bytes * 15.0 / 16.0 / 80e9;        // 18.75 ms
  EXPECT_NEAR(ep_dispatch_time_s(cluster, 16, bytes, link, routing, false), flat, 1e-12);
  EXPECT_NEAR(ep_dispatch_time_s(cluster, 16, bytes, link, routing, true), flat * 5.0 / 6.0, 1e-12);
  // A routing that dedups more than the NVLink fan-out allows: the fan-out bounds it.
  EXPECT_NEAR(ep_dispatch_time_s(cluster, 16, bytes, link, {.top_k = 8, .experts = 128}, true),
              std::max(bytes * 15.0 / 16.0 / 300e9, flat * hierarchical_dispatch_network_share({.top_k = 8, .experts = 128}, 2)),
              1e-12);
  // Inside one domain the dispatcher does not matter.
  link.domains_spanned = 1;
  link.all_to_all_bus_bytes_per_s = 0;
  EXPECT_DOUBLE_EQ(ep_dispatch_time_s(cluster, 8, bytes, link, routing, true),
                   ep_dispatch_time_s(cluster, 8, bytes, link, routing, false));
}

TEST(to_string, collective_kind) {
  using K = CollectiveKind;
  const std::pair<K, std::string> names[] = {{K::all_reduce, "all_reduce"}, {K::all_gather, "all_gather"},
                                              {K::reduce_scatter, "reduce_scatter"}, {K::all_to_all, "all_to_all"},
                                              {K::send_recv, "send_recv"}};
  for (const auto& [kind, name] : names) EXPECT_EQ(to_string(kind), name) << name;
}

TEST(measured_bus_bytes_per_s, nearest_configuration_log_interpolated) {
  ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  cluster.collective_table = {
      {.op = "all_reduce", .group_size = 8, .nodes_spanned = 1, .message_bytes = 1 << 20, .bus_bytes_per_s = 100e9},
      {.op = "all_reduce", .group_size = 8, .nodes_spanned = 1, .message_bytes = 1 << 30, .bus_bytes_per_s = 300e9},
      {.op = "all_reduce", .group_size = 16, .nodes_spanned = 2, .message_bytes = 1 << 30, .bus_bytes_per_s = 170e9},
  };
  auto ar = CollectiveKind::all_reduce;
  // 32 MiB is halfway between 1 MiB and 1 GiB in log size.
  EXPECT_DOUBLE_EQ(measured_bus_bytes_per_s(cluster, ar, 8, 1, 1 << 25), 200e9);
  EXPECT_DOUBLE_EQ(measured_bus_bytes_per_s(cluster, ar, 8, 1, 1 << 20), 100e9);
  EXPECT_DOUBLE_EQ(measured_bus_bytes_per_s(cluster, ar, 8, 1, int64_t(4) << 30), 300e9);  // clamped
  EXPECT_DOUBLE_EQ(measured_bus_bytes_per_s(cluster, ar, 8, 1, 1024), 100e9);             // clamped
  EXPECT_DOUBLE_EQ(measured_bus_bytes_per_s(cluster, ar, 16, 2, 1 << 30), 170e9);
  EXPECT_DOUBLE_EQ(measured_bus_bytes_per_s(cluster, ar, 32, 4, 1 << 30), 170e9);  // nearest: (16, 2)
  EXPECT_DOUBLE_EQ(measured_bus_bytes_per_s(cluster, CollectiveKind::all_gather, 8, 1, 1 << 20), 0.0);
  EXPECT_DOUBLE_EQ(measured_bus_bytes_per_s(ir::cluster_preset("b200"), ar, 8, 1, 1 << 20), 0.0);
}

// A probed cluster prices collectives from its measured busbw (which already includes latency);
// an op without measurements falls back to the alpha-beta model over the link.
TEST(collective_time_s, prefers_the_measured_table) {
  ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  cluster.collective_table = {{"all_reduce", 8, 1, 1 << 20, 100e9}};
  const LinkEstimate link{.bus_bytes_per_s = 360e9, .latency_s = 2e-6};
  const double bytes = double(1 << 20);
  EXPECT_DOUBLE_EQ(collective_time_s(cluster, CollectiveKind::all_reduce, 8, 1 << 20, link), bytes * 2 * 7 / 8 / 100e9);
  EXPECT_DOUBLE_EQ(collective_time_s(cluster, CollectiveKind::all_gather, 8, 1 << 20, link),
                   7 * 2e-6 + bytes * 7 / 8 / 360e9);
  EXPECT_DOUBLE_EQ(collective_time_s(cluster, CollectiveKind::all_reduce, 1, 1 << 20, link), 0.0);
  cluster.collective_table.clear();
  EXPECT_DOUBLE_EQ(collective_time_s(cluster, CollectiveKind::all_reduce, 8, 1 << 20, link),
                   collective_time_s(CollectiveKind::all_reduce, 8, 1 << 20, link));
}

// broadcast (which the simulator meets in schedules) is priced as a pipelined ring: one hop's latency,
// bus factor 1, and the measured send_recv rows, since the probe measures no broadcast.
TEST(collective_time_s, broadcast_is_priced_as_send_recv) {
  const LinkEstimate link{.bus_bytes_per_s = 100e9, .latency_s = 5e-6};
  EXPECT_EQ(latency_steps(CollectiveKind::broadcast, 8), 1);
  EXPECT_EQ(measured_op(CollectiveKind::broadcast), "send_recv");
  EXPECT_EQ(measured_op(CollectiveKind::all_gather), "all_gather");
  // 1e9 bytes x 1 / 100 GB/s = 10 ms, plus one 5 us step.
  EXPECT_DOUBLE_EQ(collective_time_s(CollectiveKind::broadcast, 8, 1000000000, link), 5e-6 + 1e-2);
  ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  cluster.collective_table = {{"send_recv", 2, 1, 1 << 20, 50e9}};
  // Measured 50 GB/s: 1 MiB x 1 / 50e9.
  EXPECT_DOUBLE_EQ(collective_time_s(cluster, CollectiveKind::broadcast, 8, 1 << 20, link), double(1 << 20) / 50e9);
}


// A `cpu` cluster adds the CPU executor's host copies at the probe's triad rate (collective.cpp):
// 5 bytes of traffic per byte for an all_reduce through scratch, none for a DDP bucket of whole
// tensors, which the executor reduces in place (tp = 1); a GPU cluster never pays them.
TEST(collective_time_s, cpu_clusters_pay_the_executors_host_copies_unless_reduced_in_place) {
  ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  cluster.gpu.arch = ir::GpuArch::cpu;
  cluster.gpu.hbm_bytes_per_s = 20e9;
  cluster.collective_table = {{"all_reduce", 2, 1, 1 << 20, 2e9}};
  const LinkEstimate link{.bus_bytes_per_s = 1e9, .latency_s = 1e-6};
  const double bytes = double(1 << 20);
  const double transfer = bytes * 2 * 1 / 2 / 2e9;  // bus factor 2(n-1)/n = 1 at n = 2
  EXPECT_DOUBLE_EQ(collective_time_s(cluster, CollectiveKind::all_reduce, 2, 1 << 20, link), transfer + 5 * bytes / 20e9);
  EXPECT_DOUBLE_EQ(collective_time_s(cluster, CollectiveKind::all_reduce, 2, 1 << 20, link, HostCopies::in_place), transfer);
  EXPECT_EQ(ddp_bucket_copies(1), HostCopies::in_place);
  EXPECT_EQ(ddp_bucket_copies(2), HostCopies::scratch);
  cluster.gpu.arch = ir::cluster_preset("h100-sxm").gpu.arch;
  EXPECT_DOUBLE_EQ(collective_time_s(cluster, CollectiveKind::all_reduce, 2, 1 << 20, link), transfer);
}

}  // namespace
}  // namespace mgt::cost
