// `mgt-plan validate` (docs/validation.md): published measurements -> Graph, ClusterSpec, Plan,
// TrainingSettings -> Estimate -> like-with-like comparison; statistics and mgt.validation/1 JSON.
// Reading files and models: validate_model.cpp; hardware and rows: validate_setup.cpp; JSON:
// validate_json.cpp.
#include "mgt/planner/validate.hpp"

#include "mgt/planner/search.hpp"
#include "validate_util.hpp"

#include "mgt/ir/enum_names.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace mgt::plan {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Metrics

namespace {
// In enumerator order; to_string and metric_kind_from_string both read it.
constexpr std::array<const char*, 3> kMetricKindNames{"throughput", "memory", "oom"};
}  // namespace

std::string to_string(MetricKind kind) { return ir::name_of(kMetricKindNames, kind); }

std::optional<MetricKind> metric_kind_from_string(std::string_view text) {
  return ir::enum_of<MetricKind>(kMetricKindNames, text);
}

namespace {
// The validation README's throughput keys. The whole-job PFLOP/s and the days for 300B tokens come
// last: Narayanan et al. 2021 derive the days from their own FLOP count, not from a measured time.
const char* const kThroughputPriority[] = {"iteration_time_s", "tokens_per_sec_per_gpu", "tokens_per_sec_total",
                                            "samples_per_sec",  "samples_per_sec_total",  "model_tflops_per_gpu",
                                            "tflops_per_gpu",   "mfu",                    "hfu",
                                            "pct_of_peak",      "aggregate_pflops",       "training_days_300B_tokens",
                                            "est_training_days_300B_tokens"};
const char* const kMemoryKeys[] = {"peak_memory_GiB", "peak_memory_GB", "param_and_optimizer_memory_GiB",
                                   "activation_memory_GiB"};

bool positive_number(const json& measured, const char* key) {
  if (!measured.contains(key)) return false;
  const auto v = number_in(measured[key]);
  return v && *v > 0;
}
}  // namespace

std::string_view metric_key(std::string_view metric) {
  return metric.ends_with(kApproxSuffix) ? metric.substr(0, metric.size() - kApproxSuffix.size()) : metric;
}

bool time_metric(std::string_view metric) {
  const std::string_view key = metric_key(metric);
  return key == "iteration_time_s" || key == "training_days_300B_tokens" || key == "est_training_days_300B_tokens";
}

std::vector<std::pair<std::string, MetricKind>> comparable_metrics(const json& measured) {
  std::vector<std::pair<std::string, MetricKind>> out;
  if (!measured.is_object()) return out;
  // A value the source gives as approximate ("~15 PFLOP/s") is still its measurement: `<key>_approx`
  // is compared as <key> when no exact throughput key is there.
  const auto first_throughput = [&](std::string_view suffix) {
    for (const char* key : kThroughputPriority)
      if (const std::string k = std::string(key) + std::string(suffix); positive_number(measured, k.c_str())) {
        out.push_back({k, MetricKind::throughput});
        return true;
      }
    return false;
  };
  if (!first_throughput("")) first_throughput(kApproxSuffix);
  for (const char* key : kMemoryKeys)
    if (positive_number(measured, key)) out.push_back({key, MetricKind::memory});
  if (measured.contains("oom") && measured["oom"].is_boolean() && measured["oom"].get<bool>())
    out.push_back({"oom", MetricKind::oom});
  return out;
}

namespace {

/// The prediction in the units of `metric`, with a note saying how.
double predict_key(const std::string& metric, const json& measured, const std::string& citation, const std::string& notes,
                   const RowSetup& s, const cost::Estimate& e, std::string& conversion, std::vector<std::string>& assumptions);

double predict(const std::string& metric, const json& measured, const std::string& citation, const std::string& notes,
               const RowSetup& s, const cost::Estimate& e, std::string& conversion, std::vector<std::string>& assumptions) {
  if (metric != metric_key(metric))
    assumptions.push_back("measured." + metric + ": approximate as published, compared as " + std::string(metric_key(metric)));
  return predict_key(std::string(metric_key(metric)), measured, citation, notes, s, e, conversion, assumptions);
}

double predict_key(const std::string& metric, const json& measured, const std::string& citation, const std::string& notes,
                   const RowSetup& s, const cost::Estimate& e, std::string& conversion, std::vector<std::string>& assumptions) {
  const double tps_gpu = e.tokens_per_s_per_gpu;
  const double gpus = double(s.num_gpus), seq = double(s.settings.seq_len);
  constexpr double kGiB = double(1ll << 30);
  if (metric == "iteration_time_s") return e.step_time_s;
  if (metric == "training_days_300B_tokens" || metric == "est_training_days_300B_tokens") {
    conversion = "300e9 tokens / (tokens/s/GPU x " + std::to_string(s.num_gpus) + " GPUs) / 86400 s";
    return 300e9 / (tps_gpu * gpus) / 86400.0;
  }
  if (metric == "tokens_per_sec_per_gpu") return tps_gpu;
  if (metric == "tokens_per_sec_total") {
    conversion = "tokens/s/GPU x " + std::to_string(s.num_gpus) + " GPUs";
    return tps_gpu * gpus;
  }
  if (metric == "samples_per_sec" || metric == "samples_per_sec_total") {
    conversion = "tokens/s/GPU x GPUs / seq_len (whole job)";
    return tps_gpu * gpus / seq;
  }
  if (metric == "peak_memory_GiB") return double(e.memory.peak_bytes) / kGiB;
  if (metric == "peak_memory_GB") {
    const std::string kind = lower(opt_string(measured, "memory_kind"));
    if (contains(kind, "nvidia-smi")) {
      conversion = "GB read as GiB (nvidia-smi reports MiB)";
      return double(e.memory.peak_bytes) / kGiB;
    }
    conversion = "GB = 1e9 bytes";
    return double(e.memory.peak_bytes) / 1e9;
  }
  if (metric == "param_and_optimizer_memory_GiB") {
    conversion = "parameters + gradients + optimizer states";
    return double(e.memory.parameters_bytes + e.memory.gradients_bytes + e.memory.optimizer_bytes) / kGiB;
  }
  if (metric == "activation_memory_GiB") {
    conversion = "saved activations";
    return double(e.memory.activations_bytes) / kGiB;
  }
  // FLOP-rate metrics: tokens/s/GPU times the source's own FLOPs per token.
  const std::string kind = opt_string(measured, "tflops_kind");
  const FlopConvention c = flop_convention(kind, citation, notes);
  const bool hardware = metric == "hfu" || contains(lower(kind), "hardware") || contains(lower(kind), "incl. recompute");
  const double f = flops_per_token(c, s.shape, s.settings.seq_len, e.plan.recompute, hardware);
  if (contains(lower(kind), "not stated"))
    assumptions.push_back("FLOP definition not stated by the source: " + to_string(c) + " assumed");
  conversion = to_string(c) + (hardware ? ", hardware (incl. recompute)" : "") + ": " + fmt("%.4g", f) + " FLOPs/token";
  const double rate = tps_gpu * f;
  if (metric == "model_tflops_per_gpu" || metric == "tflops_per_gpu") return rate / 1e12;
  if (metric == "aggregate_pflops") {
    conversion += " x " + std::to_string(s.num_gpus) + " GPUs";
    return rate * gpus / 1e15;
  }
  conversion += ", peak " + fmt("%.1f", s.peak_flops_per_s / 1e12) + " TFLOP/s";
  return rate / s.peak_flops_per_s;  // mfu, hfu, pct_of_peak
}

std::string estimator_reason(const std::exception& e) { return e.what(); }

std::string list_of(const std::vector<int64_t>& values) {
  std::string out;
  for (const int64_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

std::string list_of(const std::vector<ir::Recompute>& values) {
  std::string out;
  for (const ir::Recompute v : values) out += (out.empty() ? "" : ", ") + ir::to_string(v);
  return out;
}

std::string list_of(const std::vector<bool>& values) {
  std::string out;
  for (const bool v : values) out += (out.empty() ? "" : ", ") + std::string(v ? "on" : "off");
  return out;
}

/// Every plan the row's unstated knobs allow (RowSetup::*_choices), s.plan first.
std::vector<ir::Plan> plans_to_try(const RowSetup& s) {
  std::vector<ir::Plan> out{s.plan};
  auto expand = [&out](const auto& choices, auto&& set) {
    if (choices.empty()) return;
    std::vector<ir::Plan> next;
    for (const auto& plan : out)
      for (const auto& value : choices) {
        ir::Plan p = plan;
        set(p, value);
        next.push_back(p);
      }
    out = std::move(next);
  };
  expand(s.vpp_choices, [](ir::Plan& p, int64_t v) { p.vpp = v; });
  expand(s.micro_batch_choices, [](ir::Plan& p, int64_t v) { p.micro_batch = v; });
  expand(s.zero_stage_choices, [](ir::Plan& p, int64_t z) {
    // ZeRO-1/2 shard the optimizer over the data-parallel ranks; 0 replicates.
    const int64_t dp = p.dp_replicate * p.dp_shard;
    p.zero_stage = z;
    p.dp_shard = z == 0 ? 1 : dp;
    p.dp_replicate = z == 0 ? dp : 1;
  });
  expand(s.recompute_choices, [](ir::Plan& p, ir::Recompute r) { p.recompute = r; });
  expand(s.sequence_parallel_choices, [](ir::Plan& p, bool sp) { p.sequence_parallel = sp; });
  return out;
}

/// Estimates every plan of plans_to_try and keeps the fastest that fits in HBM, else the fastest;
/// records each chosen value (the estimate's plan is the one chosen). Throws the first estimator error when no plan
/// can be estimated.
cost::Estimate estimate_best(const cost::Estimator& estimator, const RowSetup& s, std::vector<std::string>& assumptions) {
  std::optional<cost::Estimate> best;
  ir::Plan best_plan;
  bool best_fits = false;
  std::optional<std::string> first_error;
  const int64_t hbm = s.cluster.gpu.hbm_bytes;
  auto consider = [&](const ir::Plan& plan, cost::Estimate&& e) {
    const bool fits = e.memory.peak_bytes <= hbm;
    if (!best || (fits && !best_fits) || (fits == best_fits && e.step_time_s < best->step_time_s)) {
      best = std::move(e);
      best_plan = plan;
      best_fits = fits;
    }
  };
  for (const ir::Plan& plan : plans_to_try(s)) {
    try {
      cost::Estimate e = estimator.estimate(plan);
      const bool every_layer_fits = plan.recompute == ir::Recompute::full && !plan.recompute_layers &&
                                    e.memory.peak_bytes <= hbm;
      consider(plan, std::move(e));
      if (every_layer_fits && s.recompute_layers_choice)
        if (auto fewer = fewest_recomputed_layers_that_fit(estimator, plan, s.shape.layers, hbm)) {
          const ir::Plan block = fewer->plan;
          consider(block, std::move(*fewer));
        }
    } catch (const std::exception& ex) {
      if (!first_error) first_error = estimator_reason(ex);
    }
  }
  if (!best) throw std::runtime_error(first_error.value_or("no plan to estimate"));
  const std::string how = best_fits ? "the fastest that fits of " : "the fastest (none fits) of ";
  if (!s.vpp_choices.empty())
    assumptions.push_back(std::string(s.vpp_choices.front() == 1 ? "parallel.vpp not stated: " : "parallel.vpp not stated (interleaved): ") +
                          std::to_string(best_plan.vpp) + ", " + how + list_of(s.vpp_choices) + " (what " + s.framework.name +
                          " offers)");
  if (!s.micro_batch_choices.empty())
    assumptions.push_back("training.micro_batch_size not stated: " + std::to_string(best_plan.micro_batch) + ", " + how +
                          list_of(s.micro_batch_choices));
  if (!s.zero_stage_choices.empty())
    assumptions.push_back("parallel.zero_stage not stated: " + std::to_string(best_plan.zero_stage.value_or(0)) + ", " + how +
                          list_of(s.zero_stage_choices) + " (what " + s.framework.name + " offers)");
  if (!s.recompute_choices.empty())
    assumptions.push_back("recompute not stated: " + ir::to_string(best_plan.recompute) +
                          (best_plan.recompute_layers ? " on the first " + std::to_string(*best_plan.recompute_layers) +
                                                            " layers of each (virtual) stage (block)"
                                                      : "") +
                          ", " + how + list_of(s.recompute_choices) +
                          (s.recompute_layers_choice ? ", full on the fewest layers per stage that fit" : ""));
  if (!s.sequence_parallel_choices.empty())
    assumptions.push_back("parallel.sequence_parallel not stated: " +
                          std::string(best_plan.sequence_parallel.value_or(false) ? "on" : "off") + ", " + how +
                          list_of(s.sequence_parallel_choices));
  return *best;
}

}  // namespace

namespace {
/// The one result of a row that is not compared: its first comparable metric and measured value, if any.
std::vector<ValidationResult> skipped_result(const PreparedRow& p, std::string reason) {
  ValidationResult r = p.base;
  r.skipped = std::move(reason);
  if (!p.metrics.empty()) {
    r.metric = p.metrics.front().first;
    r.kind = p.metrics.front().second;
    if (r.kind != MetricKind::oom) r.measured = number_in(p.measured[r.metric]);
  }
  return {r};
}
}  // namespace

PreparedRow prepare_row(const ValidationSource& source, const json& row) {
  PreparedRow p;
  p.base.id = row["id"].get<std::string>();
  p.base.source = source.name;
  p.citation = source.citation;
  p.notes = source.notes;
  p.measured = row.contains("measured") && row["measured"].is_object() ? row["measured"] : json::object();
  p.metrics = comparable_metrics(p.measured);
  if (p.metrics.empty()) {
    std::string keys;
    for (const auto& [k, v] : p.measured.items())
      if (!v.is_null() && k != "tflops_kind" && k != "memory_kind") keys += (keys.empty() ? "" : ", ") + k;
    p.skipped = skipped_result(p, "no comparable metric (measured has: " + (keys.empty() ? std::string("nothing") : keys) + ")");
    return p;
  }
  for (const auto& [metric, kind] : p.metrics) {
    if (kind == MetricKind::oom) continue;
    const double v = *number_in(p.measured[metric]);
    if (!std::isnormal(v)) {  // a subnormal makes the relative error overflow (inf, then NaN statistics)
      p.skipped = skipped_result(p, "measured." + metric + " " + fmt("%g", v) + " is not a normal positive number (below " +
                                        fmt("%g", std::numeric_limits<double>::min()) + ")");
      return p;
    }
  }
  try {
    if (auto tuned = tuned_layouts(source, row)) {
      p.layouts = std::move(tuned->setups);
      p.layout_note = std::move(tuned->note);
      p.setup = p.layouts.front();
    } else {
      p.setup = setup_row(source, row);
    }
  } catch (const RowSkipped& e) {
    p.skipped = skipped_result(p, e.what());
    return p;
  }
  p.base.assumptions = p.setup.assumptions;
  p.base.hbm_bytes = p.setup.cluster.gpu.hbm_bytes;
  return p;
}

std::vector<ValidationResult> validate_prepared(const PreparedRow& p, const cost::CostParams& params) {
  if (p.skipped) return *p.skipped;
  ValidationResult base = p.base;
  cost::Estimate e;
  const RowSetup* chosen = &p.setup;
  if (p.layouts.empty()) {
    try {
      const cost::Estimator estimator(p.setup.graph, p.setup.cluster, p.setup.num_gpus, p.setup.settings, params);
      e = estimate_best(estimator, p.setup, base.assumptions);
    } catch (const std::exception& ex) {
      return skipped_result(p, "estimator: " + estimator_reason(ex));
    }
  } else {
    // A tuned layout: each layout's best knobs, then the fastest layout that fits (else the fastest).
    std::optional<std::string> first_error;
    std::vector<std::string> best_assumptions;
    bool have = false, best_fits = false;
    for (const RowSetup& s : p.layouts) {
      try {
        std::vector<std::string> assumptions = s.assumptions;
        const cost::Estimator estimator(s.graph, s.cluster, s.num_gpus, s.settings, params);
        cost::Estimate candidate = estimate_best(estimator, s, assumptions);
        const bool fits = candidate.memory.peak_bytes <= s.cluster.gpu.hbm_bytes;
        if (!have || (fits && !best_fits) || (fits == best_fits && candidate.tokens_per_s_per_gpu > e.tokens_per_s_per_gpu)) {
          e = std::move(candidate);
          chosen = &s;
          have = true;
          best_fits = fits;
          best_assumptions = std::move(assumptions);
        }
      } catch (const std::exception& ex) {
        if (!first_error) first_error = estimator_reason(ex);
      }
    }
    if (!have) return skipped_result(p, "estimator: " + first_error.value_or("no layout to estimate"));
    base.assumptions = std::move(best_assumptions);
    base.assumptions.push_back(p.layout_note + "; chosen tp " + std::to_string(chosen->plan.tp) + ", pp " +
                               std::to_string(chosen->plan.pp) + ", " + (best_fits ? "the fastest that fits" : "the fastest (none fits)"));
  }
  const RowSetup& s = *chosen;
  std::vector<ValidationResult> out;
  for (const auto& [metric, kind] : p.metrics) {
    ValidationResult r = base;
    r.metric = metric;
    r.kind = kind;
    r.estimate = e;
    constexpr double kGiB = double(1ll << 30);
    if (kind == MetricKind::oom) {
      r.predicted = double(e.memory.peak_bytes) / kGiB;
      r.measured = double(s.cluster.gpu.hbm_bytes) / kGiB;
      r.error = e.memory.peak_bytes > s.cluster.gpu.hbm_bytes ? 0.0 : 1.0;
      r.conversion = "predicted peak GiB vs HBM GiB: error 0 when predicted not to fit, 1 otherwise";
    } else {
      r.measured = number_in(p.measured[metric]);
      r.predicted = predict(metric, p.measured, p.citation, p.notes, s, e, r.conversion, r.assumptions);
      r.error = (*r.predicted - *r.measured) / *r.measured;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<ValidationResult> validate_row(const ValidationSource& source, const json& row,
                                           const CostParamsFor& params_for) {
  const PreparedRow p = prepare_row(source, row);
  if (p.skipped) return *p.skipped;
  return validate_prepared(p, params_for(p.setup.cluster.gpu, p.setup.framework));
}

std::vector<ValidationResult> validate_source(const ValidationSource& source, const CostParamsFor& params_for) {
  std::vector<ValidationResult> out;
  for (const auto& row : source.rows) {
    auto rs = validate_row(source, row, params_for);
    out.insert(out.end(), std::make_move_iterator(rs.begin()), std::make_move_iterator(rs.end()));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Statistics

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(p, 0.0, 1.0) * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

ErrorStats error_stats(const std::vector<ValidationResult>& results, MetricKind kind) {
  std::vector<double> abs_pct;
  for (const auto& r : results)
    if (r.kind == kind && !r.skipped && r.error && std::isfinite(*r.error)) abs_pct.push_back(std::fabs(*r.error) * 100.0);
  ErrorStats s;
  s.count = int64_t(abs_pct.size());
  s.median_abs_pct = percentile(abs_pct, 0.5);
  s.p90_abs_pct = percentile(abs_pct, 0.9);
  return s;
}

ValidationSummary summarize(const std::string& source, const std::string& citation, const std::vector<ValidationResult>& results) {
  ValidationSummary s;
  s.source = source;
  s.citation = citation;
  std::set<std::string> ids, compared, skipped;
  std::map<std::string, int64_t> reasons;
  for (const auto& r : results) {
    ids.insert(r.source + "\n" + r.id);
    if (r.skipped) {
      skipped.insert(r.source + "\n" + r.id);
      ++reasons[*r.skipped];
    } else {
      compared.insert(r.source + "\n" + r.id);
      if (r.kind == MetricKind::oom) {
        ++s.oom_rows;
        if (r.error && *r.error == 0.0) ++s.oom_predicted;
      }
    }
  }
  s.rows = int64_t(ids.size());
  s.rows_compared = int64_t(compared.size());
  s.rows_skipped = int64_t(skipped.size());
  s.throughput = error_stats(results, MetricKind::throughput);
  s.memory = error_stats(results, MetricKind::memory);
  std::vector<const ValidationResult*> cmp;
  for (const auto& r : results)
    if (!r.skipped && r.error) cmp.push_back(&r);
  std::stable_sort(cmp.begin(), cmp.end(), [](const auto* a, const auto* b) { return std::fabs(*a->error) > std::fabs(*b->error); });
  for (size_t i = 0; i < cmp.size() && i < 5; ++i) s.worst.push_back(*cmp[i]);
  s.skip_reasons.assign(reasons.begin(), reasons.end());
  std::stable_sort(s.skip_reasons.begin(), s.skip_reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

}  // namespace mgt::plan
