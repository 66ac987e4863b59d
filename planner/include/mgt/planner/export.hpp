// Exporters: the chosen plan as the config of the framework a user already runs (Accelerate,
// Axolotl, torchtitan, Megatron-LM, DeepSpeed). Each is a pure function plan -> text.
#pragma once

#include "mgt/ir/graph.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/ir/training_settings.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgt::plan {

/// `torchtitan` is the current release's Python config module; `torchtitan_0_2` is the TOML that
/// only torchtitan 0.2.x reads (`--emit torchtitan@0.2`).
enum class ExportFormat { accelerate, axolotl, torchtitan, megatron, deepspeed, torchtitan_0_2 };
/// "accelerate", "axolotl", "torchtitan", "megatron", "deepspeed", "torchtitan@0.2"
const std::vector<std::string>& export_format_names();
/// Throws ir::InputError naming `--emit` and listing the formats when unknown.
ExportFormat export_format_from_string(const std::string& name);

/// The framework versions an export was checked against (docs/exports.md), e.g. "torchtitan 0.3.x".
const std::string& export_versions(ExportFormat format);

/// What an exporter needs besides the plan. `plan.grad_accum` must be set (resolved).
struct ExportContext {
  ir::Plan plan;
  std::string model_path;          ///< the model file the user gave (config.json path)
  std::string model_name;          ///< e.g. "Llama-3.1-8B"
  int64_t num_gpus = 1;
  int64_t gpus_per_node = 8;
  int64_t seq_len = 0;
  int64_t global_batch_seqs = 0;   ///< sequences per optimizer step
  /// Transformer layers; 0 = unknown. Pipeline splits (Megatron, torchtitan) need it.
  int64_t num_layers = 0;
  ir::Task task = ir::Task::pretrain;  ///< lora / qlora: only Axolotl expresses adapters (others refuse)
  ir::LoraSettings lora{};
  /// Empty for a causal language model; else what the model is instead (non_causal_model_of), which
  /// the formats that only train causal language models refuse, naming it.
  std::string non_causal_model{};
  /// Multi-token prediction depths (ir::mtp_depths): Megatron's layout puts them on the last chunk.
  int64_t mtp_depths = 0;
  /// Routed experts and latent attention (ir::ModelInfo): which of Megatron's --recompute-modules
  /// apply (moe_act needs experts, mla_up_proj multi-latent attention; Megatron refuses them otherwise).
  int64_t num_experts = 0;
  bool has_mla = false;
  /// Bytes per gradient element the plan was priced with (cost::CostParams::gradient_bytes): 2 when
  /// the framework reduces in bf16 (nemo, megatron-bridge), which --emit megatron writes.
  int64_t gradient_bytes = 4;
  /// The plan was priced with Megatron-Core's EP A2A overlap (the megatron-core profile's
  /// "ep-a2a-overlap" feature), which --emit megatron writes where Megatron accepts it.
  bool ep_a2a_overlap = false;
};

/// "" when `graph` is a causal language model (every attention causal, a loss); else a short
/// description naming its architecture: "CLIPModel (bidirectional attention: ...)".
std::string non_causal_model_of(const ir::Graph& graph);

/// The config text (YAML, a Python module, TOML, JSON or a bash launch script), with a comment header
/// naming mgt and the plan. Throws ir::InputError when the framework cannot express the plan (e.g.
/// Accelerate with pp > 1), naming the plan key, why, and the fix.
std::string export_plan(ExportFormat format, const ExportContext& context);

/// Why a framework cannot express a plan: the plan key, the problem and the fix, as export_plan
/// throws them (ir::InputError source "--emit <format>").
struct ExportRefusal {
  std::string field;
  std::string problem;
  std::string hint;
};

/// The format's refusal rules alone (planner/src/export_refusal.cpp, which the exporters call too):
/// nullopt when `format` can express `context.plan` on these sizes. Cheap (integer compares; text
/// only for a refusal), so a search can ask it of every candidate. It does not check what the
/// exporters check for every format (grad_accum set, the mesh fills num_gpus, the batch adds up).
std::optional<ExportRefusal> export_refusal(ExportFormat format, const ExportContext& context);

/// Whether `format` can express `context.plan`; when not, `*reason` (if given) is the one-line
/// reason export_plan would throw. Same rules as export_plan (it runs the exporter), so a search
/// can keep only the plans a framework runs; about the cost of writing the text.
bool can_express(ExportFormat format, const ExportContext& context, std::string* reason = nullptr);

}  // namespace mgt::plan
