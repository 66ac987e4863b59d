// Tests for mgt.graph/1: writer/reader round trip for every example model, the hand-written
// examples, and clear errors for malformed graph documents.
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace mgt::ir {
namespace {

using nlohmann::json;

std::string models_dir() { return std::string(MGT_SOURCE_DIR) + "/examples/models"; }

TEST(to_json, round_trips_every_example_model) {
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir())) {
    if (entry.path().extension() != ".json") continue;
    const Graph graph = load_model(entry.path().string());
    const json doc = to_json(graph);
    EXPECT_EQ(doc.at("format"), "mgt.graph/1");
    // Through text as well, as a file would go.
    const Graph back = graph_from_json(json::parse(doc.dump(2)), "roundtrip.json");
    EXPECT_EQ(back, graph) << entry.path();
    EXPECT_NO_THROW(verify(back, "roundtrip.json"));
    EXPECT_EQ(count_parameters(back).total, count_parameters(graph).total);
    ++models;
  }
  EXPECT_GE(models, 15);
}

TEST(to_json, moe_sizes_that_differ_from_the_table_are_written_per_tensor) {
  const json doc = to_json(load_model(models_dir() + "/Mixtral-8x7B.json"));
  EXPECT_EQ(doc["dims"]["e"], 8);
  bool found = false;
  for (const auto& t : doc["blocks"][1]["tensors"])
    if (t["name"] == "routing") {
      EXPECT_EQ(t["sizes"]["e"], 2);
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(graph_from_json, vit_example_loads_and_counts_like_timm) {
  const Graph g = load_model(models_dir() + "/vit-base.graph.json");
  EXPECT_EQ(g.info.name, "vit-base");
  EXPECT_EQ(g.info.architecture, "ViT-B/16");
  EXPECT_EQ(g.info.num_layers, 12);
  EXPECT_EQ(g.info.hidden_size, 768);
  EXPECT_EQ(g.info.num_attention_heads, 12);
  EXPECT_EQ(g.info.num_kv_heads, 12);
  EXPECT_EQ(g.info.max_seq_len, 197);
  // timm vit_base_patch16_224: 86,567,656 parameters.
  const int64_t per_layer = 2 * 2 * 768 + 4 * (768 * 768 + 768) + 2 * 768 * 3072 + 3072 + 768;
  const int64_t correct = (768 * 768 + 768) + 197 * 768 + 768 + 12 * per_layer + 2 * 768 + (768 * 1000 + 1000);
  EXPECT_EQ(correct, 86567656);
  EXPECT_EQ(count_parameters(g).total, correct);
  EXPECT_EQ(count_parameters(g).active, correct);
  for (const auto& op : g.blocks[1].ops) {
    if (op.kind == OpKind::attention_core) {
      EXPECT_FALSE(op.causal);
    }
  }
}

TEST(graph_from_json, mlp_example_loads) {
  const Graph g = load_model(models_dir() + "/mlp.graph.json");
  EXPECT_EQ(g.info.num_layers, 4);
  EXPECT_EQ(g.info.num_attention_heads, 0);
  EXPECT_EQ(g.info.architecture, "mgt.graph");
  EXPECT_EQ(g.info.dim_sources.at('f'), "dims.f");
  EXPECT_EQ(count_parameters(g).total, 4 * (1024 + 2 * 1024 * 4096) + 1024 * 10);
}

json minimal_graph() {
  return json::parse(R"({
    "format": "mgt.graph/1", "name": "min", "dims": {"h": 4, "f": 8},
    "blocks": [{"name": "layer", "repeat": 2, "tensors": [
        {"name": "x", "dims": "bsh"}, {"name": "w", "dims": "hf", "parameter": true}, {"name": "y", "dims": "bsf"}],
      "ops": [{"name": "proj", "kind": "contraction", "inputs": ["x", "w"], "output": "y", "einsum": "bsh,hf->bsf"}]}]
  })");
}

void expect_graph_error(const json& doc, const std::string& field, const std::string& fragment) {
  try {
    verify(graph_from_json(doc, "g.json"), "g.json");
    FAIL() << "accepted; expected an error on " << field;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("g.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(graph_from_json, minimal_graph_defaults) {
  const Graph g = graph_from_json(minimal_graph(), "g.json");
  verify(g, "g.json");
  EXPECT_EQ(g.info.num_layers, 2);
  EXPECT_EQ(g.info.hidden_size, 4);
  EXPECT_TRUE(g.blocks[0].is_layer);
  EXPECT_EQ(count_parameters(g).total, 2 * 32);
}

TEST(graph_from_json, rejects_bad_documents) {
  json doc = minimal_graph();
  doc["format"] = "mgt.graph/2";
  expect_graph_error(doc, "format", "mgt.graph/1");

  doc = minimal_graph();
  doc["blocks"][0]["repaet"] = 3;
  expect_graph_error(doc, "blocks[0].repaet", "unknown key");

  doc = minimal_graph();
  doc["blocks"][0]["repeat"] = "two";
  expect_graph_error(doc, "blocks[0].repeat", "expected an integer");

  doc = minimal_graph();
  doc["blocks"][0]["repeat"] = 0;
  expect_graph_error(doc, "blocks[0].repeat", "at least 1");

  doc = minimal_graph();
  doc["dims"].erase("f");
  expect_graph_error(doc, "blocks[0].tensors[1].dims", "has no size");

  doc = minimal_graph();
  doc["blocks"][0]["ops"][0]["kind"] = "matmul";
  expect_graph_error(doc, "kind", "unknown op kind");

  doc = minimal_graph();
  doc["blocks"][0]["ops"][0]["einsum"] = "bsh,fh->bsf";
  expect_graph_error(doc, "blocks[0].ops[0].inputs[1]", "expects dims");

  doc = minimal_graph();
  doc["blocks"][0]["ops"][0]["top_k"] = 2;
  expect_graph_error(doc, "blocks[0].ops[0].top_k", "unknown key");

  doc = minimal_graph();
  doc["blocks"] = json::object();
  expect_graph_error(doc, "blocks", "expected an array");

  doc = minimal_graph();
  doc["blocks"][0]["tensors"][0] = json::array({"x", "bsh"});
  expect_graph_error(doc, "blocks[0].tensors[0]", "expected an object");

  doc = minimal_graph();
  doc["dims"]["s"] = 4;
  expect_graph_error(doc, "dims.s", "symbolic");

  doc = minimal_graph();
  doc["dims"]["H"] = 4;
  expect_graph_error(doc, "dims.H", "lowercase");

  doc = minimal_graph();
  doc["blocks"][0]["tensors"][1]["sizes"] = {{"z", 3}};
  expect_graph_error(doc, "sizes", "no dim 'z'");

  doc = minimal_graph();
  doc["tied_parameters"] = json::array({"layer.w"});
  expect_graph_error(doc, "tied_parameters[0]", "pair");

  doc = minimal_graph();
  doc["dims"]["h"] = json::parse("18446744073709551615");
  expect_graph_error(doc, "dims.h", "64-bit");

  // clamp_limit: a number >= 0 on a gated activation only.
  auto with_activation = [](const json& activation) {
    json d = minimal_graph();
    d["blocks"][0]["tensors"].push_back({{"name", "z"}, {"dims", "bsf"}});
    json op = {{"name", "act"}, {"kind", "activation"}, {"inputs", {"y"}}, {"output", "z"}, {"activation", "gelu"}};
    op.update(activation);
    d["blocks"][0]["ops"].push_back(op);
    return d;
  };
  expect_graph_error(with_activation({{"clamp_limit", 7.0}}), "blocks[0].ops[1].clamp_limit", "only a gated unit");
  expect_graph_error(with_activation({{"clamp_limit", -1}}), "blocks[0].ops[1].clamp_limit", ">= 0");
  expect_graph_error(with_activation({{"clamp_limit", "7"}}), "blocks[0].ops[1].clamp_limit", "expected a number");
  EXPECT_EQ(graph_from_json(with_activation({{"clamp_limit", 0}}), "g.json").blocks[0].ops[1].clamp_limit, 0.0);
}

TEST(load_model, graph_document_errors_name_the_file) {
  const std::string path = ::testing::TempDir() + "/broken.graph.json";
  json doc = minimal_graph();
  doc["blocks"][0]["ops"][0]["inputs"][1] = "w_missing";
  std::ofstream(path) << doc.dump();
  try {
    load_model(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), path);
    EXPECT_NE(std::string(e.what()).find("w_missing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mgt::ir
