// `mgt-plan validate` (docs/validation.md): reading validation files, a row's inline model as a
// ModelShape and Hugging Face config, and the FLOP conventions sources count with.
#include "mgt/planner/validate.hpp"

#include "validate_util.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/input_limits.hpp"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

namespace mgt::plan {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Files

ValidationSource validation_source_from_json(const json& doc, const std::string& path) {
  if (!doc.is_object()) throw ir::InputError(path, "", "expected a JSON object (a validation file)");
  ValidationSource s;
  s.path = path;
  s.name = std::filesystem::path(path).stem().string();
  s.citation = opt_string(doc, "source");
  s.notes = opt_string(doc, "source_notes");
  if (doc.contains("framework")) s.framework = doc["framework"];
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

namespace {
/// The Hugging Face family whose graph matches the row's features (docs/validation.md, "Models").
void choose_family(ModelShape& m, bool moe, const std::string& act, const std::string& norm,
                   std::vector<std::string>& assumptions) {
  if (m.mla) {
    if (!moe) throw RowSkipped("unsupported architecture: dense model with multi-head latent attention");
    m.family = "deepseek_v3";
    if (m.shared_ffn % m.moe_ffn != 0)
      throw RowSkipped("unsupported architecture: shared expert width is not a multiple of the routed expert width");
  } else if (moe) {
    if (m.shared_ffn > 0 || m.dense_layers > 0)
      throw RowSkipped("unsupported architecture: MoE with shared experts or dense layers but without MLA "
                       "(no supported Hugging Face family)");
    // A clamped gated unit in routed experts is GPT-OSS's (transformers' gpt_oss, swiglu_limit): the
    // one Hugging Face family with it, whose experts and attention projections always carry biases
    // (GptOssExperts.gate_up_proj_bias / down_proj_bias, no config key; attention_bias true).
    m.family = m.glu_clamped ? "gpt_oss" : "mixtral";
    if (m.glu_clamped)
      assumptions.push_back("model: routed experts with a clamped gated unit -> HF model_type gpt_oss (GPT-OSS's "
                            "architecture: biases on every expert and attention projection, a biased router)");
  } else if (m.gated) {
    m.family = "llama";
    if (!act.empty() && !contains(act, "swiglu") && !contains(act, "silu"))
      assumptions.push_back("model: gated MLP \"" + act + "\" modelled as SwiGLU (same GEMMs)");
    if (!norm.empty() && !contains(norm, "rms")) assumptions.push_back("model: \"" + norm + "\" modelled as RMSNorm (HF llama)");
    assumptions.push_back("model: gated MLP -> HF model_type llama (rotary positions, no biases)");
  } else if (m.kv_heads != m.heads) {
    // A plain MLP with grouped-query attention (Nemotron-4: LayerNorm, squared ReLU, GQA, rotary, no
    // biases): transformers' starcoder2 decoder is that layer (LayerNorm, plain MLP, rotary, GQA), its
    // biases off. gpt2 would give every head its own K and V, 12x Nemotron-4 340B's K/V weights.
    m.family = "starcoder2";
    if (!act.empty() && !contains(act, "gelu")) assumptions.push_back("model: \"" + act + "\" MLP modelled as GeLU (same GEMMs)");
    if (contains(norm, "rms")) assumptions.push_back("model: RMSNorm modelled as LayerNorm (starcoder2 family)");
    assumptions.push_back("model: plain MLP with grouped-query attention -> HF model_type starcoder2 (LayerNorm, rotary "
                          "positions, " + std::to_string(m.kv_heads) + " K/V heads, no biases)");
  } else {
    m.family = "gpt2";
    if (m.head_dim * m.heads != m.hidden) {
      assumptions.push_back("model: head_dim " + std::to_string(m.head_dim) + " x heads != hidden_size; gpt2 family uses " +
                            std::to_string(m.hidden / m.heads));
      m.head_dim = m.hidden / m.heads;
    }
    if (!act.empty() && !contains(act, "gelu")) assumptions.push_back("model: \"" + act + "\" MLP modelled as GeLU (same GEMMs)");
    if (contains(norm, "rms")) assumptions.push_back("model: RMSNorm modelled as LayerNorm (gpt2 family)");
    assumptions.push_back("model: plain MLP -> HF model_type gpt2 (LayerNorm, biases, learned position table of seq_len rows)");
  }
}
/// model.attention_pattern is free text ("alternating full / sliding-window(128) attention, attention
/// sinks"). Read from it: the window (the first number after "sliding") and whether it alternates with
/// full attention, which Megatron-Core lays out as window_attn_skip_freq 2 (layer i attends fully when
/// (i + 1) % 2 == 0) and GPT-OSS's layer_types as sliding on even layers. What else it says changes no
/// GEMM or collective (attention sinks: one scalar per head) and is listed, not priced.
void read_attention_pattern(ModelShape& m, const std::string& pattern, std::vector<std::string>& assumptions) {
  if (pattern.empty()) return;
  const size_t at = pattern.find("sliding");
  if (at == std::string::npos) {
    assumptions.push_back("model.attention_pattern \"" + pattern + "\": full attention priced");
    return;
  }
  const size_t digit = pattern.find_first_of("0123456789", at);
  if (digit == std::string::npos) {
    assumptions.push_back("model.attention_pattern \"" + pattern + "\" states no window size: full attention priced");
    return;
  }
  int64_t window = 0;
  for (size_t i = digit; i < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[i])) && window < (1ll << 40); ++i)
    window = window * 10 + (pattern[i] - '0');
  if (window <= 0) {
    assumptions.push_back("model.attention_pattern \"" + pattern + "\": window 0 read, full attention priced");
    return;
  }
  m.sliding_window = window;
  m.window_alternates = contains(pattern, "alternat");
  assumptions.push_back("model.attention_pattern \"" + pattern + "\": a " + std::to_string(window) + "-token window " +
                        (m.window_alternates ? "on even layers, full attention on odd ones" : "on every layer") +
                        (contains(pattern, "sink") ? "; attention sinks not priced (one scalar per head)" : ""));
}
}  // namespace

ModelShape model_shape(const json& model, std::vector<std::string>& assumptions) {
  if (!model.is_object()) throw RowSkipped("model is not an inline object");
  ModelShape m;
  m.name = opt_string(model, "name");
  const std::string type = lower(opt_string(model, "type"));
  if (contains(type, "hybrid")) throw RowSkipped("unsupported architecture: model.type \"" + type + "\" (hybrid Mamba layers)");
  m.layers = require_row_int(model, "num_layers", "model");
  // Named here as the row spells it, not as the config key it becomes (n_layer, num_hidden_layers).
  if (m.layers > ir::kMaxLayers)
    throw RowSkipped("model.num_layers " + std::to_string(m.layers) + " is more than " + std::to_string(ir::kMaxLayers) +
                     ", the most layers mgt plans (the deepest trained model has 126)");
  m.hidden = require_row_int(model, "hidden_size", "model");
  m.heads = require_row_int(model, "num_attention_heads", "model");
  m.vocab = require_row_int(model, "vocab_size", "model");
  const std::string kv_words = lower(opt_string(model, "num_kv_heads"));
  if (kv_words == "mha" || contains(kv_words, "multi-head") || contains(kv_words, "multi head")) {
    m.kv_heads = m.heads;  // one K/V head per query head
  } else if (kv_words == "mqa" || contains(kv_words, "multi-query") || contains(kv_words, "multi query")) {
    m.kv_heads = 1;  // one K/V head shared by all
  } else if (const auto kv = opt_int(model, "num_kv_heads", "model")) {
    m.kv_heads = *kv;
  } else {
    m.kv_heads = m.heads;
    assumptions.push_back("model.num_kv_heads not stated: " + std::to_string(m.heads) + " (multi-head attention)");
  }
  if (m.kv_heads <= 0 || m.heads % m.kv_heads != 0)
    throw RowSkipped("model.num_kv_heads " + std::to_string(m.kv_heads) + " does not divide num_attention_heads " +
                     std::to_string(m.heads));
  if (auto p = opt_number(model, "params_B")) m.published_params = *p * 1e9;
  const std::optional<bool> tied = switch_in(model.contains("tied_embeddings") ? model["tied_embeddings"] : json());
  m.tied = tied.value_or(false);
  if (!tied) assumptions.push_back("model.tied_embeddings not stated: untied");

  const std::string act = lower(opt_string(model, "activation"));
  const std::string norm = lower(opt_string(model, "normalization"));
  if (act.empty()) assumptions.push_back("model.activation not stated: plain GeLU MLP (Megatron GPT default)");
  m.gated = contains(act, "glu") || contains(act, "gated") || (contains(act, "silu") && !contains(act, "relu"));
  m.glu_clamped = m.gated && contains(act, "clamp");
  if (m.glu_clamped)
    assumptions.push_back("model.activation \"" + act + "\": inputs of the gated unit clamped (swiglu_limit 7.0, GPT-OSS's; "
                          "the limit does not change the cost)");

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
    // Multi-token prediction: one more layer and output head per depth on the last pipeline chunk
    // (ir::PipelineSplit's mtp_tail layout).
    m.mtp_layers = opt_int(model, "mtp_layers", "model").value_or(0);
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

  read_attention_pattern(m, lower(opt_string(model, "attention_pattern")), assumptions);
  choose_family(m, moe, act, norm, assumptions);
  if (m.sliding_window > 0 && (m.family == "gpt2" || m.family == "starcoder2" || m.family == "deepseek_v3")) {
    assumptions.push_back("model.attention_pattern: the " + m.family + " family has no sliding window; full attention "
                          "priced (an upper bound)");
    m.sliding_window = 0;
    m.window_alternates = false;
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
  const bool windowed_family = m.family == "llama" || m.family == "mixtral" || m.family == "gpt_oss";
  if (windowed_family) c["head_dim"] = m.head_dim;
  if (m.sliding_window > 0 && windowed_family) {
    // Mistral is the llama layer with windows; both read "layer_types" per layer (ir/src/hf_families.cpp).
    if (m.family == "llama") c["model_type"] = "mistral";
    c["sliding_window"] = m.sliding_window;
    json types = json::array();
    for (int64_t i = 0; i < m.layers; ++i)
      types.push_back(m.window_alternates && i % 2 == 1 ? "full_attention" : "sliding_attention");
    c["layer_types"] = types;
  }
  if (m.glu_clamped && m.family != "gpt2") c["swiglu_limit"] = 7.0;
  if (m.family == "gpt_oss") c["attention_bias"] = true;
  if (m.family == "starcoder2") {
    c["use_bias"] = false;
    c["head_dim"] = m.head_dim;
  }
  if (m.family == "mixtral" || m.family == "gpt_oss") {
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
    c["num_nextn_predict_layers"] = m.mtp_layers;
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
}  // namespace mgt::plan
