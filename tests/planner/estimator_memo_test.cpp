// The estimator memoises per shape, per pipeline layout and per mesh (links, FSDP collectives) so that
// a search prices 10^5 candidates a second. A memo may only save work: every candidate estimated after
// thousands of others by one Estimator must equal its estimate by a fresh Estimator that has seen
// nothing. Candidates come from the planner's enumeration and rules (the plans a search estimates):
// dense with FSDP, HSDP and pipelines, and MoE with Megatron-Core's expert layouts.
#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/rules.hpp"
#include "mgt/planner/search.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace mgt::plan {
namespace {

void expect_memo_free(const char* model, int64_t gpus, int64_t seq_len, int64_t global_batch_tokens, size_t samples) {
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/" + model);
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  cost::TrainingSettings settings;
  settings.seq_len = seq_len;
  settings.global_batch_tokens = global_batch_tokens;
  const ModelFacts facts = model_facts(graph);
  SearchOptions options;
  options.rules = {gpus, false, "megatron-core"};
  options.num_layers = facts.num_layers;
  options.num_experts = facts.num_experts;
  options.expert_over_replicas = options.expert_tensor_parallel = true;
  std::vector<ir::Plan> valid;
  for (const ir::Plan& p : enumerate_candidates(gpus, options))
    if (!first_broken_rule(p, facts, cluster, settings, options.rules)) valid.push_back(p);
  ASSERT_GT(valid.size(), samples) << model;
  std::mt19937 rng(7);
  std::shuffle(valid.begin(), valid.end(), rng);

  // The shared estimator sees every valid candidate first, so the sampled ones hit warm memos
  // filled by plans with other micro-batches, recompute modes, pipelines and ZeRO stages.
  const cost::Estimator shared(graph, cluster, gpus, settings);
  for (const ir::Plan& p : valid) (void)shared.estimate(p);
  int64_t fsdp = 0, hsdp = 0, piped = 0, expert = 0;
  for (size_t i = 0; i < samples; ++i) {
    const ir::Plan& p = valid[i];
    const cost::Estimate warm = shared.estimate(p);
    const cost::Estimate cold = cost::Estimator(graph, cluster, gpus, settings).estimate(p);
    EXPECT_EQ(warm.step_time_s, cold.step_time_s) << model << " " << ir::to_string(p);
    EXPECT_EQ(warm.time.exposed_fsdp_s, cold.time.exposed_fsdp_s) << model << " " << ir::to_string(p);
    EXPECT_EQ(warm.time.exposed_dp_s, cold.time.exposed_dp_s) << model << " " << ir::to_string(p);
    EXPECT_EQ(warm.time.exposed_pp_s, cold.time.exposed_pp_s) << model << " " << ir::to_string(p);
    EXPECT_EQ(warm.memory.peak_bytes, cold.memory.peak_bytes) << model << " " << ir::to_string(p);
    const bool sharded = warm.plan.zero_stage && *warm.plan.zero_stage == 3 && p.dp_shard * p.cp > 1;
    fsdp += sharded;
    hsdp += sharded && p.dp_replicate > 1;
    piped += p.pp > 1;
    expert += p.ep > 1;
  }
  // The sample covers what the memos key on.
  EXPECT_GT(fsdp, 0) << model;
  EXPECT_GT(hsdp, 0) << model;
  EXPECT_GT(piped, 0) << model;
  if (facts.num_experts > 0) {
    EXPECT_GT(expert, 0) << model;
  }
}

TEST(EstimatorMemo, DenseCandidatesEqualAFreshEstimator) {
  expect_memo_free("Llama-3.1-8B.json", 64, 4096, 4ll << 20, 150);
}

TEST(EstimatorMemo, MoeCandidatesEqualAFreshEstimator) {
  expect_memo_free("Mixtral-8x7B.json", 64, 4096, 4ll << 20, 150);
}

}  // namespace
}  // namespace mgt::plan
