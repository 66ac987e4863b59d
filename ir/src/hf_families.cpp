// Hugging Face model families as data: one row per `model_type` says which config keys hold each
// size and how a layer is built (norms, biases, attention and MLP kinds, MoE layout, windows).
// read_hf_model turns a config plus its row into an HfModel; hf_config.cpp builds the Graph.
// Per-family details and sources: docs/graph_format.md, "Hugging Face configs".
#include "hf_model.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/input_limits.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <string_view>

namespace mgt::ir::hf {

namespace {

using json = nlohmann::json;

/// A bias flag: read from `key` when set (absent or null gives `fallback`), else always `fallback`.
struct Bias {
  const char* key = nullptr;
  bool fallback = false;
};

/// Where sliding-window attention applies.
enum class Window {
  none,     ///< full attention everywhere (Gemma-2's alternation is modelled as full: an upper bound)
  uniform,  ///< every layer slides when "sliding_window" is non-null (Mistral, Phi-3, StarCoder2)
  qwen,     ///< Qwen: only with use_sliding_window, and uniform only when max_window_layers is 0
  pattern,  ///< Gemma-3: every sliding_window_pattern-th layer is global
};
// Every rule but none defers to "layer_types" when the config has it (transformers writes it for
// the families with sliding windows: Gemma-3, GPT-OSS, Qwen2/3, ...): it names each layer's kind.

/// Which layers hold routed experts, and the keys saying so.
enum class MoeLayout {
  none,      ///< dense model
  every,     ///< every layer (Mixtral, OLMoE, Phi-3.5-MoE, Granite-MoE)
  qwen,      ///< decoder_sparse_step and mlp_only_layers (Qwen2-MoE, Qwen3-MoE)
  deepseek,  ///< first_k_dense_replace dense layers, then every moe_layer_freq-th layer
  llama4,    ///< "moe_layers", else every interleave_moe_layer_step-th layer
};

/// The always-on shared expert next to the routed ones.
enum class Shared {
  none,
  gated_key,      ///< Qwen2-MoE: f = shared_expert_intermediate_size, scaled by a sigmoid gate h -> 1
  count_x_moe,    ///< DeepSeek: f = n_shared_experts x moe_intermediate_size
  one_x_moe,      ///< Llama-4: one shared expert of the routed experts' size
};

enum class KvRule { key, falcon };          ///< Falcon: num_kv_heads, multi_query (1) or heads
enum class ParallelRule { none, neox, falcon };

struct FamilySpec {
  const char* model_type = "";
  const char* architecture = "";  ///< architectures[0], used when model_type is absent
  // Config keys. A null ffn key means 4 x hidden (Falcon reads ffn_hidden_size when present).
  const char* hidden_key = "hidden_size";
  const char* layers_key = "num_hidden_layers";
  const char* heads_key = "num_attention_heads";
  const char* kv_heads_key = "num_key_value_heads";
  const char* ffn_key = "intermediate_size";
  const char* positions_key = nullptr;  ///< learned position table (GPT-2); null = rotary
  KvRule kv_rule = KvRule::key;
  // Layer structure.
  NormKind norm = NormKind::rms;
  bool norm_bias = false;
  bool gated_mlp = true;
  ActivationKind act = ActivationKind::silu_glu;
  Bias qkv_bias{"attention_bias", false};
  Bias o_bias{"attention_bias", false};
  Bias mlp_bias{"mlp_bias", false};
  Bias lm_head_bias{};
  bool tied = false;  ///< tie_word_embeddings default
  QkNorm qk_norm = QkNorm::none;
  bool pre_norm = true, post_norm = false;
  ParallelRule parallel = ParallelRule::none;
  Window window = Window::none;
  bool mla = false;
  // Mixture of experts.
  MoeLayout moe = MoeLayout::none;
  const char* experts_key = nullptr;
  const char* moe_ffn_key = nullptr;
  Shared shared = Shared::none;
  const char* dense_ffn_key = nullptr;  ///< dense layers of an MoE model, when not intermediate_size
  bool router_bias_noaux = false;       ///< DeepSeek: topk_method noaux_tc keeps a per-expert bias
  bool router_linear_bias = false;      ///< GPT-OSS: the router is a Linear with a bias (one per expert)
  bool expert_bias = false;             ///< GPT-OSS: each routed expert's projections carry biases
  /// The config class's defaults (JSON) for keys a published config may leave out (Gemma-3's
  /// text_config names only what differs from Gemma3TextConfig); the config's own keys win.
  const char* defaults = nullptr;
};

constexpr auto gelu = ActivationKind::gelu;
constexpr auto gelu_glu = ActivationKind::gelu_glu;
constexpr auto layer = NormKind::layer;
constexpr Bias always{nullptr, true};
constexpr Bias never{nullptr, false};

// The table. Each row names only what differs from a Llama decoder (pre-RMSNorm, GQA with rotary
// positions, SwiGLU MLP, no biases unless attention_bias / mlp_bias, untied head).
const FamilySpec kFamilies[] = {
    {.model_type = "llama", .architecture = "LlamaForCausalLM"},
    {.model_type = "mistral", .architecture = "MistralForCausalLM", .window = Window::uniform},
    {.model_type = "mixtral", .architecture = "MixtralForCausalLM", .window = Window::uniform,
     .moe = MoeLayout::every, .experts_key = "num_local_experts", .moe_ffn_key = "intermediate_size"},
    {.model_type = "qwen2", .architecture = "Qwen2ForCausalLM", .qkv_bias = always, .o_bias = never,
     .window = Window::qwen},
    {.model_type = "qwen2_moe", .architecture = "Qwen2MoeForCausalLM", .qkv_bias = always, .o_bias = never,
     .window = Window::qwen, .moe = MoeLayout::qwen, .experts_key = "num_experts",
     .moe_ffn_key = "moe_intermediate_size", .shared = Shared::gated_key},
    {.model_type = "qwen3", .architecture = "Qwen3ForCausalLM", .qk_norm = QkNorm::per_head, .window = Window::qwen},
    {.model_type = "qwen3_moe", .architecture = "Qwen3MoeForCausalLM", .qk_norm = QkNorm::per_head,
     .window = Window::qwen, .moe = MoeLayout::qwen, .experts_key = "num_experts",
     .moe_ffn_key = "moe_intermediate_size"},
    {.model_type = "phi3", .architecture = "Phi3ForCausalLM", .window = Window::uniform},
    {.model_type = "phimoe", .architecture = "PhiMoEForCausalLM", .norm = layer, .norm_bias = true,
     .lm_head_bias = {"lm_head_bias", false}, .window = Window::uniform, .moe = MoeLayout::every,
     .experts_key = "num_local_experts", .moe_ffn_key = "intermediate_size"},
    {.model_type = "olmo2", .architecture = "Olmo2ForCausalLM", .qk_norm = QkNorm::full_width, .pre_norm = false,
     .post_norm = true},
    {.model_type = "olmoe", .architecture = "OlmoeForCausalLM", .qk_norm = QkNorm::full_width,
     .moe = MoeLayout::every, .experts_key = "num_experts", .moe_ffn_key = "intermediate_size"},
    {.model_type = "gemma", .architecture = "GemmaForCausalLM", .act = gelu_glu, .tied = true},
    {.model_type = "gemma2", .architecture = "Gemma2ForCausalLM", .act = gelu_glu, .tied = true, .post_norm = true},
    {.model_type = "gemma3_text", .architecture = "Gemma3ForCausalLM", .act = gelu_glu, .tied = true,
     .qk_norm = QkNorm::per_head, .post_norm = true, .window = Window::pattern,
     // transformers' Gemma3TextConfig.__init__ defaults.
     .defaults = R"({"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 6})"},
    {.model_type = "granite", .architecture = "GraniteForCausalLM"},
    {.model_type = "granitemoe", .architecture = "GraniteMoeForCausalLM", .moe = MoeLayout::every,
     .experts_key = "num_local_experts", .moe_ffn_key = "intermediate_size"},
    {.model_type = "glm", .architecture = "GlmForCausalLM", .qkv_bias = {"attention_bias", true}, .o_bias = never},
    {.model_type = "glm4", .architecture = "Glm4ForCausalLM", .qkv_bias = {"attention_bias", true}, .o_bias = never,
     .post_norm = true},
    {.model_type = "starcoder2", .architecture = "Starcoder2ForCausalLM", .norm = layer, .norm_bias = true,
     .gated_mlp = false, .act = gelu, .qkv_bias = {"use_bias", true}, .o_bias = {"use_bias", true},
     .mlp_bias = {"use_bias", true}, .tied = true, .window = Window::uniform},
    {.model_type = "gpt_neox", .architecture = "GPTNeoXForCausalLM", .kv_heads_key = nullptr, .norm = layer,
     .norm_bias = true, .gated_mlp = false, .act = gelu, .qkv_bias = {"attention_bias", true},
     .o_bias = {"attention_bias", true}, .mlp_bias = always, .parallel = ParallelRule::neox},
    {.model_type = "falcon", .architecture = "FalconForCausalLM", .kv_heads_key = "num_kv_heads", .ffn_key = nullptr,
     .kv_rule = KvRule::falcon, .norm = layer, .norm_bias = true, .gated_mlp = false, .act = gelu,
     .qkv_bias = {"bias", false}, .o_bias = {"bias", false}, .mlp_bias = {"bias", false}, .tied = true,
     .parallel = ParallelRule::falcon},
    {.model_type = "gpt2", .architecture = "GPT2LMHeadModel", .hidden_key = "n_embd", .layers_key = "n_layer",
     .heads_key = "n_head", .kv_heads_key = nullptr, .ffn_key = "n_inner", .positions_key = "n_positions",
     .norm = layer, .norm_bias = true, .gated_mlp = false, .act = gelu, .qkv_bias = always, .o_bias = always,
     .mlp_bias = always, .tied = true},
    {.model_type = "deepseek_v2", .architecture = "DeepseekV2ForCausalLM", .mla = true, .moe = MoeLayout::deepseek,
     .experts_key = "n_routed_experts", .moe_ffn_key = "moe_intermediate_size", .shared = Shared::count_x_moe,
     .router_bias_noaux = true},
    {.model_type = "deepseek_v3", .architecture = "DeepseekV3ForCausalLM", .mla = true, .moe = MoeLayout::deepseek,
     .experts_key = "n_routed_experts", .moe_ffn_key = "moe_intermediate_size", .shared = Shared::count_x_moe,
     .router_bias_noaux = true},
    // GPT-OSS (transformers' GptOssConfig / modeling_gpt_oss.py): attention with biases and
    // layer_types alternating a 128-token window with full attention, routed experts with a biased
    // router, experts with their own biases (GptOssExperts.gate_up_proj_bias, down_proj_bias: always
    // present, no config key) and inputs of the gated unit clamped to swiglu_limit (read for every
    // family below). Not represented: the per-head attention sinks (64 scalars a layer, no GEMM).
    {.model_type = "gpt_oss", .architecture = "GptOssForCausalLM", .qkv_bias = {"attention_bias", true},
     .o_bias = {"attention_bias", true}, .window = Window::pattern, .moe = MoeLayout::every,
     .experts_key = "num_local_experts", .moe_ffn_key = "intermediate_size", .router_linear_bias = true,
     .expert_bias = true},
    {.model_type = "llama4_text", .architecture = "Llama4ForCausalLM", .moe = MoeLayout::llama4,
     .experts_key = "num_local_experts", .moe_ffn_key = "intermediate_size", .shared = Shared::one_x_moe,
     .dense_ffn_key = "intermediate_size_mlp"},
};

/// Multimodal wrappers whose language model is their "text_config".
const std::set<std::string_view> kTextConfigWrappers{"llama4", "gemma3"};

std::string supported_list() {
  std::string out;
  for (const FamilySpec& f : kFamilies) out += (out.empty() ? "" : ", ") + std::string(f.model_type);
  for (std::string_view w : kTextConfigWrappers) out += ", " + std::string(w);
  for (const auto& [type, arch] : ssm_families()) out += ", " + type;
  for (const auto& [type, arch] : encoder_families()) out += ", " + type;
  return out;
}

std::string unsupported_hint() {
  return "supported model_types: " + supported_list() +
         "; any other model can be described as an mgt.graph/1 file (docs/graph_format.md)";
}

const FamilySpec* find_family(const std::string& model_type) {
  for (const FamilySpec& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

int64_t checked_add(int64_t a, int64_t b, const std::string& source, const std::string& field) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw InputError(source, field, "size overflows a 64-bit integer", "check the sizes");
  return out;
}

/// "model_type", or derived from "architectures"[0] when model_type is absent.
std::string model_type_of(const json& config, const std::string& source) {
  if (config.contains("model_type") && !config["model_type"].is_null()) return require_string(config, "model_type", source);
  if (!config.contains("architectures"))
    throw InputError(source, "model_type", "missing (and no \"architectures\")",
                     "add \"model_type\": one of " + supported_list());
  const json& archs = config["architectures"];
  if (!archs.is_array() || archs.empty() || !archs[0].is_string())
    throw InputError(source, "architectures", "expected a non-empty array of strings, got " + archs.dump());
  const std::string arch = archs[0].get<std::string>();
  for (const FamilySpec& f : kFamilies)
    if (arch == f.architecture) return f.model_type;
  for (const auto& [type, ssm_arch] : ssm_families())
    if (arch == ssm_arch) return type;
  for (const auto& [type, encoder_arch] : encoder_families())
    if (arch == encoder_arch) return type;
  throw InputError(source, "architectures", "unsupported architecture \"" + arch + "\"", unsupported_hint());
}

std::string architecture_of(const json& config, const std::string& model_type, const std::string& source) {
  if (!config.contains("architectures") || config["architectures"].is_null()) return model_type;
  const json& archs = config["architectures"];
  if (!archs.is_array() || archs.empty() || !archs[0].is_string())
    throw InputError(source, "architectures", "expected a non-empty array of strings, got " + archs.dump());
  return archs[0].get<std::string>();
}

bool read_bias(const json& c, Bias bias, const std::string& source) {
  return bias.key ? optional_bool(c, bias.key, bias.fallback, source) : bias.fallback;
}

/// Heads, kv heads and head dim (read, or hidden / heads, which must divide).
void read_attention_sizes(const json& c, const FamilySpec& f, HfModel& m, const std::string& source) {
  m.heads = require_positive_int(c, f.heads_key, source);
  const std::string kv_key = f.kv_heads_key ? f.kv_heads_key : f.heads_key;
  if (f.kv_rule == KvRule::falcon) {
    // new_decoder_architecture (Falcon-40B/180B) reads num_kv_heads; Falcon-7B is multi-query.
    if (optional_bool(c, "new_decoder_architecture", false, source))
      m.kv_heads = optional_positive_int(c, kv_key, m.heads, source);
    else
      m.kv_heads = optional_bool(c, "multi_query", true, source) ? 1 : m.heads;
  } else {
    m.kv_heads = f.kv_heads_key ? optional_positive_int(c, kv_key, m.heads, source) : m.heads;
  }
  if (m.heads % m.kv_heads != 0)
    throw InputError(source, kv_key,
                     std::to_string(m.kv_heads) + " does not divide " + f.heads_key + " " + std::to_string(m.heads),
                     std::string("grouped-query attention needs ") + f.heads_key + " to be a multiple of " + kv_key);
  m.head_dim = optional_positive_int(c, "head_dim", 0, source);
  m.dim_sources['d'] = "head_dim";
  if (m.head_dim == 0) {
    if (m.hidden % m.heads != 0)
      throw InputError(source, f.heads_key,
                       std::to_string(m.heads) + " does not divide " + f.hidden_key + " " + std::to_string(m.hidden),
                       std::string("set \"head_dim\" explicitly or make ") + f.hidden_key + " a multiple of " +
                           f.heads_key);
    m.head_dim = m.hidden / m.heads;
    m.dim_sources['d'] = std::string(f.hidden_key) + " / " + f.heads_key;
  }
  m.dim_sources['a'] = f.heads_key;
  m.dim_sources['k'] = kv_key;
}

/// The activation keys of a config (hidden_act; Gemma's hidden_activation; GPT-2's
/// activation_function), when given, must name the function the family's MLP is modelled with:
/// mgt prices and runs that function, so another one (or a typo) is refused, naming the key.
void check_activation_names(const json& c, const FamilySpec& f, const std::string& source) {
  const bool silu = f.act == ActivationKind::silu || f.act == ActivationKind::silu_glu;
  const bool gelu = f.act == ActivationKind::gelu || f.act == ActivationKind::gelu_glu;
  static const std::set<std::string> kSilu = {"silu", "swish"};
  static const std::set<std::string> kGelu = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python",
                                              "gelu_accurate"};
  const std::set<std::string>& accepted = silu ? kSilu : kGelu;
  if (!silu && !gelu) return;
  for (const char* key : {"hidden_act", "hidden_activation", "activation_function"}) {
    if (!c.contains(key) || c[key].is_null()) continue;
    if (!c[key].is_string()) throw InputError(source, key, "expected a string, got " + c[key].dump());
    const std::string name = c[key].get<std::string>();
    if (accepted.count(name)) continue;
    std::string list;
    for (const auto& a : accepted) list += (list.empty() ? "" : ", ") + a;
    throw InputError(source, key, "activation \"" + name + "\" is not what " + std::string(*f.model_type ? f.model_type : f.architecture) + " computes",
                     "use one of " + list);
  }
}

/// Sizes every decoder has, under the row's key names.
void read_sizes(const json& c, const FamilySpec& f, HfModel& m, const std::string& source) {
  m.hidden = require_positive_int(c, f.hidden_key, source);
  m.layers = require_positive_int(c, f.layers_key, source);
  if (m.layers > kMaxLayers)
    throw InputError(source, f.layers_key, "is " + std::to_string(m.layers) + ", more than " + std::to_string(kMaxLayers),
                     "mgt plans models of at most " + std::to_string(kMaxLayers) + " layers (the deepest trained has 126)");
  m.vocab = require_positive_int(c, "vocab_size", source);
  const char* ffn_key = f.ffn_key ? f.ffn_key : "ffn_hidden_size";
  if (f.ffn_key && !f.positions_key) {
    m.ffn = require_positive_int(c, f.dense_ffn_key && c.contains(f.dense_ffn_key) ? f.dense_ffn_key : f.ffn_key,
                                 source);
  } else {  // GPT-2 n_inner, Falcon ffn_hidden_size: 4 x hidden when absent
    m.ffn = optional_positive_int(c, ffn_key, checked_mul(m.hidden, 4, source, f.hidden_key), source);
  }
  if (f.positions_key) {
    m.positions = m.max_pos = require_positive_int(c, f.positions_key, source);
  } else {
    m.max_pos = optional_nonnegative_int(c, "max_position_embeddings", 0, source);
  }
  m.tied = optional_bool(c, "tie_word_embeddings", f.tied, source);
  read_attention_sizes(c, f, m, source);
  m.dim_sources.insert({{'h', f.hidden_key}, {'f', ffn_key}, {'v', "vocab_size"}});
  if (f.positions_key) m.dim_sources['p'] = f.positions_key;
}

void read_mla(const json& c, HfModel& m, const std::string& source) {
  m.mla = true;
  m.kv_heads = m.heads;  // MLA: every query head has its own key and value
  m.q_lora = optional_nonnegative_int(c, "q_lora_rank", 0, source);
  m.kv_lora = require_positive_int(c, "kv_lora_rank", source);
  m.qk_nope = require_positive_int(c, "qk_nope_head_dim", source);
  m.qk_rope = require_positive_int(c, "qk_rope_head_dim", source);
  m.v_head = require_positive_int(c, "v_head_dim", source);
  m.head_dim = checked_add(m.qk_nope, m.qk_rope, source, "qk_nope_head_dim");
  m.dim_sources['k'] = m.dim_sources['a'];
  m.dim_sources['d'] = "qk_nope_head_dim + qk_rope_head_dim";
  m.dim_sources.insert({{'r', "q_lora_rank"}, {'l', "kv_lora_rank"}, {'n', "qk_nope_head_dim"},
                        {'g', "qk_rope_head_dim"}, {'c', "v_head_dim"}});
}

/// An optional list of layer indices, each in [0, layers).
std::set<int64_t> layer_list(const json& c, const std::string& key, int64_t layers, const std::string& source) {
  std::set<int64_t> out;
  if (!c.contains(key) || c[key].is_null()) return out;
  const json& v = c[key];
  if (!v.is_array()) throw InputError(source, key, "expected an array of layer indices, got " + v.dump());
  for (const json& i : v) {
    if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= layers)
      throw InputError(source, key, "layer index " + i.dump() + " is not in 0.." + std::to_string(layers - 1));
    out.insert(i.get<int64_t>());
  }
  return out;
}

/// Marks each layer MoE or dense by the family's layout keys.
void read_moe_layout(const json& c, const FamilySpec& f, HfModel& m, const std::string& source) {
  for (int64_t i = 0; i < m.layers; ++i) m.layer_kinds[size_t(i)].moe = true;
  if (f.moe == MoeLayout::qwen) {
    const int64_t step = optional_positive_int(c, "decoder_sparse_step", 1, source);
    const std::set<int64_t> dense = layer_list(c, "mlp_only_layers", m.layers, source);
    for (int64_t i = 0; i < m.layers; ++i) m.layer_kinds[size_t(i)].moe = !dense.count(i) && (i + 1) % step == 0;
  } else if (f.moe == MoeLayout::deepseek) {
    const int64_t first_dense = optional_nonnegative_int(c, "first_k_dense_replace", 0, source);
    if (first_dense > m.layers)
      throw InputError(source, "first_k_dense_replace", "exceeds num_hidden_layers " + std::to_string(m.layers));
    const int64_t freq = optional_positive_int(c, "moe_layer_freq", 1, source);
    for (int64_t i = 0; i < m.layers; ++i) m.layer_kinds[size_t(i)].moe = i >= first_dense && i % freq == 0;
  } else if (f.moe == MoeLayout::llama4) {
    const int64_t step = optional_positive_int(c, "interleave_moe_layer_step", 1, source);
    const std::set<int64_t> listed = layer_list(c, "moe_layers", m.layers, source);
    for (int64_t i = 0; i < m.layers; ++i)
      m.layer_kinds[size_t(i)].moe = c.contains("moe_layers") && !c["moe_layers"].is_null() ? listed.count(i) > 0
                                                                                            : (i + 1) % step == 0;
  }
}

void read_moe(const json& c, const FamilySpec& f, HfModel& m, const std::string& source) {
  m.experts = require_positive_int(c, f.experts_key, source);
  m.top_k = require_positive_int(c, "num_experts_per_tok", source);
  if (m.top_k > m.experts)
    throw InputError(source, "num_experts_per_tok",
                     std::to_string(m.top_k) + " exceeds " + f.experts_key + " " + std::to_string(m.experts),
                     "a token cannot be routed to more experts than exist");
  m.moe_ffn = require_positive_int(c, f.moe_ffn_key, source);
  m.dim_sources['e'] = f.experts_key;
  m.dim_sources['f'] = f.moe_ffn_key;
  read_moe_layout(c, f, m, source);
  if (f.shared == Shared::gated_key) {
    m.shared_ffn = optional_nonnegative_int(c, "shared_expert_intermediate_size", 0, source);
    m.shared_gate = m.shared_ffn > 0;
  } else if (f.shared == Shared::count_x_moe) {
    m.shared_ffn = checked_mul(optional_nonnegative_int(c, "n_shared_experts", 0, source), m.moe_ffn, source,
                               "n_shared_experts");
  } else if (f.shared == Shared::one_x_moe) {
    m.shared_ffn = m.moe_ffn;
  }
  if (f.router_linear_bias) m.router_bias = true;
  m.expert_bias = f.expert_bias;
  if (f.router_bias_noaux) {
    // noaux_tc routing keeps a learned per-expert score bias (e_score_correction_bias).
    const std::string method = c.contains("topk_method") && c["topk_method"].is_string()
                                   ? c["topk_method"].get<std::string>() : std::string("noaux_tc");
    m.router_bias = method == "noaux_tc";
  }
}

/// Per-layer sliding windows by the family's rule (0 = full attention).
void read_windows(const json& c, const FamilySpec& f, HfModel& m, const std::string& source) {
  if (f.window == Window::none) return;  // layer_kinds start with full attention
  const int64_t window = optional_nonnegative_int(c, "sliding_window", 0, source);
  int64_t uniform = 0;
  if (f.window == Window::uniform) uniform = window;
  if (f.window == Window::qwen && optional_bool(c, "use_sliding_window", false, source))
    uniform = optional_nonnegative_int(c, "max_window_layers", 0, source) == 0 ? window : 0;
  for (auto& kind : m.layer_kinds) kind.sliding_window = uniform;
  if (window == 0) return;
  if (c.contains("layer_types") && !c["layer_types"].is_null()) {
    const json& types = c["layer_types"];
    if (!types.is_array() || int64_t(types.size()) != m.layers)
      throw InputError(source, "layer_types", "expected an array of " + std::to_string(m.layers) + " layer types",
                       "one \"sliding_attention\" or \"full_attention\" per layer");
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        throw InputError(source, "layer_types[" + std::to_string(i) + "]", "is " + types[i].dump(),
                         "expected \"sliding_attention\" or \"full_attention\"");
      m.layer_kinds[i].sliding_window = types[i] == "sliding_attention" ? window : 0;
    }
    return;
  }
  if (f.window != Window::pattern) return;
  const int64_t period = optional_positive_int(c, "sliding_window_pattern", 6, source);
  for (int64_t i = 0; i < m.layers; ++i) m.layer_kinds[size_t(i)].sliding_window = (i + 1) % period == 0 ? 0 : window;
}

/// GPT-NeoX: use_parallel_residual (two norms). Falcon: parallel_attn, one shared norm unless the
/// new decoder architecture keeps ln_attn and ln_mlp (num_ln_in_parallel_attn, default 2).
Parallel read_parallel(const json& c, const FamilySpec& f, const std::string& source) {
  if (f.parallel == ParallelRule::neox)
    return optional_bool(c, "use_parallel_residual", true, source) ? Parallel::two_norms : Parallel::none;
  if (f.parallel == ParallelRule::falcon) {
    if (!optional_bool(c, "parallel_attn", true, source)) return Parallel::none;
    const bool new_arch = optional_bool(c, "new_decoder_architecture", false, source);
    const int64_t norms = new_arch ? optional_positive_int(c, "num_ln_in_parallel_attn", 2, source) : 1;
    return norms == 2 ? Parallel::two_norms : Parallel::shared_norm;
  }
  return Parallel::none;
}

HfModel read_family(const json& config, const FamilySpec& f, HfModel m, const std::string& source) {
  json with_defaults;
  if (f.defaults) {
    with_defaults = json::parse(f.defaults);
    with_defaults.update(config);
  }
  const json& c = f.defaults ? with_defaults : config;
  read_sizes(c, f, m, source);
  check_activation_names(c, f, source);
  m.norm = f.norm;
  m.norm_bias = f.norm_bias;
  m.gated_mlp = f.gated_mlp;
  m.act = f.act;
  // transformers writes swiglu_limit for GPT-OSS (7.0): gate.clamp(max=limit), up.clamp(-limit, limit).
  m.glu_clamp = optional_number(c, "swiglu_limit", 0.0, source);
  if (!(m.glu_clamp >= 0) || !std::isfinite(m.glu_clamp))
    throw InputError(source, "swiglu_limit", "must be a finite number >= 0 (0: no clamp)", "GPT-OSS configs use 7.0");
  if (m.glu_clamp > 0 && !m.gated_mlp)
    throw InputError(source, "swiglu_limit", std::string("is set but the ") + f.model_type + " MLP is not gated",
                     "remove swiglu_limit");
  m.qkv_bias = read_bias(c, f.qkv_bias, source);
  m.o_bias = read_bias(c, f.o_bias, source);
  m.mlp_bias = read_bias(c, f.mlp_bias, source);
  m.lm_head_bias = read_bias(c, f.lm_head_bias, source);
  m.qk_norm = f.qk_norm;
  m.pre_norm = f.pre_norm;
  m.post_norm = f.post_norm;
  m.parallel = read_parallel(c, f, source);
  if (f.mla) read_mla(c, m, source);
  m.layer_kinds.assign(size_t(m.layers), LayerKind{});
  if (f.moe != MoeLayout::none) read_moe(c, f, m, source);
  read_windows(c, f, m, source);
  if (f.mla) m.mtp_layers = optional_nonnegative_int(c, "num_nextn_predict_layers", 0, source);
  if (m.mtp_layers > m.layers)
    throw InputError(source, "num_nextn_predict_layers", std::to_string(m.mtp_layers) + " exceeds num_hidden_layers",
                     "DeepSeek-V3 uses 1 multi-token-prediction module");
  if (m.max_pos == 0 && c.contains("n_positions")) m.max_pos = optional_nonnegative_int(c, "n_positions", 0, source);
  return m;
}

}  // namespace

HfModel read_hf_model(const json& c, const std::string& source) {
  if (!c.is_object()) throw InputError(source, "", "expected a JSON object (a Hugging Face config.json)");
  HfModel m;
  m.model_type = model_type_of(c, source);
  m.architecture = architecture_of(c, m.model_type, source);
  if (kTextConfigWrappers.count(m.model_type) && c.contains("text_config") && c["text_config"].is_object()) {
    // A multimodal wrapper (Llama-4, Gemma-3): the language model is the text_config; the vision
    // tower is not part of this graph.
    const json& text = c["text_config"];
    const std::string text_type = model_type_of(text, source);
    const FamilySpec* f = find_family(text_type);
    if (!f)
      throw InputError(source, "text_config.model_type", "unsupported model_type \"" + text_type + "\"",
                       unsupported_hint());
    m.model_type = text_type;
    return read_family(text, *f, m, source);
  }
  const FamilySpec* f = find_family(m.model_type);
  if (!f && read_ssm_family(c, m, source)) return m;
  if (!f && read_encoder_family(c, m, source)) return m;
  if (!f)
    throw InputError(source, "model_type",
                     "unsupported model_type \"" + m.model_type + "\" (architecture \"" + m.architecture + "\")",
                     unsupported_hint());
  return read_family(c, *f, m, source);
}

}  // namespace mgt::ir::hf
