// State-space and hybrid families (ir/src/hf_ssm_families.cpp): which layers become Mamba, attention,
// MLP or MoE blocks (Jamba's periods and offsets, Nemotron-H's hybrid_override_pattern), parameter
// counts of tiny configs worked out by hand, and the errors for what is not modelled.
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace mgt::ir {
namespace {

using nlohmann::json;

std::string model_path(const std::string& name) {
  return std::string(MGT_SOURCE_DIR) + "/examples/models/families/" + name + ".json";
}

int count_ops(const Block& b, OpKind kind) {
  int n = 0;
  for (const auto& op : b.ops) n += op.kind == kind;
  return n;
}

TEST(ssm_families, jamba_places_attention_and_experts_by_period_and_offset) {
  const Graph g = load_model(model_path("Jamba-v0.1"));  // attention 4 of 8, experts 1 of 2
  ASSERT_EQ(g.blocks.size(), 34u);                        // embed, 32 single-layer runs, head
  EXPECT_EQ(g.blocks[1].name, "mamba_mlp_layer_0");
  EXPECT_EQ(g.blocks[2].name, "mamba_moe_layer_1");
  EXPECT_EQ(g.blocks[5].name, "attn_mlp_layer_4");
  EXPECT_EQ(g.blocks[29].name, "attn_mlp_layer_28");
  EXPECT_EQ(count_ops(g.blocks[1], OpKind::ssm_scan), 1);
  EXPECT_EQ(count_ops(g.blocks[5], OpKind::attention_core), 1);
  EXPECT_EQ(count_ops(g.blocks[5], OpKind::rope), 0) << "Jamba's attention has no positional encoding";
  EXPECT_EQ(g.info.num_experts, 16);
}

TEST(ssm_families, nemotron_h_reads_one_layer_kind_per_pattern_character) {
  const Graph g = load_model(model_path("Nemotron-H-8B-Base-8K"));
  ASSERT_EQ(g.blocks.size(), 54u);  // 52 layers, none repeated back to back
  EXPECT_EQ(g.blocks[1].name, "mamba_layer_0");
  EXPECT_EQ(g.blocks[2].name, "mlp_layer_1");
  EXPECT_EQ(g.blocks[8].name, "attn_layer_7");  // "M-M-M-M*": the eighth character
  int mamba = 0, attention = 0, mlp = 0;
  for (const auto& b : g.blocks) {
    mamba += count_ops(b, OpKind::ssm_scan);
    attention += count_ops(b, OpKind::attention_core);
    mlp += b.name.rfind("mlp_layer", 0) == 0;
  }
  EXPECT_EQ(mamba, 24);
  EXPECT_EQ(attention, 4);
  EXPECT_EQ(mlp, 24);
  for (const auto& op : g.blocks[1].ops)
    if (op.kind == OpKind::ssm_scan) {
      EXPECT_EQ(op.chunk_size, 128);
    }
}

TEST(ssm_families, pure_mamba_stacks_are_one_block_and_found_by_architecture) {
  json c = json::parse(R"({"architectures": ["MambaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 3,
                           "vocab_size": 100})");
  const Graph g = graph_from_hf_config(c, "m.json");
  verify(g, "m.json");
  ASSERT_EQ(g.blocks.size(), 3u);
  EXPECT_EQ(g.blocks[1].name, "mamba_layer");
  EXPECT_EQ(g.blocks[1].repeat, 3);
  EXPECT_EQ(g.info.num_attention_heads, 0);
  // MambaConfig defaults: d = 2 x 64, N 16, conv 4, dt rank ceil(64 / 16) = 4, conv bias, no proj bias,
  // tied head. Per layer: 2 x 64 x 128 + 128 x 4 + 128 + 128 x (4 + 32) + 4 x 128 + 128 + 128 x 16 + 128
  // + 128 x 64 + 64.
  const int64_t layer = 2 * 64 * 128 + 128 * 4 + 128 + 128 * 36 + 4 * 128 + 128 + 128 * 16 + 128 + 128 * 64 + 64;
  EXPECT_EQ(count_parameters(g).total, 3 * layer + 100 * 64 + 64);
}

TEST(ssm_families, tiny_nemotron_h_counts_by_hand) {
  const json c{{"model_type", "nemotron_h"},
               {"hidden_size", 64},
               {"num_hidden_layers", 3},
               {"hybrid_override_pattern", "M*-"},
               {"num_attention_heads", 4},
               {"num_key_value_heads", 2},
               {"intermediate_size", 128},
               {"mamba_num_heads", 8},
               {"mamba_head_dim", 16},
               {"n_groups", 2},
               {"ssm_state_size", 8},
               {"vocab_size", 100}};
  const Graph g = graph_from_hf_config(c, "n.json");
  verify(g, "n.json");
  // Mamba-2: in_proj 64 x (2 x 128 + 2 x 2 x 8 + 8), conv (128 + 32) x 4 + bias 160, dt_bias, A, D 8 each,
  // gated norm 128, out_proj 128 x 64, norm 64.
  const int64_t mamba = 64 * (256 + 32 + 8) + 160 * 4 + 160 + 3 * 8 + 128 + 128 * 64 + 64;
  // Attention: q, o 64 x 64, k, v 64 x 32, norm. MLP: up, down 64 x 128 (not gated), norm.
  const int64_t attention = 2 * 64 * 64 + 2 * 64 * 32 + 64, mlp = 2 * 64 * 128 + 64;
  EXPECT_EQ(count_parameters(g).total, mamba + attention + mlp + 2 * 100 * 64 + 64);
}

TEST(ssm_families, unmodelled_layers_and_bad_patterns_name_the_field) {
  json c = json::parse(R"({"model_type": "nemotron_h", "hidden_size": 64, "num_hidden_layers": 2,
                           "hybrid_override_pattern": "ME", "num_attention_heads": 4, "intermediate_size": 128,
                           "mamba_num_heads": 8, "vocab_size": 100})");
  try {
    graph_from_hf_config(c, "n.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "hybrid_override_pattern");
    EXPECT_NE(std::string(e.what()).find("mgt.graph/1"), std::string::npos) << e.what();
  }
  c["hybrid_override_pattern"] = "M";
  EXPECT_THROW(graph_from_hf_config(c, "n.json"), InputError);  // 1 character for 2 layers
  json m = json::parse(R"({"model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 1, "num_heads": 6,
                           "n_groups": 4, "vocab_size": 100})");
  EXPECT_THROW(graph_from_hf_config(m, "m.json"), InputError);  // 4 groups do not divide 6 heads
}

TEST(ssm_families, families_still_missing_point_to_mgt_graph) {
  // bert, vit, t5 and clip (with its towers) are read by hf_encoder_families.cpp; SigLIP and Whisper
  // are not.
  for (const char* type : {"siglip", "siglip_vision_model", "whisper"}) {
    const json c{{"model_type", type}, {"hidden_size", 64}, {"num_hidden_layers", 2}, {"vocab_size", 100}};
    try {
      graph_from_hf_config(c, "enc.json");
      FAIL() << type;
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "model_type");
      EXPECT_NE(std::string(e.what()).find("mgt.graph/1"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("nemotron_h"), std::string::npos) << "the hint lists the SSM families";
      EXPECT_NE(std::string(e.what()).find("bert"), std::string::npos) << "and the encoder families";
      EXPECT_NE(std::string(e.what()).find("clip_vision_model"), std::string::npos) << "CLIP's towers too";
    }
  }
}

TEST(ssm_families, ssm_scan_round_trips_through_graph_json) {
  const Graph g = load_model(model_path("Mamba-Codestral-7B"));
  EXPECT_EQ(graph_from_json(json::parse(to_json(g).dump()), "roundtrip.json"), g);
}

}  // namespace
}  // namespace mgt::ir
