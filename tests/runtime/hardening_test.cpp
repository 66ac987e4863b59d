// Hostile input to the runtime readers (issue 8, part 3): token counters that would overflow, and
// checkpoint index entries that leave the folder.
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/runtime/data.hpp"
#include "mgt/runtime/model_state.hpp"
#include "mgt/runtime/safetensors.hpp"

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

class HardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mgt_hardening_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

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

  fs::path dir_;
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

TEST_F(HardeningTest, IndexNamesThatLeaveTheFolderAreRefused) {
  const std::vector<float> one{1.0f};
  write_safetensors(path("a.safetensors"), {{"x", {1}, one}});
  fs::create_directories(path("inner"));
  for (const std::string bad : {"/etc/passwd", "../a.safetensors", "sub/../../a.safetensors", ""}) {
    const std::string index = path("inner/model.safetensors.index.json");
    write_safetensors_index(index, {{"x", bad}}, 4);
    expect_input_error([&] { SafetensorsCheckpoint::open(index); }, {index, "weight_map.x", "next to the index"});
  }
}

}  // namespace
}  // namespace mgt::rt
