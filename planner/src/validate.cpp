// `mgt-plan validate` (docs/validation.md): published measurements -> Graph, ClusterSpec, Plan,
// TrainingSettings -> Estimate -> like-with-like comparison.
#include "mgt/planner/validate.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

namespace mgt::plan {

namespace {

using json = nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

std::string fmt(const char* format, double value) {
  char buf[96];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

/// An integer field: nullopt when unstated; RowSkipped when it is a string that says something
/// else ("<=16", "96..4608") or a non-integral number.
std::optional<int64_t> opt_int(const json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return std::nullopt;
  const json& v = obj[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::abs(d) < 9.0e18 && std::floor(d) == d) return int64_t(d);  // range first: the cast is UB beyond int64
  }
  if (v.is_string()) {
    const std::string s = lower(v.get<std::string>());
    if (s.empty() || contains(s, "not stated") || s == "n/a" || s == "null") return std::nullopt;
  }
  throw RowSkipped(where + "." + key + " is not one integer (" + v.dump() + ")");
}

std::optional<double> opt_number(const json& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return std::nullopt;
  return obj[key].get<double>();
}

std::string opt_string(const json& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return {};
  return obj[key].get<std::string>();
}

int64_t require_row_int(const json& obj, const std::string& key, const std::string& where) {
  const auto v = opt_int(obj, key, where);
  if (!v) throw RowSkipped(where + "." + key + " is not stated");
  if (*v <= 0) throw RowSkipped(where + "." + key + " must be positive, got " + std::to_string(*v));
  return *v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Files

ValidationSource validation_source_from_json(const json& doc, const std::string& path) {
  if (!doc.is_object()) throw ir::InputError(path, "", "expected a JSON object (a validation file)");
  ValidationSource s;
  s.path = path;
  s.name = std::filesystem::path(path).stem().string();
  s.citation = opt_string(doc, "source");
  s.notes = opt_string(doc, "source_notes");
  if (!doc.contains("rows")) {
    if (doc.contains("models") || doc.contains("gpus") || doc.contains("systems")) {
      s.catalog = true;
      return s;
    }
    throw ir::InputError(path, "rows", "missing", "a validation file has \"rows\": [ ... ] (examples/validation/README.md)");
  }
  if (!doc["rows"].is_array()) throw ir::InputError(path, "rows", "expected an array, got " + std::string(doc["rows"].type_name()));
  if (doc.contains("hardware")) {
    if (!doc["hardware"].is_object())
      throw ir::InputError(path, "hardware", "expected an object of system blocks, got " + std::string(doc["hardware"].type_name()));
    s.hardware = doc["hardware"];
  }
  std::set<std::string> ids;
  for (size_t i = 0; i < doc["rows"].size(); ++i) {
    const json& row = doc["rows"][i];
    const std::string field = "rows[" + std::to_string(i) + "]";
    if (!row.is_object()) throw ir::InputError(path, field, "expected an object, got " + std::string(row.type_name()));
    if (!row.contains("id") || !row["id"].is_string() || row["id"].get<std::string>().empty())
      throw ir::InputError(path, field + ".id", "missing or not a non-empty string", "every row has a unique \"id\"");
    if (!row.contains("system") || !row["system"].is_string())
      throw ir::InputError(path, field + ".system", "missing or not a string", "name a key of \"hardware\"");
    const std::string system = row["system"].get<std::string>();
    if (!s.hardware.contains(system) || !s.hardware[system].is_object())
      throw ir::InputError(path, field + ".system", "\"" + system + "\" is not a key of \"hardware\"",
                           "add the system block or fix the name");
    if (row.contains("measured") && !row["measured"].is_object())
      throw ir::InputError(path, field + ".measured", "expected an object, got " + std::string(row["measured"].type_name()));
    s.rows.push_back(row);
  }
  return s;
}

ValidationSource read_validation_source(const std::string& path) {
  return validation_source_from_json(ir::read_json_file(path), path);
}

// ---------------------------------------------------------------------------------------------
// Model

ModelShape model_shape(const json& model, std::vector<std::string>& assumptions) {
  if (!model.is_object()) throw RowSkipped("model is not an inline object");
  ModelShape m;
  m.name = opt_string(model, "name");
  const std::string type = lower(opt_string(model, "type"));
  if (contains(type, "hybrid")) throw RowSkipped("unsupported architecture: model.type \"" + type + "\" (hybrid Mamba layers)");
  m.layers = require_row_int(model, "num_layers", "model");
  m.hidden = require_row_int(model, "hidden_size", "model");
  m.heads = require_row_int(model, "num_attention_heads", "model");
  m.vocab = require_row_int(model, "vocab_size", "model");
  if (const auto kv = opt_int(model, "num_kv_heads", "model")) {
    m.kv_heads = *kv;
  } else {
    m.kv_heads = m.heads;
    assumptions.push_back("model.num_kv_heads not stated: " + std::to_string(m.heads) + " (multi-head attention)");
  }
  if (m.kv_heads <= 0 || m.heads % m.kv_heads != 0)
    throw RowSkipped("model.num_kv_heads " + std::to_string(m.kv_heads) + " does not divide num_attention_heads " +
                     std::to_string(m.heads));
  if (auto p = opt_number(model, "params_B")) m.published_params = *p * 1e9;
  m.tied = model.contains("tied_embeddings") && model["tied_embeddings"].is_boolean() && model["tied_embeddings"].get<bool>();
  if (!model.contains("tied_embeddings") || !model["tied_embeddings"].is_boolean())
    assumptions.push_back("model.tied_embeddings not stated: untied");

  const std::string act = lower(opt_string(model, "activation"));
  const std::string norm = lower(opt_string(model, "normalization"));
  if (act.empty()) assumptions.push_back("model.activation not stated: plain GeLU MLP (Megatron GPT default)");
  m.gated = contains(act, "glu") || (contains(act, "silu") && !contains(act, "relu"));

  // Mixture of experts.
  const bool moe = contains(type, "moe") || (model.contains("moe") && model["moe"].is_object());
  if (moe) {
    const json& e = model.contains("moe") ? model["moe"] : json();
    if (!e.is_object()) throw RowSkipped("model.type is moe but model.moe is not stated");
    m.experts = require_row_int(e, "num_experts", "model.moe");
    m.top_k = require_row_int(e, "top_k", "model.moe");
    m.moe_ffn = require_row_int(e, "moe_ffn_hidden_size", "model.moe");
    const int64_t shared = opt_int(e, "shared_experts", "model.moe").value_or(0);
    const int64_t shared_ffn = opt_int(e, "shared_expert_ffn_hidden_size", "model.moe").value_or(m.moe_ffn);
    m.shared_ffn = shared * shared_ffn;
    m.dense_layers = opt_int(e, "first_k_dense_layers", "model.moe").value_or(0);
    m.gated = true;  // every supported MoE family uses SwiGLU experts
  }
  const bool has_mla = (model.contains("mla") && model["mla"].is_object()) || lower(opt_string(model, "attention")) == "mla";
  if (has_mla) {
    if (!model.contains("mla") || !model["mla"].is_object()) throw RowSkipped("model.attention is mla but model.mla is not stated");
    const json& a = model["mla"];
    m.mla = true;
    m.q_lora = opt_int(a, "q_lora_rank", "model.mla").value_or(0);
    m.kv_lora = require_row_int(a, "kv_lora_rank", "model.mla");
    m.qk_nope = require_row_int(a, "qk_nope_head_dim", "model.mla");
    m.qk_rope = require_row_int(a, "qk_rope_head_dim", "model.mla");
    m.v_head = require_row_int(a, "v_head_dim", "model.mla");
    m.head_dim = m.qk_nope + m.qk_rope;
    m.kv_heads = m.heads;
  } else if (const auto d = opt_int(model, "head_dim", "model")) {
    m.head_dim = *d;
  } else {
    if (m.hidden % m.heads != 0) throw RowSkipped("model.head_dim not stated and hidden_size is not a multiple of heads");
    m.head_dim = m.hidden / m.heads;
    assumptions.push_back("model.head_dim not stated: hidden_size / num_attention_heads = " + std::to_string(m.head_dim));
  }

  if (const auto f = opt_int(model, "ffn_hidden_size", "model")) {
    m.ffn = *f;
  } else if (moe && m.dense_layers == 0) {
    m.ffn = m.moe_ffn;  // no dense layer uses it
  } else if (!m.gated) {
    m.ffn = 4 * m.hidden;
    assumptions.push_back("model.ffn_hidden_size not stated: 4 x hidden_size = " + std::to_string(m.ffn));
  } else {
    throw RowSkipped("model.ffn_hidden_size is not stated (needed for a gated MLP)");
  }

  // The Hugging Face family whose graph matches the row's features (docs/validation.md, "Models").
  if (m.mla) {
    if (!moe) throw RowSkipped("unsupported architecture: dense model with multi-head latent attention");
    m.family = "deepseek_v3";
    if (m.shared_ffn % m.moe_ffn != 0)
      throw RowSkipped("unsupported architecture: shared expert width is not a multiple of the routed expert width");
  } else if (moe) {
    if (m.shared_ffn > 0 || m.dense_layers > 0)
      throw RowSkipped("unsupported architecture: MoE with shared experts or dense layers but without MLA "
                       "(no supported Hugging Face family)");
    m.family = "mixtral";
  } else if (m.gated) {
    m.family = "llama";
    if (!act.empty() && !contains(act, "swiglu") && !contains(act, "silu"))
      assumptions.push_back("model: gated MLP \"" + act + "\" modelled as SwiGLU (same GEMMs)");
    if (!norm.empty() && !contains(norm, "rms")) assumptions.push_back("model: \"" + norm + "\" modelled as RMSNorm (HF llama)");
    assumptions.push_back("model: gated MLP -> HF model_type llama (rotary positions, no biases)");
  } else {
    m.family = "gpt2";
    if (m.kv_heads != m.heads) {
      assumptions.push_back("model: grouped-query attention modelled as multi-head (gpt2 family has no GQA)");
      m.kv_heads = m.heads;
    }
    if (m.head_dim * m.heads != m.hidden) {
      assumptions.push_back("model: head_dim " + std::to_string(m.head_dim) + " x heads != hidden_size; gpt2 family uses " +
                            std::to_string(m.hidden / m.heads));
      m.head_dim = m.hidden / m.heads;
    }
    if (!act.empty() && !contains(act, "gelu")) assumptions.push_back("model: \"" + act + "\" MLP modelled as GeLU (same GEMMs)");
    if (contains(norm, "rms")) assumptions.push_back("model: RMSNorm modelled as LayerNorm (gpt2 family)");
    assumptions.push_back("model: plain MLP -> HF model_type gpt2 (LayerNorm, biases, learned position table of seq_len rows)");
  }
  return m;
}

json hf_config(const ModelShape& m, int64_t seq_len) {
  json c;
  if (m.family == "gpt2") {
    c = {{"model_type", "gpt2"}, {"n_embd", m.hidden}, {"n_layer", m.layers}, {"n_head", m.heads},
         {"n_inner", m.ffn},     {"vocab_size", m.vocab}, {"n_positions", seq_len}, {"tie_word_embeddings", m.tied}};
    return c;
  }
  c = {{"model_type", m.family},
       {"hidden_size", m.hidden},
       {"num_hidden_layers", m.layers},
       {"num_attention_heads", m.heads},
       {"num_key_value_heads", m.kv_heads},
       {"intermediate_size", m.ffn},
       {"vocab_size", m.vocab},
       {"max_position_embeddings", seq_len},
       {"tie_word_embeddings", m.tied}};
  if (m.family == "llama" || m.family == "mixtral") c["head_dim"] = m.head_dim;
  if (m.family == "mixtral") {
    c["num_local_experts"] = m.experts;
    c["num_experts_per_tok"] = m.top_k;
    c["intermediate_size"] = m.moe_ffn;
  }
  if (m.family == "deepseek_v3") {
    c["q_lora_rank"] = m.q_lora;
    c["kv_lora_rank"] = m.kv_lora;
    c["qk_nope_head_dim"] = m.qk_nope;
    c["qk_rope_head_dim"] = m.qk_rope;
    c["v_head_dim"] = m.v_head;
    c["n_routed_experts"] = m.experts;
    c["num_experts_per_tok"] = m.top_k;
    c["moe_intermediate_size"] = m.moe_ffn;
    c["first_k_dense_replace"] = m.dense_layers;
    c["n_shared_experts"] = m.shared_ffn / m.moe_ffn;
  }
  return c;
}

namespace {
/// Attention projection parameters of one layer.
double attention_params(const ModelShape& m) {
  const double h = double(m.hidden), a = double(m.heads);
  if (m.mla) {
    const double q = m.q_lora > 0 ? h * double(m.q_lora) + double(m.q_lora) * a * double(m.head_dim) : h * a * double(m.head_dim);
    const double kv = h * double(m.kv_lora + m.qk_rope) + double(m.kv_lora) * a * double(m.qk_nope + m.v_head);
    return q + kv + a * double(m.v_head) * h;
  }
  const double d = double(m.head_dim);
  return h * a * d + 2 * h * double(m.kv_heads) * d + a * d * h;
}

/// The attention-score term of PaLM's formula, per token: 12·l·a·d·s (d averaged over q/k and v).
double attention_term(const ModelShape& m, int64_t seq) {
  const double d_v = m.mla ? double(m.v_head) : double(m.head_dim);
  return 6.0 * double(m.layers) * double(m.heads) * (double(m.head_dim) + d_v) * double(seq);
}
}  // namespace

double matmul_params_active(const ModelShape& m) {
  const double h = double(m.hidden);
  const double mats = m.gated ? 3.0 : 2.0;
  const double dense_mlp = mats * h * double(m.ffn);
  double total = 0;
  if (m.experts == 0) {
    total = double(m.layers) * (attention_params(m) + dense_mlp);
  } else {
    const double moe_mlp = double(m.top_k) * 3.0 * h * double(m.moe_ffn) + 3.0 * h * double(m.shared_ffn) + h * double(m.experts);
    total = double(m.dense_layers) * (attention_params(m) + dense_mlp) +
            double(m.layers - m.dense_layers) * (attention_params(m) + moe_mlp);
  }
  return total + double(m.vocab) * h;  // LM head
}

std::string to_string(FlopConvention c) {
  switch (c) {
    case FlopConvention::model: return "model FLOPs 6N + 12·l·a·d·s (PaLM; Megatron-Core, NeMo, Korthikanti)";
    case FlopConvention::megatron_eq3: return "Megatron Eq. 3: 24·k·l·h²(1 + s/6h + V/16lh), k = 4 with full recompute";
    case FlopConvention::mosaicml: return "llm-foundry: 6·N_published + 12·l·h·s (HFU 8N + 16lhs with checkpointing)";
    case FlopConvention::torchtitan: return "torchtitan: 6·(N - embedding) + 12·l·a·d·s";
  }
  return "?";
}

FlopConvention flop_convention(const std::string& tflops_kind, const std::string& citation, const std::string& notes) {
  const std::string kind = lower(tflops_kind);
  if (contains(kind, "eq.3") || contains(kind, "eq. 3") || contains(kind, "eq 3")) return FlopConvention::megatron_eq3;
  const std::string all = kind + " " + lower(citation) + " " + lower(notes);
  if (contains(all, "llm-foundry") || contains(all, "llmfoundry") || contains(all, "mosaicml")) return FlopConvention::mosaicml;
  if (contains(all, "torchtitan")) return FlopConvention::torchtitan;
  return FlopConvention::model;
}

double flops_per_token(FlopConvention c, const ModelShape& m, int64_t seq, ir::Recompute recompute, bool hardware) {
  const double l = double(m.layers), h = double(m.hidden), s = double(seq), V = double(m.vocab);
  switch (c) {
    case FlopConvention::megatron_eq3: {
      const double k = recompute == ir::Recompute::full ? 4.0 : 3.0;
      return 24.0 * k * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
    }
    case FlopConvention::mosaicml: {
      const double n = m.published_params > 0 ? m.published_params : matmul_params_active(m);
      const double attn = l * h * s;  // llm-foundry: n_layers * 2 * 2 * d_model * msl^2 per sequence
      if (hardware && recompute == ir::Recompute::full) return 8.0 * n + 16.0 * attn;
      return 6.0 * n + 12.0 * attn;
    }
    case FlopConvention::torchtitan: {
      // torchtitan counts every parameter but the token embedding (the LM head included).
      const double n = matmul_params_active(m);
      const double f = 6.0 * n + attention_term(m, seq);
      return hardware && recompute == ir::Recompute::full ? f * 4.0 / 3.0 : f;
    }
    case FlopConvention::model: {
      const double head = 6.0 * V * h;
      const double layers = 6.0 * (matmul_params_active(m) - V * h) + attention_term(m, seq);
      if (!hardware || recompute == ir::Recompute::none) return layers + head;
      if (recompute == ir::Recompute::selective) return layers + head + attention_term(m, seq);  // Korthikanti: s/3h
      return layers * 4.0 / 3.0 + head;  // full: every layer's forward again, not the LM head
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Cluster

namespace {
std::string preset_for_gpu(const std::string& gpu) {
  const std::string g = lower(gpu);
  if (contains(g, "gb200") || contains(g, "gb300")) return "gb200-nvl72";
  if (contains(g, "b200") || contains(g, "b300")) return "b200";
  if (contains(g, "h200")) return "h200-sxm";
  if (contains(g, "h100")) return "h100-sxm";
  if (contains(g, "a100")) return "a100-80g-sxm";
  if (contains(g, "4090")) return "rtx4090-pcie";
  return {};
}

std::optional<double> peak_of(const json& block, const std::string& key) {
  if (!block.contains("peak_dense_tflops") || !block["peak_dense_tflops"].is_object()) return std::nullopt;
  const auto v = opt_number(block["peak_dense_tflops"], key);
  if (v && *v > 0) return *v * 1e12;
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
  std::string preset = preset_for_gpu(gpu);
  if (preset.empty()) {
    preset = "a100-80g-sxm";
    assumptions.push_back("hardware: no preset for GPU \"" + gpu + "\": a100-80g-sxm's latencies, PCIe and fp32 peak kept");
  }
  ir::ClusterSpec c = ir::cluster_preset(preset);
  c.name = system_id;
  c.source = opt_string(block, "spec_source").empty() ? "validation hardware block " + system_id : opt_string(block, "spec_source");
  if (!gpu.empty()) c.gpu.name = gpu;
  std::vector<std::string> kept;

  const auto bf16 = peak_of(block, "bf16"), fp16 = peak_of(block, "fp16"), fp8 = peak_of(block, "fp8");
  if (bf16 || fp16) {
    c.gpu.peak_bf16_flops_per_s = bf16 ? *bf16 : *fp16;
    c.gpu.peak_fp16_flops_per_s = fp16 ? *fp16 : 0;
    if (!bf16) assumptions.push_back("hardware: no bf16 peak stated: the fp16 peak stands in for it");
  } else {
    kept.push_back("bf16/fp16 peak");
  }
  c.gpu.peak_fp8_flops_per_s = fp8 ? *fp8 : 0;
  if (const auto v = opt_number(block, "hbm_gb"); v && *v > 0)
    c.gpu.hbm_bytes = int64_t(std::llround(*v * double(1ll << 30)));  // datasheet GB as GiB (docs/cluster.md)
  else
    kept.push_back("HBM capacity");
  if (const auto v = opt_number(block, "hbm_bw_TBps"); v && *v > 0)
    c.gpu.hbm_bytes_per_s = *v * 1e12;
  else
    kept.push_back("HBM bandwidth");
  if (const auto v = opt_number(block, "nvlink_bw_GBps_per_gpu_bidir"); v && *v > 0)
    c.nvlink_bytes_per_s = *v * 1e9 / 2.0;  // bidirectional total -> one direction
  else
    kept.push_back("NVLink bandwidth");
  if (const auto v = opt_number(block, "gpus_per_node"); v && *v >= 1)
    c.gpus_per_node = int64_t(*v);
  else
    kept.push_back("GPUs per node");
  if (const auto v = opt_number(block, "nvlink_domain_gpus"); v && *v >= 1) {
    c.nvlink_domain_gpus = int64_t(*v);
  } else {
    c.nvlink_domain_gpus = c.nvlink_bytes_per_s > 0 ? c.gpus_per_node : 1;
    kept.push_back("NVLink domain (= GPUs per node)");
  }
  if (c.nvlink_domain_gpus % c.gpus_per_node != 0 && c.gpus_per_node % c.nvlink_domain_gpus != 0) {
    assumptions.push_back("hardware: nvlink_domain_gpus " + std::to_string(c.nvlink_domain_gpus) +
                          " neither divides nor is a multiple of gpus_per_node; set to gpus_per_node");
    c.nvlink_domain_gpus = c.gpus_per_node;
  }
  if (const auto v = opt_number(block, "nics_per_node"); v && *v >= 1)
    c.nics_per_node = int64_t(*v);
  else
    kept.push_back("NICs per node (" + std::to_string(c.nics_per_node) + ")");
  if (const auto v = opt_number(block, "nic_gbps"); v && *v > 0) {
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

ir::Recompute parse_recompute(const json& row, std::optional<int64_t>& layers, std::vector<std::string>& assumptions) {
  const std::string raw = row.contains("recompute") && row["recompute"].is_string() ? row["recompute"].get<std::string>() : "";
  const std::string r = lower(raw);
  if (r.empty() || contains(r, "not stated")) {
    assumptions.push_back("recompute not stated: none (the Megatron-Core, torchtitan and nanotron default)");
    return ir::Recompute::none;
  }
  if (r.rfind("none", 0) == 0 || r == "no") return ir::Recompute::none;
  if (r.rfind("selective", 0) == 0) return ir::Recompute::selective;
  if (r.rfind("full", 0) == 0) {
    static const std::regex re(R"((\d+)\s*layer)");
    std::smatch match;
    if (std::regex_search(r, match, re)) layers = std::stoll(match[1].str());
    return ir::Recompute::full;
  }
  throw RowSkipped("recompute \"" + raw + "\" does not map to none, selective or full");
}

}  // namespace

RowSetup setup_row(const ValidationSource& source, const json& row) {
  RowSetup s;
  auto& as = s.assumptions;
  const std::string task = lower(opt_string(row, "task"));
  if (contains(task, "lora")) throw RowSkipped("task lora is not modelled (frozen base weights, adapter optimizer states)");
  const json& model = row.contains("model") ? row["model"] : json();
  if (!model.is_object()) throw RowSkipped("model is not an inline object");
  const json& training = row.contains("training") && row["training"].is_object() ? row["training"] : json::object();
  const json& par = row.contains("parallel") && row["parallel"].is_object() ? row["parallel"] : json::object();

  // ---- sequence length and model ----
  int64_t seq = 0;
  if (const auto v = opt_int(training, "seq_length", "training")) {
    seq = *v;
  } else if (const auto m = opt_int(model, "seq_length", "model")) {
    seq = *m;
    as.push_back("training.seq_length not stated: model.seq_length " + std::to_string(seq));
  }
  if (seq <= 0) throw RowSkipped("training.seq_length is not stated");
  s.shape = model_shape(model, as);
  const json config = hf_config(s.shape, seq);
  try {
    s.graph = ir::graph_from_hf_config(config, source.name + ".json#" + row["id"].get<std::string>());
  } catch (const ir::InputError& e) {
    throw RowSkipped(std::string("model does not build: ") + e.what());
  }
  if (!s.shape.name.empty()) s.graph.info.name = s.shape.name;

  // ---- cluster ----
  s.system = row["system"].get<std::string>();
  s.cluster = cluster_from_hardware(s.system, source.hardware[s.system], as);

  // ---- parallel sizes ----
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
  if (const auto v = opt_int(par, "vpp", "parallel")) {
    vpp = *v;
  } else if (pp > 1 && contains(lower(opt_string(par, "pipeline_schedule")), "interleav")) {
    as.push_back("parallel.vpp not stated although the schedule is interleaved: vpp 1 (plain 1F1B)");
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

  // ---- data-parallel sharding ----
  ir::Plan& p = s.plan;
  p.tp = tp;
  p.pp = pp;
  p.cp = cp;
  p.vpp = vpp;
  p.ep = ep;
  const bool fsdp = par.contains("fsdp") && par["fsdp"].is_boolean() && par["fsdp"].get<bool>();
  std::optional<int64_t> zero;
  if (par.contains("zero_stage") && par["zero_stage"].is_number_integer()) {
    zero = par["zero_stage"].get<int64_t>();
    if (*zero < 0 || *zero > 3) throw RowSkipped("parallel.zero_stage " + std::to_string(*zero) + " is not 0-3");
  } else if (par.contains("zero_stage") && par["zero_stage"].is_string()) {
    const std::string z = lower(par["zero_stage"].get<std::string>());
    if (contains(z, "3") || contains(z, "full_shard") || contains(z, "fsdp")) zero = 3;
    else if (contains(z, "2") || contains(z, "shard_grad_op")) zero = 2;
    else if (contains(z, "1") || contains(z, "distributed optimizer")) zero = 1;
    else if (!contains(z, "not stated")) throw RowSkipped("parallel.zero_stage \"" + z + "\" does not map to a ZeRO stage");
    if (zero) as.push_back("parallel.zero_stage \"" + z + "\" read as ZeRO-" + std::to_string(*zero));
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
      as.push_back("parallel.zero_stage not stated: 0 (DDP, replicated optimizer)");
    }
  }
  p.zero_stage = *zero;
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
  if (par.contains("sequence_parallel") && par["sequence_parallel"].is_boolean()) {
    p.sequence_parallel = par["sequence_parallel"].get<bool>();
  } else if (tp > 1) {
    as.push_back("parallel.sequence_parallel not stated: on with tp > 1");
  }
  p.recompute = parse_recompute(row, p.recompute_layers, as);

  // ---- batch ----
  const int64_t replicas = p.dp_replicate * p.dp_shard;
  int64_t mb = 0;
  if (const auto v = opt_int(training, "micro_batch_size", "training"); v && *v > 0) {
    mb = *v;
  } else if (const auto l = opt_int(training, "local_batch_size", "training"); l && *l > 0) {
    mb = *l;
    as.push_back("training.micro_batch_size not stated: local_batch_size " + std::to_string(mb));
  } else {
    mb = 1;
    as.push_back("training.micro_batch_size not stated: 1");
  }
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

  // ---- precision ----
  cost::TrainingSettings& st = s.settings;
  st.seq_len = seq;
  st.global_batch_tokens = seqs * seq;
  const std::string raw_precision = opt_string(row, "precision");
  const std::string prec = lower(raw_precision);
  if (contains(prec, "fp4")) throw RowSkipped("precision \"" + raw_precision + "\": fp4 training is not modelled");
  const size_t at_bf16 = prec.find("bf16"), at_fp16 = prec.find("fp16");
  const bool stated = !prec.empty() && !contains(prec, "not stated");
  if (stated && at_fp16 != std::string::npos && (at_bf16 == std::string::npos || at_fp16 < at_bf16)) {
    st.compute_dtype = ir::DType::f16;
  } else {
    st.compute_dtype = ir::DType::bf16;
    if (!stated || at_bf16 == std::string::npos) as.push_back("precision \"" + raw_precision + "\": bf16 compute assumed");
  }
  st.fp8_linears = contains(prec, "fp8") || contains(prec, "float8");
  if (st.fp8_linears) {
    const auto fp8 = peak_of(source.hardware[s.system], "fp8");
    if (!fp8) throw RowSkipped("precision fp8 but the hardware block states no fp8 peak");
    s.peak_flops_per_s = *fp8;
  } else {
    s.peak_flops_per_s = ir::peak_flops_per_s(s.cluster.gpu, st.compute_dtype);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Metrics

std::string to_string(MetricKind kind) {
  switch (kind) {
    case MetricKind::throughput: return "throughput";
    case MetricKind::memory: return "memory";
    case MetricKind::oom: return "oom";
  }
  return "?";
}

namespace {
const char* const kThroughputPriority[] = {"iteration_time_s", "tokens_per_sec_per_gpu", "tokens_per_sec_total",
                                            "samples_per_sec",  "samples_per_sec_total",  "model_tflops_per_gpu",
                                            "tflops_per_gpu",   "mfu",                    "hfu",
                                            "pct_of_peak"};
const char* const kMemoryKeys[] = {"peak_memory_GiB", "peak_memory_GB", "param_and_optimizer_memory_GiB",
                                   "activation_memory_GiB"};

bool positive_number(const json& measured, const char* key) {
  return measured.contains(key) && measured[key].is_number() && measured[key].get<double>() > 0;
}
}  // namespace

std::vector<std::pair<std::string, MetricKind>> comparable_metrics(const json& measured) {
  std::vector<std::pair<std::string, MetricKind>> out;
  if (!measured.is_object()) return out;
  for (const char* key : kThroughputPriority)
    if (positive_number(measured, key)) {
      out.push_back({key, MetricKind::throughput});
      break;
    }
  for (const char* key : kMemoryKeys)
    if (positive_number(measured, key)) out.push_back({key, MetricKind::memory});
  if (measured.contains("oom") && measured["oom"].is_boolean() && measured["oom"].get<bool>())
    out.push_back({"oom", MetricKind::oom});
  return out;
}

namespace {

/// The prediction in the units of `metric`, with a note saying how.
double predict(const std::string& metric, const json& measured, const ValidationSource& source, const RowSetup& s,
               const cost::Estimate& e, std::string& conversion, std::vector<std::string>& assumptions) {
  const double tps_gpu = e.tokens_per_s_per_gpu;
  const double gpus = double(s.num_gpus), seq = double(s.settings.seq_len);
  constexpr double kGiB = double(1ll << 30);
  if (metric == "iteration_time_s") return e.step_time_s;
  if (metric == "tokens_per_sec_per_gpu") return tps_gpu;
  if (metric == "tokens_per_sec_total") {
    conversion = "tokens/s/GPU x " + std::to_string(s.num_gpus) + " GPUs";
    return tps_gpu * gpus;
  }
  if (metric == "samples_per_sec" || metric == "samples_per_sec_total") {
    conversion = "tokens/s/GPU x GPUs / seq_len (whole job)";
    return tps_gpu * gpus / seq;
  }
  if (metric == "peak_memory_GiB") return double(e.memory.peak_bytes) / kGiB;
  if (metric == "peak_memory_GB") {
    const std::string kind = lower(opt_string(measured, "memory_kind"));
    if (contains(kind, "nvidia-smi")) {
      conversion = "GB read as GiB (nvidia-smi reports MiB)";
      return double(e.memory.peak_bytes) / kGiB;
    }
    conversion = "GB = 1e9 bytes";
    return double(e.memory.peak_bytes) / 1e9;
  }
  if (metric == "param_and_optimizer_memory_GiB") {
    conversion = "parameters + gradients + optimizer states";
    return double(e.memory.parameters_bytes + e.memory.gradients_bytes + e.memory.optimizer_bytes) / kGiB;
  }
  if (metric == "activation_memory_GiB") {
    conversion = "saved activations";
    return double(e.memory.activations_bytes) / kGiB;
  }
  // FLOP-rate metrics: tokens/s/GPU times the source's own FLOPs per token.
  const std::string kind = opt_string(measured, "tflops_kind");
  const FlopConvention c = flop_convention(kind, source.citation, source.notes);
  const bool hardware = metric == "hfu" || contains(lower(kind), "hardware") || contains(lower(kind), "incl. recompute");
  const double f = flops_per_token(c, s.shape, s.settings.seq_len, s.plan.recompute, hardware);
  if (contains(lower(kind), "not stated"))
    assumptions.push_back("FLOP definition not stated by the source: " + to_string(c) + " assumed");
  conversion = to_string(c) + (hardware ? ", hardware (incl. recompute)" : "") + ": " + fmt("%.4g", f) + " FLOPs/token";
  const double rate = tps_gpu * f;
  if (metric == "model_tflops_per_gpu" || metric == "tflops_per_gpu") return rate / 1e12;
  conversion += ", peak " + fmt("%.1f", s.peak_flops_per_s / 1e12) + " TFLOP/s";
  return rate / s.peak_flops_per_s;  // mfu, hfu, pct_of_peak
}

std::string estimator_reason(const std::exception& e) { return e.what(); }

}  // namespace

std::vector<ValidationResult> validate_row(const ValidationSource& source, const json& row,
                                           const CostParamsFor& params_for) {
  ValidationResult base;
  base.id = row["id"].get<std::string>();
  base.source = source.name;
  const json measured = row.contains("measured") && row["measured"].is_object() ? row["measured"] : json::object();
  const auto metrics = comparable_metrics(measured);
  auto skip = [&](std::string reason) {
    ValidationResult r = base;
    r.skipped = std::move(reason);
    if (!metrics.empty()) {
      r.metric = metrics.front().first;
      r.kind = metrics.front().second;
      if (r.kind != MetricKind::oom) r.measured = measured[r.metric].get<double>();
    }
    return std::vector<ValidationResult>{r};
  };
  if (metrics.empty()) {
    std::string keys;
    for (const auto& [k, v] : measured.items())
      if (!v.is_null() && k != "tflops_kind" && k != "memory_kind") keys += (keys.empty() ? "" : ", ") + k;
    return skip("no comparable metric (measured has: " + (keys.empty() ? std::string("nothing") : keys) + ")");
  }
  RowSetup s;
  try {
    s = setup_row(source, row);
  } catch (const RowSkipped& e) {
    return skip(e.what());
  }
  base.assumptions = s.assumptions;
  base.hbm_bytes = s.cluster.gpu.hbm_bytes;
  cost::Estimate e;
  try {
    const cost::Estimator estimator(s.graph, s.cluster, s.num_gpus, s.settings, params_for(s.cluster.gpu));
    e = estimator.estimate(s.plan);
  } catch (const std::exception& ex) {
    auto out = skip("estimator: " + estimator_reason(ex));
    out.front().assumptions = s.assumptions;
    return out;
  }
  std::vector<ValidationResult> out;
  for (const auto& [metric, kind] : metrics) {
    ValidationResult r = base;
    r.metric = metric;
    r.kind = kind;
    r.estimate = e;
    constexpr double kGiB = double(1ll << 30);
    if (kind == MetricKind::oom) {
      r.predicted = double(e.memory.peak_bytes) / kGiB;
      r.measured = double(s.cluster.gpu.hbm_bytes) / kGiB;
      r.error = e.memory.peak_bytes > s.cluster.gpu.hbm_bytes ? 0.0 : 1.0;
      r.conversion = "predicted peak GiB vs HBM GiB: error 0 when predicted not to fit, 1 otherwise";
    } else {
      r.measured = measured[metric].get<double>();
      r.predicted = predict(metric, measured, source, s, e, r.conversion, r.assumptions);
      r.error = (*r.predicted - *r.measured) / *r.measured;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<ValidationResult> validate_source(const ValidationSource& source, const CostParamsFor& params_for) {
  std::vector<ValidationResult> out;
  for (const auto& row : source.rows) {
    auto rs = validate_row(source, row, params_for);
    out.insert(out.end(), std::make_move_iterator(rs.begin()), std::make_move_iterator(rs.end()));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Statistics

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(p, 0.0, 1.0) * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

ErrorStats error_stats(const std::vector<ValidationResult>& results, MetricKind kind) {
  std::vector<double> abs_pct;
  for (const auto& r : results)
    if (r.kind == kind && !r.skipped && r.error) abs_pct.push_back(std::fabs(*r.error) * 100.0);
  ErrorStats s;
  s.count = int64_t(abs_pct.size());
  s.median_abs_pct = percentile(abs_pct, 0.5);
  s.p90_abs_pct = percentile(abs_pct, 0.9);
  return s;
}

ValidationSummary summarize(const std::string& source, const std::string& citation, const std::vector<ValidationResult>& results) {
  ValidationSummary s;
  s.source = source;
  s.citation = citation;
  std::set<std::string> ids, compared, skipped;
  std::map<std::string, int64_t> reasons;
  for (const auto& r : results) {
    ids.insert(r.source + "\n" + r.id);
    if (r.skipped) {
      skipped.insert(r.source + "\n" + r.id);
      ++reasons[*r.skipped];
    } else {
      compared.insert(r.source + "\n" + r.id);
      if (r.kind == MetricKind::oom) {
        ++s.oom_rows;
        if (r.error && *r.error == 0.0) ++s.oom_predicted;
      }
    }
  }
  s.rows = int64_t(ids.size());
  s.rows_compared = int64_t(compared.size());
  s.rows_skipped = int64_t(skipped.size());
  s.throughput = error_stats(results, MetricKind::throughput);
  s.memory = error_stats(results, MetricKind::memory);
  std::vector<const ValidationResult*> cmp;
  for (const auto& r : results)
    if (!r.skipped && r.error) cmp.push_back(&r);
  std::stable_sort(cmp.begin(), cmp.end(), [](const auto* a, const auto* b) { return std::fabs(*a->error) > std::fabs(*b->error); });
  for (size_t i = 0; i < cmp.size() && i < 5; ++i) s.worst.push_back(*cmp[i]);
  s.skip_reasons.assign(reasons.begin(), reasons.end());
  std::stable_sort(s.skip_reasons.begin(), s.skip_reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

// ---------------------------------------------------------------------------------------------
// JSON

json breakdown_to_json(const cost::Estimate& e) {
  constexpr double kGiB = double(1ll << 30);
  const auto& t = e.time;
  const auto& m = e.memory;
  return {{"plan", ir::to_json(e.plan)},
          {"step_time_s", e.step_time_s},
          {"tokens_per_s_per_gpu", e.tokens_per_s_per_gpu},
          {"mfu", e.mfu},
          {"bottleneck", e.bottleneck},
          {"time_s",
           {{"compute", t.compute_s}, {"recompute", t.recompute_s}, {"exposed_tp", t.exposed_tp_s},
            {"exposed_cp", t.exposed_cp_s}, {"exposed_fsdp", t.exposed_fsdp_s}, {"exposed_dp", t.exposed_dp_s},
            {"exposed_pp", t.exposed_pp_s}, {"exposed_ep", t.exposed_ep_s}, {"bubble", t.bubble_s},
            {"optimizer", t.optimizer_s}, {"overhead", t.overhead_s}}},
          {"memory_GiB",
           {{"parameters", double(m.parameters_bytes) / kGiB}, {"gradients", double(m.gradients_bytes) / kGiB},
            {"optimizer", double(m.optimizer_bytes) / kGiB}, {"fsdp_buffers", double(m.fsdp_buffers_bytes) / kGiB},
            {"activations", double(m.activations_bytes) / kGiB}, {"transient", double(m.transient_bytes) / kGiB},
            {"overhead", double(m.overhead_bytes) / kGiB}, {"peak", double(m.peak_bytes) / kGiB}}}};
}

json to_json(const ValidationResult& r, bool with_breakdown) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json j = {{"id", r.id},
            {"source", r.source},
            {"metric", r.metric.empty() ? json(nullptr) : json(r.metric)},
            {"kind", to_string(r.kind)},
            {"predicted", opt(r.predicted)},
            {"measured", opt(r.measured)},
            {"error", opt(r.error)},
            {"skipped", r.skipped ? json(*r.skipped) : json(nullptr)},
            {"assumptions", r.assumptions}};
  if (!r.conversion.empty()) j["conversion"] = r.conversion;
  if (with_breakdown && r.estimate && !r.skipped) j["breakdown"] = breakdown_to_json(*r.estimate);
  return j;
}

json to_json(const ValidationSummary& s) {
  auto stats = [](const ErrorStats& e) {
    return json{{"count", e.count}, {"median_abs_pct", e.median_abs_pct}, {"p90_abs_pct", e.p90_abs_pct}};
  };
  json worst = json::array();
  for (const auto& r : s.worst) worst.push_back({{"id", r.id}, {"source", r.source}, {"metric", r.metric}, {"error", r.error ? json(*r.error) : json(nullptr)}});
  json reasons = json::array();
  for (const auto& [reason, n] : s.skip_reasons) reasons.push_back({{"reason", reason}, {"rows", n}});
  return {{"source", s.source},
          {"citation", s.citation},
          {"rows", s.rows},
          {"rows_compared", s.rows_compared},
          {"rows_skipped", s.rows_skipped},
          {"throughput", stats(s.throughput)},
          {"memory", stats(s.memory)},
          {"oom", {{"rows", s.oom_rows}, {"predicted_oom", s.oom_predicted}}},
          {"worst", worst},
          {"skip_reasons", reasons}};
}

}  // namespace mgt::plan
