// Megatron-Core's selective recompute as the megatron-core profile prices it
// (SelectiveRecompute::megatron_modules: --recompute-modules layernorm moe_act mla_up_proj) on tiny
// Hugging Face graphs: which ops run again and which saved tensors go, counted by hand.
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/cost_model/layer_cost.hpp"

#include "hf_tiny.hpp"
#include "round_hardware.hpp"


#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>
#include <string>

namespace mgt::cost {
namespace {

using nlohmann::json;

constexpr int64_t kSeq = 256;

CostParams megatron() {
  CostParams p = round::params();
  p.selective_recompute = SelectiveRecompute::megatron_modules;
  return p;
}

// The ops whose forward selective recompute repeats.
std::set<std::string> redone(const ir::Block& block, const CostParams& params) {
  std::set<std::string> names;
  const auto costs = op_costs(block, hf_tiny::context(kSeq), round::cluster(), params);
  for (size_t i = 0; i < block.ops.size(); ++i) {
    if (costs[i].selective_recompute_s > 0) names.insert(block.ops[i].name);
    EXPECT_LE(costs[i].selective_recompute_s, costs[i].fwd_s * (1 + 1e-12)) << block.ops[i].name;
  }
  return names;
}

// The last layer block (DeepSeek: the MoE layers follow the dense ones).
const ir::Block& last_layer(const ir::Graph& g) {
  const ir::Block* layer = nullptr;
  for (const auto& b : g.blocks)
    if (b.is_layer) layer = &b;
  if (!layer) throw std::runtime_error("no layer block");
  return *layer;
}

// h 64, q_lora 32, kv_lora 16, 4 heads of nope 8 + rope 8, v 8; routed experts of 32, top 2.
json tiny_deepseek() {
  return json::parse(R"({"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "moe_intermediate_size": 32, "vocab_size": 100,
    "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "n_shared_experts": 1})");
}

TEST(megatron_recompute_modules, dense_llama_layer_keeps_everything) {
  // TE fuses both norms of a dense layer into LayerNormLinear (an IdentityOp norm is skipped by
  // "layernorm") and no module recomputes a dense activation: nothing is dropped, nothing redone.
  const json llama = {{"model_type", "llama"}, {"hidden_size", 64}, {"num_hidden_layers", 1},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 128},
                      {"vocab_size", 100}};
  const ir::Graph g = hf_tiny::build(llama);
  const ir::Block& layer = last_layer(g);
  const BlockCost c = block_cost(layer, hf_tiny::context(kSeq), round::cluster(), megatron());
  EXPECT_EQ(c.saved_bytes_selective, c.saved_bytes_none);
  EXPECT_EQ(c.selective_recompute_s, 0.0);
  EXPECT_TRUE(redone(layer, megatron()).empty());
  // The default policy drops the two norm outputs (64 each) and the activation output (128), bf16.
  const BlockCost generic = block_cost(layer, hf_tiny::context(kSeq), round::cluster(), round::params());
  EXPECT_EQ(generic.saved_bytes_none - generic.saved_bytes_selective, (64 + 64 + 128) * 2 * kSeq);
}

TEST(megatron_recompute_modules, moe_layer_redoes_router_norm_expert_activation_and_mla_up_projections) {
  const ir::Graph g = hf_tiny::build(tiny_deepseek());
  const ir::Block& layer = last_layer(g);
  ASSERT_EQ(layer.name, "moe_layer");
  const std::set<std::string> names = redone(layer, megatron());
  // layernorm: the pre-MLP norm (its output feeds the router's projection); moe_act: the routed
  // experts' activation; mla_up_proj: q_b_proj, k_b_proj, v_b_proj and the RoPE on q.
  const std::set<std::string> expected{"mlp_norm", "expert_act", "q_b_proj", "k_b_proj", "v_b_proj",
                                       "q_rope"};
  EXPECT_EQ(names, expected);
  const BlockCost none = block_cost(layer, hf_tiny::context(kSeq), round::cluster(), round::params());
  const BlockCost c = block_cost(layer, hf_tiny::context(kSeq), round::cluster(), megatron());
  EXPECT_EQ(c.saved_bytes_none, none.saved_bytes_none);
  // Dropped per token, bf16: the normed MLP input 64, the experts' activation output 2 x 32 (top 2),
  // q after RoPE 4 x 16, k 4 x 8, v 4 x 8.
  EXPECT_EQ(c.saved_bytes_none - c.saved_bytes_selective, (64 + 2 * 32 + 4 * 16 + 4 * 8 + 4 * 8) * 2 * kSeq);
  EXPECT_EQ(cost_params_for(ir::cluster_preset("h100-sxm").gpu, framework_profile("megatron-core")).selective_recompute,
            SelectiveRecompute::megatron_modules);
}

}  // namespace
}  // namespace mgt::cost
