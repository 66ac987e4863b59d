// What the user trains, independent of how it is split: sequence length, global batch, precision and
// task (pretraining, full fine-tuning, LoRA, QLoRA). Every library reads it (rules, estimator,
// lowering, simulator, CLI), so it lives in ir.
#pragma once

#include "mgt/ir/graph.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mgt::ir {

/// What is trained. `sft` updates every weight as pretraining does, so it costs the same (only the data
/// differs). `lora` freezes the base weights in bf16 and trains low-rank adapters (Hu et al. 2021);
/// `qlora` also stores the frozen base in 4-bit NF4 with double-quantised scales (Dettmers et al. 2023).
enum class Task { pretrain, sft, lora, qlora };
std::string to_string(Task task);
std::optional<Task> task_from_string(std::string_view text);

/// The format the GEMMs of linear layers run in (the rest stays in the compute dtype). `fp8`: per-tensor
/// scaled E4M3/E5M2 (Transformer Engine DelayedScaling or Float8CurrentScaling: same cost); `mxfp8`:
/// E4M3 with one E8M0 scale per 32 elements (Blackwell); `nvfp4`: E2M1 with one E4M3 scale per 16
/// elements and an fp32 tensor scale (Blackwell).
enum class LinearFormat { none, fp8, mxfp8, nvfp4 };
std::string to_string(LinearFormat format);

/// LoRA adapters: W x + (alpha / r) B A x with A (r x d_in), B (d_out x r) on every contraction whose op
/// is `<target>_proj` (or `<target>`) for a target in `targets`: PEFT's target_modules, HF names.
struct LoraSettings {
  int64_t rank = 16;
  int64_t alpha = 32;  ///< only exported (scales the update; costs nothing)
  std::vector<std::string> targets = {"q", "k", "v", "o", "gate", "up", "down"};
  bool operator==(const LoraSettings&) const = default;
};

/// Sequence length, global batch and precision (bf16 compute, fp32 master weights and AdamW states,
/// as torchtitan, Accelerate FSDP2 and Megatron-LM do by default).
struct TrainingSettings {
  int64_t seq_len = 8192;
  int64_t global_batch_tokens = 4ll << 20;
  /// Packed training (sequence packing, e.g. fine-tuning on short examples): every sequence holds
  /// documents of this many tokens back to back; attention stays within a document and positions
  /// restart at each (a block-diagonal causal mask, as Megatron-Core's THD / cu_seqlens and
  /// FlashAttention's varlen kernels run it). 0 = one document per sequence.
  int64_t document_tokens = 0;
  DType compute_dtype = DType::bf16;  ///< bf16 or f16 (mixed precision, fp32 master weights)
  bool fp8_linears = false;           ///< GEMMs of linear layers in `linear_format` (not none), the rest as compute_dtype
  LinearFormat linear_format = LinearFormat::none;  ///< fp8 when only fp8_linears is set (older callers)
  Task task = Task::pretrain;
  LoraSettings lora;                  ///< read when task is lora or qlora
  /// The framework places pipeline layers by compute (nanotron), not by Megatron's rules
  /// (ir::PipelineSplit::Rule::compute_balanced); set from the framework profile.
  bool pipeline_balanced_by_compute = false;
  /// Under a pipeline the framework gathers FSDP parameters once per step and reduce-scatters
  /// gradients once (torchtitan: reshard_after_forward = not pp, and torch.distributed.pipelining
  /// syncs gradients only in the last backward), so a ZeRO-2 or ZeRO-3 plan with pp > 1 runs as
  /// ZeRO-1 over the same shard group (ir::Layout::zero_stage); set from the framework profile.
  bool fsdp_gathers_once_under_pipeline = false;
  int64_t global_batch_seqs() const { return global_batch_tokens / seq_len; }
  /// True when the base weights are frozen (no gradients or optimizer states): LoRA and QLoRA.
  bool frozen_base() const { return task == Task::lora || task == Task::qlora; }
  /// The linear-layer GEMM format in effect (fp8_linears alone means per-tensor fp8).
  LinearFormat linear_gemm_format() const {
    return linear_format != LinearFormat::none ? linear_format : (fp8_linears ? LinearFormat::fp8 : LinearFormat::none);
  }
};

}  // namespace mgt::ir
