// Embedded cluster presets (`--cluster NAME`). Every number is a vendor datasheet value, cited next
// to it and in ClusterSpec::source; docs/cluster.md tabulates them. Link rates are per GPU and per
// direction (NVIDIA quotes NVLink bidirectional: 900 GB/s on H100 = 450 GB/s each way).
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"

#include <cctype>
#include <string_view>

namespace mgt::ir {

namespace {

// Rates are written as literals (989.4e12, not 989.4 * 1e12) so that they print exactly in JSON.
constexpr int64_t kGiB = int64_t(1) << 30;

// Link constants shared by several presets.
// PCIe per direction, after 128b/130b encoding: 16 lanes x 16 GT/s x 128/130 / 8 = 31.5 GB/s (Gen4),
// x 32 GT/s = 63.0 GB/s (Gen5) (PCI-SIG base specifications 4.0 / 5.0).
constexpr double kPcieGen4BytesPerS = 31.5e9;
constexpr double kPcieGen5BytesPerS = 63.0e9;
// Per-step latencies. NCCL's own tuning table (src/graph/tuning.cc, hwLat, Ring algorithm) prices one
// ring step at ~0.5 (LL) / 1.9 (LL128) / 3.4 (Simple) us over NVLink, ~1-5.7 us over PCIe and
// ~2.7-14 us over the network. We take one mid value per link class, as the alpha of the
// alpha-beta model; a probe-measured collective_table overrides the whole model when present.
constexpr double kNvlinkLatencyS = 2.0e-6;
constexpr double kPcieLatencyS = 5.0e-6;
constexpr double kNetworkLatencyS = 6.0e-6;

/// DGX H100 (default). H100 SXM5 80GB datasheet: 989.4 TFLOPS BF16/FP16 dense (1978.9 sparse),
/// 1978.9 TFLOPS FP8 dense, 67 TFLOPS FP32, 80 GB HBM3 at 3.35 TB/s, NVLink4 900 GB/s bidirectional
/// (= 450 GB/s per direction) through 4 NVSwitch; host PCIe Gen5 x16. DGX H100 user guide: 8x
/// ConnectX-7 400 Gb/s InfiniBand NDR (= 50 GB/s per NIC per direction), one per GPU.
ClusterSpec make_h100_sxm() {
  ClusterSpec c;
  c.name = "h100-sxm";
  c.source =
      "NVIDIA H100 SXM5 80GB datasheet (989.4 TFLOPS bf16 dense, 1978.9 fp8 dense, 67 fp32, 80 GB HBM3 "
      "3.35 TB/s, NVLink4 900 GB/s bidir = 450 GB/s per direction, PCIe Gen5 x16 63 GB/s); DGX H100 "
      "(8 GPUs, 8x ConnectX-7 400 Gb/s NDR = 50 GB/s each); latencies from NCCL tuning.cc hwLat (assumed)";
  c.gpu = {.name = "H100-SXM5-80GB",
           .arch = GpuArch::hopper,
           .peak_bf16_flops_per_s = 989.4e12,
           .peak_fp16_flops_per_s = 989.4e12,
           .peak_fp8_flops_per_s = 1978.9e12,
           .peak_fp32_flops_per_s = 66.9e12,
           .hbm_bytes = 80 * kGiB,
           .hbm_bytes_per_s = 3.35e12};
  c.gpus_per_node = 8;
  c.nvlink_domain_gpus = 8;
  c.nvlink_bytes_per_s = 450e9;
  c.nvlink_latency_s = kNvlinkLatencyS;
  c.pcie_bytes_per_s = kPcieGen5BytesPerS;
  c.pcie_latency_s = kPcieLatencyS;
  c.nics_per_node = 8;
  c.nic_bytes_per_s = 50e9;
  c.network_latency_s = kNetworkLatencyS;
  return c;
}

/// DGX A100 80GB. A100 SXM4 80GB datasheet: 312 TFLOPS BF16/FP16 dense, no FP8, 19.5 TFLOPS FP32
/// (156 TF32 tensor), 80 GB HBM2e at 2.039 TB/s, NVLink3 600 GB/s bidirectional (300 per direction)
/// through 6 NVSwitch; host PCIe Gen4 x16. DGX A100: 8x ConnectX-6 HDR 200 Gb/s (25 GB/s each) for
/// compute traffic (Narayanan et al. 2021, Selene).
ClusterSpec make_a100_80g_sxm() {
  ClusterSpec c;
  c.name = "a100-80g-sxm";
  c.source =
      "NVIDIA A100 SXM4 80GB datasheet (312 TFLOPS bf16 dense, no fp8, 19.5 fp32, 80 GB HBM2e 2.039 TB/s, "
      "NVLink3 600 GB/s bidir = 300 GB/s per direction, PCIe Gen4 x16 31.5 GB/s); DGX A100 (8 GPUs, "
      "8x ConnectX-6 HDR 200 Gb/s = 25 GB/s each); latencies from NCCL tuning.cc hwLat (assumed)";
  c.gpu = {.name = "A100-SXM4-80GB",
           .arch = GpuArch::ampere,
           .peak_bf16_flops_per_s = 312e12,
           .peak_fp16_flops_per_s = 312e12,
           .peak_fp8_flops_per_s = 0,
           .peak_fp32_flops_per_s = 19.5e12,
           .hbm_bytes = 80 * kGiB,
           .hbm_bytes_per_s = 2.039e12};
  c.gpus_per_node = 8;
  c.nvlink_domain_gpus = 8;
  c.nvlink_bytes_per_s = 300e9;
  c.nvlink_latency_s = kNvlinkLatencyS;
  c.pcie_bytes_per_s = kPcieGen4BytesPerS;
  c.pcie_latency_s = kPcieLatencyS;
  c.nics_per_node = 8;
  c.nic_bytes_per_s = 25e9;
  c.network_latency_s = kNetworkLatencyS;
  return c;
}

/// HGX/DGX H200. H200 SXM datasheet: 141 GB HBM3e at 4.8 TB/s; compute, NVLink4 and node layout as
/// H100 SXM (989.4 TFLOPS BF16 dense, 1978.9 FP8 dense, 900 GB/s bidirectional NVLink).
ClusterSpec make_h200_sxm() {
  ClusterSpec c = make_h100_sxm();
  c.name = "h200-sxm";
  c.source =
      "NVIDIA H200 SXM datasheet (141 GB HBM3e 4.8 TB/s; 989.4 TFLOPS bf16 dense, 1978.9 fp8 dense, "
      "NVLink4 900 GB/s bidir = 450 GB/s per direction, as H100); HGX H200 8 GPUs, 8x ConnectX-7 "
      "400 Gb/s = 50 GB/s each; latencies from NCCL tuning.cc hwLat (assumed)";
  c.gpu.name = "H200-SXM-141GB";
  c.gpu.hbm_bytes = 141 * kGiB;
  c.gpu.hbm_bytes_per_s = 4.8e12;
  return c;
}

/// HGX/DGX B200. HGX B200 datasheet divided by 8 GPUs, dense = sparse / 2: 2.25 PFLOPS BF16/FP16,
/// 4.5 PFLOPS FP8, 9 PFLOPS FP4 (72 dense per 8 GPUs), 75 TFLOPS FP32 (600 per 8 GPUs); DGX B200 lists 1,440 GB HBM3e (= 180 GB usable
/// per GPU) at 8 TB/s; NVLink5 1.8 TB/s bidirectional (900 GB/s per direction); host PCIe Gen5;
/// 8x ConnectX-7 400 Gb/s (50 GB/s each).
ClusterSpec make_b200() {
  ClusterSpec c;
  c.name = "b200";
  c.source =
      "NVIDIA HGX/DGX B200 datasheet, per GPU = system / 8, dense = sparse / 2 (2250 TFLOPS bf16, 4500 fp8, 9000 fp4, "
      "75 fp32, 180 GB usable HBM3e 8 TB/s, NVLink5 1800 GB/s bidir = 900 GB/s per direction); 8x "
      "ConnectX-7 400 Gb/s = 50 GB/s each, PCIe Gen5 63 GB/s; latencies from NCCL tuning.cc hwLat (assumed)";
  c.gpu = {.name = "B200",
           .arch = GpuArch::blackwell,
           .peak_bf16_flops_per_s = 2250e12,
           .peak_fp16_flops_per_s = 2250e12,
           .peak_fp8_flops_per_s = 4500e12,
           .peak_fp4_flops_per_s = 9000e12,
           .peak_fp32_flops_per_s = 75e12,
           .hbm_bytes = 180 * kGiB,
           .hbm_bytes_per_s = 8e12};
  c.gpus_per_node = 8;
  c.nvlink_domain_gpus = 8;
  c.nvlink_bytes_per_s = 900e9;
  c.nvlink_latency_s = kNvlinkLatencyS;
  c.pcie_bytes_per_s = kPcieGen5BytesPerS;
  c.pcie_latency_s = kPcieLatencyS;
  c.nics_per_node = 8;
  c.nic_bytes_per_s = 50e9;
  c.network_latency_s = kNetworkLatencyS;
  return c;
}

/// GB200 NVL72 rack. GB200 NVL72 datasheet, rack totals / 72, dense = sparse / 2: 2.5 PFLOPS
/// BF16/FP16, 5 PFLOPS FP8, 10 PFLOPS FP4, 80 TFLOPS FP32 (5,760 per rack), 13.4 TB HBM3e (186 GB per GPU) at
/// 8 TB/s, NVLink5 1.8 TB/s bidirectional per GPU with all 72 GPUs in one NVLink Switch domain. A
/// compute tray (our "node") holds 4 GPUs + 2 Grace CPUs and, per DGX GB200 (72 single-port
/// ConnectX-7 400 Gb/s per rack), 4 NICs of 50 GB/s; NICs attach over PCIe Gen5.
ClusterSpec make_gb200_nvl72() {
  // The B200 node with the rack's differences: its bf16/fp16/fp8/fp4/fp32 peaks, 186 GB HBM, and 4-GPU
  // compute trays with 4 NICs inside one 72-GPU NVLink domain.
  ClusterSpec c = make_b200();
  c.name = "gb200-nvl72";
  c.source =
      "NVIDIA GB200 NVL72 datasheet, per GPU = rack / 72, dense = sparse / 2 (2500 TFLOPS bf16, 5000 fp8, 10000 fp4, "
      "80 fp32, 186 GB HBM3e 8 TB/s, NVLink5 1800 GB/s bidir = 900 GB/s per direction, 72-GPU NVLink "
      "domain); compute tray = 4 GPUs with 4x ConnectX-7 400 Gb/s = 50 GB/s each (DGX GB200: 72 per rack), "
      "PCIe Gen5 63 GB/s; latencies from NCCL tuning.cc hwLat (assumed)";
  c.gpu.name = "GB200";
  c.gpu.peak_bf16_flops_per_s = 2500e12;
  c.gpu.peak_fp16_flops_per_s = 2500e12;
  c.gpu.peak_fp8_flops_per_s = 5000e12;
  c.gpu.peak_fp4_flops_per_s = 10000e12;
  c.gpu.peak_fp32_flops_per_s = 80e12;
  c.gpu.hbm_bytes = 186 * kGiB;
  c.gpus_per_node = 4;
  c.nvlink_domain_gpus = 72;
  c.nics_per_node = 4;
  return c;
}

/// HGX/DGX B300 (Blackwell Ultra). HGX B300 datasheet divided by 8 GPUs: FP16/BF16 36 PFLOPS and
/// FP8/FP6 72 PFLOPS with sparsity (dense = half: 2.25 and 4.5 per GPU), FP4 108 PFLOPS dense (13.5 per
/// GPU; 144 sparse), FP32 600 TFLOPS (75 per GPU); 2.3 TB HBM3e (288 GB per GPU) at 8 TB/s per GPU;
/// NVLink5 1.8 TB/s bidirectional (900 GB/s per direction) in an 8-GPU NVLink domain; 8x ConnectX-8
/// SuperNIC 800 Gb/s (100 GB/s each); host PCIe Gen5 assumed as B200 (the GPU's Gen6 needs a Gen6 host).
// Blackwell Ultra doubles the SFU's MUFU.EX2 rate over Blackwell's 16 per clock per SM (NVIDIA
// technical blog "Making Softmax More Efficient with NVIDIA Blackwell Ultra": about 2x MUFU.EX2
// throughput on GB300 against GB200, ~35 % more FP8 attention forward throughput on DeepSeek-V3).
constexpr double kBlackwellUltraExp2PerClockPerSm = 32;

ClusterSpec make_b300() {
  // The B200 node with Blackwell Ultra's differences: fp4 peak, HBM size and ConnectX-8 NICs.
  ClusterSpec c = make_b200();
  c.name = "b300";
  c.source =
      "NVIDIA HGX/DGX B300 datasheet, per GPU = system / 8, dense = sparse / 2 except fp4 (stated dense: 108 "
      "PFLOPS per 8 GPUs) (2250 TFLOPS bf16, 4500 fp8, 13500 fp4, 75 fp32, 288 GB HBM3e 8 TB/s, NVLink5 1800 "
      "GB/s bidir = 900 GB/s per direction); 8x ConnectX-8 800 Gb/s = 100 GB/s each, PCIe Gen5 63 GB/s "
      "(assumed); latencies from NCCL tuning.cc hwLat (assumed)";
  c.gpu.name = "B300";
  c.gpu.peak_fp4_flops_per_s = 13500e12;
  c.gpu.sfu_exp2_per_clock_per_sm = kBlackwellUltraExp2PerClockPerSm;
  c.gpu.hbm_bytes = 288 * kGiB;
  c.nic_bytes_per_s = 100e9;
  return c;
}

/// GB300 NVL72 rack (Blackwell Ultra). GB300 NVL72 datasheet, rack totals / 72: FP16/BF16 360 PFLOPS and
/// FP8/FP6 720 PFLOPS with sparsity (dense 2.5 and 5 per GPU), FP4 1,080 PFLOPS dense (15 per GPU;
/// 1,440 sparse); up to 20 TB HBM3e at 576 TB/s (288 GB at 8 TB/s per GPU); NVLink5 130 TB/s per rack
/// (1.8 TB/s bidirectional per GPU) with all 72 GPUs in one NVLink Switch domain; 72 ConnectX-8 800 Gb/s
/// SuperNICs (4 per compute tray of 4 GPUs, 100 GB/s each). FP32 taken as GB200's 80 TFLOPS per GPU.
ClusterSpec make_gb300_nvl72() {
  // The GB200 NVL72 rack with Blackwell Ultra's differences: fp4 peak, HBM size and ConnectX-8 NICs.
  ClusterSpec c = make_gb200_nvl72();
  c.name = "gb300-nvl72";
  c.source =
      "NVIDIA GB300 NVL72 datasheet, per GPU = rack / 72, dense = sparse / 2 except fp4 (stated dense: 1080 "
      "PFLOPS per rack) (2500 TFLOPS bf16, 5000 fp8, 15000 fp4, 288 GB HBM3e 8 TB/s, NVLink5 1800 GB/s bidir = "
      "900 GB/s per direction, 72-GPU NVLink domain); fp32 80 TFLOPS as GB200 (assumed); compute tray = 4 GPUs "
      "with 4x ConnectX-8 800 Gb/s = 100 GB/s each (72 per rack), PCIe Gen5 63 GB/s; latencies from NCCL "
      "tuning.cc hwLat (assumed)";
  c.gpu.name = "GB300";
  c.gpu.peak_fp4_flops_per_s = 15000e12;
  c.gpu.sfu_exp2_per_clock_per_sm = kBlackwellUltraExp2PerClockPerSm;
  c.gpu.hbm_bytes = 288 * kGiB;
  c.nic_bytes_per_s = 100e9;
  return c;
}

/// 8x GeForce RTX 4090 on PCIe (no NVLink). NVIDIA Ada Lovelace architecture whitepaper, Appendix
/// table for RTX 4090: 165.2 TFLOPS FP16/BF16 tensor dense with FP32 accumulate (330.3 with FP16
/// accumulate; GeForce halves the FP32-accumulate rate, and training accumulates in FP32), 330.3
/// TFLOPS FP8 dense with FP32 accumulate, 82.6 TFLOPS FP32, 24 GB GDDR6X at 1008 GB/s; PCIe Gen4
/// x16. Network: one 100 Gb/s NIC per node (12.5 GB/s) is our assumption for a typical 8-GPU
/// workstation/cloud server; edit the file for your machine.
ClusterSpec make_rtx4090_pcie() {
  ClusterSpec c;
  c.name = "rtx4090-pcie";
  c.source =
      "NVIDIA Ada Lovelace whitepaper, RTX 4090 (165.2 TFLOPS bf16/fp16 dense with fp32 accumulate, 330.3 fp8 "
      "dense with fp32 accumulate, 82.6 fp32, 24 GB GDDR6X 1008 GB/s, PCIe Gen4 x16 31.5 GB/s per direction, "
      "no NVLink); 8 GPUs per node and one 100 Gb/s NIC (12.5 GB/s) per node assumed; latencies from NCCL "
      "tuning.cc hwLat (assumed)";
  c.gpu = {.name = "RTX-4090-24GB",
           .arch = GpuArch::ada,
           .peak_bf16_flops_per_s = 165.2e12,
           .peak_fp16_flops_per_s = 165.2e12,
           .peak_fp8_flops_per_s = 330.3e12,
           .peak_fp32_flops_per_s = 82.6e12,
           .hbm_bytes = 24 * kGiB,
           .hbm_bytes_per_s = 1008e9};
  c.gpus_per_node = 8;
  c.nvlink_domain_gpus = 1;
  c.nvlink_bytes_per_s = 0;
  c.nvlink_latency_s = 0;
  c.pcie_bytes_per_s = kPcieGen4BytesPerS;
  c.pcie_latency_s = kPcieLatencyS;
  c.nics_per_node = 1;
  c.nic_bytes_per_s = 12.5e9;
  c.network_latency_s = kNetworkLatencyS;
  return c;
}

}  // namespace

const std::vector<std::string>& cluster_preset_names() {
  static const std::vector<std::string> names = {"h100-sxm", "a100-80g-sxm", "h200-sxm",    "b200",
                                                 "b300",     "gb200-nvl72",  "gb300-nvl72", "rtx4090-pcie"};
  return names;
}

ClusterSpec cluster_preset(const std::string& name) {
  if (name == "h100-sxm") return make_h100_sxm();
  if (name == "a100-80g-sxm") return make_a100_80g_sxm();
  if (name == "h200-sxm") return make_h200_sxm();
  if (name == "b200") return make_b200();
  if (name == "b300") return make_b300();
  if (name == "gb200-nvl72") return make_gb200_nvl72();
  if (name == "gb300-nvl72") return make_gb300_nvl72();
  if (name == "rtx4090-pcie") return make_rtx4090_pcie();
  std::string list;
  for (const auto& n : cluster_preset_names()) list += (list.empty() ? "" : ", ") + n;
  throw InputError("--cluster", "cluster", "unknown cluster preset \"" + name + "\"",
                   "use one of " + list + ", or a path to a mgt.cluster/1 file");
}

std::optional<GpuPresetMatch> preset_for_gpu_name(const std::string& gpu) {
  std::string g;
  for (const char ch : gpu) g += char(std::tolower(static_cast<unsigned char>(ch)));
  const auto has = [&g](std::string_view part) { return g.find(part) != std::string::npos; };
  // `part` as a model number of its own: not followed by a digit ("h20" in "H20 96GB", not in "H200").
  const auto has_model = [&g](std::string_view part) {
    for (size_t at = g.find(part); at != std::string::npos; at = g.find(part, at + 1)) {
      const size_t end = at + part.size();
      const bool digit_before = at > 0 && std::isdigit(static_cast<unsigned char>(g[at - 1]));
      if (!digit_before && (end == g.size() || !std::isdigit(static_cast<unsigned char>(g[end])))) return true;
    }
    return false;
  };
  // `part` as a word of its own ("Ada" in "RTX 6000 Ada", not in "adapter").
  const auto has_word = [&g](std::string_view part) {
    const auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    for (size_t at = g.find(part); at != std::string::npos; at = g.find(part, at + 1)) {
      const size_t end = at + part.size();
      if ((at == 0 || !alnum(g[at - 1])) && (end == g.size() || !alnum(g[end]))) return true;
    }
    return false;
  };
  const auto own = [](const char* preset) { return GpuPresetMatch{preset, {}}; };
  const auto priced_as = [&gpu](const char* preset, const std::string& why) {
    return GpuPresetMatch{preset, "GPU \"" + gpu + "\" priced as " + why};
  };
  if (has_word("amd") || has("instinct") || has_model("mi250") || has_model("mi300") || has("gaudi") || has_word("tpu"))
    return std::nullopt;  // not NVIDIA: no preset has its kernels
  // Blackwell Ultra before Blackwell, Grace-Hopper before H200 ("gh200" contains "h200").
  if (has("gb300")) return own("gb300-nvl72");
  if (has("b300")) return own("b300");
  if (has("gb200")) return own("gb200-nvl72");
  if (has("b200")) return own("b200");
  // GH200's GPU is the H100 die (132 SMs, H100 SXM5's tensor peaks; Grace Hopper superchip datasheet)
  // with 96 GB HBM3 or 144 GB HBM3e; H800 is H100 SXM5 with NVLink cut to 400 GB/s (same SMs, clocks
  // and tensor peaks); H20 is a cut-down Hopper whose SM count NVIDIA does not publish.
  if (has("gh200")) return priced_as("h100-sxm", "H100 SXM5 (GH200's GPU: 132 SMs, the same tensor peaks)");
  if (has("h800")) return priced_as("h100-sxm", "H100 SXM5 (H800: same SMs, clocks and tensor peaks)");
  if (has("h200")) return own("h200-sxm");
  if (has_model("h20"))
    return priced_as("h100-sxm", "H100 SXM5's Hopper kernels (H20: 132 SMs assumed, the stated peaks scale them)");
  if (has("h100") || has("hopper")) return own("h100-sxm");
  // A800 is A100 SXM4 with NVLink cut to 400 GB/s (same SMs and tensor peaks).
  if (has("a800")) return priced_as("a100-80g-sxm", "A100 SXM4 (A800: same SMs and tensor peaks)");
  if (has("a100")) return own("a100-80g-sxm");
  if (has("4090")) return own("rtx4090-pcie");
  // Other Ada parts (AD102 / AD104 / AD107) and other Ampere parts (GA102 / GA100 cut-downs).
  if (has_model("l40s") || has_model("l40") || has_word("l4") || has_word("ada"))
    return priced_as("rtx4090-pcie", "RTX 4090's Ada kernels (128 SMs assumed, the stated peaks scale them)");
  if (has_model("a10") || has_model("a30") || has_model("a40") || has_model("a6000") || has_model("a5000") ||
      has_model("3090"))
    return priced_as("a100-80g-sxm", "A100's Ampere kernels (108 SMs assumed, the stated peaks scale them)");
  return std::nullopt;
}

}  // namespace mgt::ir
