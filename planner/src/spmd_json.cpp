// mgt.spmd_plans/2 <-> SpmdPlansReport (spmd.hpp; docs/formats.md). mgt.spmd_plan/1 itself is in spmd.cpp.
#include "mgt/planner/spmd.hpp"

#include "mgt/ir/json_fields.hpp"

#include <nlohmann/json.hpp>

namespace mgt::plan {

using json = nlohmann::json;

namespace {

// The scalar fields of mgt.spmd_plans/2, for the writer and the reader below.
constexpr ir::JsonField<SpmdPlansReport> kReportFields[] = {
    {"model", &SpmdPlansReport::model_path},
    {"gpus", &SpmdPlansReport::num_gpus, ir::kPositive},
    {"cluster", &SpmdPlansReport::gpu}};

constexpr ir::JsonField<SpmdSearchResult> kSearchFields[] = {
    {"evaluated", &SpmdSearchResult::evaluated}, {"feasible", &SpmdSearchResult::feasible}};

constexpr ir::JsonField<SpmdEstimate> kEstimateFields[] = {
    {"step_time_s", &SpmdEstimate::step_s}, {"compute_s", &SpmdEstimate::compute_s},
    {"comm_s", &SpmdEstimate::comm_s},      {"peak_bytes", &SpmdEstimate::peak_bytes},
    {"collectives", &SpmdEstimate::collectives}};

}  // namespace

json to_json(const SpmdPlansReport& r) {
  json plans = json::array();
  for (const SpmdEstimate& e : r.result.plans) {
    json plan = json::object();
    plan["plan"] = to_json(e.plan);
    ir::write_fields(e, kEstimateFields, plan);
    plans.push_back(std::move(plan));
  }
  json doc = {{"format", kSpmdPlansFormat}, {"rejected", r.result.rejected}, {"plans", std::move(plans)}};
  ir::write_fields(r, kReportFields, doc);
  ir::write_fields(r.result, kSearchFields, doc);
  return doc;
}

SpmdPlansReport spmd_plans_report_from_json(const json& doc, const std::string& source) {
  ir::require_format(doc, kSpmdPlansFormat, source);
  SpmdPlansReport r;
  ir::read_fields(doc, kReportFields, source, r);
  ir::read_fields(doc, kSearchFields, source, r.result);
  r.result.rejected = ir::require_counts(doc, "rejected", source);
  const json& plans = ir::require_array(doc, "plans", source);
  for (size_t i = 0; i < plans.size(); ++i) {
    const std::string where = source + ": plans[" + std::to_string(i) + "]";
    SpmdEstimate e;
    e.plan = spmd_plan_from_json(ir::require_object(plans[i], "plan", where), where + ": plan");
    ir::read_fields(plans[i], kEstimateFields, where, e);
    r.result.plans.push_back(std::move(e));
  }
  return r;
}

}  // namespace mgt::plan
