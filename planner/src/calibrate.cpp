// Fitted cost constants (planner/calibrate.hpp, docs/calibration.md): the parameter table, rows
// prepared once and re-estimated per trial, and the coordinate-descent fit. Cross-validation and the
// rank-order check: cross_validate.cpp.
#include "mgt/planner/calibrate.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace mgt::plan {

using cost::CostParams;
using ir::GpuArch;

std::string ParameterScope::label() const {
  std::string out = framework.value_or("");
  if (arch) out += (out.empty() ? "" : ".") + ir::to_string(*arch);
  return out.empty() ? "all" : out;
}

std::vector<FittedParameter> calibrated_parameters() {
  std::vector<FittedParameter> out;
  for (const cost::ProfileFit& fit : cost::kProfileFits) {
    FittedParameter p;
    p.scope.arch = fit.arch;
    p.name = p.scope.label() + "." + fit.name;
    p.lower = fit.lo;
    p.upper = fit.hi;
    p.prior = fit.prior;
    p.profile_member = fit.member;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<double> shipped_values(const std::vector<FittedParameter>& parameters) {
  std::vector<double> out;
  for (const auto& p : parameters) {
    if (p.profile_member) {
      out.push_back(cost::select_framework(p.scope.framework.value_or(cost::default_framework_profile().name)).profile.*p.profile_member);
      continue;
    }
    ir::GpuSpec gpu;
    gpu.arch = p.scope.arch.value_or(GpuArch::ampere);
    out.push_back(cost::default_cost_params(gpu).*p.member);
  }
  return out;
}

double Objective::rho(double r) const {
  const double a = std::abs(r);
  switch (loss) {
    case Loss::squared: return 0.5 * r * r;
    case Loss::huber: return a <= scale ? 0.5 * r * r : scale * (a - 0.5 * scale);
    case Loss::biweight: {
      // (c^2/6)(1 - (1 - (r/c)^2)^3) inside c, c^2/6 beyond: its derivative r (1 - (r/c)^2)^2 falls to 0 at c.
      const double ceiling = scale * scale / 6.0;
      if (a >= scale) return ceiling;
      const double u = 1.0 - (r / scale) * (r / scale);
      return ceiling * (1.0 - u * u * u);
    }
  }
  return 0.5 * r * r;
}

std::vector<double> prior_values(const std::vector<FittedParameter>& parameters) {
  std::vector<double> out;
  const CostParams prior;
  const cost::FrameworkProfile prior_profile;
  for (const auto& p : parameters)
    out.push_back(p.prior ? *p.prior : p.profile_member ? prior_profile.*p.profile_member : prior.*p.member);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Rows prepared once

namespace {

/// What the objective needs of one row's results.
struct RowErrors {
  std::vector<double> time, memory;  ///< errors of the compared throughput / memory metrics, (predicted - measured) / measured
  int oom_missed = 0;
};

RowErrors errors_of(const std::vector<ValidationResult>& results) {
  RowErrors e;
  for (const auto& r : results) {
    if (r.skipped || !r.error) continue;
    if (r.kind == MetricKind::throughput) e.time.push_back(*r.error);
    if (r.kind == MetricKind::memory) e.memory.push_back(*r.error);
    if (r.kind == MetricKind::oom && *r.error != 0) ++e.oom_missed;
  }
  return e;
}

/// ln(predicted / measured) of a relative error; a prediction of 0 or less (never made by the
/// estimator) counts as 1e-6 of the measurement.
double log_residual(double error) { return std::log(std::max(1.0 + error, 1e-6)); }

/// The weighted loss sums of one kind of row, per source.
struct LossSums {
  std::vector<double> rho;
  std::vector<int64_t> count;
  explicit LossSums(size_t sources) : rho(sources, 0.0), count(sources, 0) {}
  /// sum_s n_s^-a sum_i rho_i / sum_s n_s^(1-a): each row weighs n_s^-a, normalised by the weights' sum.
  double weighted_mean(double exponent) const {
    double numerator = 0, weights = 0;
    for (size_t s = 0; s < rho.size(); ++s) {
      if (count[s] == 0) continue;
      const double w = std::pow(double(count[s]), -exponent);
      numerator += w * rho[s];
      weights += w * double(count[s]);
    }
    return weights > 0 ? numerator / weights : 0.0;
  }
};

/// A row with the parameters that cover it and its last few estimates. A fit's trials mostly move a
/// parameter that does not cover the row, or return to the accepted values, so a few entries hit.
struct CachedRow {
  PreparedRow prepared;
  RowTraits traits;
  size_t source = 0;
  std::vector<size_t> covering;  ///< indices of the parameters whose scope covers the row
  struct Entry {
    std::vector<double> key;  ///< the covering parameters' values
    RowErrors errors;
  };
  static constexpr size_t kEntries = 4;
  mutable std::array<Entry, kEntries> entries;
  mutable size_t used = 0, next = 0;
};

/// The row's errors at `values`: remembered when the covering parameters' values were seen lately.
const RowErrors& cached_errors(const CalibrationSet& set, const CachedRow& row, const std::vector<double>& values) {
  std::vector<double> key;
  for (const size_t i : row.covering) key.push_back(values.at(i));
  for (size_t e = 0; e < row.used; ++e)
    if (row.entries[e].key == key) return row.entries[e].errors;
  CachedRow::Entry& slot = row.entries[row.next];
  slot.key = std::move(key);
  slot.errors = errors_of(validate_prepared(row.prepared, set.params_for(row.traits, row.prepared.setup.cluster.gpu, row.prepared.setup.framework, values)));
  row.next = (row.next + 1) % CachedRow::kEntries;
  row.used = std::min(row.used + 1, CachedRow::kEntries);
  return slot.errors;
}

}  // namespace

struct CalibrationSet::Impl {
  std::vector<std::string> names, citations;
  std::vector<int64_t> prepared_rows;
  std::vector<CachedRow> rows;  ///< every row of every source, sources in order
};

CalibrationSet::CalibrationSet(const std::vector<ValidationSource>& sources, std::vector<FittedParameter> parameters)
    : parameters_(std::move(parameters)), priors_(prior_values(parameters_)), impl_(std::make_unique<Impl>()) {
  for (const auto& p : parameters_) {
    if (!p.member == !p.profile_member)
      throw ir::InputError("calibration", p.name, "needs exactly one value to set",
                           "name a CostParams member or a FrameworkProfile member");
    if (!(p.lower <= p.upper))
      throw ir::InputError("calibration", p.name, "bounds [" + std::to_string(p.lower) + ", " + std::to_string(p.upper) + "] are empty",
                           "give lower <= upper");
  }
  for (const auto& source : sources) {
    if (source.catalog) continue;
    const size_t index = impl_->names.size();
    impl_->names.push_back(source.name);
    impl_->citations.push_back(source.citation);
    int64_t prepared = 0;
    for (const auto& row : source.rows) {
      CachedRow c;
      c.prepared = prepare_row(source, row);
      c.source = index;
      if (!c.prepared.skipped) {
        ++prepared;
        c.traits.arch = c.prepared.setup.cluster.gpu.arch;
        c.traits.framework = c.prepared.setup.framework.name;
        for (size_t i = 0; i < parameters_.size(); ++i)
          if (parameters_[i].scope.applies_to(c.traits)) c.covering.push_back(i);
      }
      impl_->rows.push_back(std::move(c));
    }
    impl_->prepared_rows.push_back(prepared);
  }
}

CalibrationSet::~CalibrationSet() = default;
CalibrationSet::CalibrationSet(CalibrationSet&&) noexcept = default;

size_t CalibrationSet::source_count() const { return impl_->names.size(); }
const std::string& CalibrationSet::source_name(size_t source) const { return impl_->names.at(source); }
const std::string& CalibrationSet::source_citation(size_t source) const { return impl_->citations.at(source); }
int64_t CalibrationSet::rows_set_up(size_t source) const { return impl_->prepared_rows.at(source); }

CostParams CalibrationSet::params_for(const RowTraits& row, const ir::GpuSpec& gpu, const cost::FrameworkProfile& framework,
                                      const std::vector<double>& values) const {
  // Profile members first (cost_params_for turns them into cost constants), then cost constants.
  cost::FrameworkProfile profile = framework;
  for (size_t i = 0; i < parameters_.size(); ++i)
    if (parameters_[i].profile_member && parameters_[i].scope.applies_to(row))
      profile.*parameters_[i].profile_member = values.at(i);
  CostParams p = cost::cost_params_for(gpu, profile);
  for (size_t i = 0; i < parameters_.size(); ++i)
    if (parameters_[i].member && parameters_[i].scope.applies_to(row)) p.*parameters_[i].member = values.at(i);
  return p;
}

std::vector<ValidationResult> CalibrationSet::results(size_t source, const std::vector<double>& values) const {
  std::vector<ValidationResult> out;
  for (const auto& row : impl_->rows) {
    if (row.source != source) continue;
    auto rs = row.prepared.skipped ? *row.prepared.skipped
                                   : validate_prepared(row.prepared, params_for(row.traits, row.prepared.setup.cluster.gpu, row.prepared.setup.framework, values));
    out.insert(out.end(), std::make_move_iterator(rs.begin()), std::make_move_iterator(rs.end()));
  }
  return out;
}

CalibrationScore CalibrationSet::score(const std::vector<size_t>& sources, const std::vector<double>& values,
                                       const Objective& objective) const {
  std::vector<char> wanted(source_count(), 0);
  for (const size_t s : sources) wanted.at(s) = 1;
  std::vector<double> time, memory;  // |error|, for the reported statistics
  LossSums time_loss(source_count()), memory_loss(source_count());
  CalibrationScore score;
  for (const auto& row : impl_->rows) {
    if (!wanted[row.source] || row.prepared.skipped) continue;
    const RowErrors& errors = cached_errors(*this, row, values);
    for (const double e : errors.time) {
      time.push_back(std::abs(e));
      time_loss.rho[row.source] += objective.rho(log_residual(e));
      ++time_loss.count[row.source];
    }
    for (const double e : errors.memory) {
      memory.push_back(std::abs(e));
      memory_loss.rho[row.source] += objective.rho(log_residual(e));
      ++memory_loss.count[row.source];
    }
    // A missed OOM row is one more memory row of its source, off by the loss's scale.
    memory_loss.rho[row.source] += objective.oom_weight * errors.oom_missed * objective.rho(objective.scale);
    memory_loss.count[row.source] += errors.oom_missed;
    score.oom_missed += errors.oom_missed;
  }
  score.time_median = percentile(time, 0.5);
  score.time_p90 = percentile(time, 0.9);
  score.memory_median = percentile(memory, 0.5);
  score.memory_p90 = percentile(memory, 0.9);
  score.time_rows = int64_t(time.size());
  score.memory_rows = int64_t(memory.size());
  score.loss = time_loss.weighted_mean(objective.source_weight_exponent) +
               objective.memory_weight * memory_loss.weighted_mean(objective.source_weight_exponent);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const double width = parameters_[i].upper - parameters_[i].lower;
    if (width <= 0) continue;  // a pinned parameter never moves
    const double distance = (values.at(i) - priors_[i]) / width;
    score.prior_penalty += objective.prior_weight * distance * distance;
  }
  return score;
}

std::vector<CalibrationSet::RowGroup> CalibrationSet::row_groups(size_t source) const {
  std::vector<RowGroup> out;
  for (const auto& row : impl_->rows) {
    if (row.source != source) continue;
    RowGroup g;
    g.id = row.prepared.base.id;
    if (!row.prepared.skipped) {
      g.model = row.prepared.setup.shape.name;
      g.gpu = row.prepared.setup.cluster.gpu.name;
    }
    out.push_back(std::move(g));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Coordinate descent

namespace {

/// Coordinate descent from r.values (whose score under `objective` is r.score) until a round
/// improves nothing or options.max_rounds have run.
void descend(const CalibrationSet& set, const std::vector<size_t>& sources, const FitOptions& options, const Objective& objective,
             FitResult& r) {
  const auto& parameters = set.parameters();
  for (int round = 0; round < options.max_rounds; ++round) {
    bool improved = false;
    for (size_t k = 0; k < parameters.size(); ++k) {
      // Steps are relative to the value at this parameter's turn, even after one of them is kept.
      const double current = r.values[k];
      for (const double step : options.steps) {
        const double value = std::clamp(current * step + (current == 0 ? 0.01 * step : 0), parameters[k].lower, parameters[k].upper);
        std::vector<double> trial = r.values;
        trial[k] = value;
        const CalibrationScore s = set.score(sources, trial, objective);
        ++r.evaluations;
        if (s.objective() < r.score.objective() - 1e-6) {
          r.score = s;
          r.values = std::move(trial);
          improved = true;
        }
      }
    }
    if (options.on_round) options.on_round(r.rounds, r.score);
    ++r.rounds;
    if (!improved) break;
  }
}

}  // namespace

FitResult fit(const CalibrationSet& set, const std::vector<size_t>& sources, const std::vector<double>& start,
              const FitOptions& options) {
  const auto& parameters = set.parameters();
  if (start.size() != parameters.size())
    throw ir::InputError("calibration", "start", std::to_string(start.size()) + " values for " + std::to_string(parameters.size()) +
                                                     " parameters", "give one start value per parameter");
  FitResult r;
  r.values = start;
  r.start = r.score = set.score(sources, r.values, options.objective);
  r.evaluations = 1;
  if (options.objective.loss == Objective::Loss::biweight) {
    // The biweight is flat beyond its scale: a start that leaves rows there gets no pull from them.
    // Huber (convex in the residual) brings the fit near the rows first, the biweight then drops the
    // rows still far off (the two-stage M-estimate of robust regression).
    Objective convex = options.objective;
    convex.loss = Objective::Loss::huber;
    r.score = set.score(sources, r.values, convex);
    descend(set, sources, options, convex, r);
    r.score = set.score(sources, r.values, options.objective);
    ++r.evaluations;
  }
  descend(set, sources, options, options.objective, r);
  return r;
}

}  // namespace mgt::plan
