// Megatron-Core's eager routed-expert epilogue (expert_epilogue.hpp; docs/cost-model.md §9): the
// fc2 bias added per local expert and the clamp of a gated unit's inputs, as memory-bound passes
// counted by hand, only where the profile runs them and the precision has no fused grouped MLP.
#include "mgt/cost_model/compute.hpp"
#include "mgt/cost_model/expert_epilogue.hpp"
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/cost_model/layer_cost.hpp"

#include "moe_block.hpp"
#include "round_hardware.hpp"

#include <gtest/gtest.h>

namespace mgt::cost {
namespace {

constexpr int64_t kExperts = 8, kSeq = 4096, kEp = 2;

// moe::block with GPT-OSS's additions: a per-expert fc2 bias and a clamped gated unit.
ir::Block clamped_biased_block() {
  ir::Block b = moe::block(kExperts);
  b.tensors.push_back(tiny::tensor("b_expert_down", "eh", true, {{'h', moe::Hm}, {'e', kExperts}}));
  ir::Op& down = b.ops[moe::kDown];
  down.inputs.push_back("b_expert_down");
  down.einsum = "bsef,efh,eh->bseh";
  b.ops[4].clamp_limit = 7.0;  // expert_act
  return b;
}

ShardContext context(ir::LinearFormat format) {
  ShardContext ctx;
  ctx.micro_batch = 1;
  ctx.seq_len = kSeq;
  ctx.ep = kEp;
  ctx.fp8_linears = format != ir::LinearFormat::none;
  ctx.linear_format = format;
  return ctx;
}

CostParams params(bool eager) {
  CostParams p = round::params();
  p.eager_expert_epilogue = eager;
  return p;
}

TEST(expert_epilogue, bf16_adds_the_bias_and_clamp_passes_counted_by_hand) {
  const ir::Block b = clamped_biased_block();
  const ir::ClusterSpec c = round::cluster();
  const ShardContext ctx = context(ir::LinearFormat::none);
  // Each rank routes its 4096 tokens to top-2 experts: 8192 rows (balanced over the 4 local experts).
  // fc1's two halves (gate, up): 8192 x 1024 bf16 each = 32 MiB; fc2's output 8192 x 1024 bf16 = 16 MiB.
  const int64_t rows = kSeq * moe::kTopK;
  const int64_t in_bytes = 2 * rows * moe::Fm * 2, out_bytes = rows * moe::Hm * 2;
  const CostParams on = params(true), off = params(false);
  const double fwd = memory_bound_time_s(4 * in_bytes, c, on) + memory_bound_time_s(6 * out_bytes, c, on);
  const double bwd = memory_bound_time_s(5 * in_bytes, c, on) + memory_bound_time_s(6 * out_bytes, c, on);
  const BlockCost with = block_cost(b, ctx, c, on), without = block_cost(b, ctx, c, off);
  EXPECT_NEAR(with.fwd_compute_s - without.fwd_compute_s, fwd, 1e-12);
  EXPECT_NEAR(with.bwd_compute_s - without.bwd_compute_s, bwd, 1e-12);
  // Selective recompute of the activation repeats the clamp's forward.
  EXPECT_NEAR(with.selective_recompute_s - without.selective_recompute_s, memory_bound_time_s(4 * in_bytes, c, on), 1e-12);
  // The simulator's instructions carry the same seconds: the clamp on expert_act, the bias on fc2.
  const auto ops_on = op_costs(b, ctx, c, on), ops_off = op_costs(b, ctx, c, off);
  EXPECT_NEAR(ops_on[4].fwd_s - ops_off[4].fwd_s, memory_bound_time_s(4 * in_bytes, c, on), 1e-12);
  EXPECT_NEAR(ops_on[moe::kDown].fwd_s - ops_off[moe::kDown].fwd_s, memory_bound_time_s(6 * out_bytes, c, on), 1e-12);
  // Memory: the clamped copy of fc1's output is saved for the fused unit's backward, unless selective
  // recompute reruns the activation.
  EXPECT_EQ(with.saved_bytes_none - without.saved_bytes_none, in_bytes);
  EXPECT_EQ(with.saved_bytes_selective, without.saved_bytes_selective);
}

TEST(expert_epilogue, block_scaled_formats_take_the_fused_grouped_mlp) {
  const ir::Block b = clamped_biased_block();
  const ir::ClusterSpec c = ir::cluster_preset("b200");  // block-scaled formats need Blackwell
  for (const auto format : {ir::LinearFormat::mxfp8, ir::LinearFormat::nvfp4}) {
    const ShardContext ctx = context(format);
    EXPECT_EQ(block_cost(b, ctx, c, params(true)).fwd_compute_s, block_cost(b, ctx, c, params(false)).fwd_compute_s);
  }
  // Per-tensor fp8 keeps the eager path (Megatron-Bridge's fused grouped MLP is block-scaled only).
  const ShardContext fp8 = context(ir::LinearFormat::fp8);
  EXPECT_GT(block_cost(b, fp8, c, params(true)).fwd_compute_s, block_cost(b, fp8, c, params(false)).fwd_compute_s);
}

TEST(expert_epilogue, nothing_without_biases_or_clamp) {
  // The plain MoE block (Mixtral, Qwen3, DeepSeek): the profile flag changes nothing.
  const ir::Block b = moe::block(kExperts);
  const ir::ClusterSpec c = round::cluster();
  const ShardContext ctx = context(ir::LinearFormat::none);
  EXPECT_EQ(block_cost(b, ctx, c, params(true)).fwd_compute_s, block_cost(b, ctx, c, params(false)).fwd_compute_s);
  EXPECT_EQ(block_cost(b, ctx, c, params(true)).bwd_compute_s, block_cost(b, ctx, c, params(false)).bwd_compute_s);
}

TEST(expert_epilogue, megatron_core_claims_it_and_the_hf_profiles_do_not) {
  EXPECT_TRUE(framework_profile("megatron-core").eager_expert_epilogue);
  EXPECT_TRUE(framework_profile("megatron-bridge").eager_expert_epilogue);
  EXPECT_FALSE(framework_profile("pytorch-fsdp").eager_expert_epilogue);
  EXPECT_FALSE(framework_profile("torchtitan").eager_expert_epilogue);
  const ir::GpuSpec h100 = ir::cluster_preset("h100-sxm").gpu;
  EXPECT_TRUE(cost_params_for(h100, framework_profile("nemo")).eager_expert_epilogue);
  EXPECT_FALSE(cost_params_for(h100, framework_profile("deepspeed")).eager_expert_epilogue);
}

}  // namespace
}  // namespace mgt::cost
