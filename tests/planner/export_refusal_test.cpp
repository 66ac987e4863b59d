// export_refusal is the exporters' own refusal rule set (they throw what it returns), so the search can
// rank only expressible plans; and estimate_out_of_range names what made an estimate unusable.
#include "mgt/planner/export.hpp"
#include "mgt/planner/search.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mgt::plan {
namespace {

// Every candidate of a 16-GPU, 32-layer, 8-expert search (pp, vpp, tp, cp, ep, dp splits, recompute):
// the predicate refuses exactly the plans whose exporter throws, for every format.
TEST(ExportRefusal, AgreesWithTheExporterOnEveryCandidate) {
  SearchOptions options;
  options.num_layers = 32;
  options.num_experts = 8;
  const auto candidates = enumerate_candidates(16, options);
  ASSERT_GT(candidates.size(), 1000u);
  const ExportFormat formats[] = {ExportFormat::accelerate, ExportFormat::axolotl,   ExportFormat::torchtitan,
                                  ExportFormat::megatron,   ExportFormat::deepspeed, ExportFormat::torchtitan_0_2};
  int64_t refused = 0, expressed = 0;
  for (ir::Plan plan : candidates) {
    plan.grad_accum = 1;  // the exporters' batch check derives the global batch from it (global_batch_seqs 0)
    for (ExportFormat format : formats) {
      const ExportContext context{plan, "", "Llama-3.1-8B", 16, 8, 8192, 0, 32};
      const auto refusal = export_refusal(format, context);
      std::string thrown;
      const bool writes = can_express(format, context, &thrown);
      EXPECT_EQ(!refusal.has_value(), writes) << ir::to_string(plan) << " format " << int(format) << ": " << thrown;
      if (refusal) {
        EXPECT_NE(thrown.find(refusal->problem), std::string::npos) << thrown;
        ++refused;
      } else {
        ++expressed;
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(expressed, 0);
}

TEST(ExportRefusal, DeepSpeedRefusesTensorParallelWithTheExportersWords) {
  ir::Plan plan;
  plan.tp = 2;
  plan.dp_shard = 8;
  const ExportContext context{plan, "", "", 16, 8, 8192, 0, 32};
  const auto refusal = export_refusal(ExportFormat::deepspeed, context);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->field, "tp");
  EXPECT_EQ(refusal->problem, "the DeepSpeed export writes no tensor parallelism (AutoTP is not supported yet) (tp 2)");
  plan.tp = 1;
  plan.dp_shard = 16;
  EXPECT_FALSE(export_refusal(ExportFormat::deepspeed, {plan, "", "", 16, 8, 8192, 0, 32}).has_value());
}

cost::Estimate good_estimate() {
  cost::Estimate e;
  e.time.compute_s = 1.0;
  e.step_time_s = 1.0;
  e.tokens_per_s_per_gpu = 1000;
  e.mfu = 0.4;
  e.memory.parameters_bytes = 10;
  e.memory.peak_bytes = 10;
  return e;
}

TEST(EstimateOutOfRange, NamesTheCause) {
  EXPECT_FALSE(estimate_out_of_range(good_estimate()).has_value());

  cost::Estimate inf_tp = good_estimate();
  inf_tp.time.exposed_tp_s = std::numeric_limits<double>::infinity();
  inf_tp.step_time_s = std::numeric_limits<double>::infinity();
  ASSERT_TRUE(estimate_out_of_range(inf_tp).has_value());
  EXPECT_NE(estimate_out_of_range(inf_tp)->find("exposed TP time inf s"), std::string::npos);

  cost::Estimate nan_step = good_estimate();
  nan_step.step_time_s = std::nan("");
  ASSERT_TRUE(estimate_out_of_range(nan_step).has_value());
  EXPECT_NE(estimate_out_of_range(nan_step)->find("step time nan s"), std::string::npos);

  cost::Estimate zero_throughput = good_estimate();
  zero_throughput.tokens_per_s_per_gpu = 0;
  ASSERT_TRUE(estimate_out_of_range(zero_throughput).has_value());
  EXPECT_NE(estimate_out_of_range(zero_throughput)->find("throughput 0 tokens/s per GPU"), std::string::npos);

  cost::Estimate negative_memory = good_estimate();
  negative_memory.memory.activations_bytes = -5;
  ASSERT_TRUE(estimate_out_of_range(negative_memory).has_value());
  EXPECT_NE(estimate_out_of_range(negative_memory)->find("activations memory -5 bytes"), std::string::npos);
}

}  // namespace
}  // namespace mgt::plan
