// mgt.simulation/1 (cost_model/include/mgt/cost_model/simulation_report.hpp): a hand-written document
// read field by field and written back with the same keys; bad documents naming the field. The round
// trip of a real simulation (which needs the planner's lowering) is in
// tests/planner/simulation_report_round_trip_test.cpp.
#include "mgt/cost_model/simulation_report.hpp"

#include "../common/format_checks.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using mgt::cost::SimulationReport;
using mgt::test::expect_each_error_names_the_field, mgt::test::expect_written_back_with_plan_resolved;
using json = nlohmann::json;

const char* const kHandWritten = R"({
  "format": "mgt.simulation/1", "model": "m", "num_gpus": 4,
  "plan": {"dp_shard": 2, "pp": 2, "grad_accum": 4},
  "step_time_s": 1.5, "peak_bytes": 1000,
  "breakdown": {"compute_s": 1.0, "recompute_s": 0.0, "exposed_tp_s": 0.0, "exposed_cp_s": 0.0,
                "exposed_fsdp_s": 0.125, "exposed_dp_s": 0.0, "exposed_pp_s": 0.0625, "exposed_ep_s": 0.0,
                "bubble_s": 0.25, "optimizer_s": 0.0, "overhead_s": 0.0625},
  "memory": {"program": "stage1", "peak_bytes": 1000, "peak_allocated_bytes": 900, "peak_time_s": 0.75,
             "by_kind": {"parameters": 100, "gradients": 100, "optimizer": 200, "activations": 400,
                         "fsdp_buffer": 50, "comm_buffer": 0, "workspace": 0, "logits": 50},
             "largest_live": [{"name": "act[l0]", "bytes": 400, "kind": "activations"},
                              {"name": "optim", "bytes": 200, "kind": "optimizer"}],
             "overhead_bytes": 100},
  "programs": [{"name": "stage0", "num_ranks": 2, "end_s": 1.25,
                "busy_s": {"compute": 1.0, "tp": 0.0, "cp": 0.0, "dp": 0.5, "pp": 0.25, "ep": 0.0},
                "breakdown": {"compute_s": 1.0, "recompute_s": 0.0, "exposed_tp_s": 0.0, "exposed_cp_s": 0.0,
                              "exposed_fsdp_s": 0.0, "exposed_dp_s": 0.0, "exposed_pp_s": 0.0,
                              "exposed_ep_s": 0.0, "bubble_s": 0.25, "optimizer_s": 0.0, "overhead_s": 0.0},
                "peak_bytes": 800, "peak_allocated_bytes": 700, "peak_time_s": 0.5}],
  "instructions": 321,
  "analytic": {"step_time_s": 1.4, "peak_bytes": 990}
})";

TEST(SimulationReport, HandWrittenDocumentReadsFieldByField) {
  const SimulationReport r = mgt::cost::simulation_report_from_json(json::parse(kHandWritten), "hand.json");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.num_gpus, 4);
  EXPECT_EQ(r.plan.pp, 2);
  EXPECT_EQ(r.plan.dp_shard, 2);
  EXPECT_EQ(r.step_time_s, 1.5);
  EXPECT_EQ(r.breakdown.exposed_fsdp_s, 0.125);
  EXPECT_EQ(r.breakdown.exposed_pp_s, 0.0625);
  EXPECT_EQ(r.breakdown.bubble_s, 0.25);
  EXPECT_EQ(r.memory.program, "stage1");
  EXPECT_EQ(r.memory.peak_allocated_bytes, 900);
  EXPECT_EQ(r.memory.by_kind_bytes[size_t(mgt::ir::BufferKind::activations)], 400);
  EXPECT_EQ(r.memory.by_kind_bytes[size_t(mgt::ir::BufferKind::logits)], 50);
  ASSERT_EQ(r.memory.largest_live.size(), 2u);
  EXPECT_EQ(r.memory.largest_live[1].name, "optim");
  EXPECT_EQ(r.memory.largest_live[1].kind, mgt::ir::BufferKind::optimizer);
  ASSERT_EQ(r.programs.size(), 1u);
  EXPECT_EQ(r.programs[0].num_ranks, 2);
  EXPECT_EQ(r.programs[0].busy_s[size_t(mgt::ir::Stream::dp)], 0.5);
  EXPECT_EQ(r.programs[0].busy_s[size_t(mgt::ir::Stream::pp)], 0.25);
  EXPECT_EQ(r.programs[0].peak_time_s, 0.5);
  EXPECT_EQ(r.instructions, 321);
  EXPECT_EQ(r.analytic_step_time_s, 1.4);
  EXPECT_EQ(r.analytic_peak_bytes, 990);
  expect_written_back_with_plan_resolved(kHandWritten, r);
}

TEST(SimulationReport, BadDocumentsNameTheField) {
  expect_each_error_names_the_field(kHandWritten, mgt::cost::simulation_report_from_json, {
      {"instructions", [](json& doc) { doc.erase("instructions"); }},
      // every kTimeTerms key is required
      {"exposed_pp_s", [](json& doc) { doc["breakdown"].erase("exposed_pp_s"); }},
      {"ep", [](json& doc) { doc["programs"][0]["busy_s"].erase("ep"); }},
      {"logits", [](json& doc) { doc["memory"]["by_kind"]["logits"] = "50"; }},
      {"kind", [](json& doc) { doc["memory"]["largest_live"][0]["kind"] = "weights"; }},
      // not peak - allocated
      {"overhead_bytes", [](json& doc) { doc["memory"]["overhead_bytes"] = 0; }},
      {"peak_bytes", [](json& doc) { doc["analytic"].erase("peak_bytes"); }},
  });
}

}  // namespace
