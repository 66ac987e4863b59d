// The hardware description (`mgt.cluster/1`): one GPU model, how GPUs group into nodes and NVLink
// domains, the network, and optional measured tables that `mgt-plan probe` fills.
#pragma once

#include "mgt/ir/graph.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgt::ir {

/// GPU generation: kernel efficiencies differ by generation at the same fraction of peak
/// (cost::default_cost_params). `cpu` is the CPU backend (Eigen fp32 kernels, one rank per core,
/// instructions run one after another): `mgt-plan probe --backend cpu` writes it, and the cost model
/// then drops the GPU runtime's fixed costs and lets no communication overlap compute.
enum class GpuArch { ampere, ada, hopper, blackwell, cpu };
std::string to_string(GpuArch arch);

struct GpuSpec {
  std::string name;                         ///< e.g. "H100-SXM5-80GB"
  GpuArch arch = GpuArch::hopper;           ///< "arch" in mgt.cluster/1: ampere | ada | hopper | blackwell | cpu
  double peak_bf16_flops_per_s = 0;         ///< dense tensor-core peak
  double peak_fp16_flops_per_s = 0;         ///< dense; 0 = same as bf16
  double peak_fp8_flops_per_s = 0;          ///< dense (per-tensor fp8 and MXFP8 alike); 0 = not supported
  double peak_fp4_flops_per_s = 0;          ///< dense NVFP4 (Blackwell); 0 = not supported
  double peak_fp32_flops_per_s = 0;         ///< non-tensor-core FP32 (or TF32 if that is what is used)
  int64_t hbm_bytes = 0;
  double hbm_bytes_per_s = 0;
  /// Exponentials (MUFU.EX2) per clock per SM on the special function units; 0 = the generation's
  /// 16 (Ampere, Hopper, Blackwell). Blackwell Ultra (B300, GB300) doubles it to 32. It sets how far
  /// attention's softmax, not its GEMMs, bounds the kernel (docs/cost-model.md §8 "Attention").
  double sfu_exp2_per_clock_per_sm = 0;
  bool operator==(const GpuSpec&) const = default;
};

/// Measured GEMM efficiency (achieved / peak) for one shape; probes fill these, the estimator
/// interpolates (nearest in log FLOPs) when present and uses its analytic curve otherwise.
struct GemmMeasurement {
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::bf16;
  double efficiency = 0;  ///< achieved FLOP/s / peak FLOP/s, in (0, 1]
  bool operator==(const GemmMeasurement&) const = default;
};

/// Measured rate of one kind of non-GEMM kernel (probes fill these; the cost model prices such ops
/// as work / rate in place of its bandwidth model when a row exists, docs/cluster.md §5). `op` is an
/// ir::OpKind name (norm, rope, activation, residual, embedding, attention_core,
/// softmax_cross_entropy) or "optimizer"; `phase` is fwd or bwd. The work unit is the op's:
/// elements of its first input (embedding: of its output; optimizer: parameters stepped), and for
/// attention_core the forward FLOPs as the cost model counts them (causal: half of the score matrix),
/// in both phases.
struct KernelMeasurement {
  std::string op;
  std::string phase;  ///< fwd | bwd
  double work_per_s = 0;
  bool operator==(const KernelMeasurement&) const = default;
};

/// Measured collective bus bandwidth (nccl-tests' busbw) for one configuration.
struct CollectiveMeasurement {
  std::string op;  ///< all_reduce | all_gather | reduce_scatter | all_to_all | send_recv
  int64_t group_size = 0;
  int64_t nodes_spanned = 0;
  int64_t message_bytes = 0;
  double bus_bytes_per_s = 0;
  bool operator==(const CollectiveMeasurement&) const = default;
};

struct ClusterSpec {
  std::string name;    ///< preset name or file stem
  std::string source;  ///< citation of the datasheet numbers, or "measured by mgt-plan probe"
  GpuSpec gpu;
  int64_t gpus_per_node = 8;
  /// GPUs that share one NVLink/NVSwitch domain (8 in an HGX node, 72 in a GB200 NVL72 rack,
  /// 1 when GPUs talk over PCIe only).
  int64_t nvlink_domain_gpus = 8;
  double nvlink_bytes_per_s = 0;  ///< per GPU, one direction
  double nvlink_latency_s = 0;
  double pcie_bytes_per_s = 0;    ///< per GPU, one direction (GPU <-> host/NIC, and GPU <-> GPU without NVLink)
  double pcie_latency_s = 0;
  int64_t nics_per_node = 8;
  double nic_bytes_per_s = 0;     ///< per NIC, one direction
  double network_latency_s = 0;   ///< one hop through the fabric, end to end
  std::vector<GemmMeasurement> gemm_table;
  std::vector<CollectiveMeasurement> collective_table;
  std::vector<KernelMeasurement> kernel_table;
  bool operator==(const ClusterSpec&) const = default;
};

/// The measured rate of `op` in `phase` from cluster.kernel_table, 0 when there is no row.
double measured_kernel_rate(const ClusterSpec& cluster, const std::string& op, const std::string& phase);

/// Peak dense FLOP/s for a compute dtype (fp16 falls back to bf16 when unset); throws
/// InputError when the GPU has no such peak (fp8 on A100).
double peak_flops_per_s(const GpuSpec& gpu, DType dtype);

ClusterSpec cluster_from_json(const nlohmann::json& doc, const std::string& source);
nlohmann::json to_json(const ClusterSpec& cluster);

/// Names of the embedded presets, default first: h100-sxm, a100-80g-sxm, h200-sxm, b200,
/// gb200-nvl72, rtx4090-pcie.
const std::vector<std::string>& cluster_preset_names();
/// The embedded preset `name`; throws InputError listing the names when unknown.
ClusterSpec cluster_preset(const std::string& name);
/// The preset whose GPU describes a part named as published ("H100-SXM5-80GB", "NVIDIA H800",
/// "GH200 (900W, 141GiB HBM3e)", "L40S"): its architecture, SM count and kernels. `assumption` is
/// empty for the preset's own part (any of its variants) and says what is assumed for another part
/// of the same architecture priced with it (H800, A800, GH200, H20, Ada and other Ampere parts).
/// nullopt: no preset describes it (not NVIDIA, or an architecture the presets lack). One owner for
/// `validate` (training rows, whose stated peaks, HBM and links replace the preset's) and the
/// kernel validator (whose rows state none, so it skips the variants the preset does not describe).
struct GpuPresetMatch {
  std::string preset;      ///< a cluster_preset name
  std::string assumption;  ///< empty, or what pricing this part with `preset` assumes
};
std::optional<GpuPresetMatch> preset_for_gpu_name(const std::string& gpu);

/// `--cluster NAME|FILE`: a preset name, else a path to a `mgt.cluster/1` file.
ClusterSpec load_cluster(const std::string& name_or_path);

}  // namespace mgt::ir
