// JSON for the estimator's results, written and read by iterating kTimeTerms / kMemoryTerms, so every
// format (mgt.plans/1 entries, mgt.simulation/1 breakdowns, mgt.validation/1 rows) spells each term
// the same way: "compute_s" ... "overhead_s", "parameters_bytes" ... "overhead_bytes", "peak_bytes".
#pragma once

#include "mgt/cost_model/estimator.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace mgt::cost {

/// {"compute_s": ..., ..., "overhead_s": ...}: every kTimeTerms key.
nlohmann::json to_json(const TimeBreakdown& time);
/// Reads every kTimeTerms key (each required, a number >= 0); throws ir::InputError naming `source`
/// and the field. `source` is the file and the path of the object ("plans.json: plans[0].time").
TimeBreakdown time_breakdown_from_json(const nlohmann::json& doc, const std::string& source);

/// {"parameters_bytes": ..., ..., "overhead_bytes": ..., "peak_bytes": ...}.
nlohmann::json to_json(const MemoryBreakdown& memory);
/// Reads every kMemoryTerms key and "peak_bytes" (integers >= 0); other keys are ignored (an
/// mgt.plans/1 entry adds "hbm_bytes" and "headroom_bytes").
MemoryBreakdown memory_breakdown_from_json(const nlohmann::json& doc, const std::string& source);

/// {"plan", "step_time_s", "tokens_per_s_per_gpu", "mfu", "model_flops_per_step", "bottleneck",
/// "memory", "time"}: the fields of an mgt.plans/1 entry that an Estimate holds.
nlohmann::json to_json(const Estimate& estimate);
Estimate estimate_from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace mgt::cost
