// The MoE dispatcher's host sync (moe_host_sync.hpp; docs/cost-model.md §9): the stall formula on
// hand-chosen kernel times, the kernels Megatron-Core launches after the sync for a small MoE layer,
// and the framework claim that switches it on.
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/moe_host_sync.hpp"

#include "moe_block.hpp"
#include "round_hardware.hpp"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace mgt::cost {
namespace {

constexpr double kUs = 1e-6;

TEST(moe_host_sync, stall_of_kernels_launched_after_a_sync_by_hand) {
  // Host: 5 us to return from the sync, then one launch every 5 us. GPU times 0, 0, 3, 20, 1 us.
  // Kernel k is launched at 5k us; what the GPU has queued before it is the sum of kernels < k:
  //   k=1: 5 - 0 = 5;  k=2: 10 - 0 = 10;  k=3: 15 - 0 = 15;  k=4: 20 - 3 = 17;  k=5: 25 - 23 = 2.
  // The worst is 17 us (the 3 us kernel ran before the host launched the 20 us one), plus the 5 us
  // return from the sync: 22 us idle.
  EXPECT_NEAR(host_sync_stall_s(5 * kUs, {0, 0, 3 * kUs, 20 * kUs, 1 * kUs}), 22 * kUs, 1e-12);
  // A first kernel longer than everything the host still has to launch: only its own launch and the
  // return from the sync are exposed (5 + 5 us).
  EXPECT_NEAR(host_sync_stall_s(5 * kUs, {100 * kUs, 1 * kUs, 1 * kUs}), 10 * kUs, 1e-12);
  EXPECT_EQ(host_sync_stall_s(5 * kUs, {}), 0.0);
  EXPECT_EQ(host_sync_stall_s(0.0, {1 * kUs}), 0.0);
}

// The round cluster (1 PFLOP/s, GEMMs at half of it) with a 10 us launch: the host time per launch.
constexpr double kLaunch = 10 * kUs;
CostParams launch_params(bool sync) {
  CostParams p = round::params();
  p.kernel_floor_s = kLaunch;
  p.moe_dispatch_host_sync = sync;
  return p;
}

// The router's forward with the sync minus without it, from block_cost (the estimator) and from
// op_costs (the simulator's router instruction): the same seconds.
double stall_of(int64_t experts, int64_t ep) {
  ShardContext ctx;
  ctx.micro_batch = 1;
  ctx.seq_len = 4096;
  ctx.ep = ep;
  const ir::Block b = moe::block(experts);
  const ir::ClusterSpec c = round::cluster();
  const double block = block_cost(b, ctx, c, launch_params(true)).fwd_compute_s -
                       block_cost(b, ctx, c, launch_params(false)).fwd_compute_s;
  const double router = op_costs(b, ctx, c, launch_params(true))[1].fwd_s - op_costs(b, ctx, c, launch_params(false))[1].fwd_s;
  EXPECT_NEAR(block, router, 1e-12);
  EXPECT_EQ(block_cost(b, ctx, c, launch_params(true)).bwd_compute_s,
            block_cost(b, ctx, c, launch_params(false)).bwd_compute_s);  // the backward reuses the host splits
  return block;
}

// fc1 (gate + up) on 4096 tokens x top-2: 2 * 4096 * 2 * 1024 * 1024 * 2 FLOP = 34.36 GFLOP at
// 0.5 PFLOP/s = 68.7 us, one GEMM per local expert of 68.7 / E_local us + the 10 us launch floor, so
// every expert GEMM outlasts a launch and the host is ahead once the first one runs.
TEST(moe_host_sync, two_local_experts_expose_the_sync_and_three_launches) {
  // E = 4, ep = 2: 2 local experts. After the sync: all-to-all (0), sort by expert (0), fc1 e0
  // (44.4 us), fc1 e1, act, fc2 e0, fc2 e1, sort back (0), all-to-all (0), unpermute.
  //   k=1: 10;  k=2: 20;  k=3: 30;  k=4: 40 - 44.4 < 0;  k=9: 90 - (2 * 44.4 + act + 2 * fc2 >= 30) < 0.
  // Worst 30 us + 10 us return from the sync = 40 us.
  EXPECT_NEAR(stall_of(4, 2), 40 * kUs, 1e-9);
}

TEST(moe_host_sync, one_local_expert_has_no_sort) {
  // E = 2, ep = 2: all-to-all (0), fc1 (78.7 us), act, fc2, all-to-all (0), unpermute.
  //   k=1: 10;  k=2: 20;  k=3: 30 - 78.7 < 0; later terms smaller. 20 + 10 = 30 us.
  EXPECT_NEAR(stall_of(2, 2), 30 * kUs, 1e-9);
}

TEST(moe_host_sync, megatron_core_claims_the_sync_and_hybridep_removes_it) {
  EXPECT_TRUE(framework_profile("megatron-core").moe_dispatch_host_sync);
  EXPECT_TRUE(framework_profile("megatron-bridge").moe_dispatch_host_sync);
  EXPECT_FALSE(framework_profile("pytorch-fsdp").moe_dispatch_host_sync);
  EXPECT_FALSE(framework_profile("torchtitan").moe_dispatch_host_sync);
  EXPECT_FALSE(select_framework("megatron-bridge", {"HybridEP"}).profile.moe_dispatch_host_sync);
  EXPECT_TRUE(select_framework("megatron-core", {"hybridep", "alltoall-dispatcher"}).profile.moe_dispatch_host_sync);
  const ir::GpuSpec h100 = ir::cluster_preset("h100-sxm").gpu;
  EXPECT_TRUE(cost_params_for(h100, framework_profile("nemo")).moe_dispatch_host_sync);
  EXPECT_FALSE(cost_params_for(h100, framework_profile("deepspeed")).moe_dispatch_host_sync);
}

}  // namespace
}  // namespace mgt::cost
