// mgt.plans/1: the search's ranked plans (`mgt-plan MODEL --gpus N --json`) and one entry of it
// (`mgt-plan estimate ... --json`), as a struct with its writer and reader (docs/formats.md). The
// estimate's keys come from cost::to_json(Estimate) (one spelling per term: kTimeTerms, kMemoryTerms).
//
//   const plan::PlansReport report = plan::make_plans_report(graph, path, cluster, gpus, settings, result);
//   std::cout << plan::to_json(report).dump(2);   // plan::plans_report_from_json reads it back
#pragma once

#include "mgt/cost_model/estimator.hpp"
#include "mgt/planner/search.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgt::plan {

inline constexpr const char* kPlansFormat = "mgt.plans/1";

/// The document's "model" object.
struct PlannedModel {
  std::string name;
  std::string path;  ///< as given on the command line
  std::string architecture;
  int64_t params_total = 0;
  std::optional<int64_t> params_active;  ///< MoE models only
};

/// The document's "cluster" object.
struct PlannedCluster {
  std::string name;
  std::string gpu;
  int64_t num_gpus = 0;
  int64_t gpus_per_node = 0;
  int64_t hbm_bytes = 0;  ///< per GPU
};

/// The document's "settings" object: the training settings the plans were estimated under.
struct PlannedSettings {
  int64_t seq_len = 0;
  int64_t global_batch_tokens = 0;
  int64_t global_batch_seqs = 0;
  std::string compute_dtype;  ///< ir::to_string(DType)
  bool fp8_linears = false;
  std::string master_weights_dtype = "fp32";
  std::string gradients_dtype = "fp32";
  std::string optimizer = "AdamW, fp32 states";
  std::vector<std::string> mesh_order = {"pp", "dp_replicate", "dp_shard", "cp", "tp"};  ///< outermost first
};

/// One entry of "plans": the estimate, its rank (1 = best) and the GPU memory it is measured against.
/// Written beside the estimate's "memory" terms: "hbm_bytes" and "headroom_bytes" (= hbm - peak).
struct RankedEstimate {
  int64_t rank = 1;
  int64_t hbm_bytes = 0;
  cost::Estimate estimate;
};

struct PlansReport {
  PlannedModel model;
  PlannedCluster cluster;
  PlannedSettings settings;
  std::vector<RankedEstimate> plans;  ///< best first
  int64_t evaluated = 0;              ///< candidates considered
  std::map<std::string, int64_t> rejected;  ///< reason -> candidates
};

/// The "model", "cluster" and "settings" of a run of the search or the estimator.
PlannedModel planned_model(const ir::Graph& graph, const std::string& model_path);
PlannedCluster planned_cluster(const ir::ClusterSpec& cluster, int64_t num_gpus);
PlannedSettings planned_settings(const cost::TrainingSettings& settings);

/// The whole document of one search; plans ranked 1.. in the result's order.
PlansReport make_plans_report(const ir::Graph& graph, const std::string& model_path, const ir::ClusterSpec& cluster,
                              int64_t num_gpus, const cost::TrainingSettings& settings, const SearchResult& result);

/// Writers: every field, always (params_active only when set). `"format": "mgt.plans/1"` on the report.
nlohmann::json to_json(const PlannedModel& model);
nlohmann::json to_json(const PlannedCluster& cluster);
nlohmann::json to_json(const PlannedSettings& settings);
nlohmann::json to_json(const RankedEstimate& entry);
nlohmann::json to_json(const PlansReport& report);

/// Readers of what the writers write: throw ir::InputError naming `source` (the file and the object's
/// path in it) and the field that is missing, of the wrong type or inconsistent (headroom_bytes other
/// than hbm_bytes - peak_bytes); the report's reader also rejects another "format".
RankedEstimate ranked_estimate_from_json(const nlohmann::json& doc, const std::string& source);
PlansReport plans_report_from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace mgt::plan
