// ir::Layout: the plan's meaning, checked against values worked out by hand.
#include "mgt/ir/error.hpp"
#include "mgt/ir/layout.hpp"
#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

using namespace mgt::ir;

namespace {
std::string model(const std::string& name) { return std::string(MGT_SOURCE_DIR) + "/examples/models/" + name; }
TrainingSettings settings(int64_t seq_len, int64_t tokens) {
  TrainingSettings s;
  s.seq_len = seq_len;
  s.global_batch_tokens = tokens;
  return s;
}
std::vector<int64_t> chunk_layers(const PipelineSplit& split) {
  std::vector<int64_t> out;
  for (int64_t c = 0; c < split.virtual_stages; ++c) out.push_back(split.layers_in_chunk(c));
  return out;
}
}  // namespace

TEST(PipelineSplit, EqualChunksWhenTheCountDivides) {
  const PipelineSplit split = *PipelineSplit::choose(32, 8, 1);
  EXPECT_TRUE(PipelineSplit::splits(32, 8, 1));
  EXPECT_FALSE(split.uneven());
  EXPECT_EQ(split.layers_per_chunk(), 4);
  EXPECT_EQ(split.chunk_of_layer(0), 0);
  EXPECT_EQ(split.chunk_of_layer(3), 0);
  EXPECT_EQ(split.chunk_of_layer(4), 1);
  EXPECT_EQ(split.chunk_of_layer(31), 7);
  EXPECT_EQ(split.chunk_of_block_after(0), 0);   // the embedding
  EXPECT_EQ(split.chunk_of_block_after(32), 7);  // the LM head, after the last layer
}

TEST(PipelineSplit, UnevenFirstAndLastChunksOneLayerLighter) {
  // Llama 3 405B: 126 layers on 16 stages = 7 + 14 x 8 + 7.
  const PipelineSplit split = *PipelineSplit::choose(126, 16, 1);
  EXPECT_TRUE(split.uneven());
  EXPECT_TRUE(split.embedding_as_layer && split.loss_as_layer);
  EXPECT_EQ(split.layers_per_chunk(), 8);
  EXPECT_EQ(split.chunk_of_layer(6), 0);     // layers 0..6: chunk 0 (7 layers)
  EXPECT_EQ(split.chunk_of_layer(7), 1);     // layers 7..14: chunk 1
  EXPECT_EQ(split.chunk_of_layer(14), 1);
  EXPECT_EQ(split.chunk_of_layer(15), 2);
  EXPECT_EQ(split.chunk_of_layer(118), 14);  // chunk 14: layers 111..118
  EXPECT_EQ(split.chunk_of_layer(119), 15);  // layers 119..125: chunk 15 (7 layers)
  EXPECT_EQ(split.chunk_of_layer(125), 15);
  EXPECT_FALSE(PipelineSplit::splits(5, 8, 1));  // fewer layers than chunks, and none of 5, 6, 7 divides by 8
  EXPECT_FALSE(PipelineSplit::splits(32, 0, 1));
}

TEST(for_each_block_copy, EveryCopyOnceWithTheChunkOfItsLayer) {
  const Graph graph = load_model(model("Llama-3.1-8B.json"));
  const PipelineSplit split = *PipelineSplit::choose(num_layers(graph), 4, 1);
  ASSERT_EQ(split.num_layers, 32);
  std::vector<int64_t> layers_per_chunk(4, 0), others_per_chunk(4, 0);
  int64_t copies = 0;
  for_each_block_copy(graph, split, [&](size_t b, int64_t, int64_t chunk) {
    ++copies;
    (graph.blocks[b].is_layer ? layers_per_chunk : others_per_chunk)[size_t(chunk)] += 1;
  });
  int64_t expected = 0;
  for (const auto& block : graph.blocks) expected += block.repeat;
  EXPECT_EQ(copies, expected);
  EXPECT_EQ(layers_per_chunk, (std::vector<int64_t>{8, 8, 8, 8}));
  // Blocks before the first layer sit on chunk 0, blocks after the last on chunk 3.
  EXPECT_GT(others_per_chunk[0], 0);
  EXPECT_GT(others_per_chunk[3], 0);
  EXPECT_EQ(others_per_chunk[1] + others_per_chunk[2], 0);
}

TEST(resolve, MeshGroupsAndStridesOfADenseHybridPlan) {
  const Graph graph = load_model(model("Llama-3.1-70B.json"));
  Plan plan;
  plan.dp_replicate = 2, plan.dp_shard = 4, plan.cp = 2, plan.tp = 8, plan.pp = 2;  // 256 GPUs
  const Layout x = resolve(graph, plan, settings(8192, 8192 * 64), 256);
  // Mesh [pp 2, dp_replicate 2, dp_shard 4, cp 2, tp 8]: strides 128, 64, 16, 8, 1.
  ASSERT_EQ(x.mesh().axes.size(), 5u);
  EXPECT_EQ(x.mesh().axes[2].name, "dp_shard");
  EXPECT_EQ(x.spans(MeshGroup::tp), (std::vector<AxisSpan>{{8, 1}}));
  EXPECT_EQ(x.spans(MeshGroup::cp), (std::vector<AxisSpan>{{2, 8}}));
  EXPECT_EQ(x.spans(MeshGroup::shard), (std::vector<AxisSpan>{{4, 16}, {2, 8}}));
  EXPECT_EQ(x.spans(MeshGroup::replicate), (std::vector<AxisSpan>{{2, 64}}));
  EXPECT_EQ(x.spans(MeshGroup::dp), (std::vector<AxisSpan>{{2, 64}, {4, 16}, {2, 8}}));
  EXPECT_TRUE(x.spans(MeshGroup::ep).empty());
  EXPECT_EQ(x.axes(MeshGroup::shard), (std::vector<std::string>{"dp_shard", "cp"}));
  EXPECT_EQ(x.pp_stride(), 128);
  // 64 sequences over 2 x 4 replicas of micro-batch 1: 8 micro-batches.
  EXPECT_EQ(x.grad_accum, 8);
  EXPECT_EQ(x.zero_stage, 3);
  EXPECT_TRUE(x.fsdp);
  EXPECT_EQ(x.shard_group, 8);
  EXPECT_EQ(*x.plan.grad_accum, 8);
  EXPECT_TRUE(*x.plan.sequence_parallel);
}

TEST(resolve, ExpertParallelNestsInsideOrAcrossContextParallel) {
  const Graph graph = load_model(model("Mixtral-8x7B.json"));  // 8 experts
  Plan inside;  // ep 2 inside cp 4: [pp, dp_replicate, dp_shard 2, cp 2, ep 2, tp 2]
  inside.dp_shard = 2, inside.cp = 4, inside.ep = 2, inside.tp = 2;
  const Layout a = resolve(graph, inside, settings(4096, 4096 * 16), 16);
  EXPECT_EQ(a.spans(MeshGroup::ep), (std::vector<AxisSpan>{{2, 2}}));
  EXPECT_EQ(a.spans(MeshGroup::cp), (std::vector<AxisSpan>{{2, 4}, {2, 2}}));         // 4 ranks, stride 2
  EXPECT_EQ(a.spans(MeshGroup::expert_shard), (std::vector<AxisSpan>{{2, 8}, {2, 4}}));
  EXPECT_EQ(a.expert_shard_group, 4);
  Plan across;  // ep 4 over cp 2: [pp, dp_replicate, dp_shard 4*2/4=2, ep 2, cp 2, tp 2]
  across.dp_shard = 4, across.cp = 2, across.ep = 4, across.tp = 2;
  const Layout b = resolve(graph, across, settings(4096, 4096 * 16), 16);
  EXPECT_EQ(b.axes(MeshGroup::ep), (std::vector<std::string>{"ep", "cp"}));
  EXPECT_EQ(b.spans(MeshGroup::ep), (std::vector<AxisSpan>{{2, 4}, {2, 2}}));
  EXPECT_EQ(b.spans(MeshGroup::expert_shard), (std::vector<AxisSpan>{{2, 8}}));
  EXPECT_EQ(b.size(MeshGroup::shard), 8);
}

TEST(resolve, RefusesPlansWithTheKeyAtFault) {
  const Graph graph = load_model(model("Llama-3.1-8B.json"));  // 32 layers
  auto key_of = [&](Plan plan, int64_t gpus) -> std::string {
    try {
      resolve(graph, plan, settings(8192, 8192 * 32), gpus);
    } catch (const InputError& e) {
      return e.field();
    }
    return "accepted";
  };
  Plan p;
  p.dp_shard = 4;
  EXPECT_EQ(key_of(p, 8), "dp_replicate*dp_shard*cp*tp*pp");
  p = Plan{};
  p.pp = 2, p.vpp = std::numeric_limits<int64_t>::max();  // pp*vpp wraps to -2, which "divides" 32
  EXPECT_EQ(key_of(p, 2), "pp*vpp");
  p.vpp = 4611686018427387906;  // pp*vpp wraps to 8
  EXPECT_EQ(key_of(p, 2), "pp*vpp");
  p = Plan{};
  p.pp = 2, p.vpp = 20;  // 32 layers in 40 chunks
  EXPECT_EQ(key_of(p, 2), "pp*vpp");
  p = Plan{};
  p.dp_shard = 2, p.micro_batch = 3;  // 32 sequences over 2 replicas x 3
  EXPECT_EQ(key_of(p, 2), "micro_batch");
  p = Plan{};
  p.ep = 2, p.dp_shard = 2;  // a dense model
  EXPECT_EQ(key_of(p, 2), "ep");
  p = Plan{};
  p.pp = 2, p.vpp = 2, p.dp_shard = 4;  // 32 / 4 = 8 micro-batches: fine; 5 would not be
  EXPECT_EQ(key_of(p, 8), "accepted");
  p.tp = 0;
  EXPECT_EQ(key_of(p, 0), "tp");
}

// ---- Megatron / NeMo layouts: uneven pipeline splits (the flags Megatron is given) and the expert
// groups folded into the ranks of a stage (Megatron-Core's MoE parallel folding: within a pipeline
// stage, rank i has etp index i % etp, ep index (i / etp) % ep, expert-DP index the rest) ----

TEST(PipelineSplit, LossCountedAsALayerWhenLayersPlusOneDivides) {
  // 31 layers on 8 stages: 32 / 8 = 4 per stage, the last one lighter (the LM head and loss).
  const PipelineSplit split = *PipelineSplit::choose(31, 8, 1);
  EXPECT_EQ(split.rule, PipelineSplit::Rule::account);
  EXPECT_FALSE(split.embedding_as_layer);
  EXPECT_TRUE(split.loss_as_layer);
  EXPECT_EQ(chunk_layers(split), (std::vector<int64_t>{4, 4, 4, 4, 4, 4, 4, 3}));
}

TEST(PipelineSplit, Llama405BOn64StagesCountsEmbeddingAndLoss) {
  // 126 layers on pp 64: 128 / 64 = 2 per stage, the first and last 1.
  const PipelineSplit split = *PipelineSplit::choose(126, 64, 1);
  EXPECT_TRUE(split.embedding_as_layer && split.loss_as_layer);
  const std::vector<int64_t> layers = chunk_layers(split);
  EXPECT_EQ(layers.front(), 1);
  EXPECT_EQ(layers.back(), 1);
  EXPECT_EQ(std::count(layers.begin(), layers.end(), 2), 62);
  EXPECT_EQ(split.chunk_of_layer(0), 0);
  EXPECT_EQ(split.chunk_of_layer(1), 1);
  EXPECT_EQ(split.chunk_of_layer(125), 63);
}

TEST(PipelineSplit, DeepSeekV3On16StagesGivesFirstAndLastCounts) {
  // 61 layers on pp 16: 61, 62, 63 do not divide by 16. Middle ranks ceil(61 / 16) = 4 layers x 14 =
  // 56; the first and last hold the 5 left: the first 4, the last (LM head, loss) 1.
  const PipelineSplit split = *PipelineSplit::choose(61, 16, 1);
  EXPECT_EQ(split.rule, PipelineSplit::Rule::first_last);
  EXPECT_EQ(split.first_rank_layers, 4);
  EXPECT_EQ(split.middle_rank_layers, 4);
  EXPECT_EQ(split.last_rank_layers, 1);
  EXPECT_EQ(split.layers_per_chunk(), 4);
  // The same split reaches the model's blocks: layers per physical stage of DeepSeek-V3.
  const Graph graph = load_model(model("DeepSeek-V3.json"));
  ASSERT_EQ(num_layers(graph), 61);
  std::vector<int64_t> per_stage(16, 0);
  for_each_block_copy(graph, split, [&](size_t b, int64_t, int64_t chunk) {
    if (graph.blocks[b].is_layer) ++per_stage[size_t(chunk % 16)];
  });
  std::vector<int64_t> expected(16, 4);
  expected.back() = 1;
  EXPECT_EQ(per_stage, expected);
}

TEST(PipelineSplit, MultiTokenPredictionTakesMegatronBridgesDeepSeekLayouts) {
  // The loss counts as one layer and the MTP depth as two (its layer and output head): 61 + 3 = 64 units.
  // 16 chunks of 4: the last keeps 4 - 3 = 1 layer, "Et*4|(t*4|)*14tmL" (Megatron-Bridge, pp 2 x vpp 8).
  const PipelineSplit sixteen = *PipelineSplit::choose(61, 2, 8, std::nullopt, 1);
  EXPECT_EQ(sixteen.rule, PipelineSplit::Rule::mtp_tail);
  std::vector<int64_t> expected(16, 4);
  expected.back() = 1;
  EXPECT_EQ(chunk_layers(sixteen), expected);
  // 32 chunks of 2 (pp 8 x vpp 4, its H100 recipe): the last holds only MTP and the loss, the 61
  // layers fill the other 31 with the first (beside the embedding) the lighter: "Et|(tt|)*30mL".
  const PipelineSplit thirty_two = *PipelineSplit::choose(61, 8, 4, std::nullopt, 1);
  expected.assign(32, 2);
  expected.front() = 1;
  expected.back() = 0;
  EXPECT_EQ(chunk_layers(thirty_two), expected);
  // pp 8: 8 units a chunk, the last 8 - 3 = 5 layers, the other seven 56 / 7 = 8.
  expected.assign(8, 8);
  expected.back() = 5;
  EXPECT_EQ(chunk_layers(*PipelineSplit::choose(61, 8, 1, std::nullopt, 1)), expected);
  // pp 4: 16 units a chunk, "Et*16|t*16|t*16|t*13mL" (the recipe's layout_map).
  EXPECT_EQ(chunk_layers(*PipelineSplit::choose(61, 4, 1, std::nullopt, 1)), (std::vector<int64_t>{16, 16, 16, 13}));
  // Too many chunks for the layers: none.
  EXPECT_FALSE(PipelineSplit::choose(61, 64, 1, std::nullopt, 1));
  // The model's blocks: the head and the MTP modules sit on the last chunk even when it holds no layer.
  const Graph graph = load_model(model("DeepSeek-V3.json"));
  ASSERT_EQ(mtp_depths(graph), 1);
  std::vector<int64_t> layers(32, 0), tail_chunks;
  for_each_block_copy(graph, thirty_two, [&](size_t b, int64_t, int64_t chunk) {
    if (graph.blocks[b].is_layer) ++layers[size_t(chunk)];
    else if (graph.blocks[b].name != "embed") tail_chunks.push_back(chunk);
  });
  EXPECT_EQ(layers, chunk_layers(thirty_two));
  EXPECT_EQ(tail_chunks, (std::vector<int64_t>{31, 31, 31}));  // head, mtp_proj, mtp_layer
  EXPECT_EQ(thirty_two.chunk_of_block_after(61), 31);
}

TEST(PipelineSplit, OddLayersOverInterleavedStagesBalanceChunks) {
  // 61 layers on pp 8 x vpp 2 = 16 chunks: per-rank counts must divide by vpp = 2, which an odd total
  // cannot give, so the chunks take 61 / 16 = 3 layers with the 13 extra on chunks 1..13 (a
  // --pipeline-model-parallel-layout). Physical stage k holds chunks k and k + 8:
  // 3 + 4, 4 + 4 (k = 1..5), 4 + 3, 4 + 3.
  const PipelineSplit split = *PipelineSplit::choose(61, 8, 2);
  EXPECT_EQ(split.rule, PipelineSplit::Rule::balanced);
  EXPECT_EQ(chunk_layers(split), (std::vector<int64_t>{3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 3}));
  std::vector<int64_t> per_stage(8, 0);
  for (int64_t c = 0; c < 16; ++c) per_stage[size_t(c % 8)] += split.layers_in_chunk(c);
  EXPECT_EQ(per_stage, (std::vector<int64_t>{7, 8, 8, 8, 8, 8, 7, 7}));
  EXPECT_EQ(split.chunk_of_layer(2), 0);
  EXPECT_EQ(split.chunk_of_layer(3), 1);
  EXPECT_EQ(split.chunk_of_layer(60), 15);
}

TEST(PipelineSplit, ComputeBalancedCutsWhereTheRunningCostCrossesEachRanksShare) {
  // nanotron's build_model: costs embedding 0, each layer 1, the head h; threshold_r = total (r + 1) / pp;
  // a block goes to the current rank, which moves on after the running cost exceeds its threshold.
  // 16 layers, head 4 (the 1.34B bench model: vocab 131072 x 2048 against 4 x 2048^2 + 3 x 8192 x 2048):
  // total 20, threshold_0 = 10; layers 1..11 (running 11 > 10) on rank 0, 12..16 and the head on rank 1.
  const PipelineSplit two = *PipelineSplit::choose(16, 2, 1, 4.0);
  EXPECT_EQ(two.rule, PipelineSplit::Rule::compute_balanced);
  EXPECT_EQ(chunk_layers(two), (std::vector<int64_t>{11, 5}));
  EXPECT_EQ(two.layers_per_chunk(), 11);
  EXPECT_EQ(two.chunk_of_layer(10), 0);
  EXPECT_EQ(two.chunk_of_layer(11), 1);
  // 32 layers on 4 ranks, head 2: total 34, thresholds 8.5, 17, 25.5: ends after layers 9, 18, 26, 32.
  EXPECT_EQ(chunk_layers(*PipelineSplit::choose(32, 4, 1, 2.0)), (std::vector<int64_t>{9, 9, 8, 6}));
  // Without a head the +1 of the strict comparison still moves one layer forward: 8 on 2 -> 5 | 3.
  EXPECT_EQ(chunk_layers(*PipelineSplit::choose(8, 2, 1, 0.0)), (std::vector<int64_t>{5, 3}));
  // A head outweighing the layers leaves the last rank none (total 12, threshold_0 = 6 > 2 layers):
  // no split; nanotron has no interleaving.
  EXPECT_FALSE(PipelineSplit::choose(2, 2, 1, 10.0));
  EXPECT_FALSE(PipelineSplit::choose(32, 4, 2, 2.0));
  // One stage: nothing to balance.
  EXPECT_EQ(PipelineSplit::choose(32, 1, 1, 2.0)->rule, PipelineSplit::Rule::even);
}

TEST(PipelineSplit, ResolveBalancesByComputeWhenTheFrameworkDoes) {
  // Llama-3.1-8B: a layer 4 x 4096^2 + 3 x 14336 x 4096 = 243,269,632, the head 128256 x 4096 =
  // 525,336,576: 2.1595 layers. 32 layers on pp 4: total 34.16, thresholds 8.54, 17.08, 25.62:
  // 9 | 9 | 8 | 6. Megatron's rules (the default) split them 8 each.
  const Graph graph = load_model(model("Llama-3.1-8B.json"));
  TrainingSettings balanced = settings(8192, 8192 * 64);
  balanced.pipeline_balanced_by_compute = true;
  ASSERT_TRUE(compute_balanced_head(graph, balanced).has_value());
  EXPECT_NEAR(*compute_balanced_head(graph, balanced), 525336576.0 / 243269632.0, 1e-12);
  EXPECT_FALSE(compute_balanced_head(graph, settings(8192, 8192 * 64)).has_value());
  Plan plan;
  plan.pp = 4;
  plan.dp_shard = 2;
  EXPECT_EQ(chunk_layers(resolve(graph, plan, balanced, 8).pipeline), (std::vector<int64_t>{9, 9, 8, 6}));
  EXPECT_EQ(chunk_layers(resolve(graph, plan, settings(8192, 8192 * 64), 8).pipeline), (std::vector<int64_t>{8, 8, 8, 8}));
}

TEST(resolve, ExpertParallelCarvedFromDataParallelReplicas) {
  const Graph graph = load_model(model("Mixtral-8x7B.json"));  // 8 experts
  // 16 ranks: dp_replicate 4, dp_shard 2, tp 2; ep 4 covers dp_shard 2 and half of dp_replicate.
  // Megatron: rank i has ep index (i / 2) % 4 and expert-DP index i / 8, so rank 0's ep group is
  // {0, 2, 4, 6} and its expert-DP group {0, 8}. Mesh [pp 1, dp_replicate 2, ep 2, dp_shard 2, cp 1,
  // tp 2]: strides 8, 4, 2, 2, 1.
  Plan plan;
  plan.dp_replicate = 4, plan.dp_shard = 2, plan.tp = 2, plan.ep = 4, plan.zero_stage = 1;
  const Layout x = resolve(graph, plan, settings(4096, 4096 * 16), 16);
  EXPECT_EQ(x.spans(MeshGroup::ep), (std::vector<AxisSpan>{{2, 4}, {2, 2}}));
  EXPECT_EQ(x.spans(MeshGroup::expert_dp), (std::vector<AxisSpan>{{2, 8}}));
  EXPECT_EQ(x.spans(MeshGroup::expert_replicate), (std::vector<AxisSpan>{{2, 8}}));
  EXPECT_EQ(x.size(MeshGroup::replicate), 4);
  EXPECT_EQ(x.spans(MeshGroup::replicate), (std::vector<AxisSpan>{{2, 8}, {2, 4}}));
  EXPECT_EQ(x.spans(MeshGroup::dp), (std::vector<AxisSpan>{{2, 8}, {2, 4}, {2, 2}}));
  EXPECT_EQ(x.expert_shard_group, 1);  // dp_shard is all inside ep
  EXPECT_EQ(x.spans(MeshGroup::tp), (std::vector<AxisSpan>{{2, 1}}));
  // Expert states shard over nothing (expert_shard 1); their gradients all-reduce over expert_dp
  // {0, 8}, the replicas holding the same experts, and the lowering schedules that.
  EXPECT_EQ(x.size(MeshGroup::expert_shard) * x.size(MeshGroup::expert_replicate), x.size(MeshGroup::expert_dp));
  EXPECT_NO_THROW(require_schedulable(x));
}

TEST(resolve, ExpertTensorParallelFoldsInsideTensorParallel) {
  const Graph graph = load_model(model("Mixtral-8x7B.json"));
  // 8 ranks: dp_shard 2, tp 4, etp 2, ep 2. Megatron: etp index i % 2, ep index (i / 2) % 2,
  // expert-DP i / 4. tp splits into [tp 1, ep 2, etp 2]: mesh [pp, dp_replicate, dp_shard 2, cp 1,
  // tp 1, ep 2, etp 2] with strides 8, 4, 4, 4, 2, 1 (inner to outer: etp 1, ep 2, the rest 4).
  Plan plan;
  plan.dp_shard = 2, plan.tp = 4, plan.etp = 2, plan.ep = 2;
  const Layout x = resolve(graph, plan, settings(4096, 4096 * 16), 8);
  EXPECT_EQ(x.expert_tp, 2);
  EXPECT_EQ(x.spans(MeshGroup::etp), (std::vector<AxisSpan>{{2, 1}}));
  EXPECT_EQ(x.spans(MeshGroup::ep), (std::vector<AxisSpan>{{2, 2}}));
  EXPECT_EQ(x.spans(MeshGroup::tp), (std::vector<AxisSpan>{{2, 2}, {2, 1}}));
  EXPECT_EQ(x.spans(MeshGroup::expert_dp), (std::vector<AxisSpan>{{2, 4}}));
  EXPECT_EQ(x.spans(MeshGroup::shard), (std::vector<AxisSpan>{{2, 4}}));
  EXPECT_EQ(x.axes(MeshGroup::tp), (std::vector<std::string>{"ep", "etp"}));
  EXPECT_EQ(x.spans(MeshGroup::expert_shard), (std::vector<AxisSpan>{{2, 4}}));  // expert-DP is all in dp_shard
  EXPECT_TRUE(x.spans(MeshGroup::expert_replicate).empty());
  EXPECT_NO_THROW(require_schedulable(x));
  // etp 1 with tp 2 and ep 4 over dp_shard 2: the ep group takes the tp ranks first, {0, 1, 2, 3}.
  Plan wide;
  wide.dp_shard = 4, wide.tp = 2, wide.etp = 1, wide.ep = 4;
  const Layout w = resolve(graph, wide, settings(4096, 4096 * 16), 8);
  EXPECT_EQ(w.spans(MeshGroup::ep), (std::vector<AxisSpan>{{2, 2}, {2, 1}}));
  EXPECT_TRUE(w.spans(MeshGroup::etp).empty());
  EXPECT_EQ(w.spans(MeshGroup::expert_shard), (std::vector<AxisSpan>{{2, 4}}));
  // etp 1 with tp 4 and ep 2: ep takes tp ranks {0, 1}; the other half of tp holds copies of the
  // same experts (Megatron's expert-DP group of rank 0 is {0, 2, 4, 6}: tp rank 2 and dp_shard 2),
  // outside the shard group, so it joins expert_replicate: expert_shard x expert_replicate = expert_dp.
  Plan leftover;
  leftover.dp_shard = 2, leftover.tp = 4, leftover.etp = 1, leftover.ep = 2;
  const Layout l = resolve(graph, leftover, settings(4096, 4096 * 16), 8);
  EXPECT_EQ(l.spans(MeshGroup::ep), (std::vector<AxisSpan>{{2, 1}}));
  EXPECT_EQ(l.spans(MeshGroup::expert_dp), (std::vector<AxisSpan>{{2, 4}, {2, 2}}));
  EXPECT_EQ(l.spans(MeshGroup::expert_shard), (std::vector<AxisSpan>{{2, 4}}));
  EXPECT_EQ(l.spans(MeshGroup::expert_replicate), (std::vector<AxisSpan>{{2, 2}}));
}

TEST(resolve, RefusesExpertGroupsThatDoNotNest) {
  const Graph graph = load_model(model("Mixtral-8x7B.json"));
  auto field = [&](Plan plan, int64_t gpus) -> std::string {
    try {
      resolve(graph, plan, settings(4096, 4096 * 12), gpus);
    } catch (const InputError& e) {
      return e.field();
    }
    return "accepted";
  };
  Plan p;  // tp 2, cp 3, dp_shard 2, etp 4: 12 ranks, but etp ends inside cp 3 (4 does not divide 6)
  p.tp = 2, p.cp = 3, p.dp_shard = 2, p.etp = 4;
  EXPECT_FALSE(expert_groups_nest(p));
  EXPECT_EQ(field(p, 12), "ep");
  p = Plan{};  // ep 16 exceeds the 8 ranks of a stage
  p.dp_replicate = 8, p.ep = 16;
  EXPECT_EQ(field(p, 8), "ep");
  p = Plan{};
  p.dp_replicate = 4, p.ep = 4;  // ep over the replicas: accepted
  EXPECT_EQ(field(p, 4), "accepted");
}
