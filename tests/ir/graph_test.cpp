// Tests for the Graph free functions: names, element counts, parameter counting and verify().
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mgt::ir {
namespace {

TensorDecl tensor(const std::string& name, std::vector<Dim> dims, bool parameter = false) {
  return TensorDecl{name, std::move(dims), parameter};
}

Op contraction(const std::string& name, std::vector<std::string> inputs, const std::string& out,
               const std::string& einsum) {
  Op op;
  op.name = name;
  op.kind = OpKind::contraction;
  op.inputs = std::move(inputs);
  op.output = out;
  op.einsum = einsum;
  return op;
}

/// One MLP layer x -> up (h=8 -> f=32) -> relu -> down, repeated 3 times.
Graph tiny_mlp() {
  Block b;
  b.name = "layer";
  b.repeat = 3;
  b.tensors = {tensor("x", {{'b', 0}, {'s', 0}, {'h', 8}}),       tensor("w_up", {{'h', 8}, {'f', 32}}, true),
               tensor("b_up", {{'f', 32}}, true),                  tensor("up", {{'b', 0}, {'s', 0}, {'f', 32}}),
               tensor("act", {{'b', 0}, {'s', 0}, {'f', 32}}),     tensor("w_down", {{'f', 32}, {'h', 8}}, true),
               tensor("out", {{'b', 0}, {'s', 0}, {'h', 8}})};
  Op relu;
  relu.name = "relu";
  relu.kind = OpKind::activation;
  relu.activation = ActivationKind::relu;
  relu.inputs = {"up"};
  relu.output = "act";
  b.ops = {contraction("up_proj", {"x", "w_up", "b_up"}, "up", "bsh,hf,f->bsf"), relu,
           contraction("down_proj", {"act", "w_down"}, "out", "bsf,fh->bsh")};
  Graph g;
  g.info.name = "tiny-mlp";
  g.info.num_layers = 3;
  g.blocks = {b};
  return g;
}

TEST(dtype_bytes, sizes) {
  EXPECT_EQ(dtype_bytes(DType::f32), 4);
  EXPECT_EQ(dtype_bytes(DType::bf16), 2);
  EXPECT_EQ(dtype_bytes(DType::f16), 2);
  EXPECT_EQ(dtype_bytes(DType::fp8), 1);
  EXPECT_EQ(to_string(DType::bf16), "bf16");
}

TEST(op_kind_from_string, round_trips_every_kind) {
  for (OpKind kind : {OpKind::contraction, OpKind::embedding, OpKind::norm, OpKind::rope, OpKind::attention_core,
                      OpKind::activation, OpKind::residual, OpKind::router, OpKind::softmax_cross_entropy})
    EXPECT_EQ(op_kind_from_string(to_string(kind), "test"), kind);
  try {
    op_kind_from_string("matmul", "g.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("contraction"), std::string::npos) << e.what();
  }
}

TEST(num_elements, symbolic_dims_take_batch_and_seq) {
  const TensorDecl t = tensor("q", {{'b', 0}, {'s', 0}, {'a', 4}, {'d', 16}});
  EXPECT_EQ(num_elements(t), 64);
  EXPECT_EQ(num_elements(t, 2, 10), 1280);
}

TEST(find_tensor, finds_and_misses) {
  const Graph g = tiny_mlp();
  ASSERT_NE(find_tensor(g.blocks[0], "w_up"), nullptr);
  EXPECT_EQ(find_tensor(g.blocks[0], "w_up")->dims.size(), 2u);
  EXPECT_EQ(find_tensor(g.blocks[0], "nope"), nullptr);
}

TEST(count_parameters, repeat_times_block_parameters) {
  const ParamCount count = count_parameters(tiny_mlp());
  EXPECT_EQ(count.total, 3 * (8 * 32 + 32 + 32 * 8));
  EXPECT_EQ(count.active, count.total);
}

TEST(count_parameters, routed_experts_active_fraction) {
  // Router over e=4 experts, top_k=1; expert weight "ehf" with e=4 touched once per token.
  Block b;
  b.name = "moe";
  b.tensors = {tensor("x", {{'b', 0}, {'s', 0}, {'h', 8}}),
               tensor("w_router", {{'h', 8}, {'e', 4}}, true),
               tensor("logits", {{'b', 0}, {'s', 0}, {'e', 4}}),
               tensor("routing", {{'b', 0}, {'s', 0}, {'e', 1}}),
               tensor("w_expert", {{'e', 4}, {'h', 8}, {'f', 16}}, true),
               tensor("expert", {{'b', 0}, {'s', 0}, {'e', 1}, {'f', 16}})};
  Op router;
  router.name = "router";
  router.kind = OpKind::router;
  router.top_k = 1;
  router.inputs = {"logits"};
  router.output = "routing";
  b.ops = {contraction("router_proj", {"x", "w_router"}, "logits", "bsh,he->bse"), router,
           contraction("expert_up", {"x", "w_expert"}, "expert", "bsh,ehf->bsef")};
  Graph g;
  g.info.num_layers = 1;
  g.blocks = {b};
  verify(g, "moe");
  const ParamCount count = count_parameters(g);
  EXPECT_EQ(count.total, 8 * 4 + 4 * 8 * 16);
  EXPECT_EQ(count.active, 8 * 4 + 1 * 8 * 16);
}

void expect_rejected(const Graph& g, const std::string& fragment) {
  try {
    verify(g, "broken.json");
    FAIL() << "verify accepted a graph that should fail with: " << fragment;
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), "broken.json");
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(verify, accepts_a_consistent_graph) { EXPECT_NO_THROW(verify(tiny_mlp(), "tiny.json")); }

TEST(verify, rejects_unknown_tensor_name) {
  Graph g = tiny_mlp();
  g.blocks[0].ops[2].inputs[1] = "w_dwn";
  expect_rejected(g, "unknown tensor 'w_dwn'");
}

TEST(verify, rejects_einsum_that_disagrees_with_operand_dims) {
  Graph g = tiny_mlp();
  g.blocks[0].ops[2].einsum = "bsf,hf->bsh";
  expect_rejected(g, "expects dims \"hf\"");
  g = tiny_mlp();
  g.blocks[0].ops[2].einsum = "bsf,fh";
  expect_rejected(g, "no '->'");
  g = tiny_mlp();
  g.blocks[0].ops[0].einsum = "bsh,hf->bsf";  // three inputs, two operands
  expect_rejected(g, "operands");
}

TEST(verify, rejects_mismatched_sizes) {
  Graph g = tiny_mlp();
  g.blocks[0].tensors[5].dims[0].size = 16;  // w_down f=16 while act has f=32
  expect_rejected(g, "does not match");
}

TEST(verify, rejects_bad_structure) {
  Graph g = tiny_mlp();
  g.info.num_layers = 2;
  expect_rejected(g, "num_layers");

  g = tiny_mlp();
  std::swap(g.blocks[0].ops[0], g.blocks[0].ops[1]);  // relu reads "up" before it is written
  expect_rejected(g, "before any op writes it");

  g = tiny_mlp();
  g.blocks[0].tensors[1].dims[0].size = 0;
  expect_rejected(g, "must be positive");

  g = tiny_mlp();
  g.blocks[0].repeat = 0;
  expect_rejected(g, "repeat");

  g = tiny_mlp();
  g.blocks[0].tensors.push_back(g.blocks[0].tensors[0]);
  expect_rejected(g, "declared twice");

  g = tiny_mlp();
  g.tied_parameters = {{"layer.w_up", "layer.w_missing"}};
  expect_rejected(g, "names no parameter");

  expect_rejected(Graph{}, "no blocks");
}

TEST(verify, rejects_overflowing_sizes) {
  Graph g = tiny_mlp();
  g.blocks[0].tensors[1].dims = {{'h', int64_t(1) << 40}, {'f', int64_t(1) << 40}};
  expect_rejected(g, "overflows");
}

}  // namespace
}  // namespace mgt::ir
