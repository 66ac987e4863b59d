// Tests for the Hugging Face config frontend: published parameter counts for every example model,
// a hand-computed tiny config, and clear InputErrors for bad configs.
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace mgt::ir {
namespace {

using nlohmann::json;

std::string model_path(const std::string& name) {
  return std::string(MGT_SOURCE_DIR) + "/examples/models/" + name + ".json";
}

/// The 14 configs copied from /work/shared/models; expected counts are read from the files.
const std::vector<std::string> kModels{"DeepSeek-V3",  "GPT-2",        "Gemma-2-9B",  "Llama-3.1-405B", "Llama-3.1-70B",
                               "Llama-3.1-8B", "Mistral-7B-v0.3", "Mixtral-8x7B", "OLMo-2-7B",     "Phi-3-mini",
                               "Qwen2.5-7B",   "Qwen3-30B-A3B", "Qwen3-32B",   "Qwen3-8B"};

TEST(examples, every_hf_config_is_in_the_published_params_suite) {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MGT_SOURCE_DIR) + "/examples/models")) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".json" || file.find(".graph.") != std::string::npos) continue;
    EXPECT_NE(std::find(kModels.begin(), kModels.end(), entry.path().stem().string()), kModels.end()) << file;
  }
}

class PublishedParams : public ::testing::TestWithParam<std::string> {};

TEST_P(PublishedParams, count_parameters_matches_published_total_and_active) {
  const std::string path = model_path(GetParam());
  const json published = read_json_file(path).at("_published_params");
  const Graph graph = load_model(path);
  const ParamCount count = count_parameters(graph);
  // DeepSeek-V3: the main model plus its multi-token-prediction module, whose embedding and output
  // head are the main model's (tests/ir/hf_encoder_families_test.cpp derives it against the 685B).
  const int64_t total = published.contains("total") ? published["total"].get<int64_t>()
                                                    : published["computed_trained_with_mtp"].get<int64_t>();
  EXPECT_EQ(count.total, total);
  if (published.contains("active_per_token_computed")) {
    EXPECT_EQ(count.active, published["active_per_token_computed"].get<int64_t>());
  } else if (published.contains("computed_active_with_mtp")) {
    EXPECT_EQ(count.active, published["computed_active_with_mtp"].get<int64_t>());
  } else {
    EXPECT_EQ(count.active, count.total);  // dense: every parameter is active
  }
  EXPECT_EQ(graph.info.name, GetParam());
}

INSTANTIATE_TEST_SUITE_P(examples, PublishedParams, ::testing::ValuesIn(kModels),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

json tiny_llama() {
  return json{{"model_type", "llama"},       {"architectures", {"LlamaForCausalLM"}},
              {"hidden_size", 64},           {"num_hidden_layers", 2},
              {"num_attention_heads", 4},    {"num_key_value_heads", 2},
              {"intermediate_size", 128},    {"vocab_size", 100},
              {"max_position_embeddings", 256}};
}

TEST(graph_from_hf_config, tiny_llama_hand_computed) {
  const Graph g = graph_from_hf_config(tiny_llama(), "tiny.json");
  verify(g, "tiny.json");
  // head_dim = 64 / 4 = 16; kv width = 2 * 16 = 32.
  const int64_t embed = 100 * 64;
  const int64_t attention = 64 * 64 /*q*/ + 64 * 32 /*k*/ + 64 * 32 /*v*/ + 64 * 64 /*o*/;
  const int64_t mlp = 3 * 64 * 128;
  const int64_t norms = 2 * 64;
  const int64_t head = 64 /*final norm*/ + 64 * 100 /*lm_head*/;
  const int64_t correct = embed + 2 * (attention + mlp + norms) + head;
  EXPECT_EQ(correct, 86848);
  EXPECT_EQ(count_parameters(g).total, correct);
  EXPECT_EQ(count_parameters(g).active, correct);

  ASSERT_EQ(g.blocks.size(), 3u);
  EXPECT_EQ(g.blocks[0].name, "embed");
  EXPECT_FALSE(g.blocks[0].is_layer);
  EXPECT_EQ(g.blocks[1].repeat, 2);
  EXPECT_TRUE(g.blocks[1].is_layer);
  EXPECT_EQ(g.blocks[1].ops.front().inputs.front(), "x");
  EXPECT_EQ(g.blocks[1].ops.back().output, "out");
  EXPECT_EQ(g.blocks[2].ops.back().kind, OpKind::softmax_cross_entropy);
  EXPECT_EQ(g.info.num_kv_heads, 2);
  EXPECT_EQ(g.info.max_seq_len, 256);
  EXPECT_EQ(g.info.architecture, "LlamaForCausalLM");
  EXPECT_EQ(g.info.dim_sources.at('k'), "num_key_value_heads");
}

TEST(graph_from_hf_config, tied_embeddings_counted_once) {
  json c = tiny_llama();
  c["tie_word_embeddings"] = true;
  const Graph g = graph_from_hf_config(c, "tiny.json");
  verify(g, "tiny.json");
  EXPECT_EQ(count_parameters(g).total, 86848 - 64 * 100);
  ASSERT_EQ(g.tied_parameters.size(), 1u);
}

TEST(graph_from_hf_config, llama_layer_shape) {
  const Graph g = load_model(model_path("Llama-3.1-8B"));
  const Block& layer = g.blocks[1];
  EXPECT_EQ(layer.repeat, 32);
  std::vector<std::string> einsums;
  for (const auto& op : layer.ops)
    if (op.kind == OpKind::contraction) einsums.push_back(op.einsum);
  const std::vector<std::string> correct{"bsh,had->bsad", "bsh,hkd->bskd", "bsh,hkd->bskd", "bsad,adh->bsh",
                                         "bsh,hf->bsf",   "bsh,hf->bsf",   "bsf,fh->bsh"};
  EXPECT_EQ(einsums, correct);
  EXPECT_EQ(find_tensor(layer, "wk")->dims, (std::vector<Dim>{{'h', 4096}, {'k', 8}, {'d', 128}}));
  EXPECT_EQ(g.info.num_layers, 32);
  EXPECT_EQ(g.info.hidden_size, 4096);
  EXPECT_EQ(g.info.vocab_size, 128256);
}

TEST(graph_from_hf_config, moe_blocks_and_info) {
  const Graph ds = load_model(model_path("DeepSeek-V3"));
  ASSERT_EQ(ds.blocks.size(), 6u);  // embed, dense, moe, head, mtp_proj, mtp_layer
  EXPECT_EQ(ds.blocks[1].name, "dense_layer");
  EXPECT_EQ(ds.blocks[1].repeat, 3);
  EXPECT_EQ(ds.blocks[2].name, "moe_layer");
  EXPECT_EQ(ds.blocks[2].repeat, 58);
  EXPECT_TRUE(ds.info.has_mla);
  EXPECT_EQ(ds.info.num_kv_heads, 128);
  EXPECT_EQ(ds.info.num_experts, 256);
  EXPECT_EQ(ds.info.experts_per_token, 8);
  EXPECT_EQ(ds.info.dim_sources.at('e'), "n_routed_experts");

  const Graph mix = load_model(model_path("Mixtral-8x7B"));
  ASSERT_EQ(mix.blocks.size(), 3u);
  const TensorDecl* gate = find_tensor(mix.blocks[1], "expert_gate");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->dims[2], (Dim{'e', 2}));  // activations carry top_k experts per token
  EXPECT_EQ(find_tensor(mix.blocks[1], "w_expert_gate")->dims[0], (Dim{'e', 8}));
}

TEST(graph_from_hf_config, sliding_window_only_when_uniform) {
  const auto window = [](const std::string& model) {
    // The graph must outlive the loop: a range-for over load_model(...).blocks[1].ops reads a
    // destroyed temporary (AddressSanitizer: heap-use-after-free).
    const Graph graph = load_model(model_path(model));
    for (const auto& op : graph.blocks[1].ops)
      if (op.kind == OpKind::attention_core) return op.sliding_window;
    return int64_t(-1);
  };
  EXPECT_EQ(window("Phi-3-mini"), 2047);
  EXPECT_EQ(window("Mistral-7B-v0.3"), 0);  // "sliding_window": null
  EXPECT_EQ(window("Qwen2.5-7B"), 0);       // use_sliding_window false
  EXPECT_EQ(window("Gemma-2-9B"), 0);       // alternating layers: modelled as full attention
}

// ---------------------------------------------------------------------------------------------
// Bad inputs: each is an InputError naming the file and the field.

void expect_input_error(const json& config, const std::string& field, const std::string& fragment = {}) {
  try {
    graph_from_hf_config(config, "bad.json");
    FAIL() << "no error for field " << field;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.source(), "bad.json") << what;
    EXPECT_EQ(e.field(), field) << what;
    EXPECT_NE(what.find("bad.json"), std::string::npos) << what;
    if (!fragment.empty()) {
      EXPECT_NE(what.find(fragment), std::string::npos) << what;
    }
  }
}

TEST(graph_from_hf_config, rejects_bad_configs) {
  json c = tiny_llama();
  c["model_type"] = "bloom";
  expect_input_error(c, "model_type", "qwen3_moe");  // lists the supported ones
  c.erase("model_type");
  c["architectures"] = {"BloomForCausalLM"};
  expect_input_error(c, "architectures", "BloomForCausalLM");

  c = tiny_llama();
  c.erase("hidden_size");
  expect_input_error(c, "hidden_size", "missing");

  c = tiny_llama();
  c["num_attention_heads"] = 0;
  expect_input_error(c, "num_attention_heads", "must be positive");

  c = tiny_llama();
  c["hidden_size"] = "4096";
  expect_input_error(c, "hidden_size", "expected an integer");

  c = tiny_llama();
  c["num_attention_heads"] = 5;  // 64 % 5 != 0 and no head_dim
  c["num_key_value_heads"] = 5;
  expect_input_error(c, "num_attention_heads", "head_dim");
  c["head_dim"] = 16;  // explicit head_dim makes it valid (Gemma-2 style)
  EXPECT_NO_THROW(verify(graph_from_hf_config(c, "ok.json"), "ok.json"));

  c = tiny_llama();
  c["num_key_value_heads"] = 3;
  expect_input_error(c, "num_key_value_heads", "does not divide");

  c = tiny_llama();
  c["num_hidden_layers"] = json::array({2});
  expect_input_error(c, "num_hidden_layers", "expected an integer");

  c = tiny_llama();
  c["architectures"] = json::object();
  expect_input_error(c, "architectures", "array");

  expect_input_error(json::array({1, 2}), "", "object");

  c = tiny_llama();
  c["model_type"] = "mixtral";
  c["num_local_experts"] = 4;
  c["num_experts_per_tok"] = 8;
  expect_input_error(c, "num_experts_per_tok", "exceeds");
}

TEST(load_model, errors_name_file_and_field) {
  const std::string dir = ::testing::TempDir();
  const auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  const std::string malformed = write("malformed.json", "{\"model_type\": \"llama\",\n  \"hidden_size\": 64,,}");
  try {
    load_model(malformed);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_model(write("array.json", "[1, 2]")), InputError);
  EXPECT_THROW(load_model(write("nothing.json", "{\"hidden_size\": 4}")), InputError);
  EXPECT_THROW(load_model(dir + "/does-not-exist.json"), InputError);

  json huge = tiny_llama();  // 2^40 x 2^40 embedding table overflows int64
  huge["hidden_size"] = int64_t(1) << 40;
  huge["num_attention_heads"] = 1;
  huge["num_key_value_heads"] = 1;
  huge["vocab_size"] = int64_t(1) << 40;
  EXPECT_THROW(load_model(write("huge.json", huge.dump())), InputError);
}

TEST(load_model, name_is_file_stem) {
  const std::string path = ::testing::TempDir() + "/My-Tiny-Model.json";
  std::ofstream(path) << tiny_llama().dump();
  EXPECT_EQ(load_model(path).info.name, "My-Tiny-Model");
}

}  // namespace
}  // namespace mgt::ir
