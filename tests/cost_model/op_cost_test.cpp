// op_costs splits block_cost per op: the shares must add up to the block's totals exactly, so the
// simulator (which prices ops) and the estimator (which prices blocks) cannot drift apart.
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mgt::cost {
namespace {

TEST(op_costs, shares_sum_to_block_cost_for_every_block_and_sharding) {
  for (const char* model : {"Llama-3.1-8B.json", "Mixtral-8x7B.json", "GPT-2.json", "DeepSeek-V3.json"}) {
    const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/" + model);
    const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
    for (const ShardContext& ctx : {ShardContext{1, 1024, 1, 1, false, ir::DType::bf16, 1, false},
                                   ShardContext{2, 1024, 2, 2, true, ir::DType::bf16, 2, false},
                                   ShardContext{1, 1024, 4, 1, false, ir::DType::bf16, 1, false}}) {
      for (const auto& block : graph.blocks) {
        const BlockCost total = block_cost(block, ctx, cluster, {});
        const std::vector<OpCost> ops = op_costs(block, ctx, cluster, {});
        ASSERT_EQ(ops.size(), block.ops.size());
        double fwd = 0, bwd = 0, selective = 0;
        size_t fwd_collectives = 0, bwd_collectives = 0;
        for (const auto& op : ops) {
          EXPECT_GE(op.bwd_data_s, 0.0);
          EXPECT_GE(op.bwd_weight_s, 0.0);
          fwd += op.fwd_s;
          bwd += op.bwd_data_s + op.bwd_weight_s;
          selective += op.selective_recompute_s;
          fwd_collectives += op.fwd_collectives.size();
          bwd_collectives += op.bwd_collectives.size();
        }
        const std::string where = std::string(model) + " " + block.name;
        EXPECT_NEAR(fwd, total.fwd_compute_s, 1e-12 * total.fwd_compute_s + 1e-15) << where;
        EXPECT_NEAR(bwd, total.bwd_compute_s, 1e-12 * total.bwd_compute_s + 1e-15) << where;
        EXPECT_NEAR(selective, total.selective_recompute_s, 1e-12 * total.selective_recompute_s + 1e-15) << where;
        EXPECT_EQ(fwd_collectives, total.fwd_collectives.size()) << where;
        EXPECT_EQ(bwd_collectives, total.bwd_collectives.size()) << where;
      }
    }
  }
}

TEST(op_costs, weight_gradient_only_for_ops_with_parameters) {
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Llama-3.1-8B.json");
  const ir::Block& layer = graph.blocks[1];
  const std::vector<OpCost> ops = op_costs(layer, {1, 1024, 1, 1, false}, ir::cluster_preset("h100-sxm"), {});
  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::Op& op = layer.ops[i];
    const bool has_weight = op.kind == ir::OpKind::contraction && ir::find_tensor(layer, op.inputs[1])->is_parameter;
    if (has_weight) {
      EXPECT_GT(ops[i].bwd_weight_s, 0.0) << op.name;
    } else {
      EXPECT_EQ(ops[i].bwd_weight_s, 0.0) << op.name;
    }
  }
}

}  // namespace
}  // namespace mgt::cost
