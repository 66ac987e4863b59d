// mgt.simulation/1 on real simulations (the report is cost_model's; lowering a plan needs the planner):
// write, read and write again byte for byte, as `mgt-plan simulate ... --json` prints it.
#include "mgt/cost_model/simulation_report.hpp"

#include "../common/format_checks.hpp"
#include "planner_fixtures.hpp"

#include "mgt/cost_model/simulator.hpp"
#include "mgt/planner/lower.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using json = nlohmann::json;

void expect_round_trip(const mgt::ir::Graph& graph, const mgt::ir::Plan& plan, int64_t gpus,
                       const mgt::ir::TrainingSettings& settings) {
  const mgt::ir::Schedule schedule = mgt::plan::lower_to_schedule(graph, plan, settings, gpus, mgt::test::h100());
  const mgt::cost::SimulationResult result = mgt::cost::Simulator(graph, mgt::test::h100(), settings).simulate(schedule);
  const mgt::cost::Estimate analytic = mgt::cost::Estimator(graph, mgt::test::h100(), gpus, settings).estimate(plan);
  const mgt::cost::SimulationReport report =
      mgt::cost::make_simulation_report(graph, schedule, result, analytic, gpus);
  EXPECT_EQ(report.programs.size(), schedule.programs.size());
  EXPECT_EQ(report.memory.peak_bytes, result.peak_bytes);
  const std::string written = mgt::cost::to_json(report).dump(2);
  EXPECT_EQ(mgt::test::rewritten(json::parse(written), mgt::cost::simulation_report_from_json), written);
}

TEST(SimulationReport, RealSimulationsRoundTripByteForByte) {
  const mgt::ir::TrainingSettings settings = mgt::test::settings(1024, 16);
  expect_round_trip(mgt::test::llama8b(), mgt::test::make_plan(1, 2, 2, 1, 1, 1, 8), 4, settings);
  // A pipeline: one program per stage, a bubble and exposed pp time in the breakdowns.
  expect_round_trip(mgt::test::llama8b(), mgt::test::make_plan(1, 2, 1, 1, 2, 1, 8), 4, settings);
  expect_round_trip(mgt::test::model("Mixtral-8x7B"),
                    [] {
                      mgt::ir::Plan p = mgt::test::make_plan(1, 4, 2, 1, 2, 1, 4, mgt::ir::Recompute::full);
                      p.ep = 2;
                      return p;
                    }(),
                    16, settings);
}

}  // namespace
