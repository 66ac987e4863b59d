// Estimate / TimeBreakdown / MemoryBreakdown <-> JSON, one spelling per term (kTimeTerms, kMemoryTerms).
#include "mgt/cost_model/breakdown_json.hpp"

#include "mgt/ir/error.hpp"

namespace mgt::cost {

namespace {

using json = nlohmann::json;

const json& object_at(const json& doc, const std::string& source) {
  if (!doc.is_object()) throw ir::InputError(source, "", "expected an object, got " + std::string(doc.type_name()));
  return doc;
}

double nonnegative_number(const json& doc, const std::string& key, const std::string& source) {
  if (!doc.contains(key)) throw ir::InputError(source, key, "missing", "an estimate lists every term, 0 when absent");
  const json& v = doc.at(key);
  if (!v.is_number()) throw ir::InputError(source, key, "expected a number, got " + std::string(v.type_name()));
  const double d = v.get<double>();
  if (!(d >= 0)) throw ir::InputError(source, key, "must be >= 0, got " + v.dump());
  return d;
}

int64_t nonnegative_int(const json& doc, const std::string& key, const std::string& source) {
  if (!doc.contains(key)) throw ir::InputError(source, key, "missing", "an estimate lists every term, 0 when absent");
  const json& v = doc.at(key);
  if (!v.is_number_integer()) throw ir::InputError(source, key, "expected an integer byte count, got " + v.dump());
  const int64_t n = v.get<int64_t>();
  if (n < 0) throw ir::InputError(source, key, "must be >= 0, got " + std::to_string(n));
  return n;
}

std::string string_at(const json& doc, const std::string& key, const std::string& source) {
  if (!doc.contains(key) || !doc.at(key).is_string()) throw ir::InputError(source, key, "missing or not a string");
  return doc.at(key).get<std::string>();
}

}  // namespace

json to_json(const TimeBreakdown& time) {
  json j = json::object();
  for (const auto& term : kTimeTerms) j[term.json_name] = time.*term.field;
  return j;
}

TimeBreakdown time_breakdown_from_json(const json& doc, const std::string& source) {
  object_at(doc, source);
  TimeBreakdown t;
  for (const auto& term : kTimeTerms) t.*term.field = nonnegative_number(doc, term.json_name, source);
  return t;
}

json to_json(const MemoryBreakdown& memory) {
  json j = json::object();
  for (const auto& term : kMemoryTerms) j[term.json_name] = memory.*term.field;
  j["peak_bytes"] = memory.peak_bytes;
  return j;
}

MemoryBreakdown memory_breakdown_from_json(const json& doc, const std::string& source) {
  object_at(doc, source);
  MemoryBreakdown m;
  for (const auto& term : kMemoryTerms) m.*term.field = nonnegative_int(doc, term.json_name, source);
  m.peak_bytes = nonnegative_int(doc, "peak_bytes", source);
  return m;
}

json to_json(const Estimate& e) {
  return {{"plan", ir::to_json(e.plan)},
          {"step_time_s", e.step_time_s},
          {"tokens_per_s_per_gpu", e.tokens_per_s_per_gpu},
          {"mfu", e.mfu},
          {"model_flops_per_step", e.model_flops_per_step},
          {"bottleneck", e.bottleneck},
          {"host_wait_s", e.host_wait_s},
          {"memory", to_json(e.memory)},
          {"time", to_json(e.time)}};
}

Estimate estimate_from_json(const json& doc, const std::string& source) {
  object_at(doc, source);
  Estimate e;
  if (!doc.contains("plan")) throw ir::InputError(source, "plan", "missing", "an estimate names its mgt.plan/1");
  e.plan = ir::plan_from_json(doc.at("plan"), source + ": plan");
  e.step_time_s = nonnegative_number(doc, "step_time_s", source);
  e.tokens_per_s_per_gpu = nonnegative_number(doc, "tokens_per_s_per_gpu", source);
  e.mfu = nonnegative_number(doc, "mfu", source);
  e.model_flops_per_step = nonnegative_number(doc, "model_flops_per_step", source);
  e.bottleneck = string_at(doc, "bottleneck", source);
  // Written since the host-dispatch model; older documents have none (no wait).
  if (doc.contains("host_wait_s")) e.host_wait_s = nonnegative_number(doc, "host_wait_s", source);
  if (!doc.contains("memory")) throw ir::InputError(source, "memory", "missing");
  e.memory = memory_breakdown_from_json(doc.at("memory"), source + ": memory");
  if (!doc.contains("time")) throw ir::InputError(source, "time", "missing");
  e.time = time_breakdown_from_json(doc.at("time"), source + ": time");
  return e;
}

}  // namespace mgt::cost
