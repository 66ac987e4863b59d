// State-space and hybrid Hugging Face families: pure Mamba-1 (mamba, falcon_mamba), pure Mamba-2
// (mamba2), Jamba (Mamba-1 and attention layers by period/offset, MoE by period/offset) and
// Nemotron-H (Mamba-2, attention and MLP layers by hybrid_override_pattern). Reads the config into
// HfModel; hf_config.cpp builds the blocks. Key names and defaults follow each family's
// transformers config class (MambaConfig, FalconMambaConfig, Mamba2Config, JambaConfig,
// NemotronHConfig); docs/graph_format.md, "State-space layers".
#include "hf_model.hpp"

#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

namespace mgt::ir::hf {

namespace {

using json = nlohmann::json;

/// "time_step_rank" / "mamba_dt_rank": an integer, or "auto" (absent too) for ceil(hidden / 16).
int64_t dt_rank(const json& c, const char* key, int64_t hidden, const std::string& source) {
  if (!c.contains(key) || c[key].is_null() || (c[key].is_string() && c[key] == "auto")) return (hidden + 15) / 16;
  return require_positive_int(c, key, source);
}

/// Common sizes and the dim sources every SSM family shares.
void read_common(const json& c, HfModel& m, bool tied_default, const std::string& source) {
  m.hidden = require_positive_int(c, "hidden_size", source);
  m.layers = require_positive_int(c, "num_hidden_layers", source);
  m.vocab = require_positive_int(c, "vocab_size", source);
  m.tied = optional_bool(c, "tie_word_embeddings", tied_default, source);
  m.max_pos = optional_nonnegative_int(c, "max_position_embeddings", 0, source);
  m.norm = NormKind::rms;
  m.rope = false;  // neither Mamba nor these hybrids' attention layers use positional encodings
  m.dim_sources.insert({{'h', "hidden_size"}, {'v', "vocab_size"}});
}

/// GQA sizes of the attention layers of a hybrid (head_dim read, else hidden / heads).
void read_attention(const json& c, HfModel& m, const char* head_dim_key, const std::string& source) {
  m.heads = require_positive_int(c, "num_attention_heads", source);
  m.kv_heads = optional_positive_int(c, "num_key_value_heads", m.heads, source);
  if (m.heads % m.kv_heads != 0)
    throw InputError(source, "num_key_value_heads",
                     std::to_string(m.kv_heads) + " does not divide num_attention_heads " + std::to_string(m.heads));
  m.head_dim = optional_positive_int(c, head_dim_key, 0, source);
  if (m.head_dim == 0) {
    if (m.hidden % m.heads != 0)
      throw InputError(source, "num_attention_heads", "does not divide hidden_size", "set \"head_dim\"");
    m.head_dim = m.hidden / m.heads;
  }
  m.qkv_bias = m.o_bias = optional_bool(c, "attention_bias", false, source);
  m.dim_sources.insert({{'a', "num_attention_heads"}, {'k', "num_key_value_heads"}, {'d', head_dim_key}});
}

/// mamba / falcon_mamba: every layer a Mamba-1 mixer (MambaConfig keys).
void read_mamba1(const json& c, HfModel& m, const std::string& source) {
  read_common(c, m, /*tied_default=*/true, source);
  const int64_t expand = optional_positive_int(c, "expand", 2, source);
  m.ssm.inner = optional_positive_int(c, "intermediate_size", checked_mul(expand, m.hidden, source, "expand"), source);
  m.ssm.state = optional_positive_int(c, "state_size", 16, source);
  m.ssm.conv = optional_positive_int(c, "conv_kernel", 4, source);
  m.ssm.dt_rank = dt_rank(c, "time_step_rank", m.hidden, source);
  m.ssm.conv_bias = optional_bool(c, "use_conv_bias", true, source);
  m.ssm.proj_bias = optional_bool(c, "use_bias", false, source);
  m.layer_kinds.assign(size_t(m.layers), LayerKind{.mixer = Mixer::mamba1, .ffn = false});
  m.dim_sources.insert({{'f', "intermediate_size"}, {'n', "state_size"}, {'r', "time_step_rank"}, {'c', "conv_kernel"}});
}

/// Mamba-2 mixer sizes under a family's key names.
struct Mamba2Keys {
  const char *heads, *head_dim, *state, *groups;
};

void read_mamba2_sizes(const json& c, HfModel& m, Mamba2Keys k, const std::string& source) {
  m.ssm.heads = require_positive_int(c, k.heads, source);
  m.ssm.head_dim = optional_positive_int(c, k.head_dim, 64, source);
  m.ssm.inner = checked_mul(m.ssm.heads, m.ssm.head_dim, source, k.heads);
  m.ssm.state = optional_positive_int(c, k.state, 128, source);
  m.ssm.groups = optional_positive_int(c, k.groups, 1, source);
  m.ssm.conv = optional_positive_int(c, "conv_kernel", 4, source);
  m.ssm.chunk = optional_positive_int(c, "chunk_size", 256, source);
  m.ssm.conv_bias = optional_bool(c, "use_conv_bias", true, source);
  // Mamba2Config says use_bias, NemotronHConfig mamba_proj_bias.
  m.ssm.proj_bias = optional_bool(c, "use_bias", false, source) || optional_bool(c, "mamba_proj_bias", false, source);
  if (m.ssm.heads % m.ssm.groups != 0)
    throw InputError(source, k.groups, std::to_string(m.ssm.groups) + " does not divide " + k.heads + " " +
                                           std::to_string(m.ssm.heads),
                     "Mamba-2 heads share B and C within a group: heads must be a multiple of the groups");
}

/// mamba2: every layer a Mamba-2 mixer (Mamba2Config keys).
void read_mamba2(const json& c, HfModel& m, const std::string& source) {
  read_common(c, m, /*tied_default=*/true, source);
  read_mamba2_sizes(c, m, {"num_heads", "head_dim", "state_size", "n_groups"}, source);
  m.layer_kinds.assign(size_t(m.layers), LayerKind{.mixer = Mixer::mamba2, .ffn = false});
  m.dim_sources.insert({{'a', "num_heads"}, {'d', "head_dim"}, {'k', "n_groups"}, {'n', "state_size"}});
}

/// jamba: layer i attends when i % attn_layer_period == attn_layer_offset (else Mamba-1), and routes
/// to experts when i % expert_layer_period == expert_layer_offset (else a dense MLP).
void read_jamba(const json& c, HfModel& m, const std::string& source) {
  read_common(c, m, /*tied_default=*/false, source);
  read_attention(c, m, "head_dim", source);
  m.ffn = require_positive_int(c, "intermediate_size", source);
  const int64_t expand = optional_positive_int(c, "mamba_expand", 2, source);
  m.ssm.inner = checked_mul(expand, m.hidden, source, "mamba_expand");
  m.ssm.state = optional_positive_int(c, "mamba_d_state", 16, source);
  m.ssm.conv = optional_positive_int(c, "mamba_d_conv", 4, source);
  m.ssm.dt_rank = dt_rank(c, "mamba_dt_rank", m.hidden, source);
  m.ssm.conv_bias = optional_bool(c, "mamba_conv_bias", true, source);
  m.ssm.proj_bias = optional_bool(c, "mamba_proj_bias", false, source);
  m.ssm.dt_bc_norms = true;
  const int64_t attn_period = optional_positive_int(c, "attn_layer_period", 8, source);
  const int64_t attn_offset = optional_nonnegative_int(c, "attn_layer_offset", 4, source);
  const int64_t expert_period = optional_positive_int(c, "expert_layer_period", 2, source);
  const int64_t expert_offset = optional_nonnegative_int(c, "expert_layer_offset", 1, source);
  const int64_t experts = optional_positive_int(c, "num_experts", 16, source);
  if (experts > 1) {
    m.experts = experts;
    m.top_k = optional_positive_int(c, "num_experts_per_tok", 2, source);
    if (m.top_k > m.experts)
      throw InputError(source, "num_experts_per_tok", "exceeds num_experts " + std::to_string(m.experts));
    m.moe_ffn = m.ffn;
    m.dim_sources['e'] = "num_experts";
  }
  m.layer_kinds.assign(size_t(m.layers), LayerKind{});
  for (int64_t i = 0; i < m.layers; ++i) {
    LayerKind& k = m.layer_kinds[size_t(i)];
    k.mixer = i % attn_period == attn_offset ? Mixer::attention : Mixer::mamba1;
    k.moe = m.experts > 0 && i % expert_period == expert_offset;
  }
  m.dim_sources.insert({{'f', "intermediate_size"}, {'n', "mamba_d_state"}, {'r', "mamba_dt_rank"}, {'c', "mamba_d_conv"}});
}

/// nemotron_h: one character of hybrid_override_pattern per layer: 'M' Mamba-2, '*' attention,
/// '-' MLP (squared ReLU, not gated). 'E' (MoE, Nemotron-3) is refused.
void read_nemotron_h(const json& c, HfModel& m, const std::string& source) {
  read_common(c, m, /*tied_default=*/false, source);
  const char* head_dim_key = c.contains("head_dim") && !c["head_dim"].is_null() ? "head_dim" : "attention_head_dim";
  read_attention(c, m, head_dim_key, source);
  m.ffn = require_positive_int(c, "intermediate_size", source);
  m.gated_mlp = false;
  m.act = ActivationKind::relu;  // relu2 = relu(x)^2: the same elementwise cost
  m.mlp_bias = optional_bool(c, "mlp_bias", false, source);
  read_mamba2_sizes(c, m, {"mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups"}, source);
  const std::string pattern = require_string(c, "hybrid_override_pattern", source);
  if (int64_t(pattern.size()) != m.layers)
    throw InputError(source, "hybrid_override_pattern",
                     "has " + std::to_string(pattern.size()) + " characters for " + std::to_string(m.layers) + " layers",
                     "one character per layer: M (Mamba-2), * (attention), - (MLP)");
  m.layer_kinds.assign(size_t(m.layers), LayerKind{});
  for (size_t i = 0; i < pattern.size(); ++i) {
    LayerKind& k = m.layer_kinds[i];
    switch (pattern[i]) {
      case 'M': k = {.mixer = Mixer::mamba2, .ffn = false}; break;
      case '*': k = {.mixer = Mixer::attention, .ffn = false}; break;
      case '-': k = {.mixer = Mixer::none, .ffn = true}; break;
      default:
        throw InputError(source, "hybrid_override_pattern",
                         std::string("layer ") + std::to_string(i) + " is '" + pattern[i] + "'",
                         "mgt models M (Mamba-2), * (attention) and - (MLP) layers; describe other layers as an "
                         "mgt.graph/1 file (docs/graph_format.md)");
    }
  }
  m.dim_sources.insert({{'f', "intermediate_size"}, {'n', "ssm_state_size"}});
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ssm_families() {
  return {{"mamba", "MambaForCausalLM"},
          {"falcon_mamba", "FalconMambaForCausalLM"},
          {"mamba2", "Mamba2ForCausalLM"},
          {"jamba", "JambaForCausalLM"},
          {"nemotron_h", "NemotronHForCausalLM"}};
}

bool read_ssm_family(const json& c, HfModel& m, const std::string& source) {
  if (m.model_type == "mamba" || m.model_type == "falcon_mamba") read_mamba1(c, m, source);
  else if (m.model_type == "mamba2") read_mamba2(c, m, source);
  else if (m.model_type == "jamba") read_jamba(c, m, source);
  else if (m.model_type == "nemotron_h") read_nemotron_h(c, m, source);
  else return false;
  return true;
}

}  // namespace mgt::ir::hf
