// mgt.inspect/1 (planner/include/mgt/planner/inspect.hpp): every example model inspected, written, read
// and written again byte for byte; the counts of the MLP graph by hand; bad documents naming the field.
#include "mgt/planner/inspect.hpp"

#include "../common/format_checks.hpp"
#include "planner_fixtures.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace {

using mgt::plan::ModelInspection;
using mgt::test::expect_each_error_names_the_field, mgt::test::rewritten;
using json = nlohmann::json;

TEST(ModelInspection, EveryExampleModelRoundTripsByteForByte) {
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MGT_SOURCE_DIR) + "/examples/models")) {
    if (entry.path().extension() != ".json") continue;
    const mgt::ir::Graph graph = mgt::ir::load_model(entry.path().string());
    const std::string written = mgt::plan::to_json(mgt::plan::inspect_model(graph, 2048)).dump(2);
    EXPECT_EQ(rewritten(json::parse(written), mgt::plan::model_inspection_from_json), written) << entry.path();
    ++models;
  }
  EXPECT_GE(models, 14);
}

TEST(ModelInspection, MlpGraphCountsByHand) {
  // examples/models/mlp.graph.json: 4 layers of w1 (h x f) and w2 (f x h) with a norm of h, then a
  // head of h x v; h = 1024, f = 4096, v = 10. Training FLOPs per token: 6 per matmul parameter.
  const ModelInspection m = mgt::plan::inspect_model(mgt::ir::load_model(mgt::test::example("mlp.graph.json")), 8192);
  ASSERT_EQ(m.blocks.size(), 2u);
  const int64_t h = 1024, f = 4096, v = 10;
  EXPECT_EQ(m.blocks[0].params_per_copy, 2 * h * f + h);
  EXPECT_EQ(m.blocks[0].repeat, 4);
  EXPECT_EQ(m.blocks[0].training_flops_per_token_per_copy, 6.0 * 2 * h * f);
  EXPECT_EQ(m.blocks[1].params_per_copy, h * v);
  EXPECT_EQ(m.blocks[1].training_flops_per_token_per_copy, 6.0 * h * v);
  EXPECT_EQ(m.params_total, 4 * (2 * h * f + h) + h * v);
  EXPECT_EQ(m.training_flops_per_token, 4 * 6.0 * 2 * h * f + 6.0 * h * v);
  EXPECT_EQ(m.num_experts, 0);
  EXPECT_FALSE(mgt::plan::to_json(m).contains("params_active"));  // dense: no MoE fields
}

const char* const kHandWritten = R"({
  "format": "mgt.inspect/1", "model": "moe", "architecture": "MixtralForCausalLM",
  "params_total": 900, "params_active": 250, "num_experts": 8, "experts_per_token": 2,
  "num_layers": 2, "hidden_size": 16, "num_attention_heads": 4, "num_kv_heads": 2, "vocab_size": 32,
  "seq_len": 64, "training_flops_per_token": 1500.5,
  "blocks": [{"name": "embed", "repeat": 1, "params_per_copy": 512, "training_flops_per_token_per_copy": 0.0,
              "ops": 1},
             {"name": "layer", "repeat": 2, "params_per_copy": 194, "training_flops_per_token_per_copy": 750.25,
              "ops": 9}]
})";

TEST(ModelInspection, HandWrittenDocumentReadsFieldByField) {
  const ModelInspection m = mgt::plan::model_inspection_from_json(json::parse(kHandWritten), "hand.json");
  EXPECT_EQ(m.model, "moe");
  EXPECT_EQ(m.params_total, 900);
  EXPECT_EQ(m.params_active, 250);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.experts_per_token, 2);
  EXPECT_EQ(m.num_kv_heads, 2);
  EXPECT_EQ(m.vocab_size, 32);
  EXPECT_EQ(m.seq_len, 64);
  EXPECT_EQ(m.training_flops_per_token, 1500.5);
  ASSERT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.blocks[1].name, "layer");
  EXPECT_EQ(m.blocks[1].repeat, 2);
  EXPECT_EQ(m.blocks[1].params_per_copy, 194);
  EXPECT_EQ(m.blocks[1].training_flops_per_token_per_copy, 750.25);
  EXPECT_EQ(m.blocks[1].ops, 9);
}

TEST(ModelInspection, BadDocumentsNameTheField) {
  expect_each_error_names_the_field(kHandWritten, mgt::plan::model_inspection_from_json, {
      {"seq_len", [](json& doc) { doc.erase("seq_len"); }},
      // an MoE model lists all three
      {"params_active", [](json& doc) { doc.erase("params_active"); }},
      {"training_flops_per_token_per_copy",
       [](json& doc) { doc["blocks"][1]["training_flops_per_token_per_copy"] = "many"; }},
      {"blocks", [](json& doc) { doc["blocks"] = json::object(); }},
  });
}

}  // namespace
