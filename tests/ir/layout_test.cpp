// ir::Layout: the plan's meaning, checked against values worked out by hand.
#include "mgt/ir/error.hpp"
#include "mgt/ir/layout.hpp"
#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>

#include <limits>

using namespace mgt::ir;

namespace {
std::string model(const std::string& name) { return std::string(MGT_SOURCE_DIR) + "/examples/models/" + name; }
TrainingSettings settings(int64_t seq_len, int64_t tokens) {
  TrainingSettings s;
  s.seq_len = seq_len;
  s.global_batch_tokens = tokens;
  return s;
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
  EXPECT_FALSE(PipelineSplit::splits(7, 8, 1));  // fewer layers than chunks, and neither 8 nor 9 divides by 8
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
