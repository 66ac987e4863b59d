// Framework profiles (docs/cost-model.md §9): selection by name, alias and feature; CostParams from
// the kernel model and the profile, checked against the published fractions by hand; and each
// profile claim that changes a number, with the expected difference written out.
#include "mgt/cost_model/framework_profile.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/kernel_model.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/layout.hpp"

#include "../common/plans.hpp"
#include "round_hardware.hpp"
#include "tiny_llama.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace mgt::cost {
namespace {

using round::expect_near_rel;
using test::plan_of;

TEST(FrameworkProfile, AliasesSelectTheFrameworkTheyRun) {
  EXPECT_EQ(select_framework("NeMo").profile.name, "megatron-core");
  EXPECT_EQ(select_framework("megatron-bridge").profile.name, "megatron-core");
  EXPECT_EQ(select_framework("llm-foundry").profile.name, "pytorch-fsdp");
  EXPECT_EQ(select_framework("axolotl").profile.name, "pytorch-fsdp");
  EXPECT_EQ(select_framework("metaseq").profile.name, "pytorch-fsdp");
  for (const auto& name : framework_profile_names()) EXPECT_TRUE(select_framework(name).known) << name;
}

// Names the validation README lists whose software is described in a publication: MegaScale runs
// Megatron-LM with every overlap of its §3.2; Meta's Llama 3 stack is what torchtitan publishes.
TEST(FrameworkProfile, PublishedSystemsMapToTheProfileOfWhatTheyRun) {
  const FrameworkSelection mega = select_framework("MegaScale");
  EXPECT_TRUE(mega.known);
  EXPECT_EQ(mega.profile.name, "megatron-core");
  EXPECT_TRUE(mega.profile.tp_comm_overlap && mega.profile.p2p_overlap);
  EXPECT_TRUE(mega.profile.overlap_grad_reduce && mega.profile.overlap_param_gather);
  ASSERT_EQ(mega.notes.size(), 2u);  // which profile, and what the name implies
  EXPECT_NE(mega.notes[1].find("implies tp-comm-overlap"), std::string::npos) << mega.notes[1];
  const FrameworkSelection meta = select_framework("meta-internal");
  EXPECT_EQ(meta.profile.name, "torchtitan");
  EXPECT_TRUE(meta.profile.fsdp_gathers_once_under_pipeline && meta.profile.offers_interleaved && meta.profile.p2p_overlap);
}

// Names as sources spell them: case, blanks and underscores do not matter; frameworks that run
// another profile's code take it, and say which.
TEST(FrameworkProfile, SpellingsAndDerivedFrameworksFindTheirProfile) {
  for (const auto& [name, profile] : std::vector<std::pair<std::string, std::string>>{
           {"PyTorch FSDP", "pytorch-fsdp"}, {" Megatron_Core ", "megatron-core"}, {"TorchTitan", "torchtitan"},
           {"GPT-NeoX", "megatron-deepspeed"}, {"OLMo", "pytorch-fsdp"}, {"Composer", "pytorch-fsdp"},
           {"lit_gpt", "pytorch-fsdp"}, {"mcore", "megatron-core"}}) {
    const FrameworkSelection s = select_framework(name);
    EXPECT_TRUE(s.known) << name;
    EXPECT_EQ(s.profile.name, profile) << name;
  }
  EXPECT_TRUE(select_framework("PyTorch FSDP").notes.empty());  // the canonical name, spelled otherwise
  EXPECT_FALSE(select_framework("gpt neo x").known);           // not a word-for-word spelling
}

// A name that is a phrase: the known name inside it, the product before the library it runs, the
// features it names; a known name inside a longer one does not count.
TEST(FrameworkProfile, APhraseIsReadForTheNameAndFeaturesItContains) {
  for (const auto& [name, profile] : std::vector<std::pair<std::string, std::string>>{
           {"Megatron-LM (Megatron-Core)", "megatron-core"}, {"Megatron-LM v2.5", "megatron-lm"},
           {"DeepSpeed ZeRO-3", "deepspeed"}, {"PyTorch FSDP2", "pytorch-fsdp"}, {"NVIDIA NeMo Megatron", "megatron-core"},
           {"torchtitan + torch.compile", "torchtitan"}, {"megascale-internal-2030", "megatron-core"}}) {
    const FrameworkSelection s = select_framework(name);
    EXPECT_TRUE(s.known) << name;
    EXPECT_EQ(s.profile.name, profile) << name;
    ASSERT_FALSE(s.notes.empty()) << name;
    EXPECT_NE(s.notes.front().find("read as"), std::string::npos) << s.notes.front();
  }
  // NeMo's own implied behaviour comes with it (bf16 gradients), and named features apply.
  EXPECT_EQ(select_framework("NVIDIA NeMo Megatron").profile.gradient_bytes, 2);
  EXPECT_EQ(select_framework("torchtitan + torch.compile").profile.dispatch, HostDispatch::torch_compile);
  EXPECT_EQ(select_framework("torchtitan").profile.dispatch, HostDispatch::eager);
  // "deepspeed" inside "Megatron-DeepSpeed" is not DeepSpeed's own profile.
  EXPECT_EQ(select_framework("Microsoft Megatron-DeepSpeed fork").profile.name, "megatron-deepspeed");
}

TEST(FrameworkProfile, UnknownNameGetsTheDefaultAndSaysSo) {
  const FrameworkSelection s = select_framework("ColossalAI 0.3");
  EXPECT_FALSE(s.known);
  EXPECT_EQ(s.profile.name, "pytorch-fsdp");
  ASSERT_FALSE(s.notes.empty());
  EXPECT_NE(s.notes.front().find("has no profile"), std::string::npos);
}

TEST(FrameworkProfile, FeaturesAdjustTheProfile) {
  const FrameworkProfile plain = framework_profile("torchtitan");
  EXPECT_FALSE(plain.tp_comm_overlap);
  EXPECT_FALSE(plain.fused_norm);
  const FrameworkSelection s = select_framework("torchtitan", {"torch.compile", "async-tp", "float8", "no-such-feature"});
  EXPECT_TRUE(s.profile.tp_comm_overlap);
  EXPECT_TRUE(s.profile.fused_norm && s.profile.fused_activation && s.profile.fused_cross_entropy);
  EXPECT_EQ(s.profile.dispatch, HostDispatch::torch_compile);
  ASSERT_EQ(s.notes.size(), 1u);  // only the unknown feature is noted
  EXPECT_NE(s.notes.front().find("no-such-feature"), std::string::npos);
  const FrameworkProfile te = select_framework("megatron-lm", {"transformer-engine"}).profile;
  EXPECT_EQ(te.attention, AttentionImpl::cudnn);
}

TEST(FrameworkProfile, WhatEachFrameworkOffersThePlanner) {
  const FrameworkProfile fsdp = framework_profile("pytorch-fsdp"), mcore = framework_profile("megatron-core"),
                         nano = framework_profile("nanotron"), mds = framework_profile("megatron-deepspeed");
  EXPECT_FALSE(fsdp.offers_pipeline);
  EXPECT_TRUE(fsdp.offers_zero[2] && fsdp.offers_zero[3] && !fsdp.offers_zero[1]);
  EXPECT_TRUE(mcore.offers_interleaved && mcore.offers_zero[1]);
  EXPECT_TRUE(nano.offers_pipeline && !nano.offers_interleaved && nano.offers_zero[1] && !nano.offers_zero[3]);
  EXPECT_TRUE(mds.offers_pipeline && !mds.offers_interleaved && !mds.offers_zero[2]);
}

TEST(FrameworkProfile, MoeDispatcherAcrossDomains) {
  // Megatron-Core's tuned cross-node EP runs the flex dispatcher (DeepEP / HybridEP); the flat
  // all-to-all elsewhere, or when the row says alltoall.
  const ir::GpuSpec h100 = ir::cluster_preset("h100-sxm").gpu;
  EXPECT_TRUE(cost_params_for(h100, framework_profile("megatron-core")).moe_hierarchical_dispatch);
  EXPECT_TRUE(framework_profile("nemo").moe_hierarchical_dispatch);
  EXPECT_FALSE(cost_params_for(h100, framework_profile("torchtitan")).moe_hierarchical_dispatch);
  EXPECT_FALSE(select_framework("megatron-core", {"alltoall-dispatcher"}).profile.moe_hierarchical_dispatch);
  EXPECT_TRUE(select_framework("torchtitan", {"deepep"}).profile.moe_hierarchical_dispatch);
  const FrameworkProfile hybrid = select_framework("megatron-lm", {"hybridep"}).profile;
  EXPECT_TRUE(hybrid.moe_hierarchical_dispatch && !hybrid.moe_dispatch_host_sync);
}

TEST(FrameworkProfile, CostParamsCombineKernelModelAndProfile) {
  const ir::GpuSpec h100 = ir::cluster_preset("h100-sxm").gpu, a100 = ir::cluster_preset("a100-80g-sxm").gpu;
  const FrameworkProfile mcore = framework_profile("megatron-core"), fsdp = framework_profile("pytorch-fsdp");
  const CostParams m = cost_params_for(h100, mcore);
  // Hopper: cuBLAS bf16 at 0.86 of peak (kernel rows), cuDNN attention 0.73 / 0.60 (docs §8.1).
  expect_near_rel(m.gemm_max_efficiency, 0.86 * mcore.in_step_kernel_fraction_hopper);
  expect_near_rel(m.attention_fwd_efficiency, 0.73 * mcore.attention_in_step_fraction);
  expect_near_rel(m.attention_bwd_efficiency, 0.60 * mcore.attention_in_step_fraction);
  EXPECT_FALSE(m.attention_materialised);
  EXPECT_EQ(m.norm_traffic_factor, 1.0);  // TE fuses the norm
  expect_near_rel(m.tp_comm_hidden_fraction, mcore.comm_hidden_fraction);
  expect_near_rel(m.nvlink_efficiency, 0.81);
  const CostParams f = cost_params_for(a100, fsdp);
  // Ampere: GEMM 0.75, FlashAttention-2 0.62 / 0.50; eager LayerNorm under autocast moves 6 of 4 bytes.
  expect_near_rel(f.gemm_max_efficiency, 0.75 * fsdp.in_step_kernel_fraction);
  expect_near_rel(f.attention_fwd_efficiency, 0.62 * fsdp.attention_in_step_fraction);
  expect_near_rel(f.norm_traffic_factor, 1.5);
  EXPECT_EQ(f.tp_comm_hidden_fraction, 0.0);
  expect_near_rel(f.dp_grad_reduce_hidden_fraction, fsdp.comm_hidden_fraction);
  // The attention curve follows the family's MMA instruction: cuDNN (WGMMA) balances its exponentials
  // at H100's 64, FlashAttention-2 (mma.sync, 2/3 of the peak) at 64 x 2/3; on A100 both are 32.
  EXPECT_DOUBLE_EQ(m.attention_curve.half_head_dim, 64.0);
  EXPECT_NEAR(cost_params_for(h100, fsdp).attention_curve.half_head_dim, 128.0 / 3.0, 1e-12);
  EXPECT_NEAR(cost_params_for(h100, fsdp).attention_curve.reference_half_head_dim, 128.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(f.attention_curve.half_head_dim, 32.0);
  // Megatron-LM 2021: all-reduce after backward, nothing hidden.
  EXPECT_EQ(cost_params_for(a100, framework_profile("megatron-lm")).dp_grad_reduce_hidden_fraction, 0.0);
  // The profile-less default is the pytorch-fsdp profile.
  const CostParams d = default_cost_params(a100);
  EXPECT_EQ(d.gemm_max_efficiency, f.gemm_max_efficiency);
  EXPECT_EQ(d.attention_bwd_efficiency, f.attention_bwd_efficiency);
  EXPECT_EQ(d.per_microbatch_overhead_s, f.per_microbatch_overhead_s);
}

// tp-comm-overlap: with kernels far longer than the TP collectives (a 1 TFLOP/s, 1 GB/s GPU), a hidden share h
// of every TP collective costs only the slowed kernels: exposed TP becomes comm x (1 - h + h x s), so
// the step shrinks by exposed_tp x h x (1 - s). With nothing to hide under (a 1 EFLOP/s GPU) the
// TP time stays.
TEST(FrameworkProfile, TpCommOverlapHidesTheTpCollectivesUnderTheGemms) {
  ir::ClusterSpec slow = round::cluster();
  slow.gpu.peak_bf16_flops_per_s = 1e12;
  slow.gpu.hbm_bytes_per_s = 1e9;  // the embedding lookup and the loss too outlast their collectives
  const ir::Plan tp2 = plan_of(1, 1, 2, 1);
  CostParams exposed = round::params();
  exposed.overlap_compute_slowdown = 0.1;
  CostParams hidden = exposed;
  hidden.tp_comm_hidden_fraction = 0.5;
  const Estimate a = Estimator(tiny::graph(2), slow, 2, round::settings(8), exposed).estimate(tp2);
  const Estimate b = Estimator(tiny::graph(2), slow, 2, round::settings(8), hidden).estimate(tp2);
  ASSERT_GT(a.time.exposed_tp_s, 0.0);
  expect_near_rel(b.time.exposed_tp_s, a.time.exposed_tp_s * (1 - 0.5 + 0.5 * 0.1), 1e-9);
  expect_near_rel(a.step_time_s - b.step_time_s, a.time.exposed_tp_s * 0.5 * (1 - 0.1), 1e-9);

  ir::ClusterSpec fast = round::cluster();
  fast.gpu.peak_bf16_flops_per_s = 1e18;
  fast.gpu.hbm_bytes_per_s = 1e18;
  hidden.tp_comm_hidden_fraction = 1.0;
  const Estimate c = Estimator(tiny::graph(2), fast, 2, round::settings(8), exposed).estimate(tp2);
  const Estimate d = Estimator(tiny::graph(2), fast, 2, round::settings(8), hidden).estimate(tp2);
  EXPECT_GT(d.time.exposed_tp_s, 0.99 * c.time.exposed_tp_s);
}

// P2P overlap: a pipeline's sends hidden by share h leave (1 - h) of them exposed.
TEST(FrameworkProfile, P2pOverlapHidesThePipelineSends) {
  CostParams exposed = round::params();
  CostParams hidden = exposed;
  hidden.p2p_hidden_fraction = 0.75;
  const ir::Plan pp2 = plan_of(1, 1, 1, 1, 2, 1, 1);
  const Estimate a = Estimator(tiny::graph(4), round::cluster(), 2, round::settings(8), exposed).estimate(pp2);
  const Estimate b = Estimator(tiny::graph(4), round::cluster(), 2, round::settings(8), hidden).estimate(pp2);
  ASSERT_GT(a.time.exposed_pp_s, 0.0);
  expect_near_rel(b.time.exposed_pp_s, 0.25 * a.time.exposed_pp_s, 1e-9);
}

// torchtitan under a pipeline (FrameworkProfile::fsdp_gathers_once_under_pipeline, carried by the
// settings every layout resolves with): FSDP2 keeps the parameters gathered through the step and
// reduce-scatters once, which is ZeRO-1 over the same shard group, so a pipelined FSDP plan must cost
// exactly what that ZeRO-1 plan costs, time and memory; the per-micro-batch pricing (every forward and
// backward gathers, every backward reduce-scatters) is dearer. Without a pipeline the claim changes
// nothing. The plan keeps the stage written; the layout runs ZeRO-1.
TEST(FrameworkProfile, TorchtitanPipelinedFsdpIsZero1) {
  ir::TrainingSettings once = round::settings(8);
  apply_plan_semantics(framework_profile("torchtitan"), once);
  ASSERT_TRUE(once.fsdp_gathers_once_under_pipeline);
  const ir::TrainingSettings each = round::settings(8);
  ir::Plan fsdp = plan_of(1, 4, 1, 1, 2);  // 8 GPUs: dp_shard 4 x pp 2, 8 sequences of 1: 2 micro-batches per replica
  fsdp.zero_stage = 3;
  ir::Plan zero1 = fsdp;
  zero1.zero_stage = 1;
  const auto estimate = [](const ir::TrainingSettings& settings, const ir::Plan& plan) {
    return Estimator(tiny::graph(4), round::cluster(), 8, settings, round::params()).estimate(plan);
  };
  const Estimate a = estimate(once, fsdp), b = estimate(once, zero1), c = estimate(each, fsdp);
  EXPECT_EQ(ir::resolve(tiny::graph(4), fsdp, once, 8).zero_stage, 1);
  EXPECT_EQ(*ir::resolve(tiny::graph(4), fsdp, once, 8).plan.zero_stage, 3);
  EXPECT_DOUBLE_EQ(a.step_time_s, b.step_time_s);
  EXPECT_EQ(a.memory.peak_bytes, b.memory.peak_bytes);
  EXPECT_EQ(a.memory.parameters_bytes, b.memory.parameters_bytes);
  EXPECT_EQ(a.time.exposed_fsdp_s, 0.0);
  ASSERT_GT(c.time.exposed_fsdp_s, 0.0);
  EXPECT_GT(c.step_time_s, a.step_time_s);
  EXPECT_LT(c.memory.parameters_bytes, a.memory.parameters_bytes);  // sharded at rest vs whole through the step
  ir::Plan zero2 = fsdp;  // reshard_after_forward "never": the pipeline still syncs only the last backward
  zero2.zero_stage = 2;
  EXPECT_DOUBLE_EQ(estimate(once, zero2).step_time_s, b.step_time_s);
  EXPECT_EQ(estimate(once, zero2).memory.gradients_bytes, b.memory.gradients_bytes);
  EXPECT_LT(estimate(each, zero2).memory.gradients_bytes, b.memory.gradients_bytes);
  ir::Plan flat = plan_of(1, 8, 1, 1);
  flat.zero_stage = 3;
  EXPECT_DOUBLE_EQ(estimate(once, flat).step_time_s, estimate(each, flat).step_time_s);
}

// NeMo's and Megatron-Bridge's published configurations keep and reduce gradients in bf16
// (grad_reduce_in_fp32 = False): their names imply bf16-grad-reduce, Megatron-Core's own defaults
// (Megatron-LM's --bf16 reduces in fp32) do not. On a ZeRO-1 plan the gradient buffer halves and the
// rest of the model state does not move; the gradient reduce-scatter moves half the bytes.
TEST(FrameworkProfile, NemoAndMegatronBridgeReduceGradientsInBf16) {
  EXPECT_EQ(framework_profile("megatron-core").gradient_bytes, 4);
  EXPECT_EQ(framework_profile("megatron-lm").gradient_bytes, 4);
  EXPECT_EQ(framework_profile("pytorch-fsdp").gradient_bytes, 4);
  for (const char* name : {"nemo", "Megatron-Bridge"}) {
    const FrameworkSelection s = select_framework(name);
    EXPECT_EQ(s.profile.name, "megatron-core") << name;
    EXPECT_EQ(s.profile.gradient_bytes, 2) << name;
    ASSERT_EQ(s.notes.size(), 2u) << name;
    EXPECT_NE(s.notes[1].find("implies bf16-grad-reduce"), std::string::npos) << s.notes[1];
  }
  EXPECT_EQ(select_framework("pytorch-fsdp", {"bf16-grad-reduce"}).profile.gradient_bytes, 2);
  const ir::GpuSpec gpu = ir::cluster_preset("h100-sxm").gpu;
  EXPECT_EQ(cost_params_for(gpu, framework_profile("nemo")).gradient_bytes, 2);
  CostParams fp32 = round::params(), bf16 = round::params();
  bf16.gradient_bytes = 2;
  ir::Plan plan = plan_of(1, 8, 1, 1);
  plan.zero_stage = 1;
  const auto estimate = [&plan](const CostParams& params) {
    return Estimator(tiny::graph(4), round::cluster(), 8, round::settings(8), params).estimate(plan);
  };
  const Estimate a = estimate(fp32), b = estimate(bf16);
  EXPECT_EQ(a.memory.gradients_bytes, 2 * b.memory.gradients_bytes);
  EXPECT_EQ(a.memory.parameters_bytes, b.memory.parameters_bytes);
  EXPECT_EQ(a.memory.optimizer_bytes, b.memory.optimizer_bytes);
  EXPECT_EQ(a.memory.activations_bytes, b.memory.activations_bytes);
}

// A stated framework version from before the profile's selective recompute (Megatron-LM: 2022,
// Korthikanti et al.) offers none and full only; a later or undated version keeps it.
TEST(FrameworkProfile, SelectiveRecomputeOnlyFromTheVersionThatHasIt) {
  for (const auto& [version, offered] : std::vector<std::pair<std::string, bool>>{
           {"GitHub README, commit 5281919420 (2020-09-11)", false}, {"v2.4 (2021)", false},
           {"Korthikanti et al. 2022", true}, {"core_r0.13", true}, {"", true}, {"2023-06, commit 2021abcd", true}}) {
    FrameworkProfile p = framework_profile("megatron-lm");
    const auto note = apply_framework_version(p, version);
    EXPECT_EQ(p.offers_selective_recompute, offered) << version;
    EXPECT_EQ(note.has_value(), !offered) << version;
  }
  FrameworkProfile core = framework_profile("megatron-core");  // no year limit: every version has it
  EXPECT_FALSE(apply_framework_version(core, "2020").has_value());
  EXPECT_TRUE(core.offers_selective_recompute);
}

// Eager attention (Megatron-LM 2021's fused softmax): one micro-batch of 1 x 1024 tokens, 4 heads of
// 16 on the round GPU (GEMMs at 0.5 of 1 PFLOP/s, HBM 1 TB/s, no floor). Forward: Q.K^T and P.V over
// the full 1024 x 1024 square, 2 x 4096 x 1024 x 16 FLOPs each, and the softmax's 4 bytes per score;
// backward: four GEMMs of the same size and 6 bytes per score. The probabilities (2 bytes per
// score) are kept for backward.
TEST(FrameworkProfile, EagerAttentionMaterialisesTheScores) {
  CostParams p = round::params();
  p.attention_materialised = true;
  const ShardContext ctx{1, round::kSeq, 1, 1, false, ir::DType::bf16};
  const ir::Block layer = tiny::layer(1);
  const auto ops = op_costs(layer, ctx, round::cluster(), p);
  size_t at = 0;
  while (layer.ops[at].kind != ir::OpKind::attention_core) ++at;
  const double gemm_s = 2.0 * 4096 * 1024 * 16 / (0.5 * 1e15);
  const double scores = 4.0 * 1024 * 1024;
  expect_near_rel(ops[at].fwd_s, 2 * gemm_s + scores * 4 / 1e12);
  expect_near_rel(ops[at].bwd_data_s + ops[at].bwd_weight_s, 4 * gemm_s + scores * 6 / 1e12);
  CostParams flash = round::params();
  const BlockCost eager = block_cost(layer, ctx, round::cluster(), p), fa = block_cost(layer, ctx, round::cluster(), flash);
  EXPECT_EQ(eager.saved_bytes_none - fa.saved_bytes_none, int64_t(scores) * 2);
  EXPECT_EQ(eager.saved_bytes_selective, fa.saved_bytes_selective);  // selective recompute drops them
}

// Unfused norms move norm_traffic_factor times the fused kernel's bytes: forward reads x and writes y.
TEST(FrameworkProfile, UnfusedNormMovesMoreBytes) {
  CostParams p = round::params();
  p.norm_traffic_factor = 1.5;
  const ShardContext ctx{1, round::kSeq, 1, 1, false, ir::DType::bf16};
  const ir::Block layer = tiny::layer(1);
  const auto ops = op_costs(layer, ctx, round::cluster(), p);
  ASSERT_EQ(layer.ops[0].kind, ir::OpKind::norm);
  expect_near_rel(ops[0].fwd_s, 1.5 * (2.0 * 1024 * 64 * 2) / 1e12);
}

}  // namespace
}  // namespace mgt::cost
