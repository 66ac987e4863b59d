// Tests for the per-block cost model (layer_cost.hpp) on a tiny Llama-like layer built by hand
// (h=64, a=4, k=2, d=16, f=128, v=256). Every expected value is derived in the test from the
// formulas of docs/cost-model.md §2 and §4 by listing tensors and kernels one by one.
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/framework_profile.hpp"

#include "round_hardware.hpp"
#include "tiny_llama.hpp"

#include "mgt/ir/error.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace mgt::cost {
namespace {

using tiny::A, tiny::D, tiny::F, tiny::H, tiny::K, tiny::V, tiny::make_op, tiny::tensor;

// ---- graph builder (tests/cost_model/tiny_llama.hpp) ----

ir::Block tiny_layer(int64_t repeat = 1) { return tiny::layer(repeat); }
ir::Block tiny_embed() { return tiny::embed(); }
ir::Block tiny_head() { return tiny::head(); }



// norm -> q/k/v -> rope(q), rope(k) -> attention -> o -> residual -> norm -> gate/up -> silu_glu ->
// down -> residual.



// One contraction "bsh,hf->bsf" and nothing else.
ir::Block single_contraction(int64_t f = F) {
  ir::Block b;
  b.name = "mm";
  b.tensors = {tensor("x", "bsh"), {"w", {{'h', H}, {'f', f}}, true}, {"y", {{'b', 0}, {'s', 0}, {'f', f}}, false}};
  b.ops = {make_op("mm", ir::OpKind::contraction, {"x", "w"}, "y", "bsh,hf->bsf")};
  return b;
}

using round::expect_near_rel, round::kGemmEff, round::kHbm, round::kPeak;

ShardContext context(int64_t b, int64_t s, int64_t tp = 1, int64_t cp = 1, bool sp = false) {
  return ShardContext{b, s, tp, cp, sp, ir::DType::bf16};
}

// ---- graph sanity ----

TEST(block_cost, tiny_graph_verifies) {
  ir::Graph g;
  g.info.num_layers = 1;
  g.blocks = {tiny_embed(), tiny_layer(), tiny_head()};
  EXPECT_NO_THROW(ir::verify(g, "tiny"));
}

// ---- local_dim_size ----

TEST(local_dim_size, batch_is_micro_batch) {
  EXPECT_EQ(local_dim_size({'b', 0}, context(3, 1024, 2, 2, true), false), 3);
  EXPECT_EQ(local_dim_size({'b', 0}, context(3, 1024, 2, 2, true), true), 3);
}

TEST(local_dim_size, sequence_splits_over_cp_and_over_tp_outside_tp_regions_with_sp) {
  // cp only.
  EXPECT_EQ(local_dim_size({'s', 0}, context(1, 1024, 1, 4), false), 256);
  // tp without sp: s stays whole everywhere.
  EXPECT_EQ(local_dim_size({'s', 0}, context(1, 1024, 4, 1, false), false), 1024);
  EXPECT_EQ(local_dim_size({'s', 0}, context(1, 1024, 4, 1, false), true), 1024);
  // sp: outside tp regions s / (cp * tp), inside s / cp.
  EXPECT_EQ(local_dim_size({'s', 0}, context(1, 1024, 4, 2, true), false), 1024 / 8);
  EXPECT_EQ(local_dim_size({'s', 0}, context(1, 1024, 4, 2, true), true), 1024 / 2);
  // Rounds up: ceil(1000 / 3) = 334, ceil(1000 / 6) = 167.
  EXPECT_EQ(local_dim_size({'s', 0}, context(1, 1000, 1, 3), false), 334);
  EXPECT_EQ(local_dim_size({'s', 0}, context(1, 1000, 2, 3, true), false), 167);
}

TEST(local_dim_size, tp_dims_split_with_ceil_others_whole) {
  const ShardContext ctx = context(1, 1024, 3);
  EXPECT_EQ(local_dim_size({'a', 12}, ctx, true), 4);
  EXPECT_EQ(local_dim_size({'k', 2}, ctx, true), 1);     // ceil(2 / 3): kv heads replicated
  EXPECT_EQ(local_dim_size({'f', 128}, ctx, true), 43);  // ceil(128 / 3)
  EXPECT_EQ(local_dim_size({'v', 256}, ctx, true), 86);  // ceil(256 / 3): padded vocab
  EXPECT_EQ(local_dim_size({'v', 256}, context(1, 8, 2), true), 128);
  EXPECT_EQ(local_dim_size({'h', 64}, ctx, true), 64);
  EXPECT_EQ(local_dim_size({'d', 16}, ctx, true), 16);
  EXPECT_TRUE(is_tp_dim('a') && is_tp_dim('k') && is_tp_dim('f') && is_tp_dim('v'));
  EXPECT_FALSE(is_tp_dim('h') || is_tp_dim('d') || is_tp_dim('s') || is_tp_dim('b') || is_tp_dim('e'));
}

TEST(local_elements, region_decided_by_tensor) {
  const ShardContext ctx = context(2, 1024, 2, 1, true);
  // [b, s, h] is outside tp regions: s / tp.
  EXPECT_EQ(local_elements(tensor("x", "bsh"), ctx), 2 * 512 * 64);
  // [b, s, f] is inside: f / tp, s whole.
  EXPECT_EQ(local_elements(tensor("g", "bsf"), ctx), 2 * 1024 * 64);
}

// ---- saved activations of the tiny layer ----
//
// Tensors kept for backward (recompute none), bf16 unless noted:
//   x        norm input                       [b, s, h]
//   attn_in  q/k/v input (once), norm output  [b, s, h]      dropped by selective
//   q_rot    attention q                      [b, s, a, d]
//   k_rot    attention k                      [b, s, k, d]
//   v        attention v                      [b, s, k, d]
//   attn     attention output, o_proj input   [b, s, a, d]
//   lse      log-sum-exp, fp32                [b, a, s]
//   h1       mlp norm input                   [b, s, h]
//   mlp_in   gate/up input, norm output       [b, s, h]      dropped by selective
//   gate, up activation inputs                [b, s, f] x 2
//   act_out  down input, activation output    [b, s, f]      dropped by selective
// Full recompute keeps x only.

struct SavedBytes {
  int64_t none = 0, selective = 0, full = 0;
};

// `s_out` is the local s of tensors outside tp regions, `s_in` inside; a, k, f already divided.
SavedBytes hand_saved(int64_t b, int64_t s_out, int64_t s_in, int64_t a, int64_t k, int64_t f) {
  const int64_t x = b * s_out * H * 2;
  const int64_t attn_in = b * s_out * H * 2;
  const int64_t q_rot = b * s_in * a * D * 2;
  const int64_t k_rot = b * s_in * k * D * 2;
  const int64_t v = b * s_in * k * D * 2;
  const int64_t attn = b * s_in * a * D * 2;
  const int64_t lse = b * a * s_in * 4;
  const int64_t h1 = b * s_out * H * 2;
  const int64_t mlp_in = b * s_out * H * 2;
  const int64_t gate = b * s_in * f * 2, up = b * s_in * f * 2, act_out = b * s_in * f * 2;
  SavedBytes out;
  out.none = x + attn_in + q_rot + k_rot + v + attn + lse + h1 + mlp_in + gate + up + act_out;
  out.selective = out.none - attn_in - mlp_in - act_out;
  out.full = x;
  return out;
}

void expect_saved(const BlockCost& cost, const SavedBytes& correct) {
  EXPECT_EQ(cost.saved_bytes_none, correct.none);
  EXPECT_EQ(cost.saved_bytes_selective, correct.selective);
  EXPECT_EQ(cost.saved_bytes_full, correct.full);
}

TEST(block_cost, saved_bytes_tp1_cp1) {
  const int64_t b = 2, s = 1024;
  const BlockCost cost = block_cost(tiny_layer(), context(b, s), round::cluster(), round::params());
  const SavedBytes correct = hand_saved(b, s, s, A, K, F);
  // Per token: 2 * (4 h + 2 a d + 2 k d + 3 f) + 4 a = 2 * 832 + 16 = 1680 bytes.
  EXPECT_EQ(correct.none, b * s * 1680);
  EXPECT_EQ(correct.selective, b * s * (1680 - 2 * (64 + 64 + 128)));
  expect_saved(cost, correct);
  EXPECT_EQ(cost.saved_bytes_full, b * s * H * 2);
}

TEST(block_cost, saved_bytes_tp2_sequence_parallel) {
  const int64_t b = 2, s = 1024;
  const BlockCost cost = block_cost(tiny_layer(), context(b, s, 2, 1, true), round::cluster(), round::params());
  // Outside tp regions s / 2, inside a, k, f / 2: every tensor halves.
  const SavedBytes correct = hand_saved(b, s / 2, s, A / 2, K / 2, F / 2);
  EXPECT_EQ(correct.none, b * s * 1680 / 2);
  expect_saved(cost, correct);
}

TEST(block_cost, saved_bytes_tp2_without_sequence_parallel) {
  const int64_t b = 2, s = 1024;
  const BlockCost cost = block_cost(tiny_layer(), context(b, s, 2, 1, false), round::cluster(), round::params());
  // x, attn_in, h1, mlp_in replicated in full; the rest halves.
  const SavedBytes correct = hand_saved(b, s, s, A / 2, K / 2, F / 2);
  EXPECT_EQ(correct.none, b * s * (2 * (4 * 64 + 32 + 16 + 16 + 32 + 3 * 64) + 4 * 2));
  expect_saved(cost, correct);
}

// The pipeline boundary is the layer input x: [b, s, h] bf16 without sequence parallel, [b, s/tp, h]
// with it. Megatron-LM's scatter/gather sends 1/tp of the full one from each TP rank.
TEST(block_cost, pipeline_boundary_bytes_with_and_without_scatter_gather) {
  const int64_t b = 2, s = 1024, full = b * s * H * 2;
  CostParams params = round::params();
  EXPECT_EQ(block_cost(tiny_layer(), context(b, s, 4, 1, false), round::cluster(), params).boundary_bytes, full);
  EXPECT_EQ(block_cost(tiny_layer(), context(b, s, 4, 1, true), round::cluster(), params).boundary_bytes, full / 4);
  params.pipeline_scatter_gather = true;
  EXPECT_EQ(block_cost(tiny_layer(), context(b, s, 4, 1, false), round::cluster(), params).boundary_bytes, full / 4);
  // Under sequence parallel the boundary is split already: not split again.
  EXPECT_EQ(block_cost(tiny_layer(), context(b, s, 4, 1, true), round::cluster(), params).boundary_bytes, full / 4);
  EXPECT_EQ(block_cost(tiny_layer(), context(b, s, 1, 1, false), round::cluster(), params).boundary_bytes, full);
}

TEST(block_cost, saved_bytes_cp2) {
  const int64_t b = 1, s = 2048;
  const BlockCost cost = block_cost(tiny_layer(), context(b, s, 1, 2), round::cluster(), round::params());
  const SavedBytes correct = hand_saved(b, s / 2, s / 2, A, K, F);
  EXPECT_EQ(correct.none, b * s * 1680 / 2);
  expect_saved(cost, correct);
}

// Transformer Engine keeps a low-precision linear's quantised input for wgrad, not the bf16 one
// (CostParams::linears_save_quantized_input): attn_in, mlp_in and act_out drop from 2 bytes per
// element to fp8's 1, and o_proj's input `attn`, which attention also saves in bf16, gains a 1-byte
// copy. Selective recompute drops the norm and activation outputs either way, so it only gains that
// copy. MXFP8 adds one E8M0 scale per 32 elements. Without the claim, or in bf16, nothing changes.
TEST(block_cost, saved_bytes_of_quantized_linear_inputs) {
  const int64_t b = 2, s = 1024;
  const ir::ClusterSpec blackwell = ir::cluster_preset("b200");  // fp8 and MXFP8 tensor cores; bytes need no rates
  ShardContext fp8 = context(b, s);
  fp8.fp8_linears = true;
  CostParams keeps = round::params();
  keeps.linears_save_quantized_input = true;
  const SavedBytes bf16_inputs = hand_saved(b, s, s, A, K, F);
  const int64_t attn_in = b * s * H, attn = b * s * A * D, mlp_in = b * s * H, act_out = b * s * F;  // elements
  SavedBytes correct = bf16_inputs;
  correct.none += -attn_in + attn - mlp_in - act_out;
  correct.selective += attn;
  expect_saved(block_cost(tiny_layer(), fp8, blackwell, keeps), correct);
  expect_saved(block_cost(tiny_layer(), fp8, blackwell, round::params()), bf16_inputs);
  expect_saved(block_cost(tiny_layer(), context(b, s), blackwell, keeps), bf16_inputs);
  ShardContext mxfp8 = fp8;
  mxfp8.linear_format = ir::LinearFormat::mxfp8;
  const auto mx = [](int64_t elements) { return elements + elements / 32; };  // every count here divides by 32
  SavedBytes block_scaled = bf16_inputs;
  block_scaled.none += mx(attn_in) - 2 * attn_in + mx(attn) + mx(mlp_in) - 2 * mlp_in + mx(act_out) - 2 * act_out;
  block_scaled.selective += mx(attn);
  expect_saved(block_cost(tiny_layer(), mxfp8, blackwell, keeps), block_scaled);
  EXPECT_TRUE(cost_params_for(blackwell.gpu, framework_profile("megatron-core")).linears_save_quantized_input);
  EXPECT_FALSE(cost_params_for(blackwell.gpu, framework_profile("torchtitan")).linears_save_quantized_input);
}

// torchtitan's op-level selective AC (SelectiveRecompute::every_second_matmul) on the tiny layer:
// weight matmuls in order q(1) k(2) v(3) o(4) gate(5) up(6) down(7); the odd ones and attention are
// kept, everything else is recomputed. Kept per token (bf16): x 2h, q 2ad, v 2kd, attn 2ad, lse 4a,
// gate 2f, mlp_out 2h = 128 + 128 + 64 + 128 + 16 + 256 + 128 = 848 bytes. Recomputed: the forward
// of every op but q, v, gate, down and attention.
TEST(block_cost, op_level_selective_recompute_keeps_every_other_matmul) {
  const int64_t b = 2, s = 1024;
  CostParams titan = round::params();
  titan.selective_recompute = SelectiveRecompute::every_second_matmul;
  const ir::Block layer = tiny_layer();
  const BlockCost cost = block_cost(layer, context(b, s), round::cluster(), titan);
  EXPECT_EQ(cost.saved_bytes_selective, b * s * 848);
  EXPECT_EQ(cost.saved_bytes_none, b * s * 1680);  // recompute none and full are not this policy's
  EXPECT_EQ(cost.saved_bytes_full, b * s * H * 2);
  const auto ops = op_costs(layer, context(b, s), round::cluster(), titan);
  double redone_s = 0, kept_s = 0;
  for (size_t i = 0; i < layer.ops.size(); ++i) {
    const std::string& name = layer.ops[i].name;
    const bool kept = name == "q_proj" || name == "v_proj" || name == "gate_proj" || name == "down_proj" || name == "attention";
    (kept ? kept_s : redone_s) += ops[i].fwd_s;
    EXPECT_DOUBLE_EQ(ops[i].selective_recompute_s, kept ? 0.0 : ops[i].fwd_s) << name;
  }
  ASSERT_GT(kept_s, 0.0);
  EXPECT_NEAR(cost.selective_recompute_s, redone_s, 1e-12);
  // The default policy drops only the norm and activation outputs (hand_saved).
  EXPECT_EQ(block_cost(layer, context(b, s), round::cluster(), round::params()).saved_bytes_selective,
            b * s * (1680 - 2 * (64 + 64 + 128)));
  EXPECT_EQ(cost_params_for(ir::cluster_preset("h100-sxm").gpu, framework_profile("torchtitan")).selective_recompute,
            SelectiveRecompute::every_second_matmul);
}

TEST(block_cost, largest_tensor_and_logits_bytes) {
  const int64_t b = 2, s = 512;
  const BlockCost layer = block_cost(tiny_layer(), context(b, s), round::cluster(), round::params());
  EXPECT_EQ(layer.largest_tensor_bytes, b * s * F * 2);  // gate / up / act_out
  EXPECT_EQ(layer.logits_bytes, 0);
  const BlockCost head = block_cost(tiny_head(), context(b, s), round::cluster(), round::params());
  EXPECT_EQ(head.largest_tensor_bytes, b * s * V * 2);
  EXPECT_EQ(head.logits_bytes, b * s * V * (2 + 4 + 4));
  // Under tp = 2 the vocab splits.
  const BlockCost head_tp = block_cost(tiny_head(), context(b, s, 2, 1, true), round::cluster(), round::params());
  EXPECT_EQ(head_tp.logits_bytes, b * s * (V / 2) * 10);
  // Head keeps the norm input and the lm_head input.
  EXPECT_EQ(head.saved_bytes_none, 2 * b * s * H * 2);
  const BlockCost embed = block_cost(tiny_embed(), context(b, s), round::cluster(), round::params());
  EXPECT_EQ(embed.saved_bytes_none, 0);
}

// ---- compute time ----

TEST(block_cost, single_contraction_time) {
  const int64_t b = 2, s = 1024;
  CostParams params = round::params();
  BlockCost cost = block_cost(single_contraction(), context(b, s), round::cluster(), params);
  const double fwd = 2.0 * b * s * H * F / (kPeak * kGemmEff);
  expect_near_rel(cost.fwd_compute_s, fwd);
  expect_near_rel(cost.bwd_compute_s, 2 * fwd);  // dA and dB, same FLOPs each
  // One launch floor per kernel: one forward, two backward.
  params.kernel_floor_s = 3e-6;
  cost = block_cost(single_contraction(), context(b, s), round::cluster(), params);
  expect_near_rel(cost.fwd_compute_s, fwd + 3e-6);
  expect_near_rel(cost.bwd_compute_s, 2 * fwd + 6e-6);
  // tp = 2 halves f: half the FLOPs.
  params.kernel_floor_s = 0;
  cost = block_cost(single_contraction(), context(b, s, 2), round::cluster(), params);
  expect_near_rel(cost.fwd_compute_s, fwd / 2);
  // Model FLOPs: 6 * weight elements * tokens, whatever the sharding.
  EXPECT_DOUBLE_EQ(cost.model_flops, 6.0 * H * F * b * s);
}

TEST(block_cost, gemv_like_contraction_is_memory_bound) {
  // f = 4 < 16: roofline max(FLOPs / (peak * max eff), bytes / hbm) with bytes = A + B + C in bf16.
  const int64_t b = 1, s = 4096, f = 4;
  const BlockCost cost = block_cost(single_contraction(f), context(b, s), round::cluster(), round::params());
  const double flops = 2.0 * b * s * H * f;
  const double fwd_bytes = double((b * s * H + H * f + b * s * f) * 2);
  const double fwd = std::max(flops / (kPeak * kGemmEff), fwd_bytes / kHbm);
  EXPECT_GT(fwd_bytes / kHbm, flops / (kPeak * kGemmEff));
  expect_near_rel(cost.fwd_compute_s, fwd);
  // Backward: dA (m x f) . (f x h) and dB (h x m) . (m x f) move the same three matrices.
  expect_near_rel(cost.bwd_compute_s, 2 * fwd);
}

// Forward and backward of the tiny layer, kernel by kernel (tp = cp = 1).
struct HandTimes {
  double fwd = 0, bwd = 0, selective = 0, attn_fwd = 0, attn_bwd = 0;
};

HandTimes hand_layer_times(int64_t b, int64_t s) {
  const double T = double(b * s), gemm = kPeak * kGemmEff;
  auto mem = [](double bytes) { return bytes / kHbm; };
  const double x_bytes = T * H * 2, f_bytes = T * F * 2;
  const double norm_f = mem(2 * x_bytes), norm_b = mem(3 * x_bytes);
  const double q_f = 2 * T * H * A * D / gemm, kv_f = 2 * T * H * K * D / gemm, o_f = 2 * T * A * D * H / gemm;
  const double rope_q = mem(2 * T * A * D * 2), rope_k = mem(2 * T * K * D * 2);
  const double attn_flops = 2.0 * b * s * s * A * (D + D) * 0.5;  // causal
  const double attn_f = attn_flops / (kPeak * 0.5), attn_b = 2.5 * attn_flops / (kPeak * 0.25);
  const double res_f = mem(3 * x_bytes), res_b = mem(2 * x_bytes);
  const double gate_f = 2 * T * H * F / gemm, down_f = 2 * T * F * H / gemm;
  const double act_f = mem(2 * f_bytes + f_bytes), act_b = mem(4 * f_bytes + f_bytes);
  HandTimes t;
  t.fwd = norm_f + q_f + 2 * kv_f + rope_q + rope_k + attn_f + o_f + res_f + norm_f + 2 * gate_f + act_f + down_f +
          res_f;
  t.bwd = norm_b + 2 * (q_f + 2 * kv_f) + rope_q + rope_k + attn_b + 2 * o_f + res_b + norm_b + 2 * 2 * gate_f +
          act_b + 2 * down_f + res_b;
  t.selective = 2 * norm_f + act_f;
  t.attn_fwd = attn_f;
  t.attn_bwd = attn_b;
  return t;
}

TEST(block_cost, tiny_layer_fwd_bwd_time) {
  const int64_t b = 2, s = 1024;
  const BlockCost cost = block_cost(tiny_layer(), context(b, s), round::cluster(), round::params());
  const HandTimes correct = hand_layer_times(b, s);
  expect_near_rel(cost.fwd_compute_s, correct.fwd);
  expect_near_rel(cost.bwd_compute_s, correct.bwd);
  expect_near_rel(cost.selective_recompute_s, correct.selective);
  expect_near_rel(cost.attention_fwd_s, correct.attn_fwd);
  expect_near_rel(cost.attention_bwd_s, correct.attn_bwd);
}

TEST(block_cost, embed_and_head_time) {
  const int64_t b = 2, s = 1024;
  const double T = double(b * s);
  const BlockCost embed = block_cost(tiny_embed(), context(b, s), round::cluster(), round::params());
  // Lookup: read rows + write output; backward: read grad + scatter-add (read+write).
  expect_near_rel(embed.fwd_compute_s, 2 * T * H * 2 / kHbm);
  expect_near_rel(embed.bwd_compute_s, 3 * T * H * 2 / kHbm);
  const BlockCost head = block_cost(tiny_head(), context(b, s), round::cluster(), round::params());
  const double norm_f = 2 * T * H * 2 / kHbm, norm_b = 3 * T * H * 2 / kHbm;
  const double lm = 2 * T * H * V / (kPeak * kGemmEff);
  const double loss = T * V * 10 / kHbm;  // bf16 logits + fp32 upcast + fp32 grad
  expect_near_rel(head.fwd_compute_s, norm_f + lm + loss);
  expect_near_rel(head.bwd_compute_s, norm_b + 2 * lm + loss);
}

TEST(block_cost, attention_time_under_cp) {
  // cp = 2: each rank holds s / 2 queries against all s keys, half of them masked.
  const int64_t b = 1, s = 2048;
  const BlockCost cost = block_cost(tiny_layer(), context(b, s, 1, 2), round::cluster(), round::params());
  const double local_flops = 2.0 * b * (s / 2) * s * A * (D + D) * 0.5;
  expect_near_rel(cost.attention_fwd_s, local_flops / (kPeak * 0.5));
  expect_near_rel(cost.attention_bwd_s, 2.5 * local_flops / (kPeak * 0.25));
}

TEST(block_cost, attention_time_follows_the_kernel_curve) {
  // The estimator applies the kernel model's curve (attention_curve.hpp) to each attention op: causal
  // s = 1024 keeps (1024 + 1)/2 keys per row on average and crosses one key tile of 128; with the
  // half rate at 256 executed keys and the tiny layer's head dim D (< 128) against a half point of 64.
  const int64_t b = 2, s = 1024;
  CostParams p = round::params();
  p.attention_curve = {.half_kv = 256, .half_head_dim = 64, .mask_edge_keys = 128};
  const BlockCost cost = block_cost(tiny_layer(), context(b, s), round::cluster(), p);
  const double kept = (s + 1) / 2.0, executed = kept + 128;
  const double d = double(D);
  const double factor = (executed / kept) * ((executed + 256) / executed) / ((d / (d + 64)) / (128.0 / 192.0));
  const HandTimes flat = hand_layer_times(b, s);
  expect_near_rel(cost.attention_fwd_s, flat.attn_fwd * factor);
  expect_near_rel(cost.attention_bwd_s, flat.attn_bwd * factor);
}

// ---- collectives ----

using Axis = BlockCollective::Axis;
constexpr auto AR = CollectiveKind::all_reduce;
constexpr auto AG = CollectiveKind::all_gather;
constexpr auto RS = CollectiveKind::reduce_scatter;

TEST(block_cost, tp_collectives_without_sequence_parallel) {
  const int64_t b = 2, s = 1024;
  const BlockCost cost = block_cost(tiny_layer(), context(b, s, 2, 1, false), round::cluster(), round::params());
  const int64_t full = b * s * H * 2;  // one [b, s, h] bf16 activation
  // Row-parallel o_proj and down_proj all-reduce their outputs in forward.
  const std::vector<BlockCollective> fwd{{Axis::tp, AR, full, {"attn_out"}, false, ir::ReduceOp::sum},
                                         {Axis::tp, AR, full, {"mlp_out"}, false, ir::ReduceOp::sum}};
  // Column-parallel q/k/v share one input-gradient all-reduce in backward; gate/up share another.
  const std::vector<BlockCollective> bwd{{Axis::tp, AR, full, {"grad(attn_in)"}, false, ir::ReduceOp::sum},
                                         {Axis::tp, AR, full, {"grad(mlp_in)"}, false, ir::ReduceOp::sum}};
  EXPECT_EQ(cost.fwd_collectives, fwd);
  EXPECT_EQ(cost.bwd_collectives, bwd);
}

TEST(block_cost, tp_collectives_with_sequence_parallel) {
  const int64_t b = 2, s = 1024;
  const BlockCost cost = block_cost(tiny_layer(), context(b, s, 2, 1, true), round::cluster(), round::params());
  const int64_t full = b * s * H * 2;  // gathered / pre-scatter size, as nccl-tests counts
  // Forward: all-gather before q/k/v, reduce-scatter after o, the same around the MLP.
  const auto sum = ir::ReduceOp::sum;
  const std::vector<BlockCollective> fwd{{Axis::tp, AG, full, {"attn_in"}, true, sum},
                                         {Axis::tp, RS, full, {"attn_out"}, false, sum},
                                         {Axis::tp, AG, full, {"mlp_in"}, true, sum},
                                         {Axis::tp, RS, full, {"mlp_out"}, false, sum}};
  // Backward, listed in op order: q (the first reader, last in backward) reduce-scatters the input
  // gradient the three summed; v (the last reader, first in backward) re-gathers the input shard
  // before its backward; o all-gathers its output grad before its backward; the same for gate/up
  // and down.
  const std::vector<BlockCollective> bwd{{Axis::tp, RS, full, {"grad(attn_in)"}, false, sum},
                                         {Axis::tp, AG, full, {"attn_in"}, true, sum},
                                         {Axis::tp, AG, full, {"grad(attn_out)"}, true, sum},
                                         {Axis::tp, RS, full, {"grad(mlp_in)"}, false, sum},
                                         {Axis::tp, AG, full, {"mlp_in"}, true, sum},
                                         {Axis::tp, AG, full, {"grad(mlp_out)"}, true, sum}};
  EXPECT_EQ(cost.fwd_collectives, fwd);
  EXPECT_EQ(cost.bwd_collectives, bwd);
}

TEST(block_cost, tp_collectives_of_embed_and_head) {
  const int64_t b = 2, s = 1024;
  const int64_t full = b * s * H * 2;
  const BlockCost embed = block_cost(tiny_embed(), context(b, s, 2), round::cluster(), round::params());
  // Vocab-parallel lookup: partial rows all-reduced.
  EXPECT_EQ(embed.fwd_collectives, (std::vector<BlockCollective>{{Axis::tp, AR, full, {"out"}, false, ir::ReduceOp::sum}}));
  EXPECT_TRUE(embed.bwd_collectives.empty());
  const BlockCost head = block_cost(tiny_head(), context(b, s, 2), round::cluster(), round::params());
  // Vocab-parallel cross-entropy: max, sum-exp and target logit, fp32 per token.
  const int64_t per_token = b * s * 4;
  EXPECT_EQ(head.fwd_collectives, (std::vector<BlockCollective>{
                                      {Axis::tp, AR, per_token, {"loss(max)"}, false, ir::ReduceOp::max},
                                      {Axis::tp, AR, per_token, {"loss(sumexp)"}, false, ir::ReduceOp::sum},
                                      {Axis::tp, AR, per_token, {"loss(target)"}, false, ir::ReduceOp::sum}}));
  // Column-parallel lm_head: input gradient all-reduced.
  EXPECT_EQ(head.bwd_collectives, (std::vector<BlockCollective>{{Axis::tp, AR, full, {"grad(x_norm)"}, false, ir::ReduceOp::sum}}));
}

TEST(block_cost, cp_collectives_gather_k_and_v) {
  const int64_t b = 1, s = 2048, cp = 2;
  const BlockCost cost = block_cost(tiny_layer(), context(b, s, 1, cp), round::cluster(), round::params());
  const int64_t k_local = b * (s / cp) * K * D * 2, v_local = b * (s / cp) * K * D * 2;
  const int64_t gathered = (k_local + v_local) * cp;
  const auto sum = ir::ReduceOp::sum;
  // Gathered before the attention kernel (forward, and again for its backward); the K/V gradients
  // reduce-scattered after the backward kernel.
  EXPECT_EQ(cost.fwd_collectives, (std::vector<BlockCollective>{{Axis::cp, AG, gathered, {"k_rot", "v"}, true, sum}}));
  EXPECT_EQ(cost.bwd_collectives,
            (std::vector<BlockCollective>{{Axis::cp, AG, gathered, {"k_rot", "v"}, true, sum},
                                          {Axis::cp, RS, gathered, {"grad(k_rot)", "grad(v)"}, false, sum}}));
}

TEST(block_cost, no_collectives_without_tp_or_cp) {
  const BlockCost cost = block_cost(tiny_layer(), context(2, 1024), round::cluster(), round::params());
  EXPECT_TRUE(cost.fwd_collectives.empty());
  EXPECT_TRUE(cost.bwd_collectives.empty());
}

// ---- parameters and model FLOPs ----

TEST(block_cost, param_elements) {
  const int64_t total = H + H * A * D + 2 * H * K * D + A * D * H + H + 3 * H * F;
  EXPECT_EQ(total, 36992);
  const BlockCost tp1 = block_cost(tiny_layer(), context(1, 128), round::cluster(), round::params());
  EXPECT_EQ(tp1.param_elements_total, total);
  EXPECT_EQ(tp1.param_elements_local, total);
  const BlockCost tp2 = block_cost(tiny_layer(), context(1, 128, 2), round::cluster(), round::params());
  const int64_t local = H + H * (A / 2) * D + 2 * H * (K / 2) * D + (A / 2) * D * H + H + 3 * H * (F / 2);
  EXPECT_EQ(tp2.param_elements_local, local);
  EXPECT_EQ(tp2.param_elements_total, total);
  // tp = 4: k = 2 heads round up to 1 per rank (replicated).
  const BlockCost tp4 = block_cost(tiny_layer(), context(1, 128, 4), round::cluster(), round::params());
  EXPECT_EQ(tp4.param_elements_local, H + H * 1 * D + 2 * H * 1 * D + 1 * D * H + H + 3 * H * (F / 4));
  // Vocab rounds up: ceil(256 / 3) = 86 rows per rank.
  const BlockCost embed = block_cost(tiny_embed(), context(1, 128, 3), round::cluster(), round::params());
  EXPECT_EQ(embed.param_elements_local, 86 * H);
  EXPECT_EQ(embed.param_elements_total, V * H);
}

TEST(block_cost, model_flops) {
  const int64_t b = 2, s = 1024;
  const double tokens = double(b * s);
  const double matmul_params = double(H * A * D + 2 * H * K * D + A * D * H + 3 * H * F);
  const double attention = 3.0 * 2.0 * b * s * s / 2.0 * A * (D + D);  // causal, fwd + 2x bwd
  const double correct = 6.0 * matmul_params * tokens + attention;
  for (auto [tp, cp, sp] : {std::tuple{1, 1, false}, std::tuple{2, 1, true}, std::tuple{1, 2, false}}) {
    const BlockCost cost = block_cost(tiny_layer(), context(b, s, tp, cp, sp), round::cluster(), round::params());
    expect_near_rel(cost.model_flops, correct);
  }
  const BlockCost head = block_cost(tiny_head(), context(b, s, 2), round::cluster(), round::params());
  expect_near_rel(head.model_flops, 6.0 * H * V * tokens);
  EXPECT_EQ(block_cost(tiny_embed(), context(b, s), round::cluster(), round::params()).model_flops, 0.0);
}

}  // namespace
}  // namespace mgt::cost
