// What the training task and the linear-layer format change in the cost of a weight: bytes per
// element of a frozen base weight (LoRA bf16, QLoRA NF4 with double-quantised scales), the
// dequantisation traffic of QLoRA, which contractions carry LoRA adapters, and the tensor-core peak a
// linear layer's GEMM runs at (fp8, MXFP8, NVFP4). The estimator and block_cost read these numbers
// from here, so that every place that multiplies by bytes per parameter agrees (docs/cost-model.md §4.1).
#pragma once

#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/training_settings.hpp"

#include <cstdint>
#include <string>

namespace mgt::cost {

/// QLoRA (Dettmers et al. 2023, §3 "4-bit NormalFloat" and "Double Quantization"): 4-bit NF4 codes, one
/// fp8 absmax per block of 64 weights (8/64 bits per weight) and, for those, one fp32 second-level
/// scale per block of 256 first-level scales (32/(64*256) bits): 4 + 0.127 bits per weight, 0.5 + 0.127/8 B.
inline constexpr double kNf4CodeBits = 4.0;
inline constexpr double kNf4DoubleQuantBits = 8.0 / 64.0 + 32.0 / (64.0 * 256.0);  // 0.126953125
inline constexpr double kNf4BytesPerElement = (kNf4CodeBits + kNf4DoubleQuantBits) / 8.0;
/// Frozen weights kept in bf16 (LoRA's base, and under QLoRA what bitsandbytes leaves unquantised).
inline constexpr double kFrozenBf16BytesPerElement = 2.0;
/// QLoRA dequantises each NF4 weight before each GEMM that reads it (forward, and backward for the input
/// gradient): a memory-bound kernel reading 0.5 B of codes and writing the 2 B bf16 weight per element.
inline constexpr double kDequantBytesPerElement = 0.5 + 2.0;

/// Bytes one rank holds for `elements` frozen base weights of which `nf4_elements` are NF4-stored.
double frozen_base_bytes(int64_t elements, int64_t nf4_elements);

/// Returns true when the contraction op named `op_name` carries a LoRA adapter: its name is
/// "<target>_proj" or "<target>" for a target of `lora` (PEFT's target_modules, HF module names).
bool is_lora_target(const std::string& op_name, const ir::LoraSettings& lora);

/// Dense tensor-core peak the GEMM of a linear layer runs at under `format` (none: `compute`). MXFP8 runs
/// at the fp8 peak, NVFP4 at the fp4 peak (Blackwell datasheets). Throws ir::InputError naming the GPU
/// when it has no such peak.
double linear_gemm_peak_flops_per_s(const ir::GpuSpec& gpu, ir::LinearFormat format, ir::DType compute);

/// The rate the kernel model runs a linear layer's GEMM at under `format`: `compute`'s peak for none,
/// else min(the format's peak, the fp8 peak x LinearFormatCost::gemm_rate_over_fp8). Throws as
/// linear_gemm_peak_flops_per_s for a format the GPU has no peak for.
double linear_gemm_rate_flops_per_s(const ir::GpuSpec& gpu, ir::LinearFormat format, ir::DType compute);

/// What running a linear layer in a low-precision format costs beyond its GEMM at the fp8 rate
/// (Transformer Engine's autocast; docs/cost-model.md §5 and §8). Fitted to kernel rows only: the four
/// shapes of `te_gemmprof_b300_*` (kernels/gemm.json, TransformerEngine's GEMM profiling tutorial on
/// B300, quantisation included), each value the median over the shapes against the same machine's fp8
/// delayed-scaling GEMM (whose 4 B per element is counted: read 2 B, write the fp8 rowwise and
/// transposed copies 1 + 1 B; the rows give 3.8):
///   * `gemm_rate_over_fp8`: the GEMM's rate as a multiple of the fp8 kernel model at the fp8 peak,
///     never above the format's own datasheet peak (linear_gemm_rate_flops_per_s). fp8 and MXFP8 1
///     (block-scaled fp8 MMA runs at the fp8 rate: with the rate free, the MXFP8 rows fit 0.97); NVFP4
///     1.47 (0.96-1.89 over the shapes; bounds [1, fp4 peak / fp8 peak]). Expressed against the fp8
///     rate, not as a share of the fp4 peak: B300's fp4 peak is 3x its fp8 peak, B200's and GB200's
///     2x, and a share of the peak fitted on B300 (0.49) would give GB200 NVFP4 GEMMs no gain over fp8
///     (0.98x) where the kernels run the same block-scaled MMA pipeline on both parts.
///   * `quantize_bytes_per_element`: HBM traffic of quantising one bf16 operand for both GEMM layouts.
///     fp8 current scaling 8 (rows 6.3-10.1, median 8.2; bounds [6, 10]: an amax pass before the
///     cast-transpose alone is 6); MXFP8 7 (6.7-7.8; bounds [4.06, 8]: one fused pass writing both
///     layouts and two E8M0 scales per 32 elements is 4.06); NVFP4 5.125, counted (an amax pass 2 + read
///     2 + two fp4 copies 0.5 + 0.5 + two E4M3 scales per 16 elements).
///   * `saved_input_bytes_per_element`: the quantised input one layout keeps for the weight-gradient
///     GEMM where the framework saves that instead of the bf16 input (CostParams::
///     linears_save_quantized_input), by the formats' definitions: fp8 1; MXFP8 1 + one E8M0 scale per
///     32 elements; NVFP4 0.5 + one E4M3 scale per 16.
struct LinearFormatCost {
  double gemm_rate_over_fp8 = 1.0;
  double quantize_bytes_per_element = 0.0;
  double saved_input_bytes_per_element = 0.0;
};
/// The costs of `format`; `delayed_scaling` selects fp8's delayed recipe (no amax pass), which only
/// the kernel rows state: training estimates take fp8 as per-tensor current scaling (Megatron-Bridge's
/// fp8_cs, torchtitan's tensorwise float8).
LinearFormatCost linear_format_cost(ir::LinearFormat format, bool delayed_scaling = false);

/// The --precision names `gpu` supports ("bf16, fp16, fp8, ..."), for refusals.
std::string supported_precisions(const ir::GpuSpec& gpu);

}  // namespace mgt::cost
