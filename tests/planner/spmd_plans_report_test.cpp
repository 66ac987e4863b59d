// mgt.spmd_plans/2 (planner/include/mgt/planner/spmd.hpp, SpmdPlansReport): a real role-less search
// written, read and written again byte for byte; a hand-written document read field by field; bad
// documents naming the field.
#include "mgt/planner/spmd.hpp"

#include "../common/format_checks.hpp"

#include "mgt/ir/cluster_spec.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using mgt::plan::SpmdPlansReport;
using mgt::test::expect_each_error_names_the_field, mgt::test::rewritten;
using json = nlohmann::json;

// y = relu(x . w1) . w2 over i tokens, j model width, k hidden width: one block, as imported from MLIR.
mgt::ir::Graph mlp(int64_t tokens, int64_t width, int64_t hidden) {
  mgt::ir::Block b;
  b.name = "main";
  b.is_layer = false;
  b.tensors = {{"x", {{'i', tokens}, {'j', width}}, false},  {"w1", {{'j', width}, {'k', hidden}}, true},
               {"h", {{'i', tokens}, {'k', hidden}}, false}, {"r", {{'i', tokens}, {'k', hidden}}, false},
               {"w2", {{'k', hidden}, {'j', width}}, true},  {"y", {{'i', tokens}, {'j', width}}, false}};
  mgt::ir::Op relu{"relu", mgt::ir::OpKind::activation, {"h"}, "r", ""};
  relu.activation = mgt::ir::ActivationKind::relu;
  b.ops = {{"mm1", mgt::ir::OpKind::contraction, {"x", "w1"}, "h", "ij,jk->ik"},
           relu,
           {"mm2", mgt::ir::OpKind::contraction, {"r", "w2"}, "y", "ik,kj->ij"}};
  mgt::ir::Graph g;
  g.info.name = "mlp";
  g.blocks = {b};
  mgt::ir::verify(g, "mlp");
  return g;
}

TEST(SpmdPlansReport, RealSearchRoundTripsByteForByte) {
  const mgt::ir::ClusterSpec h100 = mgt::ir::cluster_preset("h100-sxm");
  const SpmdPlansReport report{"mlp.mlir", 8, h100.gpu.name,
                               mgt::plan::search_spmd(mlp(4096, 1024, 4096), h100, 8, mgt::ir::DType::bf16, 5)};
  ASSERT_EQ(report.result.plans.size(), 5u);
  const std::string written = mgt::plan::to_json(report).dump(2);
  EXPECT_EQ(rewritten(json::parse(written), mgt::plan::spmd_plans_report_from_json), written);
  const SpmdPlansReport back = mgt::plan::spmd_plans_report_from_json(json::parse(written), "test.json");
  for (size_t i = 0; i < back.result.plans.size(); ++i) EXPECT_EQ(back.result.plans[i].plan, report.result.plans[i].plan);
}

const char* const kHandWritten = R"({
  "format": "mgt.spmd_plans/2", "model": "m.mlir", "gpus": 8, "cluster": "G",
  "evaluated": 20, "feasible": 15, "rejected": {"mesh does not divide x": 5},
  "plans": [{"plan": {"format": "mgt.spmd_plan/1", "mesh": [2, 4],
                      "splits": [{"tensor": "x", "dim": 0}, {"tensor": "w1", "dim": 1}]},
             "step_time_s": 0.003, "compute_s": 0.002, "comm_s": 0.001, "peak_bytes": 4096, "collectives": 3}]
})";

TEST(SpmdPlansReport, HandWrittenDocumentReadsFieldByField) {
  const SpmdPlansReport r = mgt::plan::spmd_plans_report_from_json(json::parse(kHandWritten), "hand.json");
  EXPECT_EQ(r.model_path, "m.mlir");
  EXPECT_EQ(r.num_gpus, 8);
  EXPECT_EQ(r.gpu, "G");
  EXPECT_EQ(r.result.evaluated, 20);
  EXPECT_EQ(r.result.feasible, 15);
  EXPECT_EQ(r.result.rejected.at("mesh does not divide x"), 5);
  ASSERT_EQ(r.result.plans.size(), 1u);
  const mgt::plan::SpmdEstimate& e = r.result.plans[0];
  EXPECT_EQ(e.plan, (mgt::plan::SpmdPlan{{2, 4}, {{"x", 0}, {"w1", 1}}}));
  EXPECT_EQ(e.step_s, 0.003);
  EXPECT_EQ(e.compute_s, 0.002);
  EXPECT_EQ(e.comm_s, 0.001);
  EXPECT_EQ(e.peak_bytes, 4096);
  EXPECT_EQ(e.collectives, 3);
}

TEST(SpmdPlansReport, BadDocumentsNameTheField) {
  expect_each_error_names_the_field(kHandWritten, mgt::plan::spmd_plans_report_from_json, {
      {"gpus", [](json& doc) { doc.erase("gpus"); }},
      {"comm_s", [](json& doc) { doc["plans"][0].erase("comm_s"); }},
      {"peak_bytes", [](json& doc) { doc["plans"][0]["peak_bytes"] = 1.5; }},
      {"mesh", [](json& doc) { doc["plans"][0]["plan"]["mesh"] = json::array(); }},
  });
}

}  // namespace
