// mgt.plans/1 <-> PlansReport (plans_report.hpp; docs/formats.md).
#include "mgt/planner/plans_report.hpp"

#include "mgt/cost_model/breakdown_json.hpp"
#include "mgt/ir/json_fields.hpp"

namespace mgt::plan {

using json = nlohmann::json;

PlannedModel planned_model(const ir::Graph& graph, const std::string& model_path) {
  const auto counts = ir::count_parameters(graph);
  PlannedModel m{graph.info.name, model_path, graph.info.architecture, counts.total, std::nullopt};
  if (graph.info.num_experts > 0) m.params_active = counts.active;
  return m;
}

PlannedCluster planned_cluster(const ir::ClusterSpec& cluster, int64_t num_gpus) {
  return {cluster.name, cluster.gpu.name, num_gpus, cluster.gpus_per_node, cluster.gpu.hbm_bytes};
}

PlannedSettings planned_settings(const cost::TrainingSettings& settings) {
  PlannedSettings s;
  s.seq_len = settings.seq_len;
  s.global_batch_tokens = settings.global_batch_tokens;
  s.global_batch_seqs = settings.global_batch_seqs();
  s.compute_dtype = ir::to_string(settings.compute_dtype);
  s.fp8_linears = settings.fp8_linears;
  return s;
}

PlansReport make_plans_report(const ir::Graph& graph, const std::string& model_path, const ir::ClusterSpec& cluster,
                              int64_t num_gpus, const cost::TrainingSettings& settings, const SearchResult& result) {
  PlansReport r{planned_model(graph, model_path), planned_cluster(cluster, num_gpus), planned_settings(settings),
                {}, result.evaluated, result.rejected};
  for (size_t i = 0; i < result.plans.size(); ++i)
    r.plans.push_back({int64_t(i) + 1, cluster.gpu.hbm_bytes, result.plans[i]});
  return r;
}

namespace {

// The scalar fields of "model", "cluster" and "settings", for the writers and the readers below.
constexpr ir::JsonField<PlannedModel> kModelFields[] = {
    {"name", &PlannedModel::name},                 {"path", &PlannedModel::path},
    {"architecture", &PlannedModel::architecture}, {"params_total", &PlannedModel::params_total}};

constexpr ir::JsonField<PlannedCluster> kClusterFields[] = {
    {"name", &PlannedCluster::name}, {"gpu", &PlannedCluster::gpu},
    {"num_gpus", &PlannedCluster::num_gpus, ir::kPositive},
    {"gpus_per_node", &PlannedCluster::gpus_per_node, ir::kPositive},
    {"hbm_bytes", &PlannedCluster::hbm_bytes, ir::kPositive}};

constexpr ir::JsonField<PlannedSettings> kSettingsFields[] = {
    {"seq_len", &PlannedSettings::seq_len, ir::kPositive},
    {"global_batch_tokens", &PlannedSettings::global_batch_tokens, ir::kPositive},
    {"global_batch_seqs", &PlannedSettings::global_batch_seqs, ir::kPositive},
    {"compute_dtype", &PlannedSettings::compute_dtype},   {"fp8_linears", &PlannedSettings::fp8_linears},
    {"master_weights_dtype", &PlannedSettings::master_weights_dtype},
    {"gradients_dtype", &PlannedSettings::gradients_dtype}, {"optimizer", &PlannedSettings::optimizer}};

}  // namespace

json to_json(const PlannedModel& m) {
  json j = json::object();
  ir::write_fields(m, kModelFields, j);
  if (m.params_active) j["params_active"] = *m.params_active;
  return j;
}

json to_json(const PlannedCluster& c) {
  json j = json::object();
  ir::write_fields(c, kClusterFields, j);
  return j;
}

json to_json(const PlannedSettings& s) {
  json j = json::object();
  ir::write_fields(s, kSettingsFields, j);
  j["mesh_order"] = s.mesh_order;
  return j;
}

json to_json(const RankedEstimate& entry) {
  json j = cost::to_json(entry.estimate);  // every key of the Estimate, one spelling per term
  j["rank"] = entry.rank;
  j["memory"]["hbm_bytes"] = entry.hbm_bytes;
  j["memory"]["headroom_bytes"] = entry.hbm_bytes - entry.estimate.memory.peak_bytes;
  return j;
}

json to_json(const PlansReport& r) {
  json plans = json::array();
  for (const RankedEstimate& e : r.plans) plans.push_back(to_json(e));
  return {{"format", kPlansFormat},   {"model", to_json(r.model)}, {"cluster", to_json(r.cluster)},
          {"settings", to_json(r.settings)}, {"plans", std::move(plans)}, {"evaluated", r.evaluated},
          {"rejected", r.rejected}};
}

namespace {

PlannedModel planned_model_from_json(const json& doc, const std::string& source) {
  PlannedModel m;
  ir::read_fields(doc, kModelFields, source, m);
  if (doc.contains("params_active")) m.params_active = ir::require_nonnegative_int(doc, "params_active", source);
  return m;
}

PlannedSettings planned_settings_from_json(const json& doc, const std::string& source) {
  PlannedSettings s;
  ir::read_fields(doc, kSettingsFields, source, s);
  s.mesh_order.clear();
  for (const json& axis : ir::require_array(doc, "mesh_order", source)) {
    if (!axis.is_string()) throw ir::InputError(source, "mesh_order", "expected mesh axis names, got " + axis.dump());
    s.mesh_order.push_back(axis.get<std::string>());
  }
  return s;
}

}  // namespace

RankedEstimate ranked_estimate_from_json(const json& doc, const std::string& source) {
  if (!doc.is_object()) throw ir::InputError(source, "", "expected an object (an mgt.plans/1 entry)");
  RankedEstimate e;
  e.rank = ir::require_positive_int(doc, "rank", source);
  e.estimate = cost::estimate_from_json(doc, source);  // plan, step time, memory and time terms, ...
  const json& memory = ir::require_object(doc, "memory", source);
  e.hbm_bytes = ir::require_positive_int(memory, "hbm_bytes", source + ": memory");
  const json headroom = memory.value("headroom_bytes", json());
  if (!headroom.is_number_integer())
    throw ir::InputError(source + ": memory", "headroom_bytes", "missing or not an integer", "hbm_bytes - peak_bytes");
  if (headroom.get<int64_t>() != e.hbm_bytes - e.estimate.memory.peak_bytes)
    throw ir::InputError(source + ": memory", "headroom_bytes",
                         headroom.dump() + " is not hbm_bytes - peak_bytes = " +
                             std::to_string(e.hbm_bytes - e.estimate.memory.peak_bytes));
  return e;
}

PlansReport plans_report_from_json(const json& doc, const std::string& source) {
  ir::require_format(doc, kPlansFormat, source);
  PlansReport r;
  r.model = planned_model_from_json(ir::require_object(doc, "model", source), source + ": model");
  ir::read_fields(ir::require_object(doc, "cluster", source), kClusterFields, source + ": cluster", r.cluster);
  r.settings = planned_settings_from_json(ir::require_object(doc, "settings", source), source + ": settings");
  const json& plans = ir::require_array(doc, "plans", source);
  for (size_t i = 0; i < plans.size(); ++i)
    r.plans.push_back(ranked_estimate_from_json(plans[i], source + ": plans[" + std::to_string(i) + "]"));
  r.evaluated = ir::require_nonnegative_int(doc, "evaluated", source);
  r.rejected = ir::require_counts(doc, "rejected", source);
  return r;
}

}  // namespace mgt::plan
