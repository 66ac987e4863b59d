// Calibration of the cost model's fitted constants against published training runs
// (docs/calibration.md) and the honest score of that fit: leave-one-source-out cross-validation
// (`mgt-plan validate --cv`, docs/validation.md). A fitted parameter is a named, physically bounded
// constant with a scope saying which rows it applies to; nothing is keyed on a model, a source or a
// row. bench/calibrate.cpp prints a fit over every source; cross_validate refits once per left-out
// source and predicts it.
#pragma once

#include "mgt/cost_model/cost_params.hpp"
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/planner/validate.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mgt::plan {

/// What a scope may ask of a row. A new kind of scope adds the row's property here (filled in
/// CalibrationSet's constructor from the PreparedRow) and a condition to ParameterScope.
struct RowTraits {
  ir::GpuArch arch = ir::GpuArch::hopper;
  std::string framework;  ///< the canonical profile name the row ran under (cost::FrameworkProfile::name)
};

/// Which rows a fitted parameter applies to: every condition that is set must hold (none set: every
/// row).
struct ParameterScope {
  std::optional<ir::GpuArch> arch;       ///< one GPU generation; nullopt: all of them
  std::optional<std::string> framework;  ///< rows that ran under one framework profile; nullopt: every row

  bool applies_to(const RowTraits& row) const {
    return (!arch || *arch == row.arch) && (!framework || *framework == row.framework);
  }
  /// "all", "ampere", "megatron-core", "megatron-core.hopper" ... (the prefix of a parameter's name).
  std::string label() const;
};

/// One fitted constant: where it lives (a framework profile's fitted member, which cost_params_for
/// turns into cost constants, or a cost constant set after it), its physical bounds and its scope.
struct FittedParameter {
  std::string name;  ///< "megatron-core.comm_hidden_fraction", "hopper.gemm_max_efficiency"
  ParameterScope scope;
  double cost::CostParams::*member = nullptr;
  double lower = 0, upper = 0;  ///< what hardware or software can physically do (docs/cost-model.md §9)
  double cost::FrameworkProfile::*profile_member = nullptr;  ///< set instead of `member` for a profile's value
  std::optional<double> prior;  ///< the value before any fit (cost::ProfileFit::prior); nullopt: the member's initialiser
};

/// The parameters bench/calibrate.cpp and validate --cv fit: the framework profiles' few in-step
/// members (cost::kProfileFits, bounded there), one value for every profile, scoped by GPU generation
/// where the member is read on one generation only (so leaving a source out still fits each on the
/// other sources). The
/// hardware side (GEMM, attention, HBM and NCCL fractions) comes from the kernel model, fitted to
/// kernel measurements only, and is not refitted on training rows.
std::vector<FittedParameter> calibrated_parameters();

/// Each parameter's value in the shipped constants (the profile's table value; for a cost constant,
/// cost::default_cost_params of a GPU of the scope's generation, ampere for an all-generation one):
/// where bench/calibrate.cpp starts.
std::vector<double> shipped_values(const std::vector<FittedParameter>& parameters);
/// Each parameter's value before any fit: its `prior` (cost::kProfileFits, derived without training
/// rows), else the member initialiser of cost::CostParams. A start that remembers no source.
std::vector<double> prior_values(const std::vector<FittedParameter>& parameters);

/// How the fit weighs the rows' errors (docs/calibration.md "Objective"). A row's residual is
/// r = ln(predicted / measured), so 2x too slow and 2x too fast cost alike and a source's constant
/// offset is one shift for every row; its loss is rho(r), summed with per-row weights and divided by
/// the weights' sum; the parameters' distance from their priors is added as a mild penalty.
struct Objective {
  enum class Loss {
    squared,   ///< rho = r^2 / 2: plain least squares in log space (every row's pull grows with its error)
    huber,     ///< r^2 / 2 within `scale`, linear beyond: a far-off row pulls with a fixed force
    biweight,  ///< Tukey's biweight: a row beyond `scale` costs a constant and pulls not at all
  };
  /// Huber: convex, so the fit does not depend on where it starts, and a row's pull is bounded by
  /// `scale` however far off the row is (docs/calibration.md "Objective" for the choice).
  Loss loss = Loss::huber;
  /// |r| where the loss stops growing quadratically (huber) or at all (biweight), in log units:
  /// 0.35 = ln 1.42, beyond what the fitted in-step shares can move a row's prediction within their
  /// bounds without also moving every other row; rows further off are physics the model lacks.
  double scale = 0.35;
  /// A row weighs n_s^-exponent, n_s the compared rows of its source among the fitted ones:
  /// 0 rows alike, 1 sources alike, 0.5 a source weighs sqrt(n_s).
  double source_weight_exponent = 0.5;
  /// Penalty per parameter: prior_weight x ((value - prior) / (upper - lower))^2.
  double prior_weight = 0.002;
  double memory_weight = 0.5;  ///< the memory rows' mean loss counts this much beside the throughput rows'
  /// A row measured out of memory but predicted to fit counts as a memory row off by `scale`, times
  /// this (the largest a biweight row can cost, so no fit trades an OOM for a closer throughput).
  double oom_weight = 1.0;

  /// rho(r) of the chosen loss.
  double rho(double r) const;
};

/// The fit's objective over the compared rows, and the error statistics it is reported with
/// (fractions, not percent).
struct CalibrationScore {
  double time_median = 0, time_p90 = 0, memory_median = 0, memory_p90 = 0;
  int oom_missed = 0;  ///< rows measured out of memory but predicted to fit
  int64_t time_rows = 0, memory_rows = 0;
  double loss = 0;           ///< the rows' weighted mean loss (Objective)
  double prior_penalty = 0;  ///< Objective::prior_weight x sum of squared distances from the priors
  double objective() const { return loss + prior_penalty; }
};

/// The rows of some validation sources, set up once (model, cluster, plan, unstated-knob candidates),
/// to be estimated again with other parameter values. Each row remembers the errors of the last few
/// value sets it was estimated with (only the values of the parameters whose scope covers it count),
/// so a trial that moves a hopper constant re-estimates only the hopper rows. Not thread-safe (the
/// remembered errors); one set per thread.
class CalibrationSet {
 public:
  /// Catalog sources are dropped. Throws ir::InputError when a parameter has no member or its
  /// bounds are empty.
  CalibrationSet(const std::vector<ValidationSource>& sources, std::vector<FittedParameter> parameters);
  ~CalibrationSet();
  CalibrationSet(CalibrationSet&&) noexcept;

  const std::vector<FittedParameter>& parameters() const { return parameters_; }
  size_t source_count() const;
  const std::string& source_name(size_t source) const;
  const std::string& source_citation(size_t source) const;
  /// Rows of `source` set up for estimating (not skipped while reading them).
  int64_t rows_set_up(size_t source) const;

  /// The row's cost constants: cost::cost_params_for of its GPU and its framework profile, with every
  /// parameter whose scope covers the row set to `values` (aligned with parameters()).
  cost::CostParams params_for(const RowTraits& row, const ir::GpuSpec& gpu, const cost::FrameworkProfile& framework,
                              const std::vector<double>& values) const;
  /// Every result of `source`'s rows estimated with `values` (as validate_source would give them).
  std::vector<ValidationResult> results(size_t source, const std::vector<double>& values) const;
  /// The objective over the rows of `sources` estimated with `values`.
  CalibrationScore score(const std::vector<size_t>& sources, const std::vector<double>& values,
                         const Objective& objective = {}) const;

  /// Model and GPU of each row of `source`, in row order ("" for a row skipped before its setup):
  /// the groups of the rank-order check.
  struct RowGroup {
    std::string id, model, gpu;
  };
  std::vector<RowGroup> row_groups(size_t source) const;

 private:
  struct Impl;
  std::vector<FittedParameter> parameters_;
  std::vector<double> priors_;  ///< prior_values(parameters_)
  std::unique_ptr<Impl> impl_;
};

/// Coordinate descent: each round tries every parameter at `steps` times its value at the round's
/// start of that parameter (clamped to its bounds; a value of 0 moves by 0.01 x step) and keeps a
/// trial that lowers the objective by more than 1e-6; stops after a round with no improvement or
/// after max_rounds. A biweight objective is preceded by the same descent on Huber's loss (its
/// scale and weights alike), each stage at most max_rounds: the biweight gives a row beyond its
/// scale no pull, so it starts where the convex loss has brought the rows near.
struct FitOptions {
  int max_rounds = 8;
  std::vector<double> steps{0.8, 0.9, 0.95, 1.05, 1.1, 1.25};
  Objective objective;
  /// Called after each round with its index and the best score so far.
  std::function<void(int round, const CalibrationScore& best)> on_round;
};

struct FitResult {
  std::vector<double> values;  ///< aligned with CalibrationSet::parameters()
  CalibrationScore start, score;
  int rounds = 0;            ///< of both stages
  int64_t evaluations = 0;  ///< score() calls
};

/// Fits the set's parameters on the rows of `sources` from `start`.
FitResult fit(const CalibrationSet& set, const std::vector<size_t>& sources, const std::vector<double>& start,
              const FitOptions& options = {});

/// Spearman's rank correlation of two equally long lists (ties take their average rank; Pearson's r
/// of the ranks). nullopt for fewer than two values or when one list has no spread.
std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y);

/// Rank order of one (source, model, GPU) group: predicted vs measured tokens/s per GPU.
struct RankGroup {
  std::string source, model, gpu;
  int64_t runs = 0;
  std::optional<double> in_sample, out_of_sample;
};

inline constexpr const char* kValidationCvFormat = "mgt.validation_cv/1";

/// Leave-one-source-out: one fit on every source (in-sample), then per source with compared rows a
/// fit on the others from the same start, predicting the left-out source with it.
struct CrossValidation {
  FitResult in_sample_fit;
  struct Fold {
    size_t source = 0;
    std::string name, citation;
    std::optional<FitResult> fit;  ///< nullopt: no compared rows, nothing to predict
    std::vector<ValidationResult> in_sample, out_of_sample;
  };
  std::vector<Fold> folds;  ///< one per source, in the set's order
  std::vector<RankGroup> rank_order;
};

/// `min_rank_runs`: the smallest group the rank-order check reports (runs of one model on one GPU
/// type with a compared throughput).
CrossValidation cross_validate(const CalibrationSet& set, const std::vector<double>& start, const FitOptions& options = {},
                               int64_t min_rank_runs = 4);

/// Measured and predicted tokens/s per GPU of a compared throughput result (a time metric inverts
/// the error); nullopt for other results.
std::optional<std::pair<double, double>> throughput_per_gpu(const ValidationResult& result);

}  // namespace mgt::plan
