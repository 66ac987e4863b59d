// Fuzz target: the CLI's `estimate` combination of a model, a cluster and a plan (issue 18), as one
// JSON document {"model": HF config, "cluster": mgt.cluster/1 or a preset name, "plan": mgt.plan/1,
// "gpus": N, "seq_len": S, "global_batch": sequences}. The steps are `mgt-plan estimate`'s: load and
// verify, the planner's rules, the estimate, the out-of-range check. A clean InputError at any step
// is the answer to bad input; an estimate that passes the check must be finite and in range, and
// anything else that escapes (another exception, a crash, a sanitizer report, a hang) is a finding.
#include "fuzz_common.hpp"
#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/planner/rules.hpp"
#include "mgt/planner/search.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

namespace {

using nlohmann::json;
constexpr int64_t kMaxGpus = 1 << 20;  // the CLI's --gpus limit

int64_t positive(const json& doc, const char* key, int64_t fallback, int64_t most) {
  const int64_t v = doc.contains(key) ? mgt::ir::require_positive_int(doc, key, "input") : fallback;
  if (v > most) throw mgt::ir::InputError("input", key, "too large");
  return v;
}

// The finding conditions (a trap is what libFuzzer reports): a non-finite or non-positive time, rate or
// peak, and throughput that does not account for the batch: tokens/s/GPU x step time x GPUs must be
// the global batch, computed here from the settings, not from the estimator's own fields.
void check_in_range(const mgt::cost::Estimate& e, int64_t gpus, int64_t global_batch_tokens) {
  if (!std::isfinite(e.step_time_s) || !(e.step_time_s > 0)) __builtin_trap();
  if (!std::isfinite(e.tokens_per_s_per_gpu) || !(e.tokens_per_s_per_gpu > 0)) __builtin_trap();
  if (!std::isfinite(e.mfu) || e.mfu < 0) __builtin_trap();
  if (e.memory.peak_bytes <= 0) __builtin_trap();
  const double tokens = e.tokens_per_s_per_gpu * e.step_time_s * double(gpus);
  if (std::fabs(tokens - double(global_batch_tokens)) > 1e-6 * double(global_batch_tokens)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mgt;
  try {
    const json doc = ir::parse_json_text(fuzz::text_of(data, size), "input");
    if (!doc.is_object() || !doc.contains("model") || !doc.contains("plan")) return 0;
    ir::Graph graph = ir::graph_from_hf_config(doc["model"], "config.json");
    ir::verify(graph, "config.json");
    const ir::ClusterSpec cluster = doc.contains("cluster") && doc["cluster"].is_string()
                                        ? ir::cluster_preset(doc["cluster"].get<std::string>())
                                        : doc.contains("cluster") ? ir::cluster_from_json(doc["cluster"], "cluster.json")
                                                                  : ir::cluster_preset("h100-sxm");
    const ir::Plan plan = ir::plan_from_json(doc["plan"], "--plan");
    const int64_t gpus = positive(doc, "gpus", 8, kMaxGpus);
    cost::TrainingSettings settings;
    settings.seq_len = positive(doc, "seq_len", 4096, graph.info.max_seq_len > 0 ? graph.info.max_seq_len : 1 << 20);
    settings.global_batch_tokens =
        ir::checked_mul(positive(doc, "global_batch", 64, int64_t{1} << 30), settings.seq_len, "input", "global_batch");
    const plan::ModelFacts facts = plan::model_facts(graph);
    if (plan::first_broken_rule(plan, facts, cluster, settings, {gpus, /*allow_cross_node_tp=*/false})) return 0;
    const cost::Estimator estimator(graph, cluster, gpus, settings);
    const cost::Estimate e = estimator.estimate(plan);
    if (plan::estimate_out_of_range(e)) return 0;  // refused by estimate, as the CLI refuses it
    check_in_range(e, gpus, settings.global_batch_tokens);
  } catch (const ir::InputError&) {
  }
  return 0;
}
