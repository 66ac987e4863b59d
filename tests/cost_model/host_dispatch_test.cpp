// Host-bound blocks (host_dispatch.hpp; docs/cost-model.md §9, "Host dispatch"): the kernels a
// Llama layer launches, counted by hand from the ATen chains; the bound on the round cluster, where
// every kernel time is a short product; the eager constant against the measured forward it comes
// from; and that a large layer is never host bound.
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/cost_model/host_dispatch.hpp"
#include "mgt/cost_model/layer_cost.hpp"

#include "round_hardware.hpp"

#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <numeric>

namespace mgt::cost {
namespace {

using nlohmann::json;

// Llama-3.2-1B (Hugging Face config.json): 16 layers, h 2048, 32 heads of 64, 8 kv heads, ffn 8192.
ir::Graph llama_1b() {
  const json config{{"model_type", "llama"},       {"hidden_size", 2048},     {"num_hidden_layers", 16},
                    {"num_attention_heads", 32},  {"num_key_value_heads", 8}, {"intermediate_size", 8192},
                    {"vocab_size", 128256},        {"max_position_embeddings", 512}, {"tie_word_embeddings", true},
                    {"head_dim", 64}};
  ir::Graph g = ir::graph_from_hf_config(config, "llama-3.2-1b.json");
  ir::verify(g, "llama-3.2-1b.json");
  return g;
}

const ir::Block& layer_of(const ir::Graph& g) {
  for (const auto& b : g.blocks)
    if (b.is_layer) return b;
  throw std::logic_error("no layer block");
}

OpLaunches sum_launches(const ir::Block& b, const KernelLaunchCounts& counts, const LaunchContext& ctx, bool with_loss = true) {
  OpLaunches total;
  for (const auto& op : b.ops) {
    if (!with_loss && op.kind == ir::OpKind::softmax_cross_entropy) continue;
    const OpLaunches l = op_launches(op, counts, ctx);
    total.fwd += l.fwd, total.bwd += l.bwd;
  }
  return total;
}

TEST(host_dispatch, llama_layer_launches_by_hand) {
  const ir::Graph g = llama_1b();
  const ir::Block& layer = layer_of(g);
  // Eager (Hugging Face under autocast; the ATen calls bench/host_dispatch/count_aten_ops.py counts):
  // two RMSNorms of 8, seven projections (q, k, v, o, gate, up, down) of one GEMM, rope on q and k
  // of 5, one SDPA flash call, silu and mul, two residual adds: 16 + 7 + 10 + 1 + 2 + 2 = 38.
  // Backward: norms 2 x 16, GEMMs 7 x 2 (data and weight), rope 2 x 7, flash backward 3, activation
  // 3, residual 2: 32 + 14 + 14 + 3 + 3 + 2 = 68.
  const OpLaunches eager = sum_launches(layer, eager_launch_counts(), {});
  EXPECT_EQ(eager.fwd, 38);
  EXPECT_EQ(eager.bwd, 68);
  // Fused (TE / apex): norms 1 + 2 backward, rope 1 + 1, the activation 1 + 1: 2 + 7 + 2 + 1 + 1 + 2 = 15
  // forward, 4 + 14 + 2 + 3 + 1 + 2 = 26 backward.
  const OpLaunches fused = sum_launches(layer, KernelLaunchCounts{}, {});
  EXPECT_EQ(fused.fwd, 15);
  EXPECT_EQ(fused.bwd, 26);
  // fp8 linears quantise each GEMM's input and output gradient; LoRA's frozen weights get no
  // weight-gradient GEMM.
  EXPECT_EQ(sum_launches(layer, KernelLaunchCounts{}, {true, true, false}).fwd, 15 + 7);
  EXPECT_EQ(sum_launches(layer, KernelLaunchCounts{}, {false, false, false}).bwd, 26 - 7);
  // Megatron's linear_qkv and linear_fc1: k and v ride on q's GEMM, gate on up's (the IR's order),
  // three launches fewer each way, twice that backward.
  LaunchContext megatron;
  megatron.fused_projections = true;
  const std::vector<OpLaunches> fused_qkv = block_launches(layer, KernelLaunchCounts{}, megatron);
  OpLaunches total;
  for (const OpLaunches& l : fused_qkv) total.fwd += l.fwd, total.bwd += l.bwd;
  EXPECT_EQ(total.fwd, 15 - 3);
  EXPECT_EQ(total.bwd, 26 - 6);
  for (size_t i = 0; i < layer.ops.size(); ++i) {
    const std::string& name = layer.ops[i].name;
    if (name == "k_proj" || name == "v_proj") {
      EXPECT_EQ(fused_qkv[i].fwd, 0) << name;
    } else if (name == "q_proj" || name == "o_proj") {
      EXPECT_EQ(fused_qkv[i].fwd, 1) << name;
    }
  }
  // Without the flag, block_launches is op_launches op by op.
  const std::vector<OpLaunches> separate = block_launches(layer, eager_launch_counts(), {});
  for (size_t i = 0; i < layer.ops.size(); ++i) EXPECT_EQ(separate[i].bwd, op_launches(layer.ops[i], eager_launch_counts(), {}).bwd);
}

TEST(host_dispatch, profiles_choose_counts_and_host_time_by_what_they_fuse_and_how_they_dispatch) {
  const ir::GpuSpec gpu = ir::cluster_preset("b200").gpu;
  const CostParams hf = cost_params_for(gpu, framework_profile("pytorch-fsdp"));
  EXPECT_EQ(hf.launches, eager_launch_counts());
  EXPECT_GT(hf.host_launch_s, 0.0);
  const CostParams mcore = cost_params_for(gpu, framework_profile("megatron-core"));
  EXPECT_EQ(mcore.launches, KernelLaunchCounts{});
  EXPECT_EQ(mcore.host_launch_s, hf.host_launch_s);  // both launch from Python, eagerly
  EXPECT_TRUE(mcore.fused_projections);  // linear_qkv, linear_fc1
  EXPECT_FALSE(hf.fused_projections);    // q_proj, k_proj, v_proj; gate_proj, up_proj
  EXPECT_TRUE(cost_params_for(gpu, framework_profile("megatron-lm")).fused_projections);
  EXPECT_TRUE(cost_params_for(gpu, framework_profile("nanotron")).fused_projections);
  EXPECT_FALSE(cost_params_for(gpu, framework_profile("torchtitan")).fused_projections);
  const CostParams graphs = cost_params_for(gpu, select_framework("megatron-core", {"cuda-graphs"}).profile);
  EXPECT_EQ(graphs.host_launch_s, 0.0);
  const CostParams compiled = cost_params_for(gpu, select_framework("torchtitan", {"torch.compile"}).profile);
  EXPECT_EQ(compiled.launches, KernelLaunchCounts{});
  EXPECT_GT(compiled.host_launch_s, 0.0);
  EXPECT_LT(compiled.host_launch_s, hf.host_launch_s);
  EXPECT_EQ(cpu_cost_params().host_launch_s, 0.0);
}

// The eager constant against the two measurements it comes from (shared/validation/kernels/
// memory_launch.json, mleng_b200_torchcompile_llama32_1b_b1_s512: Hugging Face Llama-3.2-1B, batch 1 x
// 512, one B200, 4-6x slower eager than from CUDA graphs, so the eager times are the host's): the
// inference forward (the embedding, 16 layers, the final norm and the LM head, no loss) takes 8.1 ms;
// forward + backward with gradient checkpointing (the forward with the loss, the 16 layers again,
// the backward of everything) 48.8 ms. The launches are counted here from the graph; the constant is
// the geometric mean of the two per-launch times, and each row is then within 26 %.
TEST(host_dispatch, eager_host_time_is_the_geometric_mean_of_the_two_measured_eager_rows) {
  const ir::Graph g = llama_1b();
  const CostParams hf = cost_params_for(ir::cluster_preset("b200").gpu, framework_profile("pytorch-fsdp"));
  int forward = 0, layer_forward = 0, backward = 0, loss = 0;
  for (const auto& b : g.blocks) {
    const OpLaunches all = sum_launches(b, hf.launches, {});
    forward += int(b.repeat) * sum_launches(b, hf.launches, {}, false).fwd;
    loss += all.fwd - sum_launches(b, hf.launches, {}, false).fwd;
    if (b.is_layer) layer_forward += int(b.repeat) * all.fwd;
    backward += int(b.repeat) * all.bwd;
  }
  EXPECT_EQ(forward, 1 + 16 * 38 + 8 + 1);
  EXPECT_EQ(layer_forward, 16 * 38);
  EXPECT_EQ(loss, 3);
  EXPECT_EQ(backward, 1 + 16 * 68 + 16 + 2 + 3);  // embedding, layers, final norm, LM head, loss
  const int training = forward + loss + layer_forward + backward;
  const double inference_s = 8.1e-3 / forward, training_s = 48.8e-3 / training;
  EXPECT_NEAR(hf.host_launch_s, std::sqrt(inference_s * training_s), 0.01 * hf.host_launch_s);
  EXPECT_LT(std::abs(forward * hf.host_launch_s / 8.1e-3 - 1), 0.27);
  EXPECT_LT(std::abs(training * hf.host_launch_s / 48.8e-3 - 1), 0.27);
}

// The round cluster's constants with eager launch counts and `host_launch_s` per launch, and one
// micro-batch of `seq` tokens.
CostParams eager_round_params(double host_launch_s) {
  CostParams p = round::params();
  p.launches = eager_launch_counts();
  p.host_launch_s = host_launch_s;
  return p;
}
ShardContext one_sequence(int64_t seq) {
  ShardContext ctx;
  ctx.micro_batch = 1;
  ctx.seq_len = seq;
  return ctx;
}
constexpr double kLaunch = 10e-6;

// On the round cluster a small layer's kernels take less than their launches: the forward and the
// backward each take exactly their host time, and the per-op costs the simulator uses sum to it.
TEST(host_dispatch, a_small_layer_runs_at_the_host_rate_in_the_estimator_and_the_simulator) {
  const ir::Graph g = llama_1b();
  const ir::Block& layer = layer_of(g);
  const ShardContext ctx = one_sequence(16);
  const ir::ClusterSpec c = round::cluster();
  const BlockCost gpu_only = block_cost(layer, ctx, c, eager_round_params(0));
  ASSERT_LT(gpu_only.fwd_compute_s, 38 * kLaunch);  // the premise: the GPU would idle
  ASSERT_LT(gpu_only.bwd_compute_s, 68 * kLaunch);
  const CostParams p = eager_round_params(kLaunch);
  const BlockCost bound = block_cost(layer, ctx, c, p);
  EXPECT_NEAR(bound.fwd_compute_s, 38 * kLaunch, 1e-12);
  EXPECT_NEAR(bound.bwd_compute_s, 68 * kLaunch, 1e-12);
  EXPECT_NEAR(bound.host_wait_s, (38 + 68) * kLaunch - gpu_only.fwd_compute_s - gpu_only.bwd_compute_s, 1e-12);
  double fwd = 0, bwd = 0;
  for (const OpCost& op : op_costs(layer, ctx, c, p)) fwd += op.fwd_s, bwd += op.bwd_data_s + op.bwd_weight_s;
  EXPECT_NEAR(fwd, bound.fwd_compute_s, 1e-12);
  EXPECT_NEAR(bwd, bound.bwd_compute_s, 1e-12);
}

// The estimator books the blocks' waits as part of compute: its compute less host_wait_s is the
// compute of the same plan with no host cost at all, and host_wait_s is the blocks' waits summed
// over the copies and micro-batches (16 layers, the embedding and head blocks, 4 micro-batches).
TEST(host_dispatch, the_estimate_reports_the_wait_inside_compute) {
  const ir::Graph g = llama_1b();
  const ir::ClusterSpec c = round::cluster();
  TrainingSettings settings;
  settings.seq_len = 16;
  settings.global_batch_tokens = 4 * 16;
  const Estimate gpu_only = Estimator(g, c, 1, settings, eager_round_params(0)).estimate(ir::Plan{});
  const Estimate bound = Estimator(g, c, 1, settings, eager_round_params(kLaunch)).estimate(ir::Plan{});
  double waits = 0;
  for (const auto& b : g.blocks) waits += double(b.repeat) * block_cost(b, one_sequence(16), c, eager_round_params(kLaunch)).host_wait_s;
  ASSERT_EQ(bound.plan.grad_accum, 4);
  ASSERT_GT(waits, 0.0);
  EXPECT_NEAR(bound.host_wait_s, 4 * waits, 1e-12);
  EXPECT_NEAR(bound.time.compute_s - bound.host_wait_s, gpu_only.time.compute_s, 1e-12);
  EXPECT_EQ(gpu_only.host_wait_s, 0.0);
  EXPECT_EQ(bound.bottleneck, "host dispatch (eager kernel launches)");
}

// A layer of 8192 tokens runs far longer than its 38 launches: nothing changes.
TEST(host_dispatch, a_large_layer_is_never_host_bound) {
  const ir::Graph g = llama_1b();
  const ir::Block& layer = layer_of(g);
  const ir::ClusterSpec c = round::cluster();
  const BlockCost gpu_only = block_cost(layer, one_sequence(8192), c, eager_round_params(0));
  const BlockCost bound = block_cost(layer, one_sequence(8192), c, eager_round_params(kLaunch));
  EXPECT_EQ(bound.fwd_compute_s, gpu_only.fwd_compute_s);
  EXPECT_EQ(bound.bwd_compute_s, gpu_only.bwd_compute_s);
  EXPECT_EQ(bound.host_wait_s, 0.0);
}

TEST(host_dispatch, the_bound_adds_only_the_host_time_beyond_the_kernels) {
  EXPECT_EQ(host_bound_extra_s(5e-6, 3e-6), 0.0);
  EXPECT_DOUBLE_EQ(host_bound_extra_s(3e-6, 5e-6), 2e-6);
}

}  // namespace
}  // namespace mgt::cost
