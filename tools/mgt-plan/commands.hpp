// The subcommands of mgt-plan, each a function from parsed options to an exit status:
// 0 done, 1 no valid plan, 2 bad input (README.md "Use").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mgt::cli {

/// Options shared by the search (default command) and `estimate`.
struct PlanOptions {
  std::string model_path;
  int64_t gpus = 0;
  std::string cluster = "h100-sxm";
  std::optional<std::string> seq_len;              ///< unset = default (min(8192, max_position_embeddings))
  std::optional<std::string> global_batch_tokens;  ///< unset = default ~4M; K/M/G suffixes (powers of 2)
  std::optional<std::string> global_batch_seqs;    ///< --global-batch: the batch in sequences instead of tokens
  /// --document-tokens: packed documents of this many tokens per sequence (TrainingSettings::document_tokens)
  std::optional<std::string> document_tokens;
  /// bf16 | fp16 (mixed, fp32 master) | fp8 (fp8 linears, bf16 rest) | fp32; empty: fp32 on a CPU
  /// cluster (gpu.arch cpu), else bf16
  std::string precision;
  std::string task = "pretrain";  ///< pretrain | sft | lora | qlora (ir::Task)
  int64_t lora_rank = 16;
  std::string lora_targets = "q,k,v,o,gate,up,down";  ///< comma-separated HF projection names
  bool json = false;
  bool allow_cross_node_tp = false;
  /// --framework: the training software whose profile prices the plans (docs/cost-model.md §9);
  /// empty: --emit's framework, else none named (the default constants, every plan shape searched).
  std::string framework;
};

/// The framework an --emit format writes for: accelerate and axolotl run PyTorch FSDP, megatron
/// Megatron-Core, torchtitan and deepspeed themselves.
std::string framework_of_emit(const std::string& emit);

int run_search(const PlanOptions& options, int64_t top, const std::string& emit);
/// `estimate`; with `emit` (an --emit format name) it prints the given plan as that framework's config.
int run_estimate(const PlanOptions& options, const std::string& plan_text, const std::string& emit = "");
/// `simulate`: lower the plan to a Schedule, simulate it, print the step and memory breakdowns.
int run_simulate(const PlanOptions& options, const std::string& plan_text, const std::string& trace_path,
                 const std::string& svg_path);
/// `compile`: the Schedule ranks run, as mgt.schedule/1 JSON (or text) to `out_path` ("-" = stdout).
int run_compile(const PlanOptions& options, const std::string& plan_text, const std::string& out_path, bool text);
int run_inspect(const std::string& model_path, const std::optional<std::string>& seq_len, bool json);

/// "4M" -> 4194304, "8k" -> 8192, "1G" -> 1073741824, "100" -> 100 (binary suffixes, as
/// Megatron-style "4M tokens" batches are 512 x 8192). Throws ir::InputError naming `flag`.
int64_t parse_size(const std::string& text, const std::string& flag);

/// The most GPUs mgt plans for (2^20); larger counts are rejected rather than allocated for.
constexpr int64_t kMaxGpus = 1ll << 20;
/// `--gpus` text -> count in [1, kMaxGpus]; throws ir::InputError otherwise.
int64_t parse_gpu_count(const std::string& text);

}  // namespace mgt::cli
