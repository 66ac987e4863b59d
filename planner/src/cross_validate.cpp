// Leave-one-source-out cross-validation of the fitted constants and the rank-order check
// (planner/calibrate.hpp, docs/validation.md "Cross-validation").
#include "mgt/planner/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

namespace mgt::plan {

namespace {

/// 1-based ranks, ties sharing the average of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&v](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double rank = (double(i) + double(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

}  // namespace

std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) return std::nullopt;
  const std::vector<double> rx = average_ranks(x), ry = average_ranks(y);
  const double n = double(x.size());
  const double mean = (n + 1.0) / 2.0;  // the mean of any average-rank list
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  if (sxx == 0 || syy == 0) return std::nullopt;
  return sxy / std::sqrt(sxx * syy);
}

std::optional<std::pair<double, double>> throughput_per_gpu(const ValidationResult& r) {
  if (r.skipped || r.kind != MetricKind::throughput || !r.error || !r.estimate) return std::nullopt;
  // Every throughput metric is tokens/s/GPU times a factor of the row (GPUs, FLOPs per token, peak),
  // the same for prediction and measurement, except the times (iteration, days), its inverse.
  const double predicted = r.estimate->tokens_per_s_per_gpu;
  const double ratio = 1.0 + *r.error;  // predicted / measured in the metric's units
  const double measured = time_metric(r.metric) ? predicted * ratio : predicted / ratio;
  return std::make_pair(measured, predicted);
}

namespace {

/// Spearman per (model, GPU) group of `results` with at least `min_runs` compared throughputs.
std::map<std::pair<std::string, std::string>, std::pair<int64_t, std::optional<double>>> rank_groups(
    const std::vector<ValidationResult>& results, const std::vector<CalibrationSet::RowGroup>& groups, int64_t min_runs) {
  std::map<std::string, const CalibrationSet::RowGroup*> by_id;
  for (const auto& g : groups) by_id[g.id] = &g;
  std::map<std::pair<std::string, std::string>, std::pair<std::vector<double>, std::vector<double>>> runs;
  for (const auto& r : results) {
    const auto tp = throughput_per_gpu(r);
    const auto it = by_id.find(r.id);
    if (!tp || it == by_id.end() || it->second->model.empty()) continue;
    auto& [measured, predicted] = runs[{it->second->model, it->second->gpu}];
    measured.push_back(tp->first);
    predicted.push_back(tp->second);
  }
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, std::optional<double>>> out;
  for (const auto& [key, mp] : runs)
    if (int64_t(mp.first.size()) >= min_runs) out[key] = {int64_t(mp.first.size()), spearman(mp.second, mp.first)};
  return out;
}

}  // namespace

CrossValidation cross_validate(const CalibrationSet& set, const std::vector<double>& start, const FitOptions& options,
                               int64_t min_rank_runs) {
  CrossValidation cv;
  std::vector<size_t> all(set.source_count());
  std::iota(all.begin(), all.end(), size_t{0});
  cv.in_sample_fit = fit(set, all, start, options);
  for (const size_t left_out : all) {
    CrossValidation::Fold fold;
    fold.source = left_out;
    fold.name = set.source_name(left_out);
    fold.citation = set.source_citation(left_out);
    fold.in_sample = set.results(left_out, cv.in_sample_fit.values);
    if (set.rows_set_up(left_out) > 0) {
      std::vector<size_t> others;
      for (const size_t s : all)
        if (s != left_out) others.push_back(s);
      fold.fit = fit(set, others, start, options);
      fold.out_of_sample = set.results(left_out, fold.fit->values);
    } else {
      fold.out_of_sample = fold.in_sample;  // every row skipped on reading: no constant reaches it
    }
    const auto groups = set.row_groups(left_out);
    const auto in = rank_groups(fold.in_sample, groups, min_rank_runs);
    const auto out = rank_groups(fold.out_of_sample, groups, min_rank_runs);
    for (const auto& [key, n_rho] : in) {
      RankGroup g;
      g.source = fold.name;
      std::tie(g.model, g.gpu) = key;
      g.runs = n_rho.first;
      g.in_sample = n_rho.second;
      if (const auto it = out.find(key); it != out.end()) g.out_of_sample = it->second.second;
      cv.rank_order.push_back(std::move(g));
    }
    cv.folds.push_back(std::move(fold));
  }
  return cv;
}

}  // namespace mgt::plan
