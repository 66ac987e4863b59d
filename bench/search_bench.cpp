// Planner figures: analytic candidates per second per core, and full-search wall time
// (Llama-3.1-405B on 16,384 GPUs; Llama-3.1-8B on 8). Run: ./build/bench/mgt_bench_search
#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/search.hpp"

#include <benchmark/benchmark.h>

#include <string>

namespace {

struct Case {
  mgt::ir::Graph graph;
  mgt::ir::ClusterSpec cluster;
  int64_t gpus;
  mgt::cost::TrainingSettings settings;
};

Case load_case(const std::string& model, int64_t gpus, int64_t global_batch_tokens) {
  Case c{mgt::ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/" + model),
         mgt::ir::cluster_preset("h100-sxm"), gpus, {}};
  c.settings.seq_len = 8192;
  c.settings.global_batch_tokens = global_batch_tokens;
  return c;
}

const Case& case_405b() {
  static const Case c = load_case("Llama-3.1-405B.json", 16384, 16ll << 20);
  return c;
}

// The estimator on every rule-valid candidate, block costs memoised as in a search: the rate the
// search sustains per core.
void BM_EstimateCandidates405B(benchmark::State& state) {
  const Case& c = case_405b();
  const mgt::cost::Estimator estimator(c.graph, c.cluster, c.gpus, c.settings);
  mgt::plan::SearchOptions options;
  options.rules.num_gpus = c.gpus;
  const auto facts = mgt::plan::model_facts(c.graph);
  options.num_layers = facts.num_layers;  // pipeline (pp, vpp) candidates included, as in a search
  std::vector<mgt::ir::Plan> valid;
  for (const auto& p : mgt::plan::enumerate_candidates(c.gpus, options))
    if (!mgt::plan::first_broken_rule(p, facts, c.cluster, c.settings, options.rules)) valid.push_back(p);
  for (const auto& p : valid) benchmark::DoNotOptimize(estimator.estimate(p));  // warm the memo
  double sink = 0;
  for (auto _ : state) {
    for (const auto& p : valid) sink += estimator.estimate(p).step_time_s;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * int64_t(valid.size()));
  state.counters["candidates"] = double(valid.size());
}
BENCHMARK(BM_EstimateCandidates405B)->Unit(benchmark::kMillisecond);

// Everything a user waits for after loading: topology, enumeration, rules, estimates, ranking.
void BM_FullSearch405B_16384(benchmark::State& state) {
  const Case& c = case_405b();
  int64_t evaluated = 0;
  for (auto _ : state) {
    const mgt::cost::Estimator estimator(c.graph, c.cluster, c.gpus, c.settings);
    mgt::plan::SearchOptions options;
    options.rules.num_gpus = c.gpus;
    const auto result = mgt::plan::search(estimator, options);
    evaluated = result.evaluated;
    benchmark::DoNotOptimize(result.plans.data());
  }
  state.SetItemsProcessed(state.iterations() * evaluated);
  state.counters["evaluated"] = double(evaluated);
}
BENCHMARK(BM_FullSearch405B_16384)->Unit(benchmark::kMillisecond);

// The same search as Megatron-Core offers it (--framework megatron-core): ZeRO-1 (distributed
// optimizer) and FSDP for dp_shard > 1, interleaved pipelines, priced with its profile.
void BM_FullSearch405B_16384_MegatronCore(benchmark::State& state) {
  const Case& c = case_405b();
  const mgt::cost::FrameworkProfile profile = mgt::cost::framework_profile("megatron-core");
  int64_t evaluated = 0;
  for (auto _ : state) {
    const mgt::cost::Estimator estimator(c.graph, c.cluster, c.gpus, c.settings,
                                         mgt::cost::cost_params_for(c.cluster.gpu, profile));
    mgt::plan::SearchOptions options;
    options.rules.num_gpus = c.gpus;
    mgt::plan::restrict_to_framework(options, profile);
    const auto result = mgt::plan::search(estimator, options);
    evaluated = result.evaluated;
    benchmark::DoNotOptimize(result.plans.data());
  }
  state.SetItemsProcessed(state.iterations() * evaluated);
  state.counters["evaluated"] = double(evaluated);
}
BENCHMARK(BM_FullSearch405B_16384_MegatronCore)->Unit(benchmark::kMillisecond);

void BM_FullSearchLlama8B_8(benchmark::State& state) {
  static const Case c = load_case("Llama-3.1-8B.json", 8, 4ll << 20);
  for (auto _ : state) {
    const mgt::cost::Estimator estimator(c.graph, c.cluster, c.gpus, c.settings);
    mgt::plan::SearchOptions options;
    options.rules.num_gpus = c.gpus;
    benchmark::DoNotOptimize(mgt::plan::search(estimator, options).plans.data());
  }
}
BENCHMARK(BM_FullSearchLlama8B_8)->Unit(benchmark::kMillisecond);

// Loading and verifying the largest HF config: part of every CLI call.
void BM_LoadModel405B(benchmark::State& state) {
  const std::string path = std::string(MGT_SOURCE_DIR) + "/examples/models/Llama-3.1-405B.json";
  for (auto _ : state) benchmark::DoNotOptimize(mgt::ir::load_model(path).blocks.size());
}
BENCHMARK(BM_LoadModel405B)->Unit(benchmark::kMicrosecond);

// The topology query the estimator makes several times per candidate, memoised per placement.
void BM_LinkForGroupCached(benchmark::State& state) {
  const mgt::cost::Topology topology(mgt::ir::cluster_preset("h100-sxm"), 16384);
  const mgt::cost::GroupPlacement group{{{8, 1}, {2, 8}, {64, 16}}};
  double sink = topology.link_for_group(group).bus_bytes_per_s;
  for (auto _ : state) sink += topology.link_for_group(group).bus_bytes_per_s;
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LinkForGroupCached);

// Building the bounded topology graph for 131,072 GPUs.
void BM_TopologyBuild131072(benchmark::State& state) {
  const auto cluster = mgt::ir::cluster_preset("h100-sxm");
  for (auto _ : state) {
    const mgt::cost::Topology topology(cluster, 131072);
    benchmark::DoNotOptimize(topology.num_vertices());
  }
}
BENCHMARK(BM_TopologyBuild131072)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
