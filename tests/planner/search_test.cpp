// Tests for the planner search (planner/src/search.cpp): candidate enumeration counted by hand, the
// ranking order, the rejection accounting, memory feasibility and determinism.
#include "mgt/planner/search.hpp"
#include "mgt/cost_model/framework_profile.hpp"

#include "planner_fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace {

using mgt::cost::Estimate, mgt::cost::Estimator, mgt::cost::TrainingSettings;
using mgt::ir::Plan, mgt::ir::Recompute;
using mgt::plan::enumerate_candidates, mgt::plan::ranks_before, mgt::plan::search;
using mgt::plan::SearchOptions, mgt::plan::SearchResult;
using mgt::test::example, mgt::test::llama8b;

SearchOptions options_for(int64_t gpus, int64_t top = 5) {
  SearchOptions o;
  o.rules.num_gpus = gpus;
  o.top = top;
  return o;
}

using MeshTuple = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // dp_replicate, dp_shard, cp, tp

/// Every ordered (dp_replicate, dp_shard, cp, tp) with product n, by brute force.
std::set<MeshTuple> brute_force_meshes(int64_t n) {
  std::set<MeshTuple> out;
  for (int64_t a = 1; a <= n; ++a)
    for (int64_t b = 1; b <= n; ++b)
      for (int64_t c = 1; c <= n; ++c)
        for (int64_t d = 1; d <= n; ++d)
          if (a * b * c * d == n) out.insert({a, b, c, d});
  return out;
}

std::string key(const Plan& p) {
  return "pp" + std::to_string(p.pp) + " vpp" + std::to_string(p.vpp) + " ep" + std::to_string(p.ep) + " " +
         std::to_string(p.dp_replicate) + "," + std::to_string(p.dp_shard) + "," + std::to_string(p.cp) + "," +
         std::to_string(p.tp) + "," + std::to_string(p.micro_batch) + "," + mgt::ir::to_string(p.recompute);
}

/// The candidates search() considers: enumerate_candidates with the model's layer and expert counts.
size_t searched_candidates(const mgt::ir::Graph& graph, int64_t gpus) {
  const auto facts = mgt::plan::model_facts(graph);
  SearchOptions o;
  o.num_layers = facts.num_layers;
  o.num_experts = facts.num_experts;
  return enumerate_candidates(gpus, o).size();
}

// ---- enumerate_candidates ----------------------------------------------------------------------------

// torchtitan runs FSDP with and without resharding after forward alike under a pipeline (ZeRO-1,
// cost::FrameworkProfile::fsdp_gathers_once_under_pipeline): its pipelined plans try ZeRO-3 only, its
// flat ones ZeRO-2 and ZeRO-3; pytorch-fsdp-style options (no such claim) keep both everywhere.
TEST(EnumerateCandidates, TorchtitanPipelinesTryOneFsdpStage) {
  SearchOptions o = options_for(8);
  o.num_layers = 8;
  mgt::plan::restrict_to_framework(o, mgt::cost::framework_profile("torchtitan"));
  ASSERT_TRUE(o.one_fsdp_stage_under_pipeline);
  std::map<std::pair<bool, int64_t>, int64_t> count;  // (pipelined, zero stage) -> candidates with dp_shard > 1
  for (const Plan& p : enumerate_candidates(8, o))
    if (p.dp_shard > 1) ++count[{p.pp > 1, mgt::ir::zero_stage(p)}];
  EXPECT_GT((count[{false, 2}]), 0);
  EXPECT_EQ((count[{false, 2}]), (count[{false, 3}]));
  EXPECT_GT((count[{true, 3}]), 0);
  EXPECT_EQ((count[{true, 2}]), 0);
  o.one_fsdp_stage_under_pipeline = false;
  std::map<std::pair<bool, int64_t>, int64_t> both;
  for (const Plan& p : enumerate_candidates(8, o))
    if (p.dp_shard > 1) ++both[{p.pp > 1, mgt::ir::zero_stage(p)}];
  EXPECT_EQ((both[{true, 2}]), (count[{true, 3}]));
}

TEST(EnumerateCandidates, EightGpusHas20MeshesTimesMicroBatchesTimesRecompute) {
  const SearchOptions o = options_for(8);
  const auto candidates = enumerate_candidates(8, o);
  // Ordered factorisations of 2^3 into 4 factors: C(3 + 3, 3) = 20.
  const auto meshes = brute_force_meshes(8);
  ASSERT_EQ(meshes.size(), 20u);
  EXPECT_EQ(candidates.size(), 20u * o.micro_batches.size() * o.recompute_modes.size());
  EXPECT_EQ(candidates.size(), 300u);

  std::set<std::string> seen;
  std::map<MeshTuple, int> per_mesh;
  for (const Plan& p : candidates) {
    EXPECT_TRUE(seen.insert(key(p)).second) << "duplicate candidate " << key(p);
    EXPECT_EQ(p.dp_replicate * p.dp_shard * p.cp * p.tp, 8) << key(p);
    EXPECT_EQ(p.pp, 1);
    EXPECT_EQ(p.ep, 1);
    EXPECT_EQ(p.vpp, 1);
    EXPECT_FALSE(p.grad_accum.has_value()) << "grad_accum is derived by the estimator";
    ++per_mesh[{p.dp_replicate, p.dp_shard, p.cp, p.tp}];
  }
  std::set<MeshTuple> enumerated;
  for (const auto& [mesh, n] : per_mesh) {
    enumerated.insert(mesh);
    EXPECT_EQ(n, 15) << "each mesh with every micro-batch and recompute mode";
  }
  EXPECT_EQ(enumerated, meshes);
}

TEST(EnumerateCandidates, EveryMicroBatchAndRecomputeModeAppears) {
  const SearchOptions o = options_for(8);
  std::set<std::pair<int64_t, Recompute>> combos;
  for (const Plan& p : enumerate_candidates(8, o)) combos.insert({p.micro_batch, p.recompute});
  EXPECT_EQ(combos.size(), o.micro_batches.size() * o.recompute_modes.size());
  for (int64_t mbs : {1, 2, 4, 8, 16})
    for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) EXPECT_TRUE(combos.count({mbs, r}));
}

TEST(EnumerateCandidates, CountsForOtherGpuCounts) {
  SearchOptions o;
  o.micro_batches = {1};
  o.recompute_modes = {Recompute::none};
  // n = prod p^e: number of ordered 4-factorisations = prod C(e + 3, 3).
  const std::map<int64_t, size_t> expected = {{1, 1}, {2, 4}, {7, 4}, {12, 40}, {16, 35}, {64, 84}, {72, 200}};
  for (const auto& [n, count] : expected) {
    const auto candidates = enumerate_candidates(n, o);
    EXPECT_EQ(candidates.size(), count) << n << " GPUs";
    EXPECT_EQ(brute_force_meshes(n).size(), count) << n << " GPUs (hand count)";
    std::set<MeshTuple> meshes;
    for (const Plan& p : candidates) {
      EXPECT_EQ(p.dp_replicate * p.dp_shard * p.cp * p.tp, n);
      meshes.insert({p.dp_replicate, p.dp_shard, p.cp, p.tp});
    }
    EXPECT_EQ(meshes, brute_force_meshes(n)) << n << " GPUs";
  }
}

TEST(EnumerateCandidates, PipelineStagesAndInterleaving) {
  // 32 layers on 8 GPUs, vpp up to 8 (pp * vpp must divide the layers):
  //   pp=1: 20 meshes of 8 over (dp_replicate, dp_shard, cp, tp), vpp 1
  //   pp=2: 10 meshes of 4, vpp in {1, 2, 4, 8} (16 layers per stage)      -> 40
  //   pp=4:  4 meshes of 2, vpp in {1, 2, 4, 8} (8 layers per stage)       -> 16
  //   pp=8:  1 mesh  of 1, vpp in {1, 2, 4}    (4 layers per stage)        ->  3
  // = 79 meshes, each with 5 micro-batches x 3 recompute modes.
  SearchOptions o;
  o.num_layers = 32;
  ASSERT_EQ(o.max_vpp, 8);
  const auto candidates = enumerate_candidates(8, o);
  EXPECT_EQ(candidates.size(), 79u * 15u);
  std::set<std::string> seen;
  std::map<int64_t, std::set<int64_t>> vpps_per_pp;
  for (const Plan& p : candidates) {
    EXPECT_TRUE(seen.insert(key(p)).second) << "duplicate " << key(p);
    EXPECT_EQ(p.dp_replicate * p.dp_shard * p.cp * p.tp * p.pp, 8) << key(p);
    EXPECT_EQ(32 % (p.pp * p.vpp), 0) << key(p);
    EXPECT_EQ(p.ep, 1);
    if (p.pp == 1) {
      EXPECT_EQ(p.vpp, 1) << key(p);
    }
    vpps_per_pp[p.pp].insert(p.vpp);
  }
  EXPECT_EQ(vpps_per_pp[1], (std::set<int64_t>{1}));
  EXPECT_EQ(vpps_per_pp[2], (std::set<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(vpps_per_pp[4], (std::set<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(vpps_per_pp[8], (std::set<int64_t>{1, 2, 4}));
  // A layer count that 7 does not divide: no pp=7 on 7 GPUs.
  for (const Plan& p : enumerate_candidates(7, o)) EXPECT_EQ(p.pp, 1);
}

TEST(EnumerateCandidates, ExpertParallelDividesExpertsAndDpShardTimesCp) {
  SearchOptions o;
  o.num_experts = 8;
  o.micro_batches = {1};
  o.recompute_modes = {Recompute::none};
  o.expert_over_replicas = o.expert_tensor_parallel = false;  // as frameworks other than Megatron
  // By hand: each (dp_replicate, dp_shard, cp, tp) mesh of 8 with ep = every divisor of dp_shard*cp
  // that also divides 8 experts (all of them here, powers of two).
  size_t expected = 0;
  for (const auto& [r, s, c, t] : brute_force_meshes(8))
    for (int64_t ep = 1; ep <= s * c; ++ep)
      if ((s * c) % ep == 0 && 8 % ep == 0) ++expected;
  const auto candidates = enumerate_candidates(8, o);
  EXPECT_EQ(candidates.size(), expected);
  std::set<std::string> seen;
  for (const Plan& p : candidates) {
    EXPECT_TRUE(seen.insert(key(p)).second) << "duplicate " << key(p);
    EXPECT_EQ((p.dp_shard * p.cp) % p.ep, 0) << key(p);
    EXPECT_EQ(8 % p.ep, 0) << key(p);
    EXPECT_EQ(p.dp_replicate * p.dp_shard * p.cp * p.tp, 8) << "ep folds into dp_shard x cp: " << key(p);
  }
}

// Megatron-Core folds etp x ep x expert-DP over the ranks of a stage (parallel_state.py): with both
// options on, every (mesh, etp, ep) with etp dividing tp, ep dividing the 8 experts and the expert groups
// nesting with tp, cp, dp_shard and dp_replicate (ir::expert_groups_nest, which resolve applies), each once.
TEST(EnumerateCandidates, ExpertLayoutsOverReplicasAndExpertTensorParallel) {
  SearchOptions o;
  o.num_experts = 8;
  o.micro_batches = {1};
  o.recompute_modes = {Recompute::none};
  std::set<std::string> expected;
  auto layout_key = [](const Plan& p) { return key(p) + " etp" + std::to_string(mgt::ir::expert_tp(p)); };
  for (const auto& [r, s, c, t] : brute_force_meshes(16))
    for (int64_t etp = 1; etp <= t; ++etp)
      for (int64_t ep = 1; ep <= 8; ++ep) {
        Plan p;
        p.dp_replicate = r, p.dp_shard = s, p.cp = c, p.tp = t, p.ep = ep, p.etp = etp;
        if (t % etp == 0 && 8 % ep == 0 && (r * s * c * t) % (etp * ep) == 0 && mgt::ir::expert_groups_nest(p))
          expected.insert(layout_key(p));
      }
  std::set<std::string> seen;
  size_t over_replicas = 0, own_etp = 0;
  for (const Plan& p : enumerate_candidates(16, o)) {
    EXPECT_TRUE(seen.insert(layout_key(p)).second) << "duplicate " << layout_key(p);
    over_replicas += (p.dp_shard * p.cp) % p.ep != 0 ? 1 : 0;
    own_etp += mgt::ir::expert_tp(p) != p.tp ? 1 : 0;
  }
  EXPECT_EQ(seen, expected);
  EXPECT_GT(over_replicas, 0u);
  EXPECT_GT(own_etp, 0u);
}

TEST(EnumerateCandidates, FixedOrder) {
  const SearchOptions o = options_for(24);
  EXPECT_EQ(enumerate_candidates(24, o), enumerate_candidates(24, o));
}

TEST(EnumerateCandidates, HonoursCustomOptions) {
  SearchOptions o;
  o.micro_batches = {3};
  o.recompute_modes = {Recompute::full};
  for (const Plan& p : enumerate_candidates(4, o)) {
    EXPECT_EQ(p.micro_batch, 3);
    EXPECT_EQ(p.recompute, Recompute::full);
  }
  EXPECT_EQ(enumerate_candidates(4, o).size(), 10u);  // 2^2: C(5, 3) = 10
}

// ---- ranks_before ------------------------------------------------------------------------------------

Estimate make_estimate(double tokens, int64_t peak, int64_t tp = 1, int64_t cp = 1, int64_t dp_replicate = 1,
                       int64_t micro_batch = 1, Recompute recompute = Recompute::none) {
  Estimate e;
  e.tokens_per_s_per_gpu = tokens;
  e.memory.peak_bytes = peak;
  e.plan.tp = tp;
  e.plan.cp = cp;
  e.plan.dp_replicate = dp_replicate;
  e.plan.micro_batch = micro_batch;
  e.plan.recompute = recompute;
  return e;
}

TEST(RanksBefore, ThroughputThenMemoryThenSmallerMeshThenLighterRecompute) {
  EXPECT_TRUE(ranks_before(make_estimate(200, 50), make_estimate(100, 10)));
  EXPECT_FALSE(ranks_before(make_estimate(100, 10), make_estimate(200, 50)));
  EXPECT_TRUE(ranks_before(make_estimate(100, 10), make_estimate(100, 20)));
  EXPECT_FALSE(ranks_before(make_estimate(100, 20), make_estimate(100, 10)));
  EXPECT_TRUE(ranks_before(make_estimate(100, 10, 1), make_estimate(100, 10, 2)));
  EXPECT_TRUE(ranks_before(make_estimate(100, 10, 2, 1), make_estimate(100, 10, 2, 2)));
  EXPECT_TRUE(ranks_before(make_estimate(100, 10, 2, 2, 1), make_estimate(100, 10, 2, 2, 2)));
  EXPECT_TRUE(ranks_before(make_estimate(100, 10, 1, 1, 1, 4), make_estimate(100, 10, 1, 1, 1, 2)))
      << "larger micro-batch first";
  EXPECT_TRUE(ranks_before(make_estimate(100, 10, 1, 1, 1, 1, Recompute::none),
                           make_estimate(100, 10, 1, 1, 1, 1, Recompute::selective)));
  EXPECT_TRUE(ranks_before(make_estimate(100, 10, 1, 1, 1, 1, Recompute::selective),
                           make_estimate(100, 10, 1, 1, 1, 1, Recompute::full)));
  // Irreflexive: a strict weak order.
  const Estimate e = make_estimate(100, 10, 2, 2, 2, 2, Recompute::full);
  EXPECT_FALSE(ranks_before(e, e));
}

// ---- search ------------------------------------------------------------------------------------------

struct Llama8BSearch : ::testing::Test {
  TrainingSettings settings;  // 8192 tokens, 4M-token batch: 512 sequences
  mgt::ir::ClusterSpec cluster = mgt::ir::cluster_preset("h100-sxm");
  int64_t sum_rejected(const SearchResult& r) const {
    int64_t n = 0;
    for (const auto& [_, c] : r.rejected) n += c;
    return n;
  }
};

TEST_F(Llama8BSearch, AccountingSortingAndMemory) {
  const Estimator estimator(llama8b(), cluster, 8, settings);
  const SearchResult r = search(estimator, options_for(8, 1000));
  EXPECT_EQ(r.evaluated, int64_t(searched_candidates(llama8b(), 8)));
  EXPECT_GE(r.evaluated, 300) << "at least the 20 x 5 x 3 data/tensor/context-parallel candidates";
  EXPECT_EQ(r.feasible + sum_rejected(r), r.evaluated);
  ASSERT_GT(r.feasible, 0);
  EXPECT_EQ(int64_t(r.plans.size()), r.feasible) << "top 1000 keeps every feasible plan";
  const int64_t hbm = cluster.gpu.hbm_bytes;
  const auto facts = mgt::plan::model_facts(llama8b());
  std::set<std::string> seen;
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const Estimate& e = r.plans[i];
    EXPECT_LE(e.memory.peak_bytes, hbm) << key(e.plan);
    EXPECT_EQ(mgt::ir::world_size(e.plan), 8) << key(e.plan);
    EXPECT_GT(e.tokens_per_s_per_gpu, 0);
    EXPECT_FALSE(mgt::plan::first_broken_rule(e.plan, facts, cluster, settings, options_for(8).rules).has_value())
        << key(e.plan);
    EXPECT_TRUE(e.plan.grad_accum.has_value());
    EXPECT_EQ(e.plan.micro_batch * e.plan.grad_accum.value_or(0) * e.plan.dp_replicate * e.plan.dp_shard, 512);
    EXPECT_TRUE(seen.insert(key(e.plan)).second) << "duplicate plan " << key(e.plan);
    if (i > 0) {
      EXPECT_FALSE(ranks_before(e, r.plans[i - 1])) << "plans out of order at " << i;
      EXPECT_GE(r.plans[i - 1].tokens_per_s_per_gpu, e.tokens_per_s_per_gpu);
    }
  }
  // The memory rejection is counted under one "needs X-Y GiB > 80.0 GiB" reason.
  int64_t memory_rejections = 0;
  for (const auto& [reason, count] : r.rejected) {
    EXPECT_GT(count, 0) << reason;
    if (reason.rfind("needs ", 0) == 0) {
      EXPECT_NE(reason.find("GiB > 80.0 GiB of HBM per GPU"), std::string::npos) << reason;
      memory_rejections += count;
    }
  }
  EXPECT_GT(memory_rejections, 0) << "mbs 16 without recompute cannot fit an 8B model's activations";
  EXPECT_GT(r.min_rejected_peak_bytes, hbm);
}

TEST_F(Llama8BSearch, TopKeepsTheBestPrefix) {
  const Estimator estimator(llama8b(), cluster, 8, settings);
  const SearchResult all = search(estimator, options_for(8, 1000));
  const SearchResult top5 = search(estimator, options_for(8, 5));
  const SearchResult top1 = search(estimator, options_for(8, 1));
  ASSERT_EQ(top5.plans.size(), 5u);
  ASSERT_EQ(top1.plans.size(), 1u);
  for (size_t i = 0; i < top5.plans.size(); ++i) {
    EXPECT_EQ(top5.plans[i].plan, all.plans[i].plan) << i;
    EXPECT_EQ(top5.plans[i].tokens_per_s_per_gpu, all.plans[i].tokens_per_s_per_gpu) << i;
  }
  EXPECT_EQ(top1.plans[0].plan, all.plans[0].plan);
  EXPECT_EQ(top5.evaluated, all.evaluated);
  EXPECT_EQ(top5.feasible, all.feasible);
  EXPECT_EQ(top5.rejected, all.rejected);
  EXPECT_EQ(top5.min_rejected_peak_bytes, all.min_rejected_peak_bytes);
}

TEST_F(Llama8BSearch, DeterministicAcrossCallsAndEstimators) {
  const Estimator a(llama8b(), cluster, 8, settings);
  const Estimator b(llama8b(), cluster, 8, settings);
  const SearchResult r1 = search(a, options_for(8, 50));
  const SearchResult r2 = search(a, options_for(8, 50));  // warm memo
  const SearchResult r3 = search(b, options_for(8, 50));  // fresh estimator
  for (const SearchResult* other : {&r2, &r3}) {
    ASSERT_EQ(r1.plans.size(), other->plans.size());
    for (size_t i = 0; i < r1.plans.size(); ++i) {
      EXPECT_EQ(r1.plans[i].plan, other->plans[i].plan) << i;
      EXPECT_EQ(r1.plans[i].memory, other->plans[i].memory) << i;
      EXPECT_EQ(r1.plans[i].time, other->plans[i].time) << i;
      EXPECT_EQ(r1.plans[i].tokens_per_s_per_gpu, other->plans[i].tokens_per_s_per_gpu) << i;
      EXPECT_EQ(r1.plans[i].bottleneck, other->plans[i].bottleneck) << i;
    }
    EXPECT_EQ(r1.evaluated, other->evaluated);
    EXPECT_EQ(r1.feasible, other->feasible);
    EXPECT_EQ(r1.rejected, other->rejected);
  }
}

TEST_F(Llama8BSearch, SixteenGpusRejectsTp16ByKvHeads) {
  const Estimator estimator(llama8b(), cluster, 16, settings);
  const SearchResult r = search(estimator, options_for(16));
  EXPECT_EQ(r.evaluated, int64_t(searched_candidates(llama8b(), 16)));
  EXPECT_EQ(r.feasible + sum_rejected(r), r.evaluated);
  ASSERT_TRUE(r.rejected.count("tp=16 must divide num_key_value_heads=8"));
  // tp=16 appears in one mesh (pp 1, 1,1,1,16), with 15 micro-batch x recompute combinations.
  EXPECT_EQ(r.rejected.at("tp=16 must divide num_key_value_heads=8"), 15);
  ASSERT_FALSE(r.plans.empty());
  for (const Estimate& e : r.plans) EXPECT_LE(e.plan.tp, 8);
}

TEST_F(Llama8BSearch, EveryCandidateRejectedByRule) {
  // 7 GPUs: no tp, cp or data-parallel split of Llama-3.1-8B's 512 x 8192 batch works.
  const Estimator estimator(llama8b(), cluster, 7, settings);
  const SearchResult r = search(estimator, options_for(7));
  EXPECT_EQ(r.evaluated, int64_t(searched_candidates(llama8b(), 7)));
  EXPECT_GE(r.evaluated, 4 * 15);
  EXPECT_EQ(r.feasible, 0);
  EXPECT_TRUE(r.plans.empty());
  EXPECT_EQ(sum_rejected(r), r.evaluated);
  EXPECT_EQ(r.min_rejected_peak_bytes, 0) << "no candidate reached the memory check";
}

TEST(SearchMemory, Llama405BOn8GpusFitsNowhere) {
  const auto graph = mgt::ir::load_model(example("Llama-3.1-405B.json"));
  const auto cluster = mgt::ir::cluster_preset("h100-sxm");
  const Estimator estimator(graph, cluster, 8, TrainingSettings{});
  const SearchResult r = search(estimator, options_for(8));
  EXPECT_TRUE(r.plans.empty());
  EXPECT_EQ(r.feasible, 0);
  EXPECT_EQ(r.evaluated, int64_t(searched_candidates(graph, 8)));
  int64_t total = 0;
  for (const auto& [_, c] : r.rejected) total += c;
  EXPECT_EQ(total, r.evaluated);
  EXPECT_GT(r.min_rejected_peak_bytes, cluster.gpu.hbm_bytes);
  // 16 bytes per parameter, fully sharded: 405.9e9 * 16 / ~79 GiB -> 77 H100s at least.
  const int64_t needed = mgt::plan::min_gpus_for_states(estimator);
  EXPECT_GE(needed, int64_t(std::ceil(16.0 * 405853388800.0 / double(cluster.gpu.hbm_bytes))));
  EXPECT_LE(needed, 80);
  EXPECT_GT(needed, 8);
}

// DDP (no sharded ZeRO stage, so dp_shard 1): without ep over replicas, ep can only borrow cp ranks
// (or none: every rank holds all 128 experts of Qwen3-30B-A3B, 30.5e9 parameters x 16 bytes of
// states, no fit), so the best plan splits 4096-token sequences over cp 8 to get ep 8 (seen: dp_replicate
// 2, cp 8, pp 2, ep 8). With ep carved from dp_replicate, a rank holds 128 / ep experts and reduces
// their gradients over expert-DP only, without cp's K/V exchange: the search finds such a plan, and
// it estimates faster than the best plan without.
TEST(SearchExperts, ExpertParallelOverReplicasWinsUnderDdp) {
  const auto& graph = mgt::test::model("Qwen3-30B-A3B");
  const auto cluster = mgt::ir::cluster_preset("h100-sxm");
  const TrainingSettings st = mgt::test::settings(4096, 256);
  const Estimator estimator(graph, cluster, 32, st);
  SearchOptions o = options_for(32, 1);
  o.sharded_zero_stages.clear();  // dp_shard 1: ep can only come from the replicas (or tp ranks, etp < tp)
  o.expert_tensor_parallel = false;
  o.expert_over_replicas = false;
  const SearchResult without = search(estimator, o);
  o.expert_over_replicas = true;
  const SearchResult with = search(estimator, o);
  ASSERT_FALSE(with.plans.empty());
  const Plan& best = with.plans.front().plan;
  EXPECT_GT(best.ep, 1) << mgt::ir::to_string(best);
  EXPECT_GT(best.ep, best.dp_shard * best.cp) << "ep reaches into dp_replicate: " << mgt::ir::to_string(best);
  if (!without.plans.empty()) {
    const Plan& other = without.plans.front().plan;
    std::printf("best with ep over replicas: %s\nbest without: %s\n", mgt::ir::to_string(best).c_str(),
                mgt::ir::to_string(other).c_str());
    EXPECT_EQ((other.dp_shard * other.cp) % other.ep, 0);
    // Both plans estimated again here: the one with ep over the replicas is faster.
    EXPECT_GT(estimator.estimate(best).tokens_per_s_per_gpu, estimator.estimate(other).tokens_per_s_per_gpu)
        << mgt::ir::to_string(best) << " vs " << mgt::ir::to_string(other);
  }
  EXPECT_GT(with.evaluated, without.evaluated);
}

// Block recompute (Megatron-Core --recompute-num-layers): beside every full-recompute plan that fits,
// the search tries the fewest recomputed layers per stage that fit. Each such plan is checked here by
// estimating its neighbours: N fits, N - 1 does not, and every layer recomputed fits and is slower.
TEST(SearchMemory, BlockRecomputeTakesTheFewestLayersThatFit) {
  const auto cluster = mgt::ir::cluster_preset("h100-sxm");
  const Estimator estimator(llama8b(), cluster, 8, mgt::test::settings(16384, 64));
  SearchOptions o = options_for(8, 40);
  o.sharded_zero_stages = {1, 3};
  const SearchResult every = search(estimator, o);
  o.partial_recompute = true;
  const SearchResult block = search(estimator, o);
  ASSERT_FALSE(block.plans.empty());
  EXPECT_GT(block.evaluated, every.evaluated);
  EXPECT_EQ(block.evaluated - every.evaluated, block.feasible - every.feasible);  // each one found is valid
  int64_t rejected = 0;
  for (const auto& [_, n] : block.rejected) rejected += n;
  EXPECT_EQ(block.evaluated, block.feasible + rejected);
  EXPECT_GE(block.plans.front().tokens_per_s_per_gpu, every.plans.front().tokens_per_s_per_gpu);
  const int64_t hbm = cluster.gpu.hbm_bytes;
  int64_t seen = 0;
  for (const Estimate& e : block.plans) {
    if (!e.plan.recompute_layers) continue;
    ++seen;
    Plan p = e.plan;
    const int64_t n = *p.recompute_layers;
    EXPECT_LE(estimator.estimate(p).memory.peak_bytes, hbm) << mgt::ir::to_string(p);
    if (n > 1) {
      p.recompute_layers = n - 1;
      EXPECT_GT(estimator.estimate(p).memory.peak_bytes, hbm) << mgt::ir::to_string(p);
    }
    p.recompute_layers.reset();
    const Estimate all = estimator.estimate(p);
    EXPECT_LE(all.memory.peak_bytes, hbm);
    EXPECT_LT(all.tokens_per_s_per_gpu, e.tokens_per_s_per_gpu) << mgt::ir::to_string(p);
  }
  EXPECT_GT(seen, 0) << "no block-recompute plan among the top " << block.plans.size();
  // Without the option no plan carries a layer count.
  for (const Estimate& e : every.plans) EXPECT_FALSE(e.plan.recompute_layers.has_value());
}

TEST(SearchMemory, Llama8BStatesFitOnOneNode) {
  const auto cluster = mgt::ir::cluster_preset("h100-sxm");
  const Estimator estimator(llama8b(), cluster, 8, TrainingSettings{});
  const int64_t needed = mgt::plan::min_gpus_for_states(estimator);
  EXPECT_GE(needed, 2);  // 8.03e9 * 16 bytes = 128 GB > one 80 GiB GPU
  EXPECT_LE(needed, 8);
}

}  // namespace
