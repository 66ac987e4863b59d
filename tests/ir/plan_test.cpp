// mgt.plan/1: defaults, derived values, round trip and bad input.
#include "mgt/ir/error.hpp"
#include "mgt/ir/plan.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace mgt::ir;

TEST(PlanFromJson, MissingKeysTakeDefaults) {
  Plan plan = plan_from_json(nlohmann::json::parse(R"({"dp_shard":4,"tp":2})"), "--plan");
  EXPECT_EQ(plan.dp_replicate, 1);
  EXPECT_EQ(plan.dp_shard, 4);
  EXPECT_EQ(plan.tp, 2);
  EXPECT_EQ(plan.cp, 1);
  EXPECT_EQ(plan.pp, 1);
  EXPECT_EQ(plan.micro_batch, 1);
  EXPECT_FALSE(plan.grad_accum.has_value());
  EXPECT_EQ(plan.recompute, Recompute::none);
  EXPECT_TRUE(sequence_parallel(plan));  // derived: tp > 1
  EXPECT_EQ(zero_stage(plan), 3);        // derived: dp_shard > 1
  EXPECT_EQ(world_size(plan), 8);
}

TEST(PlanFromJson, DerivedDefaultsWithoutShardingOrTp) {
  Plan plan = plan_from_json(nlohmann::json::parse(R"({"dp_replicate":8})"), "--plan");
  EXPECT_FALSE(sequence_parallel(plan));
  EXPECT_EQ(zero_stage(plan), 0);
}

TEST(PlanFromJson, RoundTripKeepsEveryKey) {
  Plan plan;
  plan.dp_replicate = 2; plan.dp_shard = 8; plan.tp = 4; plan.cp = 2; plan.micro_batch = 3;
  plan.grad_accum = 5; plan.recompute = Recompute::selective; plan.sequence_parallel = false;
  plan.zero_stage = 3;
  nlohmann::json doc = to_json(plan);
  EXPECT_EQ(doc.at("format"), "mgt.plan/1");
  EXPECT_EQ(plan_from_json(doc, "x"), plan);
}

TEST(PlanFromJson, RejectsBadInputNamingTheKey) {
  auto expect_error = [](const char* text, const std::string& key) {
    try {
      parse_plan_argument(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), key) << e.what();
      EXPECT_NE(std::string(e.what()).find("--plan"), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"tp":0})", "tp");
  expect_error(R"({"tp":"two"})", "tp");
  expect_error(R"({"dp_sharding":2})", "dp_sharding");
  expect_error(R"({"recompute":"some"})", "recompute");
  expect_error(R"({"zero_stage":4,"dp_shard":2})", "zero_stage");
  expect_error(R"({"zero_stage":3})", "zero_stage");
  expect_error(R"({"sequence_parallel":true})", "sequence_parallel");
  expect_error(R"({"tp":2,)", "");
}

TEST(ParsePlanArgument, ReadsAFile) {
  EXPECT_THROW(parse_plan_argument("/nonexistent/plan.json"), InputError);
}
