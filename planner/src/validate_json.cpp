// mgt.validation/1: ValidationResult, ValidationSummary and the whole report <-> JSON.
#include "mgt/planner/validate.hpp"

#include "validate_util.hpp"

#include "mgt/cost_model/breakdown_json.hpp"
#include "mgt/ir/error.hpp"

namespace mgt::plan {

using namespace detail;

json breakdown_to_json(const cost::Estimate& e) {
  return cost::to_json(e);  // the mgt.plans/1 spelling of every term (cost/breakdown_json.hpp)
}

json to_json(const ValidationResult& r, bool with_breakdown) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json j = {{"id", r.id},
            {"source", r.source},
            {"metric", r.metric.empty() ? json(nullptr) : json(r.metric)},
            {"kind", to_string(r.kind)},
            {"predicted", opt(r.predicted)},
            {"measured", opt(r.measured)},
            {"error", opt(r.error)},
            {"skipped", r.skipped ? json(*r.skipped) : json(nullptr)},
            {"assumptions", r.assumptions}};
  if (!r.conversion.empty()) j["conversion"] = r.conversion;
  if (with_breakdown && r.estimate && !r.skipped) j["breakdown"] = breakdown_to_json(*r.estimate);
  return j;
}

json to_json(const ValidationSummary& s) {
  auto stats = [](const ErrorStats& e) {
    return json{{"count", e.count}, {"median_abs_pct", e.median_abs_pct}, {"p90_abs_pct", e.p90_abs_pct}};
  };
  json worst = json::array();
  for (const auto& r : s.worst) worst.push_back({{"id", r.id}, {"source", r.source}, {"metric", r.metric}, {"error", r.error ? json(*r.error) : json(nullptr)}});
  json reasons = json::array();
  for (const auto& [reason, n] : s.skip_reasons) reasons.push_back({{"reason", reason}, {"rows", n}});
  return {{"source", s.source},
          {"citation", s.citation},
          {"rows", s.rows},
          {"rows_compared", s.rows_compared},
          {"rows_skipped", s.rows_skipped},
          {"throughput", stats(s.throughput)},
          {"memory", stats(s.memory)},
          {"oom", {{"rows", s.oom_rows}, {"predicted_oom", s.oom_predicted}}},
          {"worst", worst},
          {"skip_reasons", reasons}};
}

namespace {

std::optional<double> read_opt_number(const json& doc, const std::string& key, const std::string& source) {
  if (!doc.contains(key)) throw ir::InputError(source, key, "missing", "write null when there is no value");
  const json& v = doc.at(key);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) throw ir::InputError(source, key, "expected a number or null, got " + v.dump());
  return v.get<double>();
}

std::string read_string(const json& doc, const std::string& key, const std::string& source) {
  if (!doc.contains(key) || !doc.at(key).is_string()) throw ir::InputError(source, key, "missing or not a string");
  return doc.at(key).get<std::string>();
}

int64_t read_count(const json& doc, const std::string& key, const std::string& source) {
  if (!doc.contains(key) || !doc.at(key).is_number_integer() || doc.at(key).get<int64_t>() < 0)
    throw ir::InputError(source, key, "missing or not an integer >= 0");
  return doc.at(key).get<int64_t>();
}

const json& read_object(const json& doc, const std::string& key, const std::string& source) {
  if (!doc.contains(key) || !doc.at(key).is_object()) throw ir::InputError(source, key, "missing or not an object");
  return doc.at(key);
}

const json& read_array(const json& doc, const std::string& key, const std::string& source) {
  if (!doc.contains(key) || !doc.at(key).is_array()) throw ir::InputError(source, key, "missing or not an array");
  return doc.at(key);
}

MetricKind read_metric_kind(const std::string& text, const std::string& source) {
  const std::optional<MetricKind> kind = metric_kind_from_string(text);
  if (!kind) throw ir::InputError(source, "kind", "\"" + text + "\" is not throughput, memory or oom");
  return *kind;
}

ErrorStats error_stats_from_json(const json& doc, const std::string& source) {
  ErrorStats e;
  e.count = read_count(doc, "count", source);
  e.median_abs_pct = read_opt_number(doc, "median_abs_pct", source).value_or(0);
  e.p90_abs_pct = read_opt_number(doc, "p90_abs_pct", source).value_or(0);
  return e;
}

}  // namespace

ValidationResult validation_result_from_json(const json& doc, const std::string& source) {
  if (!doc.is_object()) throw ir::InputError(source, "", "expected an object (a validation row)");
  ValidationResult r;
  r.id = read_string(doc, "id", source);
  r.source = read_string(doc, "source", source);
  if (doc.contains("metric") && !doc.at("metric").is_null()) r.metric = read_string(doc, "metric", source);
  r.kind = read_metric_kind(read_string(doc, "kind", source), source);
  r.predicted = read_opt_number(doc, "predicted", source);
  r.measured = read_opt_number(doc, "measured", source);
  r.error = read_opt_number(doc, "error", source);
  if (doc.contains("skipped") && !doc.at("skipped").is_null()) r.skipped = read_string(doc, "skipped", source);
  for (const json& a : read_array(doc, "assumptions", source)) {
    if (!a.is_string()) throw ir::InputError(source, "assumptions", "expected strings, got " + a.dump());
    r.assumptions.push_back(a.get<std::string>());
  }
  if (doc.contains("conversion")) r.conversion = read_string(doc, "conversion", source);
  if (doc.contains("breakdown")) r.estimate = cost::estimate_from_json(doc.at("breakdown"), source + ": breakdown");
  return r;
}

ValidationSummary validation_summary_from_json(const json& doc, const std::string& source) {
  if (!doc.is_object()) throw ir::InputError(source, "", "expected an object (a validation summary)");
  ValidationSummary s;
  s.source = read_string(doc, "source", source);
  s.citation = read_string(doc, "citation", source);
  s.rows = read_count(doc, "rows", source);
  s.rows_compared = read_count(doc, "rows_compared", source);
  s.rows_skipped = read_count(doc, "rows_skipped", source);
  s.throughput = error_stats_from_json(read_object(doc, "throughput", source), source + ": throughput");
  s.memory = error_stats_from_json(read_object(doc, "memory", source), source + ": memory");
  const json& oom = read_object(doc, "oom", source);
  s.oom_rows = read_count(oom, "rows", source + ": oom");
  s.oom_predicted = read_count(oom, "predicted_oom", source + ": oom");
  for (const json& w : read_array(doc, "worst", source)) {
    ValidationResult r;
    r.id = read_string(w, "id", source + ": worst");
    r.source = read_string(w, "source", source + ": worst");
    r.metric = read_string(w, "metric", source + ": worst");
    r.error = read_opt_number(w, "error", source + ": worst");
    s.worst.push_back(std::move(r));
  }
  for (const json& reason : read_array(doc, "skip_reasons", source))
    s.skip_reasons.emplace_back(read_string(reason, "reason", source + ": skip_reasons"),
                                read_count(reason, "rows", source + ": skip_reasons"));
  return s;
}

json to_json(const ValidationReport& report) {
  json rows = json::array();
  for (const auto& r : report.rows) rows.push_back(to_json(r));
  json per_source = json::array();
  for (const auto& s : report.sources) per_source.push_back(to_json(s));
  return {{"format", kValidationFormat},
          {"rows", std::move(rows)},
          {"summary", {{"sources", std::move(per_source)}, {"overall", to_json(report.overall)}}}};
}

ValidationReport validation_report_from_json(const json& doc, const std::string& source) {
  if (!doc.is_object()) throw ir::InputError(source, "", "expected a JSON object (an mgt.validation/1 report)");
  ir::require_format(doc, kValidationFormat, source);
  ValidationReport report;
  const json& rows = read_array(doc, "rows", source);
  for (size_t i = 0; i < rows.size(); ++i)
    report.rows.push_back(validation_result_from_json(rows[i], source + ": rows[" + std::to_string(i) + "]"));
  const json& summary = read_object(doc, "summary", source);
  const json& sources = read_array(summary, "sources", source + ": summary");
  for (size_t i = 0; i < sources.size(); ++i)
    report.sources.push_back(
        validation_summary_from_json(sources[i], source + ": summary.sources[" + std::to_string(i) + "]"));
  report.overall = validation_summary_from_json(read_object(summary, "overall", source + ": summary"),
                                                source + ": summary.overall");
  return report;
}

}  // namespace mgt::plan
