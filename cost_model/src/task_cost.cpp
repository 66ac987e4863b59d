// Bytes and peaks per weight element by training task and linear-layer format (task_cost.hpp).
#include "mgt/cost_model/task_cost.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>

namespace mgt::cost {

double frozen_base_bytes(int64_t elements, int64_t nf4_elements) {
  return double(elements - nf4_elements) * kFrozenBf16BytesPerElement + double(nf4_elements) * kNf4BytesPerElement;
}

bool is_lora_target(const std::string& op_name, const ir::LoraSettings& lora) {
  for (const auto& target : lora.targets)
    if (op_name == target || op_name == target + "_proj") return true;
  return false;
}

double linear_gemm_peak_flops_per_s(const ir::GpuSpec& gpu, ir::LinearFormat format, ir::DType compute) {
  switch (format) {
    case ir::LinearFormat::none: return ir::peak_flops_per_s(gpu, compute);
    case ir::LinearFormat::fp8: return ir::peak_flops_per_s(gpu, ir::DType::fp8);
    case ir::LinearFormat::mxfp8:
      // MX block scaling is a Blackwell (5th-generation tensor core) instruction; Hopper has per-tensor fp8 only.
      if (gpu.arch == ir::GpuArch::blackwell && gpu.peak_fp8_flops_per_s > 0) return gpu.peak_fp8_flops_per_s;
      break;
    case ir::LinearFormat::nvfp4:
      if (gpu.arch == ir::GpuArch::blackwell && gpu.peak_fp4_flops_per_s > 0) return gpu.peak_fp4_flops_per_s;
      break;
  }
  throw ir::InputError("--precision", "", ir::to_string(format) + " needs Blackwell tensor cores; " + gpu.name +
                                              " supports " + supported_precisions(gpu),
                       "use one of those, or a Blackwell cluster (b200, b300, gb200-nvl72, gb300-nvl72)");
}

double linear_gemm_rate_flops_per_s(const ir::GpuSpec& gpu, ir::LinearFormat format, ir::DType compute) {
  const double peak = linear_gemm_peak_flops_per_s(gpu, format, compute);
  if (format == ir::LinearFormat::none) return peak;
  return std::min(peak, gpu.peak_fp8_flops_per_s * linear_format_cost(format).gemm_rate_over_fp8);
}

LinearFormatCost linear_format_cost(ir::LinearFormat format, bool delayed_scaling) {
  switch (format) {
    case ir::LinearFormat::none: return {1.0, 0.0, 0.0};
    case ir::LinearFormat::fp8: return {1.0, delayed_scaling ? 4.0 : 8.0, 1.0};
    case ir::LinearFormat::mxfp8: return {1.0, 7.0, 1.0 + 1.0 / 32.0};
    case ir::LinearFormat::nvfp4: return {1.47, 2.0 + 2.0 + 0.5 + 0.5 + 2.0 / 16.0, 0.5 + 1.0 / 16.0};
  }
  return {1.0, 0.0};
}

std::string supported_precisions(const ir::GpuSpec& gpu) {
  std::string out = gpu.peak_fp32_flops_per_s > 0 ? "fp32, " : "";
  out += "bf16, fp16";
  if (gpu.peak_fp8_flops_per_s > 0) out += ", fp8";
  if (gpu.arch == ir::GpuArch::blackwell && gpu.peak_fp8_flops_per_s > 0) out += ", mxfp8";
  if (gpu.arch == ir::GpuArch::blackwell && gpu.peak_fp4_flops_per_s > 0) out += ", nvfp4";
  return out;
}

}  // namespace mgt::cost
