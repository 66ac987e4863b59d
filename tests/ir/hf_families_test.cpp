// Tests for the model-family table (ir/src/hf_families.cpp): every added example config against
// its published parameter count, per-family layer structure on tiny hand-computed configs, and the
// error for a family still missing.
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace mgt::ir {
namespace {

using nlohmann::json;

/// One config per family added with the family table (examples/models/README.md).
std::string families_dir() { return std::string(MGT_SOURCE_DIR) + "/examples/models/families"; }

std::string model_path(std::string_view name) { return families_dir() + "/" + std::string(name) + ".json"; }

// ---------------------------------------------------------------------------------------------
// Published counts. `total`/`active` are computed by hand from the config (formula in the comment);
// the published figure (billions) must agree within `tolerance_b`: 0.1 % where the source gives
// the exact count, half the last published digit where it rounds.

struct Published {
  std::string_view name;
  int64_t total, active;  ///< hand-computed; active == total for dense models
  double published_total_b, published_active_b, tolerance_b, active_tolerance_b;
  const char* source;
};

const std::vector<Published> kPublished{
    // 24 x (4h^2 + qkv bias 3h + router 60h + 60 experts x 3h x 1408 + shared 3h x 5632 + gate h + 2 norms)
    // + untied 2 x 151936h + final norm, h = 2048. Active: 4 of 60 experts.
    {"Qwen1.5-MoE-A2.7B", 14315784192, 2689173504, 14.315784192, 2.7, 0.0143, 0.05,
     "keras-hub qwen_moe_presets.py qwen1.5_moe_2.7b_en params (exact); model card 2.7B activated"},
    // MLA (q 2048x16x192, kv_a 2048x512, k_pe 2048x64, norm 512, k_b/v_b 512x16x128, o 16x128x2048),
    // 1 dense layer (ffn 10944) + 26 MoE layers (64 x 3 x 2048 x 1408, 2 shared, router 2048x64),
    // untied 2 x 102400 x 2048. Active 6 of 64 routed experts; the card's 2.4B activated is not
    // reproduced (2.66B here counts both embedding tables).
    {"DeepSeek-V2-Lite", 15706484224, 2661150208, 15.7, 2.66, 0.05, 0.01,
     "deepseek-ai/DeepSeek-V2-Lite model card: 15.7B total (rounded)"},
    // 18 x (q 2048x2048 + k,v 2048x256 + o + 3 x 2048 x 16384 + 2 norms) + tied 256000 x 2048 + norm.
    {"Gemma-2B", 2506172416, 2506172416, 2.506172416, 2.506172416, 0.0025, 0.0025,
     "keras-hub gemma_presets.py gemma_2b_en params (exact)"},
    // 26 x (q 1152x1024 + k,v 1152x256 + o + 3 x 1152 x 6912 + 4 norms + q/k norms 2 x 256)
    // + tied 262144 x 1152 + norm.
    {"Gemma-3-1B", 999885952, 999885952, 0.999885952, 0.999885952, 0.001, 0.001,
     "keras-hub gemma3_presets.py gemma3_instruct_1b params (exact)"},
    // 32 x (q,o 4608^2 + k,v 4608x512, all with biases; c_fc/c_proj 4608x18432 with biases;
    // 2 layer norms with bias) + tied 49152 x 4608 + final layer norm.
    {"StarCoder2-7B", 7173923840, 7173923840, 7.0, 7.0, 0.5, 0.5, "bigcode/starcoder2-7b model card: 7B (rounded)"},
    // 32 x (4 x (2560^2 + 2560) + 2 x 2560 x 10240 + biases + 2 layer norms) + untied 2 x 50432 x 2560.
    {"RedPajama-INCITE-3B", 2775864320, 2775864320, 2.8, 2.8, 0.05, 0.05,
     "RedPajama-INCITE-Base-3B-v1 model card: 2.8B (rounded)"},
    // Text model only: 48 x (attention 62914560 + 16 experts x 3 x 5120 x 8192 + shared 3 x 5120 x 8192
    // + router 5120x16 + 2 norms) + untied 2 x 202048 x 5120 + norm. The card's 109B includes the
    // vision encoder, so the text total sits below it. Active: 1 routed + shared expert.
    {"Llama-4-Scout-17B-16E", 107769861120, 17172894720, 109.0, 17.0, 1.5, 0.5,
     "meta-llama/Llama-4-Scout-17B-16E model card: 109B total (vision included), 17B active (rounded)"},
    // 24 dense layers (ffn intermediate_size_mlp 16384) interleaved with 24 MoE layers (128 experts).
    {"Llama-4-Maverick-17B-128E", 400711848960, 17184691200, 400.0, 17.0, 5.0, 0.5,
     "meta-llama/Llama-4-Maverick-17B-128E model card: 400B total, 17B active (rounded)"},
    // 16 x (4 x 2048^2 + q/k norms 2 x 2048 + 64 experts x 3 x 2048 x 1024 + router + 2 norms)
    // + untied 2 x 50304 x 2048 + norm. Active 8 of 64.
    {"OLMoE-1B-7B-0125", 6919161856, 1282017280, 6.9, 1.3, 0.05, 0.05,
     "OLMoE paper (arXiv:2409.02060): 6.9B total, 1.3B active (rounded)"},
    // 60 x (qkv 8192 x (128 + 2 x 8) x 64 + dense 8192^2 + 2 x 8192 x 32768 + ln_attn/ln_mlp with bias)
    // + tied 65024 x 8192 + ln_f. "40B" is the model's nominal size.
    // 24 x (q,o 1024^2 + k,v 1024x512 + 32 experts x 3 x 1024 x 512 + router 1024x32 + 2 norms)
    // + tied 49155 x 1024 + norm. Active 8 of 32.
    {"Granite-3.1-1B-A400M", 1334628352, 428658688, 1.3, 0.4, 0.05, 0.05,
     "ibm-granite/granite-3.1-1b-a400m-instruct model card: 1.3B parameters, 400M active (rounded)"},
    // 32 x (q,o 4096^2 + k,v 4096x1024, q/k/v/o biases, 16 experts x 3 x 4096 x 6400, router 4096x16,
    // 2 layer norms with bias) + untied 2 x 32064 x 4096 + lm_head bias 32064 + final layer norm.
    {"Phi-3.5-MoE", 41873153344, 6640999744, 41.9, 6.6, 0.05, 0.05,
     "microsoft/Phi-3.5-MoE-instruct model card: 6.6B active; 41.9B total (rounded)"},
    {"Falcon-40B", 41303293952, 41303293952, 40.0, 40.0, 5.0, 5.0, "tiiuae/falcon-40b model card: 40B (nominal)"},
    // State-space and hybrid families (tests/ir/hf_ssm_families_test.cpp for their layer structure).
    // Mamba-1 layer (d inner, N state, R dt rank, K conv): in_proj h x 2d, conv d x K + bias d, x_proj
    // d x (R + 2N), dt_proj R x d + bias d, A d x N, D d, out_proj d x h, norm h.
    // 64 x (4096 x 16384 + 8192 x 4 + 8192 + 8192 x 288 + 256 x 8192 + 8192 + 8192 x 16 + 8192 + 8192 x 4096
    // + 4096) + untied 2 x 65024 x 4096 + norm.
    {"Falcon-Mamba-7B", 7272665088, 7272665088, 7.27, 7.27, 0.005, 0.005,
     "tiiuae/falcon-mamba-7b: 7.27B parameters (rounded to 0.01B)"},
    // 64 x (2560 x 10240 + 5120 x 4 + 5120 + 5120 x 192 + 160 x 5120 + 5120 + 5120 x 16 + 5120 + 5120 x 2560
    // + 2560) + tied 50280 x 2560 + norm.
    {"Mamba-2.8B", 2768345600, 2768345600, 2.8, 2.8, 0.05, 0.05, "state-spaces/mamba-2.8b-hf: 2.8B (nominal)"},
    // Mamba-2 layer (H heads of P, G groups, N state): in_proj h x (2HP + 2GN + H), conv (HP + 2GN) x 4
    // + bias, dt_bias, A, D (H each), gated norm HP, out_proj HP x h, norm h.
    // 64 x (4096 x 18560 + 10240 x 5 + 3 x 128 + 8192 + 8192 x 4096 + 4096) + untied 2 x 32768 x 4096 + norm.
    {"Mamba-Codestral-7B", 7285403648, 7285403648, 7.285403648, 7.285403648, 0.0073, 0.0073,
     "mistralai/Mamba-Codestral-7B-v0.1: 7,285,403,648 parameters (exact; ai-tldr.dev/models/codestral-mamba)"},
    // 24 Mamba-2 layers (as Codestral's with h 4096: 109640064 each), 4 attention layers (q, o 4096^2,
    // k, v 4096 x 1024, norm), 24 MLP layers (2 x 4096 x 21504, squared ReLU, norm) + untied 2 x 131072 x 4096.
    {"Nemotron-H-8B-Base-8K", 8100852736, 8100852736, 8.0, 8.0, 0.5, 0.5,
     "nvidia/Nemotron-H-8B-Base-8K model card: 8B (nominal)"},
    // 4 attention + MLP layers (41943040 + 3 x 4096 x 14336), 12 Mamba-1 + MLP and 16 Mamba-1 + MoE layers
    // (Mamba-1 as above with d 8192, N 16, R 256, plus dt/B/C norms 256 + 16 + 16; 16 experts of
    // 3 x 4096 x 14336, router 4096 x 16), 2 norms each, + untied 2 x 65536 x 4096 + norm. Active: 2 of 16.
    {"Jamba-v0.1", 51570323328, 12110311296, 52.0, 12.0, 0.5, 0.5,
     "ai21labs/Jamba-v0.1 model card: 52B total, 12B active (rounded)"},
    // 40 x (q, o 4096^2 + k, v 4096 x 1024 + 3 x 4096 x 12800 + 2 norms) + tied 49159 x 4096 + norm.
    {"Granite-3.3-8B", 8170864640, 8170864640, 8.0, 8.0, 0.5, 0.5, "ibm-granite Granite 3.3 8B model card: 8B (nominal)"},
    // GLM: 40 layers of q 4096^2 + 4096 bias, k, v 4096 x 256 + 256 biases each, o 4096^2, SwiGLU 3 x 4096 x
    // 13696, 2 norms; untied embedding and head 151552 x 4096; final norm.
    {"GLM-4-9B-Chat-HF",
     40 * (2 * 4096LL * 4096 + 4096 + 2 * (4096 * 256 + 256) + 3 * 4096LL * 13696 + 2 * 4096) + 2 * 151552LL * 4096 + 4096,
     9399951360, 9.4, 9.4, 0.05, 0.05, "THUDM/glm-4-9b-chat-hf Hub page: 9.4B params (safetensors, rounded)"},
    // GLM-4-0414 (glm4): GLM's layer plus the post-attention and post-MLP RMSNorms, 4 norms per layer.
    {"GLM-4-9B-0414",
     40 * (2 * 4096LL * 4096 + 4096 + 2 * (4096 * 256 + 256) + 3 * 4096LL * 13696 + 4 * 4096) + 2 * 151552LL * 4096 + 4096,
     9400279040, 9.400279040, 9.400279040, 0.0094, 0.0094,
     "llama.cpp n-params of a BF16 GGUF of a glm4 language model of this shape (GLM-4.6V-Flash's): 9,400,279,040; "
     "GLM-4-9B-0414's nominal 9B"},
    // CLIP ViT-B/32 (tests/ir/hf_encoder_families_test.cpp for its structure). A tower layer of width h and MLP f:
    // q, k, v, o h^2 + h each, fc1 h x f + f, fc2 f x h + h, 2 LayerNorms 2h each.
    // Text: tokens 49408 x 512, positions 77 x 512, 12 layers (h 512, f 2048), final LayerNorm 2 x 512.
    // Vision: class token 768, patch GEMM 3 x 32 x 32 x 768 (no bias), positions (7^2 + 1) x 768,
    // pre_layrnorm 2 x 768, 12 layers (h 768, f 3072), post_layernorm 2 x 768.
    // Projections 768 x 512 and 512 x 512 (no biases), logit_scale 1.
    {"CLIP-ViT-B-32",
     (49408 + 77) * 512 + 12 * (4 * (512 * 512 + 512) + 2 * 512 * 2048 + 2048 + 512 + 4 * 512) + 2 * 512 +
         768 + 3 * 32 * 32 * 768 + 50 * 768 + 2 * 768 +
         12 * (4 * (768 * 768 + 768) + 2 * 768 * 3072 + 3072 + 768 + 4 * 768) + 2 * 768 + 768 * 512 + 512 * 512 + 1,
     151277313, 0.151277313, 0.151277313, 0.000151, 0.000151,
     "openai/clip-vit-base-patch32 Hub page: 151,277,313 parameters (safetensors, exact)"},
    // Encoders and T5 (tests/ir/hf_encoder_families_test.cpp for their structure). BERT: words 30522 x 768,
    // positions 512 x 768, segments 2 x 768, embedding LayerNorm; 12 post-LN layers (q, k, v, o with biases,
    // GELU MLP 768 <-> 3072 with biases, 2 LayerNorms); MLM transform 768^2 + 768, its LayerNorm, decoder
    // bias 30522 (the decoder weight is the tied word table).
    {"BERT-base-uncased",
     (30522 + 512 + 2 + 2) * 768 + 12 * (4 * (768 * 768 + 768) + 2 * 768 * 3072 + 3072 + 768 + 4 * 768) +
         768 * 768 + 768 + 2 * 768 + 30522,
     109514298, 0.110, 0.110, 0.0005, 0.0005,
     "Devlin et al. 2019 (arXiv:1810.04805) section 3: BERT-BASE 110M total parameters (rounded)"},
    // ViT-B/16: patch GEMM 3 x 16 x 16 -> 768 with bias, class token, positions 197 x 768; 12 layers as BERT's;
    // final LayerNorm; classifier 768 x 1000 + 1000.
    {"ViT-base-patch16-224",
     (768 + 1) * 768 + 768 + 197 * 768 + 12 * (4 * (768 * 768 + 768) + 2 * 768 * 3072 + 3072 + 768 + 4 * 768) +
         2 * 768 + 768 * 1000 + 1000,
     86567656, 0.086567656, 0.086567656, 0.0000866, 0.0000866, "timm vit_base_patch16_224: 86,567,656 parameters (exact)"},
    // Flan-T5-base: shared embedding 32128 x 768; 12 encoder layers (q, k, v, o 768^2, gated-GELU 3 x 768 x 2048,
    // 2 RMSNorms); 12 decoder layers (plus cross-attention 4 x 768^2 and its norm); relative position bias
    // 32 x 12 in the first layer of each stack; 2 final norms; untied lm_head 768 x 32128.
    // 36 x (q 2880x4096 + k, v 2880x512 + o 4096x2880 with biases + router 2880x128 + bias 128
    //      + 128 experts x 3 x 2880 x 2880 + 2 norms) + untied 2 x 201088 x 2880 + norm.
    //      + the experts' own biases, 128 x (2 x 2880 gate/up + 2880 down) per layer.
    // Active: 4 of 128 experts (their biases too). The card's 5.13B active leaves out the input
    // embedding (0.58B).
    {"GPT-OSS-120B", 116789341248 + 36 * 128 * (2 * 2880 + 2880), 5710736448 + 36 * 4 * (2 * 2880 + 2880), 116.83,
     5.13 + 0.579, 0.005, 0.005,
     "gpt-oss model card (arXiv:2508.10925) Table 1: 116.83B total, 5.13B active"},
    {"Flan-T5-base",
     32128 * 768 + 12 * (4 * 768 * 768 + 3 * 768 * 2048 + 2 * 768) + 12 * (8 * 768 * 768 + 3 * 768 * 2048 + 3 * 768) +
         2 * 32 * 12 + 2 * 768 + 768 * 32128,
     247577856, 0.248, 0.248, 0.0005, 0.0005, "google/flan-t5-base Hub page: 248M params (safetensors, rounded)"},
};

void PrintTo(const Published& p, std::ostream* os) { *os << p.name; }

TEST(family_examples, every_example_has_a_published_count_and_round_trips) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(families_dir())) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const std::string stem = entry.path().stem().string();
    bool found = false;
    for (const Published& p : kPublished) found = found || p.name == stem;
    EXPECT_TRUE(found) << stem;
    const Graph graph = load_model(entry.path().string());
    EXPECT_EQ(graph_from_json(json::parse(to_json(graph).dump()), "roundtrip.json"), graph) << stem;
  }
  EXPECT_EQ(files, int(kPublished.size()));
}

class FamilyExample : public ::testing::TestWithParam<Published> {};

TEST_P(FamilyExample, parameter_count_matches_hand_count_and_published) {
  const Published& p = GetParam();
  const Graph graph = load_model(model_path(p.name));
  const ParamCount count = count_parameters(graph);
  EXPECT_EQ(count.total, p.total);
  EXPECT_EQ(count.active, p.active);
  EXPECT_NEAR(double(count.total) / 1e9, p.published_total_b, p.tolerance_b) << p.source;
  EXPECT_NEAR(double(count.active) / 1e9, p.published_active_b, p.active_tolerance_b) << p.source;
}

INSTANTIATE_TEST_SUITE_P(examples, FamilyExample, ::testing::ValuesIn(kPublished), [](const auto& info) {
  std::string name(info.param.name);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

// ---------------------------------------------------------------------------------------------
// Layer structure on the examples.

std::vector<std::string> block_names(const Graph& g) {
  std::vector<std::string> out;
  for (const auto& b : g.blocks) out.push_back(b.name + "x" + std::to_string(b.repeat));
  return out;
}

int64_t window_of(const Block& block) {
  for (const auto& op : block.ops)
    if (op.kind == OpKind::attention_core) return op.sliding_window;
  return -1;
}

TEST(family_examples, gemma3_alternates_five_local_layers_and_one_global) {
  const Graph g = load_model(model_path("Gemma-3-1B"));  // 26 layers, sliding_window_pattern 6
  EXPECT_EQ(block_names(g),
            (std::vector<std::string>{"embedx1", "local_layer_0x5", "global_layer_5x1", "local_layer_6x5",
                                      "global_layer_11x1", "local_layer_12x5", "global_layer_17x1", "local_layer_18x5",
                                      "global_layer_23x1", "local_layer_24x2", "headx1"}));
  EXPECT_EQ(window_of(g.blocks[1]), 512);
  EXPECT_EQ(window_of(g.blocks[2]), 0);
}

TEST(family_examples, gpt_oss_alternates_a_128_token_window_with_full_attention_from_layer_types) {
  const Graph g = load_model(model_path("GPT-OSS-120B"));  // layer_types: sliding on even layers
  ASSERT_EQ(g.blocks.size(), 38u);                          // embed, 36 alternating layers, head
  EXPECT_EQ(g.blocks[1].name, "local_moe_layer_0");
  EXPECT_EQ(g.blocks[2].name, "global_moe_layer_1");
  EXPECT_EQ(g.blocks[36].name, "global_moe_layer_35");
  EXPECT_EQ(window_of(g.blocks[1]), 128);
  EXPECT_EQ(window_of(g.blocks[2]), 0);
  EXPECT_EQ(g.info.num_experts, 128);
  EXPECT_NE(find_tensor(g.blocks[1], "router_bias"), nullptr);
  // Expert biases (one per expert and channel) and the clamp read from swiglu_limit 7.0.
  const TensorDecl* down_bias = find_tensor(g.blocks[1], "b_expert_down");
  ASSERT_NE(down_bias, nullptr);
  ASSERT_EQ(down_bias->dims.size(), 2u);
  EXPECT_EQ(down_bias->dims[0].size, 128);
  EXPECT_EQ(down_bias->dims[1].size, 2880);
  const Op* act = nullptr;
  for (const Op& op : g.blocks[1].ops)
    if (op.name == "expert_act") act = &op;
  ASSERT_NE(act, nullptr);
  EXPECT_EQ(act->clamp_limit, 7.0);
}

TEST(tiny_families, swiglu_limit_clamps_the_gated_unit_and_is_checked) {
  json c = {{"model_type", "mixtral"}, {"hidden_size", 64}, {"num_hidden_layers", 1}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"intermediate_size", 128}, {"vocab_size", 100}, {"num_local_experts", 4},
            {"num_experts_per_tok", 2}};
  auto clamp_of = [](const Graph& g) {
    for (const Op& op : g.blocks[1].ops)
      if (op.kind == OpKind::activation) return op.clamp_limit;
    return -1.0;
  };
  EXPECT_EQ(clamp_of(graph_from_hf_config(c, "mixtral.json")), 0.0);
  c["swiglu_limit"] = 5.5;
  const Graph clamped = graph_from_hf_config(c, "mixtral.json");
  EXPECT_EQ(clamp_of(clamped), 5.5);
  EXPECT_EQ(graph_from_json(json::parse(to_json(clamped).dump()), "roundtrip.json"), clamped);
  c["swiglu_limit"] = -1;
  try {
    (void)graph_from_hf_config(c, "mixtral.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("swiglu_limit"), std::string::npos) << e.what();
  }
}

TEST(tiny_families, layer_types_decide_windows_for_every_windowed_family_and_are_checked) {
  json c = {{"model_type", "mistral"}, {"hidden_size", 64},  {"num_hidden_layers", 3}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"intermediate_size", 128}, {"vocab_size", 100}, {"sliding_window", 16},
            {"layer_types", {"full_attention", "sliding_attention", "full_attention"}}};
  const Graph g = graph_from_hf_config(c, "mistral.json");
  ASSERT_EQ(g.blocks.size(), 5u);
  EXPECT_EQ(window_of(g.blocks[1]), 0);
  EXPECT_EQ(window_of(g.blocks[2]), 16);
  EXPECT_EQ(window_of(g.blocks[3]), 0);
  c["layer_types"] = {"full_attention", "sliding", "full_attention"};
  try {
    (void)graph_from_hf_config(c, "mistral.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("layer_types[1]"), std::string::npos) << e.what();
  }
}

TEST(family_examples, llama4_maverick_interleaves_dense_and_moe_layers) {
  const Graph g = load_model(model_path("Llama-4-Maverick-17B-128E"));  // interleave_moe_layer_step 2
  ASSERT_EQ(g.blocks.size(), 50u);
  EXPECT_EQ(g.blocks[1].name, "dense_layer_0");
  EXPECT_EQ(g.blocks[2].name, "moe_layer_1");
  EXPECT_EQ(g.blocks[48].name, "moe_layer_47");
  EXPECT_EQ(find_tensor(g.blocks[1], "w_up")->dims[1], (Dim{'f', 16384}));        // intermediate_size_mlp
  EXPECT_EQ(find_tensor(g.blocks[2], "shared_w_up")->dims[1], (Dim{'f', 8192}));  // intermediate_size
  EXPECT_EQ(g.info.architecture, "Llama4ForConditionalGeneration");
  EXPECT_EQ(g.info.num_experts, 128);
  EXPECT_EQ(block_names(load_model(model_path("Llama-4-Scout-17B-16E"))),
            (std::vector<std::string>{"embedx1", "moe_layerx48", "headx1"}));
}

TEST(family_examples, falcon_40b_runs_attention_and_mlp_in_parallel_from_two_norms) {
  const Graph g = load_model(model_path("Falcon-40B"));
  const Block& layer = g.blocks[1];
  // Both sublayers read their own norm of the layer input x; one residual chain adds both.
  EXPECT_EQ(layer.ops[0].inputs[0], "x");
  EXPECT_EQ(layer.ops[1].inputs[0], "x");
  EXPECT_EQ(find_tensor(layer, "wk")->dims[1], (Dim{'k', 8}));  // num_kv_heads
  EXPECT_EQ(g.info.num_kv_heads, 8);
}

// ---------------------------------------------------------------------------------------------
// Tiny configs for the families without an example: parameters counted by hand.

json tiny(const std::string& model_type) {
  return json{{"model_type", model_type}, {"hidden_size", 64},       {"num_hidden_layers", 2},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 128},
              {"vocab_size", 100}};
}

int64_t total_of(const json& config) {
  const Graph g = graph_from_hf_config(config, "tiny.json");
  verify(g, "tiny.json");
  return count_parameters(g).total;
}

// h = 64, head_dim 16, kv width 32: q, o 64x64, k, v 64x32.
constexpr int64_t kAttention = 64 * 64 * 2 + 64 * 32 * 2;
constexpr int64_t kGatedMlp = 3 * 64 * 128;
constexpr int64_t kEmbed = 100 * 64;

TEST(tiny_families, granite_and_glm_are_llama_shaped_with_their_biases) {
  // Granite: Llama layer, two RMS norms; head untied unless tie_word_embeddings.
  const int64_t llama_layer = kAttention + kGatedMlp + 2 * 64;
  EXPECT_EQ(total_of(tiny("granite")), 2 * llama_layer + 2 * kEmbed + 64);
  // GLM: q/k/v biases by default (attention_bias true), none on o.
  EXPECT_EQ(total_of(tiny("glm")), 2 * (llama_layer + 64 + 32 + 32) + 2 * kEmbed + 64);
  // GLM-4: plus post-attention and post-MLP norms.
  EXPECT_EQ(total_of(tiny("glm4")), 2 * (llama_layer + 128 + 2 * 64) + 2 * kEmbed + 64);
}

TEST(tiny_families, phimoe_has_layer_norms_biases_and_an_lm_head_bias) {
  json c = tiny("phimoe");
  c["num_local_experts"] = 4;
  c["num_experts_per_tok"] = 2;
  c["attention_bias"] = true;
  c["lm_head_bias"] = true;
  const int64_t layer = kAttention + (64 + 32 + 32 + 64) /*q,k,v,o biases*/ + 4 * kGatedMlp + 64 * 4 /*router*/ +
                        2 * 2 * 64 /*two layer norms with bias*/;
  EXPECT_EQ(total_of(c), 2 * layer + 2 * kEmbed + 100 /*lm_head bias*/ + 2 * 64);
}

TEST(tiny_families, granitemoe_and_olmoe_route_every_layer) {
  json g = tiny("granitemoe");
  g["num_local_experts"] = 4;
  g["num_experts_per_tok"] = 2;
  const int64_t moe_layer = kAttention + 4 * kGatedMlp + 64 * 4 + 2 * 64;
  EXPECT_EQ(total_of(g), 2 * moe_layer + 2 * kEmbed + 64);
  json o = tiny("olmoe");
  o["num_experts"] = 4;
  o["num_experts_per_tok"] = 2;
  EXPECT_EQ(total_of(o), 2 * (moe_layer + 64 + 32 /*full-width q/k norms*/) + 2 * kEmbed + 64);
}

TEST(tiny_families, falcon_7b_style_multi_query_shares_one_norm) {
  json c = tiny("falcon");
  c.erase("num_key_value_heads");
  c.erase("intermediate_size");  // 4 x hidden
  c["multi_query"] = true;
  c["parallel_attn"] = true;
  // kv heads 1 (width 16); MLP 64 -> 256 -> 64 without biases; one layer norm with bias; tied.
  const int64_t layer = 64 * 64 * 2 + 64 * 16 * 2 + 2 * 64 * 256 + 2 * 64;
  EXPECT_EQ(total_of(c), 2 * layer + kEmbed + 2 * 64);
}

TEST(tiny_families, gpt_neox_parallel_residual_has_two_norms) {
  json c = tiny("gpt_neox");
  c.erase("num_key_value_heads");  // GPT-NeoX is multi-head: k, v 64x64
  const int64_t layer = 4 * (64 * 64 + 64) + 2 * 64 * 128 + 128 + 64 + 2 * 2 * 64;
  EXPECT_EQ(total_of(c), 2 * layer + 2 * kEmbed + 2 * 64);
  const Graph g = graph_from_hf_config(c, "tiny.json");
  EXPECT_EQ(g.blocks[1].ops[1].name, "mlp_norm");
  EXPECT_EQ(g.blocks[1].ops[1].inputs[0], "x");
}

TEST(tiny_families, moe_layouts_follow_their_keys) {
  json q = tiny("qwen2_moe");  // layer 0 listed dense; shared expert with its gate
  q.update(json{{"num_hidden_layers", 4}, {"num_experts", 4}, {"num_experts_per_tok", 2},
                {"moe_intermediate_size", 32}, {"shared_expert_intermediate_size", 64}, {"mlp_only_layers", {0}},
                {"decoder_sparse_step", 1}});
  EXPECT_EQ(block_names(graph_from_hf_config(q, "q.json")),
            (std::vector<std::string>{"embedx1", "dense_layerx1", "moe_layerx3", "headx1"}));
  q["decoder_sparse_step"] = 2;  // MoE where (i + 1) % 2 == 0 and not listed: 1, 3
  EXPECT_EQ(block_names(graph_from_hf_config(q, "q.json")),
            (std::vector<std::string>{"embedx1", "dense_layer_0x1", "moe_layer_1x1", "dense_layer_2x1",
                                      "moe_layer_3x1", "headx1"}));
  q["mlp_only_layers"] = {4};
  EXPECT_THROW(graph_from_hf_config(q, "q.json"), InputError);
}

TEST(tiny_families, gemma3_wrapper_fills_a_sparse_text_config_with_class_defaults) {
  // The shape of google/gemma-3-4b-it: the text_config names only what differs from
  // Gemma3TextConfig (vocab 262208, 8 heads, 4 kv heads, head_dim 256, pattern 6).
  const json c{{"architectures", {"Gemma3ForConditionalGeneration"}},
               {"model_type", "gemma3"},
               {"text_config",
                {{"hidden_size", 2560}, {"intermediate_size", 10240}, {"model_type", "gemma3_text"},
                 {"num_hidden_layers", 34}, {"sliding_window", 1024}}}};
  const Graph g = graph_from_hf_config(c, "gemma3.json");
  verify(g, "gemma3.json");
  // 34 x (q,o 2560x2048 + k,v 2560x1024 + 3 x 2560 x 10240 + 4 norms + q/k norms 2 x 256)
  // + tied 262208 x 2560 + norm.
  const int64_t layer = 2 * 2560 * 2048 + 2 * 2560 * 1024 + 3 * 2560 * 10240 + 4 * 2560 + 2 * 256;
  const int64_t total = 34 * layer + 262208 * 2560 + 2560;
  EXPECT_EQ(count_parameters(g).total, total);
  // keras-hub gemma3_4b_text: 3,880,099,328 (its vocabulary has 64 rows fewer: 64 x 2560).
  EXPECT_EQ(total - 64 * 2560, 3880099328);
  EXPECT_EQ(g.blocks[1].name, "local_layer_0");
  EXPECT_EQ(window_of(g.blocks[1]), 1024);
}

TEST(tiny_families, missing_family_points_to_mgt_graph) {
  json c = tiny("bloom");
  try {
    graph_from_hf_config(c, "bad.json");
    FAIL();
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.field(), "model_type");
    EXPECT_NE(what.find("unsupported model_type \"bloom\""), std::string::npos) << what;
    EXPECT_NE(what.find("mgt.graph/1"), std::string::npos) << what;
    EXPECT_NE(what.find("gpt_neox"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace mgt::ir
