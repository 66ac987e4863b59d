// `mgt-plan validate` and the framework field (docs/cost-model.md §9): the file's framework, a
// row's own winning over it, the profile's constants used for the estimate, and unstated knobs taken
// as tuned within what the framework offers, each choice listed.
#include "mgt/planner/validate.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "validation_rows.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using mgt::plan::ValidationSource;
using mgt::test::any_assumption_has;

json gpt_row() {
  return json::parse(R"({
    "id": "gpt_row", "system": "a100",
    "model": {"name": "GPT-mini", "type": "dense", "num_layers": 4, "hidden_size": 2048, "num_attention_heads": 16,
              "num_kv_heads": 16, "head_dim": 128, "ffn_hidden_size": 8192, "vocab_size": 51200, "seq_length": 2048,
              "activation": "gelu", "normalization": "layernorm", "tied_embeddings": false, "params_B": 0.33},
    "training": {"global_batch_size_seqs": 64, "micro_batch_size": 1, "seq_length": 2048},
    "parallel": {"num_gpus": 8, "dp": 4, "tp": 2, "pp": 1, "cp": 1, "ep": 1, "sequence_parallel": false},
    "recompute": "full", "precision": "bf16",
    "measured": {"iteration_time_s": 1.0}})");
}

ValidationSource source_with(const json& row, const json& framework) {
  json block = json::parse(R"({"gpu": "A100-SXM4-80GB", "peak_dense_tflops": {"bf16": 312}, "hbm_gb": 80,
    "hbm_bw_TBps": 2.039, "nvlink_bw_GBps_per_gpu_bidir": 600, "gpus_per_node": 8, "nics_per_node": 8, "nic_gbps": 200})");
  json doc = {{"source", "synthetic"}, {"hardware", {{"a100", block}}}, {"rows", {row}}};
  if (!framework.is_null()) doc["framework"] = framework;
  return mgt::plan::validation_source_from_json(doc, "synthetic.json");
}

TEST(ValidationFramework, TheFilesFrameworkSelectsTheProfileAndARowsOwnWins) {
  const json file_fw = {{"name", "megatron-lm"}, {"version", "2021"}, {"features", json::array()}};
  auto s = mgt::plan::setup_row(source_with(gpt_row(), file_fw), gpt_row());
  EXPECT_EQ(s.framework.name, "megatron-lm");
  EXPECT_TRUE(any_assumption_has(s.assumptions, "framework: megatron-lm"));
  json row = gpt_row();
  row["framework"] = {{"name", "nemo"}, {"features", {"tp-comm-overlap"}}};
  s = mgt::plan::setup_row(source_with(row, file_fw), row);
  EXPECT_EQ(s.framework.name, "megatron-core");
  EXPECT_TRUE(s.framework.tp_comm_overlap);
  EXPECT_TRUE(any_assumption_has(s.assumptions, "framework: megatron-core with tp-comm-overlap"));
  EXPECT_TRUE(any_assumption_has(s.assumptions, "framework nemo: the megatron-core profile"));
}

// A stated ZeRO stage the framework does not offer is priced as stated and listed, naming what the
// profile offers (megatron-lm: 0 and 1, the distributed optimizer).
TEST(ValidationFramework, StatedZeroStageTheFrameworkLacksIsListed) {
  const json file_fw = {{"name", "megatron-lm"}};
  json row = gpt_row();
  row["parallel"]["zero_stage"] = 3;
  const auto s = mgt::plan::setup_row(source_with(row, file_fw), row);
  EXPECT_EQ(s.plan.zero_stage, 3);
  EXPECT_TRUE(any_assumption_has(s.assumptions, "parallel.zero_stage 3: the megatron-lm profile offers ZeRO 0, 1; priced as ZeRO-3"));
  // ... as the DeepSpeed ZeRO-3 of megatron-lm's era, which the assumption names.
  EXPECT_TRUE(any_assumption_has(s.assumptions, "DeepSpeed's of its era (v0.3.12-v0.5.4"));
  row["parallel"]["zero_stage"] = 1;
  EXPECT_FALSE(any_assumption_has(mgt::plan::setup_row(source_with(row, file_fw), row).assumptions, "profile offers ZeRO"));
}

TEST(ValidationFramework, TheEstimateUsesTheProfilesConstants) {
  const json fw = {{"name", "megatron-lm"}};
  const ValidationSource src = source_with(gpt_row(), fw);
  const auto results = mgt::plan::validate_row(src, gpt_row());
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results.front().estimate.has_value()) << results.front().skipped.value_or("");
  // The same plan estimated by hand with the megatron-lm constants.
  auto s = mgt::plan::setup_row(src, gpt_row());
  const mgt::cost::Estimator estimator(s.graph, s.cluster, s.num_gpus, s.settings,
                                       mgt::cost::cost_params_for(s.cluster.gpu, mgt::cost::framework_profile("megatron-lm")));
  const double by_hand = estimator.estimate(results.front().estimate->plan).step_time_s;
  EXPECT_DOUBLE_EQ(results.front().estimate->step_time_s, by_hand);
  // A different framework prices the same row differently.
  const auto fsdp = mgt::plan::validate_row(source_with(gpt_row(), json{{"name", "pytorch-fsdp"}}), gpt_row());
  EXPECT_NE(fsdp.front().estimate->step_time_s, by_hand);
}

TEST(ValidationFramework, UnstatedZeroStageIsTheFastestTheFrameworkOffers) {
  json row = gpt_row();  // zero_stage, sequence_parallel stated? zero_stage not stated
  row["parallel"].erase("sequence_parallel");
  const ValidationSource src = source_with(row, json{{"name", "megatron-lm"}});
  auto s = mgt::plan::setup_row(src, row);
  EXPECT_EQ(s.zero_stage_choices, (std::vector<int64_t>{0, 1}));  // Megatron-LM: DDP or distributed optimizer
  EXPECT_EQ(s.sequence_parallel_choices, (std::vector<bool>{true, false}));
  const auto results = mgt::plan::validate_row(src, row);
  ASSERT_TRUE(results.front().estimate.has_value());
  const auto& a = results.front().assumptions;
  EXPECT_TRUE(any_assumption_has(a, "parallel.zero_stage not stated: ")) << a.size();
  EXPECT_TRUE(any_assumption_has(a, "(what megatron-lm offers)"));
  EXPECT_TRUE(any_assumption_has(a, "parallel.sequence_parallel not stated: "));
  // The chosen plan is the fastest that fits of the four combinations.
  double fastest = 1e300;
  const mgt::cost::Estimator estimator(s.graph, s.cluster, s.num_gpus, s.settings,
                                       mgt::cost::cost_params_for(s.cluster.gpu, s.framework));
  for (int64_t z : {0, 1})
    for (bool sp : {true, false}) {
      mgt::ir::Plan p = s.plan;
      p.zero_stage = z;
      p.dp_shard = z == 0 ? 1 : 4;
      p.dp_replicate = z == 0 ? 4 : 1;
      p.sequence_parallel = sp;
      const auto e = estimator.estimate(p);
      if (e.memory.peak_bytes <= s.cluster.gpu.hbm_bytes) fastest = std::min(fastest, e.step_time_s);
    }
  EXPECT_DOUBLE_EQ(results.front().estimate->step_time_s, fastest);
  // pytorch-fsdp offers no ZeRO-1: DDP or SHARD_GRAD_OP.
  EXPECT_EQ(mgt::plan::setup_row(source_with(row, json{{"name", "pytorch-fsdp"}}), row).zero_stage_choices,
            (std::vector<int64_t>{0, 2}));
}

// Megatron-Core offers block recompute (--recompute-num-layers N): with recompute unstated and HBM
// too small for none or selective, the tuned plan recomputes the fewest layers that fit, found here
// by sweeping every N; megatron-lm (2021-23) recomputes every layer.
TEST(ValidationFramework, UnstatedRecomputeTakesTheFewestBlockLayersThatFit) {
  json row = gpt_row();
  row.erase("recompute");
  row["model"]["num_layers"] = 8;
  row["parallel"]["sequence_parallel"] = true;
  row["parallel"]["zero_stage"] = 1;  // every knob but recompute stated
  row["training"]["micro_batch_size"] = 4;
  const json core = {{"name", "megatron-core"}};
  auto s = mgt::plan::setup_row(source_with(row, core), row);
  EXPECT_TRUE(s.recompute_layers_choice);
  EXPECT_FALSE(mgt::plan::setup_row(source_with(row, json{{"name", "megatron-lm"}}), row).recompute_layers_choice);
  const mgt::cost::Estimator estimator(s.graph, s.cluster, s.num_gpus, s.settings,
                                       mgt::cost::cost_params_for(s.cluster.gpu, s.framework));
  auto peak_with = [&](mgt::ir::Recompute r, std::optional<int64_t> layers) {
    mgt::ir::Plan p = s.plan;
    p.recompute = r;
    p.recompute_layers = layers;
    return estimator.estimate(p).memory.peak_bytes;
  };
  std::vector<int64_t> peak(9);  // peak[n]: full recompute of n layers (8 = every layer)
  for (int64_t n = 1; n <= 8; ++n) peak[size_t(n)] = peak_with(mgt::ir::Recompute::full, n);
  const int64_t none = peak_with(mgt::ir::Recompute::none, std::nullopt);
  const int64_t selective = peak_with(mgt::ir::Recompute::selective, std::nullopt);
  ASSERT_GT(peak[3], peak[5]);  // each recomputed layer frees its activations
  // HBM between the peaks of 4 and 3 recomputed layers: 4 is the fewest that fits.
  const double hbm_gib = 0.5 * double(peak[3] + peak[4]) / double(1ll << 30);
  ASSERT_LT(double(peak[4]), hbm_gib * double(1ll << 30));
  ASSERT_GT(double(std::min(none, selective)), hbm_gib * double(1ll << 30));
  ValidationSource src = source_with(row, core);
  src.hardware["a100"]["hbm_gb"] = hbm_gib;
  const auto results = mgt::plan::validate_row(src, row);
  ASSERT_TRUE(results.front().estimate.has_value()) << results.front().skipped.value_or("");
  const auto& chosen = results.front().estimate->plan;
  EXPECT_EQ(chosen.recompute, mgt::ir::Recompute::full);
  EXPECT_EQ(chosen.recompute_layers, 4);
  EXPECT_TRUE(any_assumption_has(results.front().assumptions, "recompute not stated: full on the first 4 layers of each (virtual) stage"));
  // megatron-lm: every layer.
  src.framework = json{{"name", "megatron-lm"}};
  const auto lm = mgt::plan::validate_row(src, row);
  ASSERT_TRUE(lm.front().estimate.has_value());
  EXPECT_EQ(lm.front().estimate->plan.recompute, mgt::ir::Recompute::full);
  EXPECT_FALSE(lm.front().estimate->plan.recompute_layers.has_value());
  mgt::ir::Plan every = chosen;
  every.recompute_layers.reset();
  EXPECT_LT(results.front().estimate->step_time_s, estimator.estimate(every).step_time_s);
}

// A row whose framework version predates selective recompute (Megatron-LM before 2022) chooses its
// unstated recompute from none and full, and says why; a later version keeps selective as a choice.
TEST(ValidationFramework, UnstatedRecomputeOffersOnlyWhatTheStatedVersionHad) {
  json row = gpt_row();
  row["recompute"] = "not stated";
  using mgt::ir::Recompute;
  const json old = {{"name", "megatron-lm"}, {"version", "GitHub README, commit 5281919420 (2020-09-11)"}};
  const auto s = mgt::plan::setup_row(source_with(row, old), row);
  EXPECT_EQ(s.recompute_choices, (std::vector<Recompute>{Recompute::none, Recompute::full}));
  EXPECT_TRUE(any_assumption_has(s.assumptions, "predates megatron-lm's selective recompute (2022)"));
  const json later = {{"name", "megatron-lm"}, {"version", "Korthikanti et al. 2022"}};
  EXPECT_EQ(mgt::plan::setup_row(source_with(row, later), row).recompute_choices,
            (std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full}));
  const auto results = mgt::plan::validate_row(source_with(row, old), row);
  ASSERT_TRUE(results.front().estimate.has_value()) << results.front().skipped.value_or("");
  EXPECT_NE(results.front().estimate->plan.recompute, Recompute::selective);
}

TEST(ValidationFramework, UnknownNameIsTheDefaultProfileListed) {
  const json fw = {{"name", "someones-trainer"}};
  auto s = mgt::plan::setup_row(source_with(gpt_row(), fw), gpt_row());
  EXPECT_EQ(s.framework.name, "pytorch-fsdp");
  EXPECT_TRUE(any_assumption_has(s.assumptions, "\"someones-trainer\" has no profile"));
}

TEST(ValidationFramework, MalformedFrameworkIsASkipNamingTheField) {
  json row = gpt_row();
  row["framework"] = {{"name", "nemo"}, {"features", "tp-comm-overlap"}};
  const auto r = mgt::plan::validate_row(source_with(row, nullptr), row);
  ASSERT_TRUE(r.front().skipped.has_value());
  EXPECT_NE(r.front().skipped->find("framework.features"), std::string::npos) << *r.front().skipped;
}

}  // namespace
