// `mgt-plan validate`: printing of planner/validate's results (text table or mgt.validation/1).
#include "validate_command.hpp"

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

std::string fmt(const char* format, double value) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

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

std::string breakdown_line(const cost::Estimate& e) {
  constexpr double kGiB = double(1ll << 30);
  const auto& t = e.time;
  const auto& m = e.memory;
  std::string out = "step " + num(e.step_time_s) + " s = compute " + num(t.compute_s) + " + recompute " + num(t.recompute_s);
  const std::pair<const char*, double> terms[] = {{"tp", t.exposed_tp_s},     {"cp", t.exposed_cp_s}, {"fsdp", t.exposed_fsdp_s},
                                                  {"dp", t.exposed_dp_s},     {"pp", t.exposed_pp_s}, {"ep", t.exposed_ep_s},
                                                  {"bubble", t.bubble_s}};
  for (const auto& [name, s] : terms)
    if (s > 0) out += std::string(" + ") + name + " " + num(s);
  out += " + optimizer " + num(t.optimizer_s) + " + overhead " + num(t.overhead_s) + " (" + e.bottleneck + ")";
  out += "; memory " + num(double(m.peak_bytes) / kGiB) + " GiB = params " + num(double(m.parameters_bytes) / kGiB) + " + grads " +
         num(double(m.gradients_bytes) / kGiB) + " + optimizer " + num(double(m.optimizer_bytes) / kGiB);
  if (m.fsdp_buffers_bytes > 0) out += " + fsdp buffers " + num(double(m.fsdp_buffers_bytes) / kGiB);
  out += " + activations " + num(double(m.activations_bytes) / kGiB) + " + transient " + num(double(m.transient_bytes) / kGiB) +
         " + overhead " + num(double(m.overhead_bytes) / kGiB);
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

int run_validate(const std::vector<std::string>& files, bool json) {
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
  std::vector<plan::ValidationResult> all;
  std::vector<plan::ValidationSummary> summaries;
  for (const auto& source : sources) {
    if (source.catalog) continue;
    auto results = plan::validate_source(source);
    summaries.push_back(plan::summarize(source.name, source.citation, results));
    all.insert(all.end(), std::make_move_iterator(results.begin()), std::make_move_iterator(results.end()));
  }
  const plan::ValidationSummary overall = plan::summarize("overall", "", all);

  if (json) {
    nlohmann::json doc = {{"format", "mgt.validation/1"}};
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : all) rows.push_back(plan::to_json(r));
    nlohmann::json per_source = nlohmann::json::array();
    for (const auto& s : summaries) per_source.push_back(plan::to_json(s));
    doc["rows"] = std::move(rows);
    doc["summary"] = {{"sources", std::move(per_source)}, {"overall", plan::to_json(overall)}};
    for (const auto& k : kernels) doc["kernels"].push_back(plan::to_json(k));
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  if (!kernels.empty()) {
    std::cout << plan::format_kernel_validation(kernels);
    if (sources.empty()) return 0;
    std::cout << "\n";
  }
  for (const auto& s : summaries) std::cout << format_summary(s, /*details=*/true) << "\n";
  std::cout << format_summary(overall, /*details=*/false);
  for (const auto& source : sources)
    if (source.catalog) std::cout << "(" << source.name << ": catalog file, no rows)\n";
  return 0;
}

}  // namespace mgt::cli
