// Exporters: the chosen plan as the config of the framework a user already runs (Accelerate,
// Axolotl, torchtitan, Megatron-LM, DeepSpeed). Each is a pure function plan -> text.
#pragma once

#include "mgt/ir/plan.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mgt::plan {

enum class ExportFormat { accelerate, axolotl, torchtitan, megatron, deepspeed };
const std::vector<std::string>& export_format_names();  ///< "accelerate", "axolotl", ...
/// Throws ir::InputError naming `--emit` and listing the formats when unknown.
ExportFormat export_format_from_string(const std::string& name);

/// What an exporter needs besides the plan. `plan.grad_accum` must be set (resolved).
struct ExportContext {
  ir::Plan plan;
  std::string model_path;          ///< the model file the user gave (config.json path)
  std::string model_name;          ///< e.g. "Llama-3.1-8B"
  int64_t num_gpus = 1;
  int64_t gpus_per_node = 8;
  int64_t seq_len = 0;
  int64_t global_batch_seqs = 0;   ///< sequences per optimizer step
};

/// The config text (YAML, TOML, JSON or a shell flag list), with a comment header naming mgt and the
/// plan. Throws ir::InputError when the framework cannot express the plan (e.g. Accelerate with
/// dp_replicate > 1 and tp > 1), naming the plan key and the fix.
std::string export_plan(ExportFormat format, const ExportContext& context);

}  // namespace mgt::plan
