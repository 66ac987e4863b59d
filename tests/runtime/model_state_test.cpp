// Tests for the flat-buffer model state on a tiny Llama (hidden 64, 4 heads, 2 kv heads, 2 layers,
// ffn 128, vocab 512), untied and tied: parameter table, sharding, tp slices, initialisation, HF
// weights and checkpoints.
#include "mgt/runtime/model_state.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/runtime/safetensors.hpp"

#include "temp_dir_fixture.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace mgt::rt {
namespace {

namespace fs = std::filesystem;

/// load_hf_weights(state, file) throws an ir::InputError whose message contains every part.
void expect_load_error(ModelState& state, const std::string& file, std::initializer_list<std::string> parts) {
  try {
    load_hf_weights(state, file);
    FAIL() << "no error loading " << file;
  } catch (const ir::InputError& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

class ModelStateTest : public test::TempDirTest {
 protected:
  ModelStateTest() : TempDirTest("mgt_model_state_test_") {}

  /// The tiny Llama of issue 5, written as a config.json and loaded through the HF frontend.
  ir::Graph tiny_llama(bool tied, const std::string& extra = "") const {
    const std::string file = path(tied ? "tied_config.json" : "config.json");
    std::ofstream(file) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
      "intermediate_size": 128, "vocab_size": 512, "max_position_embeddings": 128, "rms_norm_eps": 1e-5,)"
                        << extra << R"("tie_word_embeddings": )" << (tied ? "true" : "false") << "}";
    return ir::load_model(file);
  }

};

template <typename T>
bool bit_equal(std::span<T> a, std::span<T> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

TEST_F(ModelStateTest, ParamCountEqualsGraphCount) {
  for (bool tied : {false, true}) {
    const ir::Graph g = tiny_llama(tied);
    const ParamTable table = ParamTable::from_graph(g);
    EXPECT_EQ(table.total_elements, ir::count_parameters(g).total) << "tied=" << tied;
    int64_t offset = 0;
    for (const ParamEntry& e : table.entries) {
      EXPECT_EQ(e.offset, offset) << e.name;
      offset += e.num_elements;
    }
    EXPECT_EQ(offset, table.total_elements);
  }
}

TEST_F(ModelStateTest, NamesAndShapesFollowHuggingFaceLlama) {
  const ParamTable table = ParamTable::from_graph(tiny_llama(/*tied=*/false));
  std::vector<std::string> layer0;
  for (const ParamEntry& e : table.entries)
    if (e.name.starts_with("model.layers.0.")) layer0.push_back(e.name.substr(15));
  std::sort(layer0.begin(), layer0.end());
  const std::vector<std::string> correct{"input_layernorm.weight", "mlp.down_proj.weight", "mlp.gate_proj.weight",
                                         "mlp.up_proj.weight", "post_attention_layernorm.weight",
                                         "self_attn.k_proj.weight", "self_attn.o_proj.weight",
                                         "self_attn.q_proj.weight", "self_attn.v_proj.weight"};
  EXPECT_EQ(layer0, correct);
  EXPECT_EQ(table.entries.size(), 1 + 2 * 9 + 2u);
  EXPECT_EQ(table.entries.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(table.entries.back().name, "lm_head.weight");
  const auto shape = [&](const std::string& name) { return table.at(name).shape; };
  using S = std::vector<int64_t>;
  EXPECT_EQ(shape("model.embed_tokens.weight"), (S{512, 64}));
  EXPECT_EQ(shape("model.layers.1.self_attn.q_proj.weight"), (S{64, 64}));   // [a*d, h]
  EXPECT_EQ(shape("model.layers.1.self_attn.k_proj.weight"), (S{32, 64}));   // [k*d, h]
  EXPECT_EQ(shape("model.layers.1.self_attn.v_proj.weight"), (S{32, 64}));
  EXPECT_EQ(shape("model.layers.1.self_attn.o_proj.weight"), (S{64, 64}));   // [h, a*d]
  EXPECT_EQ(shape("model.layers.1.mlp.gate_proj.weight"), (S{128, 64}));     // [f, h]
  EXPECT_EQ(shape("model.layers.1.mlp.down_proj.weight"), (S{64, 128}));     // [h, f]
  EXPECT_EQ(shape("model.layers.1.input_layernorm.weight"), (S{64}));
  EXPECT_EQ(shape("model.norm.weight"), (S{64}));
  EXPECT_EQ(shape("lm_head.weight"), (S{512, 64}));
  // Graph lookups: layer copy 1 of block "layer" is model.layers.1.
  EXPECT_EQ(table.find_graph("layer", 1, "wq"), table.find("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_EQ(table.find_graph("layer", 0, "x"), nullptr);
  EXPECT_THROW(table.at("model.layers.2.self_attn.q_proj.weight"), ir::InputError);
  // Tensor-parallel split dims: q/k/v/gate/up on rows, o/down on columns, vocab on rows.
  EXPECT_EQ(table.at("model.layers.0.self_attn.q_proj.weight").tp_axis, 0);
  EXPECT_EQ(table.at("model.layers.0.self_attn.k_proj.weight").tp_dim, 'k');
  EXPECT_EQ(table.at("model.layers.0.self_attn.o_proj.weight").tp_axis, 1);
  EXPECT_EQ(table.at("model.layers.0.mlp.down_proj.weight").tp_axis, 1);
  EXPECT_EQ(table.at("model.layers.0.mlp.up_proj.weight").tp_dim, 'f');
  EXPECT_EQ(table.at("lm_head.weight").tp_dim, 'v');
  EXPECT_EQ(table.at("model.norm.weight").tp_axis, -1);
}

TEST_F(ModelStateTest, TiedEmbeddingIsStoredOnce) {
  const ParamTable table = ParamTable::from_graph(tiny_llama(/*tied=*/true));
  EXPECT_EQ(table.find("lm_head.weight"), nullptr);
  EXPECT_EQ(table.find_graph("head", 0, "wte"), table.find("model.embed_tokens.weight"));
  EXPECT_EQ(table.find_graph("embed", 0, "wte"), table.find("model.embed_tokens.weight"));
  EXPECT_EQ(table.entries.back().name, "model.norm.weight");
}

TEST_F(ModelStateTest, OtherFamiliesGetTheirNormNames) {
  const auto names = [&](const std::string& model_type, const std::string& extra) {
    std::ofstream(path("c.json")) << R"({"model_type": ")" << model_type << R"(", "hidden_size": 64,
      "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1, "intermediate_size": 128,
      "vocab_size": 512)" << extra << "}";
    const ir::Graph g = ir::load_model(path("c.json"));
    const ParamTable table = ParamTable::from_graph(g);
    EXPECT_EQ(table.total_elements, ir::count_parameters(g).total) << model_type;
    return table;
  };
  const ParamTable qwen2 = names("qwen2", "");
  EXPECT_NE(qwen2.find("model.layers.0.self_attn.q_proj.bias"), nullptr);
  EXPECT_EQ(qwen2.at("model.layers.0.self_attn.k_proj.bias").init, ParamInitKind::zeros);
  const ParamTable qwen3 = names("qwen3", R"(, "head_dim": 16)");
  EXPECT_EQ(qwen3.at("model.layers.0.self_attn.q_norm.weight").shape, std::vector<int64_t>{16});
  const ParamTable olmo2 = names("olmo2", "");
  EXPECT_EQ(olmo2.at("model.layers.0.self_attn.k_norm.weight").shape, std::vector<int64_t>{32});
  EXPECT_NE(olmo2.find("model.layers.0.post_feedforward_layernorm.weight"), nullptr);
  EXPECT_EQ(olmo2.find("model.layers.0.input_layernorm.weight"), nullptr);
  const ParamTable gemma2 = names("gemma2", "");
  for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                        "post_feedforward_layernorm"})
    EXPECT_EQ(gemma2.at(std::string("model.layers.0.") + n + ".weight").init, ParamInitKind::zeros) << n;
  std::ofstream(path("moe.json")) << R"({"model_type": "mixtral", "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 512, "num_local_experts": 4,
    "num_experts_per_tok": 2})";
  EXPECT_THROW(ParamTable::from_graph(ir::load_model(path("moe.json"))), ir::InputError);
  EXPECT_EQ(gemma2.at("model.norm.weight").init, ParamInitKind::zeros);
  EXPECT_EQ(gemma2.find("lm_head.weight"), nullptr);  // tied by default
}

TEST_F(ModelStateTest, LoadsPhi3FusedProjections) {
  std::ofstream(path("config.json")) << R"({"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4,
    "num_key_value_heads": 2, "num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 512})";
  const ir::Graph g = ir::load_model(path("config.json"));
  ModelState source(g);
  init_parameters(source, {.seed = 9});
  // Fuse q [64,64], k [32,64], v [32,64] into qkv [128,64]; gate [128,64], up [128,64] into [256,64].
  const auto concat = [&](std::initializer_list<std::string> names) {
    std::vector<float> out;
    for (const auto& n : names) out.insert(out.end(), source.param(n).span().begin(), source.param(n).span().end());
    return out;
  };
  const std::string l = "model.layers.0.";
  const std::vector<float> qkv = concat({l + "self_attn.q_proj.weight", l + "self_attn.k_proj.weight", l + "self_attn.v_proj.weight"});
  const std::vector<float> gate_up = concat({l + "mlp.gate_proj.weight", l + "mlp.up_proj.weight"});
  std::vector<SafetensorsWriteTensor> tensors{{l + "self_attn.qkv_proj.weight", {128, 64}, qkv},
                                              {l + "mlp.gate_up_proj.weight", {256, 64}, gate_up}};
  for (const ParamEntry& e : source.table().entries)
    if (e.name.find("q_proj") == std::string::npos && e.name.find("k_proj") == std::string::npos &&
        e.name.find("v_proj") == std::string::npos && e.name.find("gate_proj") == std::string::npos &&
        e.name.find("up_proj") == std::string::npos)
      tensors.push_back({e.name, e.shape, source.param(e.name).span()});
  write_safetensors(path("model.safetensors"), tensors);
  ModelState target(g);
  const LoadReport report = load_hf_weights(target, path("model.safetensors"));
  EXPECT_TRUE(report.unused.empty());
  EXPECT_TRUE(bit_equal(target.params(), source.params()));
}

TEST_F(ModelStateTest, ShardRangesPartitionThePaddedBuffer) {
  const int64_t total = ParamTable::from_graph(tiny_llama(false)).total_elements;
  for (int64_t n : {1, 2, 3, 4, 7, 8}) {
    int64_t next = 0;
    for (int64_t i = 0; i < n; ++i) {
      const ShardRange r = shard_range(total, n, i);
      EXPECT_EQ(r.begin, next);
      EXPECT_EQ(r.size(), padded_size(total, n) / n);
      next = r.end;
    }
    EXPECT_EQ(next, padded_size(total, n));
    EXPECT_GE(next, total);
    EXPECT_LT(next - total, n);
  }
  EXPECT_EQ(shard_range(10, 4, 3), (ShardRange{9, 12}));
  EXPECT_THROW(shard_range(10, 0, 0), ir::InputError);
  EXPECT_THROW(shard_range(10, 4, 4), ir::InputError);
  ParamEntry e;
  e.offset = 5;
  e.num_elements = 10;
  EXPECT_EQ(overlap(e, {0, 8}), (ShardRange{0, 3}));
  EXPECT_EQ(overlap(e, {12, 20}), (ShardRange{7, 10}));
  EXPECT_EQ(overlap(e, {15, 20}).size(), 0);
}

TEST_F(ModelStateTest, InitIsDeterministicAndShaped) {
  ModelState a(tiny_llama(false)), b(tiny_llama(false));
  init_parameters(a, {.seed = 7});
  init_parameters(b, {.seed = 7});
  EXPECT_TRUE(bit_equal(a.params(), b.params()));
  init_parameters(b, {.seed = 8});
  EXPECT_FALSE(bit_equal(a.params(), b.params()));
  for (float x : a.param("model.norm.weight").span()) EXPECT_EQ(x, 1.0f);
  for (float x : a.param("model.layers.1.post_attention_layernorm.weight").span()) EXPECT_EQ(x, 1.0f);
  // The embedding (32768 draws) has mean ~0 and std ~0.02; q_proj of two layers differ.
  double sum = 0, sum_sq = 0;
  const auto emb = a.param("model.embed_tokens.weight").span();
  for (float x : emb) sum += x, sum_sq += double(x) * x;
  const double mean = sum / emb.size(), stddev = std::sqrt(sum_sq / emb.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(stddev, 0.02, 0.0005);
  EXPECT_NE(a.param("model.layers.0.self_attn.q_proj.weight").data[0],
            a.param("model.layers.1.self_attn.q_proj.weight").data[0]);
}

TEST_F(ModelStateTest, ShardInitEqualsSliceOfFullInit) {
  const ParamTable table = ParamTable::from_graph(tiny_llama(false));
  const InitOptions options{.seed = 1234, .std = 0.02};
  for (int64_t n : {1, 3, 4, 8}) {
    std::vector<float> full(static_cast<size_t>(padded_size(table.total_elements, n)));
    init_parameters(table, options, {0, static_cast<int64_t>(full.size())}, full);
    for (int64_t i = 0; i < n; ++i) {
      const ShardRange r = shard_range(table.total_elements, n, i);
      std::vector<float> shard(static_cast<size_t>(r.size()));
      init_parameters(table, options, r, shard);
      EXPECT_EQ(std::memcmp(shard.data(), full.data() + r.begin, shard.size() * sizeof(float)), 0)
          << "shard " << i << " of " << n;
    }
    for (size_t i = static_cast<size_t>(table.total_elements); i < full.size(); ++i) EXPECT_EQ(full[i], 0.0f);
  }
}

TEST_F(ModelStateTest, TpSliceHelpersRoundTrip) {
  ModelState state(tiny_llama(false));
  init_parameters(state, {.seed = 3});
  const ParamTable& table = state.table();
  // q_proj [64, 64] split on rows: rank 1 of 2 holds rows 32..63.
  const ParamEntry& q = table.at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(tp_local_shape(q, 2), (std::vector<int64_t>{32, 64}));
  std::vector<float> local(32 * 64);
  gather_tp_slice(q, 2, 1, state.param(q.name).span(), local);
  EXPECT_EQ(std::memcmp(local.data(), state.param(q.name).data + 32 * 64, local.size() * sizeof(float)), 0);
  // o_proj [64, 64] split on columns: element (r, c) of rank 1 is full (r, 32 + c).
  const ParamEntry& o = table.at("model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(tp_local_shape(o, 2), (std::vector<int64_t>{64, 32}));
  gather_tp_slice(o, 2, 1, state.param(o.name).span(), local);
  const float* full_o = state.param(o.name).data;
  EXPECT_EQ(local[5 * 32 + 7], full_o[5 * 64 + 32 + 7]);
  // Every parameter: scattering all ranks' slices into a zero buffer rebuilds it (tp 1 and 2).
  for (int64_t tp : {1, 2}) {
    for (const ParamEntry& e : table.entries) {
      const auto full = state.param(e.name).span();
      std::vector<float> rebuilt(full.size(), 0.0f);
      int64_t local_n = 1;
      for (int64_t d : tp_local_shape(e, tp)) local_n *= d;
      EXPECT_EQ(local_n * (e.tp_axis >= 0 ? tp : 1), e.num_elements) << e.name;
      for (int64_t r = 0; r < tp; ++r) {
        std::vector<float> part(static_cast<size_t>(local_n));
        gather_tp_slice(e, tp, r, full, part);
        scatter_tp_slice(e, tp, r, part, rebuilt);
      }
      EXPECT_EQ(std::memcmp(rebuilt.data(), full.data(), full.size_bytes()), 0) << e.name << " tp=" << tp;
    }
  }
  // tp 4 does not divide 2 kv heads; rank outside the group; wrong buffer size.
  const ParamEntry& k = table.at("model.layers.0.self_attn.k_proj.weight");
  EXPECT_THROW(tp_local_shape(k, 4), ir::InputError);
  EXPECT_THROW(gather_tp_slice(q, 2, 2, state.param(q.name).span(), local), ir::InputError);
  std::vector<float> wrong(7);
  EXPECT_THROW(gather_tp_slice(q, 2, 0, state.param(q.name).span(), wrong), ir::InputError);
}

TEST_F(ModelStateTest, SaveLoadRoundTripIsBitIdentical) {
  ModelState saved(tiny_llama(false), /*pad_multiple=*/4);
  init_parameters(saved, {.seed = 42});
  for (size_t i = 0; i < saved.adam_m().size(); ++i) {
    saved.adam_m()[i] = std::sin(float(i)) * 1e-3f;
    saved.adam_v()[i] = float(i % 97) * 1e-7f;
  }
  saved.step = 17;
  const std::string ckpt = path("ckpt");
  // Small shards so that the checkpoint has several model files and an index.
  save_checkpoint(saved, ckpt, {.max_shard_bytes = 100'000});
  EXPECT_TRUE(fs::exists(fs::path(ckpt) / "model.safetensors.index.json"));
  int model_files = 0;
  for (const auto& entry : fs::directory_iterator(ckpt)) model_files += entry.path().filename().string().starts_with("model-");
  EXPECT_GE(model_files, 3);
  // Saving again replaces the folder atomically; no temporary folders are left.
  saved.step = 18;
  save_checkpoint(saved, ckpt + "/", {.max_shard_bytes = 100'000});
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) entries += entry.path().filename() != "config.json";
  EXPECT_EQ(entries, 1);

  ModelState loaded(tiny_llama(false), /*pad_multiple=*/4);
  load_checkpoint(loaded, ckpt);
  EXPECT_TRUE(bit_equal(loaded.params(), saved.params()));
  EXPECT_TRUE(bit_equal(loaded.adam_m(), saved.adam_m()));
  EXPECT_TRUE(bit_equal(loaded.adam_v(), saved.adam_v()));
  EXPECT_EQ(loaded.step, 18);
  // A single-file checkpoint without optimizer state also loads (moments zero, step 0).
  save_checkpoint(saved, path("weights"), {.include_optimizer = false});
  EXPECT_TRUE(fs::exists(path("weights/model.safetensors")));
  load_checkpoint(loaded, path("weights"));
  EXPECT_TRUE(bit_equal(loaded.params(), saved.params()));
  EXPECT_EQ(loaded.step, 0);
  EXPECT_EQ(loaded.adam_m()[1], 0.0f);
}

TEST_F(ModelStateTest, LoadsHfWeightsInBf16ByName) {
  ModelState source(tiny_llama(true));
  init_parameters(source, {.seed = 5});
  // An HF-style tied checkpoint that also stores lm_head.weight, written in bf16 in reverse order.
  std::vector<SafetensorsWriteTensor> tensors;
  for (auto it = source.table().entries.rbegin(); it != source.table().entries.rend(); ++it)
    tensors.push_back({it->name, it->shape, source.param(it->name).span()});
  tensors.push_back({"lm_head.weight", {512, 64}, source.param("model.embed_tokens.weight").span()});
  write_safetensors(path("model.safetensors"), tensors, ir::DType::bf16);

  ModelState target(tiny_llama(true));
  const LoadReport report = load_hf_weights(target, dir_.string());
  EXPECT_EQ(report.unused, std::vector<std::string>{"lm_head.weight"});
  const auto src = source.params(), dst = target.params();
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(dst[i], bf16_to_f32(f32_to_bf16(src[i]))) << i;
}

TEST_F(ModelStateTest, LoadHfWeightsRejectsMissingAndMisshapenTensors) {
  ModelState state(tiny_llama(false));
  init_parameters(state, {.seed = 5});
  std::vector<SafetensorsWriteTensor> tensors;
  for (const ParamEntry& e : state.table().entries)
    if (e.name != "model.layers.1.mlp.up_proj.weight") tensors.push_back({e.name, e.shape, state.param(e.name).span()});
  write_safetensors(path("missing.safetensors"), tensors);
  expect_load_error(state, path("missing.safetensors"),
                    {"missing.safetensors", "model.layers.1.mlp.up_proj.weight", "missing tensor"});
  const std::vector<float> transposed(state.param("model.layers.1.mlp.up_proj.weight").span().begin(),
                                      state.param("model.layers.1.mlp.up_proj.weight").span().end());
  tensors.push_back({"model.layers.1.mlp.up_proj.weight", {64, 128}, transposed});
  write_safetensors(path("shape.safetensors"), tensors);
  expect_load_error(state, path("shape.safetensors"),
                    {"'model.layers.1.mlp.up_proj.weight': shape [64, 128] differs from the model's [128, 64]"});
}

}  // namespace
}  // namespace mgt::rt
