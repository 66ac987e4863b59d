// Estimator vs simulator (issue 4, part 4; docs/simulator.md §8): over a few hundred random valid plans
// of small models, the lowered and simulated step agrees with the analytic estimate within 5 % on
// step time and peak memory. Plans come from the planner's own candidate enumeration and rules, so
// they are the plans a search would estimate; sampled with a fixed seed.
#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/cost_model/simulator.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/lower.hpp"
#include "mgt/planner/rules.hpp"
#include "mgt/planner/search.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace mgt::plan {
namespace {

struct Case {
  const char* model;
  int64_t gpus;
  int64_t seq_len;
  int64_t global_batch_tokens;
  size_t samples;  // plans drawn from the valid candidates
  // Only Megatron-Core's further expert layouts (ep reaching into dp_replicate, or etp != tp), which the
  // other cases leave out so that their samples stay the same.
  bool expert_layouts_only = false;
};

// Whether ep reaches into dp_replicate (etp x ep above the tp x cp x dp_shard ranks) or etp != tp.
bool megatron_expert_layout(const ir::Plan& p) {
  return ir::expert_tp(p) != p.tp || ir::expert_tp(p) * p.ep > p.tp * p.cp * p.dp_shard;
}

struct Diff {
  std::string what;
  double step_rel = 0, memory_rel = 0;
  bool pipelined_or_expert = false;  // pp > 1 or ep > 1
  bool fsdp = false;                 // dp_shard > 1: parameters sharded (ZeRO-3)
};

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

cost::TrainingSettings settings_of(int64_t seq_len, int64_t seqs) {
  cost::TrainingSettings settings;
  settings.seq_len = seq_len;
  settings.global_batch_tokens = seqs * seq_len;
  return settings;
}

std::string terms(const cost::TimeBreakdown& t) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "compute %.4g recompute %.4g tp %.4g cp %.4g fsdp %.4g dp %.4g pp %.4g ep %.4g bubble %.4g opt %.4g "
                "overhead %.4g",
                t.compute_s, t.recompute_s, t.exposed_tp_s, t.exposed_cp_s, t.exposed_fsdp_s, t.exposed_dp_s,
                t.exposed_pp_s, t.exposed_ep_s, t.bubble_s, t.optimizer_s, t.overhead_s);
  return buf;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs every sampled plan; returns the differences and the plans outside 5 %.
struct Stats {
  std::vector<double> step, memory;
  std::vector<Diff> outside;
  size_t flat_plans = 0;  // pp == 1 and ep == 1
};

Stats compare_random_plans() {
  const Case cases[] = {
      {"GPT-2.json", 8, 1024, 32 * 1024, 60},
      {"Llama-3.1-8B.json", 16, 2048, 64 * 2048, 60},
      {"Qwen3-8B.json", 32, 1024, 64 * 1024, 60},
      {"Mixtral-8x7B.json", 32, 1024, 64 * 1024, 60},
      {"Phi-3-mini.json", 16, 1024, 32 * 1024, 60},
      {"Mixtral-8x7B.json", 32, 1024, 64 * 1024, 60, true},
  };
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  std::vector<double> step_diffs, memory_diffs;
  std::vector<Diff> failures;
  size_t simulated = 0, flat = 0;
  for (const Case& c : cases) {
    const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/" + c.model);
    cost::TrainingSettings settings;
    settings.seq_len = c.seq_len;
    settings.global_batch_tokens = c.global_batch_tokens;
    const ModelFacts facts = model_facts(graph);
    SearchOptions options;
    // Accelerate's rules: without them the search also proposes DDP beside tp (dp_shard 1), where the
    // estimator hides the DDP all-reduce under backward but the schedule does not (a known gap).
    options.rules = {c.gpus, false, "accelerate"};
    options.num_layers = facts.num_layers;
    options.num_experts = facts.num_experts;
    options.max_vpp = 2;
    options.expert_over_replicas = options.expert_tensor_parallel = c.expert_layouts_only;
    std::vector<ir::Plan> valid;
    for (const ir::Plan& p : enumerate_candidates(c.gpus, options))
      if (!first_broken_rule(p, facts, cluster, settings, options.rules) && (!c.expert_layouts_only || megatron_expert_layout(p)))
        valid.push_back(p);
    std::mt19937 rng(42);
    std::shuffle(valid.begin(), valid.end(), rng);
    const cost::Estimator estimator(graph, cluster, c.gpus, settings);
    const cost::Simulator simulator(graph, cluster, settings);
    size_t taken = 0;
    for (const ir::Plan& p : valid) {
      if (taken == c.samples) break;
      ++taken;
      const cost::Estimate e = estimator.estimate(p);
      const ir::Schedule s = lower_to_schedule(graph, p, settings, c.gpus, cluster);
      const cost::SimulationResult r = simulator.simulate(s);
      ++simulated;
      Diff d{std::string(c.model) + " " + ir::to_string(e.plan), rel(r.step_time_s, e.step_time_s),
             rel(double(r.peak_bytes), double(e.memory.peak_bytes)), p.pp > 1 || p.ep > 1, e.plan.dp_shard > 1};
      if (!d.pipelined_or_expert) ++flat;
      step_diffs.push_back(d.step_rel);
      memory_diffs.push_back(d.memory_rel);
      if (d.step_rel > 0.05 || d.memory_rel > 0.05) {
        d.what += "\n  step sim " + std::to_string(r.step_time_s) + " est " + std::to_string(e.step_time_s) +
                  "\n  sim " + terms(r.breakdown) + "\n  est " + terms(e.time) + "\n  peak sim " +
                  std::to_string(r.peak_bytes) + " est " + std::to_string(e.memory.peak_bytes);
        failures.push_back(d);
      }
    }
  }
  return Stats{step_diffs, memory_diffs, failures, flat};
}

// What holds (docs/simulator.md §8): the medians under 1 % (step) and 0.5 % (memory); at least 97 % of
// plans, with and without pipeline or expert parallelism, within 5 % on both step time and peak
// memory; no plan beyond 10 % (step) or 10 % (memory); and every plan outside 5 % shards with FSDP
// (dp_shard > 1), the class §8 explains: the estimator prices each copy's all-gather and
// reduce-scatter against the compute beside it in closed form, the simulator queues them on one
// stream, so where that stream is congested under a pipeline they differ.
// Tightening these bounds is the goal; loosening them is a regression.
TEST(consistency, estimator_and_simulator_agree) {
  const Stats s = compare_random_plans();
  const size_t simulated = s.step.size();
  size_t flat_outside = 0;
  for (const auto& d : s.outside) flat_outside += d.pipelined_or_expert ? 0 : 1;
  const size_t deep = simulated - s.flat_plans, deep_outside = s.outside.size() - flat_outside;
  const double max_step = s.step.empty() ? 0 : *std::max_element(s.step.begin(), s.step.end());
  const double max_mem = s.memory.empty() ? 0 : *std::max_element(s.memory.begin(), s.memory.end());
  std::printf("consistency: %zu plans; step time |sim-est|/est median %.3f %% max %.3f %%; peak memory median %.3f %% "
              "max %.3f %%\n",
              simulated, 100 * median(s.step), 100 * max_step, 100 * median(s.memory), 100 * max_mem);
  std::printf("consistency: within 5 %%: %zu of %zu plans without pp/ep, %zu of %zu with pp or ep\n",
              s.flat_plans - flat_outside, s.flat_plans, deep - deep_outside, deep);
  for (const auto& d : s.outside)
    std::printf("outside 5 %%: %s\n  step %.1f %% memory %.1f %%\n", d.what.c_str(), 100 * d.step_rel, 100 * d.memory_rel);
  ASSERT_GE(simulated, 200u);
  ASSERT_GE(s.flat_plans, 80u);
  EXPECT_LT(median(s.step), 0.01);
  EXPECT_LT(median(s.memory), 0.005);
  EXPECT_GE(double(s.flat_plans - flat_outside), 0.97 * double(s.flat_plans));
  EXPECT_GE(double(deep - deep_outside), 0.97 * double(deep));
  EXPECT_LT(max_step, 0.10);
  EXPECT_LT(max_mem, 0.10);
  // Known since the pipeline boundary is priced on the slowest link it crosses (the estimator) while
  // the simulator prices each send/recv on its own pair's link: a pipelined DDP plan across nodes may
  // sit just outside 5 % (Mixtral pp 8 x dp_replicate 4: 5.7 %). A flat plan outside 5 % must shard.
  for (const auto& d : s.outside)
    EXPECT_TRUE(d.fsdp || d.pipelined_or_expert) << "outside 5 % without FSDP or a pipeline: " << d.what;
}

// Megatron-Core's expert layouts (issue 16): ep carved from dp_replicate and etp != tp, under DDP,
// ZeRO-1, ZeRO-2, FSDP and HSDP, with and without a pipeline. Expert gradients reduce over the
// expert-data-parallel group in both the estimate and the schedule; they agree as the sampled plans
// above do: within 5 % on step time and memory, FSDP plans aside (the class explained above), and
// none beyond 10 %.
TEST(consistency, expert_layouts_estimator_and_simulator_agree) {
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Mixtral-8x7B.json");
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  cost::TrainingSettings settings;
  settings.seq_len = 1024;
  settings.global_batch_tokens = 64 * 1024;
  const cost::Estimator estimator(graph, cluster, 32, settings);
  const cost::Simulator simulator(graph, cluster, settings);
  size_t over_replicas = 0, own_etp = 0;
  for (const char* text : {
           R"({"dp_replicate":32,"ep":8})",                                    // DDP, ep over replicas
           R"({"dp_replicate":16,"dp_shard":2,"ep":8,"zero_stage":1})",        // ZeRO-1
           R"({"dp_replicate":8,"dp_shard":4,"ep":8,"zero_stage":2})",         // ZeRO-2
           R"({"dp_replicate":8,"dp_shard":4,"ep":8})",                        // HSDP, ep 4 x 2
           R"({"dp_replicate":4,"dp_shard":4,"tp":2,"etp":1,"ep":8})",         // HSDP, etp 1
           R"({"dp_replicate":2,"dp_shard":4,"tp":4,"etp":1,"ep":2,"zero_stage":1})",  // etp 1, ep in tp
           R"({"dp_replicate":4,"dp_shard":2,"tp":2,"etp":1,"ep":4,"pp":2,"zero_stage":1})",
           R"({"pp":4,"dp_replicate":8,"ep":8})",                              // pipelined DDP
       }) {
    const ir::Plan p = ir::parse_plan_argument(text);
    const cost::Estimate e = estimator.estimate(p);
    const cost::SimulationResult r = simulator.simulate(lower_to_schedule(graph, p, settings, 32, cluster));
    over_replicas += ir::expert_tp(p) * p.ep > p.tp * p.cp * p.dp_shard ? 1 : 0;  // ep reaches into dp_replicate
    own_etp += ir::expert_tp(p) != p.tp ? 1 : 0;
    const double step = rel(r.step_time_s, e.step_time_s), memory = rel(double(r.peak_bytes), double(e.memory.peak_bytes));
    std::printf("expert layout %s: step %.2f %% memory %.2f %%\n  sim %s\n  est %s\n", text, 100 * step, 100 * memory,
                terms(r.breakdown).c_str(), terms(e.time).c_str());
    EXPECT_LT(step, e.plan.dp_shard > 1 && e.plan.zero_stage == 3 ? 0.10 : 0.05) << text;
    EXPECT_LT(memory, 0.05) << text;
  }
  EXPECT_GE(over_replicas, 4u);
  EXPECT_GE(own_etp, 3u);
}

// On a CPU cluster (gpu.arch cpu, as `probe --backend cpu` writes) a rank runs its instructions one
// after another: the simulator serialises its streams and the estimator hides no communication
// under compute. Without a pipeline they then agree to rounding: no overlap is left to model. With
// one, a serial rank also blocks at each send until its peer reaches the receive, which the
// estimator's pipeline model does not price (docs/simulator.md §8: up to 12 % here, about 35 % with
// vpp 2); those plans are left out here.
TEST(consistency, serial_streams_agree_on_cpu_clusters) {
  ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  cluster.gpu.arch = ir::GpuArch::cpu;
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Llama-3.1-8B.json");
  cost::TrainingSettings settings;
  settings.seq_len = 1024;
  settings.global_batch_tokens = 16 * 1024;
  const int64_t gpus = 4;
  const ModelFacts facts = model_facts(graph);
  SearchOptions options;
  options.rules = {gpus, false, ""};
  options.num_layers = facts.num_layers;
  options.num_experts = facts.num_experts;
  const cost::Estimator estimator(graph, cluster, gpus, settings);
  const cost::Simulator simulator(graph, cluster, settings);
  size_t compared = 0, with_data_parallel = 0;
  for (const ir::Plan& p : enumerate_candidates(gpus, options)) {
    if (p.pp > 1 || first_broken_rule(p, facts, cluster, settings, options.rules)) continue;
    const cost::Estimate e = estimator.estimate(p);
    const cost::SimulationResult r = simulator.simulate(lower_to_schedule(graph, p, settings, gpus, cluster));
    EXPECT_LT(rel(r.step_time_s, e.step_time_s), 0.01) << ir::to_string(e.plan) << " sim " << r.step_time_s
                                                       << " est " << e.step_time_s;
    ++compared;
    with_data_parallel += (e.plan.dp_shard > 1 || e.plan.dp_replicate > 1) ? 1 : 0;
  }
  std::printf("consistency on a CPU cluster: %zu plans, %zu with data parallelism\n", compared, with_data_parallel);
  EXPECT_GE(compared, 10u);
  EXPECT_GE(with_data_parallel, 5u);
}

// LoRA / QLoRA: the lowering holds the frozen base and the adapters' states, gathers the base as stored
// and reduces only the adapters' gradients, by the estimator's rule (task_cost.hpp): peak memory within
// 1 % and step time within 5 %, as for pretraining plans.
TEST(consistency, lora_and_qlora_estimator_and_simulator_agree) {
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Llama-3.1-8B.json");
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  for (const ir::Task task : {ir::Task::lora, ir::Task::qlora}) {
    cost::TrainingSettings settings;
    settings.seq_len = 2048;
    settings.global_batch_tokens = 32 * 2048;
    settings.task = task;
    const cost::Estimator estimator(graph, cluster, 8, settings);
    const cost::Simulator simulator(graph, cluster, settings);
    for (const char* text : {R"({"dp_replicate":8})", R"({"dp_shard":8})", R"({"tp":2,"dp_shard":4})",
                             R"({"pp":2,"dp_shard":4})", R"({"tp":8})"}) {
      const ir::Plan p = ir::parse_plan_argument(text);
      const cost::Estimate e = estimator.estimate(p);
      const cost::SimulationResult r = simulator.simulate(lower_to_schedule(graph, p, settings, 8, cluster));
      EXPECT_LT(rel(double(r.peak_bytes), double(e.memory.peak_bytes)), 0.01) << ir::to_string(task) << " " << text;
      EXPECT_LT(rel(r.step_time_s, e.step_time_s), 0.05) << ir::to_string(task) << " " << text;
    }
  }
}

// Under a framework that overlaps TP communication with the GEMMs (megatron-core: TE userbuffers),
// the simulator takes the exposed share of each block phase's TP collectives that the estimator prices
// (tp_phase_times), so `simulate` agrees with `estimate` on such plans (within 5 %, as every other
// plan). Before, it ran every TP collective exposed: Llama-3.1-70B, tp 8 pp 4 vpp 5 on 64 H100,
// simulated 77.3 s against 61.3 s estimated. The same plans priced without overlap expose more TP.
TEST(consistency, tp_comm_overlap_estimator_and_simulator_agree) {
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Llama-3.1-8B.json");
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  const cost::TrainingSettings settings = settings_of(2048, 32);
  const cost::CostParams overlapped = cost::cost_params_for(cluster.gpu, cost::framework_profile("megatron-core"));
  ASSERT_GT(overlapped.tp_comm_hidden_fraction, 0.0);
  cost::CostParams exposed = overlapped;
  exposed.tp_comm_hidden_fraction = 0;
  const cost::Estimator estimator(graph, cluster, 8, settings, overlapped);
  const cost::Simulator simulator(graph, cluster, settings, overlapped), exposed_simulator(graph, cluster, settings, exposed);
  for (const char* text : {R"({"tp":2,"dp_replicate":4,"zero_stage":0})", R"({"tp":4,"dp_shard":2,"zero_stage":1})",
                           R"({"tp":8})", R"({"tp":4,"pp":2})"}) {
    const ir::Plan p = ir::parse_plan_argument(text);
    const cost::Estimate e = estimator.estimate(p);
    const ir::Schedule schedule = lower_to_schedule(graph, p, settings, 8, cluster);
    const cost::SimulationResult r = simulator.simulate(schedule);
    EXPECT_LT(rel(r.step_time_s, e.step_time_s), 0.05) << text << ": " << terms(e.time);
    EXPECT_LT(rel(r.breakdown.exposed_tp_s, e.time.exposed_tp_s), 0.10) << text;
    EXPECT_LT(r.breakdown.exposed_tp_s, 0.5 * exposed_simulator.simulate(schedule).breakdown.exposed_tp_s) << text;
  }
}

// Under Megatron-Core's EP A2A overlap (the "ep-a2a-overlap" feature) the simulator takes the exposed
// share of each MoE block phase's all-to-alls that the estimator prices over the merged passes
// (ep_overlap.hpp), so `simulate` agrees with `estimate` (within 5 %, as every other plan), and both
// expose less expert-parallel traffic than the same plan without the overlap.
TEST(consistency, ep_a2a_overlap_estimator_and_simulator_agree) {
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Qwen3-30B-A3B.json");
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  const cost::TrainingSettings settings = settings_of(2048, 64);
  const cost::CostParams overlapped =
      cost::cost_params_for(cluster.gpu, cost::select_framework("megatron-core", {"ep-a2a-overlap"}).profile);
  ASSERT_GT(overlapped.ep_comm_hidden_fraction, 0.0);
  cost::CostParams exposed = overlapped;
  exposed.ep_comm_hidden_fraction = 0;
  const cost::Estimator estimator(graph, cluster, 8, settings, overlapped), exposed_estimator(graph, cluster, 8, settings, exposed);
  const cost::Simulator simulator(graph, cluster, settings, overlapped), exposed_simulator(graph, cluster, settings, exposed);
  for (const char* text : {R"({"dp_shard":8,"ep":8,"zero_stage":1,"micro_batch":2})",
                           R"({"dp_shard":8,"ep":8,"zero_stage":1,"micro_batch":1,"recompute":"selective"})",
                           R"({"dp_shard":4,"pp":2,"vpp":2,"ep":4,"zero_stage":1,"micro_batch":1})"}) {
    const ir::Plan p = ir::parse_plan_argument(text);
    const cost::Estimate e = estimator.estimate(p), e0 = exposed_estimator.estimate(p);
    const ir::Schedule schedule = lower_to_schedule(graph, p, settings, 8, cluster);
    const cost::SimulationResult r = simulator.simulate(schedule), r0 = exposed_simulator.simulate(schedule);
    EXPECT_LT(rel(r.step_time_s, e.step_time_s), 0.05) << text << ": " << terms(e.time);
    EXPECT_LT(rel(r.breakdown.exposed_ep_s, e.time.exposed_ep_s), 0.10) << text;
    EXPECT_LT(e.time.exposed_ep_s, 0.7 * e0.time.exposed_ep_s) << text;
    EXPECT_LT(r.breakdown.exposed_ep_s, 0.7 * r0.breakdown.exposed_ep_s) << text;
  }
  // Full recompute: Megatron refuses the overlap, so nothing is hidden.
  const ir::Plan full = ir::parse_plan_argument(R"({"dp_shard":8,"ep":8,"zero_stage":1,"recompute":"full"})");
  EXPECT_DOUBLE_EQ(estimator.estimate(full).time.exposed_ep_s, exposed_estimator.estimate(full).time.exposed_ep_s);
}

}  // namespace
}  // namespace mgt::plan
