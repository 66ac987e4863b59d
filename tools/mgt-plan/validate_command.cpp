// `mgt-plan validate`: printing of planner/validate's results (text table or mgt.validation/1).
#include "validate_command.hpp"

#include "progress.hpp"
#include "report.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/planner/validate.hpp"
#include "mgt/planner/validate_kernels.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

namespace mgt::cli {

namespace {

const auto fmt = format_number;

/// 3 significant digits, plain for everyday magnitudes.
std::string num(double v) {
  const double a = std::fabs(v);
  if (a != 0 && (a < 1e-3 || a >= 1e7)) return fmt("%.3g", v);
  if (a >= 100) return fmt("%.0f", v);
  if (a >= 10) return fmt("%.1f", v);
  if (a >= 1) return fmt("%.2f", v);
  return fmt("%.3f", v);
}

std::string stats_line(const char* label, const plan::ErrorStats& s) {
  if (s.count == 0) return std::string("  ") + label + "n=0\n";
  return std::string("  ") + label + "n=" + std::to_string(s.count) + "  median |error| " + fmt("%.1f", s.median_abs_pct) +
         " %  p90 " + fmt("%.1f", s.p90_abs_pct) + " %\n";
}

/// "step S s = compute + the other time terms > 0 (bottleneck); memory P GiB = parameters + the other
/// memory terms > 0", labels from kTimeTerms / kMemoryTerms.
std::string breakdown_line(const cost::Estimate& e) {
  constexpr double kGiB = double(1ll << 30);
  std::string out = "step " + num(e.step_time_s) + " s =";
  const char* plus = " ";
  for (const auto& term : cost::kTimeTerms) {
    const double s = e.time.*term.field;
    if (s <= 0 && term.field != &cost::TimeBreakdown::compute_s) continue;
    out += plus + std::string(term.label) + " " + num(s);
    plus = " + ";
  }
  out += " (" + e.bottleneck + "); memory " + num(double(e.memory.peak_bytes) / kGiB) + " GiB =";
  plus = " ";
  for (const auto& term : cost::kMemoryTerms) {
    const int64_t bytes = e.memory.*term.field;
    if (bytes <= 0 && term.field != &cost::MemoryBreakdown::parameters_bytes) continue;
    out += plus + std::string(term.label) + " " + num(double(bytes) / kGiB);
    plus = " + ";
  }
  return out;
}

std::string format_summary(const plan::ValidationSummary& s, bool details) {
  std::string out = s.source + (s.citation.empty() ? "" : ": " + s.citation) + "\n";
  out += "  rows " + std::to_string(s.rows) + ": " + std::to_string(s.rows_compared) + " compared, " +
         std::to_string(s.rows_skipped) + " skipped\n";
  out += stats_line("time/throughput  ", s.throughput);
  out += stats_line("memory           ", s.memory);
  out += "  oom              " + std::to_string(s.oom_predicted) + " of " + std::to_string(s.oom_rows) + " OOM rows predicted not to fit\n";
  if (!details) return out;
  if (!s.worst.empty()) {
    out += "  worst rows:\n";
    for (const auto& r : s.worst) {
      out += "    " + r.id + "  " + r.metric + "  predicted " + num(r.predicted.value_or(0)) + "  measured " +
             num(r.measured.value_or(0)) + "  error " + fmt("%+.1f", r.error.value_or(0) * 100) + " %\n";
      if (!r.conversion.empty()) out += "      (" + r.conversion + ")\n";
      if (r.estimate) out += "      " + breakdown_line(*r.estimate) + "\n";
    }
  }
  if (!s.skip_reasons.empty()) {
    out += "  skipped rows by reason:\n";
    for (const auto& [reason, n] : s.skip_reasons) out += "    " + fmt("%3.0f", double(n)) + "  " + reason + "\n";
  }
  return out;
}

}  // namespace

int run_validate(const std::vector<std::string>& files, bool json, bool cv, int cv_rounds, const std::string& cv_start) {
  std::vector<plan::ValidationSource> sources;
  std::vector<plan::KernelValidation> kernels;  // kernel-level files (top-level "category")
  try {
    if (files.empty()) throw ir::InputError("validate", "FILE", "no validation files given", "mgt-plan validate ../shared/validation/*.json");
    for (const auto& path : files)
      if (plan::is_kernel_validation_file(path)) kernels.push_back(plan::validate_kernel_file(path));
      else sources.push_back(plan::read_validation_source(path));
  } catch (const ir::InputError& e) {
    std::cerr << "mgt-plan: " << e.what() << "\n";
    return 2;
  }
  if (cv) {
    if (!kernels.empty())
      std::cerr << "mgt-plan: validate --cv: " << kernels.size()
                << " kernel file(s) left out (the fitted constants are fitted on training runs only)\n";
    return run_validate_cv(sources, json, cv_rounds, cv_start);
  }
  plan::ValidationReport report;
  ProgressLine progress = ProgressLine::for_stderr(json);
  ProgressTicker ticker(progress);  // one source can take seconds
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto& source = sources[i];
    progress.update("validating " + source.name, int64_t(i), int64_t(sources.size()));
    if (source.catalog) continue;
    auto results = plan::validate_source(source);
    report.sources.push_back(plan::summarize(source.name, source.citation, results));
    report.rows.insert(report.rows.end(), std::make_move_iterator(results.begin()), std::make_move_iterator(results.end()));
  }
  ticker.stop();
  progress.finish();
  report.overall = plan::summarize("overall", "", report.rows);

  if (json) {
    nlohmann::json doc = plan::to_json(report);
    for (const auto& k : kernels) doc["kernels"].push_back(plan::to_json(k));
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  if (!kernels.empty()) {
    std::cout << plan::format_kernel_validation(kernels);
    if (sources.empty()) return 0;
    std::cout << "\n";
  }
  for (const auto& s : report.sources) std::cout << format_summary(s, /*details=*/true) << "\n";
  std::cout << format_summary(report.overall, /*details=*/false);
  for (const auto& source : sources)
    if (source.catalog) std::cout << "(" << source.name << ": catalog file, no rows)\n";
  return 0;
}

}  // namespace mgt::cli
