// Routed experts as the kernels run them (layer_cost.cpp, docs/cost-model.md §2.4): one GEMM per local
// expert over the tokens routed to it (a grouped GEMM), and the dispatcher's permutation copies.
// Expected times are worked out by hand on the round cluster with a shape-dependent GEMM efficiency.
#include "mgt/cost_model/layer_cost.hpp"

#include "moe_block.hpp"
#include "round_hardware.hpp"

#include <gtest/gtest.h>

namespace mgt::cost {
namespace {

constexpr double kUs = 1e-6;

// GEMM efficiency 0.5 * x/(x + 1024) along each of m, n and k (no kernel floor): 1/2 at 1024, 2/3 at 2048.
CostParams shaped_params() {
  CostParams p = round::params();
  p.gemm_half_efficiency_dim = 1024;
  return p;
}

// 4096 tokens of one sequence, E = 8 experts, top-2, on `ep` expert-parallel ranks.
std::vector<OpCost> moe_ops(int64_t ep) {
  ShardContext ctx;
  ctx.micro_batch = 1;
  ctx.seq_len = 4096;
  ctx.ep = ep;
  return op_costs(moe::block(8), ctx, round::cluster(), shaped_params());
}

TEST(moe_grouped_gemm, each_local_expert_runs_a_gemm_of_its_own_tokens) {
  // The gate projection: 4096 tokens x top-2 = 8192 token-expert rows, x (h 1024) -> (f 1024):
  // 2 * 8192 * 1024 * 1024 = 17.18 GFLOP on every layout.
  const double flops = 2.0 * 8192 * 1024 * 1024;
  // ep = 2: 4 local experts of 8192 / 4 = 2048 rows each, GEMMs 2048 x 1024 x 1024:
  //   efficiency 0.5 * (2/3) * (1/2) * (1/2) = 1/12, so 17.18e9 / (1e15 / 12) = 206.2 us.
  // (As one GEMM of 4096 x 2048 x 1024 it would be 0.5 * 0.8 * (2/3) * (1/2) = 2/15: 128.8 us.)
  const auto ep2 = moe_ops(2);
  round::expect_near_rel(ep2[moe::kGate].fwd_s, flops * 12 / 1e15);
  // Backward: dA (2048 x 1024 x 1024) and dW (1024 x 1024 x 2048) per expert, the same efficiency.
  round::expect_near_rel(ep2[moe::kGate].bwd_data_s, flops * 12 / 1e15);
  round::expect_near_rel(ep2[moe::kGate].bwd_weight_s, flops * 12 / 1e15);
  // The down projection (top-k batches the GEMMs, "bsef,efh->bseh"): the same rows per expert and shape.
  round::expect_near_rel(ep2[moe::kDown].fwd_s, flops * 12 / 1e15);
  // ep = 8: one local expert of all 8192 rows: 0.5 * (8192/9216) * (1/2) * (1/2) = 1/9: 154.6 us.
  round::expect_near_rel(moe_ops(8)[moe::kGate].fwd_s, flops * 9 / 1e15);
  // ep = 1: 8 experts of 1024 rows: 0.5 * (1/2)^3 = 1/16: 274.9 us.
  round::expect_near_rel(moe_ops(1)[moe::kGate].fwd_s, flops * 16 / 1e15);
  EXPECT_GT(moe_ops(1)[moe::kGate].fwd_s, 270 * kUs);
}

TEST(moe_grouped_gemm, dispatcher_copies_every_routed_row_once_or_three_times) {
  // The router: scores and top-k read/write 4 x the logits (4096 x 8 x 2 B = 64 KiB), then the
  // permutation into expert order reads and writes the 4096 x 2 routed rows of 1024 bf16 (16 MiB):
  // 2 x 16 MiB at 1 TB/s. With 4 local experts behind an all-to-all (ep = 2) the rows are also sorted
  // by local expert after the dispatch and back before the combine: 3 copies.
  const double logits = 4.0 * 4096 * 8 * 2, rows = 4096.0 * 2 * 1024 * 2;
  round::expect_near_rel(moe_ops(1)[moe::kRouter].fwd_s, (logits + 2 * rows) / round::kHbm);
  round::expect_near_rel(moe_ops(8)[moe::kRouter].fwd_s, (logits + 2 * rows) / round::kHbm);  // 1 local expert
  round::expect_near_rel(moe_ops(2)[moe::kRouter].fwd_s, (logits + 3 * 2 * rows) / round::kHbm);
  // The gradients go through the same copies in backward.
  round::expect_near_rel(moe_ops(2)[moe::kRouter].bwd_data_s + moe_ops(2)[moe::kRouter].bwd_weight_s,
                         (logits + 3 * 2 * rows) / round::kHbm);
}

}  // namespace
}  // namespace mgt::cost
