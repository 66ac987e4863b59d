// How the simulator books compute-stream time (docs/simulator.md §3): each instruction's category
// and the breakdown field it adds to. Internal to simulator.cpp.
#pragma once

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/schedule.hpp"

#include <cstdint>

namespace mgt::cost::simulation {

// What a stretch of compute-stream time is booked as.
enum class Category { compute, recompute, optimizer, tp, cp, fsdp, dp, pp, ep, bubble, none };
inline constexpr int kNumCategories = 11;

/// The breakdown field a category adds to (a scratch value for `none`).
double& slot(TimeBreakdown& t, Category c);

/// Collectives over a data-parallel axis are FSDP traffic when they gather parameters or scatter
/// gradients under ZeRO-3, else gradient synchronisation (DDP, HSDP, ZeRO-1/2); the rest by axis.
Category category_of(const ir::Instruction& instr, int64_t zero_stage);

}  // namespace mgt::cost::simulation
