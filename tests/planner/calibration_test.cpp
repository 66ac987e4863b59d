// The calibration bounds of issue 3 on the published measurements in examples/validation: a change
// to the cost model that makes predictions worse than these fails CI (docs/calibration.md).
#include "mgt/planner/validate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace mgt::plan {
namespace {

std::vector<ValidationResult> all_results() {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MGT_SOURCE_DIR) + "/examples/validation"))
    if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<ValidationResult> out;
  for (const auto& path : paths) {
    const ValidationSource source = read_validation_source(path);
    if (source.catalog) continue;
    auto results = validate_source(source);
    out.insert(out.end(), results.begin(), results.end());
  }
  return out;
}

std::vector<double> absolute_errors(const std::vector<ValidationResult>& results, MetricKind kind) {
  std::vector<double> out;
  for (const auto& r : results)
    if (!r.skipped && r.kind == kind && r.error) out.push_back(std::abs(*r.error));
  return out;
}

TEST(Calibration, ThroughputMedianWithinTenPercentAndP90WithinTwentyFive) {
  const auto results = all_results();
  const auto errors = absolute_errors(results, MetricKind::throughput);
  ASSERT_GE(errors.size(), 300u) << "the calibration set shrank: rows are being skipped";
  EXPECT_LE(percentile(errors, 0.5), 0.10);
  EXPECT_LE(percentile(errors, 0.9), 0.25);
}

TEST(Calibration, MemoryMedianWithinTenPercent) {
  const auto errors = absolute_errors(all_results(), MetricKind::memory);
  ASSERT_GE(errors.size(), 60u);
  EXPECT_LE(percentile(errors, 0.5), 0.10);
}

TEST(Calibration, EveryOomRowIsPredictedNotToFit) {
  int oom_rows = 0;
  for (const auto& r : all_results()) {
    if (r.skipped || r.kind != MetricKind::oom) continue;
    ++oom_rows;
    ASSERT_TRUE(r.error.has_value()) << r.id;
    EXPECT_EQ(*r.error, 0.0) << r.id << " is measured OOM but predicted to fit";
  }
  EXPECT_GE(oom_rows, 3);
}

TEST(Calibration, EveryRowIsComparedOrSkippedWithAReason) {
  for (const auto& r : all_results()) {
    if (r.skipped) {
      EXPECT_FALSE(r.skipped->empty()) << r.id;
    } else {
      EXPECT_TRUE(r.predicted && r.measured && r.error) << r.id;
    }
  }
}

}  // namespace
}  // namespace mgt::plan
