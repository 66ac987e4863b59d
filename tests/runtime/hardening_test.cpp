// Hostile input and faults in the runtime (issue 8, parts 3 and 4): token counters that would
// overflow, shapes that disagree with config.json, truncated or mismatched checkpoints refused
// without leaving the state half-loaded, and durable file writes.
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/runtime/data.hpp"
#include "mgt/runtime/model_state.hpp"
#include "mgt/runtime/safetensors.hpp"

#include "temp_dir_fixture.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace mgt::rt {
namespace {

namespace fs = std::filesystem;

template <typename F>
void expect_input_error(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const ir::InputError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << p << " not in: " << e.what();
  }
}

class HardeningTest : public test::TempDirTest {
 protected:
  HardeningTest() : TempDirTest("mgt_hardening_test_") {}

  ir::Graph tiny_llama(int64_t vocab = 512) const {
    const std::string file = path("config" + std::to_string(vocab) + ".json");
    std::ofstream(file) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
      "intermediate_size": 128, "vocab_size": )" << vocab << R"(, "max_position_embeddings": 128})";
    return ir::load_model(file);
  }

  /// A state with distinct values everywhere (parameters, moments, step) for all-or-nothing checks.
  static void fill(ModelState& s, float base, int64_t step) {
    for (size_t i = 0; i < s.params().size(); ++i) {
      s.params()[i] = base + std::sin(float(i));
      s.adam_m()[i] = base * 1e-3f + float(i % 7);
      s.adam_v()[i] = base * 1e-4f + float(i % 5);
    }
    s.step = step;
  }
  static bool same(const ModelState& a, const ModelState& b) {
    const auto eq = [](std::span<const float> x, std::span<const float> y) {
      return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size_bytes()) == 0;
    };
    return eq(a.params(), b.params()) && eq(a.adam_m(), b.adam_m()) && eq(a.adam_v(), b.adam_v()) && a.step == b.step;
  }

};

// ---- token counters (part 3) ----

TEST_F(HardeningTest, StepFarOutIsAnErrorNotAWrappedRead) {
  const std::string file = path("tokens.bin");
  {
    std::ofstream out(file, std::ios::binary);
    for (uint16_t t = 0; t < 100; ++t) out.write(reinterpret_cast<const char*>(&t), 2);
  }
  const TokenSource data = TokenSource::open(file, TokenDType::u16);
  // step 2^62 x 4 sequences x 1 token wraps to token 0: it used to return the first tokens.
  expect_input_error([&] { global_batch(data, int64_t{1} << 62, 4, 1); }, {file, "overflows"});
  expect_input_error([&] { global_batch(data, 0, int64_t{1} << 40, int64_t{1} << 40); }, {file, "overflows"});
  expect_input_error([&] { global_batch(TokenSource::synthetic(1, 10), INT64_MAX / 2, 2, 1); }, {"synthetic"});
  int32_t out[2];
  expect_input_error([&] { data.read(INT64_MAX, 2, out); }, {file});
  // In range still works: step 3 of G=4, S=2 is tokens [24, 33).
  const StepBatch b = global_batch(data, 3, 4, 2);
  EXPECT_EQ(b.inputs.front(), 24);
  EXPECT_EQ(b.targets.back(), 32);
}

// ---- checkpoints (part 3: shapes that disagree; part 4: truncated, mismatched, all or nothing) ----

TEST_F(HardeningTest, CheckpointOfAnotherModelIsRefusedAndNothingIsLoaded) {
  ModelState other(tiny_llama(256));
  fill(other, 1.0f, 7);
  save_checkpoint(other, path("other"));
  ModelState state(tiny_llama(512));
  fill(state, 2.0f, 3);
  ModelState before(tiny_llama(512));
  fill(before, 2.0f, 3);
  // The embedding table is [256, 64] in the file, [512, 64] in config.json.
  expect_input_error([&] { load_checkpoint(state, path("other")); },
                     {"model.embed_tokens.weight", "[256, 64]", "[512, 64]", "config.json"});
  EXPECT_TRUE(same(state, before));
}

TEST_F(HardeningTest, BrokenOptimizerFileLeavesTheStateAsItWas) {
  ModelState saved(tiny_llama());
  fill(saved, 1.0f, 11);
  save_checkpoint(saved, path("ckpt"));
  // Truncate optimizer.safetensors: its last tensor now ends beyond the file. The weights in
  // model.safetensors are fine and are read first; they must not stay loaded.
  const fs::path opt = fs::path(path("ckpt")) / "optimizer.safetensors";
  fs::resize_file(opt, fs::file_size(opt) - 4);
  ModelState state(tiny_llama());
  fill(state, 5.0f, 2);
  ModelState before(tiny_llama());
  fill(before, 5.0f, 2);
  expect_input_error([&] { load_checkpoint(state, path("ckpt")); }, {"optimizer.safetensors", "beyond the data section"});
  EXPECT_TRUE(same(state, before));
  // A truncated model file is refused the same way, naming it.
  save_checkpoint(saved, path("ckpt2"));
  const fs::path model = fs::path(path("ckpt2")) / "model.safetensors";
  fs::resize_file(model, fs::file_size(model) / 2);
  expect_input_error([&] { load_checkpoint(state, path("ckpt2")); }, {"model.safetensors", "truncated"});
  EXPECT_TRUE(same(state, before));
  // And a step that is not a number.
  write_safetensors(opt.string(), {}, ir::DType::f32, {{"step", "12abc"}});
  expect_input_error([&] { load_checkpoint(state, path("ckpt")); }, {"optimizer.safetensors"});
  EXPECT_TRUE(same(state, before));
}

TEST_F(HardeningTest, HfWeightsWithAMisshapenTensorLoadNothing) {
  ModelState donor(tiny_llama());
  fill(donor, 1.0f, 0);
  save_checkpoint(donor, path("w"), {.include_optimizer = false});
  // Rewrite the file with the final norm one element short: every tensor before it in the table
  // would already have been copied in.
  const SafetensorsFile f = SafetensorsFile::open(path("w/model.safetensors"));
  std::vector<std::vector<float>> data;
  std::vector<SafetensorsWriteTensor> tensors;
  for (const auto& t : f.tensors()) data.push_back(f.read_f32(t.name));
  size_t i = 0;
  for (const auto& t : f.tensors()) {
    std::vector<int64_t> shape = t.shape;
    std::span<const float> values = data[i++];
    if (t.name == "model.norm.weight") {
      shape = {63};
      values = values.first(63);
    }
    tensors.push_back({t.name, shape, values});
  }
  write_safetensors(path("w/model.safetensors"), tensors);
  ModelState state(tiny_llama());
  fill(state, 3.0f, 0);
  ModelState before(tiny_llama());
  fill(before, 3.0f, 0);
  expect_input_error([&] { load_hf_weights(state, path("w")); }, {"model.norm.weight", "[63]", "[64]"});
  EXPECT_TRUE(same(state, before));
}

TEST_F(HardeningTest, DurableWriteReplacesWholeAndLeavesNoTemporary) {
  const std::string file = path("x.json");
  write_file_durably(file, "old");
  write_file_durably(file, "new contents");
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "new contents");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.path().filename().string().find(".tmp") != std::string::npos;
  EXPECT_EQ(entries, 0);
  expect_input_error([&] { write_file_durably(path("no/such/folder/x"), "y"); }, {"no/such/folder/x", "cannot create"});
}

TEST_F(HardeningTest, ReplaceFolderSwapsTheWholeFolder) {
  fs::create_directories(path("stage"));
  write_file_durably(path("stage/a"), "1");
  replace_folder_durably(path("stage"), path("target"));  // target absent: a rename
  EXPECT_TRUE(fs::exists(path("target/a")));
  fs::create_directories(path("stage"));
  write_file_durably(path("stage/b"), "2");
  replace_folder_durably(path("stage"), path("target"));  // present: swapped, old one removed
  EXPECT_TRUE(fs::exists(path("target/b")));
  EXPECT_FALSE(fs::exists(path("target/a")));
  EXPECT_FALSE(fs::exists(path("stage")));
}

TEST_F(HardeningTest, IndexNamesThatLeaveTheFolderAreRefused) {
  const std::vector<float> one{1.0f};
  write_safetensors(path("a.safetensors"), {{"x", {1}, one}});
  fs::create_directories(path("inner"));
  for (const std::string bad : {"/etc/passwd", "../a.safetensors", "sub/../../a.safetensors", ""}) {
    const std::string index = path("inner/model.safetensors.index.json");
    write_safetensors_index(index, {{"x", bad}}, 4);
    expect_input_error([&] { SafetensorsCheckpoint::open(index); }, {index, "weight_map.x", "next to the index"});
  }
  // A name the file system refuses (longer than NAME_MAX) threw std::filesystem_error (safetensors_index_fuzz).
  const std::string index = path("inner/model.safetensors.index.json");
  write_safetensors_index(index, {{"x", std::string(300, 'B') + ".safetensors"}}, 4);
  expect_input_error([&] { SafetensorsCheckpoint::open(index); }, {index, "weight_map.x", "cannot be read"});
  expect_input_error([&] { SafetensorsCheckpoint::open(path(std::string(300, 'C'))); }, {"C"});
}

}  // namespace
}  // namespace mgt::rt
