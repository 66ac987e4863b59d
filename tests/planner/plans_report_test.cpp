// mgt.plans/1 (planner/include/mgt/planner/plans_report.hpp): a real search written, read and written
// again byte for byte; a hand-written document read field by field; bad documents naming the field.
#include "mgt/planner/plans_report.hpp"

#include "../common/format_checks.hpp"
#include "planner_fixtures.hpp"

#include "mgt/cost_model/estimator.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using mgt::plan::PlansReport, mgt::plan::RankedEstimate;
using mgt::test::expect_each_error_names_the_field, mgt::test::rewritten;
using json = nlohmann::json;

// The search as `mgt-plan examples/models/Llama-3.1-8B.json --gpus 16 --top 4 --json` runs it, but at
// a 4096-token sequence so that it stays fast.
PlansReport llama_search() {
  const mgt::ir::TrainingSettings settings = mgt::test::settings(4096, 256);
  const mgt::cost::Estimator estimator(mgt::test::llama8b(), mgt::test::h100(), 16, settings);
  mgt::plan::SearchOptions options;
  options.rules = {16, false, ""};
  options.top = 4;
  const mgt::plan::SearchResult result = mgt::plan::search(estimator, options);
  return mgt::plan::make_plans_report(mgt::test::llama8b(), "examples/models/Llama-3.1-8B.json", mgt::test::h100(),
                                      16, settings, result);
}

TEST(PlansReport, RealSearchRoundTripsByteForByte) {
  const PlansReport report = llama_search();
  ASSERT_EQ(report.plans.size(), 4u);
  const std::string written = mgt::plan::to_json(report).dump(2);
  EXPECT_EQ(rewritten(json::parse(written), mgt::plan::plans_report_from_json), written);
  // The entry `estimate --json` prints, alone.
  const std::string entry = mgt::plan::to_json(report.plans[1]).dump(2);
  EXPECT_EQ(rewritten(json::parse(entry), mgt::plan::ranked_estimate_from_json), entry);
}

TEST(PlansReport, RealSearchKeepsRankOrderAndCounts) {
  const PlansReport report = llama_search();
  const PlansReport back = mgt::plan::plans_report_from_json(mgt::plan::to_json(report), "test.json");
  for (size_t i = 0; i < back.plans.size(); ++i) {
    EXPECT_EQ(back.plans[i].rank, int64_t(i) + 1);
    EXPECT_EQ(back.plans[i].estimate.plan, report.plans[i].estimate.plan);
    EXPECT_EQ(back.plans[i].estimate.time, report.plans[i].estimate.time);
  }
  EXPECT_EQ(back.evaluated, report.evaluated);
  EXPECT_EQ(back.rejected, report.rejected);
  EXPECT_EQ(back.settings.global_batch_seqs, 256);
  EXPECT_EQ(back.cluster.num_gpus, 16);
}

// Written by hand: every number below is what the test expects back.
const char* const kHandWritten = R"({
  "format": "mgt.plans/1",
  "model": {"name": "m", "path": "m.json", "architecture": "MixtralForCausalLM", "params_total": 1000,
            "params_active": 300},
  "cluster": {"name": "c", "gpu": "G", "num_gpus": 8, "gpus_per_node": 4, "hbm_bytes": 5000},
  "settings": {"seq_len": 128, "global_batch_tokens": 1024, "global_batch_seqs": 8, "compute_dtype": "bf16",
               "fp8_linears": true, "master_weights_dtype": "fp32", "gradients_dtype": "fp32",
               "optimizer": "AdamW, fp32 states", "mesh_order": ["pp", "tp"]},
  "plans": [{
    "rank": 1,
    "plan": {"dp_shard": 4, "tp": 2, "grad_accum": 2},
    "step_time_s": 2.5, "tokens_per_s_per_gpu": 51.2, "mfu": 0.4, "model_flops_per_step": 6e15,
    "bottleneck": "compute",
    "memory": {"parameters_bytes": 10, "gradients_bytes": 20, "optimizer_bytes": 30, "fsdp_buffers_bytes": 40,
               "activations_bytes": 50, "transient_bytes": 60, "overhead_bytes": 70, "peak_bytes": 6000,
               "hbm_bytes": 5000, "headroom_bytes": -1000},
    "time": {"compute_s": 1.0, "recompute_s": 0.1, "exposed_tp_s": 0.2, "exposed_cp_s": 0.0,
             "exposed_fsdp_s": 0.3, "exposed_dp_s": 0.0, "exposed_pp_s": 0.0, "exposed_ep_s": 0.4,
             "bubble_s": 0.25, "optimizer_s": 0.05, "overhead_s": 0.2}
  }],
  "evaluated": 12,
  "rejected": {"too big": 7, "tp=3 must divide num_attention_heads=32": 4}
})";

TEST(PlansReport, HandWrittenDocumentReadsFieldByField) {
  const PlansReport r = mgt::plan::plans_report_from_json(json::parse(kHandWritten), "hand.json");
  EXPECT_EQ(r.model.architecture, "MixtralForCausalLM");
  EXPECT_EQ(r.model.params_total, 1000);
  EXPECT_EQ(r.model.params_active, std::optional<int64_t>(300));
  EXPECT_EQ(r.cluster.gpus_per_node, 4);
  EXPECT_EQ(r.cluster.hbm_bytes, 5000);
  EXPECT_EQ(r.settings.seq_len, 128);
  EXPECT_TRUE(r.settings.fp8_linears);
  EXPECT_EQ(r.settings.mesh_order, (std::vector<std::string>{"pp", "tp"}));
  ASSERT_EQ(r.plans.size(), 1u);
  const RankedEstimate& e = r.plans[0];
  EXPECT_EQ(e.hbm_bytes, 5000);
  EXPECT_EQ(e.estimate.plan.dp_shard, 4);
  EXPECT_EQ(e.estimate.plan.tp, 2);
  EXPECT_EQ(e.estimate.step_time_s, 2.5);
  EXPECT_EQ(e.estimate.memory.fsdp_buffers_bytes, 40);
  EXPECT_EQ(e.estimate.memory.peak_bytes, 6000);
  EXPECT_EQ(e.estimate.time.exposed_ep_s, 0.4);
  EXPECT_EQ(e.estimate.time.bubble_s, 0.25);
  EXPECT_EQ(r.evaluated, 12);
  EXPECT_EQ(r.rejected.at("too big"), 7);
  EXPECT_EQ(r.rejected.size(), 2u);
}

TEST(PlansReport, BadDocumentsNameTheField) {
  expect_each_error_names_the_field(kHandWritten, mgt::plan::plans_report_from_json, {
      {"evaluated", [](json& doc) { doc.erase("evaluated"); }},
      {"bubble_s", [](json& doc) { doc["plans"][0]["time"].erase("bubble_s"); }},
      {"fp8_linears", [](json& doc) { doc["settings"]["fp8_linears"] = "yes"; }},
      // not hbm - peak
      {"headroom_bytes", [](json& doc) { doc["plans"][0]["memory"]["headroom_bytes"] = 0; }},
      {"too big", [](json& doc) { doc["rejected"]["too big"] = -1; }},
      {"rank", [](json& doc) { doc["plans"][0].erase("rank"); }},
  });
}

}  // namespace
