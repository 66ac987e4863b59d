// Plans for hand-computed tests, built from their degrees in one call. Shared by the cost-model and
// planner tests (included by relative path; tests/CMakeLists.txt globs only *_test.cpp).
#pragma once

#include "mgt/ir/plan.hpp"

#include <cstdint>
#include <tuple>

namespace mgt::test {

/// A plan with these degrees and micro-batch (arguments in Plan's field order); every other field,
/// ep included, keeps its default.
inline ir::Plan plan_of(int64_t dp_replicate, int64_t dp_shard, int64_t tp, int64_t cp, int64_t pp = 1,
                        int64_t vpp = 1, int64_t micro_batch = 1) {
  ir::Plan p;
  std::tie(p.dp_replicate, p.dp_shard, p.tp, p.cp, p.pp, p.vpp, p.micro_batch) =
      std::tie(dp_replicate, dp_shard, tp, cp, pp, vpp, micro_batch);
  return p;
}

}  // namespace mgt::test
