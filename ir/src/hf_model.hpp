// Private to the Hugging Face frontend: the sizes and structure read from a config.json
// (hf_families.cpp, one table row per model_type) that the graph builders (hf_config.cpp) consume.
#pragma once

#include "mgt/ir/graph.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mgt::ir::hf {

enum class QkNorm { none, per_head, full_width };

/// How attention and MLP share a layer: one after the other (Llama), or both reading the layer
/// input with their outputs summed into one residual (GPT-NeoX, Falcon) under one norm or two.
enum class Parallel { none, shared_norm, two_norms };

/// The token mixer of a layer: attention, a Mamba-1 or Mamba-2 state-space layer, or none (an
/// MLP-only layer of Nemotron-H).
enum class Mixer { attention, mamba1, mamba2, none };

/// What one decoder layer holds; runs of equal kinds become one Block.
struct LayerKind {
  bool moe = false;
  int64_t sliding_window = 0;  ///< 0 = full attention
  Mixer mixer = Mixer::attention;
  bool ffn = true;  ///< false: the layer is its mixer only (Mamba stacks, Nemotron-H's M and * layers)
  bool operator==(const LayerKind&) const = default;
};

/// State-space layer sizes (Mamba-1: inner channels, state, conv, dt rank; Mamba-2: heads x head_dim
/// channels in groups, SSD chunk length).
struct SsmSizes {
  int64_t inner = 0, state = 0, conv = 0, dt_rank = 0;  ///< Mamba-1 and Mamba-2
  int64_t heads = 0, head_dim = 0, groups = 0, chunk = 0;  ///< Mamba-2 only
  bool conv_bias = true, proj_bias = false;
  bool dt_bc_norms = false;  ///< Jamba: RMSNorms with weights on dt, B and C
};

/// Encoder families (bert, vit): what their embeddings and training heads hold beyond a decoder's.
struct EncoderSizes {
  int64_t token_types = 0;   ///< BERT type_vocab_size: segment embedding rows (0 = none)
  bool embed_norm = false;   ///< BERT: a LayerNorm over the summed embeddings
  int64_t patch_pixels = 0;  ///< ViT: channels x patch^2, the patch GEMM's inner dim (0 = token ids)
  int64_t classes = 0;       ///< ViT: classifier labels (the head's "vocabulary")
  bool mlm_head = false;     ///< BERT: MLM transform (dense, GELU, LayerNorm) before the tied decoder
  bool nsp_head = false;     ///< BertForPreTraining: pooler (dense, tanh) and next-sentence classifier
  /// T5: decoder layers after the `layers` encoder layers (0 = not an encoder-decoder), and the
  /// relative position buckets of the first layer of each stack.
  int64_t decoder_layers = 0, relative_buckets = 0;
  bool patch_bias = true;       ///< ViT's patch Conv2d has a bias; CLIP's has none
  bool embed_pre_norm = false;  ///< CLIP vision: pre_layrnorm over the embeddings before the first layer
  int64_t projection = 0;       ///< CLIP: projection_dim of the tower's pooled output (0 = none)
};

/// The sizes read from a config, validated once; builders only read this struct.
struct HfModel {
  std::string model_type;
  std::string architecture;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, max_pos = 0;
  int64_t positions = 0;  ///< learned position table rows (GPT-2); 0 = rotary
  bool tied = false;
  NormKind norm = NormKind::rms;
  bool norm_bias = false, qkv_bias = false, o_bias = false, mlp_bias = false, lm_head_bias = false;
  bool gated_mlp = true;
  ActivationKind act = ActivationKind::silu_glu;
  QkNorm qk_norm = QkNorm::none;
  bool pre_norm = true, post_norm = false;  ///< where the sublayer norms sit (OLMo-2: post only; Gemma-2: both)
  Parallel parallel = Parallel::none;
  // Mixture of experts (0 experts = dense).
  int64_t experts = 0, top_k = 0, moe_ffn = 0, shared_ffn = 0;
  bool router_bias = false;
  bool expert_bias = false;  ///< GPT-OSS: every routed expert's gate / up and down projections have biases
  double glu_clamp = 0;      ///< swiglu_limit: the gated unit's inputs are clamped to it (0 = none)
  bool shared_gate = false;  ///< Qwen2-MoE: a sigmoid gate (h -> 1) scales the shared expert
  // Multi-head latent attention (DeepSeek).
  bool mla = false;
  int64_t q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
  SsmSizes ssm;
  bool rope = true;  ///< false: attention without positions (Jamba, Nemotron-H)
  bool bidirectional = false;        ///< encoders: attention without a causal mask
  bool norm_after_residual = false;  ///< BERT: LayerNorm(x + sublayer(x)) (post-LN)
  EncoderSizes encoder;
  /// DeepSeek-V3 multi-token prediction modules (num_nextn_predict_layers), each one more layer.
  int64_t mtp_layers = 0;
  /// One entry per decoder layer, in order.
  std::vector<LayerKind> layer_kinds;
  std::map<char, std::string> dim_sources;
  /// CLIP (model_type clip): the vision tower, then the text tower, each read as one encoder; empty
  /// for every other model (a standalone clip_vision_model / clip_text_model is the model itself).
  std::vector<HfModel> towers;
};

/// Reads and validates a config (a top-level one, or the "text_config" of a multimodal one).
HfModel read_hf_model(const nlohmann::json& config, const std::string& source);

/// The state-space families (mamba, falcon_mamba, mamba2, jamba, nemotron_h: hf_ssm_families.cpp);
/// false when `model_type` is none of them.
bool read_ssm_family(const nlohmann::json& config, HfModel& m, const std::string& source);
/// Their model_types and architectures, for the unsupported-type hint and architecture lookup.
std::vector<std::pair<std::string, std::string>> ssm_families();

/// The encoder and encoder-decoder families (bert, vit, t5, clip and its towers: hf_encoder_families.cpp); false when `model_type` is neither.
bool read_encoder_family(const nlohmann::json& config, HfModel& m, const std::string& source);
/// Their model_types and architectures.
std::vector<std::pair<std::string, std::string>> encoder_families();

}  // namespace mgt::ir::hf
