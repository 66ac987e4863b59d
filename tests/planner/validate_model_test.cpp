// `validate`'s model reading (planner/src/validate_model.cpp): what a row's free-text and optional
// model fields become in the graph, with the assumptions said (attention patterns, the clamped gated
// unit, multi-token prediction).
#include "mgt/ir/graph.hpp"
#include "mgt/ir/layout.hpp"
#include "mgt/planner/validate.hpp"
#include "validation_rows.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace {

using mgt::plan::ValidationSource;
using mgt::test::any_assumption_has;
using mgt::test::gpt_row;
using mgt::test::llama_row;
using mgt::test::source_with;
using nlohmann::json;

/// The window of each layer block's attention (0: full), in layer order.
std::vector<int64_t> layer_windows(const mgt::ir::Graph& g) {
  std::vector<int64_t> out;
  for (const auto& b : g.blocks)
    for (const auto& op : b.ops)
      if (op.kind == mgt::ir::OpKind::attention_core)
        for (int64_t r = 0; r < b.repeat; ++r) out.push_back(op.sliding_window);
  return out;
}


TEST(Validation, AttentionPatternGivesTheRowsSlidingWindowPerLayer) {
  json row = llama_row();
  row["model"]["num_layers"] = 4;
  row["model"]["attention_pattern"] = "alternating full / sliding-window(128) attention, attention sinks";
  ValidationSource src = source_with({row});
  auto s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(s.shape.sliding_window, 128);
  EXPECT_TRUE(s.shape.window_alternates);
  EXPECT_EQ(mgt::plan::hf_config(s.shape, 4096)["model_type"], "mistral");  // the llama layer with windows
  EXPECT_EQ(layer_windows(s.graph), (std::vector<int64_t>{128, 0, 128, 0}));
  EXPECT_TRUE(any_assumption_has(s.assumptions, "attention sinks not priced"));

  row["model"]["attention_pattern"] = "sliding window 4096 on every layer";
  src = source_with({row});
  s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(layer_windows(s.graph), (std::vector<int64_t>{4096, 4096, 4096, 4096}));

  // No size: full attention, said so. A plain-MLP (gpt2) model has no window: full, said so.
  row["model"]["attention_pattern"] = "sliding-window attention (size not given)";
  src = source_with({row});
  s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(s.shape.sliding_window, 0);
  EXPECT_EQ(layer_windows(s.graph), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_TRUE(any_assumption_has(s.assumptions, "states no window size"));
  json gpt = gpt_row();
  gpt["model"]["attention_pattern"] = "alternating sliding-window(256)";
  src = source_with({gpt});
  s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(s.shape.sliding_window, 0);
  EXPECT_TRUE(any_assumption_has(s.assumptions, "gpt2 family has no sliding window"));
}

// A plain MLP with grouped-query attention (Nemotron-4 340B: squared ReLU, LayerNorm, 96 heads of 192,
// 8 K/V groups) keeps its K/V groups (the starcoder2 layer, no biases), where gpt2 would give every head
// its own K and V. Per layer: q and o 2 x h x h, k and v 2 x h x 8 x 192, up and down 2 x h x f, two
// LayerNorms 2 x 2h.
TEST(Validation, PlainMlpWithGroupedQueryAttentionKeepsItsKvGroups) {
  json row = gpt_row();
  row["model"]["num_layers"] = 2;
  row["model"]["hidden_size"] = 1536;
  row["model"]["num_attention_heads"] = 8;
  row["model"]["num_kv_heads"] = 2;
  row["model"]["head_dim"] = 192;
  row["model"]["ffn_hidden_size"] = 6144;
  row["model"]["activation"] = "squared_relu";
  row["model"]["normalization"] = "layernorm1p";
  ValidationSource src = source_with({row});
  const auto s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(s.shape.family, "starcoder2");
  EXPECT_EQ(s.shape.kv_heads, 2);
  EXPECT_TRUE(any_assumption_has(s.assumptions, "2 K/V heads, no biases"));
  EXPECT_TRUE(any_assumption_has(s.assumptions, "\"squared_relu\" MLP modelled as GeLU"));
  const int64_t h = 1536, f = 6144, kv = 2 * 192;
  const int64_t per_layer = 2 * h * h + 2 * h * kv + 2 * h * f + 2 * 2 * h;
  int64_t layer_params = 0;
  for (const auto& b : s.graph.blocks) {
    if (!b.is_layer) continue;
    int64_t one = 0;
    for (const auto& t : b.tensors)
      if (t.is_parameter) {
        int64_t n = 1;
        for (const auto& d : t.dims) n *= d.size;
        one += n;
      }
    layer_params += one * b.repeat;
  }
  EXPECT_EQ(layer_params, 2 * per_layer);
}

TEST(Validation, ClampedActivationClampsTheGatedUnit) {
  json row = llama_row();
  row["model"]["activation"] = "swiglu (clamped)";
  ValidationSource src = source_with({row});
  auto s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_TRUE(s.shape.glu_clamped);
  EXPECT_EQ(mgt::plan::hf_config(s.shape, 4096)["swiglu_limit"], 7.0);
  EXPECT_TRUE(any_assumption_has(s.assumptions, "inputs of the gated unit clamped"));
  int clamped = 0;
  for (const auto& block : s.graph.blocks)
    for (const auto& op : block.ops) clamped += op.clamp_limit == 7.0 ? int(block.repeat) : 0;
  EXPECT_EQ(clamped, row["model"]["num_layers"].get<int>());  // every layer's gated unit
  row["model"]["activation"] = "swiglu";
  src = source_with({row});
  s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_FALSE(s.shape.glu_clamped);
  EXPECT_FALSE(mgt::plan::hf_config(s.shape, 4096).contains("swiglu_limit"));
}

// Routed experts with a clamped gated unit are GPT-OSS's architecture (transformers' gpt_oss): the
// same row without the clamp is a mixtral graph, and the two differ by exactly GPT-OSS's biases,
// counted here by hand from its modelling code.
TEST(Validation, ClampedExpertsAreGptOssWithItsBiases) {
  json row = llama_row();
  row["model"]["type"] = "moe";
  row["model"]["num_layers"] = 2;
  row["model"]["hidden_size"] = 256;
  row["model"]["num_attention_heads"] = 8;
  row["model"]["num_kv_heads"] = 2;
  row["model"]["head_dim"] = 64;
  row["model"]["moe"] = {{"num_experts", 8}, {"top_k", 2}, {"moe_ffn_hidden_size", 512}};
  row["model"]["attention_pattern"] = "alternating full / sliding-window(128) attention, attention sinks";
  row["model"]["activation"] = "swiglu";
  ValidationSource src = source_with({row});
  const auto plain = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(mgt::plan::hf_config(plain.shape, 4096)["model_type"], "mixtral");

  row["model"]["activation"] = "swiglu (clamped)";
  src = source_with({row});
  const auto oss = mgt::plan::setup_row(src, src.rows[0]);
  const json config = mgt::plan::hf_config(oss.shape, 4096);
  EXPECT_EQ(config["model_type"], "gpt_oss");
  EXPECT_EQ(config["attention_bias"], true);
  EXPECT_TRUE(any_assumption_has(oss.assumptions, "HF model_type gpt_oss"));
  EXPECT_EQ(layer_windows(oss.graph), (std::vector<int64_t>{128, 0}));  // the row's windows kept

  // Per layer: q, k, v, o biases (8·64 + 2·2·64 + 256), the router's (8), each expert's gate and up
  // (2·512) and down (256) biases.
  const int64_t per_layer = (8 * 64 + 2 * 2 * 64 + 256) + 8 + 8 * (2 * 512 + 256);
  const auto with = mgt::ir::count_parameters(oss.graph), without = mgt::ir::count_parameters(plain.graph);
  EXPECT_EQ(with.total - without.total, 2 * per_layer);
  // Active: top_k of the 8 experts' biases.
  EXPECT_EQ(with.active - without.active, 2 * ((8 * 64 + 2 * 2 * 64 + 256) + 8 + 2 * (2 * 512 + 256)));
}

TEST(Validation, MultiTokenPredictionIsBuiltUnlessTheLabelSwitchesItOff) {
  json row = llama_row();
  row["model"]["type"] = "moe";
  row["model"]["attention"] = "mla";
  row["model"]["moe"] = {{"num_experts", 8}, {"top_k", 2}, {"moe_ffn_hidden_size", 1024}, {"shared_experts", 1},
                         {"shared_expert_ffn_hidden_size", 1024}, {"first_k_dense_layers", 1}};
  row["model"]["mla"] = {{"q_lora_rank", 512}, {"kv_lora_rank", 256}, {"qk_nope_head_dim", 64}, {"qk_rope_head_dim", 32},
                         {"v_head_dim", 64}};
  row["model"]["mtp_layers"] = 1;
  ValidationSource src = source_with({row});
  auto s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(mgt::ir::mtp_depths(s.graph), 1);
  // "DeepSeekV3 (w/o MTP)": the rows that switched it off say so in their label only.
  row["model_label_in_source"] = "DeepSeekV3 (w/o MTP)";
  src = source_with({row});
  s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(mgt::ir::mtp_depths(s.graph), 0);
  EXPECT_TRUE(any_assumption_has(s.assumptions, "multi-token prediction off"));
}

}  // namespace
