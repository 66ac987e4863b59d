// The validation README's throughput keys beyond the per-GPU ones: the whole-job PFLOP/s, the days to
// train 300B tokens, and a key's "_approx" variant. Each prediction is checked against the same row
// compared through another key, converted by hand (GPUs, 300e9 tokens, 86400 s per day).
#include "mgt/planner/calibrate.hpp"
#include "mgt/planner/validate.hpp"
#include "validation_rows.hpp"

#include <gtest/gtest.h>

using mgt::plan::MetricKind;
using mgt::plan::ValidationResult;
using mgt::test::gpt_row;
using mgt::test::source_with;
using nlohmann::json;

namespace {

ValidationResult compare_as(json measured) {
  json row = gpt_row();
  row["measured"] = std::move(measured);
  const auto src = source_with({row});
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  EXPECT_EQ(results.size(), 1u);
  return results.at(0);
}

}  // namespace

TEST(ValidationMetrics, AggregatePflopsIsTheJobsRateInPetaflops) {
  const ValidationResult per_gpu = compare_as({{"tflops_per_gpu", 150.0}, {"tflops_kind", "Eq.3 FLOPs incl. recompute"}});
  const ValidationResult job = compare_as({{"aggregate_pflops", 1.2}, {"tflops_kind", "Eq.3 FLOPs incl. recompute"}});
  ASSERT_FALSE(per_gpu.skipped) << *per_gpu.skipped;
  ASSERT_FALSE(job.skipped) << *job.skipped;
  EXPECT_EQ(job.metric, "aggregate_pflops");
  EXPECT_EQ(job.kind, MetricKind::throughput);
  // gpt_row runs on 8 GPUs: 8 x TFLOP/s per GPU / 1000.
  EXPECT_NEAR(*job.predicted, *per_gpu.predicted * 8 / 1000, 1e-9 * *job.predicted);
  EXPECT_DOUBLE_EQ(*job.error, (*job.predicted - 1.2) / 1.2);
}

TEST(ValidationMetrics, DaysFor300BTokensAreATimeAndRankAsOne) {
  const ValidationResult total = compare_as({{"tokens_per_sec_total", 80000.0}});
  const ValidationResult days = compare_as({{"training_days_300B_tokens", 30.0}});
  ASSERT_FALSE(days.skipped) << *days.skipped;
  EXPECT_EQ(days.metric, "training_days_300B_tokens");
  EXPECT_NEAR(*days.predicted, 300e9 / *total.predicted / 86400.0, 1e-9 * *days.predicted);
  // A row with both keeps the measured tokens/s (a day count is derived from a FLOP estimate).
  EXPECT_EQ(compare_as({{"est_training_days_300B_tokens", 30.0}, {"tokens_per_sec_total", 8e4}}).metric,
            "tokens_per_sec_total");
  // The rank order reads a time as the inverse of throughput: the measured tokens/s/GPU behind 30
  // days on 8 GPUs is 300e9 / (30 x 86400) / 8.
  const auto pair = mgt::plan::throughput_per_gpu(days);
  ASSERT_TRUE(pair);
  EXPECT_NEAR(pair->first, 300e9 / (30.0 * 86400.0) / 8.0, 1e-6 * pair->first);
  EXPECT_DOUBLE_EQ(pair->second, days.estimate->tokens_per_s_per_gpu);
  EXPECT_TRUE(mgt::plan::time_metric("iteration_time_s"));
  EXPECT_TRUE(mgt::plan::time_metric("est_training_days_300B_tokens_approx"));
  EXPECT_FALSE(mgt::plan::time_metric("tokens_per_sec_total"));
}

TEST(ValidationMetrics, AnApproximateValueIsComparedAsItsKeyAndSaysSo) {
  const ValidationResult exact = compare_as({{"tflops_per_gpu", 38.0}});
  const ValidationResult approx = compare_as({{"tflops_per_gpu_approx", 38.0}, {"aggregate_pflops_approx", 15.0}});
  ASSERT_FALSE(approx.skipped) << *approx.skipped;
  // The first key by priority, as for exact keys; its value as published.
  EXPECT_EQ(approx.metric, "tflops_per_gpu_approx");
  EXPECT_EQ(*approx.measured, 38.0);
  EXPECT_DOUBLE_EQ(*approx.predicted, *exact.predicted);
  EXPECT_TRUE(mgt::test::any_assumption_has(approx.assumptions, "approximate as published, compared as tflops_per_gpu"));
  // An exact key wins over any approximate one.
  EXPECT_EQ(compare_as({{"mfu_approx", 0.5}, {"aggregate_pflops", 1.0}}).metric, "aggregate_pflops");
  EXPECT_EQ(mgt::plan::metric_key("mfu_approx"), "mfu");
  // A lower bound is not a measurement: still no comparable metric.
  const ValidationResult bound = compare_as({{"tflops_per_gpu_lower_bound", 40.0}});
  ASSERT_TRUE(bound.skipped);
  EXPECT_NE(bound.skipped->find("no comparable metric"), std::string::npos) << *bound.skipped;
}
