// `mgt-plan validate` on kernel-level files (../shared/validation/kernels/*.json: GEMM, attention,
// collectives, memory/launch): each row's measured number against the kernel model
// (cost_model/kernel_model.hpp), per-category and per-GPU error summaries, and a skip reason for
// every row that cannot be compared. A kernel file is recognised by its top-level "category" key.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mgt::plan {

/// One compared (or skipped) measurement of a row. A row can give several: attention forward and
/// backward, or a collective with NVLS on and off.
struct KernelComparison {
  std::string id;        ///< row id
  std::string category;  ///< gemm | attention | collectives | memory_launch
  std::string gpu;       ///< the row's gpu string
  std::string metric;    ///< the measured key compared, e.g. "fwd_tflops"
  std::optional<double> predicted, measured;  ///< in the row's unit (TFLOP/s, GB/s)
  std::optional<double> error;                ///< predicted / measured - 1
  std::string skipped;                        ///< the reason, when not compared
  std::vector<std::string> assumptions;       ///< defaults taken for fields the row does not state
  std::string detail;                         ///< how it was priced (tile, waves, algorithm)
};

struct KernelValidation {
  std::string path;
  std::string category;
  std::vector<KernelComparison> rows;
};

/// Whether a parsed validation document is a kernel file (an object with a string "category").
bool is_kernel_validation_doc(const nlohmann::json& doc);
/// Reads `path` and says whether it is a kernel file; false for files that do not parse as JSON.
bool is_kernel_validation_file(const std::string& path);

KernelValidation validate_kernel_doc(const nlohmann::json& doc, const std::string& path);
KernelValidation validate_kernel_file(const std::string& path);

struct KernelErrorStats {
  int count = 0;
  double median_abs_pct = 0, p90_abs_pct = 0;
};
/// |error| statistics over the compared rows of `rows` (nearest-rank p90).
KernelErrorStats kernel_error_stats(const std::vector<const KernelComparison*>& rows);

/// The text report: every row, then per category (pooled and per GPU) the summary and skip reasons.
std::string format_kernel_validation(const std::vector<KernelValidation>& files);
nlohmann::json to_json(const KernelValidation& file);

}  // namespace mgt::plan
