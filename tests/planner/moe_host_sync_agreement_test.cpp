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

struct Steps {
  double estimated_s = 0, simulated_s = 0;
};

Steps step_times(const ir::Graph& graph, const ir::ClusterSpec& cluster, const ir::Plan& plan,
                 const cost::TrainingSettings& settings, bool sync) {
  cost::CostParams params = cost::cost_params_for(cluster.gpu, cost::framework_profile("megatron-core"));
  params.moe_dispatch_host_sync = sync;
  const cost::Estimator estimator(graph, cluster, 8, settings, params);
  const cost::Simulator simulator(graph, cluster, settings, params);
  return {estimator.estimate(plan).step_time_s,
          simulator.simulate(lower_to_schedule(graph, plan, settings, 8, cluster)).step_time_s};
}

TEST(moe_host_sync, estimator_and_simulator_add_the_same_stall) {
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Qwen3-30B-A3B.json");
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  cost::TrainingSettings settings;
  settings.seq_len = 1024;
  settings.global_batch_tokens = 16 * 1024;
  for (const int64_t pp : {1, 2}) {
    ir::Plan plan = test::plan_of(8 / pp, 1, 1, 1, pp, 1, 1);
    plan.ep = 8 / pp;
    const Steps with = step_times(graph, cluster, plan, settings, true);
    const Steps without = step_times(graph, cluster, plan, settings, false);
    const double est = with.estimated_s - without.estimated_s, sim = with.simulated_s - without.simulated_s;
    EXPECT_GT(est, 0) << "pp " << pp;
    // Each MoE layer's router forward grows by the same seconds in both; the step adds it once per
    // layer and micro-batch on the critical path, which the estimator and the schedule agree on.
    EXPECT_NEAR(sim, est, 0.05 * est) << "pp " << pp;
  }
}

}  // namespace
}  // namespace mgt::plan
