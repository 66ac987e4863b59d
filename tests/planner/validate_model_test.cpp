// `validate`'s model reading (planner/src/validate_model.cpp): what a row's free-text and optional
// model fields become in the graph, with the assumptions said (attention patterns, the clamped gated
// unit, multi-token prediction).
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
