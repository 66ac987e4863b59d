// Encoder families of Hugging Face configs: BERT (bidirectional self-attention, post-LN, learned
// position and segment embeddings, trained with masked-language modelling and, for
// BertForPreTraining, next-sentence prediction), ViT (bidirectional pre-LN encoder over image
// patches: the patch embedding is a GEMM over each patch's pixels, a class token, learned
// positions; trained as an image classifier) and CLIP (a ViT-like vision tower and a causal text
// tower trained with the contrastive loss). Reads the config into HfModel; hf_config.cpp builds
// the blocks. Key names and defaults follow transformers' BertConfig, ViTConfig and CLIPConfig;
// docs/graph_format.md, "Encoders". T5 (encoder-decoder) is read here too.
#include "hf_model.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/input_limits.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

namespace mgt::ir::hf {

namespace {

using json = nlohmann::json;

const std::set<std::string> kGelu = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python"};
/// CLIP's OpenAI checkpoints use quick_gelu, x * sigmoid(1.702 x): one elementwise pass like GELU,
/// so it is priced (and run) as GELU.
const std::set<std::string> kClipActivations = {"quick_gelu", "gelu", "gelu_new", "gelu_pytorch_tanh"};

/// hidden_act, when given, must be one of `accepted` (mgt prices and runs that function).
void check_activation(const json& c, const std::string& model_type, const std::set<std::string>& accepted,
                      const std::string& source) {
  if (!c.contains("hidden_act") || c["hidden_act"].is_null()) return;
  if (c["hidden_act"].is_string() && accepted.count(c["hidden_act"].get<std::string>())) return;
  std::string list;
  for (const auto& name : accepted) list += (list.empty() ? "" : ", ") + name;
  throw InputError(source, "hidden_act", "activation " + c["hidden_act"].dump() + " is not what " + model_type +
                                               " is modelled with", "use one of " + list);
}

void check_gelu(const json& c, const std::string& model_type, const std::string& source) {
  check_activation(c, model_type, kGelu, source);
}

/// What BERT and ViT share: multi-head attention with biases on q/k/v/o, a plain GELU MLP with
/// biases, LayerNorms with biases, no rotary positions, no causal mask.
void read_encoder_common(const json& c, HfModel& m, const std::string& source) {
  m.hidden = require_positive_int(c, "hidden_size", source);
  m.layers = require_positive_int(c, "num_hidden_layers", source);
  if (m.layers > kMaxLayers)
    throw InputError(source, "num_hidden_layers", "is " + std::to_string(m.layers) + ", more than " +
                                                      std::to_string(kMaxLayers));
  m.heads = m.kv_heads = require_positive_int(c, "num_attention_heads", source);
  if (m.hidden % m.heads != 0)
    throw InputError(source, "num_attention_heads",
                     std::to_string(m.heads) + " does not divide hidden_size " + std::to_string(m.hidden),
                     "hidden_size must be a multiple of num_attention_heads");
  m.head_dim = m.hidden / m.heads;
  m.ffn = require_positive_int(c, "intermediate_size", source);
  m.norm = NormKind::layer;
  m.norm_bias = true;
  m.o_bias = m.mlp_bias = true;
  m.gated_mlp = false;
  m.act = ActivationKind::gelu;
  m.rope = false;
  m.bidirectional = true;
  m.layer_kinds.assign(size_t(m.layers), LayerKind{});
  m.dim_sources.insert({{'h', "hidden_size"}, {'a', "num_attention_heads"}, {'k', "num_attention_heads"},
                        {'d', "hidden_size / num_attention_heads"}, {'f', "intermediate_size"}});
}

/// bert: post-LN layers; embeddings = word + position + segment, then a LayerNorm. The heads are
/// BERT's pre-training heads: the MLM transform and decoder (tied to the word embeddings, with a
/// bias) always; the pooler and next-sentence classifier for BertForPreTraining.
void read_bert(const json& c, HfModel& m, const std::string& source) {
  read_encoder_common(c, m, source);
  check_gelu(c, "bert", source);
  if (c.contains("position_embedding_type") && c["position_embedding_type"] != "absolute")
    throw InputError(source, "position_embedding_type", c["position_embedding_type"].dump() + " is not modelled",
                     "mgt models BERT's learned absolute positions (\"absolute\")");
  m.vocab = require_positive_int(c, "vocab_size", source);
  m.positions = m.max_pos = optional_positive_int(c, "max_position_embeddings", 512, source);
  m.encoder.token_types = optional_nonnegative_int(c, "type_vocab_size", 2, source);
  m.encoder.embed_norm = true;
  m.encoder.mlm_head = true;
  m.encoder.nsp_head = m.architecture == "BertForPreTraining";
  m.qkv_bias = true;
  m.lm_head_bias = true;  // cls.predictions.bias
  m.tied = optional_bool(c, "tie_word_embeddings", true, source);
  m.pre_norm = false;
  m.norm_after_residual = true;
  m.dim_sources.insert({{'v', "vocab_size"}, {'p', "max_position_embeddings"}, {'t', "type_vocab_size"}});
}

/// The classifier's label count: the size of id2label, else num_labels.
int64_t label_count(const json& c, const std::string& source) {
  if (c.contains("id2label") && c["id2label"].is_object() && !c["id2label"].empty())
    return int64_t(c["id2label"].size());
  if (c.contains("num_labels")) return require_positive_int(c, "num_labels", source);
  throw InputError(source, "id2label", "missing (and no \"num_labels\")",
                   "an image classifier needs its labels: add \"num_labels\" (1000 for ImageNet-1k)");
}

/// The patch grid of a vision encoder: (image_size / patch_size)^2 patches plus the class token; the
/// patch embedding is a Conv2d with stride = kernel = patch_size, i.e. one GEMM over each patch's
/// num_channels x patch_size^2 pixels. `patch` defaults to ViT's 16 (CLIP's config class: 32).
void read_patch_grid(const json& c, HfModel& m, int64_t default_patch, const std::string& source) {
  const int64_t image = optional_positive_int(c, "image_size", 224, source);
  const int64_t patch = optional_positive_int(c, "patch_size", default_patch, source);
  const int64_t channels = optional_positive_int(c, "num_channels", 3, source);
  if (image % patch != 0)
    throw InputError(source, "patch_size", std::to_string(patch) + " does not divide image_size " + std::to_string(image),
                     "a vision transformer cuts the image into whole patches");
  const int64_t side = image / patch;
  m.positions = m.max_pos = checked_mul(side, side, source, "image_size") + 1;
  m.encoder.patch_pixels = checked_mul(checked_mul(channels, patch, source, "num_channels"), patch, source, "patch_size");
  m.dim_sources.insert({{'p', "(image_size / patch_size)^2 + 1"}, {'c', "num_channels x patch_size^2"}});
}

/// vit: pre-LN layers over the patches and the class token (a bias on the patch GEMM); the head a
/// LayerNorm and a linear classifier.
void read_vit(const json& c, HfModel& m, const std::string& source) {
  if (m.architecture != "ViTForImageClassification")
    throw InputError(source, "architectures", "\"" + m.architecture + "\" has no training head mgt models",
                     "mgt models ViT as an image classifier: set \"architectures\": [\"ViTForImageClassification\"] "
                     "and \"num_labels\"");
  read_encoder_common(c, m, source);
  check_gelu(c, "vit", source);
  read_patch_grid(c, m, 16, source);
  m.encoder.classes = m.vocab = label_count(c, source);
  m.qkv_bias = optional_bool(c, "qkv_bias", true, source);
  m.lm_head_bias = true;  // classifier bias
  m.tied = false;
  m.dim_sources.insert({'v', "id2label"});
}

/// t5 (T5Config keys): an encoder of num_layers and a decoder of num_decoder_layers pre-RMSNorm
/// layers without biases, heads of d_kv (so num_heads x d_kv need not be d_model), relative position
/// buckets in the first layer of each stack, the MLP by feed_forward_proj ("relu": T5 1.0,
/// "gated-gelu": T5 1.1 and Flan-T5), the word embeddings shared by encoder and decoder.
void read_t5(const json& c, HfModel& m, const std::string& source) {
  m.hidden = require_positive_int(c, "d_model", source);
  m.layers = require_positive_int(c, "num_layers", source);
  m.encoder.decoder_layers = optional_positive_int(c, "num_decoder_layers", m.layers, source);
  if (m.layers > kMaxLayers || m.encoder.decoder_layers > kMaxLayers ||
      m.layers + m.encoder.decoder_layers > kMaxLayers)
    throw InputError(source, "num_decoder_layers", "encoder and decoder together exceed " + std::to_string(kMaxLayers) +
                                                       " layers");
  m.heads = m.kv_heads = require_positive_int(c, "num_heads", source);
  m.head_dim = optional_positive_int(c, "d_kv", 64, source);
  m.ffn = require_positive_int(c, "d_ff", source);
  m.vocab = require_positive_int(c, "vocab_size", source);
  m.encoder.relative_buckets = optional_positive_int(c, "relative_attention_num_buckets", 32, source);
  m.max_pos = optional_nonnegative_int(c, "n_positions", 0, source);  // relative positions: no table bound
  const std::string proj = c.contains("feed_forward_proj") ? require_string(c, "feed_forward_proj", source) : "relu";
  if (proj == "relu") {
    m.gated_mlp = false, m.act = ActivationKind::relu;
  } else if (proj == "gated-gelu") {
    m.act = ActivationKind::gelu_glu;
  } else if (proj == "gated-silu") {
    m.act = ActivationKind::silu_glu;
  } else {
    throw InputError(source, "feed_forward_proj", "\"" + proj + "\" is not modelled",
                     "use \"relu\" (T5 1.0), \"gated-gelu\" (T5 1.1, Flan-T5) or \"gated-silu\"");
  }
  m.norm = NormKind::rms;
  m.rope = false;
  m.bidirectional = true;  // the encoder's; the decoder's self-attention is causal (hf_config.cpp)
  m.tied = optional_bool(c, "tie_word_embeddings", true, source);
  m.layer_kinds.assign(size_t(m.layers), LayerKind{});
  m.dim_sources.insert({{'h', "d_model"}, {'a', "num_heads"}, {'k', "num_heads"}, {'d', "d_kv"}, {'f', "d_ff"},
                        {'v', "vocab_size"}, {'u', "relative_attention_num_buckets"}, {'w', "num_heads"}});
}

// transformers' CLIPVisionConfig and CLIPTextConfig __init__ defaults, for keys a config leaves out
// (published CLIP configs list their towers in full; older ones only what differs).
constexpr const char* kClipVisionDefaults = R"({"hidden_size": 768, "intermediate_size": 3072, "projection_dim": 512,
  "num_hidden_layers": 12, "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 32})";
constexpr const char* kClipTextDefaults = R"({"vocab_size": 49408, "hidden_size": 512, "intermediate_size": 2048,
  "projection_dim": 512, "num_hidden_layers": 12, "num_attention_heads": 8, "max_position_embeddings": 77})";

/// One CLIP tower (transformers' CLIPVisionTransformer / CLIPTextTransformer): pre-LN layers with
/// LayerNorms, q/k/v/o and MLP biases. Vision: ViT's patch grid without a patch bias, the class
/// token, learned positions, pre_layrnorm over the embeddings, attention both ways. Text: token and
/// learned position embeddings, a causal mask. `projection`: the width of the shared embedding
/// space the tower's pooled output is projected to (0: a tower without projection).
void read_clip_tower(const json& config, HfModel& m, bool vision, int64_t projection, const std::string& source) {
  json c = json::parse(vision ? kClipVisionDefaults : kClipTextDefaults);
  c.update(config);
  read_encoder_common(c, m, source);
  check_activation(c, m.model_type, kClipActivations, source);
  m.qkv_bias = true;
  m.encoder.projection = projection;
  if (vision) {
    read_patch_grid(c, m, 32, source);
    m.encoder.patch_bias = false;
    m.encoder.embed_pre_norm = true;
  } else {
    m.vocab = require_positive_int(c, "vocab_size", source);
    m.positions = m.max_pos = require_positive_int(c, "max_position_embeddings", source);
    m.bidirectional = false;  // CLIPTextTransformer applies a causal mask
    m.dim_sources.insert({{'v', "vocab_size"}, {'p', "max_position_embeddings"}});
  }
  if (projection) m.dim_sources['z'] = "projection_dim";
}

/// clip (CLIPConfig): a vision and a text tower trained together with the contrastive loss; both
/// project to projection_dim (visual_projection, text_projection, no biases) and logit_scale scales
/// the similarities. A tower's config may be absent (the config class's defaults).
void read_clip(const json& c, HfModel& m, const std::string& source) {
  const int64_t projection = optional_positive_int(c, "projection_dim", 512, source);
  for (const char* key : {"vision_config", "text_config"}) {
    if (c.contains(key) && !c[key].is_null() && !c[key].is_object())
      throw InputError(source, key, "expected an object (a CLIP tower's config), got " + c[key].dump());
    HfModel tower;
    tower.model_type = m.model_type;
    tower.architecture = m.architecture;
    const json sub = c.contains(key) && c[key].is_object() ? c[key] : json::object();
    read_clip_tower(sub, tower, std::string(key) == "vision_config", projection, source + " (" + key + ")");
    m.towers.push_back(std::move(tower));
  }
  const HfModel &vision = m.towers[0], &text = m.towers[1];
  if (vision.layers + text.layers > kMaxLayers)
    throw InputError(source, "num_hidden_layers", "the two towers together exceed " + std::to_string(kMaxLayers) + " layers");
  // What messages and the planner quote: layers of both towers; the vision tower's widths (the
  // larger tower); one sequence length for both, the longer of the two token counts (docs).
  m.layers = vision.layers + text.layers;
  m.hidden = vision.hidden, m.heads = m.kv_heads = vision.heads, m.vocab = text.vocab;
  m.max_pos = std::max(vision.max_pos, text.max_pos);
  m.dim_sources = vision.dim_sources;
  m.dim_sources.insert(text.dim_sources.begin(), text.dim_sources.end());  // v: vocab_size
}

/// clip_vision_model / clip_text_model (CLIPVisionConfig / CLIPTextConfig) on their own: the tower,
/// with its projection for the *WithProjection architectures.
void read_clip_tower_model(const json& c, HfModel& m, const std::string& source) {
  const bool with_projection = m.architecture.ends_with("WithProjection");
  const int64_t projection = with_projection ? optional_positive_int(c, "projection_dim", 512, source) : 0;
  read_clip_tower(c, m, m.model_type == "clip_vision_model", projection, source);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> encoder_families() {
  return {{"bert", "BertForMaskedLM"},
          {"vit", "ViTForImageClassification"},
          {"t5", "T5ForConditionalGeneration"},
          {"clip", "CLIPModel"},
          {"clip_vision_model", "CLIPVisionModel"},
          {"clip_text_model", "CLIPTextModel"}};
}

bool read_encoder_family(const json& c, HfModel& m, const std::string& source) {
  if (m.model_type == "bert") read_bert(c, m, source);
  else if (m.model_type == "vit") read_vit(c, m, source);
  else if (m.model_type == "t5") read_t5(c, m, source);
  else if (m.model_type == "clip") read_clip(c, m, source);
  else if (m.model_type == "clip_vision_model" || m.model_type == "clip_text_model") read_clip_tower_model(c, m, source);
  else return false;
  return true;
}

}  // namespace mgt::ir::hf
