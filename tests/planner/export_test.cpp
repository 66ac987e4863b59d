// Tests for the framework exporters (planner/src/export.cpp): names and values read back from each
// output, the mesh product rule, the batch rule, and the plans a framework cannot express.
#include "mgt/planner/export.hpp"

#include "mgt/ir/error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace {

using mgt::ir::InputError;
using mgt::ir::Plan;
using mgt::ir::Recompute;
using mgt::plan::ExportContext;
using mgt::plan::ExportFormat;
using mgt::plan::export_plan;

Plan make_plan(int64_t dp_replicate, int64_t dp_shard, int64_t tp, int64_t cp, int64_t pp, int64_t micro_batch,
               int64_t grad_accum, Recompute recompute = Recompute::none) {
  Plan plan;
  plan.dp_replicate = dp_replicate;
  plan.dp_shard = dp_shard;
  plan.tp = tp;
  plan.cp = cp;
  plan.pp = pp;
  plan.micro_batch = micro_batch;
  plan.grad_accum = grad_accum;
  plan.recompute = recompute;
  return plan;
}

/// A context whose GPU count and global batch are computed by hand from the plan fields.
ExportContext make_context(const Plan& plan, int64_t seq_len = 4096) {
  ExportContext context;
  context.plan = plan;
  context.model_name = "Llama-3.1-8B";
  context.model_path = "examples/models/llama-3.1-8b.json";
  context.num_gpus = plan.dp_replicate * plan.dp_shard * plan.tp * plan.cp * plan.pp;
  context.gpus_per_node = 8;
  context.seq_len = seq_len;
  context.global_batch_seqs = plan.micro_batch * *plan.grad_accum * plan.dp_replicate * plan.dp_shard;
  context.num_layers = 32;  // Llama-3.1-8B: pipeline splits need the layer count
  return context;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines_of(text))
    if (l == line) return true;
  return false;
}

/// The value after `key` + `separator` on the line that starts with them (leading blanks ignored).
std::string value_of(const std::string& text, const std::string& key, const std::string& separator) {
  for (const auto& l : lines_of(text)) {
    const size_t start = l.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    const std::string prefix = key + separator;
    if (l.compare(start, prefix.size(), prefix) == 0) return l.substr(start + prefix.size());
  }
  ADD_FAILURE() << "no line '" << key << separator << "' in:\n" << text;
  return "";
}

int64_t int_of(const std::string& text, const std::string& key, const std::string& separator) {
  return std::stoll(value_of(text, key, separator));
}

/// The argument after `flag ` in the Megatron script's PLAN_ARGS array (one flag per line).
std::string flag_arg(const std::string& text, const std::string& flag) { return value_of(text, flag, " "); }

int64_t flag_value(const std::string& text, const std::string& flag) { return std::stoll(flag_arg(text, flag)); }

InputError expect_input_error(ExportFormat format, const ExportContext& context) {
  try {
    export_plan(format, context);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an InputError";
  return InputError("", "", "");
}

TEST(ExportFormat, NamesRoundTrip) {
  const auto& names = mgt::plan::export_format_names();
  const std::vector<std::string> correct{"accelerate", "axolotl",   "torchtitan",
                                         "megatron",   "deepspeed", "torchtitan@0.2"};
  EXPECT_EQ(names, correct);
  EXPECT_EQ(mgt::plan::export_format_from_string("accelerate"), ExportFormat::accelerate);
  EXPECT_EQ(mgt::plan::export_format_from_string("axolotl"), ExportFormat::axolotl);
  EXPECT_EQ(mgt::plan::export_format_from_string("torchtitan"), ExportFormat::torchtitan);
  EXPECT_EQ(mgt::plan::export_format_from_string("megatron"), ExportFormat::megatron);
  EXPECT_EQ(mgt::plan::export_format_from_string("deepspeed"), ExportFormat::deepspeed);
  EXPECT_EQ(mgt::plan::export_format_from_string("torchtitan@0.2"), ExportFormat::torchtitan_0_2);
}

TEST(ExportFormat, UnknownNameListsFormats) {
  try {
    mgt::plan::export_format_from_string("nemo");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.source(), "--emit");
    EXPECT_NE(what.find("nemo"), std::string::npos) << what;
    for (const auto& name : mgt::plan::export_format_names()) EXPECT_NE(what.find(name), std::string::npos) << what;
  }
}

TEST(ExportPlan, EveryFormatStartsWithHeader) {
  const Plan plan = make_plan(/*dp_replicate=*/1, /*dp_shard=*/8, /*tp=*/1, /*cp=*/1, /*pp=*/1, /*micro_batch=*/1,
                              /*grad_accum=*/2);
  for (const auto& name : mgt::plan::export_format_names()) {
    const std::string text = export_plan(mgt::plan::export_format_from_string(name), make_context(plan));
    if (name == "deepspeed") {
      const auto doc = nlohmann::json::parse(text);
      EXPECT_NE(doc.at("_comment").get<std::string>().find("generated by mgt-plan"), std::string::npos);
    } else if (name == "megatron") {
      // A bash script: the interpreter line first, then the header.
      EXPECT_EQ(text.rfind("#!/usr/bin/env bash\n# generated by mgt-plan", 0), 0u) << text;
    } else {
      EXPECT_EQ(text.rfind("# generated by mgt-plan", 0), 0u) << name << ":\n" << text;
    }
  }
}

TEST(ExportPlan, AccelerateFsdpTp) {
  const Plan plan = make_plan(1, 4, 2, 1, 1, 1, 4, Recompute::full);
  const ExportContext context = make_context(plan);
  const std::string text = export_plan(ExportFormat::accelerate, context);
  EXPECT_TRUE(has_line(text, "distributed_type: FSDP")) << text;
  EXPECT_TRUE(has_line(text, "mixed_precision: bf16")) << text;
  EXPECT_TRUE(has_line(text, "num_machines: 1")) << text;
  EXPECT_TRUE(has_line(text, "num_processes: " + std::to_string(context.num_gpus))) << text;
  EXPECT_TRUE(has_line(text, "fsdp_config:")) << text;
  EXPECT_TRUE(has_line(text, "  fsdp_version: 2")) << text;
  EXPECT_TRUE(has_line(text, "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP")) << text;
  EXPECT_TRUE(has_line(text, "  fsdp_reshard_after_forward: true")) << text;
  EXPECT_TRUE(has_line(text, "  fsdp_state_dict_type: SHARDED_STATE_DICT")) << text;
  EXPECT_TRUE(has_line(text, "  fsdp_activation_checkpointing: true")) << text;
  EXPECT_TRUE(has_line(text, "parallelism_config:")) << text;
  EXPECT_TRUE(has_line(text, "  parallelism_config_dp_replicate_size: " + std::to_string(plan.dp_replicate)));
  EXPECT_TRUE(has_line(text, "  parallelism_config_dp_shard_size: " + std::to_string(plan.dp_shard)));
  EXPECT_TRUE(has_line(text, "  parallelism_config_tp_size: 2")) << text;
  EXPECT_TRUE(has_line(text, "  parallelism_config_cp_size: " + std::to_string(plan.cp)));
  // Accelerate's rule: the ParallelismConfig total size equals num_processes.
  const int64_t product = int_of(text, "parallelism_config_dp_replicate_size", ": ") *
                          int_of(text, "parallelism_config_dp_shard_size", ": ") *
                          int_of(text, "parallelism_config_tp_size", ": ") *
                          int_of(text, "parallelism_config_cp_size", ": ");
  EXPECT_EQ(product, int_of(text, "num_processes", ": "));
}

TEST(ExportPlan, AccelerateHsdpMultiNode) {
  const Plan plan = make_plan(2, 8, 1, 1, 1, 2, 2);
  const ExportContext context = make_context(plan);
  const std::string text = export_plan(ExportFormat::accelerate, context);
  EXPECT_TRUE(has_line(text, "num_machines: " + std::to_string(context.num_gpus / context.gpus_per_node))) << text;
  EXPECT_TRUE(has_line(text, "num_processes: 16")) << text;
  EXPECT_TRUE(has_line(text, "  parallelism_config_dp_replicate_size: 2")) << text;
  EXPECT_TRUE(has_line(text, "  fsdp_activation_checkpointing: false")) << text;
}

TEST(ExportPlan, AcceleratePureDdpIsMultiGpu) {
  const Plan plan = make_plan(8, 1, 1, 1, 1, 4, 1);
  const std::string text = export_plan(ExportFormat::accelerate, make_context(plan));
  EXPECT_TRUE(has_line(text, "distributed_type: MULTI_GPU")) << text;
  EXPECT_EQ(text.find("parallelism_config"), std::string::npos) << text;
  EXPECT_EQ(text.find("fsdp_config"), std::string::npos) << text;
}

TEST(ExportPlan, AccelerateRejectsReplicationWithTp) {
  const Plan plan = make_plan(/*dp_replicate=*/2, /*dp_shard=*/1, /*tp=*/2, 1, 1, 1, 1);
  const InputError e = expect_input_error(ExportFormat::accelerate, make_context(plan));
  EXPECT_EQ(e.source(), "--emit accelerate");
  EXPECT_EQ(e.field(), "dp_replicate");
  EXPECT_NE(std::string(e.what()).find("hint:"), std::string::npos) << e.what();
}

TEST(ExportPlan, AccelerateRejectsPipeline) {
  const Plan plan = make_plan(1, 2, 1, 1, /*pp=*/2, 1, 4);
  EXPECT_EQ(expect_input_error(ExportFormat::accelerate, make_context(plan)).field(), "pp");
}

TEST(ExportPlan, Axolotl) {
  const Plan plan = make_plan(2, 2, 1, 2, 1, 2, 3, Recompute::selective);
  const ExportContext context = make_context(plan, /*seq_len=*/8192);
  const std::string text = export_plan(ExportFormat::axolotl, context);
  EXPECT_TRUE(has_line(text, "dp_shard_size: " + std::to_string(plan.dp_shard))) << text;
  EXPECT_TRUE(has_line(text, "dp_replicate_size: " + std::to_string(plan.dp_replicate))) << text;
  EXPECT_TRUE(has_line(text, "tensor_parallel_size: " + std::to_string(plan.tp))) << text;
  EXPECT_TRUE(has_line(text, "context_parallel_size: " + std::to_string(plan.cp))) << text;
  EXPECT_TRUE(has_line(text, "micro_batch_size: 2")) << text;
  EXPECT_TRUE(has_line(text, "gradient_accumulation_steps: 3")) << text;
  EXPECT_TRUE(has_line(text, "sequence_len: 8192")) << text;
  EXPECT_TRUE(has_line(text, "bf16: true")) << text;
  EXPECT_TRUE(has_line(text, "fsdp_version: 2")) << text;
  EXPECT_TRUE(has_line(text, "fsdp_config:")) << text;
  EXPECT_TRUE(has_line(text, "  reshard_after_forward: true")) << text;
  // Under FSDP the checkpointing switch lives in fsdp_config, not gradient_checkpointing.
  EXPECT_TRUE(has_line(text, "  activation_checkpointing: true")) << text;
  EXPECT_TRUE(has_line(text, "gradient_checkpointing: false")) << text;
  const int64_t product = int_of(text, "dp_shard_size", ": ") * int_of(text, "dp_replicate_size", ": ") *
                          int_of(text, "tensor_parallel_size", ": ") * int_of(text, "context_parallel_size", ": ");
  EXPECT_EQ(product, context.num_gpus);
}

TEST(ExportPlan, AxolotlDdpUsesGradientCheckpointing) {
  const Plan plan = make_plan(4, 1, 1, 1, 1, 1, 8, Recompute::full);
  const std::string text = export_plan(ExportFormat::axolotl, make_context(plan));
  EXPECT_TRUE(has_line(text, "gradient_checkpointing: true")) << text;
  EXPECT_EQ(text.find("fsdp_config"), std::string::npos) << text;
}

TEST(ExportPlan, TorchtitanHsdpTp) {
  const Plan plan = make_plan(2, 2, 2, 1, 1, 2, 4, Recompute::full);
  const ExportContext context = make_context(plan, 2048);
  const std::string text = export_plan(ExportFormat::torchtitan_0_2, context);
  EXPECT_TRUE(has_line(text, "[parallelism]")) << text;
  EXPECT_TRUE(has_line(text, "data_parallel_replicate_degree = 2")) << text;
  EXPECT_TRUE(has_line(text, "data_parallel_shard_degree = 2")) << text;
  EXPECT_TRUE(has_line(text, "tensor_parallel_degree = 2")) << text;
  EXPECT_TRUE(has_line(text, "context_parallel_degree = 1")) << text;
  EXPECT_TRUE(has_line(text, "pipeline_parallel_degree = 1")) << text;
  EXPECT_TRUE(has_line(text, "enable_async_tensor_parallel = false")) << text;
  EXPECT_TRUE(has_line(text, "seq_len = 2048")) << text;
  EXPECT_TRUE(has_line(text, "mode = \"full\"")) << text;
  // torchtitan: local_batch_size is per dp rank; ga = global / (local * dp_replicate * dp_shard).
  const int64_t local = int_of(text, "local_batch_size", " = ");
  const int64_t global = int_of(text, "global_batch_size", " = ");
  EXPECT_EQ(local, plan.micro_batch);
  EXPECT_EQ(global, plan.micro_batch * *plan.grad_accum * plan.dp_replicate * plan.dp_shard);
  EXPECT_EQ(global / (local * plan.dp_replicate * plan.dp_shard), *plan.grad_accum);
  const int64_t product =
      int_of(text, "data_parallel_replicate_degree", " = ") * int_of(text, "data_parallel_shard_degree", " = ") *
      int_of(text, "tensor_parallel_degree", " = ") * int_of(text, "context_parallel_degree", " = ") *
      int_of(text, "pipeline_parallel_degree", " = ");
  EXPECT_EQ(product, context.num_gpus);
}

TEST(ExportPlan, TorchtitanPipelineBatchesGoThroughSchedule) {
  const Plan plan = make_plan(1, 2, 2, 2, 2, 1, 8, Recompute::selective);
  const std::string text = export_plan(ExportFormat::torchtitan_0_2, make_context(plan, 4096));
  EXPECT_EQ(int_of(text, "local_batch_size", " = "), plan.micro_batch * *plan.grad_accum);
  EXPECT_EQ(int_of(text, "pipeline_parallel_microbatch_size", " = "), plan.micro_batch);
  EXPECT_EQ(int_of(text, "global_batch_size", " = "), plan.micro_batch * *plan.grad_accum * plan.dp_shard);
  EXPECT_TRUE(has_line(text, "mode = \"selective\"")) << text;
}

TEST(ExportPlan, MegatronFlags) {
  const Plan plan = make_plan(1, 2, 2, 1, 2, 1, 16, Recompute::full);
  const ExportContext context = make_context(plan, 4096);
  const std::string text = export_plan(ExportFormat::megatron, context);
  EXPECT_EQ(flag_value(text, "--tensor-model-parallel-size"), plan.tp);
  EXPECT_EQ(flag_value(text, "--pipeline-model-parallel-size"), plan.pp);
  EXPECT_EQ(flag_value(text, "--context-parallel-size"), plan.cp);
  EXPECT_EQ(flag_value(text, "--seq-length"), 4096);
  EXPECT_TRUE(has_line(text, "  --sequence-parallel")) << text;
  EXPECT_TRUE(has_line(text, "  --bf16")) << text;
  EXPECT_TRUE(has_line(text, "  --recompute-granularity full")) << text;
  EXPECT_TRUE(has_line(text, "  --recompute-method uniform")) << text;
  EXPECT_TRUE(has_line(text, "  --recompute-num-layers 1")) << text;
  // zero_stage 3 (dp_shard 2): Megatron-FSDP, which brings its own sharded optimizer.
  EXPECT_TRUE(has_line(text, "  --use-megatron-fsdp")) << text;
  EXPECT_FALSE(has_line(text, "  --use-distributed-optimizer")) << text;
  // Megatron's data-parallel size is derived: world / (tp * pp * cp).
  const int64_t dp = context.num_gpus / (plan.tp * plan.pp * plan.cp);
  EXPECT_EQ(dp, plan.dp_replicate * plan.dp_shard);
  const int64_t micro = flag_value(text, "--micro-batch-size");
  const int64_t global = flag_value(text, "--global-batch-size");
  EXPECT_EQ(micro, plan.micro_batch);
  EXPECT_EQ(global, micro * *plan.grad_accum * dp);
  // The flags sit in a bash array that torchrun receives: no line continuations to break.
  EXPECT_TRUE(has_line(text, "PLAN_ARGS=(")) << text;
  EXPECT_EQ(text.find(" \\\n--"), std::string::npos) << text;
  EXPECT_NE(text.find("\"${PLAN_ARGS[@]}\" \"$@\""), std::string::npos) << text;
}

TEST(ExportPlan, MegatronSelectiveNoSharding) {
  Plan plan = make_plan(4, 1, 2, 1, 1, 2, 2, Recompute::selective);
  plan.sequence_parallel = false;
  const std::string text = export_plan(ExportFormat::megatron, make_context(plan));
  EXPECT_EQ(flag_arg(text, "--recompute-granularity"), "selective") << text;
  EXPECT_EQ(text.find("--sequence-parallel"), std::string::npos) << text;
  EXPECT_EQ(text.find("--use-distributed-optimizer"), std::string::npos) << text;
  EXPECT_EQ(text.find("--recompute-method"), std::string::npos) << text;
}

TEST(ExportPlan, DeepSpeedBatchRule) {
  const Plan plan = make_plan(1, 8, 1, 1, 1, 2, 4, Recompute::full);
  const std::string text = export_plan(ExportFormat::deepspeed, make_context(plan));
  const auto doc = nlohmann::json::parse(text);
  const int64_t micro = doc.at("train_micro_batch_size_per_gpu").get<int64_t>();
  const int64_t ga = doc.at("gradient_accumulation_steps").get<int64_t>();
  const int64_t dp_world = plan.dp_replicate * plan.dp_shard;
  EXPECT_EQ(micro, plan.micro_batch);
  EXPECT_EQ(ga, *plan.grad_accum);
  EXPECT_EQ(doc.at("train_batch_size").get<int64_t>(), micro * ga * dp_world);
  EXPECT_EQ(doc.at("bf16").at("enabled"), true);
  EXPECT_EQ(doc.at("zero_optimization").at("stage").get<int64_t>(), 3);
  EXPECT_TRUE(doc.contains("activation_checkpointing"));
}

TEST(ExportPlan, DeepSpeedPlainDataParallel) {
  const Plan plan = make_plan(4, 1, 1, 1, 1, 1, 1);
  const auto doc = nlohmann::json::parse(export_plan(ExportFormat::deepspeed, make_context(plan)));
  EXPECT_EQ(doc.at("zero_optimization").at("stage").get<int64_t>(), 0);
  EXPECT_FALSE(doc.contains("activation_checkpointing"));
}

TEST(ExportPlan, DeepSpeedRejectsTp) {
  const Plan plan = make_plan(1, 4, /*tp=*/2, 1, 1, 1, 1);
  const InputError e = expect_input_error(ExportFormat::deepspeed, make_context(plan));
  EXPECT_EQ(e.source(), "--emit deepspeed");
  EXPECT_EQ(e.field(), "tp");
  EXPECT_NE(std::string(e.what()).find("megatron"), std::string::npos) << e.what();
}

TEST(ExportPlan, RejectsInconsistentGlobalBatch) {
  const Plan plan = make_plan(1, 4, 1, 1, 1, 1, 4);
  ExportContext context = make_context(plan);
  context.global_batch_seqs += 1;
  for (const auto& name : mgt::plan::export_format_names())
    EXPECT_EQ(expect_input_error(mgt::plan::export_format_from_string(name), context).field(), "global_batch_seqs")
        << name;
}

TEST(ExportPlan, RejectsMeshThatDoesNotFillGpus) {
  const Plan plan = make_plan(1, 4, 1, 1, 1, 1, 4);
  ExportContext context = make_context(plan);
  context.num_gpus = 8;
  EXPECT_EQ(expect_input_error(ExportFormat::torchtitan, context).field(), "num_gpus");
}

TEST(ExportPlan, RejectsUnresolvedGradAccum) {
  Plan plan = make_plan(1, 4, 1, 1, 1, 1, 4);
  ExportContext context = make_context(plan);
  context.plan.grad_accum.reset();
  EXPECT_EQ(expect_input_error(ExportFormat::megatron, context).field(), "grad_accum");
}

}  // namespace
