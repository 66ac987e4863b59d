// `mgt-plan validate --cv`: leave-one-source-out cross-validation of the fitted constants
// (planner/calibrate.hpp; docs/validation.md "Cross-validation"): per source and pooled, the
// in-sample and out-of-sample errors side by side, the fitted values per fold, the rank-order check;
// with --json the `mgt.validation_cv/1` document.
#include "validate_command.hpp"

#include "report.hpp"

#include "mgt/planner/calibrate.hpp"
#include "mgt/planner/validate.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

namespace mgt::cli {

namespace {

const auto fmt = format_number;
using nlohmann::json;

std::string stats_cell(const plan::ErrorStats& s) {
  if (s.count == 0) return "—";
  return fmt("%.1f", s.median_abs_pct) + " / " + fmt("%.1f", s.p90_abs_pct);
}

std::string rho(const std::optional<double>& r) { return r ? fmt("%+.2f", *r) : "n/a"; }

std::string pad(std::string s, size_t width) {
  // Pad by displayed characters: "—" is three bytes, one column.
  size_t shown = 0;
  for (const unsigned char c : s) shown += (c & 0xC0) != 0x80;
  if (shown < width) s += std::string(width - shown, ' ');
  return s;
}

/// Per source and pooled: rows, throughput and memory |error| median / p90, in-sample then out-of-sample.
std::string error_table(const std::vector<plan::ValidationSummary>& in, const std::vector<plan::ValidationSummary>& out) {
  std::string text = pad("source", 34) + pad("rows", 10) + pad("throughput |error| % median / p90", 40) +
                     "memory |error| % median / p90\n";
  text += pad("", 44) + pad("n    in-sample     out-of-sample", 40) + "n    in-sample     out-of-sample\n";
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& a = in[i];
    const auto& b = out[i];
    text += pad(a.source, 34) + pad(std::to_string(a.rows_compared) + "/" + std::to_string(a.rows), 10) +
            pad(std::to_string(a.throughput.count), 5) + pad(stats_cell(a.throughput), 14) + pad(stats_cell(b.throughput), 21) +
            pad(std::to_string(a.memory.count), 5) + pad(stats_cell(a.memory), 14) + stats_cell(b.memory) + "\n";
  }
  return text;
}

/// Per parameter: bounds, start, the in-sample fit and each fold's fit (the fold named by its left-out source).
std::string parameter_table(const plan::CalibrationSet& set, const std::vector<double>& start, const plan::CrossValidation& cv) {
  size_t name_width = 10;  // profile.member names run to ~50 characters
  for (const auto& p : set.parameters()) name_width = std::max(name_width, p.name.size() + 2);
  std::string header, legend;
  for (const auto& f : cv.folds) {
    if (!f.fit) continue;
    const std::string label = "#" + std::to_string(f.source + 1);
    header += pad(label, 10);
    legend += (legend.empty() ? "" : ", ") + label + " " + f.name;
  }
  std::string text = pad("parameter", name_width) + pad("bounds", 16) + pad("start", 10) + pad("in-sample", 11) +
                     "out-of-sample: the fit without source\n" + pad("", name_width + 37) + header + "\n";
  for (size_t i = 0; i < set.parameters().size(); ++i) {
    const auto& p = set.parameters()[i];
    std::string values;
    for (const auto& f : cv.folds)
      if (f.fit) values += pad(fmt("%.4g", f.fit->values[i]), 10);
    text += pad(p.name, name_width) + pad(fmt("%.4g", p.lower) + " .. " + fmt("%.4g", p.upper), 16) + pad(fmt("%.4g", start[i]), 10) +
            pad(fmt("%.4g", cv.in_sample_fit.values[i]), 11) + values + "\n";
  }
  return text + "  (" + legend + ")\n";
}

std::string rank_table(const std::vector<plan::RankGroup>& groups, int64_t min_runs) {
  std::string text = "rank order: Spearman of predicted vs measured tokens/s per GPU, per (source, model, GPU) with >= " +
                     std::to_string(min_runs) + " runs\n";
  if (groups.empty()) return text + "  (no group that large)\n";
  text += "  " + pad("source", 34) + pad("model", 38) + pad("gpu", 16) + pad("runs", 6) + pad("in-sample", 11) + "out-of-sample\n";
  for (const auto& g : groups)
    text += "  " + pad(g.source, 34) + pad(g.model, 38) + pad(g.gpu, 16) + pad(std::to_string(g.runs), 6) + pad(rho(g.in_sample), 11) +
            rho(g.out_of_sample) + "\n";
  return text;
}

json objective_json(const plan::Objective& o) {
  const char* loss = o.loss == plan::Objective::Loss::squared ? "squared" : o.loss == plan::Objective::Loss::huber ? "huber" : "biweight";
  return {{"residual", "ln(predicted / measured)"}, {"loss", loss}, {"scale", o.scale},
          {"source_weight_exponent", o.source_weight_exponent}, {"prior_weight", o.prior_weight},
          {"memory_weight", o.memory_weight}, {"oom_weight", o.oom_weight}};
}

json cv_json(const plan::CalibrationSet& set, const std::vector<double>& start, bool prior, const plan::FitOptions& options,
             const plan::CrossValidation& cv, const std::vector<plan::ValidationSummary>& in,
             const std::vector<plan::ValidationSummary>& out) {
  json doc{{"format", plan::kValidationCvFormat},
           {"fit", {{"method", "coordinate descent"}, {"max_rounds", options.max_rounds}, {"steps", options.steps},
                    {"start", prior ? "prior" : "shipped"},
                    {"objective", objective_json(options.objective)},
                    {"in_sample_rounds", cv.in_sample_fit.rounds}}}};
  json parameters = json::array();
  for (size_t i = 0; i < set.parameters().size(); ++i) {
    const auto& p = set.parameters()[i];
    json folds = json::object();
    for (const auto& f : cv.folds)
      if (f.fit) folds[f.name] = f.fit->values[i];
    parameters.push_back({{"name", p.name}, {"scope", p.scope.label()}, {"lower", p.lower}, {"upper", p.upper},
                          {"start", start[i]}, {"in_sample", cv.in_sample_fit.values[i]}, {"out_of_sample", folds}});
  }
  doc["parameters"] = parameters;
  json sources = json::array();
  for (size_t i = 0; i + 1 < in.size(); ++i)
    sources.push_back({{"source", in[i].source}, {"in_sample", plan::to_json(in[i])}, {"out_of_sample", plan::to_json(out[i])}});
  doc["sources"] = sources;
  doc["pooled"] = {{"in_sample", plan::to_json(in.back())}, {"out_of_sample", plan::to_json(out.back())}};
  json ranks = json::array();
  for (const auto& g : cv.rank_order)
    ranks.push_back({{"source", g.source}, {"model", g.model}, {"gpu", g.gpu}, {"runs", g.runs},
                     {"in_sample", g.in_sample ? json(*g.in_sample) : json(nullptr)},
                     {"out_of_sample", g.out_of_sample ? json(*g.out_of_sample) : json(nullptr)}});
  doc["rank_order"] = ranks;
  return doc;
}

}  // namespace

int run_validate_cv(const std::vector<plan::ValidationSource>& sources, bool json_output, int max_rounds,
                    const std::string& start_name) {
  constexpr int64_t kMinRankRuns = 4;
  const plan::CalibrationSet set(sources, plan::calibrated_parameters());
  const bool prior = start_name == "prior";
  const std::vector<double> start = prior ? plan::prior_values(set.parameters()) : plan::shipped_values(set.parameters());
  const std::string start_text = prior ? "the FrameworkProfile and CostParams initialisers (before any fit)" : "the shipped constants (fitted on every source)";
  plan::FitOptions options;
  options.max_rounds = max_rounds;
  const plan::CrossValidation cv = plan::cross_validate(set, start, options, kMinRankRuns);

  std::vector<plan::ValidationSummary> in, out;  // per source, then pooled
  std::vector<plan::ValidationResult> all_in, all_out;
  for (const auto& f : cv.folds) {
    in.push_back(plan::summarize(f.name, f.citation, f.in_sample));
    out.push_back(plan::summarize(f.name, f.citation, f.out_of_sample));
    all_in.insert(all_in.end(), f.in_sample.begin(), f.in_sample.end());
    all_out.insert(all_out.end(), f.out_of_sample.begin(), f.out_of_sample.end());
  }
  in.push_back(plan::summarize("pooled", "", all_in));
  out.push_back(plan::summarize("pooled", "", all_out));

  if (json_output) {
    std::cout << cv_json(set, start, prior, options, cv, in, out).dump(2) << "\n";
    return 0;
  }
  std::cout << "leave-one-source-out: " << set.parameters().size()
            << " fitted parameters, coordinate descent (at most " << max_rounds << (max_rounds == 1 ? " round" : " rounds")
            << ") from " << start_text << "; in-sample: one fit on every source; out-of-sample: each source "
               "predicted by a fit on the others\n\n"
            << error_table(in, out) << "\n"
            << parameter_table(set, start, cv) << "\n"
            << rank_table(cv.rank_order, kMinRankRuns);
  return 0;
}

}  // namespace mgt::cli
