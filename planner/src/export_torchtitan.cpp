// torchtitan exporters: the current release (0.3.x) reads a Python config function chosen with
// --module/--config; 0.2.x read a TOML job config. Field names: torchtitan/config/configs.py
// (TrainingConfig, ParallelismConfig), torchtitan/trainer.py (Trainer.Config), and
// torchtitan/distributed/activation_checkpoint.py (FullAC, SelectiveAC), as docs/exports.md cites.
#include "export_common.hpp"

#include "mgt/ir/error.hpp"

#include <sstream>
#include <string>
#include <utility>

namespace mgt::plan::detail {

namespace {

using ir::InputError;
using ir::Plan;
using ir::Recompute;

/// The value of torchtitan's [activation_checkpoint] mode; spelled here because it must match
/// torchtitan's Literal["selective", "full", "none"] exactly.
const char* torchtitan_ac_mode(Recompute recompute) {
  switch (recompute) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "none";
}

}  // namespace

// torchtitan 0.2.x: a TOML fragment for --job.config_file. local_batch_size is per data-parallel
// rank; torchtitan derives gradient accumulation as global_batch_size / (local_batch_size * dp).
std::string export_torchtitan_0_2(const ExportContext& context) {
  Resolved r = resolve(context, "torchtitan@0.2");
  const Plan& p = r.plan;
  check_expressible(r, ExportFormat::torchtitan_0_2);
  const int64_t stage = ir::zero_stage(p);

  // With pp > 1 one step's micro-batches go through the pipeline schedule, so the per-rank batch
  // is micro_batch * grad_accum split into pipeline micro-batches; without pp, torchtitan loops.
  const int64_t local_batch = p.pp > 1 ? p.micro_batch * r.grad_accum : p.micro_batch;
  std::ostringstream out;
  out << "# " << header_line(context) << "\n";
  out << "# for " << export_versions(ExportFormat::torchtitan_0_2) << "; torchtitan 0.3 reads Python: --emit torchtitan\n";
  out << "# usage: merge into your torchtitan job config; NGPU=" << context.num_gpus
      << " CONFIG_FILE=<this file> ./run_train.sh\n";
  out << "# torchtitan rule: replicate * shard * cp * tp * pp = " << p.dp_replicate << "*" << p.dp_shard << "*"
      << p.cp << "*" << p.tp << "*" << p.pp << " = " << context.num_gpus << " GPUs\n";
  out << "[training]\n";
  out << "local_batch_size = " << local_batch << "\n";
  out << "global_batch_size = " << r.global_batch << "\n";
  out << "seq_len = " << context.seq_len << "\n";
  out << "mixed_precision_param = \"bfloat16\"\n";
  out << "\n[parallelism]\n";
  out << "data_parallel_replicate_degree = " << p.dp_replicate << "\n";
  out << "data_parallel_shard_degree = " << p.dp_shard << "\n";
  if (p.dp_shard > 1) out << "fsdp_reshard_after_forward = \"" << (stage >= 3 ? "default" : "never") << "\"\n";
  out << "tensor_parallel_degree = " << p.tp << "\n";
  out << "enable_async_tensor_parallel = false\n";
  out << "context_parallel_degree = " << p.cp << "\n";
  out << "pipeline_parallel_degree = " << p.pp << "\n";
  if (p.pp > 1) {
    out << "pipeline_parallel_schedule = \"1F1B\"\n";
    out << "pipeline_parallel_microbatch_size = " << p.micro_batch << "\n";
  }
  if (p.ep > 1) out << "expert_parallel_degree = " << p.ep << "\n";
  out << "\n[activation_checkpoint]\n";
  out << "mode = \"" << torchtitan_ac_mode(p.recompute) << "\"\n";
  // 0.2's selective default is "2", every second layer fully checkpointed; "op" is the op-level
  // policy that the torchtitan profile prices (cost::SelectiveRecompute::every_second_matmul).
  if (p.recompute == Recompute::selective) out << "selective_ac_option = \"op\"\n";
  return out.str();
}


namespace {

/// torchtitan's own config function for a model mgt knows by name; empty when torchtitan ships none.
std::pair<std::string, std::string> torchtitan_base(const std::string& model_name) {
  static const std::pair<const char*, std::pair<const char*, const char*>> known[] = {
      {"Llama-3.1-8B", {"torchtitan.models.llama3.config_registry", "llama3_8b"}},
      {"Llama-3.1-70B", {"torchtitan.models.llama3.config_registry", "llama3_70b"}},
      {"Llama-3.1-405B", {"torchtitan.models.llama3.config_registry", "llama3_405b"}},
      {"Qwen3-30B-A3B", {"torchtitan.models.qwen3.config_registry", "qwen3_30b_a3b"}},
      {"Qwen3-32B", {"torchtitan.models.qwen3.config_registry", "qwen3_32b"}},
      {"DeepSeek-V3", {"torchtitan.models.deepseek_v3.config_registry", "deepseek_v3_671b"}},
  };
  for (const auto& [name, base] : known)
    if (model_name == name) return {base.first, base.second};
  return {"", ""};
}

std::string py_bool(bool value) { return value ? "True" : "False"; }

/// The body of apply_plan(config): the plan's fields set on torchtitan's Trainer.Config.
void write_apply_plan(std::ostream& out, const Resolved& r) {
  const Plan& p = r.plan;
  // With pp > 1 one step's micro-batches go through the pipeline schedule, so the per-rank batch is
  // micro_batch * grad_accum split into pipeline micro-batches; without pp, torchtitan loops.
  const int64_t local_batch = p.pp > 1 ? p.micro_batch * r.grad_accum : p.micro_batch;
  out << "def apply_plan(config):\n";
  out << "    \"\"\"Sets the plan's fields on a torchtitan Trainer.Config and returns it.\"\"\"\n";
  out << "    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n\n";
  out << "    training = config.training\n";
  out << "    training.local_batch_size = " << local_batch << "  # per data-parallel rank\n";
  out << "    training.global_batch_size = " << r.global_batch << "  # grad accumulation = global / (local * "
      << r.dp_sequences << ")\n";
  out << "    training.seq_len = " << r.context.seq_len << "\n";
  out << "    training.mixed_precision_param = \"bfloat16\"\n";
  // Trainer.Config rejects CUDA graphs with pipelines and with most expert-parallel dispatchers.
  if (p.pp > 1 || p.ep > 1) out << "    training.disable_cuda_graphs = True\n";
  out << "\n    parallelism = config.parallelism\n";
  out << "    parallelism.data_parallel_replicate_degree = " << p.dp_replicate << "\n";
  out << "    parallelism.data_parallel_shard_degree = " << p.dp_shard << "\n";
  // "default" keeps parameters gathered after forward under pp; ZeRO-3 needs "always".
  if (p.dp_shard > 1)
    out << "    parallelism.fsdp_reshard_after_forward = \"" << (ir::zero_stage(p) >= 3 ? "always" : "never") << "\"\n";
  out << "    parallelism.tensor_parallel_degree = " << p.tp << "\n";
  if (p.tp > 1) out << "    parallelism.enable_sequence_parallel = " << py_bool(ir::sequence_parallel(p)) << "\n";
  out << "    parallelism.context_parallel_degree = " << p.cp << "\n";
  out << "    parallelism.pipeline_parallel_degree = " << p.pp << "\n";
  if (p.pp > 1) {
    const ir::PipelineSplit split = pipeline_split(r);
    // torchtitan counts the embedding and the output as (first/last)_stage_less_layers layers:
    // stages = ceil((layers + first + last) / layers_per_stage), the estimator's split.
    out << "    parallelism.pipeline_parallel_schedule = \"" << (p.vpp > 1 ? "Interleaved1F1B" : "1F1B") << "\"\n";
    out << "    parallelism.pipeline_parallel_microbatch_size = " << p.micro_batch << "\n";
    out << "    parallelism.pipeline_parallel_layers_per_stage = " << split.layers_per_chunk() << "\n";
    out << "    parallelism.pipeline_parallel_first_stage_less_layers = " << int(split.embedding_as_layer) << "\n";
    out << "    parallelism.pipeline_parallel_last_stage_less_layers = " << int(split.loss_as_layer) << "\n";
  }
  out << "    parallelism.expert_parallel_degree = " << p.ep << "\n";
  out << "\n    config.activation_checkpoint = "
      << (p.recompute == Recompute::full        ? "FullAC.Config()"
          : p.recompute == Recompute::selective ? "SelectiveAC.Config()"
                                                : "None")
      << "\n";
  out << "    return config\n";
}

}  // namespace

// torchtitan 0.3.x: a Python module with the config function `mgt_plan`, which takes torchtitan's own
// config for the model (model, data, optimizer) and sets the plan's batch and parallelism fields.
std::string export_torchtitan(const ExportContext& context) {
  Resolved r = resolve(context, "torchtitan");
  check_expressible(r, ExportFormat::torchtitan);
  const auto [base_module, base_config] = torchtitan_base(context.model_name);
  std::ostringstream out;
  out << "# " << header_line(context) << "\n";
  out << "# for " << export_versions(ExportFormat::torchtitan) << "; torchtitan 0.2.x reads TOML: --emit torchtitan@0.2\n";
  out << "# usage: save as mgt_plan.py; then, in your torchtitan checkout:\n";
  out << "#   PYTHONPATH=<folder of mgt_plan.py> NGPU=" << context.num_gpus
      << " MODULE=mgt_plan CONFIG=mgt_plan ./run_train.sh\n";
  out << "# or: torchrun --nproc_per_node <gpus per node> ... -m torchtitan.train --module mgt_plan --config mgt_plan\n";
  out << "# torchtitan rule: replicate * shard * cp * tp * pp = " << r.plan.dp_replicate << "*" << r.plan.dp_shard << "*"
      << r.plan.cp << "*" << r.plan.tp << "*" << r.plan.pp << " = " << context.num_gpus << " GPUs\n";
  out << "import importlib\nimport os\n\n";
  out << "# torchtitan's config for this model (model, tokenizer, data, optimizer); override with\n";
  out << "# MGT_TORCHTITAN_BASE=module:function to start from your own.\n";
  out << "BASE = os.environ.get(\"MGT_TORCHTITAN_BASE\", \""
      << (base_module.empty() ? "" : base_module + ":" + base_config) << "\")\n";
  if (base_config == "llama3_405b")
    out << "# note: torchtitan's llama3_405b trains its linears in float8 (needs SM89+) and compiles them; the\n"
           "# plan's memory and time are for the precision mgt-plan was given (--precision, default bf16)\n";
  out << "NUM_GPUS = " << context.num_gpus << "\n\n\n";
  write_apply_plan(out, r);
  out << "\n\ndef mgt_plan():\n";
  out << "    if not BASE:\n";
  out << "        raise ValueError(\"torchtitan ships no config for "
      << (context.model_name.empty() ? std::string("this model") : context.model_name)
      << "; set MGT_TORCHTITAN_BASE=module:function to a function returning its Trainer.Config\")\n";
  out << "    module, function = BASE.split(\":\")\n";
  out << "    return apply_plan(getattr(importlib.import_module(module), function)())\n";
  return out.str();
}

}  // namespace mgt::plan::detail
