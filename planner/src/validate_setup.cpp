// `mgt-plan validate` (docs/validation.md): a hardware block as a ClusterSpec and a row as a Graph,
// Plan and TrainingSettings (RowSetup).
#include "mgt/planner/validate.hpp"

#include "validate_util.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/input_limits.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/search.hpp"

#include <algorithm>
#include <cmath>
#include <regex>

namespace mgt::plan {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Cluster

namespace {
/// A stated hardware number: nullopt when absent or null; RowSkipped naming `where`.`key` and the value
/// when it is not a positive number (a string, 0, negative) or, for a `count`, not a whole number >= 1.
/// A bad spec never falls back to the preset silently.
std::optional<double> hardware_number(const json& block, const std::string& key, const std::string& where,
                                      bool count = false) {
  if (!block.is_object() || !block.contains(key) || block[key].is_null()) return std::nullopt;
  const json& v = block[key];
  const bool ok = v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0 &&
                  (!count || (v.get<double>() >= 1 && std::floor(v.get<double>()) == v.get<double>()));
  if (!ok)
    throw RowSkipped("hardware " + where + "." + key + " is " + v.dump() + ": expected " +
                     (count ? "a whole number >= 1" : "a positive number") + " (null or absent when not stated)");
  return v.get<double>();
}

/// The dense peak at `key` ("bf16", "fp16", "fp8", "fp4") in FLOP/s, from peak_dense_tflops.
std::optional<double> peak_of(const json& block, const std::string& key, const std::string& system_id) {
  if (!block.contains("peak_dense_tflops") || block["peak_dense_tflops"].is_null()) return std::nullopt;
  if (!block["peak_dense_tflops"].is_object())
    throw RowSkipped("hardware " + system_id + ".peak_dense_tflops is " + block["peak_dense_tflops"].dump() +
                     ": expected an object {\"bf16\": TFLOP/s, ...}");
  const auto v = hardware_number(block["peak_dense_tflops"], key, system_id + ".peak_dense_tflops");
  if (v) return *v * 1e12;
  return std::nullopt;
}

/// "1600 Gbps node-node interconnect", "2 Tb/s RoCE", "800 Gbps internode" -> bytes/s per node.
std::optional<double> node_network_bytes_per_s(const std::string& text) {
  static const std::regex re(R"((\d+(?:\.\d+)?)\s*(gbps|gb/s|gbit/s|tbps|tb/s|tbit/s))", std::regex::icase);
  std::smatch match;
  if (!std::regex_search(text, match, re)) return std::nullopt;
  const double value = std::stod(match[1].str());
  const std::string unit = lower(match[2].str());
  return value * (unit[0] == 't' ? 1e12 : 1e9) / 8.0;
}
}  // namespace

ir::ClusterSpec cluster_from_hardware(const std::string& system_id, const json& block, std::vector<std::string>& assumptions) {
  const std::string gpu = opt_string(block, "gpu");
  const std::optional<ir::GpuPresetMatch> match = ir::preset_for_gpu_name(gpu);
  std::string preset = match ? match->preset : "a100-80g-sxm";
  if (!match)
    assumptions.push_back("hardware: no preset for GPU \"" + gpu + "\": a100-80g-sxm's latencies, PCIe and fp32 peak kept");
  else if (!match->assumption.empty())
    assumptions.push_back("hardware: " + match->assumption);
  ir::ClusterSpec c = ir::cluster_preset(preset);
  c.name = system_id;
  c.source = opt_string(block, "spec_source").empty() ? "validation hardware block " + system_id : opt_string(block, "spec_source");
  if (!gpu.empty()) c.gpu.name = gpu;
  std::vector<std::string> kept;

  const auto bf16 = peak_of(block, "bf16", system_id), fp16 = peak_of(block, "fp16", system_id),
             fp8 = peak_of(block, "fp8", system_id), fp4 = peak_of(block, "fp4", system_id);
  if (bf16 || fp16) {
    c.gpu.peak_bf16_flops_per_s = bf16 ? *bf16 : *fp16;
    c.gpu.peak_fp16_flops_per_s = fp16 ? *fp16 : 0;
    if (!bf16) assumptions.push_back("hardware: no bf16 peak stated: the fp16 peak stands in for it");
  } else {
    kept.push_back("bf16/fp16 peak");
  }
  c.gpu.peak_fp8_flops_per_s = fp8 ? *fp8 : 0;
  c.gpu.peak_fp4_flops_per_s = fp4 ? *fp4 : 0;  // as fp8: a peak the block does not state is not assumed
  if (const auto v = hardware_number(block, "hbm_gb", system_id))
    c.gpu.hbm_bytes = int64_t(std::llround(*v * double(1ll << 30)));  // datasheet GB as GiB (docs/cluster.md)
  else
    kept.push_back("HBM capacity");
  if (const auto v = hardware_number(block, "hbm_bw_TBps", system_id))
    c.gpu.hbm_bytes_per_s = *v * 1e12;
  else
    kept.push_back("HBM bandwidth");
  if (const auto v = hardware_number(block, "nvlink_bw_GBps_per_gpu_bidir", system_id))
    c.nvlink_bytes_per_s = *v * 1e9 / 2.0;  // bidirectional total -> one direction
  else
    kept.push_back("NVLink bandwidth");
  if (const auto v = hardware_number(block, "gpus_per_node", system_id, /*count=*/true))
    c.gpus_per_node = int64_t(*v);
  else
    kept.push_back("GPUs per node");
  const ir::ClusterSpec named = ir::cluster_preset(preset);
  if (const auto v = hardware_number(block, "nvlink_domain_gpus", system_id, /*count=*/true)) {
    c.nvlink_domain_gpus = int64_t(*v);
  } else if (match && named.nvlink_domain_gpus > named.gpus_per_node &&
             c.gpus_per_node == named.gpus_per_node && c.nvlink_bytes_per_s > 0) {
    kept.push_back("NVLink domain (" + std::to_string(c.nvlink_domain_gpus) + ", rack-scale)");  // NVL72 racks
  } else {
    c.nvlink_domain_gpus = c.nvlink_bytes_per_s > 0 ? c.gpus_per_node : 1;
    kept.push_back("NVLink domain (= GPUs per node)");
  }
  if (c.nvlink_domain_gpus % c.gpus_per_node != 0 && c.gpus_per_node % c.nvlink_domain_gpus != 0) {
    assumptions.push_back("hardware: nvlink_domain_gpus " + std::to_string(c.nvlink_domain_gpus) +
                          " neither divides nor is a multiple of gpus_per_node; set to gpus_per_node");
    c.nvlink_domain_gpus = c.gpus_per_node;
  }
  if (const auto v = hardware_number(block, "nics_per_node", system_id, /*count=*/true))
    c.nics_per_node = int64_t(*v);
  else
    kept.push_back("NICs per node (" + std::to_string(c.nics_per_node) + ")");
  // A topology of 2^40 GPUs per node is not built (it ended in std::bad_alloc); the row is skipped
  // with the reason, as for any other bad hardware number.
  try {
    ir::check_node_bounds(c, "hardware " + system_id);
  } catch (const ir::InputError& e) {
    throw RowSkipped(e.what());
  }
  if (const auto v = hardware_number(block, "nic_gbps", system_id)) {
    c.nic_bytes_per_s = *v * 1e9 / 8.0;  // Gbit/s -> bytes/s
  } else if (const auto node = node_network_bytes_per_s(opt_string(block, "inter_node_network"))) {
    c.nic_bytes_per_s = *node / double(c.nics_per_node);
    assumptions.push_back("hardware: NIC rate from inter_node_network's per-node figure: " + fmt("%.1f", *node / 1e9) +
                          " GB/s over " + std::to_string(c.nics_per_node) + " NICs");
  } else {
    kept.push_back("NIC rate (" + fmt("%.1f", c.nic_bytes_per_s / 1e9) + " GB/s)");
  }
  std::string list;
  for (const auto& k : kept) list += (list.empty() ? "" : ", ") + k;
  if (!list.empty()) assumptions.push_back("hardware " + system_id + ": not stated, taken from preset " + preset + ": " + list);
  return c;
}

// ---------------------------------------------------------------------------------------------
// Row -> setup

namespace {

/// The row's recompute; an unstated one ("not stated", "n/a", null) is a knob (s.recompute_choices:
/// none, selective, full, and full on the fewest layers that fit where the framework offers it; the
/// fastest that fits is taken). Words are read as words: "none", "no", "off", "disabled", false →
/// none; "full…" / "partial…" with "N layers" → full on N layers per stage; torchtitan's "selective
/// layer" → full on every second layer; any other "selective…" → selective; "activation
/// checkpointing", "enabled", "yes", true → full (a boolean is what FSDP / Hugging Face configs
/// write: every block checkpointed).
ir::Recompute parse_recompute(const json& row, RowSetup& s) {
  std::optional<int64_t>& layers = s.plan.recompute_layers;
  const json& field = row.contains("recompute") ? row["recompute"] : json();
  if (field.is_boolean()) {
    // `activation_checkpointing: true` (PyTorch FSDP, Hugging Face gradient_checkpointing, DeepSpeed):
    // every block checkpointed, the full recompute of each layer.
    s.assumptions.push_back(std::string("recompute ") + (field.get<bool>() ? "true: full (every layer checkpointed)" : "false: none"));
    return field.get<bool>() ? ir::Recompute::full : ir::Recompute::none;
  }
  const std::string raw = field.is_string() ? field.get<std::string>() : "";
  const std::string r = lower(raw);
  const auto is_any = [&r](std::initializer_list<const char*> words) {
    return std::any_of(words.begin(), words.end(), [&r](const char* w) { return r == w; });
  };
  static const std::regex layer_count(R"((\d+)\s*(?:transformer\s*)?(?:layer|block))");
  std::smatch match;
  if (r.empty() || contains(r, "not stated") || is_any({"n/a", "na", "unknown", "unspecified", "?"})) {
    s.recompute_choices = {ir::Recompute::none, ir::Recompute::selective, ir::Recompute::full};
    if (!s.framework.offers_selective_recompute) s.recompute_choices = {ir::Recompute::none, ir::Recompute::full};
    s.recompute_layers_choice = s.framework.offers_partial_recompute;
    return ir::Recompute::none;
  }
  if (r.rfind("none", 0) == 0 || r.rfind("no ", 0) == 0 || is_any({"no", "off", "false", "disabled", "0"}))
    return ir::Recompute::none;
  const auto full_with_count = [&] {
    if (std::regex_search(r, match, layer_count)) layers = count_in_words(match[1].str(), "recompute \"" + raw + "\"");
    if (r.rfind("partial", 0) == 0 && !layers) throw RowSkipped("recompute \"" + raw + "\" names no layer count to recompute");
    return ir::Recompute::full;
  };
  if (r.rfind("full", 0) == 0 || r.rfind("partial", 0) == 0) return full_with_count();
  // torchtitan's "selective layer" checkpointing is whole blocks, every selective_ac_option-th one
  // (default "2": half the layers), not Korthikanti's selective attention-core recompute, which its
  // "selective op" is closest to.
  static const std::regex op_level(R"(\bop\b|op[- ]level|per[- ]op)");
  if (contains(r, "selective") && contains(r, "layer") && !std::regex_search(r, op_level)) {
    static const std::regex every(R"(every\s*(\d+))");
    const int64_t n = std::regex_search(r, match, every) ? std::max<int64_t>(1, count_in_words(match[1].str(), "recompute \"" + raw + "\"")) : 2;
    const int64_t stages = std::max<int64_t>(1, s.plan.pp) * std::max<int64_t>(1, s.plan.vpp);
    const int64_t per_stage = (s.shape.layers + stages - 1) / stages;
    layers = (per_stage + n - 1) / n;
    s.assumptions.push_back("recompute \"" + raw + "\": torchtitan's layer checkpointing (one block in " + std::to_string(n) +
                            "), full recompute of " + std::to_string(*layers) + " layers per stage");
    return ir::Recompute::full;
  }
  if (contains(r, "selective")) return ir::Recompute::selective;
  if (contains(r, "disabled") || contains(r, "without")) return ir::Recompute::none;  // "checkpointing disabled"
  if (contains(r, "checkpointing") || contains(r, "recomput") || is_any({"yes", "on", "true", "enabled"}))
    return full_with_count();
  throw RowSkipped("recompute \"" + raw + "\" does not map to none, selective or full");
}

/// A zero_stage written in words ("ZeRO-2-style (Sec 3.2)", "zero-2-like", "shards optimizer states +
/// gradients", "FULL_SHARD"): an explicit "ZeRO-n" / "stage n" first, else what the words say is
/// sharded. Never a stray digit (a section number). nullopt for "not stated"; RowSkipped otherwise.
std::optional<int64_t> zero_stage_from_words(const std::string& raw) {
  const std::string z = lower(raw);
  if (z.empty() || contains(z, "not stated") || z == "n/a" || z == "unknown") return std::nullopt;
  // "none" / "disabled": nothing sharded, plain data parallel.
  if (z == "none" || z == "no" || z == "off" || z == "false" || z == "disabled" || contains(z, "no sharding")) return 0;
  static const std::regex named(R"((?:zero|stage)[\s_-]*(?:stage[\s_-]*)?([0-3])(?![0-9.]))");
  std::smatch match;
  if (std::regex_search(z, match, named)) return std::stoll(match[1].str());
  const bool shards = contains(z, "shard") || contains(z, "partition");
  if (contains(z, "full_shard") || contains(z, "fully shard") || contains(z, "fsdp") || contains(z, "hybrid") ||
      (shards && contains(z, "param")))
    return 3;
  if (contains(z, "shard_grad_op") || (shards && contains(z, "grad"))) return 2;
  if (contains(z, "distributed optimizer") || (shards && contains(z, "optimizer"))) return 1;
  if (contains(z, "no_shard") || contains(z, "ddp") || contains(z, "replicated")) return 0;
  throw RowSkipped("parallel.zero_stage \"" + raw + "\" does not map to a ZeRO stage");
}

/// The planner's defaults (max_vpp, micro-batches), built once.
const SearchOptions& search_defaults() {
  static const SearchOptions defaults;
  return defaults;
}

/// Interleaving factors to try when the row leaves V open: the planner's (2 to SearchOptions::max_vpp)
/// whose split the search proposes (pipeline_split_proposed: equal chunks, or the embedding and loss
/// counted as layers, as Megatron-Core's --account-for-embedding-in-pipeline-split and torchtitan do).
std::vector<int64_t> vpp_candidates(int64_t layers, int64_t pp, int64_t mtp_depths) {
  std::vector<int64_t> out;
  for (int64_t v = 2; v <= search_defaults().max_vpp; ++v)
    if (pipeline_split_proposed(layers, pp, v, mtp_depths)) out.push_back(v);
  return out;
}

/// Sequence length, model shape and graph; returns the sequence length.
int64_t setup_model(const ValidationSource& source, const json& row, const json& model, const json& training, RowSetup& s) {
  auto& as = s.assumptions;
  int64_t seq = 0;
  if (const auto v = opt_int(training, "seq_length", "training")) {
    seq = *v;
  } else if (const auto m = opt_int(model, "seq_length", "model")) {
    seq = *m;
    as.push_back("training.seq_length not stated: model.seq_length " + std::to_string(seq));
  }
  if (seq <= 0) throw RowSkipped("training.seq_length is not stated");
  s.shape = model_shape(model, as);
  // A row that switched multi-token prediction off says so in its label ("DeepSeekV3 (w/o MTP)").
  if (s.shape.mtp_layers > 0 && row.contains("model_label_in_source") && row["model_label_in_source"].is_string()) {
    const std::string label = lower(row["model_label_in_source"].get<std::string>());
    if (label.find("w/o mtp") != std::string::npos || label.find("without mtp") != std::string::npos) {
      as.push_back("model_label_in_source \"" + row["model_label_in_source"].get<std::string>() +
                   "\": multi-token prediction off (model.mtp_layers " + std::to_string(s.shape.mtp_layers) + " not built)");
      s.shape.mtp_layers = 0;
    }
  }
  const json config = hf_config(s.shape, seq);
  try {
    s.graph = ir::graph_from_hf_config(config, source.name + ".json#" + row["id"].get<std::string>());
  } catch (const ir::InputError& e) {
    throw RowSkipped(std::string("model does not build: ") + e.what());
  }
  if (!s.shape.name.empty()) s.graph.info.name = s.shape.name;
  return seq;
}

/// Expert tensor parallel (`parallel.etp`, Megatron --expert-tensor-parallel-size). Unstated, it is tp
/// (Megatron-Core's default) unless etp*ep = tp*ep cannot fold into the stage's dp*cp*tp ranks
/// (Megatron-Core's MoE parallel folding requires it; planner/src/rules.cpp expert_rule): then the
/// row can only have run with etp 1, which is what the Megatron-Bridge MoE perf recipes set
/// (perf_recipes/{qwen,gpt_oss,deepseek,kimi}: cfg.model.expert_tensor_parallel_size = 1).
void setup_expert_tp(const json& par, int64_t stage_ranks, RowSetup& s) {
  ir::Plan& p = s.plan;
  if (const auto etp = opt_int(par, "etp", "parallel")) {
    if (*etp <= 0) throw RowSkipped("parallel.etp must be positive, got " + std::to_string(*etp));
    p.etp = *etp;
  } else if (p.ep > 1 && p.tp > 1 && stage_ranks % (p.tp * p.ep) != 0) {
    p.etp = 1;
    s.assumptions.push_back("parallel.etp not stated: 1 (etp = tp = " + std::to_string(p.tp) + " times ep " +
                            std::to_string(p.ep) + " does not divide the stage's dp*cp*tp = " + std::to_string(stage_ranks) +
                            " ranks)");
  }
}

/// num_gpus and the tp, pp, cp, ep, vpp degrees (into s.plan); returns the data-parallel degree.
int64_t setup_parallel_sizes(const json& par, RowSetup& s) {
  auto& as = s.assumptions;
  const auto gpus = opt_int(par, "num_gpus", "parallel");
  if (!gpus || *gpus <= 0) throw RowSkipped("parallel.num_gpus is not stated");
  s.num_gpus = *gpus;
  auto degree = [&](const std::string& key) {
    const auto v = opt_int(par, key, "parallel");
    if (!v) {
      as.push_back("parallel." + key + " not stated: 1");
      return int64_t(1);
    }
    if (*v <= 0) throw RowSkipped("parallel." + key + " must be positive, got " + std::to_string(*v));
    return *v;
  };
  const int64_t tp = degree("tp"), pp = degree("pp");
  const int64_t cp = opt_int(par, "cp", "parallel").value_or(1);
  const int64_t ep = opt_int(par, "ep", "parallel").value_or(1);
  int64_t vpp = 1;
  const std::string vpp_words = lower(opt_string(par, "vpp"));
  bool interleaved_unstated = false;
  static const std::regex stated_v(R"((?:^|[^a-z])(?:v|vpp|virtual[a-z ]*)\s*[=:]?\s*(\d+))");
  std::smatch v_match;
  if (const auto leading = annotated_int("vpp", vpp_words); leading && !opt_number(par, "vpp")) {
    vpp = *leading;  // "5 (interleaved)"
  } else if (contains(vpp_words, "interleav") && std::regex_search(vpp_words, v_match, stated_v)) {
    vpp = count_in_words(v_match[1].str(), "parallel.vpp \"" + vpp_words + "\"");  // "interleaved (V=5)"
  } else if (contains(vpp_words, "interleav") && !opt_number(par, "vpp")) {
    interleaved_unstated = true;  // "interleaved (V not stated)": an unstated knob, not vpp 1
  } else if (contains(vpp_words, "1f1b") || (!vpp_words.empty() && switch_in(par["vpp"]) == false)) {
    vpp = 1;  // "1F1B", "no", "none": not interleaved
  } else if (const auto v = opt_int(par, "vpp", "parallel")) {
    vpp = *v;
  } else if (pp > 1 && contains(lower(opt_string(par, "pipeline_schedule")), "interleav")) {
    interleaved_unstated = true;
  } else if (pp > 1 && s.framework.offers_interleaved) {
    // Not stated at all (absent, null, "not stated"): a knob the framework offers, taken as tuned
    // among 1 (plain 1F1B) and every interleaving the search proposes; validate lists the choice.
    s.vpp_choices = vpp_candidates(s.shape.layers, pp, ir::mtp_depths(s.graph));
    s.vpp_choices.insert(s.vpp_choices.begin(), 1);
    if (s.vpp_choices.size() == 1) s.vpp_choices.clear();  // only 1: nothing to choose
  }
  if (interleaved_unstated) {
    const std::string said = par.contains("vpp") && !par["vpp"].is_null() ? "parallel.vpp " + par["vpp"].dump()
                                                                            : "parallel.vpp not stated (interleaved schedule)";
    if (pp <= 1) throw RowSkipped(said + ": interleaving needs pp > 1, got pp " + std::to_string(pp));
    s.vpp_choices = vpp_candidates(s.shape.layers, pp, ir::mtp_depths(s.graph));
    if (s.vpp_choices.empty())
      throw RowSkipped(said + ": no vpp from 2 to " + std::to_string(search_defaults().max_vpp) + " splits " +
                       std::to_string(s.shape.layers) + " layers over pp " + std::to_string(pp) +
                       " (equal chunks, or with the embedding and loss counted as layers)");
    vpp = s.vpp_choices.front();
  }
  if (cp <= 0 || ep <= 0 || vpp <= 0) throw RowSkipped("parallel.cp, ep and vpp must be positive");
  const int64_t model_ranks = tp * pp * cp;
  int64_t dp = 0;
  if (const auto v = opt_int(par, "dp", "parallel"); v && *v > 0) {
    dp = *v;
  } else {
    if (s.num_gpus % model_ranks != 0)
      throw RowSkipped("parallel.dp not stated and num_gpus " + std::to_string(s.num_gpus) + " is not a multiple of tp*pp*cp " +
                       std::to_string(model_ranks));
    dp = s.num_gpus / model_ranks;
    as.push_back("parallel.dp not stated: num_gpus / (tp*pp*cp) = " + std::to_string(dp));
  }
  if (dp * model_ranks != s.num_gpus)
    throw RowSkipped("dp*tp*pp*cp = " + std::to_string(dp * model_ranks) + " is not num_gpus " + std::to_string(s.num_gpus));
  ir::Plan& p = s.plan;
  p.tp = tp;
  p.pp = pp;
  p.cp = cp;
  p.vpp = vpp;
  p.ep = ep;
  setup_expert_tp(par, dp * cp * tp, s);
  return dp;
}

/// Data-parallel sharding (ZeRO stage, FSDP, hybrid sharding) and sequence parallelism.
void setup_sharding(const json& par, int64_t dp, RowSetup& s) {
  auto& as = s.assumptions;
  ir::Plan& p = s.plan;
  const int64_t tp = p.tp, cp = p.cp;
  const bool fsdp = par.contains("fsdp") && par["fsdp"].is_boolean() && par["fsdp"].get<bool>();
  std::optional<int64_t> zero;
  const json& zero_field = par.contains("zero_stage") ? par["zero_stage"] : json();
  if (const auto n = number_in(zero_field)) {
    if (*n != 0 && *n != 1 && *n != 2 && *n != 3) throw RowSkipped("parallel.zero_stage " + zero_field.dump() + " is not 0-3");
    zero = int64_t(*n);
  } else if (zero_field.is_string()) {
    zero = zero_stage_from_words(zero_field.get<std::string>());
    if (zero) as.push_back("parallel.zero_stage " + zero_field.dump() + " read as ZeRO-" + std::to_string(*zero));
  }
  if (fsdp && (!zero || *zero == 0)) zero = 3;
  if (!zero) {
    if (const auto raw = opt_int(par, "fsdp_raw", "parallel")) {
      zero = *raw > 0 ? 3 : 1;
      as.push_back(std::string("parallel.fsdp_raw ") + (*raw > 0 ? "> 0: Megatron-FSDP (ZeRO-3)" : "= 0: DDP + distributed optimizer (ZeRO-1)"));
    } else if (contains(lower(opt_string(par, "overlap")), "overlap-param-gather")) {
      zero = 1;
      as.push_back("parallel.zero_stage not stated: --overlap-param-gather implies Megatron's distributed optimizer (ZeRO-1)");
    } else {
      zero = 0;
      // A knob: the stages the framework offers without FSDP-style parameter sharding (which a row
      // would state), the fastest that fits taken (validate.cpp estimate_best).
      for (int64_t z = 0; z <= 2 && dp > 1; ++z)
        if (s.framework.offers_zero[z]) s.zero_stage_choices.push_back(z);
      if (s.zero_stage_choices.size() < 2) {
        s.zero_stage_choices.clear();
        as.push_back("parallel.zero_stage not stated: 0 (DDP, replicated optimizer)");
      }
    }
  }
  p.zero_stage = *zero;
  if (*zero > 0 && s.zero_stage_choices.empty() && !s.framework.offers_zero[size_t(*zero)]) {
    // The row states a stage its framework's profile does not offer (e.g. Narayanan et al. 2021's
    // ZeRO-3 rows under megatron-lm): priced with that profile all the same, and said so; the profile
    // may say whose ZeRO-3 its era ran (megatron-lm: DeepSpeed's, framework_profile.cpp).
    std::string offered;
    for (size_t z = 0; z < 4; ++z)
      if (z == 0 || s.framework.offers_zero[z]) offered += (offered.empty() ? "" : ", ") + std::to_string(z);
    const bool deepspeed_era = *zero == 3 && s.framework.zero3_submodule_limits && s.framework.zero3_submodule_limits->per_tensor_blocking;
    as.push_back("parallel.zero_stage " + std::to_string(*zero) + ": the " + s.framework.name + " profile offers ZeRO " +
                 offered + "; priced as ZeRO-" + std::to_string(*zero) + " with that profile" +
                 (deepspeed_era ? ", whose ZeRO-3 is DeepSpeed's of its era (v0.3.12-v0.5.4: per-tensor blocking gathers)"
                                : " (no row-level framework says what ran it)"));
  }
  if (*zero >= 2 && p.pp > 1 && s.framework.fsdp_gathers_once_under_pipeline)
    as.push_back("FSDP under a " + std::to_string(p.pp) + "-stage pipeline in " + s.framework.name +
                 ": parameters gathered once per step and gradients reduce-scattered once (reshard_after_forward = "
                 "not pp; pipelining syncs only the last backward), priced as ZeRO-1 over the same shard group");
  if (*zero == 0) {
    p.dp_replicate = dp;
  } else {
    p.dp_shard = dp;
    const std::string strategy = lower(opt_string(par, "fsdp_sharding_strategy"));
    if (contains(strategy, "hybrid")) {
      const int64_t in_node = std::max<int64_t>(1, s.cluster.gpus_per_node / (tp * cp));
      if (dp % in_node == 0) {
        p.dp_shard = in_node;
        p.dp_replicate = dp / in_node;
        as.push_back("HYBRID_SHARD: shard within a node (" + std::to_string(in_node) + "), replicate across nodes");
      }
    }
  }
  if (const auto stated = switch_in(par.contains("sequence_parallel") ? par["sequence_parallel"] : json())) {
    p.sequence_parallel = *stated;
  } else if (tp > 1) {
    p.sequence_parallel = true;
    s.sequence_parallel_choices = {true, false};
  }
}

/// The micro-batch of a row that states none: global batch / (dp x grad_accum_steps) when those are
/// stated and divide; else an unstated knob: the planner's micro-batches that divide the per-replica
/// batch go to s.micro_batch_choices (validate_row keeps the fastest that fits) and the first is returned.
int64_t unstated_micro_batch(int64_t seqs, int64_t replicas, const std::optional<int64_t>& ga, RowSetup& s) {
  // A global batch that does not divide by dp is estimated at the nearest whole per-replica batch
  // (setup_batch says so); the micro-batch is tuned within that batch all the same.
  const int64_t per_replica = std::max<int64_t>(1, std::llround(double(seqs) / double(replicas)));
  if (ga && *ga > 0 && per_replica % *ga == 0) {
    s.assumptions.push_back("training.micro_batch_size not stated: global batch / (dp x grad_accum_steps) = " +
                            std::to_string(per_replica / *ga));
    return per_replica / *ga;
  }
  for (const int64_t m : search_defaults().micro_batches)
    if (per_replica % m == 0) s.micro_batch_choices.push_back(m);
  if (s.micro_batch_choices.empty()) s.micro_batch_choices.push_back(1);
  return s.micro_batch_choices.front();
}

/// Micro-batch and global batch (in sequences) into s.plan and s.settings.
void setup_batch(const json& training, int64_t seq, RowSetup& s) {
  auto& as = s.assumptions;
  ir::Plan& p = s.plan;
  const int64_t replicas = p.dp_replicate * p.dp_shard;
  int64_t mb = 0;
  if (const auto v = opt_int(training, "micro_batch_size", "training"); v && *v > 0) {
    mb = *v;
  } else if (const auto l = opt_int(training, "local_batch_size", "training"); l && *l > 0) {
    mb = *l;
    as.push_back("training.micro_batch_size not stated: local_batch_size " + std::to_string(mb));
  }
  const bool mb_unstated = mb == 0;
  if (mb_unstated) mb = 1;
  int64_t seqs = 0;
  const auto ga = opt_int(training, "grad_accum_steps", "training");
  if (const auto v = opt_int(training, "global_batch_size_seqs", "training"); v && *v > 0) {
    seqs = *v;
  } else if (const auto t = opt_number(training, "global_batch_size_tokens"); t && *t > 0) {
    seqs = std::max<int64_t>(1, std::llround(*t / double(seq)));
    as.push_back("global batch in sequences: global_batch_size_tokens / seq_length = " + std::to_string(seqs) +
                 (std::fmod(*t, double(seq)) != 0 ? " (rounded)" : ""));
  } else if (const auto l = opt_int(training, "local_batch_size", "training"); l && *l > 0) {
    seqs = *l * replicas;
    as.push_back("global batch not stated: local_batch_size x dp = " + std::to_string(seqs));
  } else if (ga && *ga > 0) {
    seqs = mb * *ga * replicas;
    as.push_back("global batch not stated: micro_batch x grad_accum x dp = " + std::to_string(seqs));
  } else {
    throw RowSkipped("training.global_batch_size_seqs is not stated");
  }
  if (seqs < replicas) throw RowSkipped("global batch " + std::to_string(seqs) + " is smaller than dp " + std::to_string(replicas));
  if (mb_unstated) mb = unstated_micro_batch(seqs, replicas, ga, s);
  if (seqs % (replicas * mb) != 0) {
    if (seqs < replicas * mb && seqs % replicas == 0) {
      as.push_back("micro_batch " + std::to_string(mb) + " exceeds the per-replica batch: " + std::to_string(seqs / replicas));
      mb = seqs / replicas;
    } else {
      const int64_t steps = std::max<int64_t>(1, std::llround(double(seqs) / double(replicas * mb)));
      as.push_back("global batch " + std::to_string(seqs) + " does not divide into dp x micro_batch; estimated with " +
                   std::to_string(steps * replicas * mb) + " sequences (" + std::to_string(steps) + " micro-batches)");
      seqs = steps * replicas * mb;
    }
  }
  p.micro_batch = mb;
  if (ga && *ga > 0 && seqs / (replicas * mb) != *ga)
    as.push_back("training.grad_accum_steps " + std::to_string(*ga) + " differs from global batch / (dp x micro_batch) = " +
                 std::to_string(seqs / (replicas * mb)) + "; the latter is used");
  s.settings.seq_len = seq;
  s.settings.global_batch_tokens = seqs * seq;
  // Packed sequences (mgt's own field; docs/validation.md §5): documents of this many tokens.
  if (const auto d = opt_int(training, "document_tokens", "training")) {
    if (*d <= 0 || *d > seq)
      throw RowSkipped("training.document_tokens " + std::to_string(*d) + " is not within 1.." + std::to_string(seq) +
                       " (the sequence length)");
    s.settings.document_tokens = *d;
  }
}

/// Compute dtype, fp8 linears and the MFU denominator.
void setup_precision(const ValidationSource& source, const json& row, RowSetup& s) {
  auto& as = s.assumptions;
  cost::TrainingSettings& st = s.settings;
  const std::string raw_precision = opt_string(row, "precision");
  const std::string prec = lower(raw_precision);
  // NVFP4 (fp4) and MXFP8 linear layers on Blackwell; a peak the hardware block does not state skips the row.
  // MXFP8 is spelled "MXFP8" on the Megatron-Bridge pages from 26.02 and "FP8-MX" (beside "FP8-CS",
  // per-tensor current scaling) in their 25.11 tables; both are the Transformer Engine MXFP8 recipe.
  const bool fp4 = contains(prec, "fp4"),
             mx = contains(prec, "mxfp8") || contains(prec, "fp8-mx") || contains(prec, "fp8mx") || contains(prec, "mx-fp8");
  if (fp4 && !contains(prec, "nvfp4"))
    as.push_back("precision \"" + raw_precision + "\": fp4 read as NVFP4 (the Transformer Engine recipe)");
  const size_t at_bf16 = prec.find("bf16"), at_fp16 = prec.find("fp16");
  const bool stated = !prec.empty() && !contains(prec, "not stated");
  if (stated && at_fp16 != std::string::npos && (at_bf16 == std::string::npos || at_fp16 < at_bf16)) {
    st.compute_dtype = ir::DType::f16;
  }
  st.fp8_linears = fp4 || contains(prec, "fp8") || contains(prec, "float8");
  st.linear_format = fp4 ? ir::LinearFormat::nvfp4 : mx ? ir::LinearFormat::mxfp8
                     : st.fp8_linears ? ir::LinearFormat::fp8 : ir::LinearFormat::none;
  if (st.compute_dtype != ir::DType::f16) {
    st.compute_dtype = ir::DType::bf16;
    // A low-precision format covers the linear layers only (Transformer Engine autocast); say what the rest runs in.
    if (st.fp8_linears && at_bf16 == std::string::npos)
      as.push_back("precision \"" + raw_precision + "\": " + ir::to_string(st.linear_format) +
                   " linear layers, bf16 for every other op (not stated)");
    else if (!stated || at_bf16 == std::string::npos)
      as.push_back("precision \"" + raw_precision + "\": bf16 compute assumed");
  }
  if (st.fp8_linears) {
    const char* key = fp4 ? "fp4" : "fp8";
    const auto peak = peak_of(source.hardware[s.system], key, s.system);
    if (!peak) throw RowSkipped(std::string("precision ") + key + " but the hardware block states no " + key + " peak");
    if (st.linear_format != ir::LinearFormat::fp8 && s.cluster.gpu.arch != ir::GpuArch::blackwell)
      throw RowSkipped("precision \"" + raw_precision + "\" needs Blackwell tensor cores; " + s.cluster.gpu.name + " is not");
    s.peak_flops_per_s = *peak;
  } else {
    s.peak_flops_per_s = ir::peak_flops_per_s(s.cluster.gpu, st.compute_dtype);
  }
}

}  // namespace

cost::FrameworkProfile row_framework(const ValidationSource& source, const json& row, std::vector<std::string>& assumptions) {
  const bool own = row.contains("framework") && !row["framework"].is_null();
  const json& field = own ? row["framework"] : source.framework;
  const std::string where = own ? "framework" : "the file's framework";
  if (field.is_null()) {
    assumptions.push_back("framework not stated: the default profile " + cost::default_framework_profile().name);
    return cost::default_framework_profile();
  }
  std::string name;
  std::vector<std::string> features;
  if (field.is_string()) {
    name = field.get<std::string>();
  } else if (field.is_object() && field.contains("name") && field["name"].is_string()) {
    name = field["name"].get<std::string>();
    if (field.contains("features") && !field["features"].is_null()) {
      if (!field["features"].is_array())
        throw RowSkipped(where + ".features is " + field["features"].dump() + ": expected an array of strings");
      for (const auto& f : field["features"]) {
        if (!f.is_string()) throw RowSkipped(where + ".features holds " + f.dump() + ": expected strings");
        features.push_back(f.get<std::string>());
      }
    }
  } else {
    throw RowSkipped(where + " is " + field.dump() + ": expected {\"name\": ..., \"features\": [...]}");
  }
  cost::FrameworkSelection selected = cost::select_framework(name, features);
  if (field.is_object() && field.contains("version") && field["version"].is_string())
    if (auto note = cost::apply_framework_version(selected.profile, field["version"].get<std::string>()))
      selected.notes.push_back(*note);
  if (!selected.known)
    cost::warn_once("validation framework \"" + name + "\" has no profile; the default " + selected.profile.name +
                    " profile is used (docs/cost-model.md §9 lists the profiles)");
  std::string stated = selected.profile.name;
  for (const auto& f : features) stated += (f == features.front() ? " with " : ", ") + f;
  assumptions.push_back("framework: " + stated);
  for (const auto& note : selected.notes) assumptions.push_back(note);
  return selected.profile;
}

RowSetup setup_row(const ValidationSource& source, const json& row) {
  RowSetup s;
  const std::string task = lower(opt_string(row, "task"));
  if (contains(task, "lora")) {
    s.settings.task = contains(task, "qlora") ? ir::Task::qlora : ir::Task::lora;
    s.assumptions.push_back("task \"" + task + "\": LoRA rank 16 on q,k,v,o,gate,up,down assumed (mgt's defaults)");
  }
  const json& model = row.contains("model") ? row["model"] : json();
  if (!model.is_object()) throw RowSkipped("model is not an inline object");
  const json& training = row.contains("training") && row["training"].is_object() ? row["training"] : json::object();
  const json& par = row.contains("parallel") && row["parallel"].is_object() ? row["parallel"] : json::object();
  s.framework = row_framework(source, row, s.assumptions);
  cost::apply_plan_semantics(s.framework, s.settings);
  const int64_t seq = setup_model(source, row, model, training, s);
  s.system = row["system"].get<std::string>();
  s.cluster = cluster_from_hardware(s.system, source.hardware[s.system], s.assumptions);
  const int64_t dp = setup_parallel_sizes(par, s);
  setup_sharding(par, dp, s);
  s.plan.recompute = parse_recompute(row, s);
  setup_batch(training, seq, s);
  setup_precision(source, row, s);
  return s;
}
}  // namespace mgt::plan
