// Hugging Face config.json frontend: reads the sizes of a decoder-only transformer and builds its
// Graph (embed block, one block per distinct layer type, head block). Graph conventions and the
// per-family layer shapes: docs/graph_format.md, "Hugging Face configs".
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string_view>
#include <utility>

namespace mgt::ir {

namespace {

using json = nlohmann::json;
using DimSizes = std::map<char, int64_t>;

Op make_op(std::string name, OpKind kind, std::vector<std::string> inputs, std::string output) {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.inputs = std::move(inputs);
  op.output = std::move(output);
  return op;
}

// ---------------------------------------------------------------------------------------------
// Block builder: declares tensors from einsum-style dim strings so that each family's layer reads
// as a list of ops.

class BlockBuilder {
 public:
  BlockBuilder(std::string name, int64_t repeat, bool is_layer, DimSizes sizes) : sizes_(std::move(sizes)) {
    block_.name = std::move(name);
    block_.repeat = repeat;
    block_.is_layer = is_layer;
  }

  /// Declares an activation (or, with `parameter`, a weight); `overrides` replace table sizes.
  void declare(const std::string& name, std::string_view dims, bool parameter, const DimSizes& overrides = {}) {
    if (find_tensor(block_, name)) return;
    TensorDecl t{name, {}, parameter};
    for (char c : dims) {
      const auto o = overrides.find(c);
      const int64_t size = is_symbolic_dim(c) ? 0 : o != overrides.end() ? o->second : sizes_.at(c);
      t.dims.push_back({c, size});
    }
    block_.tensors.push_back(std::move(t));
  }

  /// Contraction `spec` ("bsh,had->bsad") of activation `in` with `weight`; declares the weight
  /// (a parameter unless it already exists as an activation), the optional bias and the output.
  std::string contract(const std::string& op_name, const std::string& in, const std::string& weight,
                       const std::string& spec, const std::string& out, const std::string& bias = {},
                       const DimSizes& out_overrides = {}) {
    const auto comma = spec.find(',');
    const auto arrow = spec.find("->");
    const std::string out_dims = spec.substr(arrow + 2);
    declare(weight, spec.substr(comma + 1, arrow - comma - 1), /*parameter=*/true);
    declare(out, out_dims, /*parameter=*/false, out_overrides);
    Op op = make_op(op_name, OpKind::contraction, {in, weight}, out);
    op.einsum = spec;
    if (!bias.empty()) {
      std::string bias_dims;
      for (char c : out_dims)
        if (!is_symbolic_dim(c)) bias_dims += c;
      declare(bias, bias_dims, /*parameter=*/true);
      op.inputs.push_back(bias);
      op.einsum = spec.substr(0, arrow) + "," + bias_dims + spec.substr(arrow);
    }
    block_.ops.push_back(std::move(op));
    return out;
  }

  /// Norm of `in` over the dims of its weight (`weight_dims`, trailing dims of `in`).
  std::string norm(const std::string& op_name, const std::string& in, const std::string& weight_dims, NormKind kind,
                   bool bias, const std::string& out) {
    declare(op_name + "_w", weight_dims, /*parameter=*/true);
    if (bias) declare(op_name + "_b", weight_dims, /*parameter=*/true);
    copy_dims(in, out);
    Op op = make_op(op_name, OpKind::norm, {in, op_name + "_w"}, out);
    if (bias) op.inputs.push_back(op_name + "_b");
    op.norm = kind;
    block_.ops.push_back(std::move(op));
    return out;
  }

  /// An op whose output has exactly the dims of its first input (rope, residual, activation).
  std::string same_dims_op(Op op) {
    copy_dims(op.inputs.front(), op.output);
    std::string out = op.output;
    block_.ops.push_back(std::move(op));
    return out;
  }

  std::string residual(const std::string& name, const std::string& a, const std::string& b, const std::string& out) {
    return same_dims_op(make_op(name, OpKind::residual, {a, b}, out));
  }

  std::string rope(const std::string& name, const std::string& in, const std::string& out) {
    return same_dims_op(make_op(name, OpKind::rope, {in}, out));
  }

  std::string activation(const std::string& name, std::vector<std::string> in, ActivationKind kind,
                         const std::string& out) {
    Op op = make_op(name, OpKind::activation, std::move(in), out);
    op.activation = kind;
    return same_dims_op(std::move(op));
  }

  void add(Op op, const std::string& out_dims = {}, const DimSizes& out_overrides = {}) {
    if (!out_dims.empty()) declare(op.output, out_dims, /*parameter=*/false, out_overrides);
    block_.ops.push_back(std::move(op));
  }

  Block take() { return std::move(block_); }

 private:
  void copy_dims(const std::string& from, const std::string& to) {
    if (find_tensor(block_, to)) return;
    TensorDecl t = *find_tensor(block_, from);
    t.name = to;
    block_.tensors.push_back(std::move(t));
  }

  Block block_;
  DimSizes sizes_;
};

// ---------------------------------------------------------------------------------------------
// The sizes read from a config, validated once; builders only read this struct.

enum class QkNorm { none, per_head, full_width };

struct HfModel {
  std::string model_type;
  std::string architecture;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, max_pos = 0;
  int64_t positions = 0;  ///< learned position table rows (GPT-2); 0 = rotary
  bool tied = false;
  NormKind norm = NormKind::rms;
  bool norm_bias = false, qkv_bias = false, o_bias = false, mlp_bias = false;
  bool gated_mlp = true;
  ActivationKind act = ActivationKind::silu_glu;
  QkNorm qk_norm = QkNorm::none;
  bool pre_norm = true, post_norm = false;  ///< where the sublayer norms sit (OLMo-2: post only; Gemma-2: both)
  int64_t sliding_window = 0;
  // Mixture of experts (0 experts = dense).
  int64_t experts = 0, top_k = 0, moe_ffn = 0, shared_ffn = 0, dense_layers = 0;
  bool router_bias = false;
  // Multi-head latent attention (DeepSeek).
  bool mla = false;
  int64_t q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
  std::map<char, std::string> dim_sources;
};

const char* const kSupported = "llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, phi3, olmo2, gemma2, gpt2, deepseek_v3";

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
                     std::string("add \"model_type\": one of ") + kSupported);
  static const std::map<std::string, std::string> by_arch{
      {"LlamaForCausalLM", "llama"},     {"MistralForCausalLM", "mistral"}, {"MixtralForCausalLM", "mixtral"},
      {"Qwen2ForCausalLM", "qwen2"},     {"Qwen3ForCausalLM", "qwen3"},     {"Qwen3MoeForCausalLM", "qwen3_moe"},
      {"Phi3ForCausalLM", "phi3"},       {"Olmo2ForCausalLM", "olmo2"},     {"Gemma2ForCausalLM", "gemma2"},
      {"GPT2LMHeadModel", "gpt2"},       {"DeepseekV3ForCausalLM", "deepseek_v3"}};
  const json& archs = config["architectures"];
  if (!archs.is_array() || archs.empty() || !archs[0].is_string())
    throw InputError(source, "architectures", "expected a non-empty array of strings, got " + archs.dump());
  const auto it = by_arch.find(archs[0].get<std::string>());
  if (it == by_arch.end())
    throw InputError(source, "architectures", "unsupported architecture \"" + archs[0].get<std::string>() + "\"",
                     std::string("supported model_types: ") + kSupported);
  return it->second;
}

std::string architecture_of(const json& config, const std::string& model_type, const std::string& source) {
  if (!config.contains("architectures") || config["architectures"].is_null()) return model_type;
  const json& archs = config["architectures"];
  if (!archs.is_array() || archs.empty() || !archs[0].is_string())
    throw InputError(source, "architectures", "expected a non-empty array of strings, got " + archs.dump());
  return archs[0].get<std::string>();
}

/// Attention sizes shared by every rotary family: heads, kv heads, head dim (read or derived).
void read_attention_sizes(const json& c, HfModel& m, const std::string& source) {
  m.heads = require_positive_int(c, "num_attention_heads", source);
  m.kv_heads = optional_positive_int(c, "num_key_value_heads", m.heads, source);
  if (m.heads % m.kv_heads != 0)
    throw InputError(source, "num_key_value_heads",
                     std::to_string(m.kv_heads) + " does not divide num_attention_heads " + std::to_string(m.heads),
                     "grouped-query attention needs num_attention_heads to be a multiple of num_key_value_heads");
  m.head_dim = optional_positive_int(c, "head_dim", 0, source);
  m.dim_sources['d'] = "head_dim";
  if (m.head_dim == 0) {
    if (m.hidden % m.heads != 0)
      throw InputError(source, "num_attention_heads",
                       std::to_string(m.heads) + " does not divide hidden_size " + std::to_string(m.hidden),
                       "set \"head_dim\" explicitly or make hidden_size a multiple of num_attention_heads");
    m.head_dim = m.hidden / m.heads;
    m.dim_sources['d'] = "hidden_size / num_attention_heads";
  }
}

/// Sizes every HF decoder has under the standard field names.
void read_common(const json& c, HfModel& m, const std::string& source) {
  m.hidden = require_positive_int(c, "hidden_size", source);
  m.layers = require_positive_int(c, "num_hidden_layers", source);
  m.vocab = require_positive_int(c, "vocab_size", source);
  m.ffn = require_positive_int(c, "intermediate_size", source);
  m.max_pos = optional_nonnegative_int(c, "max_position_embeddings", 0, source);
  m.tied = optional_bool(c, "tie_word_embeddings", false, source);
  read_attention_sizes(c, m, source);
  m.dim_sources.insert({{'h', "hidden_size"}, {'a', "num_attention_heads"}, {'k', "num_key_value_heads"},
                        {'f', "intermediate_size"}, {'v', "vocab_size"}});
}

/// Sliding window when it applies to every layer; per-layer patterns count as full attention.
int64_t uniform_sliding_window(const json& c, const HfModel& m, const std::string& source) {
  const int64_t window = optional_nonnegative_int(c, "sliding_window", 0, source);
  if (m.model_type == "mistral" || m.model_type == "mixtral" || m.model_type == "phi3") return window;
  if (m.model_type == "qwen2" || m.model_type == "qwen3" || m.model_type == "qwen3_moe") {
    // Qwen: layers at index >= max_window_layers slide, and only when use_sliding_window is set.
    if (!optional_bool(c, "use_sliding_window", false, source)) return 0;
    return optional_nonnegative_int(c, "max_window_layers", 0, source) == 0 ? window : 0;
  }
  // gemma2 alternates sliding and global layers: modelled as full attention (an upper bound on cost).
  return 0;
}

void read_moe(const json& c, HfModel& m, const std::string& source, const std::string& experts_field,
              const std::string& ffn_field) {
  m.experts = require_positive_int(c, experts_field, source);
  m.top_k = require_positive_int(c, "num_experts_per_tok", source);
  if (m.top_k > m.experts)
    throw InputError(source, "num_experts_per_tok",
                     std::to_string(m.top_k) + " exceeds " + experts_field + " " + std::to_string(m.experts),
                     "a token cannot be routed to more experts than exist");
  m.moe_ffn = require_positive_int(c, ffn_field, source);
  m.dim_sources['e'] = experts_field;
  m.dim_sources['f'] = ffn_field;
}

void read_qwen3_moe_layout(const json& c, const std::string& source) {
  if (optional_positive_int(c, "decoder_sparse_step", 1, source) != 1)
    throw InputError(source, "decoder_sparse_step", "only 1 (every layer is a MoE layer) is supported",
                     "interleaved dense/MoE layers are not modelled yet");
  if (c.contains("mlp_only_layers") && !c["mlp_only_layers"].is_null()) {
    const json& v = c["mlp_only_layers"];
    if (!v.is_array()) throw InputError(source, "mlp_only_layers", "expected an array, got " + v.dump());
    if (!v.empty())
      throw InputError(source, "mlp_only_layers", "dense layers among MoE layers are not supported",
                       "use an empty list");
  }
}

void read_gpt2(const json& c, HfModel& m, const std::string& source) {
  m.hidden = require_positive_int(c, "n_embd", source);
  m.layers = require_positive_int(c, "n_layer", source);
  m.vocab = require_positive_int(c, "vocab_size", source);
  m.heads = m.kv_heads = require_positive_int(c, "n_head", source);
  if (m.hidden % m.heads != 0)
    throw InputError(source, "n_head", std::to_string(m.heads) + " does not divide n_embd " + std::to_string(m.hidden),
                     "make n_embd a multiple of n_head");
  m.head_dim = m.hidden / m.heads;
  m.positions = m.max_pos = require_positive_int(c, "n_positions", source);
  m.ffn = optional_positive_int(c, "n_inner", checked_mul(m.hidden, 4, source, "n_embd"), source);
  m.tied = optional_bool(c, "tie_word_embeddings", true, source);
  m.norm = NormKind::layer;
  m.norm_bias = m.qkv_bias = m.o_bias = m.mlp_bias = true;
  m.gated_mlp = false;
  m.act = ActivationKind::gelu;
  m.dim_sources = {{'h', "n_embd"},      {'a', "n_head"},      {'k', "n_head"},        {'d', "n_embd / n_head"},
                   {'f', "n_inner"},     {'v', "vocab_size"},  {'p', "n_positions"}};
}

void read_deepseek(const json& c, HfModel& m, const std::string& source) {
  read_common(c, m, source);
  m.mla = true;
  m.kv_heads = m.heads;  // MLA: every query head has its own key and value
  m.q_lora = optional_nonnegative_int(c, "q_lora_rank", 0, source);
  m.kv_lora = require_positive_int(c, "kv_lora_rank", source);
  m.qk_nope = require_positive_int(c, "qk_nope_head_dim", source);
  m.qk_rope = require_positive_int(c, "qk_rope_head_dim", source);
  m.v_head = require_positive_int(c, "v_head_dim", source);
  m.head_dim = checked_add(m.qk_nope, m.qk_rope, source, "qk_nope_head_dim");
  read_moe(c, m, source, "n_routed_experts", "moe_intermediate_size");
  if (optional_positive_int(c, "moe_layer_freq", 1, source) != 1)
    throw InputError(source, "moe_layer_freq", "only 1 is supported", "interleaved dense/MoE layers are not modelled");
  m.dense_layers = optional_nonnegative_int(c, "first_k_dense_replace", 0, source);
  if (m.dense_layers > m.layers)
    throw InputError(source, "first_k_dense_replace", "exceeds num_hidden_layers " + std::to_string(m.layers));
  m.shared_ffn = checked_mul(optional_nonnegative_int(c, "n_shared_experts", 0, source), m.moe_ffn, source,
                             "n_shared_experts");
  // noaux_tc routing keeps a learned per-expert score bias (e_score_correction_bias).
  const std::string method = c.contains("topk_method") && c["topk_method"].is_string()
                                 ? c["topk_method"].get<std::string>() : std::string("noaux_tc");
  m.router_bias = method == "noaux_tc";
  m.dim_sources['k'] = "num_attention_heads";
  m.dim_sources['d'] = "qk_nope_head_dim + qk_rope_head_dim";
  m.dim_sources.insert({{'r', "q_lora_rank"}, {'l', "kv_lora_rank"}, {'n', "qk_nope_head_dim"},
                        {'g', "qk_rope_head_dim"}, {'c', "v_head_dim"}});
}

/// What distinguishes the rotary families from plain Llama.
void apply_family_quirks(const json& c, HfModel& m, const std::string& source) {
  const std::string& t = m.model_type;
  if (t == "qwen3" || t == "qwen3_moe") m.qk_norm = QkNorm::per_head;
  if (t == "olmo2") {  // q/k norms over the full projection width; norms after each sublayer only
    m.qk_norm = QkNorm::full_width;
    m.pre_norm = false;
    m.post_norm = true;
  }
  if (t == "gemma2") {  // norms before and after each sublayer; tied embeddings by default
    m.post_norm = true;
    m.act = ActivationKind::gelu_glu;
    m.tied = optional_bool(c, "tie_word_embeddings", true, source);
  }
  if (t == "mixtral") read_moe(c, m, source, "num_local_experts", "intermediate_size");
  if (t == "qwen3_moe") {
    read_moe(c, m, source, "num_experts", "moe_intermediate_size");
    read_qwen3_moe_layout(c, source);
  }
}

HfModel read_hf_model(const json& c, const std::string& source) {
  if (!c.is_object()) throw InputError(source, "", "expected a JSON object (a Hugging Face config.json)");
  HfModel m;
  m.model_type = model_type_of(c, source);
  m.architecture = architecture_of(c, m.model_type, source);
  const std::string& t = m.model_type;
  if (t == "gpt2") {
    read_gpt2(c, m, source);
  } else if (t == "deepseek_v3") {
    read_deepseek(c, m, source);
  } else if (t == "llama" || t == "mistral" || t == "mixtral" || t == "qwen2" || t == "qwen3" || t == "qwen3_moe" ||
             t == "phi3" || t == "olmo2" || t == "gemma2") {
    read_common(c, m, source);
    m.qkv_bias = t == "qwen2" || optional_bool(c, "attention_bias", false, source);
    m.o_bias = t != "qwen2" && optional_bool(c, "attention_bias", false, source);
    m.mlp_bias = optional_bool(c, "mlp_bias", false, source);
    m.sliding_window = uniform_sliding_window(c, m, source);
    apply_family_quirks(c, m, source);
  } else {
    throw InputError(source, "model_type", "unsupported model_type \"" + t + "\" (architecture \"" + m.architecture + "\")",
                     std::string("supported model_types: ") + kSupported);
  }
  if (m.max_pos == 0 && c.contains("n_positions")) m.max_pos = optional_nonnegative_int(c, "n_positions", 0, source);
  return m;
}

// ---------------------------------------------------------------------------------------------
// Builders, one per sublayer family. Each appends ops reading `in` and returns the output name.

DimSizes dim_table(const HfModel& m) {
  DimSizes t{{'h', m.hidden}, {'a', m.heads}, {'k', m.kv_heads}, {'d', m.head_dim}, {'f', m.ffn}, {'v', m.vocab}};
  if (m.positions) t['p'] = m.positions;
  if (m.experts) t['e'] = m.experts;
  if (m.mla) t.insert({{'r', m.q_lora}, {'l', m.kv_lora}, {'n', m.qk_nope}, {'g', m.qk_rope}, {'c', m.v_head}});
  return t;
}

/// Grouped-query attention: q/k/v projections, optional q/k norms, rope, attention core, o proj.
std::string add_attention(BlockBuilder& b, const HfModel& m, const std::string& in) {
  const bool bias = m.qkv_bias;
  std::string q = b.contract("q_proj", in, "wq", "bsh,had->bsad", "q", bias ? "bq" : "");
  std::string k = b.contract("k_proj", in, "wk", "bsh,hkd->bskd", "k", bias ? "bk" : "");
  const std::string v = b.contract("v_proj", in, "wv", "bsh,hkd->bskd", "v", bias ? "bv" : "");
  if (m.qk_norm == QkNorm::per_head) {
    q = b.norm("q_norm", q, "d", m.norm, false, "q_normed");
    k = b.norm("k_norm", k, "d", m.norm, false, "k_normed");
  } else if (m.qk_norm == QkNorm::full_width) {
    q = b.norm("q_norm", q, "ad", m.norm, false, "q_normed");
    k = b.norm("k_norm", k, "kd", m.norm, false, "k_normed");
  }
  if (m.positions == 0) {
    q = b.rope("q_rope", q, "q_rot");
    k = b.rope("k_rope", k, "k_rot");
  }
  Op core = make_op("attention", OpKind::attention_core, {q, k, v}, "attn");
  core.causal = true;
  core.sliding_window = m.sliding_window;
  b.add(std::move(core), "bsad");
  return b.contract("o_proj", "attn", "wo", "bsad,adh->bsh", "attn_out", m.o_bias ? "bo" : "");
}

/// DeepSeek multi-head latent attention. The fused kv_a projection (h -> kv_lora + rope dims) is two
/// contractions with the same parameters; the shared rotary key joins k only inside the attention
/// kernel, so k carries the no-rope head dim `n` while q carries d = nope + rope.
std::string add_mla(BlockBuilder& b, const HfModel& m, const std::string& in) {
  std::string q;
  if (m.q_lora > 0) {
    const std::string qa = b.contract("q_a_proj", in, "wq_a", "bsh,hr->bsr", "q_a");
    const std::string qa_n = b.norm("q_a_norm", qa, "r", NormKind::rms, false, "q_a_normed");
    q = b.contract("q_b_proj", qa_n, "wq_b", "bsr,rad->bsad", "q");
  } else {
    q = b.contract("q_proj", in, "wq", "bsh,had->bsad", "q");
  }
  q = b.rope("q_rope", q, "q_rot");
  const std::string kv_a = b.contract("kv_a_proj", in, "wkv_a", "bsh,hl->bsl", "kv_a");
  const std::string k_pe = b.contract("k_pe_proj", in, "wk_pe", "bsh,hg->bsg", "k_pe");
  b.rope("k_pe_rope", k_pe, "k_pe_rot");
  const std::string kv_n = b.norm("kv_a_norm", kv_a, "l", NormKind::rms, false, "kv_a_normed");
  const std::string k = b.contract("k_b_proj", kv_n, "wk_b", "bsl,lan->bsan", "k");
  const std::string v = b.contract("v_b_proj", kv_n, "wv_b", "bsl,lac->bsac", "v");
  Op core = make_op("attention", OpKind::attention_core, {q, k, v}, "attn");
  core.causal = true;
  b.add(std::move(core), "bsac");
  return b.contract("o_proj", "attn", "wo", "bsac,ach->bsh", "attn_out");
}

/// Dense MLP: gated (gate, up, act, down) or plain (up, act, down). `prefix` keeps names unique when
/// a block holds two MLPs (DeepSeek shared experts); `ffn` overrides the table's f.
std::string add_mlp(BlockBuilder& b, const HfModel& m, const std::string& in, const std::string& prefix,
                    int64_t ffn) {
  const DimSizes f{{'f', ffn}};
  const auto n = [&](const std::string& s) { return prefix + s; };
  const bool bias = m.mlp_bias;
  // Declared up front so that f takes this MLP's size rather than the table's.
  if (m.gated_mlp) b.declare(n("w_gate"), "hf", /*parameter=*/true, f);
  b.declare(n("w_up"), "hf", /*parameter=*/true, f);
  b.declare(n("w_down"), "fh", /*parameter=*/true, f);
  if (bias && m.gated_mlp) b.declare(n("b_gate"), "f", /*parameter=*/true, f);
  if (bias) b.declare(n("b_up"), "f", /*parameter=*/true, f);
  const std::string up = b.contract(n("up_proj"), in, n("w_up"), "bsh,hf->bsf", n("up"), bias ? n("b_up") : "", f);
  std::string hidden;
  if (m.gated_mlp) {
    const std::string gate =
        b.contract(n("gate_proj"), in, n("w_gate"), "bsh,hf->bsf", n("gate"), bias ? n("b_gate") : "", f);
    hidden = b.activation(n("act"), {gate, up}, m.act, n("act_out"));
  } else {
    hidden = b.activation(n("act"), {up}, m.act, n("act_out"));
  }
  return b.contract(n("down_proj"), hidden, n("w_down"), "bsf,fh->bsh", n("mlp_out"), bias ? n("b_down") : "");
}

/// Routed experts: router logits over all experts, top-k routing, per-expert gated MLP computed for
/// the k chosen experts (output e = top_k, weight e = num_experts), weighted combine.
std::string add_moe(BlockBuilder& b, const HfModel& m, const std::string& in) {
  const DimSizes topk{{'e', m.top_k}}, f{{'f', m.moe_ffn}};
  b.contract("router_proj", in, "w_router", "bsh,he->bse", "router_logits", m.router_bias ? "router_bias" : "");
  Op route = make_op("router", OpKind::router, {"router_logits"}, "routing");
  route.top_k = m.top_k;
  b.add(std::move(route), "bse", topk);
  DimSizes out_sizes = f;
  out_sizes['e'] = m.top_k;
  b.declare("w_expert_gate", "ehf", true, f), b.declare("w_expert_up", "ehf", true, f);
  b.declare("w_expert_down", "efh", true, f);
  const std::string gate = b.contract("expert_gate_proj", in, "w_expert_gate", "bsh,ehf->bsef", "expert_gate", "", out_sizes);
  const std::string up = b.contract("expert_up_proj", in, "w_expert_up", "bsh,ehf->bsef", "expert_up", "", out_sizes);
  const std::string act = b.activation("expert_act", {gate, up}, m.act, "expert_act_out");
  b.contract("expert_down_proj", act, "w_expert_down", "bsef,efh->bseh", "expert_out", "", topk);
  return b.contract("combine", "expert_out", "routing", "bseh,bse->bsh", "moe_out");
}

enum class FfnKind { dense, moe };

/// One transformer layer: attention and feed-forward sublayers, each wrapped with the family's
/// norm placement (pre: norm before, post: norm on the sublayer output) and a residual add.
Block build_layer(const HfModel& m, const std::string& name, int64_t repeat, FfnKind ffn) {
  BlockBuilder b(name, repeat, /*is_layer=*/true, dim_table(m));
  b.declare("x", "bsh", false);
  const auto sublayer = [&](const std::string& tag, const std::string& in, auto body) {
    std::string y = m.pre_norm ? b.norm(tag + "_norm", in, "h", m.norm, m.norm_bias, tag + "_in") : in;
    y = body(y);
    if (m.post_norm) y = b.norm(tag + "_post_norm", y, "h", m.norm, m.norm_bias, tag + "_normed");
    return y;
  };
  const std::string attn = sublayer("attn", "x", [&](const std::string& in) {
    return m.mla ? add_mla(b, m, in) : add_attention(b, m, in);
  });
  const std::string h1 = b.residual("attn_residual", "x", attn, "h1");
  const std::string mlp = sublayer("mlp", h1, [&](const std::string& in) {
    if (ffn == FfnKind::dense) return add_mlp(b, m, in, "", m.ffn);
    const std::string routed = add_moe(b, m, in);
    if (m.shared_ffn == 0) return routed;
    const std::string shared = add_mlp(b, m, in, "shared_", m.shared_ffn);
    return b.residual("shared_add", routed, shared, "ffn_out");
  });
  b.residual("mlp_residual", h1, mlp, "out");
  return b.take();
}

Block build_embed(const HfModel& m) {
  BlockBuilder b("embed", 1, /*is_layer=*/false, dim_table(m));
  b.declare("wte", "vh", true);
  b.add(make_op("token_embedding", OpKind::embedding, {"wte"}, m.positions ? "tok" : "out"),
        "bsh");
  if (m.positions) {
    b.declare("wpe", "ph", true);
    b.add(make_op("position_embedding", OpKind::embedding, {"wpe"}, "pos"), "bsh");
    b.residual("embed_add", "tok", "pos", "out");
  }
  return b.take();
}

/// Final norm, LM head and loss. A tied head reads "wte" laid out like the embedding table (v, h).
Block build_head(const HfModel& m) {
  BlockBuilder b("head", 1, /*is_layer=*/false, dim_table(m));
  b.declare("x", "bsh", false);
  const std::string xn = b.norm("final_norm", "x", "h", m.norm, m.norm_bias, "x_norm");
  if (m.tied) {
    b.contract("lm_head", xn, "wte", "bsh,vh->bsv", "logits");
  } else {
    b.contract("lm_head", xn, "w_lm_head", "bsh,hv->bsv", "logits");
  }
  b.add(make_op("loss", OpKind::softmax_cross_entropy, {"logits"}, ""));
  return b.take();
}

ModelInfo model_info(const HfModel& m, const std::string& source) {
  ModelInfo info;
  info.name = std::filesystem::path(source).stem().string();
  info.architecture = m.architecture;
  info.num_layers = m.layers;
  info.hidden_size = m.hidden;
  info.num_attention_heads = m.heads;
  info.num_kv_heads = m.kv_heads;
  info.vocab_size = m.vocab;
  info.max_seq_len = m.max_pos;
  info.num_experts = m.experts;
  info.experts_per_token = m.top_k;
  info.has_mla = m.mla;
  info.dim_sources = m.dim_sources;
  return info;
}

}  // namespace

Graph graph_from_hf_config(const nlohmann::json& config, const std::string& source) {
  const HfModel m = read_hf_model(config, source);
  Graph g;
  g.info = model_info(m, source);
  g.blocks.push_back(build_embed(m));
  if (m.experts == 0) {
    g.blocks.push_back(build_layer(m, "layer", m.layers, FfnKind::dense));
  } else {
    if (m.dense_layers > 0) g.blocks.push_back(build_layer(m, "dense_layer", m.dense_layers, FfnKind::dense));
    if (m.layers > m.dense_layers)
      g.blocks.push_back(build_layer(m, "moe_layer", m.layers - m.dense_layers, FfnKind::moe));
  }
  g.blocks.push_back(build_head(m));
  if (m.tied) g.tied_parameters.push_back({"embed.wte", "head.wte"});
  return g;
}

}  // namespace mgt::ir
