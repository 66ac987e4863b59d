// Encoder families (ir/src/hf_encoder_families.cpp: BERT, ViT, T5, CLIP) and DeepSeek-V3's multi-token
// prediction module (hf_config.cpp, add_mtp_blocks): layer structure and parameters of tiny configs
// counted by hand, and the DeepSeek-V3 total against the published 685B.
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/layout.hpp"
#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace mgt::ir {
namespace {

using nlohmann::json;

json tiny_bert(const std::string& architecture) {
  return json{{"model_type", "bert"},      {"architectures", {architecture}}, {"hidden_size", 64},
              {"num_hidden_layers", 2},    {"num_attention_heads", 4},        {"intermediate_size", 128},
              {"vocab_size", 100},         {"max_position_embeddings", 32},   {"type_vocab_size", 2},
              {"hidden_act", "gelu"}};
}

json tiny_vit() {
  return json{{"model_type", "vit"},       {"architectures", {"ViTForImageClassification"}},
              {"hidden_size", 64},         {"num_hidden_layers", 2},
              {"num_attention_heads", 4},  {"intermediate_size", 128},
              {"image_size", 32},          {"patch_size", 8},
              {"num_channels", 3},         {"num_labels", 10}};
}

Graph build(const json& config) {
  Graph g = graph_from_hf_config(config, "tiny.json");
  verify(g, "tiny.json");
  return g;
}

std::vector<std::string> op_names(const Block& b) {
  std::vector<std::string> out;
  for (const auto& op : b.ops) out.push_back(op.name);
  return out;
}

// One encoder layer, h 64, 4 heads of 16, f 128: q, k, v, o 64 x 64 with biases, up 64 x 128 + 128,
// down 128 x 64 + 64, two LayerNorms with biases.
constexpr int64_t kEncoderLayer = 4 * (64 * 64 + 64) + (64 * 128 + 128) + (128 * 64 + 64) + 2 * 2 * 64;

TEST(bert, post_ln_layers_attend_both_ways) {
  const Graph g = build(tiny_bert("BertForPreTraining"));
  ASSERT_EQ(g.blocks.size(), 3u);
  const Block& layer = g.blocks[1];
  EXPECT_EQ(layer.repeat, 2);
  // LayerNorm after each residual add: LN(x + attn(x)), LN(h1 + mlp(h1)); no norm before a sublayer.
  EXPECT_EQ(op_names(layer),
            (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "attention", "o_proj", "attn_residual",
                                      "attn_norm", "up_proj", "act", "down_proj", "mlp_residual", "mlp_norm"}));
  for (const auto& op : layer.ops) {
    if (op.kind == OpKind::attention_core) { EXPECT_FALSE(op.causal); }
  }
  EXPECT_EQ(layer.ops.back().output, "out");
  EXPECT_EQ(layer.ops.back().norm, NormKind::layer);
}

TEST(bert, parameters_by_hand_with_and_without_next_sentence_head) {
  // Embeddings: words 100 x 64, positions 32 x 64, segments 2 x 64, LayerNorm 2 x 64.
  const int64_t embed = 100 * 64 + 32 * 64 + 2 * 64 + 2 * 64;
  // MLM head: transform 64 x 64 + 64, LayerNorm 2 x 64, decoder bias 100 (weight tied to the words).
  const int64_t mlm = 64 * 64 + 64 + 2 * 64 + 100;
  // BertForPreTraining adds the pooler 64 x 64 + 64 and the next-sentence classifier 64 x 2 + 2.
  const int64_t nsp = 64 * 64 + 64 + 64 * 2 + 2;
  EXPECT_EQ(count_parameters(build(tiny_bert("BertForMaskedLM"))).total, embed + 2 * kEncoderLayer + mlm);
  EXPECT_EQ(count_parameters(build(tiny_bert("BertForPreTraining"))).total, embed + 2 * kEncoderLayer + mlm + nsp);
  const Graph g = build(tiny_bert("BertForPreTraining"));
  ASSERT_EQ(g.tied_parameters.size(), 1u);
  EXPECT_EQ(g.tied_parameters[0], (std::pair<std::string, std::string>{"embed.wte", "head.wte"}));
  int losses = 0;
  for (const auto& op : g.blocks.back().ops) losses += op.kind == OpKind::softmax_cross_entropy;
  EXPECT_EQ(losses, 2);  // MLM and NSP
  EXPECT_EQ(g.info.max_seq_len, 32);
}

TEST(vit, patch_embedding_is_a_gemm_over_patches_with_a_class_token) {
  const Graph g = build(tiny_vit());
  const Block& embed = g.blocks.front();
  // 32 / 8 = 4 x 4 patches + the class token: 17 positions; 3 x 8 x 8 = 192 pixels per patch.
  EXPECT_EQ(find_tensor(embed, "x")->dims, (std::vector<Dim>{{'b', 0}, {'s', 0}, {'c', 192}}));
  EXPECT_EQ(embed.ops[0].einsum, "bsc,ch,h->bsh");
  EXPECT_EQ(find_tensor(embed, "wpe")->dims, (std::vector<Dim>{{'p', 17}, {'h', 64}}));
  EXPECT_EQ(g.info.max_seq_len, 17);
  // Pre-LN layers, no causal mask.
  const Block& layer = g.blocks[1];
  EXPECT_EQ(layer.ops[0].kind, OpKind::norm);
  for (const auto& op : layer.ops) {
    if (op.kind == OpKind::attention_core) { EXPECT_FALSE(op.causal); }
  }
  // Patch GEMM 192 x 64 + 64, class token 64, positions 17 x 64; final LayerNorm 2 x 64; classifier
  // 64 x 10 + 10.
  const int64_t embed_params = 192 * 64 + 64 + 64 + 17 * 64;
  EXPECT_EQ(count_parameters(g).total, embed_params + 2 * kEncoderLayer + 2 * 64 + 64 * 10 + 10);
  EXPECT_EQ(g.info.vocab_size, 10);
}

TEST(vit, refuses_a_checkpoint_without_a_classifier_and_a_bad_patch) {
  json no_head = tiny_vit();
  no_head["architectures"] = {"ViTModel"};
  try {
    graph_from_hf_config(no_head, "vit.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ViTForImageClassification"), std::string::npos) << e.what();
  }
  json bad = tiny_vit();
  bad["patch_size"] = 7;
  EXPECT_THROW(graph_from_hf_config(bad, "vit.json"), InputError);
  json no_labels = tiny_vit();
  no_labels.erase("num_labels");
  EXPECT_THROW(graph_from_hf_config(no_labels, "vit.json"), InputError);
}

json tiny_t5() {
  return json{{"model_type", "t5"},  {"d_model", 64},         {"d_kv", 8},
              {"num_heads", 4},      {"d_ff", 128},           {"num_layers", 2},
              {"num_decoder_layers", 2}, {"vocab_size", 100}, {"relative_attention_num_buckets", 8},
              {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}};
}

TEST(t5, encoder_decoder_blocks_with_cross_attention_reading_memory) {
  const Graph g = build(tiny_t5());
  std::vector<std::string> names;
  for (const auto& b : g.blocks) names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string>{"embed", "encoder_layer_0", "encoder_layer", "decoder_embed",
                                             "decoder_layer_0", "decoder_layer", "head"}));
  EXPECT_EQ(num_layers(g), 4);
  EXPECT_FALSE(g.blocks[3].is_layer);
  // Encoder self-attention attends both ways; the decoder's self-attention is causal and its
  // cross-attention, keys and values projected from "memory", is not.
  for (const auto& op : g.blocks[2].ops) {
    if (op.kind == OpKind::attention_core) { EXPECT_FALSE(op.causal); }
  }
  const Block& dec = g.blocks[5];
  std::vector<std::pair<std::string, bool>> cores;
  for (const auto& op : dec.ops)
    if (op.kind == OpKind::attention_core) cores.push_back({op.name, op.causal});
  EXPECT_EQ(cores, (std::vector<std::pair<std::string, bool>>{{"attention", true}, {"cross_attention", false}}));
  for (const auto& op : dec.ops)
    if (op.name == "cross_k_proj" || op.name == "cross_v_proj") { EXPECT_EQ(op.inputs[0], "memory"); }
  // d_kv 8 x 4 heads = 32: the projections are 64 x 32, not d_model square.
  EXPECT_EQ(find_tensor(dec, "w_cross_k")->dims, (std::vector<Dim>{{'h', 64}, {'k', 4}, {'d', 8}}));
  EXPECT_EQ(g.tied_parameters, (std::vector<std::pair<std::string, std::string>>{{"embed.wte", "decoder_embed.wte"}}));
}

TEST(t5, parameters_by_hand) {
  // Attention 4 x 64 x 32, gated-GELU MLP 3 x 64 x 128, RMSNorms 64 each, no biases.
  const int64_t attention = 4 * 64 * 32, mlp = 3 * 64 * 128;
  const int64_t encoder_layer = attention + mlp + 2 * 64;
  const int64_t decoder_layer = encoder_layer + attention + 64;  // cross-attention and its norm
  const int64_t position_bias = 8 * 4;                           // buckets x heads, first layer of each stack
  // Shared embedding 100 x 64; encoder final norm; decoder final norm and untied lm_head 64 x 100.
  const int64_t expected = 100 * 64 + 2 * encoder_layer + position_bias + 64 + 2 * decoder_layer + position_bias +
                           64 + 64 * 100;
  EXPECT_EQ(count_parameters(build(tiny_t5())).total, expected);
  json relu = tiny_t5();
  relu["feed_forward_proj"] = "relu";  // T5 1.0: wi, wo only
  EXPECT_EQ(count_parameters(build(relu)).total, expected - 4 * 64 * 128);
  json bad = tiny_t5();
  bad["feed_forward_proj"] = "gated-swish";
  EXPECT_THROW(graph_from_hf_config(bad, "t5.json"), InputError);
}

// CLIP: text tower h 32, 4 heads of 8, f 64, 100 tokens, 16 positions; vision tower h 64, 4 heads of 16,
// f 128, 32 x 32 images in 8 x 8 patches (16 patches + the class token); shared space 16.
json tiny_clip() {
  return json{{"model_type", "clip"},
              {"architectures", {"CLIPModel"}},
              {"projection_dim", 16},
              {"text_config",
               {{"hidden_size", 32}, {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"intermediate_size", 64},
                {"vocab_size", 100}, {"max_position_embeddings", 16}, {"hidden_act", "quick_gelu"}}},
              {"vision_config",
               {{"hidden_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"intermediate_size", 128},
                {"image_size", 32}, {"patch_size", 8}, {"num_channels", 3}, {"hidden_act", "quick_gelu"}}}};
}

// A CLIP tower layer of width h and MLP f: q, k, v, o h^2 + h each, fc1 h x f + f, fc2 f x h + h, two
// LayerNorms of 2h.
constexpr int64_t clip_layer(int64_t h, int64_t f) { return 4 * (h * h + h) + (h * f + f) + (f * h + h) + 4 * h; }

TEST(clip, two_towers_in_sequence_the_text_causal_the_vision_both_ways) {
  const Graph g = build(tiny_clip());
  std::vector<std::string> names;
  for (const auto& b : g.blocks) names.push_back(b.name + "x" + std::to_string(b.repeat));
  EXPECT_EQ(names, (std::vector<std::string>{"vision_embedx1", "vision_layerx2", "text_embedx1", "text_layerx2",
                                             "headx1"}));
  EXPECT_EQ(num_layers(g), 4);
  const auto causal_of = [](const Block& b) {
    for (const auto& op : b.ops)
      if (op.kind == OpKind::attention_core) return op.causal;
    return true;
  };
  EXPECT_FALSE(causal_of(g.blocks[1]));
  EXPECT_TRUE(causal_of(g.blocks[3]));
  // Pre-LN layers with quick_gelu priced as GELU.
  EXPECT_EQ(g.blocks[3].ops[0].kind, OpKind::norm);
  for (const auto& op : g.blocks[3].ops)
    if (op.kind == OpKind::activation) { EXPECT_EQ(op.activation, ActivationKind::gelu); }
  // The vision embedding: patch GEMM without a bias, then pre_layrnorm.
  const Block& embed = g.blocks[0];
  EXPECT_EQ(embed.ops[0].einsum, "bsc,ch->bsh");
  EXPECT_EQ(embed.ops.back().name, "pre_layrnorm");
  // The bridge maps the vision output (h 64) to the image embeddings and starts the text tower (h 32).
  const Block& bridge = g.blocks[2];
  EXPECT_EQ(find_tensor(bridge, "x")->dims, (std::vector<Dim>{{'b', 0}, {'s', 0}, {'h', 64}}));
  EXPECT_EQ(find_tensor(bridge, "w_visual_projection")->dims, (std::vector<Dim>{{'h', 64}, {'z', 16}}));
  EXPECT_EQ(find_tensor(bridge, "out")->dims, (std::vector<Dim>{{'b', 0}, {'s', 0}, {'h', 32}}));
  // The head: text projection, similarity with the image embeddings ("memory"), logit_scale, loss.
  std::vector<std::string> head_ops;
  for (const auto& op : g.blocks[4].ops) head_ops.push_back(op.name);
  EXPECT_EQ(head_ops, (std::vector<std::string>{"final_layer_norm", "text_projection", "similarity",
                                                "logit_scale_mul", "loss"}));
  // One sequence length for both towers: the longer, 17 vision tokens against 16 text positions.
  EXPECT_EQ(g.info.max_seq_len, 17);
}

TEST(clip, parameters_by_hand) {
  // Text: tokens 100 x 32, positions 16 x 32, 2 layers, final LayerNorm 2 x 32.
  const int64_t text = 100 * 32 + 16 * 32 + 2 * clip_layer(32, 64) + 2 * 32;
  // Vision: class token 64, patch GEMM 3 x 8 x 8 x 64 (no bias), positions 17 x 64, pre_layrnorm 2 x 64,
  // 2 layers, post_layernorm 2 x 64.
  const int64_t vision = 64 + 192 * 64 + 17 * 64 + 2 * 64 + 2 * clip_layer(64, 128) + 2 * 64;
  // visual_projection 64 x 16, text_projection 32 x 16 (no biases), logit_scale 1.
  const int64_t heads = 64 * 16 + 32 * 16 + 1;
  EXPECT_EQ(count_parameters(build(tiny_clip())).total, text + vision + heads);
}

TEST(clip, clip_vit_large_patch14_matches_its_published_total) {
  // openai/clip-vit-large-patch14's sizes (its config.json): text h 768, 12 layers of 12 heads, f 3072, 49408
  // tokens, 77 positions; vision h 1024, 24 layers of 16 heads, f 4096, 224 / 14 = 16^2 patches; projection 768.
  json c = {{"model_type", "clip"}, {"projection_dim", 768}};
  c["text_config"] = {{"hidden_size", 768}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
                      {"intermediate_size", 3072}, {"vocab_size", 49408}, {"max_position_embeddings", 77}};
  c["vision_config"] = {{"hidden_size", 1024}, {"num_hidden_layers", 24}, {"num_attention_heads", 16},
                        {"intermediate_size", 4096}, {"image_size", 224}, {"patch_size", 14}};
  const int64_t text = (49408 + 77) * 768 + 12 * clip_layer(768, 3072) + 2 * 768;
  const int64_t vision = 1024 + 3 * 14 * 14 * 1024 + 257 * 1024 + 2 * 1024 + 24 * clip_layer(1024, 4096) + 2 * 1024;
  const int64_t total = text + vision + 1024 * 768 + 768 * 768 + 1;
  EXPECT_EQ(count_parameters(build(c)).total, total);
  EXPECT_EQ(total, 427616513);  // the Hub's safetensors count for openai/clip-vit-large-patch14
}

TEST(clip, a_tower_alone_with_and_without_its_projection) {
  json vision = tiny_clip()["vision_config"];
  vision["model_type"] = "clip_vision_model";
  vision["architectures"] = {"CLIPVisionModel"};
  vision["projection_dim"] = 16;
  const int64_t tower = 64 + 192 * 64 + 17 * 64 + 2 * 64 + 2 * clip_layer(64, 128) + 2 * 64;
  const Graph alone = build(vision);
  EXPECT_EQ(count_parameters(alone).total, tower);
  for (const auto& op : alone.blocks.back().ops) { EXPECT_NE(op.kind, OpKind::softmax_cross_entropy); }
  vision["architectures"] = {"CLIPVisionModelWithProjection"};
  EXPECT_EQ(count_parameters(build(vision)).total, tower + 64 * 16);
  json text = tiny_clip()["text_config"];
  text["model_type"] = "clip_text_model";
  EXPECT_EQ(count_parameters(build(text)).total, 100 * 32 + 16 * 32 + 2 * clip_layer(32, 64) + 2 * 32);
}

TEST(clip, bad_towers_name_the_config_and_field) {
  json c = tiny_clip();
  c["vision_config"]["patch_size"] = 7;
  try {
    graph_from_hf_config(c, "clip.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("vision_config"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("patch_size"), std::string::npos) << e.what();
  }
  c = tiny_clip();
  c["text_config"]["hidden_act"] = "relu";
  EXPECT_THROW(graph_from_hf_config(c, "clip.json"), InputError);
  c = tiny_clip();
  c["text_config"] = 3;
  EXPECT_THROW(graph_from_hf_config(c, "clip.json"), InputError);
}

TEST(multi_token_prediction, deepseek_v3_counts_the_module_once_with_shared_embedding_and_head) {
  const Graph g = load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/DeepSeek-V3.json");
  ASSERT_EQ(g.blocks.size(), 6u);
  const Block& proj = g.blocks[4];
  const Block& mtp = g.blocks[5];
  EXPECT_EQ(proj.name, "mtp_proj");
  EXPECT_EQ(mtp.name, "mtp_layer");
  EXPECT_FALSE(proj.is_layer);  // on the last pipeline stage; the 61 main layers still split the pipeline
  EXPECT_FALSE(mtp.is_layer);
  EXPECT_EQ(num_layers(g), 61);
  // h = 7168. eh_proj 2h -> h (two h x h halves), enorm and hnorm h each.
  const int64_t h = 7168;
  // The MTP layer is a MoE layer (layer 61 >= first_k_dense_replace 3), worked out by hand:
  // MLA q_a 7168 x 1536, q_a_norm 1536, q_b 1536 x 128 x 192, kv_a 7168 x 512, k_pe 7168 x 64, kv_a_norm 512,
  // k_b, v_b 512 x 128 x 128 each, o 128 x 128 x 7168;
  const int64_t mla = 7168LL * 1536 + 1536 + 1536LL * 128 * 192 + 7168LL * 512 + 7168LL * 64 + 512 +
                      2 * 512LL * 128 * 128 + 128LL * 128 * 7168;
  // router 7168 x 256 + bias 256, 256 experts x 3 x 7168 x 2048, shared 3 x 7168 x 2048, 2 norms;
  const int64_t moe = 7168LL * 256 + 256 + 256LL * 3 * 7168 * 2048 + 3LL * 7168 * 2048 + 2 * h;
  // plus the shared head's own norm h.
  const int64_t mtp_params = 2 * h * h + 2 * h + mla + moe + h;
  const int64_t main_model = 671026419200;  // DeepSeek-V3.json computed_main_model
  const ParamCount count = count_parameters(g);
  EXPECT_EQ(count.total, main_model + mtp_params);
  // DeepSeek-V3 README: "685B, which includes 671B of the Main Model weights and 14B of the MTP Module
  // weights". The checkpoint stores the MTP's embedding and head again (model.layers.61.embed_tokens,
  // shared_head.head: 2 x 129280 x 7168); with those copies the total is the published 685B within
  // the 0.1 % the issue asks for (684.49B), and the module the published 14B = 685B - 671B, each
  // rounded (so within 1B).
  const int64_t stored_copies = 2 * 129280LL * h;
  EXPECT_EQ(count.total + stored_copies, 684489845504);  // DeepSeek-V3.json computed_with_mtp
  EXPECT_NEAR(double(count.total + stored_copies) / 1e9, 685.0, 685.0 * 0.001);
  EXPECT_NEAR(double(mtp_params + stored_copies) / 1e9, 14.0, 1.0);
  // The embedding and head are the main model's: tied, so one buffer and one gradient each.
  EXPECT_NE(std::find(g.tied_parameters.begin(), g.tied_parameters.end(),
                      std::pair<std::string, std::string>{"embed.wte", "mtp_proj.wte"}),
            g.tied_parameters.end());
  EXPECT_NE(std::find(g.tied_parameters.begin(), g.tied_parameters.end(),
                      std::pair<std::string, std::string>{"head.w_lm_head", "mtp_layer.w_lm_head"}),
            g.tied_parameters.end());
}

TEST(multi_token_prediction, absent_without_num_nextn_predict_layers_and_bounded) {
  json c = json::parse(R"({"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "moe_intermediate_size": 32, "vocab_size": 100,
    "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "n_routed_experts": 4,
    "num_experts_per_tok": 2, "first_k_dense_replace": 1})");
  EXPECT_EQ(build(c).blocks.size(), 4u);  // embed, dense, moe, head
  c["num_nextn_predict_layers"] = 2;
  const Graph two = build(c);
  ASSERT_EQ(two.blocks.size(), 8u);
  EXPECT_EQ(two.blocks[4].name, "mtp_proj_0");
  EXPECT_EQ(two.blocks[7].name, "mtp_layer_1");
  c["num_nextn_predict_layers"] = 3;
  EXPECT_THROW(graph_from_hf_config(c, "ds.json"), InputError);
}

}  // namespace
}  // namespace mgt::ir
