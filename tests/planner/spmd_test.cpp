// Tests for role-less sharding plans (planner/src/spmd.cpp): propagation and lowering of hand-worked
// plans on a 2-layer MLP, plan JSON errors, and the search's ranking on shapes whose best split is
// known from first principles.
#include "mgt/planner/spmd.hpp"
#include "mgt/cost_model/collective.hpp"

#include "mgt/cost_model/compute.hpp"
#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

namespace {

using mgt::ir::TensorSharding;
using mgt::plan::SpmdCollective;
using mgt::ir::CollectiveKind;
using mgt::plan::kAllSlice;
using mgt::plan::SpmdPlan;

// y[i,j] = relu(x[i,j] . w1[j,k]) . w2[k,j]: i tokens, j model width, k hidden width.
mgt::ir::Graph mlp(int64_t tokens, int64_t width, int64_t hidden) {
  using mgt::ir::Dim;
  mgt::ir::Block b;
  b.name = "main";
  b.is_layer = false;
  b.tensors = {{"x", {{'i', tokens}, {'j', width}}, false},
               {"w1", {{'j', width}, {'k', hidden}}, true},
               {"h", {{'i', tokens}, {'k', hidden}}, false},
               {"r", {{'i', tokens}, {'k', hidden}}, false},
               {"w2", {{'k', hidden}, {'j', width}}, true},
               {"y", {{'i', tokens}, {'j', width}}, false}};
  mgt::ir::Op mm1{"mm1", mgt::ir::OpKind::contraction, {"x", "w1"}, "h", "ij,jk->ik"};
  mgt::ir::Op relu{"relu", mgt::ir::OpKind::activation, {"h"}, "r", ""};
  relu.activation = mgt::ir::ActivationKind::relu;
  mgt::ir::Op mm2{"mm2", mgt::ir::OpKind::contraction, {"r", "w2"}, "y", "ik,kj->ij"};
  b.ops = {mm1, relu, mm2};
  mgt::ir::Graph g;
  g.info.name = "mlp";
  g.blocks = {b};
  mgt::ir::verify(g, "mlp");
  return g;
}

SpmdPlan plan(std::vector<int64_t> mesh, std::vector<mgt::plan::AxisSplit> splits) { return {mesh, splits}; }

TEST(LowerSpmd, ColumnThenRowIsOneAllReduceAndAFreeSlice) {
  // w1 split on its output columns over 4 devices: local 8x16 . 16x8 and 8x8 . 8x16 matmuls, the
  // second leaving partial sums of the full 8x16 output. w2 is not split by the plan, so mm2 slices
  // its 32 rows to 8 locally (no communication) before the all-reduce.
  const auto low = mgt::plan::lower_spmd(mlp(8, 16, 32), plan({4}, {{"w1", 1}}), "t");
  ASSERT_EQ(low.collectives.size(), 2u);
  EXPECT_EQ(low.collectives[0], (SpmdCollective{kAllSlice, {0}, "w2", "mm2", {32, 16}, {8, 16}}));
  const SpmdCollective want{CollectiveKind::all_reduce, {0}, "y", "mm2", {8, 16}, {8, 16}};
  EXPECT_EQ(low.collectives[1], want);
  EXPECT_EQ(low.ops[0].result_shape, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(low.ops[1].result_shape, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(low.ops[2].result_shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(low.ops[2].operands[1], (TensorSharding{{{0}, {}}, {}}));
  EXPECT_EQ(low.ops[2].raw_result, (TensorSharding{{{}, {}}, {0}}));
  EXPECT_TRUE(low.ops[2].result.is_replicated());
}

TEST(LowerSpmd, DataParallelNeedsNoForwardCollective) {
  const auto low = mgt::plan::lower_spmd(mlp(8, 16, 32), plan({4}, {{"x", 0}}), "t");
  EXPECT_TRUE(low.collectives.empty());
  EXPECT_EQ(low.ops[0].result_shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(low.ops[2].result_shape, (std::vector<int64_t>{2, 16}));
}

TEST(LowerSpmd, SplitContractedDimSlicesTheActivationAndReduces) {
  // w1 split on j (contracted): x is sliced to 8x4, mm1 leaves partial 8x32 sums.
  const auto low = mgt::plan::lower_spmd(mlp(8, 16, 32), plan({4}, {{"w1", 0}}), "t");
  EXPECT_EQ(low.collectives, (std::vector<SpmdCollective>{
                                 {kAllSlice, {0}, "x", "mm1", {8, 16}, {8, 4}},
                                 {CollectiveKind::all_reduce, {0}, "h", "mm1", {8, 32}, {8, 32}}}));
  EXPECT_EQ(low.ops[2].result_shape, (std::vector<int64_t>{8, 16}));
}

TEST(LowerSpmd, TwoDimensionalMeshDataAndTensorParallel) {
  // 2x2: axis 0 splits tokens, axis 1 the hidden width. mm2 slices w2 rows by axis 1 and reduces
  // the 4x16 output over axis 1 only.
  const auto low = mgt::plan::lower_spmd(mlp(8, 16, 32), plan({2, 2}, {{"x", 0}, {"w1", 1}}), "t");
  EXPECT_EQ(low.collectives, (std::vector<SpmdCollective>{
                                 {kAllSlice, {1}, "w2", "mm2", {32, 16}, {16, 16}},
                                 {CollectiveKind::all_reduce, {1}, "y", "mm2", {4, 16}, {4, 16}}}));
  EXPECT_EQ(low.ops[0].result_shape, (std::vector<int64_t>{4, 16}));
}

TEST(LowerSpmd, ConflictingSplitIsGathered) {
  // Axis 0 splits w1's columns (k), axis 1 splits w2's rows (also k): mm2 keeps r's k on axis 0 and
  // must gather w2's rows over axis 1 before slicing them by axis 0.
  const auto low = mgt::plan::lower_spmd(mlp(8, 16, 32), plan({2, 2}, {{"w1", 1}, {"w2", 0}}), "t");
  ASSERT_EQ(low.collectives.size(), 3u);
  EXPECT_EQ(low.collectives[0], (SpmdCollective{kAllSlice, {0}, "w2", "mm2", {16, 16}, {8, 16}}));
  EXPECT_EQ(low.collectives[1], (SpmdCollective{CollectiveKind::all_gather, {1}, "w2", "mm2", {8, 16}, {16, 16}}));
  EXPECT_EQ(low.collectives[2].kind, CollectiveKind::all_reduce);
  EXPECT_EQ(low.collectives[2].axes, (std::vector<int>{0}));
}

TEST(LowerSpmd, RejectsBadPlansWithTheField) {
  const auto g = mlp(8, 16, 32);
  EXPECT_THROW(mgt::plan::lower_spmd(g, plan({3}, {{"x", 0}}), "t"), mgt::ir::InputError);  // 8 % 3
  EXPECT_THROW(mgt::plan::lower_spmd(g, plan({2}, {{"h", 0}}), "t"), mgt::ir::InputError);  // not an input
  EXPECT_THROW(mgt::plan::lower_spmd(g, plan({2}, {{"x", 2}}), "t"), mgt::ir::InputError);  // no dim 2
  try {
    mgt::plan::lower_spmd(g, plan({2}, {{"nope", 0}}), "p.json");
    FAIL();
  } catch (const mgt::ir::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: field 'splits[0].tensor'"), std::string::npos) << e.what();
  }
}

TEST(SpmdPlanJson, RoundTripAndErrors) {
  const SpmdPlan p = plan({2, 4}, {{"x", 0}, {"w1", 1}});
  EXPECT_EQ(mgt::plan::spmd_plan_from_json(mgt::plan::to_json(p), "t"), p);
  EXPECT_EQ(mgt::plan::to_string(p), "mesh=2x4 x[0]@0 w1[1]@1");
  auto bad = mgt::plan::to_json(p);
  bad["splits"].erase(1);
  EXPECT_THROW(mgt::plan::spmd_plan_from_json(bad, "t"), mgt::ir::InputError);
  auto typo = mgt::plan::to_json(p);
  typo["meshes"] = 1;
  EXPECT_THROW(mgt::plan::spmd_plan_from_json(typo, "t"), mgt::ir::InputError);
}

TEST(EstimateSpmd, ColumnThenRowStepByHand) {
  // mlp(8, 16, 32) on 4 devices, w1 split by columns. Per device: mm1 is an (8 x 16) . (16 x 8) GEMM,
  // relu reads and writes 8x8 bf16 (256 bytes), mm2 an (8 x 8) . (8 x 16) GEMM; each 3x for fwd+bwd.
  // Communication: the forward all-reduce of y (8x16 bf16 = 256 bytes) and, for the free forward slice
  // of the replicated w2, a backward all-gather of its gradient (32x16 bf16 = 1024 bytes). No weight
  // gradient is all-reduced: every op's split axis (0) is on both of its operands.
  const auto cluster = mgt::ir::cluster_preset("h100-sxm");
  const auto dtype = mgt::ir::DType::bf16;
  const mgt::cost::CostParams params;
  const auto e = mgt::plan::estimate_spmd(mlp(8, 16, 32), plan({4}, {{"w1", 1}}), cluster, 4, dtype);
  const double compute = 3 * (mgt::cost::gemm_time_s(8, 8, 16, cluster, dtype, params) +
                              mgt::cost::memory_bound_time_s(256, cluster, params) +
                              mgt::cost::gemm_time_s(8, 16, 8, cluster, dtype, params));
  EXPECT_DOUBLE_EQ(e.compute_s, compute);
  const mgt::cost::Topology topology(cluster, 4);
  const auto link = topology.link_for_group({{{4, 1}}});
  const double comm = mgt::cost::collective_time_s(cluster, mgt::cost::CollectiveKind::all_reduce, 4, 256, link) +
                      mgt::cost::collective_time_s(cluster, mgt::cost::CollectiveKind::all_gather, 4, 1024, link);
  EXPECT_DOUBLE_EQ(e.comm_s, comm);
  EXPECT_EQ(e.collectives, 2);
  // States: w1's local 16x8 and the whole 32x16 w2 (the plan does not split it) at 16 bytes each;
  // activations h, r (8x8) and y (8x16) in bf16.
  EXPECT_EQ(e.param_bytes, (16 * 8 + 32 * 16) * 16);
  EXPECT_EQ(e.peak_bytes, e.param_bytes + (64 + 64 + 128) * 2);
  EXPECT_DOUBLE_EQ(e.step_s, compute + comm);
}

TEST(EstimateSpmd, DataParallelAllReducesWeightGradients) {
  // mlp(8, 16, 32) on 4 devices, tokens split: no forward collective; backward all-reduces the
  // gradients of the replicated w1 (16x32) and w2 (32x16), 1024 bf16 bytes each, over the 4 devices.
  const auto cluster = mgt::ir::cluster_preset("h100-sxm");
  const auto e = mgt::plan::estimate_spmd(mlp(8, 16, 32), plan({4}, {{"x", 0}}), cluster, 4, mgt::ir::DType::bf16);
  const mgt::cost::Topology topology(cluster, 4);
  const double ar = mgt::cost::collective_time_s(cluster, mgt::cost::CollectiveKind::all_reduce, 4, 1024,
                                                 topology.link_for_group({{{4, 1}}}));
  EXPECT_DOUBLE_EQ(e.comm_s, 2 * ar);
  EXPECT_EQ(e.collectives, 2);
  EXPECT_EQ(e.param_bytes, 2 * 16 * 32 * 16);
}

TEST(SearchSpmd, ManyTokensSmallWeightsPrefersSplittingTokens) {
  // 1M tokens x 1024 width, 4096 hidden: tensor parallel would all-reduce 1M x 1024 activations
  // (2 GiB in bf16) per step, data parallel only the 8M-parameter gradients (16 MiB in bf16).
  const auto cluster = mgt::ir::cluster_preset("h100-sxm");
  const auto result = mgt::plan::search_spmd(mlp(1 << 20, 1024, 4096), cluster, 8, mgt::ir::DType::bf16, 3);
  ASSERT_FALSE(result.plans.empty());
  const SpmdPlan& best = result.plans[0].plan;
  for (const auto& s : best.splits) EXPECT_EQ(s, (mgt::plan::AxisSplit{"x", 0})) << mgt::plan::to_string(best);
  EXPECT_GT(result.feasible, 0);
}

TEST(SearchSpmd, FewTokensHugeWeightsAvoidsDataParallel) {
  // 64 tokens, two 8192 x 32768 weights (537M parameters): replicating them (data parallel) all-reduces
  // 1 GiB of bf16 gradients per step; splitting the hidden width all-reduces 64 x 8192 activations.
  const auto cluster = mgt::ir::cluster_preset("h100-sxm");
  const auto result = mgt::plan::search_spmd(mlp(64, 8192, 32768), cluster, 8, mgt::ir::DType::bf16, 3);
  ASSERT_FALSE(result.plans.empty());
  const SpmdPlan& best = result.plans[0].plan;
  bool splits_a_weight = false;
  for (const auto& s : best.splits) splits_a_weight |= s.tensor != "x";
  EXPECT_TRUE(splits_a_weight) << mgt::plan::to_string(best);
  // Deterministic: the same search gives the same ranking.
  const auto again = mgt::plan::search_spmd(mlp(64, 8192, 32768), cluster, 8, mgt::ir::DType::bf16, 3);
  ASSERT_EQ(again.plans.size(), result.plans.size());
  for (size_t i = 0; i < result.plans.size(); ++i) EXPECT_EQ(again.plans[i].plan, result.plans[i].plan);
}

}  // namespace
