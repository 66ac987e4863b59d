// LoRA and QLoRA (--task lora | qlora) worked out by hand for Llama-2-7B and Llama-2-70B: parameters per
// matrix, the frozen base's bytes (bf16, or NF4 with double-quantised scales), adapter parameters
// r (d_in + d_out) per targeted matrix with their fp32 master, bf16 working copy, fp32 gradient and AdamW
// states, and the model FLOPs per token (frozen weights lose their weight-gradient GEMM: 6 -> 4 FLOPs per
// weight and token; adapters add 6 r (d_in + d_out)). Also the tensor-parallel split of the adapters.
#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/task_cost.hpp"

#include "../common/plans.hpp"
#include "tiny_llama.hpp"

#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>

namespace mgt::cost {
namespace {

using test::plan_of;

// Llama-2 configs (meta-llama/Llama-2-{7b,70b}-hf config.json, the fields that size the model).
ir::Graph llama2(int64_t hidden, int64_t ffn, int64_t layers, int64_t heads, int64_t kv_heads) {
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                                 {"model_type", "llama"},
                                 {"hidden_size", hidden},
                                 {"intermediate_size", ffn},
                                 {"num_hidden_layers", layers},
                                 {"num_attention_heads", heads},
                                 {"num_key_value_heads", kv_heads},
                                 {"vocab_size", 32000},
                                 {"max_position_embeddings", 4096},
                                 {"rms_norm_eps", 1e-5},
                                 {"tie_word_embeddings", false},
                                 {"hidden_act", "silu"}};
  return ir::graph_from_hf_config(config, "llama2.json");
}

struct HandCount {
  int64_t total = 0;          // every parameter
  int64_t matrices = 0;       // the weights of contractions: 7 per layer and the LM head
  int64_t nf4 = 0;            // what QLoRA stores in NF4: the 7 projections per layer (not embeddings, head, norms)
  int64_t adapters = 0;       // r (d_in + d_out) per targeted projection
  int64_t adapter_dims = 0;   // sum of (d_in + d_out) over targeted projections
};

HandCount count(int64_t h, int64_t f, int64_t L, int64_t heads, int64_t kv, int64_t r) {
  const int64_t d = h / heads, kv_out = kv * d, vocab = 32000;
  HandCount c;
  const int64_t q = h * h, k = h * kv_out, v = h * kv_out, o = h * h, gate = h * f, up = h * f, down = f * h;
  const int64_t per_layer_matrices = q + k + v + o + gate + up + down;
  c.matrices = L * per_layer_matrices + vocab * h;
  c.total = L * (per_layer_matrices + 2 * h) + 2 * vocab * h + h;  // + 2 norms per layer, embed, head, final norm
  c.nf4 = L * per_layer_matrices;
  c.adapter_dims = L * ((h + h) + (h + kv_out) + (h + kv_out) + (h + h) + (h + f) + (h + f) + (f + h));
  c.adapters = r * c.adapter_dims;
  return c;
}

ir::TrainingSettings task_settings(ir::Task task, int64_t seq) {
  ir::TrainingSettings s;
  s.seq_len = seq;
  s.global_batch_tokens = seq;  // one sequence: one micro-batch on one GPU
  s.task = task;
  return s;
}

void expect_task_memory(const ir::Graph& g, const HandCount& c) {
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  const ir::Plan plan = plan_of(1, 1, 1, 1);  // one GPU, ZeRO-0: nothing sharded
  const Estimate lora = Estimator(g, cluster, 1, task_settings(ir::Task::lora, 4096)).estimate(plan);
  // Frozen bf16 base (2 B), adapters with fp32 master + bf16 copy (6 B), fp32 gradient (4 B), AdamW m, v (8 B).
  EXPECT_EQ(lora.memory.parameters_bytes, 2 * c.total + 6 * c.adapters);
  EXPECT_EQ(lora.memory.gradients_bytes, 4 * c.adapters);
  EXPECT_EQ(lora.memory.optimizer_bytes, 8 * c.adapters);

  const Estimate qlora = Estimator(g, cluster, 1, task_settings(ir::Task::qlora, 4096)).estimate(plan);
  // NF4: 4 bits + 8/64 (fp8 absmax per 64) + 32/(64*256) (fp32 scale per 256 absmax) = 4.126953125 bits.
  const double nf4_bytes = double(c.nf4) * 4.126953125 / 8.0;
  const double bf16_bytes = 2.0 * double(c.total - c.nf4);
  EXPECT_NEAR(double(qlora.memory.parameters_bytes), nf4_bytes + bf16_bytes + 6.0 * double(c.adapters), 1.0);
  EXPECT_EQ(qlora.memory.gradients_bytes, 4 * c.adapters);
  EXPECT_EQ(qlora.memory.optimizer_bytes, 8 * c.adapters);

  // Model FLOPs per token: pretraining counts 6 per matrix weight; LoRA 4 (forward + input gradient)
  // plus 6 per adapter parameter; attention is the same in both.
  const Estimate pre = Estimator(g, cluster, 1, task_settings(ir::Task::pretrain, 4096)).estimate(plan);
  const double tokens = 4096;
  const double saved_per_token = 2.0 * double(c.matrices) - 6.0 * double(c.adapters);
  EXPECT_NEAR((pre.model_flops_per_step - lora.model_flops_per_step) / tokens, saved_per_token,
              1e-9 * pre.model_flops_per_step / tokens);
  EXPECT_DOUBLE_EQ(qlora.model_flops_per_step, lora.model_flops_per_step);
  // And the same FLOPs run faster: no weight-gradient GEMMs of the base.
  EXPECT_LT(lora.time.compute_s, pre.time.compute_s);
  EXPECT_GT(qlora.time.compute_s, lora.time.compute_s);  // + NF4 dequantisation per use
}

TEST(task_cost, nf4_bytes_per_element) {
  // QLoRA §3: double quantisation takes the scales from 32/64 = 0.5 bits to 8/64 + 32/(64*256) = 0.127 bits.
  EXPECT_DOUBLE_EQ(kNf4DoubleQuantBits, 0.126953125);
  EXPECT_DOUBLE_EQ(kNf4BytesPerElement, 0.5 + 0.126953125 / 8);
  EXPECT_DOUBLE_EQ(frozen_base_bytes(1000, 640), 360 * 2.0 + 640 * 0.515869140625);
}

TEST(task_cost, llama2_7b_lora_and_qlora_memory_and_flops) {
  const HandCount c = count(4096, 11008, 32, 32, 32, 16);
  EXPECT_EQ(c.total, 6738415616);  // meta-llama/Llama-2-7b-hf safetensors total
  // 32 layers x (4 x 8192 + 3 x 15104) x 16 = 39,976,960 adapter parameters (0.59 % of the model).
  EXPECT_EQ(c.adapters, 39976960);
  expect_task_memory(llama2(4096, 11008, 32, 32, 32), c);
}

TEST(task_cost, llama2_70b_lora_and_qlora_memory_and_flops) {
  const HandCount c = count(8192, 28672, 80, 64, 8, 16);
  EXPECT_EQ(c.total, 68976648192);  // meta-llama/Llama-2-70b-hf safetensors total
  // q, o: 16384; k, v: 8192 + 1024; gate, up, down: 36864 -> 80 x 161792 x 16.
  EXPECT_EQ(c.adapters, 207093760);
  expect_task_memory(llama2(8192, 28672, 80, 64, 8), c);
}

TEST(task_cost, adapters_split_over_tensor_parallel_like_their_base) {
  // Tiny layer h 64, a 4 x d 16, k 2 x 16, f 128, rank 8, tp 2. Column-parallel q/k/v/gate/up: A (r x d_in)
  // whole, B (d_out / tp x r); row-parallel o/down: A (r x d_in / tp), B whole.
  ShardContext ctx;
  ctx.seq_len = 128;
  ctx.tp = 2;
  ctx.task = ir::Task::lora;
  ctx.lora.rank = 8;
  const BlockCost c = block_cost(tiny::layer(), ctx, ir::cluster_preset("h100-sxm"), {});
  const int64_t r = 8;
  const int64_t q = r * (64 + 64 / 2), kv = r * (64 + 32 / 2), o = r * (64 / 2 + 64), gate_up = r * (64 + 128 / 2),
                down = r * (128 / 2 + 64);
  EXPECT_EQ(c.adapter_param_elements_local, q + 2 * kv + o + 2 * gate_up + down);
  EXPECT_EQ(c.nf4_param_elements_local, 0);  // LoRA keeps the base in bf16
  ctx.task = ir::Task::qlora;
  const BlockCost qc = block_cost(tiny::layer(), ctx, ir::cluster_preset("h100-sxm"), {});
  // The 7 projections, halved by tp: (64x64 + 2 x 64x32 + 64x64 + 3 x 64x128) / 2.
  EXPECT_EQ(qc.nf4_param_elements_local, (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128) / 2);
}

}  // namespace
}  // namespace mgt::cost
