// Tests for `mgt-plan validate` (planner/src/validate.cpp): synthetic validation documents turned
// into Graph / ClusterSpec / Plan / TrainingSettings field by field, the FLOP conventions against
// hand formulas, error and percentile arithmetic, skips with reasons, malformed documents, and every
// file in examples/validation loading. No calibration bounds here (the calibration test does that).
#include "mgt/planner/validate.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/layout.hpp"
#include "validation_hardware.hpp"
#include "validation_rows.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using mgt::test::any_assumption_has;
using mgt::test::gpt_row;
using mgt::test::h100_block;
using mgt::test::llama_row;
using mgt::test::source_with;
using mgt::plan::FlopConvention;
using mgt::plan::MetricKind;
using mgt::plan::ValidationResult;
using mgt::plan::ValidationSource;

bool near(double a, double b, double rel = 1e-9) { return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b)); }

TEST(Validation, LlamaRowBuildsGraphClusterPlanAndSettings) {
  const ValidationSource src = source_with({llama_row()});
  const auto s = mgt::plan::setup_row(src, src.rows[0]);
  // Model: gated MLP -> llama family, sizes from the row.
  EXPECT_EQ(s.shape.family, "llama");
  EXPECT_EQ(s.shape.layers, 2);
  EXPECT_EQ(s.shape.kv_heads, 8);
  EXPECT_EQ(s.shape.head_dim, 128);
  EXPECT_EQ(s.shape.ffn, 14336);
  EXPECT_TRUE(s.shape.gated);
  EXPECT_EQ(s.graph.info.num_layers, 2);
  EXPECT_EQ(s.graph.info.num_kv_heads, 8);
  EXPECT_EQ(s.graph.info.vocab_size, 128256);
  EXPECT_EQ(s.graph.info.name, "Llama-mini");
  const json cfg = mgt::plan::hf_config(s.shape, 4096);
  EXPECT_EQ(cfg["model_type"], "llama");
  EXPECT_EQ(cfg["intermediate_size"], 14336);
  EXPECT_EQ(cfg["max_position_embeddings"], 4096);
  // Cluster: every stated number from the hardware block.
  EXPECT_EQ(s.cluster.name, "h100");
  EXPECT_DOUBLE_EQ(s.cluster.gpu.peak_bf16_flops_per_s, 989e12);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.peak_fp16_flops_per_s, 989e12);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.peak_fp8_flops_per_s, 1979e12);
  EXPECT_EQ(s.cluster.gpu.hbm_bytes, 80ll << 30);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.hbm_bytes_per_s, 3.35e12);
  EXPECT_DOUBLE_EQ(s.cluster.nvlink_bytes_per_s, 450e9);  // 900 bidirectional / 2
  EXPECT_EQ(s.cluster.gpus_per_node, 8);
  EXPECT_EQ(s.cluster.nvlink_domain_gpus, 8);
  EXPECT_EQ(s.cluster.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(s.cluster.nic_bytes_per_s, 50e9);  // 400 Gbit/s
  // Plan: FSDP -> dp_shard = dp, zero 3.
  EXPECT_EQ(s.num_gpus, 16);
  EXPECT_EQ(s.plan.dp_shard, 8);
  EXPECT_EQ(s.plan.dp_replicate, 1);
  EXPECT_EQ(s.plan.tp, 2);
  EXPECT_EQ(s.plan.pp, 1);
  EXPECT_EQ(s.plan.cp, 1);
  EXPECT_EQ(s.plan.micro_batch, 2);
  EXPECT_EQ(s.plan.zero_stage.value_or(-1), 3);
  EXPECT_TRUE(s.plan.sequence_parallel.value_or(false));
  EXPECT_EQ(s.plan.recompute, mgt::ir::Recompute::selective);
  // Settings.
  EXPECT_EQ(s.settings.seq_len, 4096);
  EXPECT_EQ(s.settings.global_batch_tokens, 64 * 4096);
  EXPECT_EQ(s.settings.compute_dtype, mgt::ir::DType::bf16);
  EXPECT_FALSE(s.settings.fp8_linears);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_s, 989e12);
}

TEST(Validation, IterationTimeComparedWithTheEstimatorsStepTime) {
  const ValidationSource src = source_with({llama_row()});
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_EQ(results.size(), 1u);
  const ValidationResult& r = results[0];
  ASSERT_FALSE(r.skipped) << *r.skipped;
  EXPECT_EQ(r.metric, "iteration_time_s");
  EXPECT_EQ(r.kind, MetricKind::throughput);
  const auto s = mgt::plan::setup_row(src, src.rows[0]);
  const auto e = mgt::cost::Estimator(s.graph, s.cluster, s.num_gpus, s.settings).estimate(s.plan);
  EXPECT_DOUBLE_EQ(*r.predicted, e.step_time_s);
  EXPECT_DOUBLE_EQ(*r.measured, 2.5);
  EXPECT_DOUBLE_EQ(*r.error, (e.step_time_s - 2.5) / 2.5);
  ASSERT_TRUE(r.estimate.has_value());
}

// A row's GPU names the preset that prices it (ir::preset_for_gpu_name). H800 is the H100 SXM5 die at
// the same clocks and tensor peaks with 400 GB/s NVLink (NVIDIA H800 datasheet): with the same stated
// block it must predict exactly what the H100 row does, and say what it assumed. (It was priced with
// A100's Ampere kernels and SM count, 6 % faster, before the lookup knew it.) A800 is the A100 die.
TEST(Validation, SiblingPartsArePricedWithTheirArchitecture) {
  const auto predict = [](const std::string& gpu, ValidationResult* out = nullptr) {
    json block = h100_block();
    block["gpu"] = gpu;
    const ValidationSource src = source_with({llama_row()}, "", block);
    const auto results = mgt::plan::validate_source(src);
    EXPECT_EQ(results.size(), 1u);
    if (out) *out = results.at(0);
    return results.at(0).predicted.value_or(-1.0);
  };
  ValidationResult h800;
  const double h100_s = predict("H100-SXM5-80GB");
  EXPECT_GT(h100_s, 0);
  EXPECT_DOUBLE_EQ(predict("H800-SXM5-80GB", &h800), h100_s);
  EXPECT_TRUE(any_assumption_has(h800.assumptions, "priced as H100 SXM5 (H800")) << h800.assumptions.size();
  std::vector<std::string> notes;
  for (const auto& [gpu, arch] : std::vector<std::pair<std::string, mgt::ir::GpuArch>>{
           {"NVIDIA H800", mgt::ir::GpuArch::hopper},     {"H20 96GB", mgt::ir::GpuArch::hopper},
           {"GH200 480GB", mgt::ir::GpuArch::hopper},     {"A800-SXM4-80GB", mgt::ir::GpuArch::ampere},
           {"NVIDIA L40S", mgt::ir::GpuArch::ada},        {"NVIDIA A10G", mgt::ir::GpuArch::ampere},
           {"H200-SXM-141GB", mgt::ir::GpuArch::hopper},  {"B200", mgt::ir::GpuArch::blackwell}}) {
    SCOPED_TRACE(gpu);
    notes.clear();
    EXPECT_EQ(mgt::plan::cluster_from_hardware("x", json{{"gpu", gpu}}, notes).gpu.arch, arch);
    EXPECT_FALSE(any_assumption_has(notes, "no preset")) << (notes.empty() ? "" : notes[0]);
  }
  notes.clear();  // no preset describes it: A100's, and the row says so
  EXPECT_EQ(mgt::plan::cluster_from_hardware("x", json{{"gpu", "AMD MI300X"}}, notes).gpu.arch, mgt::ir::GpuArch::ampere);
  EXPECT_TRUE(any_assumption_has(notes, "no preset for GPU \"AMD MI300X\""));
}

// A torchtitan row with FSDP under a pipeline says it is priced as what torchtitan runs (ZeRO-1 over
// the same shard group); the same row under megatron-core says nothing of it.
TEST(Validation, TorchtitanPipelinedFsdpRowSaysItIsPricedAsZero1) {
  json row = llama_row();
  row["parallel"] = {{"num_gpus", 8}, {"dp", 4}, {"tp", 1}, {"pp", 2}, {"cp", 1}, {"fsdp", true}};
  row["framework"] = {{"name", "torchtitan"}};
  const ValidationSource src = source_with({row});
  const auto s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(s.plan.zero_stage, 3);  // the plan as stated; the profile prices it
  EXPECT_TRUE(any_assumption_has(s.assumptions, "priced as ZeRO-1 over the same shard group"));
  row["framework"] = {{"name", "megatron-core"}};
  EXPECT_FALSE(any_assumption_has(mgt::plan::setup_row(src, row).assumptions, "priced as ZeRO-1"));
}

// A row on Blackwell Ultra: the GPU names its preset (b300, gb300-nvl72) for what the hardware block
// does not state; what it states (peaks, fp4 included, HBM) is read from the block; nvfp4 and mxfp8 rows
// price linears at the block's fp4 / fp8 peak and take that peak as the MFU denominator; LoRA rows are
// estimated with the task set.
TEST(Validation, BlackwellUltraRowsReadTheirHardwareBlock) {
  const json gb300 = json::parse(R"({"gpu": "GB300", "peak_dense_tflops": {"bf16": 2500, "fp8": 5000, "fp4": 15000},
                                     "hbm_gb": 279, "hbm_bw_TBps": 8.0, "nvlink_bw_GBps_per_gpu_bidir": 1800})");
  std::vector<std::string> notes;
  const auto c = mgt::plan::cluster_from_hardware("gb300", gb300, notes);
  EXPECT_DOUBLE_EQ(c.gpu.peak_fp4_flops_per_s, 15000e12);
  EXPECT_EQ(c.gpu.hbm_bytes, 279ll << 30);
  EXPECT_EQ(c.nvlink_domain_gpus, 72);       // not stated: gb300-nvl72's
  EXPECT_DOUBLE_EQ(c.nic_bytes_per_s, 100e9);  // not stated: ConnectX-8 800 Gb/s
  EXPECT_EQ(c.gpu.arch, mgt::ir::GpuArch::blackwell);
  const auto b300 = mgt::plan::cluster_from_hardware("b300", json::parse(R"({"gpu": "B300"})"), notes);
  EXPECT_EQ(b300.nvlink_domain_gpus, 8);
  EXPECT_DOUBLE_EQ(b300.gpu.peak_fp4_flops_per_s, 0);  // a peak the block does not state is not assumed

  json row = llama_row();
  row["precision"] = "nvfp4";
  row["system"] = "gb300";
  json doc = {{"source", "synthetic"}, {"source_notes", ""}, {"hardware", {{"gb300", gb300}}}, {"rows", {row}}};
  const auto src = mgt::plan::validation_source_from_json(doc, "synthetic.json");
  auto s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(s.settings.linear_format, mgt::ir::LinearFormat::nvfp4);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_s, 15000e12);
  row["precision"] = "mxfp8";
  row["task"] = "qlora";
  s = mgt::plan::setup_row(src, row);
  EXPECT_EQ(s.settings.linear_format, mgt::ir::LinearFormat::mxfp8);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_s, 5000e12);
  EXPECT_EQ(s.settings.task, mgt::ir::Task::qlora);
}

// The Megatron-Bridge 25.11 tables write the two FP8 recipes as "FP8-CS" (per-tensor current
// scaling) and "FP8-MX" (MXFP8, 32x32 blocks on Blackwell, page footnote); the MX spelling must price
// MXFP8 linears, the CS spelling plain FP8, both at the block's fp8 peak (4500 TFLOP/s on B200).
TEST(Validation, MegatronBridgeFp8RecipeSpellings) {
  const json b200 = json::parse(R"({"gpu": "B200", "peak_dense_tflops": {"bf16": 2250, "fp8": 4500}})");
  json row = llama_row();
  row["system"] = "b200";
  json doc = {{"source", "synthetic"}, {"source_notes", ""}, {"hardware", {{"b200", b200}}}, {"rows", {row}}};
  const auto src = mgt::plan::validation_source_from_json(doc, "synthetic.json");
  for (const char* mx : {"FP8-MX", "MXFP8 (32x32 granularity)", "fp8mx"}) {
    row["precision"] = mx;
    const auto s = mgt::plan::setup_row(src, row);
    EXPECT_EQ(s.settings.linear_format, mgt::ir::LinearFormat::mxfp8) << mx;
    EXPECT_DOUBLE_EQ(s.peak_flops_per_s, 4500e12) << mx;
  }
  row["precision"] = "FP8-CS";
  const auto s = mgt::plan::setup_row(src, row);
  EXPECT_EQ(s.settings.linear_format, mgt::ir::LinearFormat::fp8);
  EXPECT_TRUE(s.settings.fp8_linears);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_s, 4500e12);
  // The format covers the linear layers; the assumption says what the other ops run in.
  EXPECT_EQ(s.settings.compute_dtype, mgt::ir::DType::bf16);
  EXPECT_NE(std::find(s.assumptions.begin(), s.assumptions.end(),
                      "precision \"FP8-CS\": fp8 linear layers, bf16 for every other op (not stated)"),
            s.assumptions.end());
}

// Megatron-Bridge MoE rows state TP and EP but not the expert tensor parallel size. On 16 GPUs with
// tp 2, pp 2 a stage has 16 / 2 = 8 ranks: etp = tp = 2 with ep 8 needs 16 and cannot fold, so
// the row can only have run with etp 1 (1 x 8 = 8 ranks), which the recipes set; with ep 4,
// 2 x 4 = 8 folds and etp stays unset (= tp). A stated etp is read as stated.
TEST(Validation, UnstatedExpertTensorParallelFoldsIntoTheStage) {
  json row = llama_row();
  row["model"]["type"] = "moe";
  row["model"]["moe"] = {{"num_experts", 8}, {"top_k", 2}, {"moe_ffn_hidden_size", 1024}, {"shared_experts", 0}};
  row["parallel"] = {{"num_gpus", 16}, {"tp", 2}, {"pp", 2}, {"cp", 1}, {"ep", 8}, {"fsdp_raw", 0}};
  row["training"] = {{"global_batch_size_seqs", 64}, {"micro_batch_size", 1}, {"seq_length", 4096}};
  const auto src = source_with({row});
  auto s = mgt::plan::setup_row(src, row);
  ASSERT_TRUE(s.plan.etp.has_value());
  EXPECT_EQ(*s.plan.etp, 1);
  const auto r = mgt::plan::validate_row(src, row).at(0);
  EXPECT_FALSE(r.skipped) << *r.skipped;
  row["parallel"]["ep"] = 4;
  s = mgt::plan::setup_row(source_with({row}), row);
  EXPECT_FALSE(s.plan.etp.has_value());
  row["parallel"]["etp"] = 2;
  s = mgt::plan::setup_row(source_with({row}), row);
  EXPECT_EQ(s.plan.etp.value_or(0), 2);
}

TEST(Validation, ParallelMappingsAndDefaults) {
  json row = gpt_row();
  // ZeRO-1 (distributed optimizer) shards over dp.
  row["parallel"]["zero_stage"] = 1;
  auto s = mgt::plan::setup_row(source_with({row}), row);
  EXPECT_EQ(s.plan.dp_shard, 8);
  EXPECT_EQ(s.plan.zero_stage.value_or(-1), 1);
  // Plain DDP replicates.
  row["parallel"]["zero_stage"] = 0;
  s = mgt::plan::setup_row(source_with({row}), row);
  EXPECT_EQ(s.plan.dp_replicate, 8);
  EXPECT_EQ(s.plan.dp_shard, 1);
  EXPECT_EQ(s.plan.zero_stage.value_or(-1), 0);
  EXPECT_EQ(s.plan.recompute, mgt::ir::Recompute::full);
  EXPECT_EQ(s.settings.compute_dtype, mgt::ir::DType::f16);
  EXPECT_EQ(s.shape.family, "gpt2");
  // Unstated dp, micro batch and zero stage take documented defaults, listed as assumptions.
  row["parallel"]["dp"] = nullptr;
  row["parallel"]["zero_stage"] = nullptr;
  row["training"]["micro_batch_size"] = nullptr;
  row["recompute"] = "full (block, 3 layers)";
  s = mgt::plan::setup_row(source_with({row}), row);
  EXPECT_EQ(s.plan.dp_replicate, 8);
  EXPECT_EQ(s.plan.micro_batch, 1);
  EXPECT_EQ(s.plan.recompute_layers.value_or(0), 3);
  auto has = [&](const std::string& text) {
    for (const auto& a : s.assumptions)
      if (a.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("parallel.dp not stated"));
  // An unstated micro-batch is a knob validate_row chooses (32 sequences / dp 8 = 4 per replica).
  EXPECT_EQ(s.micro_batch_choices, (std::vector<int64_t>{1, 2, 4}));
  // An unstated zero stage is a knob too (validate_framework_test.cpp): the stages the framework
  // offers, here the default profile's (pytorch-fsdp: DDP or SHARD_GRAD_OP).
  EXPECT_EQ(s.zero_stage_choices, (std::vector<int64_t>{0, 2}));
  // fp8 rows run their linears at the fp8 peak.
  row["precision"] = "amp_fp8";
  s = mgt::plan::setup_row(source_with({row}), row);
  EXPECT_TRUE(s.settings.fp8_linears);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_s, 1979e12);
}

TEST(Validation, FlopConventionsMatchHandFormulas) {
  std::vector<std::string> assumptions;
  const auto shape = mgt::plan::model_shape(gpt_row()["model"], assumptions);
  const double l = 4, h = 2048, s = 2048, V = 51200;
  using mgt::ir::Recompute;
  // PaLM / Megatron-Core / Korthikanti model FLOPs: 72 l h^2 (1 + s/6h + V/12lh) for a GPT layer.
  const double model = 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_TRUE(near(mgt::plan::flops_per_token(FlopConvention::model, shape, 2048, Recompute::full, false), model));
  // Korthikanti HFU with selective recompute: 72 l h^2 (1 + s/3h + V/12lh).
  EXPECT_TRUE(near(mgt::plan::flops_per_token(FlopConvention::model, shape, 2048, Recompute::selective, true),
                   72 * l * h * h * (1 + s / (3 * h) + V / (12 * l * h))));
  // Full recompute hardware FLOPs = Megatron Eq. 3 with the 4x factor: 96 l h^2 (1 + s/6h + V/16lh).
  const double eq3 = 96 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_TRUE(near(mgt::plan::flops_per_token(FlopConvention::model, shape, 2048, Recompute::full, true), eq3));
  EXPECT_TRUE(near(mgt::plan::flops_per_token(FlopConvention::megatron_eq3, shape, 2048, Recompute::full, true), eq3));
  EXPECT_TRUE(near(mgt::plan::flops_per_token(FlopConvention::megatron_eq3, shape, 2048, Recompute::none, true),
                   72 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))));
  // MosaicML llm-foundry: 6 N + 12 l h s with the published N; 8 N + 16 l h s for HFU with checkpointing.
  const double N = 0.33e9;
  EXPECT_TRUE(near(mgt::plan::flops_per_token(FlopConvention::mosaicml, shape, 2048, Recompute::full, false),
                   6 * N + 12 * l * h * s));
  EXPECT_TRUE(near(mgt::plan::flops_per_token(FlopConvention::mosaicml, shape, 2048, Recompute::full, true),
                   8 * N + 16 * l * h * s));
  // Convention detection.
  EXPECT_EQ(mgt::plan::flop_convention("hardware TFLOPs incl. recompute (Megatron Eq.3 formula, 4x forward)", "", ""),
            FlopConvention::megatron_eq3);
  EXPECT_EQ(mgt::plan::flop_convention("", "mosaicml/llm-foundry README", ""), FlopConvention::mosaicml);
  EXPECT_EQ(mgt::plan::flop_convention("", "pytorch/torchtitan benchmarks", ""), FlopConvention::torchtitan);
  EXPECT_EQ(mgt::plan::flop_convention("", "Korthikanti et al.", "MFU"), FlopConvention::model);
}

TEST(Validation, MfuOnlyRowConvertedWithTheSourcesConvention) {
  json row = gpt_row();
  row["measured"] = {{"mfu", 0.4}};
  const ValidationSource src = source_with({row}, "MPT models trained with mosaicml/llm-foundry");
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_EQ(results.size(), 1u);
  const auto& r = results[0];
  ASSERT_FALSE(r.skipped) << *r.skipped;
  EXPECT_EQ(r.metric, "mfu");
  const double l = 4, h = 2048, s = 2048;
  const double flops = 6 * 0.33e9 + 12 * l * h * s;  // MFU: no recompute counted
  EXPECT_TRUE(near(*r.predicted, r.estimate->tokens_per_s_per_gpu * flops / 989e12));
  EXPECT_DOUBLE_EQ(*r.error, (*r.predicted - 0.4) / 0.4);

  // Megatron Eq. 3 TFLOP/s (Narayanan 2021 / BLOOM) with the 4x recompute factor.
  json eq3 = gpt_row();
  eq3["measured"] = {{"tflops_per_gpu", 150.0}, {"tflops_kind", "Eq.3 FLOPs incl. recompute"}};
  const ValidationSource src3 = source_with({eq3});
  const auto r3 = mgt::plan::validate_row(src3, src3.rows[0]).at(0);
  ASSERT_FALSE(r3.skipped) << *r3.skipped;
  const double V = 51200;
  EXPECT_TRUE(near(*r3.predicted, r3.estimate->tokens_per_s_per_gpu * 96 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / 1e12));
}

TEST(Validation, MetricPriorityAndMemorySecondRow) {
  json row = gpt_row();
  row["measured"] = {{"mfu", 0.4}, {"tokens_per_sec_total", 80000.0}, {"peak_memory_GiB", 20.0}};
  const ValidationSource src = source_with({row});
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].metric, "tokens_per_sec_total");
  EXPECT_TRUE(near(*results[0].predicted, results[0].estimate->tokens_per_s_per_gpu * 8));
  EXPECT_EQ(results[1].metric, "peak_memory_GiB");
  EXPECT_EQ(results[1].kind, MetricKind::memory);
  EXPECT_TRUE(near(*results[1].predicted, double(results[1].estimate->memory.peak_bytes) / double(1ll << 30)));
}

TEST(Validation, OomRowMustBePredictedNotToFit) {
  json row = gpt_row();
  row["measured"] = {{"oom", true}, {"iteration_time_s", nullptr}};
  json tiny = h100_block();
  tiny["hbm_gb"] = 1;  // nothing fits in 1 GiB
  const ValidationSource src = source_with({row}, "", tiny);
  auto results = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].metric, "oom");
  EXPECT_EQ(results[0].kind, MetricKind::oom);
  EXPECT_EQ(*results[0].error, 0.0);
  json huge = h100_block();
  huge["hbm_gb"] = 100000;
  const ValidationSource src2 = source_with({row}, "", huge);
  results = mgt::plan::validate_row(src2, src2.rows[0]);
  EXPECT_EQ(*results.at(0).error, 1.0);
  const auto summary = mgt::plan::summarize("s", "", results);
  EXPECT_EQ(summary.oom_rows, 1);
  EXPECT_EQ(summary.oom_predicted, 0);
}

TEST(Validation, RowsWithoutAComparableMetricAreSkippedWithAReason) {
  json row = gpt_row();
  row["measured"] = {{"per_layer_forward_ms", 7.7}, {"max_trainable_params_B", 40}};
  json no_model = gpt_row();
  no_model["id"] = "no_model";
  no_model["model"] = {{"name", "x"}, {"type", "dense"}};
  no_model["measured"] = {{"tflops_per_gpu", 41.4}};
  const ValidationSource src = source_with({row, no_model});
  const auto results = mgt::plan::validate_source(src);
  ASSERT_EQ(results.size(), 2u);
  ASSERT_TRUE(results[0].skipped);
  EXPECT_NE(results[0].skipped->find("no comparable metric"), std::string::npos);
  EXPECT_NE(results[0].skipped->find("per_layer_forward_ms"), std::string::npos);
  ASSERT_TRUE(results[1].skipped);
  EXPECT_NE(results[1].skipped->find("model.num_layers"), std::string::npos);
  const auto summary = mgt::plan::summarize("s", "", results);
  EXPECT_EQ(summary.rows, 2);
  EXPECT_EQ(summary.rows_skipped, 2);
  EXPECT_EQ(summary.rows_compared, 0);
}

TEST(Validation, MalformedDocumentsNameTheField) {
  auto field_of = [](const json& doc) {
    try {
      mgt::plan::validation_source_from_json(doc, "bad.json");
    } catch (const mgt::ir::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos);
      return e.field();
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(field_of(json::array()), "");
  EXPECT_EQ(field_of(json{{"source", "x"}}), "rows");
  EXPECT_EQ(field_of(json{{"rows", 3}}), "rows");
  EXPECT_EQ(field_of(json{{"hardware", {{"h100", h100_block()}}}, {"rows", {json{{"system", "h100"}}}}}), "rows[0].id");
  EXPECT_EQ(field_of(json{{"hardware", {{"h100", h100_block()}}}, {"rows", {json{{"id", "a"}, {"system", "dgx"}}}}}),
            "rows[0].system");
  // A catalog has no rows and is not an error.
  EXPECT_TRUE(mgt::plan::validation_source_from_json(json{{"models", json::object()}}, "catalog_models.json").catalog);
}

TEST(Validation, PercentilesAndErrorStats) {
  const std::vector<double> v{10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  EXPECT_DOUBLE_EQ(mgt::plan::percentile(v, 0.5), 5.5);
  EXPECT_DOUBLE_EQ(mgt::plan::percentile(v, 0.9), 9.1);  // 9 + 0.1 * (10 - 9)
  EXPECT_DOUBLE_EQ(mgt::plan::percentile({4.0}, 0.9), 4.0);
  EXPECT_DOUBLE_EQ(mgt::plan::percentile({}, 0.5), 0.0);
  std::vector<ValidationResult> results;
  for (double e : {-0.3, 0.1, -0.05, 0.2, 0.0}) {
    ValidationResult r;
    r.id = std::to_string(results.size());
    r.error = e;
    results.push_back(r);
  }
  ValidationResult mem;
  mem.kind = MetricKind::memory;
  mem.error = 0.5;
  results.push_back(mem);
  const auto stats = mgt::plan::error_stats(results, MetricKind::throughput);
  EXPECT_EQ(stats.count, 5);
  EXPECT_DOUBLE_EQ(stats.median_abs_pct, 10.0);          // |errors| % sorted: 0 5 10 20 30
  EXPECT_NEAR(stats.p90_abs_pct, 26.0, 1e-9);            // 20 + 0.6 * (30 - 20)
  EXPECT_EQ(mgt::plan::error_stats(results, MetricKind::memory).count, 1);
  const auto summary = mgt::plan::summarize("s", "", results);
  ASSERT_EQ(summary.worst.size(), 5u);
  EXPECT_DOUBLE_EQ(*summary.worst[0].error, 0.5);
  EXPECT_DOUBLE_EQ(*summary.worst[1].error, -0.3);
}

TEST(Validation, EveryExampleFileLoadsAndEveryRowIsComparedOrSkippedWithAReason) {
  const std::filesystem::path dir = std::filesystem::path(MGT_SOURCE_DIR) / "examples" / "validation";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json" || entry.path().filename().string().rfind("catalog_", 0) == 0) continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    ValidationSource src;
    ASSERT_NO_THROW(src = mgt::plan::read_validation_source(entry.path().string()));
    EXPECT_FALSE(src.catalog);
    EXPECT_FALSE(src.rows.empty());
    std::vector<ValidationResult> results;
    ASSERT_NO_THROW(results = mgt::plan::validate_source(src));
    std::set<std::string> ids;
    for (const auto& r : results) {
      ids.insert(r.id);
      if (r.skipped) {
        EXPECT_FALSE(r.skipped->empty()) << r.id;
      } else {
        ASSERT_TRUE(r.predicted && r.measured && r.error) << r.id;
        EXPECT_TRUE(std::isfinite(*r.predicted)) << r.id;
        EXPECT_DOUBLE_EQ(*r.error, r.kind == MetricKind::oom ? *r.error : (*r.predicted - *r.measured) / *r.measured) << r.id;
      }
    }
    EXPECT_EQ(ids.size(), src.rows.size());  // no row dropped silently
  }
  EXPECT_GE(files, 8);
}

TEST(Validation, ReportRoundTripsThroughMgtValidationJson) {
  json skipped = gpt_row();  // measured {}: skipped with a reason
  json memory = llama_row();
  memory["id"] = "llama_memory";
  memory["measured"] = {{"iteration_time_s", 3.0}, {"peak_memory_GiB", 40.0}};
  const ValidationSource src = source_with({llama_row(), skipped, memory});
  mgt::plan::ValidationReport report;
  report.rows = mgt::plan::validate_source(src);
  ASSERT_EQ(report.rows.size(), 4u);  // llama: 1, gpt: 1 skipped, llama_memory: 2
  report.sources.push_back(mgt::plan::summarize(src.name, src.citation, report.rows));
  report.overall = mgt::plan::summarize("overall", "", report.rows);
  const json doc = mgt::plan::to_json(report);
  EXPECT_EQ(doc.at("format"), "mgt.validation/1");
  // One spelling per term: the mgt.plans/1 keys inside every row's breakdown.
  const json& breakdown = doc.at("rows").at(0).at("breakdown");
  EXPECT_TRUE(breakdown.at("time").contains("exposed_fsdp_s"));
  EXPECT_TRUE(breakdown.at("time").contains("bubble_s"));
  EXPECT_TRUE(breakdown.at("memory").contains("fsdp_buffers_bytes"));
  EXPECT_FALSE(breakdown.contains("time_s"));

  const auto back = mgt::plan::validation_report_from_json(doc, "report.json");
  ASSERT_EQ(back.rows.size(), 4u);
  EXPECT_EQ(back.rows[0].id, "llama_row");
  EXPECT_EQ(back.rows[0].predicted, report.rows[0].predicted);
  ASSERT_TRUE(back.rows[0].estimate.has_value());
  EXPECT_EQ(back.rows[0].estimate->time, report.rows[0].estimate->time);
  EXPECT_EQ(back.rows[0].estimate->memory, report.rows[0].estimate->memory);
  EXPECT_EQ(back.rows[1].skipped, report.rows[1].skipped);
  EXPECT_EQ(back.overall.rows, 3);
  EXPECT_EQ(back.overall.rows_skipped, 1);
  EXPECT_EQ(mgt::plan::to_json(back), doc);

  json wrong = doc;
  wrong["format"] = "mgt.plans/1";
  EXPECT_THROW((void)mgt::plan::validation_report_from_json(wrong, "report.json"), mgt::ir::InputError);
  wrong = doc;
  wrong["rows"][0]["kind"] = "speed";
  EXPECT_THROW((void)mgt::plan::validation_report_from_json(wrong, "report.json"), mgt::ir::InputError);
}

// ---- Reading rows: words, quoted numbers, unstated knobs, implausible values (each failed before) ----

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(Validation, ZeroStageInWordsIsReadFromTheWordsNotAStrayDigit) {
  for (const char* words : {"ZeRO-2-style partitioning (Rajbhandari et al., Sec 3.2)", "zero-2-like",
                            "shards optimizer states + gradients"}) {
    SCOPED_TRACE(words);
    json row = llama_row();
    row["parallel"]["zero_stage"] = words;
    row["parallel"]["fsdp"] = false;
    const ValidationSource src = source_with({row});
    const auto s = mgt::plan::setup_row(src, src.rows[0]);
    EXPECT_EQ(s.plan.zero_stage, 2);
    EXPECT_EQ(s.plan.dp_shard, 8);
  }
  json row = llama_row();
  row["parallel"]["zero_stage"] = "shards optimizer states, gradients and parameters (Sec 3.1)";
  row["parallel"]["fsdp"] = false;
  const ValidationSource src = source_with({row});
  EXPECT_EQ(mgt::plan::setup_row(src, src.rows[0]).plan.zero_stage, 3);
}

TEST(Validation, NumbersGivenAsStringsAreNumbers) {
  json row = llama_row();
  row["parallel"].erase("zero_stage");
  row["parallel"]["fsdp"] = false;
  row["parallel"]["fsdp_raw"] = "0";
  row["parallel"]["dp"] = "8";
  row["training"]["global_batch_size_seqs"] = " 64 ";
  const ValidationSource src = source_with({row});
  const auto s = mgt::plan::setup_row(src, src.rows[0]);
  EXPECT_EQ(s.plan.zero_stage, 1);  // fsdp_raw 0: DDP + distributed optimizer
  EXPECT_EQ(s.plan.dp_shard, 8);
  EXPECT_EQ(s.settings.global_batch_tokens, 64 * 4096);
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].skipped) << *results[0].skipped;
}

/// An 8-layer llama row on pp 2 (dp 4, tp 2): vpp 2 and 4 both divide 8 / 2.
json pipelined_row() {
  json row = llama_row();
  row["model"]["num_layers"] = 8;
  row["parallel"]["pp"] = 2;
  row["parallel"]["dp"] = 4;
  row["parallel"]["zero_stage"] = 1;
  row["parallel"]["fsdp"] = false;
  return row;
}

/// The fastest of `plans` that fits in HBM, estimated here independently of validate_row.
mgt::cost::Estimate fastest(const mgt::plan::RowSetup& s, const std::vector<mgt::ir::Plan>& plans) {
  const mgt::cost::Estimator estimator(s.graph, s.cluster, s.num_gpus, s.settings);
  std::optional<mgt::cost::Estimate> best;
  for (const auto& p : plans) {
    const auto e = estimator.estimate(p);
    EXPECT_LE(e.memory.peak_bytes, s.cluster.gpu.hbm_bytes);  // the test rows fit
    if (!best || e.step_time_s < best->step_time_s) best = e;
  }
  return *best;
}

TEST(Validation, InterleavedWithoutVIsTheFastestDividingVppRecorded) {
  json row = pipelined_row();
  row["parallel"]["vpp"] = "interleaved (V not stated)";
  const ValidationSource src = source_with({row});
  const auto s = mgt::plan::setup_row(src, src.rows[0]);
  ASSERT_EQ(s.vpp_choices, (std::vector<int64_t>{2, 4}));
  std::vector<mgt::ir::Plan> plans;
  for (int64_t v : {2, 4}) {
    plans.push_back(s.plan);
    plans.back().vpp = v;
  }
  const auto expected = fastest(s, plans);
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].skipped) << *results[0].skipped;
  EXPECT_NE(results[0].estimate->plan.vpp, 1);
  EXPECT_EQ(results[0].estimate->plan.vpp, expected.plan.vpp);
  EXPECT_DOUBLE_EQ(results[0].estimate->step_time_s, expected.step_time_s);
  EXPECT_NE(joined(results[0].assumptions).find("parallel.vpp not stated (interleaved): " +
                                                 std::to_string(expected.plan.vpp) + ", the fastest that fits of 2, 4"),
            std::string::npos)
      << joined(results[0].assumptions);

  // pp 1 cannot interleave; a word that is not a number is a skip with its reason.
  json flat = llama_row();
  flat["parallel"]["vpp"] = "interleaved (V not stated)";
  json garbled = pipelined_row();
  garbled["parallel"]["vpp"] = "two-ish";
  const ValidationSource bad = source_with({flat, garbled});
  for (const auto& r : mgt::plan::validate_source(bad)) {
    ASSERT_TRUE(r.skipped) << r.id;
    EXPECT_NE(r.skipped->find("parallel.vpp"), std::string::npos) << *r.skipped;
  }
}

// vpp not stated at all on a pipelined row: a knob the framework offers (megatron-core interleaves),
// so 1 and every dividing V are tried and the fastest recorded; a framework without interleaving
// (megatron-deepspeed: 1F1B only) keeps vpp 1 and lists nothing.
TEST(Validation, UnstatedVppIsTunedWhereTheFrameworkInterleaves) {
  json row = pipelined_row();
  row["framework"] = "megatron-core";
  row["parallel"]["vpp"] = nullptr;
  const ValidationSource src = source_with({row});
  const auto s = mgt::plan::setup_row(src, src.rows[0]);
  ASSERT_EQ(s.vpp_choices, (std::vector<int64_t>{1, 2, 4}));  // 8 layers / pp 2: V in {2, 4} divides 4
  // 14 layers over pp 2: equal chunks only for V 7; with the embedding and loss counted as layers
  // (16 slots, Megatron-Core's --account-for-embedding-in-pipeline-split, torchtitan) also V 2 and 4
  // (V 8 would leave a chunk without a layer): the interleavings the search proposes.
  json odd = row;
  odd["model"]["num_layers"] = 14;
  EXPECT_EQ(mgt::plan::setup_row(src, odd).vpp_choices, (std::vector<int64_t>{1, 2, 4, 7}));
  std::vector<mgt::ir::Plan> plans;
  for (int64_t v : {1, 2, 4}) {
    plans.push_back(s.plan);
    plans.back().vpp = v;
  }
  // Priced with the framework's constants, as validate prices the row.
  const mgt::cost::Estimator estimator(s.graph, s.cluster, s.num_gpus, s.settings,
                                       mgt::cost::cost_params_for(s.cluster.gpu, s.framework));
  std::optional<mgt::cost::Estimate> best;
  for (const auto& p : plans)
    if (auto e = estimator.estimate(p); !best || e.step_time_s < best->step_time_s) best = e;
  const mgt::cost::Estimate expected = *best;
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].skipped) << *results[0].skipped;
  EXPECT_EQ(results[0].estimate->plan.vpp, expected.plan.vpp);
  EXPECT_DOUBLE_EQ(results[0].estimate->step_time_s, expected.step_time_s);
  EXPECT_NE(joined(results[0].assumptions).find("parallel.vpp not stated: " + std::to_string(expected.plan.vpp) +
                                                 ", the fastest that fits of 1, 2, 4 (what megatron-core offers)"),
            std::string::npos)
      << joined(results[0].assumptions);

  json plain = pipelined_row();
  plain["framework"] = "megatron-deepspeed";
  plain.erase("vpp");
  plain["parallel"].erase("vpp");
  const ValidationSource one = source_with({plain});
  const auto t = mgt::plan::setup_row(one, one.rows[0]);
  EXPECT_TRUE(t.vpp_choices.empty());
  EXPECT_EQ(t.plan.vpp, 1);
}

TEST(Validation, UnstatedMicroBatchIsTheFastestDividingOneRecorded) {
  json row = llama_row();
  row["training"]["micro_batch_size"] = nullptr;  // global 64 over dp 8: 8 sequences per replica
  const ValidationSource src = source_with({row});
  const auto s = mgt::plan::setup_row(src, src.rows[0]);
  ASSERT_EQ(s.micro_batch_choices, (std::vector<int64_t>{1, 2, 4, 8}));
  std::vector<mgt::ir::Plan> plans;
  for (int64_t m : {1, 2, 4, 8}) {
    plans.push_back(s.plan);
    plans.back().micro_batch = m;
  }
  const auto expected = fastest(s, plans);
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].skipped) << *results[0].skipped;
  EXPECT_EQ(results[0].estimate->plan.micro_batch, expected.plan.micro_batch);
  EXPECT_DOUBLE_EQ(results[0].estimate->step_time_s, expected.step_time_s);
  EXPECT_NE(joined(results[0].assumptions).find("training.micro_batch_size not stated: " +
                                                 std::to_string(expected.plan.micro_batch) +
                                                 ", the fastest that fits of 1, 2, 4, 8"),
            std::string::npos)
      << joined(results[0].assumptions);

  // With grad_accum_steps stated the micro-batch is determined: 64 / (8 x 4) = 2.
  row["training"]["grad_accum_steps"] = 4;
  const ValidationSource with_ga = source_with({row});
  const auto g = mgt::plan::setup_row(with_ga, with_ga.rows[0]);
  EXPECT_TRUE(g.micro_batch_choices.empty());
  EXPECT_EQ(g.plan.micro_batch, 2);

  // A global batch that dp does not divide (OPT-175B: 977 sequences over dp 124) is estimated at the
  // nearest whole per-replica batch, here 66 / 8 -> 8 sequences; the micro-batch is still a knob.
  row["training"].erase("grad_accum_steps");
  row["training"]["global_batch_size_seqs"] = 66;
  const ValidationSource uneven = source_with({row});
  const auto u = mgt::plan::setup_row(uneven, uneven.rows[0]);
  EXPECT_EQ(u.micro_batch_choices, (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(u.settings.global_batch_tokens, 64 * u.settings.seq_len);
}

TEST(Validation, SubnormalMeasuredValueIsASkipNamingTheField) {
  json tiny = llama_row();
  tiny["id"] = "tiny";
  tiny["measured"] = {{"iteration_time_s", 5e-324}};
  json small = llama_row();
  small["id"] = "small";
  small["measured"] = {{"iteration_time_s", 1e-308}};
  const ValidationSource src = source_with({llama_row(), tiny, small});
  const auto results = mgt::plan::validate_source(src);
  ASSERT_EQ(results.size(), 3u);
  ASSERT_FALSE(results[0].skipped);
  for (size_t i = 1; i < 3; ++i) {
    ASSERT_TRUE(results[i].skipped) << results[i].id;
    EXPECT_NE(results[i].skipped->find("measured.iteration_time_s"), std::string::npos) << *results[i].skipped;
  }
  const auto summary = mgt::plan::summarize("s", "", results);
  EXPECT_EQ(summary.throughput.count, 1);
  EXPECT_DOUBLE_EQ(summary.throughput.median_abs_pct, std::fabs(*results[0].error) * 100.0);
}

TEST(Validation, ImplausibleHardwareValueIsASkipNamingFieldAndValue) {
  struct Case {
    const char* key;
    json value;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"hbm_gb", -80, "hbm_gb is -80"},
      {"nvlink_bw_GBps_per_gpu_bidir", -600, "nvlink_bw_GBps_per_gpu_bidir is -600"},
      {"gpus_per_node", 0, "gpus_per_node is 0"},
      {"nic_gbps", 0, "nic_gbps is 0"},
      {"nic_gbps", -200, "nic_gbps is -200"},
  };
  for (const auto& c : cases) {
    json block = h100_block();
    block[c.key] = c.value;
    const ValidationSource src = source_with({llama_row()}, "", block);
    const auto results = mgt::plan::validate_source(src);
    ASSERT_EQ(results.size(), 1u);
    ASSERT_TRUE(results[0].skipped) << c.key;
    EXPECT_NE(results[0].skipped->find(std::string("hardware h100.") + c.expected), std::string::npos) << *results[0].skipped;
  }
  for (const json& peak : {json(0), json(-1), json("312")}) {
    json block = h100_block();
    block["peak_dense_tflops"]["bf16"] = peak;
    const ValidationSource src = source_with({llama_row()}, "", block);
    const auto results = mgt::plan::validate_source(src);
    ASSERT_TRUE(results[0].skipped) << peak.dump();
    EXPECT_NE(results[0].skipped->find("hardware h100.peak_dense_tflops.bf16 is " + peak.dump()), std::string::npos)
        << *results[0].skipped;
  }
}

}  // namespace
