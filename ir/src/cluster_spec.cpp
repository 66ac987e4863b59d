// `mgt.cluster/1` reader and writer, peak FLOP/s lookup and `--cluster NAME|FILE` resolution.
// The file format (every key, its unit, which keys are optional) is documented in docs/cluster.md.
// Keys are the ClusterSpec member names, so every value is in the SI unit its name carries
// (`_flops_per_s`, `_bytes`, `_bytes_per_s`, `_s`); this keeps to_json -> cluster_from_json exact.
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/input_limits.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

namespace mgt::ir {

namespace {

constexpr const char* kFormat = "mgt.cluster/1";

// --- field readers with dotted paths ("gpu.hbm_bytes", "collective_table[3].op") in errors ---------

/// Reads one JSON object's fields; `prefix` is prepended to field names in errors.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& obj, std::string prefix, const std::string& source)
      : obj_(obj), prefix_(std::move(prefix)), source_(source) {
    if (!obj_.is_object())
      throw InputError(source_, prefix_.empty() ? "" : prefix_.substr(0, prefix_.size() - 1),
                       std::string("expected a JSON object, got ") + obj_.type_name());
  }

  /// Rejects keys outside `allowed`, so a misspelt optional key is an error, not a silent default.
  void reject_unknown_keys(const std::set<std::string>& allowed) const {
    for (const auto& [key, value] : obj_.items()) {
      if (allowed.count(key)) continue;
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw InputError(source_, prefix_ + key, "unknown key", "known keys here: " + list);
    }
  }

  bool has(const std::string& key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }

  const nlohmann::json& at(const std::string& key) const {
    if (!has(key)) throw InputError(source_, prefix_ + key, "missing", "add the field (see docs/cluster.md)");
    return obj_.at(key);
  }

  std::string string(const std::string& key) const {
    const auto& v = at(key);
    if (!v.is_string()) throw InputError(source_, prefix_ + key, std::string("expected a string, got ") + v.type_name());
    return v.get<std::string>();
  }

  std::string optional_string(const std::string& key, const std::string& fallback) const {
    return has(key) ? string(key) : fallback;
  }

  /// A finite number >= 0 (> 0 when `positive`).
  double number(const std::string& key, bool positive) const {
    const auto& v = at(key);
    if (!v.is_number())
      throw InputError(source_, prefix_ + key, std::string("expected a number, got ") + v.type_name() + " " + v.dump());
    double d = v.get<double>();
    if (!std::isfinite(d) || d < 0 || (positive && d == 0))
      throw InputError(source_, prefix_ + key,
                       std::string("must be a ") + (positive ? "positive" : "non-negative") +
                           " finite number, got " + v.dump(),
                       "values are in the SI unit the key names (bytes, seconds, FLOP/s)");
    return d;
  }

  double optional_number(const std::string& key, double fallback, bool positive) const {
    return has(key) ? number(key, positive) : fallback;
  }

  /// An integer >= 1.
  int64_t positive_int(const std::string& key) const {
    const auto& v = at(key);
    bool integral = v.is_number_integer() || v.is_number_unsigned() ||
                    (v.is_number_float() && std::isfinite(v.get<double>()) &&
                     v.get<double>() == std::floor(v.get<double>()) && std::abs(v.get<double>()) < 9.0e18);
    if (!integral) throw InputError(source_, prefix_ + key, std::string("expected an integer, got ") + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      throw InputError(source_, prefix_ + key, "value does not fit in a signed 64-bit integer");
    int64_t i = v.is_number_float() ? int64_t(v.get<double>()) : v.get<int64_t>();
    if (i <= 0) throw InputError(source_, prefix_ + key, "must be positive, got " + std::to_string(i));
    return i;
  }

  const std::string& source() const { return source_; }
  std::string path(const std::string& key) const { return prefix_ + key; }

 private:
  const nlohmann::json& obj_;
  std::string prefix_;
  const std::string& source_;
};


DType parse_dtype(const FieldReader& r, const std::string& key) {
  const std::string s = r.string(key);
  if (auto d = dtype_from_string(s)) return *d;
  throw InputError(r.source(), r.path(key), "unknown dtype \"" + s + "\"", "use one of f32, bf16, f16, fp8");
}

const std::set<std::string> kCollectiveOps = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                              "send_recv"};

}  // namespace

std::string to_string(GpuArch arch) {
  switch (arch) {
    case GpuArch::ampere: return "ampere";
    case GpuArch::ada: return "ada";
    case GpuArch::hopper: return "hopper";
    case GpuArch::blackwell: return "blackwell";
    case GpuArch::cpu: return "cpu";
  }
  return "hopper";
}

namespace {

GpuSpec gpu_from_json(const nlohmann::json& obj, const std::string& source) {
  FieldReader r(obj, "gpu.", source);
  r.reject_unknown_keys({"name", "arch", "peak_bf16_flops_per_s", "peak_fp16_flops_per_s", "peak_fp8_flops_per_s",
                         "peak_fp4_flops_per_s", "peak_fp32_flops_per_s", "hbm_bytes", "hbm_bytes_per_s",
                         "sfu_exp2_per_clock_per_sm"});
  GpuSpec gpu;
  gpu.name = r.string("name");
  const std::string arch = r.string("arch");
  bool known = false;
  for (GpuArch a : {GpuArch::ampere, GpuArch::ada, GpuArch::hopper, GpuArch::blackwell, GpuArch::cpu})
    if (to_string(a) == arch) { gpu.arch = a; known = true; }
  if (!known) throw InputError(source, "gpu.arch", "unknown GPU generation \"" + arch + "\"",
                               "use ampere, ada, hopper, blackwell or cpu (the CPU backend, as probe writes it)");
  gpu.peak_bf16_flops_per_s = r.number("peak_bf16_flops_per_s", /*positive=*/true);
  gpu.peak_fp16_flops_per_s = r.optional_number("peak_fp16_flops_per_s", 0, /*positive=*/false);
  gpu.peak_fp8_flops_per_s = r.optional_number("peak_fp8_flops_per_s", 0, /*positive=*/false);
  gpu.peak_fp4_flops_per_s = r.optional_number("peak_fp4_flops_per_s", 0, /*positive=*/false);
  gpu.peak_fp32_flops_per_s = r.number("peak_fp32_flops_per_s", /*positive=*/true);
  gpu.hbm_bytes = r.positive_int("hbm_bytes");
  gpu.hbm_bytes_per_s = r.number("hbm_bytes_per_s", /*positive=*/true);
  gpu.sfu_exp2_per_clock_per_sm = r.optional_number("sfu_exp2_per_clock_per_sm", 0, /*positive=*/false);
  return gpu;
}

// The rows of measurement table `name` (an array of objects), each read by read_row(reader, rows so far).
template <class Row, class ReadRow>
std::vector<Row> table_from_json(const nlohmann::json& rows, const std::string& name, const std::string& source,
                                 ReadRow read_row) {
  if (!rows.is_array()) throw InputError(source, name, std::string("expected an array, got ") + rows.type_name());
  std::vector<Row> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    FieldReader r(rows[i], name + "[" + std::to_string(i) + "].", source);
    out.push_back(read_row(r, out));
  }
  return out;
}

std::vector<GemmMeasurement> gemm_table_from_json(const nlohmann::json& rows, const std::string& source) {
  return table_from_json<GemmMeasurement>(rows, "gemm_table", source, [&](FieldReader& r, const auto&) {
    r.reject_unknown_keys({"m", "n", "k", "dtype", "efficiency"});
    GemmMeasurement g;
    g.m = r.positive_int("m");
    g.n = r.positive_int("n");
    g.k = r.positive_int("k");
    g.dtype = parse_dtype(r, "dtype");
    g.efficiency = r.number("efficiency", /*positive=*/true);
    if (g.efficiency > 1.0)
      throw InputError(source, r.path("efficiency"), "must be in (0, 1], got " + std::to_string(g.efficiency),
                       "efficiency is achieved FLOP/s / peak FLOP/s");
    return g;
  });
}

std::vector<CollectiveMeasurement> collective_table_from_json(const nlohmann::json& rows,
                                                              const std::string& source) {
  return table_from_json<CollectiveMeasurement>(rows, "collective_table", source, [&](FieldReader& r, const auto&) {
    r.reject_unknown_keys({"op", "group_size", "nodes_spanned", "message_bytes", "bus_bytes_per_s"});
    CollectiveMeasurement c;
    c.op = r.string("op");
    if (!kCollectiveOps.count(c.op))
      throw InputError(source, r.path("op"), "unknown collective \"" + c.op + "\"",
                       "use one of all_reduce, all_gather, reduce_scatter, all_to_all, send_recv");
    c.group_size = r.positive_int("group_size");
    c.nodes_spanned = r.positive_int("nodes_spanned");
    c.message_bytes = r.positive_int("message_bytes");
    c.bus_bytes_per_s = r.number("bus_bytes_per_s", /*positive=*/true);
    return c;
  });
}

const std::set<std::string> kKernelOps = {"norm", "rope", "activation", "residual", "embedding",
                                          "attention_core", "softmax_cross_entropy", "optimizer"};

std::vector<KernelMeasurement> kernel_table_from_json(const nlohmann::json& rows, const std::string& source) {
  return table_from_json<KernelMeasurement>(rows, "kernel_table", source, [&](FieldReader& r, const auto& out) {
    r.reject_unknown_keys({"op", "phase", "work_per_s"});
    KernelMeasurement k;
    k.op = r.string("op");
    if (!kKernelOps.count(k.op))
      throw InputError(source, r.path("op"), "unknown kernel \"" + k.op + "\"",
                       "use one of norm, rope, activation, residual, embedding, attention_core, "
                       "softmax_cross_entropy, optimizer");
    k.phase = r.string("phase");
    if (k.phase != "fwd" && k.phase != "bwd")
      throw InputError(source, r.path("phase"), "unknown phase \"" + k.phase + "\"", "use fwd or bwd");
    k.work_per_s = r.number("work_per_s", /*positive=*/true);
    for (const auto& prev : out)
      if (prev.op == k.op && prev.phase == k.phase)
        throw InputError(source, r.path("op"), "a second row for " + k.op + " " + k.phase,
                         "keep one measurement per kernel and phase");
    return k;
  });
}

/// Cross-field checks the topology relies on.
void check_consistency(const ClusterSpec& c, const std::string& source) {
  int64_t d = c.nvlink_domain_gpus, g = c.gpus_per_node;
  if (!(g % d == 0 || d % g == 0))
    throw InputError(source, "nvlink_domain_gpus",
                     "must divide gpus_per_node or be a multiple of it, got " + std::to_string(d) +
                         " with gpus_per_node " + std::to_string(g),
                     "an NVLink domain is part of one node (HGX: 8) or a whole number of nodes (NVL72: 72)");
  if (d > 1 && !(c.nvlink_bytes_per_s > 0))
    throw InputError(source, "nvlink_bytes_per_s", "must be positive when nvlink_domain_gpus > 1",
                     "set nvlink_domain_gpus to 1 for GPUs without NVLink");
}

}  // namespace

void check_node_bounds(const ClusterSpec& c, const std::string& source) {
  const auto check = [&](const char* field, int64_t value, int64_t bound, const std::string& why) {
    if (value < 1 || value > bound)
      throw InputError(source, field, "is " + std::to_string(value) + ", outside [1, " + std::to_string(bound) + "]", why);
  };
  check("gpus_per_node", c.gpus_per_node, kMaxGpusPerNode, "the largest node shipped holds 16 GPUs; give GPUs per server");
  check("nvlink_domain_gpus", c.nvlink_domain_gpus, kMaxNvlinkDomainGpus,
        "the largest NVLink domain announced is 576 GPUs (NVL576); 1 for no NVLink");
  check("nics_per_node", c.nics_per_node, kMaxNicsPerGpu * c.gpus_per_node,
        "at most " + std::to_string(kMaxNicsPerGpu) + " NICs per GPU (a DGX H100 has 1 compute NIC per GPU)");
}

namespace {

std::string stem_of(const std::string& source) {
  std::string stem = std::filesystem::path(source).stem().string();
  return stem.empty() ? source : stem;
}

}  // namespace

double peak_flops_per_s(const GpuSpec& gpu, DType dtype) {
  switch (dtype) {
    case DType::bf16: return gpu.peak_bf16_flops_per_s;
    case DType::f16: return gpu.peak_fp16_flops_per_s > 0 ? gpu.peak_fp16_flops_per_s : gpu.peak_bf16_flops_per_s;
    case DType::fp8:
      if (gpu.peak_fp8_flops_per_s > 0) return gpu.peak_fp8_flops_per_s;
      throw InputError(gpu.name, "dtype", "this GPU has no fp8 tensor-core peak (peak_fp8_flops_per_s is 0)",
                       "train in bf16, or choose a GPU with fp8 support (H100 and later)");
    case DType::f32:
      if (gpu.peak_fp32_flops_per_s > 0) return gpu.peak_fp32_flops_per_s;
      throw InputError(gpu.name, "dtype", "this GPU has no fp32 peak (peak_fp32_flops_per_s is 0)",
                       "set gpu.peak_fp32_flops_per_s in the cluster file");
  }
  throw InputError(gpu.name, "dtype", "unknown dtype");
}

ClusterSpec cluster_from_json(const nlohmann::json& doc, const std::string& source) {
  require_format(doc, kFormat, source);
  FieldReader r(doc, "", source);
  r.reject_unknown_keys({"format", "name", "source", "comment", "gpu", "gpus_per_node", "nvlink_domain_gpus",
                         "nvlink_bytes_per_s", "nvlink_latency_s", "pcie_bytes_per_s", "pcie_latency_s",
                         "nics_per_node", "nic_bytes_per_s", "network_latency_s", "gemm_table",
                         "collective_table", "kernel_table"});
  ClusterSpec c;
  c.name = r.optional_string("name", stem_of(source));
  c.source = r.optional_string("source", "");
  if (r.has("comment")) (void)r.string("comment");
  c.gpu = gpu_from_json(r.at("gpu"), source);
  c.gpus_per_node = r.positive_int("gpus_per_node");
  c.nvlink_domain_gpus = r.positive_int("nvlink_domain_gpus");
  // Without NVLink (domain of 1 GPU) the NVLink rate and latency may be omitted or 0.
  bool has_nvlink = c.nvlink_domain_gpus > 1;
  c.nvlink_bytes_per_s = has_nvlink ? r.number("nvlink_bytes_per_s", /*positive=*/true)
                                    : r.optional_number("nvlink_bytes_per_s", 0, /*positive=*/false);
  c.nvlink_latency_s = has_nvlink ? r.number("nvlink_latency_s", /*positive=*/false)
                                  : r.optional_number("nvlink_latency_s", 0, /*positive=*/false);
  c.pcie_bytes_per_s = r.number("pcie_bytes_per_s", /*positive=*/true);
  c.pcie_latency_s = r.number("pcie_latency_s", /*positive=*/false);
  c.nics_per_node = r.positive_int("nics_per_node");
  c.nic_bytes_per_s = r.number("nic_bytes_per_s", /*positive=*/true);
  c.network_latency_s = r.number("network_latency_s", /*positive=*/false);
  if (r.has("gemm_table")) c.gemm_table = gemm_table_from_json(r.at("gemm_table"), source);
  if (r.has("collective_table")) c.collective_table = collective_table_from_json(r.at("collective_table"), source);
  if (r.has("kernel_table")) c.kernel_table = kernel_table_from_json(r.at("kernel_table"), source);
  check_node_bounds(c, source);
  check_consistency(c, source);
  return c;
}

nlohmann::json to_json(const ClusterSpec& c) {
  nlohmann::json gpu = {{"name", c.gpu.name},
                        {"arch", to_string(c.gpu.arch)},
                        {"peak_bf16_flops_per_s", c.gpu.peak_bf16_flops_per_s},
                        {"peak_fp16_flops_per_s", c.gpu.peak_fp16_flops_per_s},
                        {"peak_fp8_flops_per_s", c.gpu.peak_fp8_flops_per_s},
                        {"peak_fp32_flops_per_s", c.gpu.peak_fp32_flops_per_s},
                        {"hbm_bytes", c.gpu.hbm_bytes},
                        {"hbm_bytes_per_s", c.gpu.hbm_bytes_per_s}};
  // Written only when set, so that files of GPUs without fp4 read and write as before.
  if (c.gpu.peak_fp4_flops_per_s > 0) gpu["peak_fp4_flops_per_s"] = c.gpu.peak_fp4_flops_per_s;
  if (c.gpu.sfu_exp2_per_clock_per_sm > 0) gpu["sfu_exp2_per_clock_per_sm"] = c.gpu.sfu_exp2_per_clock_per_sm;
  nlohmann::json gemm = nlohmann::json::array();
  for (const auto& g : c.gemm_table)
    gemm.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"dtype", to_string(g.dtype)}, {"efficiency", g.efficiency}});
  nlohmann::json coll = nlohmann::json::array();
  for (const auto& m : c.collective_table)
    coll.push_back({{"op", m.op},
                    {"group_size", m.group_size},
                    {"nodes_spanned", m.nodes_spanned},
                    {"message_bytes", m.message_bytes},
                    {"bus_bytes_per_s", m.bus_bytes_per_s}});
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& k : c.kernel_table) kernels.push_back({{"op", k.op}, {"phase", k.phase}, {"work_per_s", k.work_per_s}});
  return {{"format", kFormat},
          {"name", c.name},
          {"source", c.source},
          {"gpu", gpu},
          {"gpus_per_node", c.gpus_per_node},
          {"nvlink_domain_gpus", c.nvlink_domain_gpus},
          {"nvlink_bytes_per_s", c.nvlink_bytes_per_s},
          {"nvlink_latency_s", c.nvlink_latency_s},
          {"pcie_bytes_per_s", c.pcie_bytes_per_s},
          {"pcie_latency_s", c.pcie_latency_s},
          {"nics_per_node", c.nics_per_node},
          {"nic_bytes_per_s", c.nic_bytes_per_s},
          {"network_latency_s", c.network_latency_s},
          {"gemm_table", gemm},
          {"collective_table", coll},
          {"kernel_table", kernels}};
}

double measured_kernel_rate(const ClusterSpec& cluster, const std::string& op, const std::string& phase) {
  for (const auto& k : cluster.kernel_table)
    if (k.op == op && k.phase == phase) return k.work_per_s;
  return 0.0;
}

ClusterSpec load_cluster(const std::string& name_or_path) {
  const auto& names = cluster_preset_names();
  for (const auto& n : names)
    if (n == name_or_path) return cluster_preset(n);
  std::error_code ec;
  if (!std::filesystem::exists(name_or_path, ec)) {  // a directory or FIFO: read_json_file names it
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw InputError(name_or_path, "--cluster", "neither a cluster preset nor a readable file",
                     "use a preset (" + list + ") or a path to a " + std::string(kFormat) + " file");
  }
  return cluster_from_json(read_json_file(name_or_path), name_or_path);
}

}  // namespace mgt::ir
