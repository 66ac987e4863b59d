// mgt.plan/1: reading, writing and printing plans. Keys and defaults: docs/formats.md.
#include "mgt/ir/plan.hpp"

#include "mgt/ir/enum_names.hpp"
#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>

#include <array>

namespace mgt::ir {

namespace {
// In enumerator order; to_string and plan_from_json both read it.
constexpr std::array<const char*, 3> kRecomputeNames{"none", "selective", "full"};
}  // namespace

std::string to_string(Recompute recompute) { return name_of(kRecomputeNames, recompute, "none"); }

bool sequence_parallel(const Plan& plan) { return plan.sequence_parallel.value_or(plan.tp > 1); }

int64_t expert_tp(const Plan& plan) { return plan.etp.value_or(plan.tp); }

int64_t zero_stage(const Plan& plan) { return plan.zero_stage.value_or(plan.dp_shard > 1 ? 3 : 0); }

namespace {
/// The product of the mesh sizes, checked; InputError naming `source` when it overflows int64.
int64_t world_size(int64_t dp_replicate, int64_t dp_shard, int64_t cp, int64_t tp, int64_t pp, const std::string& source) {
  int64_t n = 1;
  for (int64_t axis : {dp_replicate, dp_shard, cp, tp, pp}) n = checked_mul(n, axis, source, "dp_replicate*dp_shard*cp*tp*pp");
  return n;
}

// The integer keys of mgt.plan/1, with the member each one sets.
struct IntKey {
  const char* name;
  int64_t Plan::*member;
};
constexpr std::array<IntKey, 8> kIntKeys{{{"dp_replicate", &Plan::dp_replicate},
                                          {"dp_shard", &Plan::dp_shard},
                                          {"tp", &Plan::tp},
                                          {"cp", &Plan::cp},
                                          {"pp", &Plan::pp},
                                          {"vpp", &Plan::vpp},
                                          {"ep", &Plan::ep},
                                          {"micro_batch", &Plan::micro_batch}}};
const char* kAllKeys =
    "dp_replicate, dp_shard, tp, cp, pp, vpp, ep, etp, micro_batch, grad_accum, recompute, recompute_layers, "
    "sequence_parallel, zero_stage";
}  // namespace

int64_t world_size(const Plan& plan) {
  // Checked: a hostile plan whose product wraps around could otherwise equal --gpus. The error's
  // strings are built only on overflow (the search asks this per candidate).
  int64_t n = 1;
  bool overflow = false;
  for (int64_t axis : {plan.dp_replicate, plan.dp_shard, plan.cp, plan.tp, plan.pp})
    overflow = overflow || __builtin_mul_overflow(n, axis, &n);
  if (!overflow) return n;
  return world_size(plan.dp_replicate, plan.dp_shard, plan.cp, plan.tp, plan.pp, "plan");
}

Plan plan_from_json(const nlohmann::json& doc, const std::string& source) {
  if (!doc.is_object()) throw InputError(source, "", "a plan must be a JSON object", "e.g. {\"dp_shard\":4,\"tp\":2}");
  if (doc.contains("format") && doc.at("format") != "mgt.plan/1")
    throw InputError(source, "format", "unknown format " + doc.at("format").dump(), "this reader accepts \"mgt.plan/1\"");
  Plan plan;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    if (key == "format") continue;
    bool known = key == "grad_accum" || key == "etp" || key == "recompute" || key == "recompute_layers" ||
                 key == "sequence_parallel" || key == "zero_stage";
    for (const auto& k : kIntKeys) known = known || key == k.name;
    if (!known) throw InputError(source, key, "unknown plan key", std::string("known keys: ") + kAllKeys);
  }
  for (const auto& k : kIntKeys) plan.*k.member = optional_positive_int(doc, k.name, 1, source);
  if (doc.contains("etp") && !doc.at("etp").is_null()) plan.etp = require_positive_int(doc, "etp", source);
  if (doc.contains("grad_accum") && !doc.at("grad_accum").is_null())
    plan.grad_accum = require_positive_int(doc, "grad_accum", source);
  if (doc.contains("recompute") && !doc.at("recompute").is_null()) {
    const std::string r = require_string(doc, "recompute", source);
    const std::optional<Recompute> recompute = enum_of<Recompute>(kRecomputeNames, r);
    if (!recompute) throw InputError(source, "recompute", "unknown value \"" + r + "\"", "use none, selective or full");
    plan.recompute = *recompute;
  }
  if (doc.contains("recompute_layers") && !doc.at("recompute_layers").is_null()) {
    plan.recompute_layers = require_positive_int(doc, "recompute_layers", source);
    if (plan.recompute != Recompute::full)
      throw InputError(source, "recompute_layers", "applies to recompute \"full\" only",
                       "set \"recompute\": \"full\" or drop the key");
  }
  if (doc.contains("sequence_parallel") && !doc.at("sequence_parallel").is_null())
    plan.sequence_parallel = optional_bool(doc, "sequence_parallel", false, source);
  if (doc.contains("zero_stage") && !doc.at("zero_stage").is_null()) {
    int64_t z = optional_nonnegative_int(doc, "zero_stage", 0, source);
    if (z > 3) throw InputError(source, "zero_stage", "must be 0, 1, 2 or 3, got " + std::to_string(z));
    plan.zero_stage = z;
  }
  world_size(plan.dp_replicate, plan.dp_shard, plan.cp, plan.tp, plan.pp, source);
  if (plan.sequence_parallel.value_or(false) && plan.tp == 1)
    throw InputError(source, "sequence_parallel", "sequence parallelism needs tp > 1",
                     "drop the key or set tp");
  if (plan.zero_stage.value_or(0) > 0 && plan.dp_shard == 1)
    throw InputError(source, "zero_stage", "zero_stage " + std::to_string(*plan.zero_stage) +
                                               " shards over dp_shard, but dp_shard is 1",
                     "set dp_shard > 1 or zero_stage 0");
  return plan;
}

Plan parse_plan_argument(const std::string& text_or_path) {
  size_t first = text_or_path.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text_or_path[first] == '{')
    return plan_from_json(parse_json_text(text_or_path, "--plan"), "--plan");
  // `--plan '[8]'` or `--plan null` is JSON, not a path: say so rather than "cannot open file".
  std::error_code ec;
  if (!std::filesystem::exists(text_or_path, ec) && nlohmann::json::accept(text_or_path))
    throw InputError("--plan", "", "is JSON but not an object: got " +
                                       std::string(nlohmann::json::parse(text_or_path).type_name()) + " " + text_or_path,
                     "give an object such as '{\"dp_shard\":4,\"tp\":2}', or a mgt.plan/1 file");
  return plan_from_json(read_json_file(text_or_path), text_or_path);
}

nlohmann::json to_json(const Plan& plan) {
  nlohmann::json out = nlohmann::json::object();
  out["format"] = "mgt.plan/1";
  for (const auto& k : kIntKeys) out[k.name] = plan.*k.member;
  if (plan.etp) out["etp"] = *plan.etp;
  if (plan.grad_accum) out["grad_accum"] = *plan.grad_accum;
  out["recompute"] = to_string(plan.recompute);
  if (plan.recompute_layers) out["recompute_layers"] = *plan.recompute_layers;
  out["sequence_parallel"] = sequence_parallel(plan);
  out["zero_stage"] = zero_stage(plan);
  return out;
}

std::string to_string(const Plan& plan) {
  std::string out = "dp_replicate=" + std::to_string(plan.dp_replicate) +
                    " dp_shard=" + std::to_string(plan.dp_shard) + " tp=" + std::to_string(plan.tp) +
                    (sequence_parallel(plan) ? "(sp)" : "") + " cp=" + std::to_string(plan.cp);
  if (plan.pp > 1) out += " pp=" + std::to_string(plan.pp);
  if (plan.vpp > 1) out += " vpp=" + std::to_string(plan.vpp);
  if (plan.ep > 1) out += " ep=" + std::to_string(plan.ep);
  if (plan.etp && *plan.etp != plan.tp) out += " etp=" + std::to_string(*plan.etp);
  out += " mbs=" + std::to_string(plan.micro_batch);
  if (plan.grad_accum) out += " ga=" + std::to_string(*plan.grad_accum);
  out += " recompute=" + to_string(plan.recompute);
  if (plan.recompute_layers) out += "(" + std::to_string(*plan.recompute_layers) + " layers)";
  return out;
}

}  // namespace mgt::ir
