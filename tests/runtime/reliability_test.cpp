// The runtime side of "nothing lost, nothing absurd" (trainer.hpp, data.hpp): the save lock, the
// optimizer ranges in a run record, the token file fingerprint against an independent computation,
// and a non-finite loss that stops the trainer before it saves. The CLI side: tests/cli/reliability_test.cpp.
#include "mgt/runtime/trainer.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/lower.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using namespace mgt;
namespace fs = std::filesystem;

struct TempFolder {
  fs::path path = fs::temp_directory_path() / ("mgt_reliability_" + std::to_string(::getpid()) + "_" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempFolder() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempFolder() { fs::remove_all(path); }
};

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CheckpointLock, SecondHolderIsRefusedNamingTheFirstAndReleaseRemovesTheFile) {
  TempFolder t;
  const std::string dir = (t.path / "ckpt").string();
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  {
    const rt::CheckpointLock first(dir);
    EXPECT_EQ(first.path(), dir + ".lock");
    // flock locks an open file description: a second open in the same process conflicts like another run.
    const std::string e = error_of([&] { rt::CheckpointLock second(dir); });
    EXPECT_NE(e.find("locked by pid " + std::to_string(::getpid()) + " on host " + host), std::string::npos) << e;
  }
  EXPECT_FALSE(fs::exists(dir + ".lock"));
  const rt::CheckpointLock again(dir);  // free again
}

TEST(CheckOptimizerSettings, RunRecordFieldsAreNamedAndEdgesAccepted) {
  rt::check_optimizer_settings({.lr = 10, .beta1 = 0, .beta2 = 0.999999, .eps = 1, .weight_decay = 0}, 1e9, "x", false);
  const std::string e = error_of([] { rt::check_optimizer_settings({.beta2 = 1.0}, 0, "ckpt/run.json", false); });
  EXPECT_NE(e.find("ckpt/run.json"), std::string::npos) << e;
  EXPECT_NE(e.find("adamw.beta2"), std::string::npos) << e;
  EXPECT_NE(e.find("must be in [0, 1), got 1"), std::string::npos) << e;
  const std::string inf = error_of([] { rt::check_optimizer_settings({}, INFINITY, "command line", true); });
  EXPECT_NE(inf.find("--grad-clip"), std::string::npos) << inf;
}

/// The definition written out again: splitmix64 chained over little-endian 8-byte words (the tail
/// zero-padded), then over the size.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

TEST(FingerprintFile, IsSizeAndChainedSplitmixOfTheWords) {
  TempFolder t;
  const std::string path = (t.path / "tokens.bin").string();
  const std::string bytes = "0123456789abc";  // 13 bytes: one whole word, one padded
  std::ofstream(path, std::ios::binary) << bytes;
  uint64_t w0 = 0, w1 = 0;
  for (int b = 7; b >= 0; --b) w0 = (w0 << 8) | static_cast<unsigned char>(bytes[size_t(b)]);
  for (int b = 4; b >= 0; --b) w1 = (w1 << 8) | static_cast<unsigned char>(bytes[size_t(8 + b)]);
  const uint64_t want = splitmix64(splitmix64(splitmix64(0 ^ w0) ^ w1) ^ 13);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(want));
  const rt::FileFingerprint f = rt::fingerprint_file(path);
  EXPECT_EQ(f.size_bytes, 13);
  EXPECT_EQ(f.checksum, std::string("mix64:") + hex);
}

TEST(Trainer, NonFiniteLossStopsAtThatStepAndSavesNothing) {
  TempFolder t;
  const std::string config = (t.path / "config.json").string();
  std::ofstream(config) << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
    "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
    "vocab_size":512,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000.0,
    "tie_word_embeddings":false,"hidden_act":"silu"})";
  const ir::Graph graph = ir::load_model(config);
  cost::TrainingSettings settings;
  settings.seq_len = 16;
  settings.global_batch_tokens = 32;
  settings.compute_dtype = ir::DType::f32;
  const ir::Schedule schedule = plan::lower_to_schedule(graph, ir::Plan{}, settings, 1, ir::cluster_preset("h100-sxm"));
  rt::ModelState state(graph);
  rt::init_parameters(state, {.seed = 3});
  state.param("model.layers.0.self_attn.q_proj.weight").data[0] = NAN;
  rt::Executor executor(schedule, graph, state, {});
  const rt::TokenSource data = rt::TokenSource::synthetic(5, 512);
  rt::Trainer trainer(executor, state, data,
                      {.steps = 3, .seq_len = 16, .global_batch = 2, .save_dir = (t.path / "ckpt").string()});
  const std::string e = error_of([&] { trainer.train(); });
  EXPECT_EQ(e.rfind("step 0: loss nan", 0), 0u) << e;
  EXPECT_EQ(state.step, 1);  // the one step taken
  EXPECT_FALSE(fs::exists(t.path / "ckpt"));
}

}  // namespace
