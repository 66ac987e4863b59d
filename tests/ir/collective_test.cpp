// Tests for the one collective table (mgt/ir/collective.hpp). Every value is worked out by hand from
// nccl-tests' definitions (src/*.cu GetCollByteCount / GetBw, doc/PERFORMANCE.md), for n = 1, 2, 8.
#include "mgt/ir/collective.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace mgt::ir {
namespace {

using K = CollectiveKind;

TEST(bus_factor, nccl_tests_factors_for_1_2_8) {
  // all_reduce 2(n-1)/n: n=2 -> 2*1/2 = 1, n=8 -> 2*7/8 = 1.75.
  EXPECT_EQ(bus_factor(K::all_reduce, 2), 1.0);
  EXPECT_EQ(bus_factor(K::all_reduce, 8), 1.75);
  // all_gather, reduce_scatter, all_to_all (n-1)/n: n=2 -> 0.5, n=8 -> 0.875.
  for (K kind : {K::all_gather, K::reduce_scatter, K::all_to_all}) {
    EXPECT_EQ(bus_factor(kind, 2), 0.5) << to_string(kind);
    EXPECT_EQ(bus_factor(kind, 8), 0.875) << to_string(kind);
  }
  // broadcast and send_recv: 1 whatever the group.
  for (K kind : {K::broadcast, K::send_recv}) {
    EXPECT_EQ(bus_factor(kind, 2), 1.0) << to_string(kind);
    EXPECT_EQ(bus_factor(kind, 8), 1.0) << to_string(kind);
  }
  // n = 1 (and below): nothing crosses a link, 0 for every kind, broadcast included.
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    EXPECT_EQ(bus_factor(K(k), 1), 0.0) << to_string(K(k));
    EXPECT_EQ(bus_factor(K(k), 0), 0.0) << to_string(K(k));
  }
}

TEST(collective_bytes, buffers_of_one_rank_for_n_2) {
  // 1 MiB = 1048576 bytes over 2 members: the per-member block is 524288.
  const int64_t b = 1 << 20;
  EXPECT_EQ(collective_bytes(K::all_reduce, b, 2), (CollectiveBytes{1048576, 1048576, 1048576, 1.0}));
  EXPECT_EQ(collective_bytes(K::all_gather, b, 2), (CollectiveBytes{524288, 1048576, 524288, 0.5}));
  EXPECT_EQ(collective_bytes(K::reduce_scatter, b, 2), (CollectiveBytes{1048576, 524288, 524288, 0.5}));
  EXPECT_EQ(collective_bytes(K::all_to_all, b, 2), (CollectiveBytes{1048576, 1048576, 524288, 0.5}));
  EXPECT_EQ(collective_bytes(K::broadcast, b, 2), (CollectiveBytes{1048576, 1048576, 1048576, 1.0}));
  EXPECT_EQ(collective_bytes(K::send_recv, b, 2), (CollectiveBytes{1048576, 1048576, 1048576, 1.0}));
}

TEST(collective_bytes, buffers_of_one_rank_for_n_8) {
  // 8000 bytes over 8 members: the block is 1000; all_reduce 2*7/8 = 1.75, the chunked kinds 7/8.
  EXPECT_EQ(collective_bytes(K::all_reduce, 8000, 8), (CollectiveBytes{8000, 8000, 8000, 1.75}));
  EXPECT_EQ(collective_bytes(K::all_gather, 8000, 8), (CollectiveBytes{1000, 8000, 1000, 0.875}));
  EXPECT_EQ(collective_bytes(K::reduce_scatter, 8000, 8), (CollectiveBytes{8000, 1000, 1000, 0.875}));
  EXPECT_EQ(collective_bytes(K::all_to_all, 8000, 8), (CollectiveBytes{8000, 8000, 1000, 0.875}));
  EXPECT_EQ(collective_bytes(K::broadcast, 8000, 8), (CollectiveBytes{8000, 8000, 8000, 1.0}));
  // Not a multiple of 8: the block rounds down to 1001 (nccl-tests), the full side is 8 x 1001 = 8008.
  EXPECT_EQ(collective_bytes(K::all_gather, 8012, 8), (CollectiveBytes{1001, 8008, 1001, 0.875}));
}

TEST(collective_bytes, a_group_of_one_keeps_its_buffer_and_moves_nothing) {
  for (int k = 0; k < kNumCollectiveKinds; ++k)
    EXPECT_EQ(collective_bytes(K(k), 4096, 1), (CollectiveBytes{4096, 4096, 4096, 0.0})) << to_string(K(k));
  EXPECT_EQ(collective_bytes(K::all_reduce, 0, 8), (CollectiveBytes{0, 0, 0, 1.75}));
}

TEST(collective_bytes, rejects_empty_groups_and_negative_sizes) {
  EXPECT_THROW(collective_bytes(K::all_reduce, 1024, 0), std::invalid_argument);
  EXPECT_THROW(collective_bytes(K::all_gather, -4, 2), std::invalid_argument);
  EXPECT_THROW(collective_extents(K::all_gather, 4, -1), std::invalid_argument);
}

TEST(collective_extents, in_units_of_the_call_count) {
  // count 3 over 8 members, as the Communicator interface takes it.
  EXPECT_EQ(collective_extents(K::all_reduce, 3, 8), (CollectiveExtents{3, 3}));
  EXPECT_EQ(collective_extents(K::all_gather, 3, 8), (CollectiveExtents{3, 24}));
  EXPECT_EQ(collective_extents(K::reduce_scatter, 3, 8), (CollectiveExtents{24, 3}));
  EXPECT_EQ(collective_extents(K::all_to_all, 3, 8), (CollectiveExtents{24, 24}));
  EXPECT_EQ(collective_extents(K::broadcast, 3, 8), (CollectiveExtents{3, 3}));
  EXPECT_EQ(collective_extents(K::send_recv, 3, 2), (CollectiveExtents{3, 3}));
}

TEST(count_is_per_member, the_chunked_kinds) {
  EXPECT_FALSE(count_is_per_member(K::all_reduce));
  EXPECT_TRUE(count_is_per_member(K::all_gather));
  EXPECT_TRUE(count_is_per_member(K::reduce_scatter));
  EXPECT_TRUE(count_is_per_member(K::all_to_all));
  EXPECT_FALSE(count_is_per_member(K::broadcast));
  EXPECT_FALSE(count_is_per_member(K::send_recv));
}

TEST(collective_names, round_trip_except_send_recv) {
  const std::pair<K, std::string> names[] = {{K::all_reduce, "all_reduce"}, {K::all_gather, "all_gather"},
                                              {K::reduce_scatter, "reduce_scatter"}, {K::all_to_all, "all_to_all"},
                                              {K::broadcast, "broadcast"},           {K::send_recv, "send_recv"}};
  for (const auto& [kind, name] : names) EXPECT_EQ(to_string(kind), name) << name;
  for (K kind : {K::all_reduce, K::all_gather, K::reduce_scatter, K::all_to_all, K::broadcast})
    EXPECT_EQ(collective_kind_from_string(to_string(kind)), kind);
  // A Schedule spells send_recv as a Send and a Recv, so its Collective never reads it.
  EXPECT_FALSE(collective_kind_from_string("send_recv").has_value());
  EXPECT_FALSE(collective_kind_from_string("all_slice").has_value());
  EXPECT_EQ(to_string(ReduceOp::max), "max");
  EXPECT_EQ(reduce_op_from_string("sum"), ReduceOp::sum);
  EXPECT_FALSE(reduce_op_from_string("mean").has_value());
}

}  // namespace
}  // namespace mgt::ir
