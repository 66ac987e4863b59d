// A routed-expert FFN of E experts (hidden Hm, expert ffn Fm, top-k 2) as docs/graph_format.md writes
// it: router_proj, router, expert gate / up, silu_glu, down, combine. Shared by the MoE cost tests.
#pragma once

#include "tiny_llama.hpp"

#include "mgt/ir/graph.hpp"

#include <cstdint>
#include <map>

namespace mgt::cost::moe {

constexpr int64_t Hm = 1024, Fm = 1024, kTopK = 2;

/// Op indices in block(): the router, the three expert GEMMs.
constexpr size_t kRouter = 1, kGate = 2, kUp = 3, kDown = 5;

inline ir::Block block(int64_t experts) {
  using Kind = ir::OpKind;
  using tiny::make_op, tiny::tensor;
  const std::map<char, int64_t> all{{'h', Hm}, {'e', experts}, {'f', Fm}}, chosen{{'h', Hm}, {'e', kTopK}, {'f', Fm}};
  ir::Block b;
  b.name = "moe";
  b.tensors = {tensor("x", "bsh", false, all), tensor("w_router", "he", true, all),
               tensor("router_logits", "bse", false, all), tensor("routing", "bse", false, chosen),
               tensor("w_expert_down", "efh", true, all), tensor("expert_out", "bseh", false, chosen),
               tensor("moe_out", "bsh", false, all)};
  for (const char* name : {"w_expert_gate", "w_expert_up"}) b.tensors.push_back(tensor(name, "ehf", true, all));
  for (const char* name : {"expert_gate", "expert_up", "expert_act_out"})
    b.tensors.push_back(tensor(name, "bsef", false, chosen));
  ir::Op route = make_op("router", Kind::router, {"router_logits"}, "routing");
  route.top_k = kTopK;
  ir::Op act = make_op("expert_act", Kind::activation, {"expert_gate", "expert_up"}, "expert_act_out");
  act.activation = ir::ActivationKind::silu_glu;
  b.ops = {make_op("router_proj", Kind::contraction, {"x", "w_router"}, "router_logits", "bsh,he->bse"),
           route,
           make_op("expert_gate_proj", Kind::contraction, {"x", "w_expert_gate"}, "expert_gate", "bsh,ehf->bsef"),
           make_op("expert_up_proj", Kind::contraction, {"x", "w_expert_up"}, "expert_up", "bsh,ehf->bsef"),
           act,
           make_op("expert_down_proj", Kind::contraction, {"expert_act_out", "w_expert_down"}, "expert_out",
                   "bsef,efh->bseh"),
           make_op("combine", Kind::contraction, {"expert_out", "routing"}, "moe_out", "bseh,bse->bsh")};
  return b;
}

}  // namespace mgt::cost::moe
