// Simulator figures (docs/simulator.md §7): lowering and simulating one training step of
// Llama-3.1-405B on 16,384 H100s (tp 8, pp 16, dp_shard 128, seq 8192, 16M tokens per step, so
// grad_accum 16), reported separately; the target is under 1 s for both together.
// Run: ./build/bench/mgt_bench_simulate
#include "mgt/cost_model/simulator.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/lower.hpp"

#include <benchmark/benchmark.h>

#include <string>

namespace {

struct Case {
  mgt::ir::Graph graph;
  mgt::ir::ClusterSpec cluster;
  int64_t gpus = 16384;
  mgt::cost::TrainingSettings settings;
  mgt::ir::Plan plan;
};

const Case& case_405b() {
  static const Case c = [] {
    Case k;
    k.graph = mgt::ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Llama-3.1-405B.json");
    k.cluster = mgt::ir::cluster_preset("h100-sxm");
    k.settings.seq_len = 8192;
    k.settings.global_batch_tokens = 16ll << 20;
    k.plan.tp = 8;
    k.plan.pp = 16;
    k.plan.dp_shard = 128;
    k.plan.micro_batch = 1;
    return k;
  }();
  return c;
}

int64_t count_instructions(const mgt::ir::Schedule& s) {
  int64_t n = 0;
  for (const auto& p : s.programs) n += int64_t(p.instructions.size());
  return n;
}

void BM_Lower405B(benchmark::State& state) {
  const Case& c = case_405b();
  int64_t instructions = 0;
  for (auto _ : state) {
    const mgt::ir::Schedule s = mgt::plan::lower_to_schedule(c.graph, c.plan, c.settings, c.gpus, c.cluster);
    instructions = count_instructions(s);
    benchmark::DoNotOptimize(instructions);
  }
  state.counters["instructions"] = double(instructions);
}
BENCHMARK(BM_Lower405B)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_Simulate405B(benchmark::State& state) {
  const Case& c = case_405b();
  const mgt::ir::Schedule s = mgt::plan::lower_to_schedule(c.graph, c.plan, c.settings, c.gpus, c.cluster);
  const mgt::cost::Simulator sim(c.graph, c.cluster, c.settings);
  for (auto _ : state) {
    const mgt::cost::SimulationResult r = sim.simulate(s);
    benchmark::DoNotOptimize(r.step_time_s);
  }
  state.counters["instructions"] = double(count_instructions(s));
  state.counters["instructions_per_s"] =
      benchmark::Counter(double(count_instructions(s)), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Simulate405B)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// Both, as `mgt-plan simulate` runs them (a fresh Simulator, so op costs are priced again).
void BM_LowerAndSimulate405B(benchmark::State& state) {
  const Case& c = case_405b();
  for (auto _ : state) {
    const mgt::ir::Schedule s = mgt::plan::lower_to_schedule(c.graph, c.plan, c.settings, c.gpus, c.cluster);
    const mgt::cost::SimulationResult r = mgt::cost::Simulator(c.graph, c.cluster, c.settings).simulate(s);
    benchmark::DoNotOptimize(r.step_time_s);
  }
}
BENCHMARK(BM_LowerAndSimulate405B)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
