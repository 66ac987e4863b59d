// Kernel-level validation: rows of ../shared/validation/kernels/*.json against the kernel model
// (docs/cost-model.md "Kernel model"; the row schema is that folder's README.md).
#include "mgt/planner/validate_kernels.hpp"

#include "mgt/cost_model/kernel_model.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/format.hpp"
#include "mgt/ir/input_limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

namespace mgt::plan {

namespace {

using nlohmann::json;

/// A row that cannot be compared; what() is the reason.
struct Skip {
  std::string reason;
};

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool has(const std::string& haystack, const std::string& needle) { return lower(haystack).find(lower(needle)) != std::string::npos; }

std::string str(const json& obj, const std::string& key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : "";
}
std::optional<double> num(const json& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return std::nullopt;
  return obj[key].get<double>();
}
int64_t int_or(const json& obj, const std::string& key, int64_t fallback) {
  const auto v = num(obj, key);
  return v && *v > 0 ? int64_t(std::llround(*v)) : fallback;
}

// ------------------------------------------------------------------------------------------------
// GPUs: the presets describe these parts; anything else is skipped (docs/cost-model.md lists why).

struct GpuMatch {
  ir::ClusterSpec cluster;
  std::string assumption;  ///< non-empty when the row's name is less specific than the preset
};

GpuMatch match_gpu(const std::string& gpu, bool needs_links) {
  // A kernel row states no peaks, clocks or links of its own: the preset must be the part itself,
  // so variants it does not describe are skipped before the shared name lookup.
  if (has(gpu, "amd")) throw Skip{"not an NVIDIA GPU (no preset)"};
  if (has(gpu, "pcie") || has(gpu, "nvl)") || gpu == "H200-NVL")
    throw Skip{"GPU variant not in the presets (PCIe / NVL cards run lower clocks and power than the SXM preset)"};
  if (has(gpu, "500w")) throw Skip{"power-capped part (500 W): the presets describe the 700 W SXM clocks"};
  if (has(gpu, "gh200")) throw Skip{"GPU not in the presets (" + gpu + ")"};
  if (has(gpu, "a800")) throw Skip{"GPU not in the presets (A800: A100 with 400 GB/s NVLink)"};
  if (has(gpu, "h800") && needs_links) throw Skip{"GPU not in the presets for links (H800: 400 GB/s NVLink)"};
  const std::optional<ir::GpuPresetMatch> match = ir::preset_for_gpu_name(gpu);
  // Only H800 of the parts priced as another is the same die at the same clocks and peaks.
  if (!match || (!match->assumption.empty() && !has(gpu, "h800"))) throw Skip{"GPU not in the presets (" + gpu + ")"};
  GpuMatch m{ir::cluster_preset(match->preset), match->assumption};
  // Where the row's name is less specific than the preset, say which variant prices it.
  if (m.assumption.empty()) {
    if (match->preset == "b200" && has(gpu, "inferred")) m.assumption = "GPU inferred by the source as B200";
    if (match->preset == "h200-sxm" && has(gpu, "not stated")) m.assumption = "H200 variant not stated: SXM";
    if (match->preset == "a100-80g-sxm" && !has(gpu, "sxm4-80gb")) m.assumption = "A100 variant not stated: SXM4 80GB";
    if (match->preset == "h100-sxm" && !has(gpu, "H100-SXM5-80GB")) m.assumption = "GPU \"" + gpu + "\" priced as H100 SXM5";
  }
  return m;
}

std::optional<ir::DType> dtype_of(const std::string& text) {
  const std::string t = lower(text);
  if (t.find("fp8") != std::string::npos || t.find("e4m3") != std::string::npos) return ir::DType::fp8;
  if (t.find("bf16") != std::string::npos || t.find("bfloat16") != std::string::npos) return ir::DType::bf16;
  if (t.find("fp16") != std::string::npos || t.find("float16") != std::string::npos || t.find("half") != std::string::npos)
    return ir::DType::f16;
  return std::nullopt;
}

std::string fmt(const char* format, double v) { return ir::format_number(format, v); }

KernelComparison base(const json& row, const std::string& category) {
  KernelComparison c;
  c.id = str(row, "id");
  c.category = category;
  c.gpu = str(row, "gpu");
  return c;
}

void compare(KernelComparison& c, double predicted, double measured) {
  c.predicted = predicted;
  c.measured = measured;
  c.error = predicted / measured - 1.0;
}

// ------------------------------------------------------------------------------------------------
// GEMM

/// The library kernel's value: the first of these keys the row has.
constexpr const char* kGemmKeys[] = {"tflops", "tflops_cublas", "tflops_gemm_only", "tflops_torch_bf16"};

/// Transformer Engine's GEMM profiling rows time one shape under several recipes in autocast
/// (quantisation included): one comparison per recipe the row has.
struct LinearFormatKey {
  const char* key;
  ir::LinearFormat format;
  bool delayed_scaling;
};
constexpr LinearFormatKey kLinearFormatKeys[] = {
    {"tflops_bf16", ir::LinearFormat::none, false},
    {"tflops_fp8_delayed_scaling", ir::LinearFormat::fp8, true},
    {"tflops_fp8_current_scaling", ir::LinearFormat::fp8, false},
    {"tflops_mxfp8", ir::LinearFormat::mxfp8, false},
    {"tflops_nvfp4", ir::LinearFormat::nvfp4, false},
};

std::vector<KernelComparison> linear_format_rows(const json& row, const json& shape, const json& measured) {
  std::vector<KernelComparison> out;
  cost::GemmShape s;
  s.m = int_or(shape, "M", 0);
  s.n = int_or(shape, "N", 0);
  s.k = int_or(shape, "K", 0);
  for (const auto& f : kLinearFormatKeys) {
    if (!measured.contains(f.key)) continue;
    KernelComparison c = base(row, "gemm");
    c.metric = f.key;
    try {
      const auto value = num(measured, f.key);
      if (!value || *value <= 0) throw Skip{std::string("measured.") + f.key + " is null"};
      if (s.m <= 0 || s.n <= 0 || s.k <= 0) throw Skip{"shape M, N, K not stated"};
      const GpuMatch gpu = match_gpu(c.gpu, false);
      if (!gpu.assumption.empty()) c.assumptions.push_back(gpu.assumption);
      const auto params = cost::kernel_model_params(gpu.cluster.gpu);
      double t = 0;
      try {
        t = cost::linear_gemm_kernel_time_s(gpu.cluster.gpu, s, f.format, f.delayed_scaling, params);
      } catch (const ir::InputError& e) {
        throw Skip{e.what()};
      }
      compare(c, 2.0 * double(s.m) * double(s.n) * double(s.k) / t / 1e12, *value);
      c.detail = ir::to_string(f.format) + (f.delayed_scaling ? " (delayed scaling)" : "") + ", quantisation included";
    } catch (const Skip& skip) {
      c.skipped = skip.reason;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<KernelComparison> gemm_rows(const json& row) {
  KernelComparison c = base(row, "gemm");
  try {
    const json& shape = row.value("shape", json::object());
    const json& measured = row.value("measured", json::object());
    if (measured.contains("tflops_mxfp8") || measured.contains("tflops_nvfp4")) return linear_format_rows(row, shape, measured);
    std::string key;
    for (const char* k : kGemmKeys)
      if (measured.contains(k)) {
        key = k;
        break;
      }
    if (key.empty()) {
      const bool max_only = measured.contains("tflops_max_over_sizes");
      throw Skip{max_only ? "max over sizes only (shape of the max not stated)"
                          : "no single-library TFLOP/s key (tile or variant comparison, or Triton tutorial kernels only)"};
    }
    c.metric = key;
    const auto value = num(measured, key);
    if (!value || *value <= 0) throw Skip{"measured." + key + " is null"};
    cost::GemmShape s;
    s.m = int_or(shape, "M", int_or(shape, "M_per_group", 0));
    s.n = int_or(shape, "N", 0);
    s.k = int_or(shape, "K", 0);
    s.batch = int_or(shape, "batch", int_or(shape, "groups", 1));
    if (s.m <= 0 || s.n <= 0 || s.k <= 0) throw Skip{"shape M, N, K not stated"};
    const json& cond = row.value("conditions", json::object());
    auto dtype = key.find("bf16") != std::string::npos ? std::optional(ir::DType::bf16) : dtype_of(str(cond, "dtype"));
    if (!dtype) throw Skip{"dtype not stated"};
    const GpuMatch gpu = match_gpu(c.gpu, false);
    if (!gpu.assumption.empty()) c.assumptions.push_back(gpu.assumption);
    if (*dtype == ir::DType::fp8 && gpu.cluster.gpu.peak_fp8_flops_per_s <= 0) throw Skip{"fp8 on a GPU without fp8"};
    const auto params = cost::kernel_model_params(gpu.cluster.gpu);
    const auto t = cost::gemm_kernel_time(gpu.cluster.gpu, s, *dtype, params);
    const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k) * double(s.batch);
    compare(c, flops / t.time_s / 1e12, *value);
    c.detail = "tile " + std::to_string(t.tile.m) + "x" + std::to_string(t.tile.n) + " split-k " + std::to_string(t.split_k) +
               ", " + std::to_string(t.tiles) + " tiles in " + std::to_string(t.waves) + " waves (" +
               fmt("%.0f", t.wave_efficiency * 100) + " % of the last)" + (t.memory_bound ? ", memory-bound" : "");
  } catch (const Skip& s) {
    c.skipped = s.reason;
  }
  return {c};
}

// ------------------------------------------------------------------------------------------------
// Attention

struct AttentionKey {
  const char* key;
  std::optional<cost::AttentionKernel> kernel;  ///< nullopt: from conditions.library
  bool backward;
  std::optional<ir::DType> dtype;  ///< nullopt: from conditions.dtype
};

const std::vector<AttentionKey>& attention_keys() {
  using K = cost::AttentionKernel;
  static const std::vector<AttentionKey> keys = {
      {"fwd_tflops", std::nullopt, false, std::nullopt},
      {"bwd_tflops", std::nullopt, true, std::nullopt},
      {"bwd_2cta_tflops", std::nullopt, true, std::nullopt},
      {"fa2_fwd_tflops", K::flash_attention_2, false, std::nullopt},
      {"fa2_bwd_tflops", K::flash_attention_2, true, std::nullopt},
      {"fa3_fwd_tflops", K::flash_attention_3, false, std::nullopt},
      {"fa3_bwd_tflops", K::flash_attention_3, true, std::nullopt},
      {"flash_v3_tflops", K::flash_attention_3, false, std::nullopt},
      {"cudnn_90100_tflops", K::cudnn, false, std::nullopt},
      {"cudnn_bf16_fwd_tflops", K::cudnn, false, ir::DType::bf16},
      {"cudnn_bf16_bwd_tflops", K::cudnn, true, ir::DType::bf16},
      {"cudnn_fp8_fwd_tflops", K::cudnn, false, ir::DType::fp8},
      {"cudnn_fp8_bwd_tflops", K::cudnn, true, ir::DType::fp8},
      {"pytorch_sdpa_fwd_tflops", K::torch_sdpa, false, std::nullopt},
      {"pytorch_sdpa_bwd_tflops", K::torch_sdpa, true, std::nullopt},
      {"sdpa_tflops", K::torch_sdpa, false, std::nullopt},
      {"triton_tutorial_flash_v2_tflops", K::triton, false, std::nullopt},
      {"colfax_cutlass_tflops", K::cutlass, false, std::nullopt},
  };
  return keys;
}

std::optional<cost::AttentionKernel> kernel_of_library(const std::string& library) {
  if (has(library, "cudnn")) return cost::AttentionKernel::cudnn;
  if (has(library, "flashattention-4") || has(library, "flash-attn-4")) return cost::AttentionKernel::flash_attention_4;
  if (has(library, "flash-attn 2") || has(library, "flashattention-2")) return cost::AttentionKernel::flash_attention_2;
  return std::nullopt;
}

/// The row's shape; fields it does not state get the defaults of the benchmark scripts, recorded.
cost::AttentionShape attention_shape(const json& p, std::vector<std::string>& assumptions) {
  cost::AttentionShape s;
  const int64_t seq = int_or(p, "seqlen", 0);
  s.seq_q = int_or(p, "seqlen_q", seq);
  s.seq_kv = int_or(p, "seqlen_kv", seq);
  if (s.seq_q <= 0 || s.seq_kv <= 0) throw Skip{"sequence length not stated"};
  s.batch = int_or(p, "batch", 0);
  if (s.batch <= 0) {
    s.batch = std::max<int64_t>(1, 16384 / s.seq_q);
    assumptions.push_back("batch not stated: 16k tokens (flash-attention benchmark default)");
  }
  s.heads_q = int_or(p, "num_q_heads", int_or(p, "num_heads", 0));
  const int64_t d = int_or(p, "head_dim", 0);
  s.head_dim_qk = int_or(p, "head_dim_qk", d);
  s.head_dim_vo = int_or(p, "head_dim_vo", d);
  if (s.head_dim_qk <= 0 || s.head_dim_vo <= 0) throw Skip{"head dim not stated"};
  if (s.heads_q <= 0) {
    s.heads_q = std::max<int64_t>(1, 2048 / s.head_dim_qk);
    assumptions.push_back("heads not stated: 2048 / head_dim (flash-attention benchmark default)");
  }
  s.heads_kv = int_or(p, "num_kv_heads", s.heads_q);
  if (p.contains("causal") && p["causal"].is_boolean()) {
    s.causal = p["causal"].get<bool>();
  } else {
    assumptions.push_back("causal not stated: non-causal (operator default)");
  }
  s.window = int_or(p, "sliding_window", 0);
  return s;
}

/// FLOPs as the row's source counts them: exact non-masked elements (cuDNN script) or the dense
/// count halved for causal (flash-attention scripts; also assumed when the row does not say).
double convention_flops(const cost::AttentionShape& s, bool backward, const json& cond, std::vector<std::string>& assumptions) {
  const std::string convention = str(cond, "flop_convention");
  if (has(convention, "non-masked")) return cost::attention_flops(s, backward);
  if (convention.empty()) assumptions.push_back("FLOP convention not stated: 4*b*s^2*h*d, halved when causal, bwd 2.5x");
  const double dense = 4.0 * double(s.batch) * double(s.seq_q) * double(s.seq_kv) * double(s.heads_q) * double(s.head_dim_qk);
  return dense * (s.causal ? 0.5 : 1.0) * (backward ? 2.5 : 1.0);
}

std::vector<KernelComparison> attention_rows(const json& row) {
  std::vector<KernelComparison> out;
  const json& measured = row.value("measured", json::object());
  const json& cond = row.value("conditions", json::object());
  const json& params = row.value("params", json::object());
  for (const auto& k : attention_keys()) {
    if (!measured.contains(k.key)) continue;
    KernelComparison c = base(row, "attention");
    c.metric = k.key;
    try {
      const auto value = num(measured, k.key);
      if (!value || *value <= 0) throw Skip{std::string("measured.") + k.key + " is null"};
      const auto kernel = k.kernel ? k.kernel : kernel_of_library(str(cond, "library"));
      if (!kernel) throw Skip{"attention library not recognised (\"" + str(cond, "library") + "\")"};
      auto dtype = k.dtype ? k.dtype : dtype_of(str(cond, "dtype"));
      if (!dtype) {
        dtype = ir::DType::bf16;
        c.assumptions.push_back("dtype not stated: bf16");
      }
      const cost::AttentionShape s = attention_shape(params, c.assumptions);
      const GpuMatch gpu = match_gpu(c.gpu, false);
      if (!gpu.assumption.empty()) c.assumptions.push_back(gpu.assumption);
      if (cost::attention_peak_fraction(*kernel, gpu.cluster.gpu.arch, k.backward, *dtype) <= 0)
        throw Skip{to_string(*kernel) + " has no fitted efficiency on " + ir::to_string(gpu.cluster.gpu.arch)};
      const auto p = cost::kernel_model_params(gpu.cluster.gpu);
      const double t = cost::attention_kernel_time_s(gpu.cluster.gpu, *kernel, s, k.backward, *dtype, p);
      compare(c, convention_flops(s, k.backward, cond, c.assumptions) / t / 1e12, *value);
      c.detail = to_string(*kernel) + (k.backward ? " bwd" : " fwd") + " " + ir::to_string(*dtype);
    } catch (const Skip& s) {
      c.skipped = s.reason;
    }
    out.push_back(std::move(c));
  }
  if (out.empty()) {
    KernelComparison c = base(row, "attention");
    c.skipped = "no kernel TFLOP/s key (summary figure or in-step number)";
    out.push_back(std::move(c));
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// Collectives

std::optional<cost::CollectiveKind> collective_of(const std::string& name) {
  if (name == "all_reduce") return cost::CollectiveKind::all_reduce;
  if (name == "all_gather") return cost::CollectiveKind::all_gather;
  if (name == "reduce_scatter") return cost::CollectiveKind::reduce_scatter;
  if (name == "alltoall" || name == "all_to_all") return cost::CollectiveKind::all_to_all;
  return std::nullopt;
}

/// The algorithm a row pins (NCCL_NVLS_ENABLE, "algorithm"); automatic otherwise.
cost::CollectiveAlgorithm pinned_algorithm(const json& cond) {
  const std::string algorithm = str(cond, "algorithm"), tool = str(cond, "tool");
  if (has(tool, "NCCL_NVLS_ENABLE=0") || lower(algorithm) == "ring") return cost::CollectiveAlgorithm::ring;
  if (has(tool, "NCCL_NVLS_ENABLE=1") || lower(algorithm) == "nvls") return cost::CollectiveAlgorithm::nvls;
  return cost::CollectiveAlgorithm::automatic;
}

std::vector<KernelComparison> collective_rows(const json& row) {
  const json& measured = row.value("measured", json::object());
  const json& cond = row.value("conditions", json::object());
  const json& p = row.value("params", json::object());
  const std::pair<const char*, std::optional<cost::CollectiveAlgorithm>> keys[] = {
      {"busbw_GBps", std::nullopt}, {"oop_busbw_GBps", std::nullopt},
      {"busbw_GBps_default", cost::CollectiveAlgorithm::automatic}, {"busbw_GBps_nvls_off", cost::CollectiveAlgorithm::ring}};
  std::vector<KernelComparison> out;
  for (const auto& [key, algorithm] : keys) {
    if (!measured.contains(key)) continue;
    if (std::string(key) == "oop_busbw_GBps" && measured.contains("busbw_GBps")) continue;
    KernelComparison c = base(row, "collectives");
    c.metric = key;
    try {
      const auto value = num(measured, key);
      if (!value || *value <= 0) throw Skip{std::string("measured.") + key + " is null"};
      const auto kind = collective_of(str(p, "collective"));
      if (!kind) throw Skip{"collective \"" + str(p, "collective") + "\" not modelled"};
      const int64_t n = int_or(p, "num_gpus", 0);
      if (n <= 1) throw Skip{"number of GPUs not stated"};
      int64_t bytes = int_or(p, "message_bytes", 0);
      if (bytes <= 0 && num(p, "message_size_MB_as_published")) {
        bytes = int64_t(std::llround(*num(p, "message_size_MB_as_published") * 1048576.0));
        c.assumptions.push_back("size in MB read as MiB (nccl-tests -b NM)");
      }
      if (bytes <= 0) throw Skip{"message size not stated"};
      const GpuMatch gpu = match_gpu(c.gpu, true);
      if (!gpu.assumption.empty()) c.assumptions.push_back(gpu.assumption);
      const int64_t domain = std::max<int64_t>(1, gpu.cluster.nvlink_domain_gpus);
      const int64_t nodes = int_or(p, "num_nodes", 0);
      const int64_t domains = int_or(p, "racks", nodes > 0 && domain <= gpu.cluster.gpus_per_node ? nodes : (n + domain - 1) / domain);
      const auto a = algorithm ? *algorithm : pinned_algorithm(cond);
      const auto params = cost::kernel_model_params(gpu.cluster.gpu);
      const auto t = cost::collective_kernel_time(gpu.cluster, *kind, n, domains, bytes, a, params);
      if (t.time_s <= 0) throw Skip{"no algorithm applies"};
      compare(c, t.bus_bytes_per_s / 1e9, *value);
      c.detail = to_string(*kind) + " n=" + std::to_string(n) + " domains=" + std::to_string(domains) + " " +
                 std::to_string(bytes) + " B, " + to_string(t.algorithm) + ", " + fmt("%.1f", t.time_s * 1e6) + " us";
    } catch (const Skip& s) {
      c.skipped = s.reason;
    }
    out.push_back(std::move(c));
  }
  if (out.empty()) {
    KernelComparison c = base(row, "collectives");
    c.skipped = "no sized busbw measurement (summary figure, range or point-to-point test)";
    out.push_back(std::move(c));
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// Memory and launch

std::vector<KernelComparison> memory_rows(const json& row) {
  KernelComparison c = base(row, "memory_launch");
  const json& measured = row.value("measured", json::object());
  const json& p = row.value("params", json::object());
  const std::string kind = str(p, "kind");
  try {
    if (has(kind, "device-to-device")) {
      c.metric = "bandwidth_GBps";
      const auto value = num(measured, "bandwidth_GBps");
      const auto bytes = num(p, "transfer_bytes");
      if (!value || !bytes) throw Skip{"bandwidth or size not stated"};
      const GpuMatch gpu = match_gpu(c.gpu, false);
      const auto params = cost::kernel_model_params(gpu.cluster.gpu);
      // bandwidthTest counts a device-to-device copy twice (read + write): 2 x bytes / time.
      const double t = cost::memory_kernel_time_s(gpu.cluster.gpu, 2.0 * *bytes, /*read_only=*/false, params);
      compare(c, 2.0 * *bytes / t / 1e9, *value);
      c.detail = "copy of " + fmt("%.0f", *bytes) + " B";
    } else if (num(measured, "read_bandwidth_TBps")) {
      c.metric = "read_bandwidth_TBps";
      const GpuMatch gpu = match_gpu(c.gpu, false);
      const auto params = cost::kernel_model_params(gpu.cluster.gpu);
      compare(c, gpu.cluster.gpu.hbm_bytes_per_s * params.hbm_fraction / 1e12, *num(measured, "read_bandwidth_TBps"));
      c.detail = "streaming read at the achievable fraction";
    } else if (has(kind, "host")) {
      throw Skip{"host link (PCIe) transfer or host-side launch overhead: not a device kernel the model prices"};
    } else if (has(kind, "method not shown")) {
      throw Skip{"study voided by its authors"};
    } else {
      throw Skip{"end-to-end step or latency comparison, not one kernel"};
    }
  } catch (const Skip& s) {
    c.skipped = s.reason;
  }
  return {c};
}

}  // namespace

// ------------------------------------------------------------------------------------------------

bool is_kernel_validation_doc(const json& doc) {
  return doc.is_object() && doc.contains("category") && doc["category"].is_string() && doc.contains("rows");
}

bool is_kernel_validation_file(const std::string& path) {
  // Anything but a regular file (a directory, a FIFO) goes to the row-file reader, whose error names it.
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  // Over the input limit: not sniffed here; the row-file reader's error names the file and the limit.
  if (std::filesystem::file_size(path, error) > uint64_t(ir::max_input_bytes()) || error) return false;
  std::ifstream in(path);
  if (!in) return false;
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return is_kernel_validation_doc(doc);
}

KernelValidation validate_kernel_doc(const json& doc, const std::string& path) {
  if (!is_kernel_validation_doc(doc) || !doc["rows"].is_array())
    throw ir::InputError(path, "category", "not a kernel validation file", "expected {\"category\", \"rows\": [...]}");
  KernelValidation v;
  v.path = path;
  v.category = doc["category"].get<std::string>();
  for (size_t i = 0; i < doc["rows"].size(); ++i) {
    const json& row = doc["rows"][i];
    if (!row.is_object()) {
      KernelComparison c;
      c.id = "rows[" + std::to_string(i) + "]";
      c.category = v.category;
      c.skipped = "row is not an object";
      v.rows.push_back(std::move(c));
      continue;
    }
    std::vector<KernelComparison> got;
    if (v.category == "gemm") got = gemm_rows(row);
    else if (v.category == "attention") got = attention_rows(row);
    else if (v.category == "collectives") got = collective_rows(row);
    else if (v.category == "memory_launch") got = memory_rows(row);
    else {
      KernelComparison c = base(row, v.category);
      c.skipped = "category \"" + v.category + "\" not modelled";
      got = {c};
    }
    for (auto& c : got) v.rows.push_back(std::move(c));
  }
  return v;
}

KernelValidation validate_kernel_file(const std::string& path) { return validate_kernel_doc(ir::read_json_file(path), path); }

KernelErrorStats kernel_error_stats(const std::vector<const KernelComparison*>& rows) {
  std::vector<double> errors;
  for (const auto* r : rows)
    if (r->error) errors.push_back(std::fabs(*r->error) * 100.0);
  KernelErrorStats s;
  s.count = int(errors.size());
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  s.median_abs_pct = n % 2 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
  s.p90_abs_pct = errors[std::min(n - 1, size_t(std::ceil(0.9 * double(n))) - 1)];
  return s;
}

namespace {

std::string stats_text(const std::string& label, const KernelErrorStats& s, int skipped) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-36s n=%-4d median |error| %5.1f %%  p90 %6.1f %%  skipped %d\n", label.c_str(), s.count,
                s.median_abs_pct, s.p90_abs_pct, skipped);
  return buf;
}

std::string row_text(const KernelComparison& r) {
  if (!r.error) return "  " + r.id + "  " + r.metric + "  skipped: " + r.skipped + "\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "  predicted %9.4g  measured %9.4g  error %+7.1f %%", *r.predicted, *r.measured, *r.error * 100);
  std::string out = "  " + r.id + "  " + r.metric + buf + "  (" + r.detail + ")\n";
  for (const auto& a : r.assumptions) out += "      assumed: " + a + "\n";
  return out;
}

}  // namespace

std::string format_kernel_validation(const std::vector<KernelValidation>& files) {
  std::string out;
  for (const auto& f : files) {
    out += f.path + " (kernel category " + f.category + ")\n";
    for (const auto& r : f.rows) out += row_text(r);
    out += "\n";
  }
  // Summaries per category, pooled and per GPU, with skip reasons.
  std::map<std::string, std::vector<const KernelComparison*>> by_category;
  for (const auto& f : files)
    for (const auto& r : f.rows) by_category[r.category].push_back(&r);
  out += "kernel validation summary\n";
  for (const auto& [category, rows] : by_category) {
    int skipped = 0;
    std::map<std::string, std::vector<const KernelComparison*>> by_gpu;
    std::map<std::string, int> reasons;
    for (const auto* r : rows) {
      if (!r->error) {
        ++skipped;
        ++reasons[r->skipped];
      } else {
        by_gpu[r->gpu].push_back(r);
      }
    }
    out += stats_text(category + " (pooled)", kernel_error_stats(rows), skipped);
    for (const auto& [gpu, gpu_rows] : by_gpu) out += stats_text("  " + gpu, kernel_error_stats(gpu_rows), 0);
    for (const auto& [reason, n] : reasons) out += "      skipped " + std::to_string(n) + ": " + reason + "\n";
  }
  return out;
}

nlohmann::json to_json(const KernelValidation& file) {
  json rows = json::array();
  for (const auto& r : file.rows) {
    json j = {{"id", r.id}, {"category", r.category}, {"gpu", r.gpu}, {"metric", r.metric}};
    if (r.error) {
      j["predicted"] = *r.predicted;
      j["measured"] = *r.measured;
      j["error"] = *r.error;
      j["detail"] = r.detail;
    } else {
      j["skipped"] = r.skipped;
    }
    if (!r.assumptions.empty()) j["assumptions"] = r.assumptions;
    rows.push_back(std::move(j));
  }
  return {{"path", file.path}, {"category", file.category}, {"rows", std::move(rows)}};
}

}  // namespace mgt::plan
