// The MoE dispatcher's host sync (docs/cost-model.md §9) reaches the estimator and the simulated
// schedule alike: it is part of the router's forward kernel time (op_costs), which both price.
#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/cost_model/simulator.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/lower.hpp"

#include "../common/plans.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mgt::plan {
namespace {

struct Times {
  double estimated_compute_s = 0, simulated_compute_s = 0, estimated_step_s = 0, simulated_step_s = 0;
};

Times times(const ir::Graph& graph, const ir::ClusterSpec& cluster, const ir::Plan& plan,
            const cost::TrainingSettings& settings, bool sync) {
  cost::CostParams params = cost::cost_params_for(cluster.gpu, cost::framework_profile("megatron-core"));
  params.moe_dispatch_host_sync = sync;
  // The launch time h is then the kernel floor (4 us), the hand calculation below; the eager host
  // time per launch (16.5 us) and the block's host bound are tested in host_dispatch_test.cpp.
  params.host_launch_s = 0;
  const cost::Estimate e = cost::Estimator(graph, cluster, 8, settings, params).estimate(plan);
  const cost::SimulationResult r =
      cost::Simulator(graph, cluster, settings, params).simulate(lower_to_schedule(graph, plan, settings, 8, cluster));
  return {e.time.compute_s, r.breakdown.compute_s, e.step_time_s, r.step_time_s};
}

// Qwen3-30B-A3B (48 MoE layers, 128 experts of ffn 768, top-8, hidden 2048) on 8 H100, seq 1024,
// 16 sequences, micro-batch 1, ep = dp_shard = 8 / pp: 128 / ep local experts. With the host's
// time per launch set to 0, the launch time h is kernel_floor_s = 4 us. After the sync: all-to-all (0), sort (0),
// then fc1 per local expert: 1024 tokens x 8 x 2048 x 768 x 2 (gate, up) x 2 FLOP = 25.8 GFLOP over
// 128 / ep experts, each >= 4 us (its kernel floor) + its FLOPs, so the host is ahead from k = 3 on:
// stall = h + 3h = 16 us per MoE layer and micro-batch (any later zero-time launch, after >= 33 GEMMs
// and the activation of >= h each, gives at most 4h - their FLOP time < 3h).
//   pp 1: 48 layers x 2 micro-batches x 16 us = 1.536 ms;  pp 2: 24 layers x 4 micro-batches x 16 us.
// The estimator and the simulated schedule add exactly that to compute. Their step times also move
// by the exposed data-parallel terms: the estimator hides ZeRO-1's parameter all-gather under the
// (now longer) forward window, the schedule does not place it there (docs/simulator.md §8), so the
// step deltas are only required to be positive.
TEST(moe_host_sync, estimator_and_simulator_add_the_same_stall) {
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Qwen3-30B-A3B.json");
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  cost::TrainingSettings settings;
  settings.seq_len = 1024;
  settings.global_batch_tokens = 16 * 1024;
  for (const int64_t pp : {1, 2}) {
    // ep carved from dp_shard with ZeRO-1 (Megatron's distributed optimizer): no FSDP gathers.
    ir::Plan plan = test::plan_of(1, 8 / pp, 1, 1, pp, 1, 1);
    plan.ep = 8 / pp;
    plan.zero_stage = 1;
    const Times with = times(graph, cluster, plan, settings, true), without = times(graph, cluster, plan, settings, false);
    const double layers = 48.0 / double(pp), micro_batches = 2.0 * double(pp), stall_s = 16e-6;
    EXPECT_NEAR(with.estimated_compute_s - without.estimated_compute_s, layers * micro_batches * stall_s, 1e-9) << pp;
    EXPECT_NEAR(with.simulated_compute_s - without.simulated_compute_s, layers * micro_batches * stall_s, 1e-9) << pp;
    EXPECT_GT(with.estimated_step_s, without.estimated_step_s) << pp;
    EXPECT_GT(with.simulated_step_s, without.simulated_step_s) << pp;
  }
}

}  // namespace
}  // namespace mgt::plan
