// State-space layers in the cost model (ssm_cost.hpp, layer_cost.cpp's cost_ssm_scan): FLOPs and
// memory per token of the Mamba-1 and Mamba-2 scans and of whole Mamba blocks, each worked out in
// the test from the published formula, and how tp and cp split them (Megatron-Core MambaMixer).
// Formulas: Mamba-1 scan 9*D*N + D per token (Gu & Dao 2023, §3.2 / Algorithm 2; the count of
// state-spaces/mamba issue #110); SSD 2QNG + H(2QP + 4NP + P) per token (Dao & Gu 2024, §6, the four
// steps of the block decomposition: intra-chunk CB^T and its product with X, chunk states, state
// read-out, plus the D skip).
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/ssm_cost.hpp"

#include "round_hardware.hpp"

#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace mgt::cost {
namespace {

using nlohmann::json;

TEST(ssm_scan, mamba1_flops_per_token_by_hand) {
  // Falcon-Mamba-7B: d_inner 8192, N 16: 9 x 8192 x 16 + 8192.
  const SsmScanShape s{.heads = 1, .head_dim = 8192, .groups = 1, .state = 16, .chunk = 0};
  EXPECT_DOUBLE_EQ(ssm_scan_fwd_flops_per_token(s), 1179648.0 + 8192.0);
  EXPECT_DOUBLE_EQ(ssm_scan_bwd_flops_per_token(s), 2.0 * (1179648.0 + 8192.0));
  // fp32 (re, im) state every 2048 tokens: 8192 x 2 x 16 x 4 bytes / 2048 = 512 bytes per token.
  EXPECT_DOUBLE_EQ(ssm_scan_extra_saved_bytes_per_token(s), 512.0);
  // Moved: x, dt, y (8192 each) and B, C (16 each), bf16: (3 x 8192 + 32) x 2.
  EXPECT_DOUBLE_EQ(ssm_scan_bytes_per_token(s, 2), (3.0 * 8192 + 32) * 2);
}

TEST(ssm_scan, ssd_flops_per_token_by_hand) {
  // Mamba-Codestral-7B: 128 heads of 64, 8 groups, N 128, chunk 256.
  // 2*Q*N*G = 2 x 256 x 128 x 8 = 524288; per head 2*Q*P + 4*N*P + P = 32768 + 32768 + 64 = 65600.
  const SsmScanShape s{.heads = 128, .head_dim = 64, .groups = 8, .state = 128, .chunk = 256};
  EXPECT_DOUBLE_EQ(ssm_scan_fwd_flops_per_token(s), 524288.0 + 128.0 * 65600.0);
  // dA_cumsum: one fp32 per head per token.
  EXPECT_DOUBLE_EQ(ssm_scan_extra_saved_bytes_per_token(s), 128.0 * 4);
  // Moved: x, y (8192 each), dt (128), B, C (8 x 128 each), bf16.
  EXPECT_DOUBLE_EQ(ssm_scan_bytes_per_token(s, 2), (2.0 * 8192 + 128 + 2 * 1024) * 2);
}

// One layer of a tiny pure-Mamba model built by the Hugging Face frontend.
ir::Block mamba_layer(const json& config) {
  const ir::Graph g = ir::graph_from_hf_config(config, "tiny.json");
  ir::verify(g, "tiny.json");
  return g.blocks.at(1);
}

// h 64, d_inner 128, N 16, dt rank 4, conv 4.
json tiny_mamba1() {
  return json{{"model_type", "mamba"},  {"hidden_size", 64}, {"intermediate_size", 128}, {"state_size", 16},
              {"time_step_rank", 4},    {"conv_kernel", 4},  {"num_hidden_layers", 1},   {"vocab_size", 100}};
}

// h 64, 4 heads of 16 (d_inner 64), 2 groups, N 8, conv 4, chunk 32.
json tiny_mamba2() {
  return json{{"model_type", "mamba2"}, {"hidden_size", 64}, {"num_heads", 4},        {"head_dim", 16},
              {"n_groups", 2},          {"state_size", 8},   {"conv_kernel", 4},      {"chunk_size", 32},
              {"num_hidden_layers", 1}, {"vocab_size", 100}};
}

constexpr int64_t kSeq = 2048;

ShardContext context(int64_t tp = 1, int64_t cp = 1) {
  ShardContext ctx;
  ctx.micro_batch = 1;
  ctx.seq_len = kSeq;
  ctx.tp = tp;
  ctx.cp = cp;
  return ctx;
}

TEST(mamba_block, mamba1_flops_and_memory_per_token_by_hand) {
  const BlockCost c = block_cost(mamba_layer(tiny_mamba1()), context(), round::cluster(), round::params());
  // Forward FLOPs per token: in_proj x and z 2 x (2 x 64 x 128), conv 2 x 128 x 4, x_proj 2 x 128 x (4 + 16 + 16),
  // dt_proj 2 x 4 x 128, out_proj 2 x 128 x 64, scan 9 x 128 x 16 + 128.
  const double fwd = 2 * (2.0 * 64 * 128) + 2.0 * 128 * 4 + 2.0 * 128 * 36 + 2.0 * 4 * 128 + 2.0 * 128 * 64 +
                     (9.0 * 128 * 16 + 128);
  EXPECT_DOUBLE_EQ(c.model_flops, 3.0 * fwd * kSeq);
  // Saved for backward, elements per token: layer input x 64, normed input 64, x 128, conv out 128, its SiLU
  // 128, dt_low 4, dt 128, B 16, C 16, z 128, y 128, gated y 128 = 1060, in bf16; plus the fp32 state
  // checkpoints 128 x 2 x 16 x 4 / 2048 = 8 bytes.
  EXPECT_EQ(c.saved_bytes_none, (1060 * 2 + 8) * kSeq);
  // Parameters: in_proj 2 x 64 x 128, conv 128 x 4 + bias 128, x_proj 128 x 36, dt_proj 4 x 128 + bias 128,
  // A 128 x 16, D 128, out_proj 128 x 64, norm 64.
  EXPECT_EQ(c.param_elements_total, 2 * 64 * 128 + 128 * 4 + 128 + 128 * 36 + 4 * 128 + 128 + 128 * 16 + 128 +
                                        128 * 64 + 64);
}

TEST(mamba_block, mamba2_flops_and_memory_per_token_by_hand) {
  const BlockCost c = block_cost(mamba_layer(tiny_mamba2()), context(), round::cluster(), round::params());
  // in_proj to z, x (64 each), B, C (2 x 8 each), dt (4): 2 x 64 x 164; convs 2 x 4 x (64 + 16 + 16);
  // out_proj 2 x 64 x 64; SSD 2 x 32 x 8 x 2 + 4 x (2 x 32 x 16 + 4 x 8 x 16 + 16).
  const double fwd = 2.0 * 64 * 164 + 2.0 * 4 * 96 + 2.0 * 64 * 64 + (2.0 * 32 * 8 * 2 + 4 * (2.0 * 32 * 16 + 4.0 * 8 * 16 + 16));
  EXPECT_DOUBLE_EQ(c.model_flops, 3.0 * fwd * kSeq);
  // Saved, elements per token: x, normed input, x proj, conv x, SiLU x, y, z, gated, gated normed (64 each);
  // B, C, their convs and SiLUs (16 each); dt 4 = 676 in bf16; plus dA_cumsum 4 heads x 4 bytes.
  EXPECT_EQ(c.saved_bytes_none, (676 * 2 + 16) * kSeq);
}

TEST(mamba_block, tensor_parallel_splits_channels_heads_and_groups) {
  // tp 2 halves Mamba-1's channels: the scan's local FLOPs halve (9 x 64 x 16 + 64 per token).
  const ir::Block m1 = mamba_layer(tiny_mamba1());
  const auto scan_flops = [](const ir::Block& b, const ShardContext& ctx) {
    const std::vector<OpCost> ops = op_costs(b, ctx, round::cluster(), round::params());
    for (size_t i = 0; i < b.ops.size(); ++i)
      if (b.ops[i].kind == ir::OpKind::ssm_scan) return ops[i].fwd_flops;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(scan_flops(m1, context(2)), (9.0 * 64 * 16 + 64) * kSeq);
  // Mamba-2: tp 2 leaves 2 heads and 1 group per GPU: 2 x 32 x 8 x 1 + 2 x (1024 + 512 + 16).
  const ir::Block m2 = mamba_layer(tiny_mamba2());
  EXPECT_DOUBLE_EQ(scan_flops(m2, context(2)), (2.0 * 32 * 8 + 2 * (1024.0 + 512 + 16)) * kSeq);
  // in_proj is column-parallel, out_proj row-parallel: one all-reduce of the bsh output forward
  // (64 x 2048 x 2 bytes), one of the input gradient backward, as for a Megatron MLP.
  const BlockCost c = block_cost(m2, context(2), round::cluster(), round::params());
  ASSERT_EQ(c.fwd_collectives.size(), 1u);
  EXPECT_EQ(c.fwd_collectives[0].kind, CollectiveKind::all_reduce);
  EXPECT_EQ(c.fwd_collectives[0].bytes, 64 * kSeq * 2);
}

TEST(mamba_block, context_parallel_moves_sequence_shards_to_head_shards) {
  // Megatron-Core MambaContextParallel, cp 2: before the scan x (64), dt (4), B, C (16 each) and z (64)
  // of the local 1024 tokens go through one all-to-all, y (64) comes back through another; the same
  // pair again in backward.
  const BlockCost c = block_cost(mamba_layer(tiny_mamba2()), context(1, 2), round::cluster(), round::params());
  int64_t fwd_a2a = 0, bwd_a2a = 0;
  for (const auto& col : c.fwd_collectives)
    if (col.axis == BlockCollective::Axis::cp && col.kind == CollectiveKind::all_to_all) fwd_a2a += col.bytes;
  for (const auto& col : c.bwd_collectives)
    if (col.axis == BlockCollective::Axis::cp && col.kind == CollectiveKind::all_to_all) bwd_a2a += col.bytes;
  EXPECT_EQ(fwd_a2a, (64 + 4 + 16 + 16 + 64 + 64) * 1024 * 2);
  EXPECT_EQ(bwd_a2a, fwd_a2a);
}

}  // namespace
}  // namespace mgt::cost
