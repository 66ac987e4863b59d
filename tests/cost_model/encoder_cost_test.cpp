// The block kinds of encoders and of multi-token prediction in the cost model: a bidirectional
// (BERT) layer, a ViT patch embedding and DeepSeek-V3's MTP projection, each costed on a tiny config
// built by the Hugging Face frontend, with FLOPs and saved activations per token worked out here.
// Conventions (docs/cost-model.md): model FLOPs = 3 x forward (backward is twice the forward),
// 2 FLOPs per multiply-add, biases and elementwise ops not counted; attention 2 x s_kv x heads x
// (d_qk + d_v) per query, halved only under a causal mask; saved activations in bf16 plus the
// attention's fp32 log-sum-exp per head.
#include "mgt/cost_model/layer_cost.hpp"

#include "hf_tiny.hpp"
#include "round_hardware.hpp"

#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace mgt::cost {
namespace {

using nlohmann::json;

constexpr int64_t kSeq = 512;

ShardContext context() { return hf_tiny::context(kSeq); }
using hf_tiny::build;

BlockCost cost_of(const ir::Block& b) { return block_cost(b, context(), round::cluster(), round::params()); }

// h 64, 4 heads of 16, f 128.
json tiny_bert() {
  return json{{"model_type", "bert"},   {"hidden_size", 64},       {"num_hidden_layers", 1},
              {"num_attention_heads", 4}, {"intermediate_size", 128}, {"vocab_size", 100},
              {"max_position_embeddings", kSeq}};
}

TEST(encoder_layer, bidirectional_attention_flops_and_memory_per_token_by_hand) {
  const BlockCost c = cost_of(build(tiny_bert()).blocks.at(1));
  // Forward per token: q, k, v, o 4 x 2 x 64 x 64, up and down 2 x 2 x 64 x 128 = 65536; attention over
  // all 512 keys (no mask): 2 x 512 x 4 x (16 + 16) = 131072 per token.
  const double matmul = 4 * 2.0 * 64 * 64 + 2 * 2.0 * 64 * 128;
  const double attention = 2.0 * kSeq * 4 * (16 + 16);
  EXPECT_DOUBLE_EQ(c.model_flops, 3.0 * (matmul + attention) * kSeq);
  // Saved for backward, elements per token: x (q/k/v input) 64, q, k, v 64 each, attention output 64,
  // the two residual sums (LayerNorm inputs) 64 each, h1 (up input) 64, up (GELU input) 128, GELU out
  // (down input) 128 = 768 in bf16; plus the log-sum-exp, 4 heads x 4 bytes.
  EXPECT_EQ(c.saved_bytes_none, (768 * 2 + 16) * kSeq);
  EXPECT_EQ(c.param_elements_total, 4 * (64 * 64 + 64) + 64 * 128 + 128 + 128 * 64 + 64 + 4 * 64);
}

TEST(encoder_layer, the_same_layer_under_a_causal_mask_prices_half_the_attention) {
  ir::Block layer = build(tiny_bert()).blocks.at(1);
  const double bidirectional = cost_of(layer).model_flops;
  for (auto& op : layer.ops)
    if (op.kind == ir::OpKind::attention_core) op.causal = true;
  const double causal = cost_of(layer).model_flops;
  EXPECT_DOUBLE_EQ(bidirectional - causal, 3.0 * (2.0 * kSeq * 4 * 32 / 2) * kSeq);
}

TEST(patch_embedding, gemm_over_patch_pixels_per_token_by_hand) {
  // 32 x 32 images in 8 x 8 patches of 3 channels: 192 pixels per patch, 17 tokens.
  const json vit = {{"model_type", "vit"},     {"architectures", {"ViTForImageClassification"}},
                    {"hidden_size", 64},       {"num_hidden_layers", 1},
                    {"num_attention_heads", 4}, {"intermediate_size", 128},
                    {"image_size", 32},        {"patch_size", 8},
                    {"num_channels", 3},       {"num_labels", 10}};
  const ir::Graph g = build(vit);
  ShardContext ctx = context();
  ctx.seq_len = 17;
  const BlockCost c = block_cost(g.blocks.front(), ctx, round::cluster(), round::params());
  // Forward per token: 2 x 192 x 64 (the Conv2d with stride = kernel is this GEMM); lookups are free.
  EXPECT_DOUBLE_EQ(c.model_flops, 3.0 * 2 * 192 * 64 * 17);
  // Saved: the pixels the weight gradient needs, 192 bf16 per token.
  EXPECT_EQ(c.saved_bytes_none, 192 * 2 * 17);
  // Patch weight and bias, position table 17 x 64, class token 64.
  EXPECT_EQ(c.param_elements_total, 192 * 64 + 64 + 17 * 64 + 64);
}

TEST(cross_attention, t5_decoder_layer_flops_and_memory_per_token_by_hand) {
  // h 64, 4 heads of 16, f 128 gated-GELU; encoder and decoder both s = 512 tokens.
  const json t5 = {{"model_type", "t5"}, {"d_model", 64},  {"d_kv", 16},      {"num_heads", 4},
                   {"d_ff", 128},        {"num_layers", 2}, {"vocab_size", 100}, {"feed_forward_proj", "gated-gelu"}};
  const ir::Graph g = build(t5);
  const ir::Block& dec = g.blocks.at(5);
  ASSERT_EQ(dec.name, "decoder_layer");
  const BlockCost c = cost_of(dec);
  // Forward per token: self q, k, v, o 4 x 2 x 64 x 64; cross q, o 2 x 2 x 64 x 64 and cross k, v over the
  // encoder's tokens 2 x 2 x 64 x 64; MLP 3 x 2 x 64 x 128. Attention: causal self 2 x 512 x 4 x 32 / 2,
  // cross over all 512 encoder tokens 2 x 512 x 4 x 32.
  const double matmul = 4 * 2.0 * 64 * 64 + 2 * 2.0 * 64 * 64 + 2 * 2.0 * 64 * 64 + 3 * 2.0 * 64 * 128;
  const double attention = 2.0 * kSeq * 4 * 32 / 2 + 2.0 * kSeq * 4 * 32;
  EXPECT_DOUBLE_EQ(c.model_flops, 3.0 * (matmul + attention) * kSeq);
  // Saved elements per token: x, attn_in, q, k, v, attn, h1, cross_attn_in, memory, cross q, k, v,
  // cross_attn, h2, mlp_in (64 each: 15 x 64) and gate, up, GELU out (128 each) = 1344 in bf16; plus two
  // log-sum-exps of 4 heads x 4 bytes.
  EXPECT_EQ(c.saved_bytes_none, (1344 * 2 + 2 * 16) * kSeq);
  EXPECT_EQ(c.param_elements_total, 8 * 64 * 64 + 3 * 64 * 128 + 3 * 64);
}

// CLIP: text tower h 32, 4 heads of 8, f 64; vision tower h 64, 4 heads of 16, f 128, 32 x 32 images in
// 8 x 8 patches of 3 channels (16 patches + the class token = 17 tokens); shared space 16. Both towers
// run at one sequence length s (docs/graph_format.md, "Encoders" (CLIP)): here the 17 vision tokens.
constexpr int64_t kClipSeq = 17;

ir::Graph tiny_clip() {
  json c = {{"model_type", "clip"}, {"projection_dim", 16}};
  c["text_config"] = {{"hidden_size", 32},  {"num_hidden_layers", 1}, {"num_attention_heads", 4},
                      {"intermediate_size", 64}, {"vocab_size", 100}, {"max_position_embeddings", 16}};
  c["vision_config"] = {{"hidden_size", 64}, {"num_hidden_layers", 1}, {"num_attention_heads", 4},
                        {"intermediate_size", 128}, {"image_size", 32}, {"patch_size", 8}};
  return build(c);
}

BlockCost clip_cost(const ir::Block& b) {
  ShardContext ctx = context();
  ctx.seq_len = kClipSeq;
  return block_cost(b, ctx, round::cluster(), round::params());
}

TEST(clip, vision_embedding_without_patch_bias_then_pre_layrnorm_per_token_by_hand) {
  const BlockCost c = clip_cost(tiny_clip().blocks.at(0));
  // Forward per token: the patch GEMM 2 x 192 x 64; lookups and the LayerNorm are not counted.
  EXPECT_DOUBLE_EQ(c.model_flops, 3.0 * 2 * 192 * 64 * kClipSeq);
  // Saved: the 192 pixels (the GEMM's input) and pre_layrnorm's input, 64: 256 bf16 per token.
  EXPECT_EQ(c.saved_bytes_none, (192 + 64) * 2 * kClipSeq);
  // Patch weight (no bias), positions 17 x 64, class token 64, pre_layrnorm 2 x 64.
  EXPECT_EQ(c.param_elements_total, 192 * 64 + 17 * 64 + 64 + 2 * 64);
}

TEST(clip, text_layer_is_causal_and_the_vision_layer_is_not_per_token_by_hand) {
  const ir::Graph g = tiny_clip();
  const BlockCost vision = clip_cost(g.blocks.at(1)), text = clip_cost(g.blocks.at(3));
  // Vision: q, k, v, o 4 x 2 x 64^2, fc1 and fc2 2 x 2 x 64 x 128; attention over all 17 tokens,
  // 2 x 17 x 4 x (16 + 16).
  EXPECT_DOUBLE_EQ(vision.model_flops,
                   3.0 * (4 * 2.0 * 64 * 64 + 2 * 2.0 * 64 * 128 + 2.0 * kClipSeq * 4 * 32) * kClipSeq);
  // Text: q, k, v, o 4 x 2 x 32^2, fc1 and fc2 2 x 2 x 32 x 64; causal attention, half of 2 x 17 x 4 x (8 + 8).
  EXPECT_DOUBLE_EQ(text.model_flops,
                   3.0 * (4 * 2.0 * 32 * 32 + 2 * 2.0 * 32 * 64 + 2.0 * kClipSeq * 4 * 16 / 2) * kClipSeq);
  // Saved per token (pre-LN): x and h1 (norm inputs), the two normed sublayer inputs, q, k, v, the
  // attention output (h each: 8h), fc1's output and the GELU's output (f each: 2f); bf16, plus the
  // log-sum-exp, 4 heads x 4 bytes.
  EXPECT_EQ(text.saved_bytes_none, ((8 * 32 + 2 * 64) * 2 + 16) * kClipSeq);
  EXPECT_EQ(vision.saved_bytes_none, ((8 * 64 + 2 * 128) * 2 + 16) * kClipSeq);
}

TEST(clip, bridge_and_contrastive_head_per_token_by_hand) {
  const ir::Graph g = tiny_clip();
  const BlockCost bridge = clip_cost(g.blocks.at(2)), head = clip_cost(g.blocks.at(4));
  // Bridge: visual_projection 2 x 64 x 16 per token (post_layernorm and the lookups are not counted).
  EXPECT_DOUBLE_EQ(bridge.model_flops, 3.0 * 2 * 64 * 16 * kClipSeq);
  // Saved: post_layernorm's input and the projection's input, 64 each, bf16.
  EXPECT_EQ(bridge.saved_bytes_none, 2 * 64 * 2 * kClipSeq);
  // post_layernorm 2 x 64, visual_projection 64 x 16, text tokens 100 x 32 and positions 16 x 32.
  EXPECT_EQ(bridge.param_elements_total, 2 * 64 + 64 * 16 + 100 * 32 + 16 * 32);
  // Head: text_projection 2 x 32 x 16, the similarity with the image embedding 2 x 16, logit_scale 2 x 1.
  EXPECT_DOUBLE_EQ(head.model_flops, 3.0 * (2 * 32 * 16 + 2 * 16 + 2 * 1) * kClipSeq);
  // Saved: final_layer_norm's and text_projection's inputs (32 each), both embeddings (16 each) and
  // the similarity (1), bf16.
  EXPECT_EQ(head.saved_bytes_none, (2 * 32 + 2 * 16 + 1) * 2 * kClipSeq);
  EXPECT_EQ(head.param_elements_total, 2 * 32 + 32 * 16 + 1);
}

TEST(multi_token_prediction, projection_and_layer_per_token_by_hand) {
  const json ds = json::parse(R"({"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "moe_intermediate_size": 32, "vocab_size": 100,
    "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "n_routed_experts": 4,
    "num_experts_per_tok": 2, "first_k_dense_replace": 1, "num_nextn_predict_layers": 1})");
  const ir::Graph g = build(ds);
  ASSERT_EQ(g.blocks.size(), 6u);
  const BlockCost proj = cost_of(g.blocks[4]);
  // eh_proj: the normalised hidden state and next-token embedding, each through an h x h half:
  // 2 x 2 x 64 x 64 per token forward.
  EXPECT_DOUBLE_EQ(proj.model_flops, 3.0 * 2 * 2 * 64 * 64 * kSeq);
  // Saved per token: x and the embedding (norm inputs), both normalised (GEMM inputs): 4 x 64 bf16.
  EXPECT_EQ(proj.saved_bytes_none, 4 * 64 * 2 * kSeq);
  // Parameters: enorm, hnorm 64 each, eh_proj 2 x 64 x 64; the embedding is the main model's (tied)
  // but held on this stage too.
  EXPECT_EQ(proj.param_elements_total, 2 * 64 + 2 * 64 * 64 + 100 * 64);
  // The MTP layer is the last main layer (MoE) plus the shared head: its norm and the 64 x 100 output
  // projection, 2 x 64 x 100 FLOPs per token more than the main MoE layer.
  const BlockCost layer = cost_of(g.blocks[2]);
  const BlockCost mtp = cost_of(g.blocks[5]);
  EXPECT_DOUBLE_EQ(mtp.model_flops - layer.model_flops, 3.0 * 2 * 64 * 100 * kSeq);
  EXPECT_EQ(mtp.param_elements_total - layer.param_elements_total, 64 + 64 * 100);
  EXPECT_GT(mtp.logits_bytes, 0);  // its loss holds logits like the main head's
}

}  // namespace
}  // namespace mgt::cost
