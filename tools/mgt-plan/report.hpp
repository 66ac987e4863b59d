// Printing: the plan table, the settings header and the rejection summary. The JSON documents are
// written by their libraries (plan::PlansReport, plan::ModelInspection; docs/formats.md).
#pragma once

#include "mgt/cost_model/estimator.hpp"
#include "mgt/planner/search.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace mgt::cli {

/// What the run was about, for headers and the JSON "model", "cluster" and "settings" objects.
struct RunContext {
  std::string model_path;
  const ir::Graph* graph = nullptr;
  const ir::ClusterSpec* cluster = nullptr;
  std::string cluster_arg;  ///< what the user passed to --cluster
  int64_t num_gpus = 0;
  cost::TrainingSettings settings;
  bool seq_len_defaulted = true;
  bool batch_defaulted = true;
};

std::string format_header(const RunContext& run);
std::string format_table(const std::vector<cost::Estimate>& plans, int64_t hbm_bytes);
std::string format_rejections(const plan::SearchResult& result);
std::string format_recommendation(const cost::Estimate& best, int64_t hbm_bytes);
/// A multi-line breakdown of one estimate (for `estimate` without --json).
std::string format_breakdown(const cost::Estimate& e, int64_t hbm_bytes);


std::string format_gib(int64_t bytes);  ///< "62.1"
/// snprintf of one number with a printf format ("%.1f"), for tables and summary lines.
std::string format_number(const char* format, double value);

/// Writes `text` to stdout when `path` is "-" or empty, else to the file `path` (binary); false when
/// the file cannot be written (the caller names what it was writing).
bool write_output(const std::string& path, const std::string& text);

}  // namespace mgt::cli
