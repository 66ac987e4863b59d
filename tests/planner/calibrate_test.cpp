// Tests for planner/calibrate.hpp: the coordinate-descent fit recovers a constant it did not start
// from, the robust objective ignores gross outliers that least squares follows, the loss, source
// weights and prior penalty against hand-computed values, leave-one-source-out never lets the
// left-out source into its own fit, parameter scopes reach only their rows, and Spearman's rank
// correlation against hand-computed values (with ties).
#include "mgt/planner/calibrate.hpp"

#include "mgt/ir/error.hpp"
#include "validation_hardware.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iterator>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using mgt::test::h100_block;
using mgt::plan::CalibrationSet;
using mgt::plan::FittedParameter;
using mgt::plan::ValidationSource;

/// A small Llama-like row on H100s; `hidden` and `gpus` vary the shapes so the rows differ.
json row(const std::string& id, int64_t hidden, int64_t gpus, double iteration_time_s) {
  json r = json::parse(R"({
    "system": "h100",
    "model": {"name": "Llama-mini", "type": "dense", "num_layers": 4, "num_attention_heads": 16,
              "num_kv_heads": 8, "ffn_hidden_size": 8192, "vocab_size": 32000, "seq_length": 2048,
              "activation": "swiglu", "normalization": "rmsnorm", "tied_embeddings": false},
    "training": {"global_batch_size_seqs": 64, "micro_batch_size": 2, "seq_length": 2048},
    "parallel": {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "zero_stage": 1},
    "recompute": "none", "precision": "bf16"})");
  r["id"] = id;
  r["model"]["hidden_size"] = hidden;
  r["model"]["head_dim"] = hidden / 16;
  r["parallel"]["num_gpus"] = gpus;
  r["parallel"]["dp"] = gpus;
  r["measured"] = {{"iteration_time_s", iteration_time_s}};
  return r;
}

ValidationSource source_of(const std::string& name, std::vector<json> rows) {
  json doc{{"source", name + " (synthetic)"}, {"hardware", {{"h100", h100_block()}}}, {"rows", rows}};
  return mgt::plan::validation_source_from_json(doc, name + ".json");
}

mgt::ir::GpuSpec hopper_gpu() {
  mgt::ir::GpuSpec gpu;
  gpu.arch = mgt::ir::GpuArch::hopper;
  return gpu;
}

/// The only fitted parameter of these tests: hopper's GEMM efficiency, bounded as in the real table.
std::vector<FittedParameter> gemm_only() {
  return {{"hopper.gemm_max_efficiency", {mgt::ir::GpuArch::hopper, std::nullopt}, &mgt::cost::CostParams::gemm_max_efficiency, 0.3, 0.85, nullptr, std::nullopt}};
}

/// Sets each row's measured iteration time to what the estimator predicts with hopper GEMMs at
/// `gemm_efficiency` times `scale`: data a fit of that constant should explain exactly (scale 1).
ValidationSource measured_at(const std::string& name, double gemm_efficiency, double scale) {
  std::vector<json> rows{row(name + "_a", 1024, 8, 1), row(name + "_b", 2048, 8, 1), row(name + "_c", 2048, 16, 1),
                         row(name + "_d", 4096, 16, 1)};
  mgt::cost::CostParams params = mgt::cost::default_cost_params(hopper_gpu());
  params.gemm_max_efficiency = gemm_efficiency;
  const ValidationSource draft = source_of(name, rows);
  for (auto& r : rows) {
    const auto results = mgt::plan::validate_prepared(mgt::plan::prepare_row(draft, r), params);
    EXPECT_FALSE(results.front().skipped) << r["id"] << ": " << results.front().skipped.value_or("");
    r["measured"]["iteration_time_s"] = *results.front().predicted * scale;
  }
  return source_of(name, rows);
}

TEST(Calibrate, FitRecoversTheGemmEfficiencyThatMadeTheMeasurements) {
  const CalibrationSet set({measured_at("synthetic", 0.62, 1.0)}, gemm_only());
  mgt::plan::FitOptions options;
  options.max_rounds = 20;
  const auto result = mgt::plan::fit(set, {0}, {0.45}, options);
  // The smallest step is 5 %: the fit lands within one step of the truth, with the errors near zero.
  EXPECT_NEAR(result.values[0], 0.62, 0.05 * 0.62);
  EXPECT_LT(result.score.time_median, 0.03);
  EXPECT_GT(result.start.time_median, 0.10) << "the start must be visibly wrong for the test to mean anything";
  EXPECT_EQ(result.score.time_rows, 4);
}

TEST(Calibrate, FitStaysWithinTheParameterBounds) {
  // Measurements 3x slower than anything the bounds allow: the fit stops at the lower bound.
  // Huber (the default, convex): every row pulls the same way, down to the bound.
  const CalibrationSet set({measured_at("slow", 0.62, 3.0)}, gemm_only());
  mgt::plan::FitOptions options;
  EXPECT_DOUBLE_EQ(mgt::plan::fit(set, {0}, {0.5}).values[0], 0.3);
  options.objective.loss = mgt::plan::Objective::Loss::biweight;
  // The biweight gives rows beyond its scale no pull: when no allowed value comes
  // within it of any row (3x slower is ln 3 = 1.1 away at 0.62), only the prior (0.70) pulls.
  EXPECT_NEAR(mgt::plan::fit(set, {0}, {0.5}, options).values[0], 0.70, 0.05 * 0.70);
}

TEST(Calibrate, LeftOutSourceNeverInfluencesItsOwnFit) {
  // Source "a" is measured at GEMM efficiency 0.62; "b" once at 0.62 too and once absurdly (8x slower).
  // b's out-of-sample fit comes from a alone, so b's own measurements cannot move it; a's comes from b
  // alone, so the absurd b must move it (otherwise the check below could not fail).
  const auto a = measured_at("a", 0.62, 1.0);
  const CalibrationSet sane({a, measured_at("b", 0.62, 1.0)}, gemm_only());
  const CalibrationSet absurd({a, measured_at("b", 0.62, 8.0)}, gemm_only());
  mgt::plan::FitOptions options;
  options.max_rounds = 20;
  const auto cv_sane = mgt::plan::cross_validate(sane, {0.45}, options);
  const auto cv_absurd = mgt::plan::cross_validate(absurd, {0.45}, options);
  ASSERT_EQ(cv_sane.folds.size(), 2u);
  ASSERT_TRUE(cv_sane.folds[1].fit && cv_absurd.folds[1].fit);
  EXPECT_EQ(cv_sane.folds[1].fit->values, cv_absurd.folds[1].fit->values);
  ASSERT_EQ(cv_sane.folds[1].out_of_sample.size(), cv_absurd.folds[1].out_of_sample.size());
  for (size_t i = 0; i < cv_sane.folds[1].out_of_sample.size(); ++i)
    EXPECT_EQ(cv_sane.folds[1].out_of_sample[i].predicted, cv_absurd.folds[1].out_of_sample[i].predicted);
  // And the fold's fit is the fit on the other source alone, done independently.
  const CalibrationSet only_a({a}, gemm_only());
  EXPECT_EQ(cv_sane.folds[1].fit->values, mgt::plan::fit(only_a, {0}, {0.45}, options).values);

  // a's out-of-sample prediction follows b: sane b gives ~0 error, absurd b pins the bound 0.3.
  EXPECT_NE(cv_sane.folds[0].fit->values, cv_absurd.folds[0].fit->values);
  EXPECT_DOUBLE_EQ(cv_absurd.folds[0].fit->values[0], 0.3);
  EXPECT_LT(std::abs(*cv_sane.folds[0].out_of_sample.front().error), 0.03);
  EXPECT_GT(std::abs(*cv_absurd.folds[0].out_of_sample.front().error), 0.2);
}

/// `rows` measured at `scale` times what the calibration set predicts for them with hopper GEMMs at
/// 0.62 (CalibrationSet::results, the path the fit estimates them by, so a ratio is exact).
ValidationSource measured_exactly(const std::string& name, std::vector<json> rows, const std::vector<double>& scale) {
  const CalibrationSet draft({source_of(name, rows)}, gemm_only());
  const auto results = draft.results(0, {0.62});
  EXPECT_EQ(results.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_FALSE(results[i].skipped) << results[i].skipped.value_or("");
    rows[i]["measured"]["iteration_time_s"] = *results[i].predicted * scale.at(i);
  }
  return source_of(name, rows);
}

/// One shape measured `rows` times at the truth (GEMM efficiency 0.62), the last `outliers` of them
/// `outlier_factor` times slower (runs whose physics the model lacks).
ValidationSource repeated_with_outliers(int rows, int outliers, double outlier_factor) {
  std::vector<json> out;
  std::vector<double> scale;
  for (int i = 0; i < rows; ++i) {
    out.push_back(row("r" + std::to_string(i), 4096, 16, 1));
    scale.push_back(i < rows - outliers ? 1.0 : outlier_factor);
  }
  return measured_exactly("repeated", out, scale);
}

/// The fitted iteration time over the measured one of an inlier row (the first).
double inlier_ratio(const CalibrationSet& set, const std::vector<double>& values) {
  const auto results = set.results(0, values);
  return 1.0 + *results.front().error;
}

TEST(Calibrate, RobustFitIgnoresGrossOutliersThatLeastSquaresFollows) {
  // Eight runs of one shape: six measured at the truth (GEMM efficiency 0.62), two 3x slower.
  // Every row has the same prediction t(theta), so the objective depends on theta only through
  // x = ln(t(theta) / t_true), the inliers' residual; the outliers' residual is x - ln 3.
  //  - least squares: 6 x^2/2 + 2 (x - ln 3)^2/2 is least at x = (2/8) ln 3, i.e. the fit predicts
  //    the inliers 3^(1/4) = 1.316 x their time, whatever the estimator's shape of t(theta);
  //  - Huber (scale c = 0.35 < ln 3 - x): 6 x - 2 c = 0, x = c/3, a ratio e^(0.35/3) = 1.124;
  //  - biweight (c = 0.35): the outliers, ln 3 - x > c away, cost a constant c^2/6 and pull not at
  //    all; x = 0, the truth (the other minimum, x = ln 3, costs 6 c^2/6 > 2 c^2/6).
  const CalibrationSet set({repeated_with_outliers(8, 2, 3.0)}, gemm_only());
  mgt::plan::FitOptions options;
  options.max_rounds = 30;
  options.objective.prior_weight = 0;  // the pull of the prior 0.70 is tested separately
  const double step = 0.04;  // the coordinate search lands within a 5 % step of theta; t moves less
  options.objective.loss = mgt::plan::Objective::Loss::squared;
  const auto squared = mgt::plan::fit(set, {0}, {0.45}, options);
  EXPECT_NEAR(inlier_ratio(set, squared.values), std::pow(3.0, 0.25), step);
  EXPECT_LT(squared.values[0], 0.62 * 0.85) << "least squares should be dragged well off the truth";
  options.objective.loss = mgt::plan::Objective::Loss::huber;
  const auto huber = mgt::plan::fit(set, {0}, {0.45}, options);
  EXPECT_NEAR(inlier_ratio(set, huber.values), std::exp(0.35 / 3), step);
  options.objective.loss = mgt::plan::Objective::Loss::biweight;
  const auto biweight = mgt::plan::fit(set, {0}, {0.45}, options);
  EXPECT_NEAR(inlier_ratio(set, biweight.values), 1.0, step);
  EXPECT_NEAR(biweight.values[0], 0.62, 0.05 * 0.62);
  EXPECT_NEAR(biweight.score.time_median, 0.0, step);  // six of eight rows right

  // Bounded influence: the outliers 6x slower instead of 3x. Least squares follows them further,
  // to 6^(1/4) = 1.565 (or the bound 0.3, whichever comes first); Huber's pull per outlier is c
  // however far off it is, so its fit is the same x = c/3.
  const CalibrationSet farther({repeated_with_outliers(8, 2, 6.0)}, gemm_only());
  options.objective.loss = mgt::plan::Objective::Loss::huber;
  EXPECT_NEAR(inlier_ratio(farther, mgt::plan::fit(farther, {0}, {0.45}, options).values), std::exp(0.35 / 3), step);
  options.objective.loss = mgt::plan::Objective::Loss::squared;
  const auto squared_farther = mgt::plan::fit(farther, {0}, {0.45}, options);
  EXPECT_GT(inlier_ratio(farther, squared_farther.values), std::pow(3.0, 0.25) + 2 * step);
  EXPECT_TRUE(squared_farther.values[0] == 0.3 || std::abs(inlier_ratio(farther, squared_farther.values) - std::pow(6.0, 0.25)) < step);
}

TEST(Calibrate, LossMatchesHandComputedValues) {
  mgt::plan::Objective o;
  o.scale = 0.4;
  o.loss = mgt::plan::Objective::Loss::squared;
  EXPECT_DOUBLE_EQ(o.rho(-0.6), 0.18);  // 0.36 / 2
  o.loss = mgt::plan::Objective::Loss::huber;
  EXPECT_DOUBLE_EQ(o.rho(0.2), 0.02);               // inside: 0.04 / 2
  EXPECT_NEAR(o.rho(-1.0), 0.4 * (1.0 - 0.2), 1e-15);  // beyond: c (|r| - c/2) = 0.32
  o.loss = mgt::plan::Objective::Loss::biweight;
  // c^2/6 = 0.16/6; at r = c/2, 1 - (1 - 1/4)^3 = 37/64 of it; beyond c, all of it.
  EXPECT_NEAR(o.rho(0.2), 0.16 / 6 * 37.0 / 64.0, 1e-15);
  EXPECT_NEAR(o.rho(-0.4), 0.16 / 6, 1e-15);
  EXPECT_NEAR(o.rho(5.0), 0.16 / 6, 1e-15);
  EXPECT_DOUBLE_EQ(o.rho(0.0), 0.0);
}

TEST(Calibrate, SourceWeightsAndPriorPenaltyMatchHandComputedObjective) {
  // Source "big": 4 rows measured at half the time predicted at 0.62 (r = ln 2 each); source "small":
  // 1 row measured at the prediction (r = 0). Squared loss, L = (ln 2)^2 / 2 per big row:
  //   exponent 0 (rows alike):    (4 L + 0) / 5                    = 0.8 L
  //   exponent 1 (sources alike): (1/4 * 4 L + 1 * 0) / (1/4 * 4 + 1) = 0.5 L
  //   exponent 1/2:               (1/2 * 4 L) / (1/2 * 4 + 1)         = 2/3 L
  // Prior penalty at 0.62 (prior 0.70, bounds 0.3 .. 0.85): w * (0.08 / 0.55)^2.
  std::vector<json> big{row("b1", 1024, 8, 1), row("b2", 2048, 8, 1), row("b3", 2048, 16, 1), row("b4", 4096, 16, 1)};
  const CalibrationSet set({measured_exactly("big", big, {0.5, 0.5, 0.5, 0.5}), measured_exactly("small", {row("s1", 4096, 8, 1)}, {1.0})},
                           gemm_only());
  const double L = std::log(2.0) * std::log(2.0) / 2;
  mgt::plan::Objective o;
  o.loss = mgt::plan::Objective::Loss::squared;
  o.prior_weight = 0;
  for (const auto& [exponent, expected] : {std::pair{0.0, 0.8 * L}, std::pair{1.0, 0.5 * L}, std::pair{0.5, 2.0 / 3.0 * L}}) {
    o.source_weight_exponent = exponent;
    const auto score = set.score({0, 1}, {0.62}, o);
    EXPECT_NEAR(score.loss, expected, 1e-9 * expected) << "exponent " << exponent;
    EXPECT_EQ(score.prior_penalty, 0.0);
  }
  o.prior_weight = 0.1;
  EXPECT_NEAR(set.score({0, 1}, {0.62}, o).prior_penalty, 0.1 * (0.08 / 0.55) * (0.08 / 0.55), 1e-12);
  EXPECT_NEAR(set.score({0, 1}, {0.70}, o).prior_penalty, 0.0, 1e-15);
  // Only the chosen sources count: "small" alone is exact.
  EXPECT_NEAR(set.score({1}, {0.62}, o).loss, 0.0, 1e-9);
}

TEST(Calibrate, ScopeReachesOnlyItsGeneration) {
  const CalibrationSet set({}, gemm_only());
  mgt::ir::GpuSpec ampere;
  ampere.arch = mgt::ir::GpuArch::ampere;
  const auto fsdp = mgt::cost::default_framework_profile();
  const auto on_ampere = set.params_for({mgt::ir::GpuArch::ampere, fsdp.name}, ampere, fsdp, {0.77});
  EXPECT_DOUBLE_EQ(on_ampere.gemm_max_efficiency, mgt::cost::default_cost_params(ampere).gemm_max_efficiency);
  EXPECT_DOUBLE_EQ(set.params_for({mgt::ir::GpuArch::hopper, fsdp.name}, hopper_gpu(), fsdp, {0.77}).gemm_max_efficiency, 0.77);
}

TEST(Calibrate, ProfileScopeReachesOnlyItsFramework) {
  // A profile member reaches cost constants through cost_params_for, on that framework's rows only.
  mgt::plan::FittedParameter host;
  host.name = "megatron-core.host_overhead_per_microbatch_s";
  host.scope.framework = "megatron-core";
  host.lower = 0;
  host.upper = 20e-3;
  host.profile_member = &mgt::cost::FrameworkProfile::host_overhead_per_microbatch_s;
  const CalibrationSet set({}, {host});
  const auto mcore = mgt::cost::select_framework("megatron-core").profile;
  const auto fsdp = mgt::cost::default_framework_profile();
  EXPECT_DOUBLE_EQ(set.params_for({mgt::ir::GpuArch::hopper, "megatron-core"}, hopper_gpu(), mcore, {7e-3})
                       .per_microbatch_overhead_s,
                   7e-3);
  EXPECT_DOUBLE_EQ(set.params_for({mgt::ir::GpuArch::hopper, fsdp.name}, hopper_gpu(), fsdp, {7e-3}).per_microbatch_overhead_s,
                   fsdp.host_overhead_per_microbatch_s);
}

TEST(Calibrate, CalibratedParametersAreBoundedAndStartInsideTheirBounds) {
  const auto parameters = mgt::plan::calibrated_parameters();
  const auto start = mgt::plan::shipped_values(parameters);
  ASSERT_EQ(parameters.size(), start.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    EXPECT_LT(parameters[i].lower, parameters[i].upper) << parameters[i].name;
    EXPECT_GE(start[i], parameters[i].lower) << parameters[i].name;
    EXPECT_LE(start[i], parameters[i].upper) << parameters[i].name;
  }
}

TEST(Calibrate, FittedParametersAreSharedByEveryFramework) {
  // A fitted member is one value for every profile (scoped at most by GPU generation), so a source
  // alone in its profile is still predicted with values fitted on the other sources; its prior is
  // the documented one (kProfileFits), inside its bounds, and no profile's shipped value differs.
  const auto parameters = mgt::plan::calibrated_parameters();
  const auto prior = mgt::plan::prior_values(parameters);
  ASSERT_EQ(parameters.size(), std::size(mgt::cost::kProfileFits));
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& fit = mgt::cost::kProfileFits[i];
    EXPECT_FALSE(parameters[i].scope.framework.has_value()) << parameters[i].name;
    EXPECT_EQ(parameters[i].scope.arch, fit.arch) << parameters[i].name;
    EXPECT_DOUBLE_EQ(prior[i], fit.prior) << parameters[i].name;
    EXPECT_GE(prior[i], fit.lo) << parameters[i].name;
    EXPECT_LE(prior[i], fit.hi) << parameters[i].name;
    const double shipped = mgt::cost::FrameworkProfile{}.*fit.member;
    for (const auto& name : mgt::cost::framework_profile_names())
      EXPECT_EQ(mgt::cost::framework_profile(name).*fit.member, shipped) << name << " " << fit.name;
  }
}

TEST(Calibrate, EmptyBoundsAreRefused) {
  auto parameters = gemm_only();
  parameters[0].lower = 0.9;
  EXPECT_THROW(CalibrationSet({}, parameters), mgt::ir::InputError);
}

TEST(Spearman, MatchesHandComputedValueWithTies) {
  // x ranks 1, 2.5, 2.5, 4, 5; y ranks 2, 1, 3.5, 3.5, 5 (mean 3):
  // sum dx*dy = 2 + 1 - 0.25 + 0.5 + 4 = 7.25; sum dx^2 = sum dy^2 = 9.5 -> 7.25 / 9.5 = 29/38.
  const auto rho = mgt::plan::spearman({1, 2, 2, 3, 5}, {2, 1, 4, 4, 5});
  ASSERT_TRUE(rho.has_value());
  EXPECT_NEAR(*rho, 29.0 / 38.0, 1e-12);
  EXPECT_NEAR(*mgt::plan::spearman({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0, 1e-12);
  EXPECT_NEAR(*mgt::plan::spearman({1, 10, 100, 1000}, {1, 2, 3, 4}), 1.0, 1e-12);  // ranks, not values
  EXPECT_FALSE(mgt::plan::spearman({1, 1, 1}, {1, 2, 3}).has_value());              // no spread
  EXPECT_FALSE(mgt::plan::spearman({1}, {1}).has_value());
}

TEST(Spearman, ThroughputPerGpuInvertsTheIterationTime) {
  mgt::plan::ValidationResult r;
  r.kind = mgt::plan::MetricKind::throughput;
  r.estimate = mgt::cost::Estimate{};
  r.estimate->tokens_per_s_per_gpu = 100;
  r.error = 0.25;  // predicted 25 % above measured
  r.metric = "mfu";
  EXPECT_DOUBLE_EQ(mgt::plan::throughput_per_gpu(r)->first, 80.0);  // measured rate = 100 / 1.25
  r.metric = "iteration_time_s";                                     // predicted time 25 % too long
  EXPECT_DOUBLE_EQ(mgt::plan::throughput_per_gpu(r)->first, 125.0);
  r.skipped = "no";
  EXPECT_FALSE(mgt::plan::throughput_per_gpu(r).has_value());
}

}  // namespace
