// Every export checked against the keys and flags the frameworks' own parsers accept. CI cannot
// install the frameworks (several GB), so the accepted names are recorded here, each list with the
// version and source it was read from; scripts/check-exports loads the same exports with the real
// parsers. Also: the case list of docs/exports.md searched and exported, uneven pipelines, the
// Megatron script run by bash, and can_express.
#include "mgt/planner/export.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/planner/search.hpp"
#include "planner_fixtures.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using mgt::ir::Plan, mgt::ir::Recompute;
using mgt::plan::ExportContext, mgt::plan::ExportFormat, mgt::plan::export_plan;
using mgt::test::h100, mgt::test::lines_of, mgt::test::make_plan;
using Names = std::set<std::string>;

// ---- accepted names, read from the framework sources ----

// Accelerate 1.16.0 (PyPI wheel; huggingface/accelerate main 16cb6eb8 has the same):
// commands/config/config_args.py ClusterConfig fields; fsdp_config / parallelism_config keys are
// `accelerate launch` arguments (commands/launch.py).
const Names kAccelerateKeys{
    "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug", "num_processes",
    "machine_rank", "num_machines", "gpu_ids", "main_process_ip", "main_process_port", "rdzv_backend",
    "same_network", "main_training_function", "enable_cpu_affinity", "deepspeed_config", "fsdp_config",
    "parallelism_config", "megatron_lm_config", "mpirun_config", "dynamo_config",
    "fsdp_config.fsdp_version", "fsdp_config.fsdp_offload_params", "fsdp_config.fsdp_min_num_params",
    "fsdp_config.fsdp_sharding_strategy", "fsdp_config.fsdp_reshard_after_forward",
    "fsdp_config.fsdp_auto_wrap_policy", "fsdp_config.fsdp_transformer_layer_cls_to_wrap",
    "fsdp_config.fsdp_backward_prefetch", "fsdp_config.fsdp_state_dict_type", "fsdp_config.fsdp_forward_prefetch",
    "fsdp_config.fsdp_use_orig_params", "fsdp_config.fsdp_cpu_ram_efficient_loading",
    "fsdp_config.fsdp_sync_module_states", "fsdp_config.fsdp_activation_checkpointing",
    "fsdp_config.fsdp_activation_checkpointing_offload",
    "parallelism_config.parallelism_config_dp_replicate_size", "parallelism_config.parallelism_config_dp_shard_size",
    "parallelism_config.parallelism_config_tp_size", "parallelism_config.parallelism_config_cp_size",
    "parallelism_config.parallelism_config_cp_backend", "parallelism_config.parallelism_config_sp_size"};

// Axolotl 0.18.0 (axolotl-ai-cloud/axolotl 067b021c): src/axolotl/utils/schemas/config.py,
// training.py and fsdp.py (FSDPConfig).
const Names kAxolotlKeys{
    "sequence_len", "micro_batch_size", "gradient_accumulation_steps", "bf16", "gradient_checkpointing",
    "dp_shard_size", "dp_replicate_size", "tensor_parallel_size", "context_parallel_size", "attn_implementation",
    "fsdp_version", "fsdp_config", "fsdp_config.fsdp_version", "fsdp_config.activation_checkpointing",
    "fsdp_config.offload_params", "fsdp_config.sync_module_states", "fsdp_config.cpu_ram_efficient_loading",
    "fsdp_config.cpu_offload_pin_memory", "fsdp_config.use_orig_params", "fsdp_config.state_dict_type",
    "fsdp_config.final_state_dict_type", "fsdp_config.auto_wrap_policy",
    "fsdp_config.transformer_layer_cls_to_wrap", "fsdp_config.min_num_params", "fsdp_config.reshard_after_forward",
    "fsdp_config.mixed_precision_policy",
    // LoRA / QLoRA: axolotl-ai-cloud/axolotl 00564c8f, src/axolotl/utils/schemas/peft.py (LoraConfig).
    "adapter", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "load_in_4bit"};

// torchtitan 0.3.0 (PyPI wheel): torchtitan/config/configs.py TrainingConfig and ParallelismConfig
// fields, and Trainer.Config.activation_checkpoint (torchtitan/trainer.py).
const Names kTorchtitanFields{
    "training.local_batch_size", "training.global_batch_size", "training.seq_len", "training.max_norm",
    "training.steps", "training.enable_cpu_offload", "training.disable_cuda_graphs", "training.dtype",
    "training.mixed_precision_param", "training.mixed_precision_reduce",
    "parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_shard_degree",
    "parallelism.fsdp_reshard_after_forward", "parallelism.enable_fsdp_symm_mem", "parallelism.tensor_parallel_degree",
    "parallelism.enable_sequence_parallel", "parallelism.spmd_backend", "parallelism.pipeline_parallel_degree",
    "parallelism.module_fqns_per_model_part", "parallelism.pipeline_parallel_first_stage_less_layers",
    "parallelism.pipeline_parallel_last_stage_less_layers", "parallelism.pipeline_parallel_layers_per_stage",
    "parallelism.pipeline_parallel_schedule", "parallelism.pipeline_parallel_schedule_csv",
    "parallelism.pipeline_parallel_microbatch_size", "parallelism.context_parallel_degree",
    "parallelism.context_parallel_load_balancer", "parallelism.expert_parallel_degree",
    "config.activation_checkpoint"};

// torchtitan 0.2.2 (tag v0.2.2): torchtitan/config/job_config.py, sections used by the TOML export.
const Names kTorchtitan02Keys{
    "training.local_batch_size", "training.global_batch_size", "training.seq_len", "training.mixed_precision_param",
    "parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_shard_degree",
    "parallelism.fsdp_reshard_after_forward", "parallelism.tensor_parallel_degree",
    "parallelism.enable_async_tensor_parallel", "parallelism.context_parallel_degree",
    "parallelism.pipeline_parallel_degree", "parallelism.pipeline_parallel_schedule",
    "parallelism.pipeline_parallel_microbatch_size", "parallelism.expert_parallel_degree", "activation_checkpoint.mode",
    "activation_checkpoint.selective_ac_option"};

// DeepSpeed 0.19.8 (PyPI sdist): deepspeed/runtime/config.py top-level keys and
// deepspeed/runtime/zero/config.py DeepSpeedZeroConfig (extra="forbid"; populate_by_name, so a field's
// alias, e.g. stage3_max_live_parameters for max_live_parameters, is accepted as well).
const Names kDeepSpeedKeys{"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                           "bf16", "zero_optimization", "activation_checkpointing"};
const Names kDeepSpeedZeroKeys{
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "allgather_partitions",
    "allgather_bucket_size", "overlap_comm", "offload_param", "offload_optimizer", "sub_group_size",
    "prefetch_bucket_size", "param_persistence_threshold", "max_live_parameters", "max_reuse_distance",
    "gather_16bit_weights_on_model_save", "zero_hpz_partition_size", "zero_quantized_weights",
    "zero_quantized_gradients", "round_robin_gradients", "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold", "stage3_max_live_parameters", "stage3_max_reuse_distance"};
// runtime/config.py _REMOVED_ZERO_CONFIG_KEYS: DeepSpeed raises on these.
const Names kDeepSpeedRemovedZeroKeys{"mics_shard_size", "mics_hierarchical_params_gather", "zeropp_loco_param"};

// Megatron-LM main d98e8a64 (after core_v0.19.0): megatron/training/arguments.py, literal
// add_argument flags and those ArgumentGroupFactory builds from TransformerConfig / ModelParallelConfig /
// TrainingConfig / CheckpointConfig / DistributedInitConfig fields (--field-name).
const Names kMegatronFlags{
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--num-virtual-stages-per-pipeline-rank",
    "--num-layers", "--mtp-num-layers", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout",
    "--context-parallel-size", "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--sequence-parallel", "--micro-batch-size",
    "--global-batch-size", "--seq-length", "--bf16", "--recompute-granularity", "--recompute-method",
    "--recompute-num-layers", "--use-distributed-optimizer", "--num-distributed-optimizer-instances",
    "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "--no-gradient-accumulation-fusion",
    "--ckpt-format", "--overlap-grad-reduce", "--overlap-param-gather", "--recompute-modules", "--moe-grouped-gemm",
    "--grad-reduce-in-bf16"};

// ---- names read back from an export ----

/// "key" and "parent.key" of a two-level YAML file (comments skipped).
Names yaml_keys(const std::string& text) {
  Names keys;
  std::string parent;
  for (const auto& l : lines_of(text)) {
    if (l.empty() || l[0] == '#') continue;
    const size_t colon = l.find(':');
    if (colon == std::string::npos) continue;
    const bool nested = l[0] == ' ';
    const std::string key = l.substr(l.find_first_not_of(' '), colon - l.find_first_not_of(' '));
    if (!nested) parent = key;
    keys.insert(nested ? parent + "." + key : key);
  }
  return keys;
}

/// "training.x" / "parallelism.x" / "config.x" assigned in the torchtitan module's apply_plan.
Names python_fields(const std::string& text) {
  Names fields;
  for (const auto& l : lines_of(text)) {
    for (const char* object : {"training.", "parallelism.", "config."}) {
      const std::string prefix = std::string("    ") + object;
      if (l.rfind(prefix, 0) == 0 && l.find(" = ") != std::string::npos)
        fields.insert(l.substr(4, l.find(" = ") - 4));
    }
  }
  return fields;
}

Names toml_keys(const std::string& text) {
  Names keys;
  std::string section;
  for (const auto& l : lines_of(text)) {
    if (l.empty() || l[0] == '#') continue;
    if (l[0] == '[') {
      section = l.substr(1, l.find(']') - 1);
      continue;
    }
    keys.insert(section + "." + l.substr(0, l.find(" = ")));
  }
  return keys;
}

/// The flags in the script's PLAN_ARGS=( ... ) array.
Names megatron_plan_flags(const std::string& text) {
  Names flags;
  bool inside = false;
  for (const auto& l : lines_of(text)) {
    if (l == "PLAN_ARGS=(") inside = true;
    else if (inside && l == ")") inside = false;
    else if (inside) flags.insert(l.substr(2, l.find(' ', 2) - 2));
  }
  return flags;
}

void expect_subset(const Names& used, const Names& accepted, const std::string& what) {
  for (const auto& name : used) EXPECT_TRUE(accepted.count(name)) << what << ": '" << name << "' is not accepted";
}

/// Checks one export's names against its framework's lists.
void check_names(ExportFormat format, const std::string& text, const std::string& what) {
  switch (format) {
    case ExportFormat::accelerate: expect_subset(yaml_keys(text), kAccelerateKeys, what); break;
    case ExportFormat::axolotl: expect_subset(yaml_keys(text), kAxolotlKeys, what); break;
    case ExportFormat::torchtitan: expect_subset(python_fields(text), kTorchtitanFields, what); break;
    case ExportFormat::torchtitan_0_2: expect_subset(toml_keys(text), kTorchtitan02Keys, what); break;
    case ExportFormat::megatron: expect_subset(megatron_plan_flags(text), kMegatronFlags, what); break;
    case ExportFormat::deepspeed: {
      const auto doc = nlohmann::json::parse(text);
      Names top, zero;
      for (const auto& [key, value] : doc.items())
        if (key.rfind("_comment", 0) != 0) top.insert(key);
      for (const auto& [key, value] : doc.at("zero_optimization").items()) zero.insert(key);
      expect_subset(top, kDeepSpeedKeys, what);
      expect_subset(zero, kDeepSpeedZeroKeys, what);
      for (const auto& key : kDeepSpeedRemovedZeroKeys) EXPECT_FALSE(zero.count(key)) << what << ": " << key;
      break;
    }
  }
}

ExportContext context_for(const Plan& plan, const std::string& model, int64_t num_layers, int64_t seq_len = 8192) {
  ExportContext c;
  c.plan = plan;
  c.model_name = model;
  c.num_gpus = plan.dp_replicate * plan.dp_shard * plan.tp * plan.cp * plan.pp;
  c.seq_len = seq_len;
  c.num_layers = num_layers;
  return c;
}

std::vector<ExportFormat> all_formats() {
  std::vector<ExportFormat> formats;
  for (const auto& name : mgt::plan::export_format_names()) formats.push_back(mgt::plan::export_format_from_string(name));
  return formats;
}

// ---- the case list: search, export the best plans in every format ----

struct Case {
  const char* model;
  int64_t gpus;
  int64_t seq_len;
};

TEST(ExportKeys, CaseListExportsUseAcceptedNamesOrSayWhy) {
  const Case cases[] = {{"Llama-3.1-8B", 8, 8192},   {"Llama-3.1-8B", 64, 8192},   {"Llama-3.1-70B", 64, 8192},
                        {"Llama-3.1-70B", 256, 8192}, {"Mixtral-8x7B", 32, 8192},   {"Qwen3-30B-A3B", 32, 8192},
                        {"Llama-3.1-8B", 64, 32768},  {"Llama-3.1-405B", 512, 8192}, {"Llama-3.1-405B", 2048, 8192}};
  const auto& cluster = h100();
  for (const auto& c : cases) {
    const auto& graph = mgt::test::model(c.model);
    mgt::cost::TrainingSettings settings;
    settings.seq_len = c.seq_len;
    const mgt::cost::Estimator estimator(graph, cluster, c.gpus, settings);
    mgt::plan::SearchOptions options;
    options.rules = {c.gpus, false, ""};
    options.top = 5;
    const auto result = mgt::plan::search(estimator, options);
    ASSERT_FALSE(result.plans.empty()) << c.model << " on " << c.gpus;
    for (const auto& estimate : result.plans) {
      ExportContext context{estimate.plan, "", graph.info.name, c.gpus, cluster.gpus_per_node,
                            settings.seq_len, settings.global_batch_seqs(), graph.info.num_layers};
      for (const ExportFormat format : all_formats()) {
        const std::string what = std::string(c.model) + " on " + std::to_string(c.gpus) + " " +
                                 mgt::ir::to_string(estimate.plan);
        std::string reason;
        if (!mgt::plan::can_express(format, context, &reason)) {
          EXPECT_NE(reason.find("hint:"), std::string::npos) << what << ": " << reason;
          continue;
        }
        check_names(format, export_plan(format, context), what);
      }
    }
  }
}

// ---- uneven pipelines: Llama 3.1 405B has 126 layers ----

TEST(ExportKeys, MegatronUnevenPipelineCountsEmbeddingAndLoss) {
  for (const int64_t pp : {16, 64}) {
    // 126 + 2 = 128 = pp * (128 / pp): first and last stage one layer lighter.
    const Plan plan = make_plan(1, 512 / pp, 1, 1, pp, 1, 4);
    const std::string text = export_plan(ExportFormat::megatron, context_for(plan, "Llama-3.1-405B", 126));
    const Names flags = megatron_plan_flags(text);
    EXPECT_TRUE(flags.count("--account-for-embedding-in-pipeline-split")) << text;
    EXPECT_TRUE(flags.count("--account-for-loss-in-pipeline-split")) << text;
    EXPECT_TRUE(flags.count("--num-layers")) << text;
  }
  // 32 layers on pp 4 divide evenly: no extra flags.
  const std::string even = export_plan(ExportFormat::megatron, context_for(make_plan(1, 2, 1, 1, 4, 1, 4), "x", 32));
  EXPECT_FALSE(megatron_plan_flags(even).count("--account-for-embedding-in-pipeline-split")) << even;
}

TEST(ExportKeys, TorchtitanUnevenPipelineLayersPerStage) {
  // pp 16, 126 layers: layers_per_stage = 128 / 16 = 8, first/last stage 7 (less_layers 1).
  const std::string text =
      export_plan(ExportFormat::torchtitan, context_for(make_plan(1, 32, 1, 1, 16, 1, 8), "Llama-3.1-405B", 126));
  EXPECT_NE(text.find("    parallelism.pipeline_parallel_layers_per_stage = 8\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    parallelism.pipeline_parallel_first_stage_less_layers = 1\n"), std::string::npos);
  EXPECT_NE(text.find("    parallelism.pipeline_parallel_last_stage_less_layers = 1\n"), std::string::npos);
  // micro 1 * ga 8 sequences per rank go through the schedule in micro-batches of 1.
  EXPECT_NE(text.find("    training.local_batch_size = 8  "), std::string::npos) << text;
  EXPECT_NE(text.find("    training.disable_cuda_graphs = True\n"), std::string::npos) << text;
  EXPECT_NE(text.find("BASE = os.environ.get(\"MGT_TORCHTITAN_BASE\", "
                      "\"torchtitan.models.llama3.config_registry:llama3_405b\")"),
            std::string::npos)
      << text;
  // 32 layers, pp 2 x vpp 2: 8 per stage, no lighter ends, interleaved schedule.
  Plan vpp = make_plan(1, 2, 1, 1, 2, 1, 4);
  vpp.vpp = 2;
  const std::string even = export_plan(ExportFormat::torchtitan, context_for(vpp, "Llama-3.1-8B", 32));
  EXPECT_NE(even.find("    parallelism.pipeline_parallel_layers_per_stage = 8\n"), std::string::npos) << even;
  EXPECT_NE(even.find("    parallelism.pipeline_parallel_first_stage_less_layers = 0\n"), std::string::npos);
  EXPECT_NE(even.find("    parallelism.pipeline_parallel_schedule = \"Interleaved1F1B\"\n"), std::string::npos);
}

TEST(ExportKeys, PipelineWithoutLayerCountSaysWhy) {
  std::string reason;
  const ExportContext c = context_for(make_plan(1, 2, 1, 1, 4, 1, 4), "x", /*num_layers=*/0);
  EXPECT_FALSE(mgt::plan::can_express(ExportFormat::megatron, c, &reason));
  EXPECT_NE(reason.find("layer count"), std::string::npos) << reason;
  // 29 layers on pp 4: none of 29, 30, 31 is a multiple of 4, so only per-stage counts split them
  // (8, 8, 8, 5), which torchtitan's layers_per_stage cannot say.
  EXPECT_FALSE(mgt::plan::can_express(ExportFormat::torchtitan, context_for(c.plan, "x", 29), &reason));
  EXPECT_NE(reason.find("per-stage layer counts"), std::string::npos) << reason;
  EXPECT_TRUE(mgt::plan::can_express(ExportFormat::megatron, context_for(c.plan, "x", 29), &reason)) << reason;
}

// The flag's value in a Megatron script ("" when absent).
std::string megatron_flag(const std::string& text, const std::string& flag) {
  const size_t at = text.find("  " + flag + " ");
  if (at == std::string::npos) return "";
  const size_t from = at + 3 + flag.size();
  return text.substr(from, text.find('\n', from) - from);
}

TEST(ExportKeys, MegatronUnevenPipelineFirstLastCountsAndLayout) {
  // DeepSeek-V3: 61 layers on pp 16 (NeMo): middle ranks 4, the first 4, the last 1.
  const std::string first_last =
      export_plan(ExportFormat::megatron, context_for(make_plan(1, 4, 1, 1, 16, 1, 4), "DeepSeek-V3", 61));
  EXPECT_EQ(megatron_flag(first_last, "--decoder-first-pipeline-num-layers"), "4") << first_last;
  EXPECT_EQ(megatron_flag(first_last, "--decoder-last-pipeline-num-layers"), "1") << first_last;
  EXPECT_FALSE(megatron_plan_flags(first_last).count("--account-for-loss-in-pipeline-split"));
  // 61 layers on pp 8 x vpp 2: chunks of 3 with one more on chunks 1..13, as a layout.
  Plan interleaved = make_plan(1, 4, 1, 1, 8, 1, 8);
  interleaved.vpp = 2;
  const std::string layout = export_plan(ExportFormat::megatron, context_for(interleaved, "DeepSeek-V3", 61));
  std::string expected = "\"Et*3";
  for (int c = 1; c <= 13; ++c) expected += "|t*4";
  expected += "|t*3|t*3,L\"";
  EXPECT_EQ(megatron_flag(layout, "--pipeline-model-parallel-layout"), expected) << layout;
  // 31 layers on pp 8: 32 = 8 x 4 with the loss counted as a layer.
  const std::string loss = export_plan(ExportFormat::megatron, context_for(make_plan(1, 1, 1, 1, 8, 1, 8), "x", 31));
  EXPECT_TRUE(megatron_plan_flags(loss).count("--account-for-loss-in-pipeline-split")) << loss;
  EXPECT_FALSE(megatron_plan_flags(loss).count("--account-for-embedding-in-pipeline-split")) << loss;
}

TEST(ExportKeys, MegatronLayoutPutsMultiTokenPredictionOnTheLastChunk) {
  // DeepSeek-V3 with its MTP depth on pp 8 x vpp 4: Megatron-Bridge's H100 layout "Et|(tt|)*30mL".
  Plan plan = make_plan(1, 4, 1, 1, 8, 1, 8);
  plan.vpp = 4;
  ExportContext c = context_for(plan, "DeepSeek-V3", 61);
  c.mtp_depths = 1;
  const std::string text = export_plan(ExportFormat::megatron, c);
  std::string expected = "\"Et*1";
  for (int chunk = 1; chunk <= 30; ++chunk) expected += "|t*2";
  expected += "|m,L\"";
  EXPECT_EQ(megatron_flag(text, "--pipeline-model-parallel-layout"), expected) << text;
  EXPECT_EQ(megatron_flag(text, "--mtp-num-layers"), "1") << text;
  // pp 16: "Et*4|(t*4|)*14t*1,m,L".
  c = context_for(make_plan(1, 4, 1, 1, 16, 1, 4), "DeepSeek-V3", 61);
  c.mtp_depths = 1;
  expected = "\"Et*4";
  for (int chunk = 1; chunk <= 14; ++chunk) expected += "|t*4";
  expected += "|t*1,m,L\"";
  EXPECT_EQ(megatron_flag(export_plan(ExportFormat::megatron, c), "--pipeline-model-parallel-layout"), expected);
  // torchtitan cannot express a per-chunk layout.
  EXPECT_TRUE(mgt::plan::export_refusal(ExportFormat::torchtitan, c).has_value());
}

TEST(ExportKeys, MegatronExpertTensorParallelOnlyWhenItDiffersFromTp) {
  Plan plan = make_plan(1, 4, 2, 1, 1, 1, 4);
  plan.ep = 4;
  const std::string same = export_plan(ExportFormat::megatron, context_for(plan, "Mixtral-8x7B", 32));
  EXPECT_FALSE(megatron_plan_flags(same).count("--expert-tensor-parallel-size")) << same;
  plan.etp = 1;
  const std::string one = export_plan(ExportFormat::megatron, context_for(plan, "Mixtral-8x7B", 32));
  EXPECT_EQ(megatron_flag(one, "--expert-tensor-parallel-size"), "1") << one;
  EXPECT_EQ(megatron_flag(one, "--expert-model-parallel-size"), "4") << one;
}

// ---- DeepSpeed HSDP: ZeRO++ hpZ, never the removed MiCS keys ----

TEST(ExportKeys, DeepSpeedHsdpUsesHpz) {
  const auto doc = nlohmann::json::parse(
      export_plan(ExportFormat::deepspeed, context_for(make_plan(4, 8, 1, 1, 1, 1, 2), "Llama-3.1-8B", 32)));
  EXPECT_EQ(doc.at("zero_optimization").at("stage"), 3);
  EXPECT_EQ(doc.at("zero_optimization").at("zero_hpz_partition_size"), 8);
  EXPECT_FALSE(doc.at("zero_optimization").contains("mics_shard_size"));
  EXPECT_TRUE(doc.contains("_comment_hsdp"));
}

// ---- DeepSpeed ZeRO-3: the limits the estimate's buffer bound assumed ----

TEST(ExportKeys, DeepSpeedZero3WritesTheAssumedLimits) {
  const auto doc = nlohmann::json::parse(
      export_plan(ExportFormat::deepspeed, context_for(make_plan(1, 32, 1, 1, 1, 1, 1), "Llama-3.1-8B", 32)));
  const auto& zero = doc.at("zero_optimization");
  EXPECT_EQ(zero.at("stage"), 3);
  const auto limits = mgt::cost::framework_profile("deepspeed").zero3_submodule_limits;
  ASSERT_TRUE(limits.has_value());
  EXPECT_EQ(zero.at("stage3_max_live_parameters").get<int64_t>(), limits->max_live_parameters);
  EXPECT_EQ(zero.at("stage3_max_reuse_distance").get<int64_t>(), limits->max_reuse_distance);
  EXPECT_EQ(zero.at("stage3_prefetch_bucket_size").get<int64_t>(), limits->prefetch_bucket_size);
  EXPECT_EQ(zero.at("stage3_param_persistence_threshold").get<int64_t>(), limits->param_persistence_threshold);
  EXPECT_EQ(zero.at("reduce_bucket_size").get<int64_t>(), limits->reduce_bucket_size);
  // DeepSpeedZeroConfig's documented defaults (runtime/zero/config.py), but for the reuse distance,
  // which the profile sets to 0 (release after every use); the bound also needs the IPG bucket
  // (contiguous_gradients) and the reduce beside backward (overlap_comm).
  EXPECT_EQ(zero.at("stage3_max_live_parameters").get<int64_t>(), 1000000000);
  EXPECT_EQ(zero.at("stage3_prefetch_bucket_size").get<int64_t>(), 50000000);
  EXPECT_EQ(zero.at("stage3_param_persistence_threshold").get<int64_t>(), 100000);
  EXPECT_EQ(zero.at("reduce_bucket_size").get<int64_t>(), 500000000);
  EXPECT_EQ(zero.at("stage3_max_reuse_distance").get<int64_t>(), 0);
  EXPECT_TRUE(zero.at("contiguous_gradients").get<bool>());
  EXPECT_TRUE(zero.at("overlap_comm").get<bool>());
  // ZeRO-2 has no per-submodule gathering: none of the stage-3 keys.
  Plan zero2 = make_plan(1, 32, 1, 1, 1, 1, 1);
  zero2.zero_stage = 2;
  const auto doc2 = nlohmann::json::parse(export_plan(ExportFormat::deepspeed, context_for(zero2, "Llama-3.1-8B", 32)));
  EXPECT_FALSE(doc2.at("zero_optimization").contains("stage3_max_live_parameters"));
}

// ---- Axolotl CP needs flash attention ----

TEST(ExportKeys, AxolotlContextParallelSetsFlashAttention) {
  const std::string text =
      export_plan(ExportFormat::axolotl, context_for(make_plan(1, 4, 1, 2, 1, 1, 2), "Llama-3.1-8B", 32));
  EXPECT_NE(text.find("\nattn_implementation: flash_attention_2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ring-flash-attn"), std::string::npos) << text;
  const std::string no_cp =
      export_plan(ExportFormat::axolotl, context_for(make_plan(1, 8, 1, 1, 1, 1, 2), "Llama-3.1-8B", 32));
  EXPECT_EQ(no_cp.find("\nattn_implementation:"), std::string::npos) << no_cp;
}

// ---- LoRA / QLoRA: Axolotl's adapter keys; every other format refuses ----

TEST(ExportKeys, AxolotlLoraAndQloraKeys) {
  ExportContext c = context_for(make_plan(1, 8, 1, 1, 1, 1, 2), "Llama-3.1-8B", 32);
  c.task = mgt::ir::Task::qlora;
  c.lora.rank = 32;
  c.lora.alpha = 64;
  c.lora.targets = {"q", "v"};
  const std::string text = export_plan(ExportFormat::axolotl, c);
  check_names(ExportFormat::axolotl, text, "axolotl qlora");
  for (const char* line : {"\nadapter: qlora\n", "\nload_in_4bit: true\n", "\nlora_r: 32\n", "\nlora_alpha: 64\n",
                           "\nlora_target_modules:\n  - q_proj\n  - v_proj\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  c.task = mgt::ir::Task::lora;
  const std::string lora = export_plan(ExportFormat::axolotl, c);
  EXPECT_NE(lora.find("\nadapter: lora\n"), std::string::npos) << lora;
  EXPECT_EQ(lora.find("load_in_4bit"), std::string::npos) << lora;
  for (ExportFormat other : {ExportFormat::accelerate, ExportFormat::torchtitan, ExportFormat::megatron,
                             ExportFormat::deepspeed, ExportFormat::torchtitan_0_2}) {
    const auto refusal = export_refusal(other, c);
    ASSERT_TRUE(refusal.has_value()) << mgt::plan::export_format_names()[size_t(other)];
    EXPECT_EQ(refusal->field, "task");
    EXPECT_NE(refusal->problem.find("cannot express lora"), std::string::npos) << refusal->problem;
  }
}

// ---- Accelerate: batch and sequence for the training script ----

TEST(ExportKeys, AccelerateNamesBatchForTheScript) {
  // dp_shard 8, micro 2, ga 4: global batch 2 * 4 * 8 = 64 sequences.
  const std::string text =
      export_plan(ExportFormat::accelerate, context_for(make_plan(1, 8, 1, 1, 1, 2, 4), "Llama-3.1-8B", 32, 4096));
  EXPECT_NE(text.find("# in train.py: per-GPU micro-batch 2 sequences of 4096 tokens, "
                      "Accelerator(gradient_accumulation_steps=4), global batch 64\n"),
            std::string::npos)
      << text;
}

// ---- Megatron: the script runs as written ----

std::string run_command(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  pclose(pipe);
  return output;
}

TEST(ExportKeys, MegatronScriptRunsTorchrunWithThePlan) {
  if (std::system("command -v bash >/dev/null 2>&1") != 0) GTEST_SKIP() << "no bash";
  // tp 2, cp 2, pp 2 on 16 GPUs (2 nodes), distributed optimizer: TP/CP need CUDA_DEVICE_MAX_CONNECTIONS=1.
  Plan plan = make_plan(1, 2, 2, 2, 2, 1, 8, Recompute::selective);
  plan.zero_stage = 1;
  const std::string script = export_plan(ExportFormat::megatron, context_for(plan, "Llama-3.1-8B", 32));
  const std::string dir = testing::TempDir() + "mgt_megatron_script";
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  std::ofstream(dir + "/plan.sh") << script;
  // A stand-in torchrun that prints the environment variable and its arguments, one per line.
  std::ofstream(dir + "/torchrun") << "#!/usr/bin/env bash\necho \"CDMC=${CUDA_DEVICE_MAX_CONNECTIONS:-unset}\"\n"
                                      "for a in \"$@\"; do echo \"$a\"; done\n";
  std::system(("chmod +x '" + dir + "/torchrun'").c_str());
  const std::string out = run_command("cd '" + dir + "' && PATH=\"" + dir + ":$PATH\" MEGATRON=/m NODE_RANK=1 bash plan.sh "
                                      "--hidden-size 4096 2>&1");
  const std::vector<std::string> args = lines_of(out);
  ASSERT_GT(args.size(), 20u) << out;
  EXPECT_EQ(args[0], "CDMC=1");
  const std::vector<std::string> head{"--nproc_per_node", "8", "--nnodes", "2", "--node_rank", "1"};
  for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(args[1 + i], head[i]) << out;
  EXPECT_NE(out.find("\n/m/pretrain_gpt.py\n--tensor-model-parallel-size\n2\n--pipeline-model-parallel-size\n2\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(args[args.size() - 2], "--hidden-size");
  EXPECT_EQ(args.back(), "4096");
  // Without model flags the script refuses rather than launching a half-configured job.
  EXPECT_NE(run_command("cd '" + dir + "' && PATH=\"" + dir + ":$PATH\" MEGATRON=/m bash plan.sh 2>&1").find("usage:"),
            std::string::npos);
}

TEST(ExportKeys, MegatronFsdpUnsetsDeviceMaxConnections) {
  // zero_stage 3 (dp_shard > 1) with tp: Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS != 1.
  const std::string text =
      export_plan(ExportFormat::megatron, context_for(make_plan(1, 4, 2, 1, 1, 1, 2), "Llama-3.1-8B", 32));
  EXPECT_NE(text.find("\nunset CUDA_DEVICE_MAX_CONNECTIONS\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("export CUDA_DEVICE_MAX_CONNECTIONS=1"), std::string::npos) << text;
}

// ---- can_express and versions ----

TEST(ExportKeys, CanExpressGivesTheExportersReason) {
  const ExportContext pipeline = context_for(make_plan(1, 2, 1, 1, 4, 1, 4), "Llama-3.1-8B", 32);
  std::string reason;
  EXPECT_FALSE(mgt::plan::can_express(ExportFormat::accelerate, pipeline, &reason));
  EXPECT_NE(reason.find("field 'pp'"), std::string::npos) << reason;
  EXPECT_TRUE(mgt::plan::can_express(ExportFormat::megatron, pipeline, &reason)) << reason;
  EXPECT_TRUE(reason.empty());
  EXPECT_TRUE(mgt::plan::can_express(ExportFormat::torchtitan, pipeline));
  // Partial recompute: only Megatron's block method has it.
  Plan partial = make_plan(1, 8, 1, 1, 1, 1, 2, Recompute::full);
  partial.recompute_layers = 2;
  const ExportContext c = context_for(partial, "Llama-3.1-8B", 32);
  EXPECT_FALSE(mgt::plan::can_express(ExportFormat::torchtitan, c, &reason));
  EXPECT_NE(reason.find("recompute_layers"), std::string::npos) << reason;
  const std::string text = export_plan(ExportFormat::megatron, c);
  EXPECT_NE(text.find("\n  --recompute-method block\n  --recompute-num-layers 2\n"), std::string::npos) << text;
}

TEST(ExportKeys, EveryFormatNamesItsVersions) {
  for (const ExportFormat format : all_formats()) EXPECT_FALSE(mgt::plan::export_versions(format).empty());
  EXPECT_NE(mgt::plan::export_versions(ExportFormat::torchtitan).find("0.3"), std::string::npos);
  EXPECT_NE(mgt::plan::export_versions(ExportFormat::torchtitan_0_2).find("0.2"), std::string::npos);
}

}  // namespace
