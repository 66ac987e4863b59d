// A tiny Llama-like model for hand-computed cost-model tests: h 64, 4 heads, 2 kv heads, head dim
// 16, ffn 128, vocab 256. Small enough that every expected value can be written out by hand.
#pragma once

#include "mgt/ir/graph.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mgt::cost::tiny {

constexpr int64_t H = 64, A = 4, K = 2, D = 16, F = 128, V = 256;

/// A tensor whose dims take the sizes above (b and s symbolic); `extra` adds model-specific dims.
inline ir::TensorDecl tensor(const std::string& name, const std::string& dims, bool parameter = false,
                             const std::map<char, int64_t>& extra = {}) {
  std::map<char, int64_t> sizes{{'b', 0}, {'s', 0}, {'h', H}, {'a', A}, {'k', K}, {'d', D}, {'f', F}, {'v', V}};
  for (const auto& [c, n] : extra) sizes[c] = n;
  ir::TensorDecl t{name, {}, parameter};
  for (char c : dims) t.dims.push_back({c, sizes.at(c)});
  return t;
}

inline ir::Op make_op(const std::string& name, ir::OpKind kind, std::vector<std::string> inputs,
                      const std::string& output, const std::string& einsum = {}) {
  ir::Op op;
  op.name = name;
  op.kind = kind;
  op.inputs = std::move(inputs);
  op.output = output;
  op.einsum = einsum;
  return op;
}

inline ir::Block embed() {
  ir::Block b;
  b.name = "embed";
  b.is_layer = false;
  b.tensors = {tensor("wte", "vh", true), tensor("out", "bsh")};
  b.ops = {make_op("token_embedding", ir::OpKind::embedding, {"wte"}, "out")};
  return b;
}

/// norm -> q/k/v -> rope(q), rope(k) -> attention -> o -> residual -> norm -> gate/up -> silu_glu ->
/// down -> residual.
inline ir::Block layer(int64_t repeat = 1) {
  using Kind = ir::OpKind;
  ir::Block b;
  b.name = "layer";
  b.repeat = repeat;
  b.is_layer = true;
  b.tensors = {tensor("x", "bsh"),          tensor("attn_norm_w", "h", true), tensor("attn_in", "bsh"),
               tensor("wq", "had", true),   tensor("q", "bsad"),              tensor("wk", "hkd", true),
               tensor("k", "bskd"),         tensor("wv", "hkd", true),        tensor("v", "bskd"),
               tensor("q_rot", "bsad"),     tensor("k_rot", "bskd"),          tensor("attn", "bsad"),
               tensor("wo", "adh", true),   tensor("attn_out", "bsh"),        tensor("h1", "bsh"),
               tensor("mlp_norm_w", "h", true), tensor("mlp_in", "bsh"),      tensor("w_gate", "hf", true),
               tensor("gate", "bsf"),       tensor("w_up", "hf", true),       tensor("up", "bsf"),
               tensor("act_out", "bsf"),    tensor("w_down", "fh", true),     tensor("mlp_out", "bsh"),
               tensor("out", "bsh")};
  b.ops = {make_op("attn_norm", Kind::norm, {"x", "attn_norm_w"}, "attn_in"),
           make_op("q_proj", Kind::contraction, {"attn_in", "wq"}, "q", "bsh,had->bsad"),
           make_op("k_proj", Kind::contraction, {"attn_in", "wk"}, "k", "bsh,hkd->bskd"),
           make_op("v_proj", Kind::contraction, {"attn_in", "wv"}, "v", "bsh,hkd->bskd"),
           make_op("q_rope", Kind::rope, {"q"}, "q_rot"),
           make_op("k_rope", Kind::rope, {"k"}, "k_rot"),
           make_op("attention", Kind::attention_core, {"q_rot", "k_rot", "v"}, "attn"),
           make_op("o_proj", Kind::contraction, {"attn", "wo"}, "attn_out", "bsad,adh->bsh"),
           make_op("attn_residual", Kind::residual, {"x", "attn_out"}, "h1"),
           make_op("mlp_norm", Kind::norm, {"h1", "mlp_norm_w"}, "mlp_in"),
           make_op("gate_proj", Kind::contraction, {"mlp_in", "w_gate"}, "gate", "bsh,hf->bsf"),
           make_op("up_proj", Kind::contraction, {"mlp_in", "w_up"}, "up", "bsh,hf->bsf"),
           make_op("act", Kind::activation, {"gate", "up"}, "act_out"),
           make_op("down_proj", Kind::contraction, {"act_out", "w_down"}, "mlp_out", "bsf,fh->bsh"),
           make_op("mlp_residual", Kind::residual, {"h1", "mlp_out"}, "out")};
  b.ops[6].causal = true;
  b.ops[12].activation = ir::ActivationKind::silu_glu;
  return b;
}

inline ir::Block head() {
  using Kind = ir::OpKind;
  ir::Block b;
  b.name = "head";
  b.is_layer = false;
  b.tensors = {tensor("x", "bsh"), tensor("final_norm_w", "h", true), tensor("x_norm", "bsh"),
               tensor("w_lm_head", "hv", true), tensor("logits", "bsv")};
  b.ops = {make_op("final_norm", Kind::norm, {"x", "final_norm_w"}, "x_norm"),
           make_op("lm_head", Kind::contraction, {"x_norm", "w_lm_head"}, "logits", "bsh,hv->bsv"),
           make_op("loss", Kind::softmax_cross_entropy, {"logits"}, "")};
  return b;
}

/// The whole tiny model: embedding, `layers` identical layers, head.
inline ir::Graph graph(int64_t layers) {
  ir::Graph g;
  g.info.name = "tiny";
  g.info.num_layers = layers;
  g.blocks = {embed(), layer(layers), head()};
  return g;
}

}  // namespace mgt::cost::tiny
