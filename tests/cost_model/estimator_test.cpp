// Tests for the analytic estimator (estimator.hpp) on a tiny Llama-like graph (embed, L layers of
// h=64, a=4, k=2, d=16, f=128, head with v=256) and a cluster with round numbers. Every expected
// memory and time term is derived in the test from docs/cost-model.md §4-5; collective times use the
// LinkEstimate the Topology returns for the group and the alpha-beta formula written out here.
#include "mgt/cost_model/estimator.hpp"

#include "../common/plans.hpp"
#include "hand_layer.hpp"
#include "round_hardware.hpp"
#include "tiny_llama.hpp"

#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/error.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mgt::cost {
namespace {

using tiny::A, tiny::D, tiny::F, tiny::H, tiny::K, tiny::V, tiny::make_op, tiny::tensor;
using round::expect_near_rel, round::kGemmEff, round::kHbm, round::kPeak, round::kSeq, round::settings;

ir::Plan plan_of(int64_t dp_replicate, int64_t dp_shard, int64_t tp, int64_t cp, int64_t micro_batch) {
  return test::plan_of(dp_replicate, dp_shard, tp, cp, /*pp=*/1, /*vpp=*/1, micro_batch);
}

// ---- hand model, tp = cp = 1 ----

constexpr int64_t kLayerParams = H + H * A * D + 2 * H * K * D + A * D * H + H + 3 * H * F;  // 36992
constexpr int64_t kEmbedParams = V * H;
constexpr int64_t kHeadParams = H + H * V;
constexpr int64_t kLayerMatmulParams = H * A * D + 2 * H * K * D + A * D * H + 3 * H * F;

int64_t total_params(int64_t layers) { return layers * kLayerParams + kEmbedParams + kHeadParams; }

// Saved bytes per token of one layer (layer_cost_test.cpp lists them tensor by tensor):
// x, attn_in, h1, mlp_in (h each), q_rot, attn (a d), k_rot, v (k d), gate, up, act_out (f) in bf16
// and the fp32 log-sum-exp (a).
constexpr int64_t kLayerSavedNone = 2 * (4 * H + 2 * A * D + 2 * K * D + 3 * F) + 4 * A;  // 1680
constexpr int64_t kLayerSavedSelective = kLayerSavedNone - 2 * (H + H + F);              // norm, act outputs
constexpr int64_t kLayerSavedFull = 2 * H;                                                // x only
constexpr int64_t kHeadSaved = 2 * (H + H);                                               // x, x_norm

using hand::BlockTimes, hand::hand_layer;

BlockTimes hand_embed(int64_t b, int64_t s) {
  const double out = double(b * s * H * 2);
  return {2 * out / kHbm, 3 * out / kHbm};
}

BlockTimes hand_head(int64_t b, int64_t s) {
  const double T = double(b * s);
  const double lm = 2 * T * H * V / (kPeak * kGemmEff), loss = T * V * 10 / kHbm;
  return {2 * T * H * 2 / kHbm + lm + loss, 3 * T * H * 2 / kHbm + 2 * lm + loss};
}

// Alpha-beta ring model, nccl-tests conventions.
double ring_time(CollectiveKind kind, int64_t n, double bytes, const LinkEstimate& link) {
  if (n <= 1 || bytes <= 0) return 0;
  const double steps = kind == CollectiveKind::all_reduce ? 2.0 * (n - 1) : double(n - 1);
  const double factor = kind == CollectiveKind::all_reduce ? 2.0 * (n - 1) / n : double(n - 1) / n;
  return steps * link.latency_s + bytes * factor / link.bus_bytes_per_s;
}

// ---- memory ----

TEST(estimate, memory_ddp) {
  const int64_t L = 4, mbs = 2;
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), round::params());
  const Estimate e = est.estimate(plan_of(8, 1, 1, 1, mbs));
  const int64_t P = total_params(L);
  EXPECT_EQ(P, 180800);
  EXPECT_EQ(e.memory.parameters_bytes, P * (4 + 2));  // fp32 master + bf16 working copy
  EXPECT_EQ(e.memory.gradients_bytes, P * 4);
  EXPECT_EQ(e.memory.optimizer_bytes, P * 8);
  EXPECT_EQ(e.memory.fsdp_buffers_bytes, 0);
  const int64_t T = mbs * kSeq;
  EXPECT_EQ(e.memory.activations_bytes, L * T * kLayerSavedNone + T * kHeadSaved);
  // Loss working set (10 B per logit) beats two [b, s, v] bf16 backward transients.
  EXPECT_EQ(e.memory.transient_bytes, std::max(T * V * 10, 2 * T * V * 2));
  const int64_t allocated = P * 18 + e.memory.activations_bytes + e.memory.transient_bytes;
  const int64_t overhead = (1ll << 30) + (1ll << 28) + std::llround(0.05 * double(allocated));
  EXPECT_EQ(e.memory.overhead_bytes, overhead);
  EXPECT_EQ(e.memory.peak_bytes, allocated + overhead);
}

TEST(estimate, memory_fsdp) {
  const int64_t L = 4;
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), round::params());
  const Estimate e = est.estimate(plan_of(1, 8, 1, 1, 2));
  const int64_t shard = (total_params(L) + 7) / 8;
  EXPECT_EQ(e.memory.parameters_bytes, shard * 4);
  EXPECT_EQ(e.memory.gradients_bytes, shard * 4);
  EXPECT_EQ(e.memory.optimizer_bytes, shard * 8);
  // The worst moment is the head's backward (docs/cost-model.md §4.3): the logits working set
  // (T x V x 10 B), every activation of the micro-batch, and FSDP holding the head's bf16 weights and
  // bf16 gradient plus the last layer prefetched (16448 x 4 + 36992 x 2 = 139776 B). A layer's
  // backward holds five layer-sized bf16 units (369920 B) but only 2 x T x V x 2 B of transients:
  // 5242880 + 139776 > 2097152 + 369920 with the same activations at most.
  const int64_t T = 2 * kSeq;
  EXPECT_EQ(e.memory.fsdp_buffers_bytes, kHeadParams * (2 + 2) + kLayerParams * 2);
  EXPECT_EQ(e.memory.fsdp_buffers_bytes, 139776);
  EXPECT_EQ(e.memory.transient_bytes, T * V * 10);
  EXPECT_EQ(e.memory.activations_bytes, L * T * kLayerSavedNone + T * kHeadSaved);
}

TEST(estimate, memory_fsdp_worst_phase_under_full_recompute) {
  // ZeRO-3 with recompute full: the head's phase holds T x V x 10 (logits) + 139776 (FSDP) + all
  // activations (4 layers x 128 + 256 B/token); a layer copy's backward holds 2704 B/token of
  // transients (one rematerialised layer + two logits-sized gradients), its FSDP units and the
  // activations of the copies up to it. The head's phase is the largest by 81408 B over the last
  // layer copy's: the estimate is that phase, not the sum of each term's worst.
  const int64_t L = 4;
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), round::params());
  ir::Plan plan = plan_of(1, 8, 1, 1, 2);
  plan.recompute = ir::Recompute::full;
  const Estimate e = est.estimate(plan);
  const int64_t T = 2 * kSeq;
  const int64_t head_phase = T * V * 10 + 139776 + (L * T * kLayerSavedFull + T * kHeadSaved);
  // Last layer copy (its neighbours: a layer before, the head after, whose fp32 gradient is in flight).
  const int64_t last_layer_phase = T * 2704 + (kLayerParams * 6 + kHeadParams * 4) + L * T * kLayerSavedFull;
  const int64_t middle_layer_phase = T * 2704 + kLayerParams * 10 + (L - 1) * T * kLayerSavedFull;
  EXPECT_EQ(e.memory.fsdp_buffers_bytes + e.memory.transient_bytes + e.memory.activations_bytes,
            std::max({head_phase, last_layer_phase, middle_layer_phase}));
  EXPECT_EQ(head_phase, 6955520);
  EXPECT_EQ(last_layer_phase, 6874112);
}

TEST(estimate, memory_fsdp_shard_rounds_up) {
  // 180800 parameters over 6 shards: ceil = 30134.
  const int64_t L = 4;
  const Estimator est(tiny::graph(L), round::cluster(), 6, settings(48), round::params());
  const Estimate e = est.estimate(plan_of(1, 6, 1, 1, 2));
  EXPECT_EQ((total_params(L) + 5) / 6, 30134);
  EXPECT_EQ(e.memory.parameters_bytes, 30134 * 4);
  EXPECT_EQ(e.memory.gradients_bytes, 30134 * 4);
  EXPECT_EQ(e.memory.optimizer_bytes, 30134 * 8);
  expect_near_rel(e.time.optimizer_s, 30134.0 * 30 / kHbm);
}

TEST(estimate, memory_deepspeed_zero3_buffers) {
  // DeepSpeed ZeRO-3 under round limits (docs/cost-model.md §4.3). The tiny model's parameter tensors:
  // embedding and LM head V x H = 16384 (the largest, P), wq / wo 4096, wk / wv 2048, gate / up / down
  // 8192, norms H = 64. Tensors of at most 100 elements stay gathered: 2 norms per layer + the final
  // norm = 4 x 128 + 64 = 576.
  const int64_t L = 4, T = 2 * kSeq;
  CostParams params = round::params();
  params.zero3_submodule_limits = Zero3SubmoduleLimits{.max_live_parameters = 1000, .prefetch_bucket_size = 100,
                                                       .max_reuse_distance = 0, .param_persistence_threshold = 100,
                                                       .reduce_bucket_size = 5000};
  const int64_t P = V * H, persistent = L * 2 * H + H;
  EXPECT_EQ(P, 16384);
  EXPECT_EQ(persistent, 576);
  // Gathered: persistent + max_live + P (prefetch stops below max_live plus one whole tensor; reuse
  // distance 0 keeps nothing) = 576 + 1000 + 16384 = 17960.
  // Gradients: P > the 5000-element bucket, so the IPG bucket (5000) + P outside it + the interleaved
  // copy (16384 % 8 == 0: none for P alone; a bucket's copy, 5000) + the next gradient (P)
  // = 5000 + 16384 + 5000 + 16384 = 42768. All bf16: 2 x (17960 + 42768) = 121456 bytes.
  const int64_t expected = 2 * ((persistent + 1000 + P) + (5000 + P + 5000 + P));
  EXPECT_EQ(expected, 121456);
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), params);
  const Estimate e = est.estimate(plan_of(1, 8, 1, 1, 2));
  EXPECT_EQ(e.memory.fsdp_buffers_bytes, expected);
  // A bound at every moment: it adds to every activation and the largest transient (no FSDP phases).
  EXPECT_EQ(e.memory.activations_bytes, L * T * kLayerSavedNone + T * kHeadSaved);
  EXPECT_EQ(e.memory.transient_bytes, T * V * 10);
  const int64_t shard = (total_params(L) + 7) / 8;
  EXPECT_EQ(e.memory.parameters_bytes, shard * 4);  // model states as for FSDP
  EXPECT_EQ(e.memory.gradients_bytes, shard * 4);

  // 6 ranks do not divide P: its interleaved copy is P. Reuse distance 2000 keeps up to 2000 + P
  // gathered, more than max_live: 576 + 18384 + 16384 = 35344 gathered; 5000 + 3 x 16384 = 54152.
  params.zero3_submodule_limits->max_reuse_distance = 2000;
  const Estimator six(tiny::graph(L), round::cluster(), 6, settings(48), params);
  EXPECT_EQ(six.estimate(plan_of(1, 6, 1, 1, 2)).memory.fsdp_buffers_bytes, 2 * (35344 + 54152));
}

TEST(estimate, memory_deepspeed_zero3_buffers_small_tensors) {
  // Every tensor fits the bucket (R = 20000 > P = 16384): the bucket holds the gradients, its
  // interleaved copy is R, the next gradient P: 20000 + 20000 + 16384 = 56384. Gathered with
  // max_live 0 (no prefetch): 576 + 0 + 16384 = 16960.
  CostParams params = round::params();
  params.zero3_submodule_limits = Zero3SubmoduleLimits{.max_live_parameters = 0, .prefetch_bucket_size = 0,
                                                       .max_reuse_distance = 0, .param_persistence_threshold = 100,
                                                       .reduce_bucket_size = 20000};
  const Estimator est(tiny::graph(4), round::cluster(), 8, settings(), params);
  EXPECT_EQ(est.estimate(plan_of(1, 8, 1, 1, 2)).memory.fsdp_buffers_bytes, 2 * (16960 + 56384));
  EXPECT_THROW(zero3_submodule_buffer_bytes(*params.zero3_submodule_limits, -1, 0, 8), std::invalid_argument);
  EXPECT_THROW(zero3_submodule_buffer_bytes(*params.zero3_submodule_limits, 1, 0, 0), std::invalid_argument);
}

TEST(estimate, time_deepspeed_zero3_per_tensor_blocking) {
  // DeepSpeed v0.3.12-v0.5.4: every tensor above the persistence threshold (100) gathered alone, with
  // a zero-filled buffer and one copy per rank, its gradient reduce-scattered alone after one copy-in
  // per rank; nothing overlaps. The tiny layer's gathered tensors: wq, wo 4096, wk, wv 2048, gate, up,
  // down 8192 = 7 tensors of 36864 elements (the norms stay); embedding and LM head one of 16384 each.
  const int64_t L = 4, mbs = 2, seqs = 64, ranks = 8, ga = seqs / (ranks * mbs);
  CostParams params = round::params();
  params.kernel_floor_s = 1e-6;
  params.zero3_submodule_limits = Zero3SubmoduleLimits{.max_live_parameters = 1000, .prefetch_bucket_size = 100,
                                                       .max_reuse_distance = 0, .param_persistence_threshold = 100,
                                                       .reduce_bucket_size = 5000, .per_tensor_blocking = true};
  const Estimator est(tiny::graph(L), round::cluster(), ranks, settings(seqs), params);
  const LinkEstimate link = Topology(round::cluster(), ranks, params).link_for_group({{AxisPlacement{ranks, 1}}});
  const double layer_tensor_bytes = 10533;  // ceil(36864 x 2 / 7)
  const double copies_layer = 7.0 * ranks * 1e-6, copies_one = 1.0 * ranks * 1e-6;
  const double ag_layer = 7 * ring_time(CollectiveKind::all_gather, ranks, layer_tensor_bytes, link) + copies_layer +
                          36864.0 * 2 / kHbm;
  const double rs_layer = 7 * ring_time(CollectiveKind::reduce_scatter, ranks, layer_tensor_bytes, link) + copies_layer;
  const double ag_table = ring_time(CollectiveKind::all_gather, ranks, 32768, link) + copies_one + 32768.0 / kHbm;
  const double rs_table = ring_time(CollectiveKind::reduce_scatter, ranks, 32768, link) + copies_one;
  // Forward and backward gather; the embedding and the head are the two one-tensor blocks.
  const double per_microbatch = L * (2 * ag_layer + rs_layer) + 2 * (2 * ag_table + rs_table);
  ir::Plan plan = plan_of(1, ranks, 1, 1, mbs);
  expect_near_rel(est.estimate(plan).time.exposed_fsdp_s, double(ga) * per_microbatch);
  // Full recompute gathers each layer's tensors a third time, for the recomputed forward.
  plan.recompute = ir::Recompute::full;
  expect_near_rel(est.estimate(plan).time.exposed_fsdp_s, double(ga) * (per_microbatch + L * ag_layer));
  // The same limits without per_tensor_blocking: one gather per block, prefetched under compute.
  CostParams per_block = params;
  per_block.zero3_submodule_limits->per_tensor_blocking = false;
  const Estimator overlapped(tiny::graph(L), round::cluster(), ranks, settings(seqs), per_block);
  EXPECT_LT(overlapped.estimate(plan).time.exposed_fsdp_s, 0.5 * double(ga) * (per_microbatch + L * ag_layer));
  // LoRA (a frozen base: only the adapters reduce gradients) keeps the per-block pricing.
  TrainingSettings lora = settings(seqs);
  lora.task = ir::Task::lora;
  const double blocking_lora =
      Estimator(tiny::graph(L), round::cluster(), ranks, lora, params).estimate(plan).time.exposed_fsdp_s;
  EXPECT_EQ(blocking_lora, Estimator(tiny::graph(L), round::cluster(), ranks, lora, per_block).estimate(plan).time.exposed_fsdp_s);
}

TEST(estimate, memory_zero1_and_zero2) {
  const int64_t L = 4;
  const int64_t P = total_params(L), shard = (P + 7) / 8;
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), round::params());
  ir::Plan plan = plan_of(1, 8, 1, 1, 2);
  plan.zero_stage = 1;
  Estimate e = est.estimate(plan);
  EXPECT_EQ(e.memory.parameters_bytes, P * 2 + shard * 4);  // bf16 full, fp32 master sharded
  EXPECT_EQ(e.memory.gradients_bytes, P * 4);
  EXPECT_EQ(e.memory.optimizer_bytes, shard * 8);
  EXPECT_EQ(e.memory.fsdp_buffers_bytes, 0);
  plan.zero_stage = 2;
  e = est.estimate(plan);
  EXPECT_EQ(e.memory.parameters_bytes, P * 2 + shard * 4);
  EXPECT_EQ(e.memory.gradients_bytes, shard * 4);
  EXPECT_EQ(e.memory.optimizer_bytes, shard * 8);
  EXPECT_EQ(e.memory.fsdp_buffers_bytes, 0);
}

TEST(estimate, memory_activations_per_recompute_mode) {
  const int64_t L = 4, mbs = 2, T = mbs * kSeq;
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), round::params());
  ir::Plan plan = plan_of(8, 1, 1, 1, mbs);
  // Embed saves nothing; the head is no layer and keeps its inputs in every mode.
  plan.recompute = ir::Recompute::none;
  EXPECT_EQ(est.estimate(plan).memory.activations_bytes, L * T * kLayerSavedNone + T * kHeadSaved);
  plan.recompute = ir::Recompute::selective;
  EXPECT_EQ(est.estimate(plan).memory.activations_bytes, L * T * kLayerSavedSelective + T * kHeadSaved);
  plan.recompute = ir::Recompute::full;
  const Estimate e = est.estimate(plan);
  EXPECT_EQ(e.memory.activations_bytes, L * T * kLayerSavedFull + T * kHeadSaved);
  // Full recompute: backward rematerialises one layer (1680 B/token) beside two logits-sized
  // transients (2 x 512 B/token) = 2704 B/token, more than the 2560 B/token loss working set.
  EXPECT_EQ(e.memory.transient_bytes, std::max(T * V * 10, T * kLayerSavedNone + 2 * T * V * 2));
  EXPECT_EQ(e.memory.transient_bytes, T * 2704);
}

// ---- time ----

TEST(estimate, time_ddp) {
  const int64_t L = 4, mbs = 2, gpus = 8, seqs = 64;
  CostParams params = round::params();
  params.per_microbatch_overhead_s = 1e-3;
  params.per_step_overhead_s = 5e-3;
  const ir::ClusterSpec cluster = round::cluster();
  const Estimator est(tiny::graph(L), cluster, gpus, settings(seqs), params);
  const Estimate e = est.estimate(plan_of(8, 1, 1, 1, mbs));

  const int64_t ga = seqs / (8 * mbs);
  EXPECT_EQ(ga, 4);
  EXPECT_EQ(e.plan.grad_accum, ga);
  EXPECT_EQ(e.plan.zero_stage, 0);
  EXPECT_EQ(e.plan.sequence_parallel, false);

  const BlockTimes layer = hand_layer(mbs, kSeq), embed = hand_embed(mbs, kSeq), head = hand_head(mbs, kSeq);
  const double micro = embed.fwd + embed.bwd + L * (layer.fwd + layer.bwd) + head.fwd + head.bwd;
  const double bwd = embed.bwd + L * layer.bwd + head.bwd;
  expect_near_rel(e.time.compute_s, ga * micro);
  EXPECT_EQ(e.time.recompute_s, 0.0);
  EXPECT_EQ(e.time.exposed_tp_s, 0.0);
  EXPECT_EQ(e.time.exposed_cp_s, 0.0);
  EXPECT_EQ(e.time.exposed_fsdp_s, 0.0);

  // DDP all-reduce of fp32 grads over all 8 GPUs of the NVLink node.
  const Topology topo(cluster, gpus, params);
  const LinkEstimate link = topo.link_for_group({{AxisPlacement{8, 1}}});
  EXPECT_DOUBLE_EQ(link.bus_bytes_per_s, 100e9);  // NVLink at efficiency 1
  EXPECT_DOUBLE_EQ(link.latency_s, 1e-6);
  const double P = double(total_params(L));
  const double ar = 14 * 1e-6 + P * 4 * (2.0 * 7 / 8) / 100e9;
  EXPECT_NEAR(ring_time(CollectiveKind::all_reduce, 8, P * 4, link), ar, 1e-18);
  // Grads (723 kB) fit in the last 25 MiB bucket: all of it is exposed.
  const double last = ring_time(CollectiveKind::all_reduce, 8, std::min(P * 4, double(25 << 20)), link);
  expect_near_rel(e.time.exposed_dp_s, std::max(ar - bwd, last));
  expect_near_rel(e.time.exposed_dp_s, ar);

  expect_near_rel(e.time.optimizer_s, P * 30 / kHbm);
  expect_near_rel(e.time.overhead_s, ga * 1e-3 + 5e-3);
  const double step = ga * micro + ar + P * 30 / kHbm + ga * 1e-3 + 5e-3;
  expect_near_rel(e.step_time_s, step);
  expect_near_rel(e.tokens_per_s_per_gpu, double(seqs * kSeq) / step / gpus);

  // Model FLOPs over the whole global batch: 6 x matmul params x tokens + causal attention.
  const double tokens = double(seqs * kSeq);
  const double flops = 6.0 * (L * kLayerMatmulParams + H * V) * tokens +
                       L * 3.0 * 2.0 * seqs * kSeq * kSeq / 2.0 * A * (D + D);
  expect_near_rel(e.model_flops_per_step, flops);
  expect_near_rel(e.mfu, flops / (step * gpus * kPeak));
  EXPECT_EQ(e.bottleneck, bottleneck_of(e.time, e.step_time_s));
}

TEST(estimate, time_recompute) {
  const int64_t L = 4, mbs = 2;
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), round::params());
  ir::Plan plan = plan_of(8, 1, 1, 1, mbs);
  const int64_t ga = 4;
  const double T = double(mbs * kSeq);
  plan.recompute = ir::Recompute::selective;
  // Selective: the two norms and the activation forward again, layers only.
  const double selective = 2 * (2 * T * H * 2) / kHbm + 3 * T * F * 2 / kHbm;
  expect_near_rel(est.estimate(plan).time.recompute_s, ga * L * selective);
  plan.recompute = ir::Recompute::full;
  expect_near_rel(est.estimate(plan).time.recompute_s, ga * L * hand_layer(mbs, kSeq).fwd);
}

TEST(estimate, exposed_dp_ddp_branches) {
  // 256 layers: 9.5 M parameters, 38 MB of fp32 grads: two 25 MiB buckets of half the bytes each,
  // each bucket one all-reduce paying its own ring latency (DDP bucket_cap_mb = 25).
  const int64_t L = 256, mbs = 2;
  const double P = double(total_params(L));
  const double bwd = hand_embed(mbs, kSeq).bwd + L * hand_layer(mbs, kSeq).bwd + hand_head(mbs, kSeq).bwd;
  const double bucket_cap = double(25ll << 20);
  const double buckets = std::ceil(P * 4 / bucket_cap);
  ASSERT_EQ(buckets, 2.0);
  const double bucket = std::ceil(P * 4 / buckets);
  {
    // One NVLink node: the all-reduce hides under backward except the last bucket.
    const CostParams params = round::params();
    const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), params);
    const LinkEstimate link = Topology(round::cluster(), 8, params).link_for_group({{AxisPlacement{8, 1}}});
    const double last = ring_time(CollectiveKind::all_reduce, 8, bucket, link);
    const double ar = buckets * last;
    EXPECT_GT(last, ar - bwd);
    expect_near_rel(est.estimate(plan_of(8, 1, 1, 1, mbs)).time.exposed_dp_s, last);
  }
  {
    // A 131,072-token vocabulary: the embedding's 8.4 M parameters (32 MiB of fp32 gradients) are the
    // stage's first block, final only after the last backward kernel, so they fill the DDP buffer's
    // last two buckets (lower_passes.cpp DdpBuffer; PyTorch DDP buckets in reverse parameter order)
    // and both are exposed, not one.
    const int64_t vocab = 131072;
    ir::Graph g = tiny::graph(L);
    for (auto& d : g.blocks[0].tensors[0].dims)
      if (d.name == 'v') d.size = vocab;
    const double embed = double(vocab * tiny::H);
    const double all = P - double(kEmbedParams) + embed;
    const double n = std::ceil(all * 4 / bucket_cap);
    ASSERT_EQ(std::ceil(embed * 4 / bucket_cap), 2.0);
    const CostParams params = round::params();
    const Estimator est(g, round::cluster(), 8, settings(), params);
    const LinkEstimate link = Topology(round::cluster(), 8, params).link_for_group({{AxisPlacement{8, 1}}});
    const double last = ring_time(CollectiveKind::all_reduce, 8, std::ceil(all * 4 / n), link);
    expect_near_rel(est.estimate(plan_of(8, 1, 1, 1, mbs)).time.exposed_dp_s, 2 * last);
  }
  {
    // Two nodes over slow NICs (0.5 GB/s each, 8 per node): the all-reduce outlasts backward.
    ir::ClusterSpec cluster = round::cluster();
    cluster.nic_bytes_per_s = 0.5e9;
    const CostParams params = round::params();
    const Estimator est(tiny::graph(L), cluster, 16, settings(), params);
    const LinkEstimate link = Topology(cluster, 16, params).link_for_group({{AxisPlacement{16, 1}}});
    // The cut between the nodes carries the 8 NICs of a node.
    EXPECT_DOUBLE_EQ(link.bus_bytes_per_s, 8 * 0.5e9);
    const double last = ring_time(CollectiveKind::all_reduce, 16, bucket, link);
    const double ar = buckets * last;
    EXPECT_GT(ar - bwd, last);
    expect_near_rel(est.estimate(plan_of(16, 1, 1, 1, mbs)).time.exposed_dp_s, ar - bwd);
  }
}

// The FSDP prefetch chain (docs/cost-model.md §3) for embed, L layers, head, written out copy by copy:
// forward hides the all-gather of copy i under the forward of copy i-1; backward hides, under copy
// i's backward, the all-gather of copy i-1 and the reduce-scatter of copy i+1; the first all-gather
// and the embedding's reduce-scatter (last of backward) are exposed, every micro-batch (the next
// forward's all-gather queues behind that reduce-scatter on the one NCCL stream); the head is not
// resharded. With contention s, kernels under communication run s slower: a window costs
// max(comm - compute, s x min(comm, compute)).
struct FsdpHand {
  double s = 0;
  double exposed = 0, hidden = 0, cost = 0;
  double per_step(int64_t ga) const { return double(ga) * cost; }
  void overlap(double comm, double compute) {
    hidden += std::min(comm, compute);
    exposed += comm - std::min(comm, compute);
    cost += std::max(comm - compute, s * std::min(comm, compute));
  }
  void alone(double comm) {
    exposed += comm;
    cost += comm;
  }
};
FsdpHand hand_fsdp_chain(int64_t L, int64_t mbs, const LinkEstimate& link, double slowdown = 0) {
  const BlockTimes layer = hand_layer(mbs, kSeq), embed = hand_embed(mbs, kSeq), head = hand_head(mbs, kSeq);
  auto ag = [&](int64_t p) { return ring_time(CollectiveKind::all_gather, 8, double(p) * 2, link); };
  auto rs = [&](int64_t p) { return ring_time(CollectiveKind::reduce_scatter, 8, double(p) * 4, link); };
  const double agE = ag(kEmbedParams), agL = ag(kLayerParams), agH = ag(kHeadParams);
  const double rsE = rs(kEmbedParams), rsL = rs(kLayerParams), rsH = rs(kHeadParams);
  FsdpHand h;
  h.s = slowdown;
  // forward
  h.alone(agE);
  h.overlap(agL, embed.fwd);
  for (int64_t i = 1; i < L; ++i) h.overlap(agL, layer.fwd);
  h.overlap(agH, layer.fwd);
  // backward (each copy with its forward-order neighbours)
  h.overlap(0 + rsL, embed.bwd);        // embed: no previous copy, next is layer 1
  h.overlap(agE + rsL, layer.bwd);      // layer 1
  for (int64_t i = 2; i < L; ++i) h.overlap(agL + rsL, layer.bwd);
  h.overlap(agL + rsH, layer.bwd);      // layer L
  h.overlap(agL + 0, head.bwd);         // head: prefetch layer L, nothing after it
  h.alone(rsE);
  return h;
}

TEST(estimate, time_fsdp) {
  const int64_t L = 4, mbs = 2, seqs = 64;
  const CostParams params = round::params();
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(seqs), params);
  const Estimate e = est.estimate(plan_of(1, 8, 1, 1, mbs));
  const int64_t ga = seqs / (8 * mbs);
  EXPECT_EQ(e.plan.zero_stage, 3);
  const LinkEstimate link = Topology(round::cluster(), 8, params).link_for_group({{AxisPlacement{8, 1}}});
  expect_near_rel(e.time.exposed_fsdp_s, hand_fsdp_chain(L, mbs, link).per_step(ga));
  EXPECT_EQ(e.time.exposed_dp_s, 0.0);  // no dp_replicate
  const int64_t shard = (total_params(L) + 7) / 8;
  expect_near_rel(e.time.optimizer_s, double(shard) * 30 / kHbm);
}

TEST(estimate, fsdp_overlap_contention) {
  const int64_t L = 4, mbs = 2, ga = 4;
  CostParams params = round::params();
  params.overlap_compute_slowdown = 0.1;
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), params);
  const LinkEstimate link = Topology(round::cluster(), 8, params).link_for_group({{AxisPlacement{8, 1}}});
  // Compute slows by 10 % of the communication time it hides, except where the communication is the
  // longer of the two: there the slowed kernels still end under it (the embedding's tiny kernels
  // here), which is less than exposed + 10 % of hidden.
  const FsdpHand h = hand_fsdp_chain(L, mbs, link, 0.1);
  EXPECT_GT(h.hidden, 0.0);
  EXPECT_LT(h.cost, h.exposed + 0.1 * h.hidden);
  expect_near_rel(est.estimate(plan_of(1, 8, 1, 1, mbs)).time.exposed_fsdp_s, h.per_step(ga));
}

// ZeRO-1/2 (docs/cost-model.md §3): the gradient reduce-scatter is bucketed under the backward (once
// per step for ZeRO-1, under every micro-batch's backward for ZeRO-2), the bf16 parameter all-gather
// under the next forward; each exposes max(collective - compute it hides under, last 25 MiB bucket).
double hand_zero_dp_time(int64_t zero, int64_t L, int64_t mbs, int64_t ga, const LinkEstimate& link) {
  const double P = double(total_params(L));
  const BlockTimes layer = hand_layer(mbs, kSeq), embed = hand_embed(mbs, kSeq), head = hand_head(mbs, kSeq);
  const double fwd = embed.fwd + L * layer.fwd + head.fwd, bwd = embed.bwd + L * layer.bwd + head.bwd;
  const double bucket = 25.0 * (1 << 20);
  const double rs = ring_time(CollectiveKind::reduce_scatter, 8, P * 4, link);
  const double rs_last = ring_time(CollectiveKind::reduce_scatter, 8, std::min(bucket, P * 4), link);
  const double ag = ring_time(CollectiveKind::all_gather, 8, P * 2, link);
  const double ag_last = ring_time(CollectiveKind::all_gather, 8, std::min(bucket, P * 2), link);
  return (zero == 2 ? double(ga) : 1.0) * std::max(rs - bwd, rs_last) + std::max(ag - fwd, ag_last);
}

TEST(estimate, time_zero1_and_zero2) {
  const int64_t L = 4;
  const CostParams params = round::params();
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), params);
  const LinkEstimate link = Topology(round::cluster(), 8, params).link_for_group({{AxisPlacement{8, 1}}});
  for (int64_t zero : {1, 2}) {
    ir::Plan plan = plan_of(1, 8, 1, 1, 2);
    plan.zero_stage = zero;
    const Estimate e = est.estimate(plan);
    expect_near_rel(e.time.exposed_dp_s, hand_zero_dp_time(zero, L, 2, 4, link));
    EXPECT_EQ(e.time.exposed_fsdp_s, 0.0);  // no per-block traffic
    expect_near_rel(e.time.optimizer_s, double((total_params(L) + 7) / 8) * 30 / kHbm);
  }
}

TEST(estimate, exposed_tp) {
  const int64_t L = 4, mbs = 2, seqs = 64;
  const CostParams params = round::params();
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(seqs), params);
  ir::Plan plan = plan_of(4, 1, 2, 1, mbs);
  plan.sequence_parallel = false;
  const int64_t ga = seqs / (4 * mbs);
  const LinkEstimate link = Topology(round::cluster(), 8, params).link_for_group({{AxisPlacement{2, 1}}});
  const double T = double(mbs * kSeq);
  const double ar_act = ring_time(CollectiveKind::all_reduce, 2, T * H * 2, link);  // one [b, s, h] bf16
  const double ar_token = ring_time(CollectiveKind::all_reduce, 2, T * 4, link);    // fp32 per token
  // Layer: o and down in forward, q/k/v and gate/up inputs in backward. Embed: vocab-parallel lookup.
  // Head: lm_head input grad and three cross-entropy reductions.
  const double micro = L * 4 * ar_act + ar_act + ar_act + 3 * ar_token;
  Estimate e = est.estimate(plan);
  expect_near_rel(e.time.exposed_tp_s, ga * micro);
  EXPECT_EQ(e.plan.sequence_parallel, false);
  // Full recompute repeats each layer's forward collectives.
  plan.recompute = ir::Recompute::full;
  e = est.estimate(plan);
  expect_near_rel(e.time.exposed_tp_s, ga * (micro + L * 2 * ar_act));
}

TEST(estimate, exposed_cp) {
  const int64_t L = 4, mbs = 2, seqs = 64, cp = 2;
  const CostParams params = round::params();
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(seqs), params);
  const int64_t ga = seqs / (4 * mbs);
  const LinkEstimate link = Topology(round::cluster(), 8, params).link_for_group({{AxisPlacement{2, 1}}});
  // K and V of the local s / cp gathered over cp, in forward and again in backward; their grads
  // reduce-scattered.
  const double kv = double((mbs * (kSeq / cp) * K * D * 2) * 2 * cp);
  const double ag = ring_time(CollectiveKind::all_gather, cp, kv, link);
  const double rs = ring_time(CollectiveKind::reduce_scatter, cp, kv, link);
  // All-gather CP: the attention kernels wait for the gathered K/V, nothing is hidden.
  const double exposed = ag + (ag + rs);
  const Estimate e = est.estimate(plan_of(4, 1, 1, cp, mbs));
  expect_near_rel(e.time.exposed_cp_s, ga * L * exposed);
  EXPECT_EQ(e.time.exposed_tp_s, 0.0);
  EXPECT_EQ(e.time.exposed_fsdp_s, 0.0);  // no contention at slowdown 0
  // DDP spans dp_replicate x cp = all 8 GPUs.
  const LinkEstimate all = Topology(round::cluster(), 8, params).link_for_group({{AxisPlacement{8, 1}}});
  expect_near_rel(e.time.exposed_dp_s, ring_time(CollectiveKind::all_reduce, 8, double(total_params(L)) * 4, all));
}

TEST(estimate, cp_exchange_is_exposed_so_it_causes_no_overlap_contention) {
  // All-gather CP is not overlapped with compute, so overlap_compute_slowdown (the cost of NCCL
  // kernels sharing SMs with compute) must not change a cp plan without FSDP / ZeRO, and nothing
  // may be booked as FSDP time.
  const int64_t L = 4, mbs = 2, cp = 2;
  CostParams params = round::params();
  params.overlap_compute_slowdown = 0.1;
  const Estimator est(tiny::graph(L), round::cluster(), 8, settings(), params);
  const Estimate e = est.estimate(plan_of(4, 1, 1, cp, mbs));
  const Estimate no_contention = Estimator(tiny::graph(L), round::cluster(), 8, settings(), round::params())
                                     .estimate(plan_of(4, 1, 1, cp, mbs));
  EXPECT_EQ(e.time.exposed_cp_s, no_contention.time.exposed_cp_s);
  EXPECT_GT(e.time.exposed_cp_s, 0.0);
  EXPECT_EQ(e.time.exposed_fsdp_s, 0.0);
}

TEST(estimate, zero2_sharded_grads_reduce_every_micro_batch) {
  // ZeRO-2 keeps only a 1/N shard of the gradients (memory_zero1_and_zero2), so each micro-batch's
  // gradients must be reduce-scattered before the next one accumulates (DeepSpeed stage 2 reduces at
  // every micro-step); ZeRO-1 keeps the full fp32 gradient buffer and reduce-scatters once per step.
  // On slow links (1 GB/s) the reduce-scatter outlasts the backward, so the difference shows.
  const int64_t L = 4, ga = 4;
  CostParams params = round::params();
  ir::ClusterSpec slow = round::cluster();
  slow.nvlink_bytes_per_s = 1e9;
  const Estimator est(tiny::graph(L), slow, 8, settings(64), params);
  const LinkEstimate link = Topology(slow, 8, params).link_for_group({{AxisPlacement{8, 1}}});
  ir::Plan plan = plan_of(1, 8, 1, 1, 2);
  plan.zero_stage = 1;
  const double zero1 = est.estimate(plan).time.exposed_dp_s;
  expect_near_rel(zero1, hand_zero_dp_time(1, L, 2, ga, link));
  plan.zero_stage = 2;
  const double zero2 = est.estimate(plan).time.exposed_dp_s;
  expect_near_rel(zero2, hand_zero_dp_time(2, L, 2, ga, link));
  EXPECT_GT(zero2, zero1);
}

// Tied embeddings: the head reads the embedding table "wte" [v, h].
ir::Graph tied_graph(int64_t layers) {
  ir::Graph g = tiny::graph(layers);
  ir::Block& head = g.blocks.back();
  head.tensors[3] = tensor("wte", "vh", true);
  head.ops[1] = make_op("lm_head", ir::OpKind::contraction, {"x_norm", "wte"}, "logits", "bsh,vh->bsv");
  g.tied_parameters = {{"embed.wte", "head.wte"}};
  return g;
}

TEST(estimate, tied_parameters_counted_once) {
  const int64_t L = 4;
  ASSERT_NO_THROW(ir::verify(tied_graph(L), "tied"));
  {
    const Estimator est(tied_graph(L), round::cluster(), 8, settings(), round::params());
    const int64_t P = L * kLayerParams + V * H + H;  // wte once, final norm
    EXPECT_EQ(est.estimate(plan_of(8, 1, 1, 1, 2)).memory.gradients_bytes, P * 4);
  }
  {
    const Estimator est(tied_graph(L), round::cluster(), 8, settings(), round::params());
    const int64_t layer = H + H * (A / 2) * D + 2 * H * (K / 2) * D + (A / 2) * D * H + H + 3 * H * (F / 2);
    const int64_t P = L * layer + (V / 2) * H + H;
    EXPECT_EQ(est.estimate(plan_of(4, 1, 2, 1, 2)).memory.gradients_bytes, P * 4);
  }
}

TEST(estimate, tied_parameters_counted_once_with_padded_vocab) {
  // tp = 3: every rank holds ceil(256 / 3) = 86 rows of the tied table, once.
  const int64_t L = 4, tp = 3;
  const Estimator est(tied_graph(L), round::cluster(), 6, settings(), round::params());
  auto up = [](int64_t n) { return (n + tp - 1) / tp; };
  const int64_t layer = H + H * up(A) * D + 2 * H * up(K) * D + up(A) * D * H + H + 3 * H * up(F);
  const int64_t P = L * layer + up(V) * H + H;
  const int64_t result = est.estimate(plan_of(2, 1, tp, 1, 2)).memory.gradients_bytes;
  EXPECT_EQ(result, P * 4);
}

// ---- preconditions ----

TEST(estimate, rejects_world_size_mismatch) {
  const Estimator est(tiny::graph(2), round::cluster(), 8, settings(), round::params());
  EXPECT_THROW(est.estimate(plan_of(4, 1, 1, 1, 1)), ir::InputError);
  EXPECT_THROW(est.estimate(plan_of(8, 1, 2, 1, 1)), ir::InputError);
}

TEST(estimate, rejects_batch_that_does_not_divide) {
  const Estimator est(tiny::graph(2), round::cluster(), 8, settings(64), round::params());
  // 64 sequences over 8 replicas x micro_batch 3.
  EXPECT_THROW(est.estimate(plan_of(8, 1, 1, 1, 3)), ir::InputError);
  // 60 sequences over 8 replicas.
  const Estimator odd(tiny::graph(2), round::cluster(), 8, settings(60), round::params());
  EXPECT_THROW(odd.estimate(plan_of(8, 1, 1, 1, 1)), ir::InputError);
}

TEST(estimate, rejects_grad_accum_that_disagrees) {
  const Estimator est(tiny::graph(2), round::cluster(), 8, settings(64), round::params());
  ir::Plan plan = plan_of(8, 1, 1, 1, 2);
  plan.grad_accum = 3;  // the batch needs 64 / (8 * 2) = 4
  EXPECT_THROW(est.estimate(plan), ir::InputError);
  plan.grad_accum = 4;
  EXPECT_EQ(est.estimate(plan).plan.grad_accum, 4);
}

TEST(estimate, rejects_pipelines_that_do_not_split_and_ep_on_dense_models) {
  const Estimator est(tiny::graph(3), round::cluster(), 8, settings(64), round::params());
  ir::Plan plan = plan_of(1, 1, 1, 1, 1);
  plan.pp = 8;  // 3 layers in 8 chunks: no split (3 + 1 and 3 + 2 do not divide by 8 either)
  EXPECT_THROW(est.estimate(plan), ir::InputError);
  plan = plan_of(1, 8, 1, 1, 1);
  plan.ep = 2;  // a dense model has no experts to split
  EXPECT_THROW(est.estimate(plan), ir::InputError);
}

// ---- bottleneck_of ----

using TB = TimeBreakdown;

// A breakdown with only these terms set (seconds); every other term 0.
TimeBreakdown breakdown(std::initializer_list<std::pair<double TimeBreakdown::*, double>> terms) {
  TimeBreakdown t;
  for (const auto& [term, seconds] : terms) t.*term = seconds;
  return t;
}

TEST(bottleneck_of, largest_exposed_term_at_least_ten_percent) {
  TimeBreakdown t = breakdown({{&TB::compute_s, 1.0}, {&TB::exposed_tp_s, 0.15}, {&TB::exposed_dp_s, 0.2},
                               {&TB::exposed_cp_s, 0.05}});
  EXPECT_EQ(bottleneck_of(t, 1.4), "exposed dp communication");
  t.exposed_fsdp_s = 0.3;
  EXPECT_EQ(bottleneck_of(t, 1.7), "exposed fsdp communication");
  TimeBreakdown c = breakdown({{&TB::compute_s, 1.0}, {&TB::exposed_cp_s, 0.2}});
  EXPECT_EQ(bottleneck_of(c, 1.2), "exposed cp communication");
  c.compute_s = 0.9;
  c.exposed_cp_s = 0;
  c.exposed_tp_s = 0.1;
  EXPECT_EQ(bottleneck_of(c, 1.0), "exposed tp communication");  // exactly 10 %
}

TEST(bottleneck_of, compute_when_nothing_exposed_reaches_ten_percent) {
  TimeBreakdown t = breakdown({{&TB::compute_s, 1.0}, {&TB::exposed_tp_s, 0.05}, {&TB::exposed_dp_s, 0.09},
                               {&TB::optimizer_s, 0.01}});
  EXPECT_EQ(bottleneck_of(t, 1.15), "compute");
  // Fixed costs at a quarter of the step or more are named instead.
  t.optimizer_s = 0.2;
  t.overhead_s = 0.2;
  EXPECT_EQ(bottleneck_of(t, 1.54), "fixed costs (optimizer and per-step overhead)");
}

// The host's eager launches bind when the compute they hold up is at least 10 % of the step and
// larger than every exposed term; below that the step reads as its exposed terms or compute.
TEST(bottleneck_of, host_dispatch_when_the_launch_wait_is_the_largest_share) {
  const TimeBreakdown t = breakdown({{&TB::compute_s, 1.0}, {&TB::exposed_tp_s, 0.15}});
  EXPECT_EQ(bottleneck_of(t, 1.15, 0.3), "host dispatch (eager kernel launches)");
  EXPECT_EQ(bottleneck_of(t, 1.15, 0.1), "exposed tp communication");
  const TimeBreakdown c = breakdown({{&TB::compute_s, 1.0}});
  EXPECT_EQ(bottleneck_of(c, 1.0, 0.09), "compute");
}

}  // namespace
}  // namespace mgt::cost
