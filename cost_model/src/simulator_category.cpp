#include "simulator_category.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace mgt::cost::simulation {

namespace {
bool has_axis(const std::vector<std::string>& axes, const char* name) {
  return std::find(axes.begin(), axes.end(), name) != axes.end();
}

Category axis_category(const std::string& axis) {
  if (axis == "pp") return Category::pp;
  if (axis == "cp") return Category::cp;
  if (axis == "tp") return Category::tp;
  if (axis == "ep") return Category::ep;
  return Category::dp;
}
}  // namespace

double& slot(TimeBreakdown& t, Category c) {
  static double sink = 0;
  switch (c) {
    case Category::compute: return t.compute_s;
    case Category::recompute: return t.recompute_s;
    case Category::optimizer: return t.optimizer_s;
    case Category::tp: return t.exposed_tp_s;
    case Category::cp: return t.exposed_cp_s;
    case Category::fsdp: return t.exposed_fsdp_s;
    case Category::dp: return t.exposed_dp_s;
    case Category::pp: return t.exposed_pp_s;
    case Category::ep: return t.exposed_ep_s;
    case Category::bubble: return t.bubble_s;
    case Category::none: break;
  }
  sink = 0;
  return sink;
}

Category category_of(const ir::Instruction& instr, int64_t zero_stage) {
  switch (instr.op.index()) {
    case 0: {
      const auto& c = std::get<ir::Compute>(instr.op);
      return c.phase == ir::Phase::recompute ? Category::recompute : Category::compute;
    }
    case 1: {
      const auto& c = std::get<ir::Collective>(instr.op);
      // The lowering puts each kind of traffic on its own stream; the axes alone mislead when ep
      // borrows dp_shard / cp ranks (FSDP then shards over "ep,cp").
      switch (instr.stream) {
        case ir::Stream::dp: {
          const bool shard_traffic =
              c.kind == ir::CollectiveKind::all_gather || c.kind == ir::CollectiveKind::reduce_scatter;
          return zero_stage == 3 && shard_traffic ? Category::fsdp : Category::dp;
        }
        case ir::Stream::ep: return Category::ep;
        case ir::Stream::cp: return Category::cp;
        case ir::Stream::tp: return Category::tp;
        case ir::Stream::pp: return Category::pp;
        default: break;  // on the compute stream (hand-written schedules): by axis
      }
      if (has_axis(c.axes, "dp_shard") || has_axis(c.axes, "dp_replicate")) {
        const bool shard_traffic =
            c.kind == ir::CollectiveKind::all_gather || c.kind == ir::CollectiveKind::reduce_scatter;
        return zero_stage == 3 && shard_traffic ? Category::fsdp : Category::dp;
      }
      if (has_axis(c.axes, "cp")) return Category::cp;
      if (has_axis(c.axes, "ep")) return Category::ep;
      if (has_axis(c.axes, "tp")) return Category::tp;
      if (has_axis(c.axes, "pp")) return Category::pp;
      return Category::dp;
    }
    case 2: return axis_category(std::get<ir::Send>(instr.op).axis);
    case 3: return axis_category(std::get<ir::Recv>(instr.op).axis);
    case 6: return Category::optimizer;
    default: return Category::none;
  }
}

}  // namespace mgt::cost::simulation
