// mgt.spmd_plans/2 <-> SpmdPlansReport (spmd.hpp; docs/formats.md). mgt.spmd_plan/1 itself is in spmd.cpp.
#include "mgt/planner/spmd.hpp"

#include "mgt/ir/json_fields.hpp"

#include <nlohmann/json.hpp>

namespace mgt::plan {

using json = nlohmann::json;

json to_json(const SpmdPlansReport& r) {
  json plans = json::array();
  for (const SpmdEstimate& e : r.result.plans)
    plans.push_back({{"plan", to_json(e.plan)},
                     {"step_time_s", e.step_s},
                     {"compute_s", e.compute_s},
                     {"comm_s", e.comm_s},
                     {"peak_bytes", e.peak_bytes},
                     {"collectives", e.collectives}});
  return {{"format", kSpmdPlansFormat},      {"model", r.model_path},          {"gpus", r.num_gpus},
          {"cluster", r.gpu},                {"evaluated", r.result.evaluated}, {"feasible", r.result.feasible},
          {"rejected", r.result.rejected},   {"plans", std::move(plans)}};
}

SpmdPlansReport spmd_plans_report_from_json(const json& doc, const std::string& source) {
  ir::require_format(doc, kSpmdPlansFormat, source);
  SpmdPlansReport r;
  r.model_path = ir::require_string(doc, "model", source);
  r.num_gpus = ir::require_positive_int(doc, "gpus", source);
  r.gpu = ir::require_string(doc, "cluster", source);
  r.result.evaluated = ir::require_nonnegative_int(doc, "evaluated", source);
  r.result.feasible = ir::require_nonnegative_int(doc, "feasible", source);
  const json& rejected = ir::require_object(doc, "rejected", source);
  for (const auto& item : rejected.items())
    r.result.rejected[item.key()] = ir::require_nonnegative_int(rejected, item.key(), source + ": rejected");
  const json& plans = ir::require_array(doc, "plans", source);
  for (size_t i = 0; i < plans.size(); ++i) {
    const std::string where = source + ": plans[" + std::to_string(i) + "]";
    const json& p = plans[i];
    SpmdEstimate e;
    e.plan = spmd_plan_from_json(ir::require_object(p, "plan", where), where + ": plan");
    e.step_s = ir::require_finite_number(p, "step_time_s", where);
    e.compute_s = ir::require_finite_number(p, "compute_s", where);
    e.comm_s = ir::require_finite_number(p, "comm_s", where);
    e.peak_bytes = ir::require_nonnegative_int(p, "peak_bytes", where);
    e.collectives = ir::require_nonnegative_int(p, "collectives", where);
    r.result.plans.push_back(std::move(e));
  }
  return r;
}

}  // namespace mgt::plan
