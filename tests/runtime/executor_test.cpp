// The schedule executor against PyTorch: tests/runtime/reference/llama_train_reference.py writes a
// tiny Llama (config.json + model.safetensors), a uint16 token file and the losses of 3
// torch.optim.AdamW steps; the executor runs the lowered one-rank schedule of several plans from the
// same files and must give the same losses within 1e-5 relative (docs/runtime_executor.md).
#include "mgt/runtime/executor.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/ir/schedule.hpp"
#include "mgt/runtime/data.hpp"
#include "mgt/runtime/model_state.hpp"

// Schedules come from the planner's lowering: in process when the test links mgt_planner, else from
// the mgt-plan CLI (`mgt-plan compile --text`), so the runtime test target needs no planner.
#if __has_include("mgt/planner/lower.hpp")
#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/planner/lower.hpp"
#define MGT_EXECUTOR_TEST_IN_PROCESS 1
#endif

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace mgt::rt {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

// The reference directory, cached in the temp dir under a hash of both scripts (the training script
// imports kernels_reference.py); built in a private directory and renamed (atomic for parallel runs).
struct Reference {
  fs::path dir;
  std::string error;
  nlohmann::json losses;
};

const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    const std::string dir = MGT_SOURCE_DIR "/tests/runtime/reference/";
    const std::string script = dir + "llama_train_reference.py";
    const size_t hash = std::hash<std::string>{}(read_text(script) + read_text(dir + "kernels_reference.py"));
    r.dir = fs::temp_directory_path() / ("mgt_llama_train_reference_" + std::to_string(hash));
    if (!fs::exists(r.dir / "losses.json")) {
      if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
        r.error = "/usr/bin/python3 cannot import torch (install python3-torch); PyTorch reference tests skipped";
        return r;
      }
      const fs::path partial = fs::temp_directory_path() / ("mgt_llama_train_reference_" + std::to_string(::getpid()));
      const std::string command = "/usr/bin/python3 " + script + " " + partial.string();
      if (std::system(command.c_str()) != 0) {
        r.error = "reference script failed: " + command;
        return r;
      }
      std::error_code ec;
      fs::rename(partial, r.dir, ec);  // another process may have won the race: fine, same content
      if (ec) fs::remove_all(partial, ec);
    }
    r.losses = nlohmann::json::parse(read_text(r.dir / "losses.json"));
    return r;
  }();
  return ref;
}

#define MGT_REQUIRE_REFERENCE()                                          \
  do {                                                                   \
    if (!reference().error.empty()) GTEST_SKIP() << reference().error;   \
  } while (0)

ir::Schedule lower(const std::string& model, const std::string& plan_json, int64_t sequences, int64_t seq_len) {
#ifdef MGT_EXECUTOR_TEST_IN_PROCESS
  const ir::Graph graph = ir::load_model(model);
  const ir::Plan plan = ir::plan_from_json(ir::parse_json_text(plan_json, "--plan"), "--plan");
  cost::TrainingSettings settings;
  settings.seq_len = seq_len;
  settings.global_batch_tokens = sequences * seq_len;
  return plan::lower_to_schedule(graph, plan, settings, /*num_gpus=*/1, ir::cluster_preset("h100-sxm"));
#else
  const fs::path out = fs::temp_directory_path() /
                       ("mgt_executor_schedule_" + std::to_string(::getpid()) + "_" +
                        std::to_string(std::hash<std::string>{}(plan_json + std::to_string(sequences))) + ".txt");
  const std::string command = std::string(MGT_CLI_PATH) + " compile " + model + " --gpus 1 --plan '" + plan_json +
                              "' --seq-len " + std::to_string(seq_len) + " --global-batch-tokens " +
                              std::to_string(sequences * seq_len) + " --text --out " + out.string() + " 2>/dev/null";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("lowering failed: " + command);
  ir::Schedule s = ir::schedule_from_text(read_text(out), out.string());
  fs::remove(out);
  return s;
#endif
}

bool can_lower() {
#ifdef MGT_EXECUTOR_TEST_IN_PROCESS
  return true;
#else
  return fs::exists(MGT_CLI_PATH);
#endif
}

struct RunResult {
  std::vector<double> losses;
  std::vector<StepStats> stats;
};

// The reference folder of a family: the tiny Llama at the top, "mistral" and "qwen2" below it.
fs::path family_dir(const std::string& family) {
  return family.empty() ? reference().dir : reference().dir / family;
}
nlohmann::json family_losses(const std::string& family) {
  return family.empty() ? reference().losses : nlohmann::json::parse(read_text(family_dir(family) / "losses.json"));
}

RunResult train(const std::string& plan_json, int64_t sequences, const std::string& family = "") {
  const fs::path dir = family_dir(family);
  const nlohmann::json losses = family_losses(family);
  const std::string config = (dir / "config.json").string();
  const int64_t seq_len = losses.at("seq_len").get<int64_t>();
  const ir::Schedule schedule = lower(config, plan_json, sequences, seq_len);
  const ir::Graph graph = ir::load_model(config);
  ModelState state(graph);
  load_hf_weights(state, (dir / "model.safetensors").string());
  const auto& h = losses.at("hyper");
  ExecutorOptions options;
  options.numerics = read_model_numerics(config);
  options.adamw = {h.at("lr").get<double>(), h.at("beta1").get<double>(), h.at("beta2").get<double>(),
                   h.at("eps").get<double>(), h.at("weight_decay").get<double>()};
  options.grad_clip = h.at("grad_clip").get<double>();
  Executor executor(schedule, graph, state, options);
  const TokenSource data = TokenSource::open((dir / "tokens.bin").string(), TokenDType::u16);
  RunResult r;
  for (int64_t k = 0; k < 3; ++k) {
    r.stats.push_back(executor.step(global_batch(data, k, sequences, seq_len)));
    r.losses.push_back(r.stats.back().loss);
  }
  EXPECT_EQ(state.step, 3);
  return r;
}

void check_against_torch(const std::string& plan_json, int64_t sequences, const std::string& family = "") {
  MGT_REQUIRE_REFERENCE();
  if (!can_lower()) GTEST_SKIP() << "no lowering available: link mgt_planner into the test or build mgt-plan";
  const RunResult r = train(plan_json, sequences, family);
  const nlohmann::json losses = family_losses(family);
  const auto& want = losses.at("G" + std::to_string(sequences));
  ASSERT_EQ(r.losses.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    const double w = want[k].get<double>();
    const double rel = std::abs(r.losses[k] - w) / std::abs(w);
    std::printf("[ loss ] plan %-40s G=%lld step %zu: ours %.9f torch %.9f rel %.2e  peak %lld B (planned %lld B)\n",
                plan_json.c_str(), static_cast<long long>(sequences), k, r.losses[k], w, rel,
                static_cast<long long>(r.stats[k].peak_bytes), static_cast<long long>(r.stats[k].planned_peak_bytes));
    EXPECT_LE(rel, 1e-5) << "plan " << plan_json << " step " << k;
    EXPECT_GT(r.stats[k].peak_bytes, 0);
  }
}

TEST(ExecutorTest, TinyLlamaPlanEmptyOneSequenceMatchesTorch) { check_against_torch("{}", 1); }

// Mistral: a 16-position sliding window over 32 positions (the mask bites); Qwen2: q/k/v biases.
TEST(ExecutorTest, TinyMistralSlidingWindowMatchesTorch) {
  check_against_torch("{}", 1, "mistral");
  check_against_torch(R"({"micro_batch":1})", 2, "mistral");
}

TEST(ExecutorTest, TinyQwen2QkvBiasMatchesTorch) {
  check_against_torch("{}", 1, "qwen2");
  check_against_torch(R"({"micro_batch":1,"recompute":"full"})", 2, "qwen2");
}

TEST(ExecutorTest, TinyLlamaMicroBatch2MatchesTorch) { check_against_torch(R"({"micro_batch":2})", 2); }

TEST(ExecutorTest, TinyLlamaGradAccum2MatchesTorch) { check_against_torch(R"({"micro_batch":1})", 2); }

TEST(ExecutorTest, TinyLlamaFullRecomputeMatchesTorch) {
  check_against_torch(R"({"micro_batch":1,"recompute":"full"})", 2);
}

TEST(ExecutorTest, TinyLlamaSelectiveRecomputeMatchesTorch) {
  check_against_torch(R"({"micro_batch":2,"recompute":"selective"})", 2);
}

// Full recompute keeps only each copy's input between forward and backward: the measured peak drops.
TEST(ExecutorTest, FullRecomputeLowersMeasuredPeak) {
  MGT_REQUIRE_REFERENCE();
  if (!can_lower()) GTEST_SKIP() << "no lowering available";
  const RunResult none = train(R"({"micro_batch":2})", 2);
  const RunResult full = train(R"({"micro_batch":2,"recompute":"full"})", 2);
  EXPECT_LT(full.stats[0].peak_bytes, none.stats[0].peak_bytes);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(full.losses[k], none.losses[k]);  // same kernels, same order of sums
}

// The error one step of `schedule` over `graph` (fresh parameters, 32 synthetic tokens) raises;
// "" when the step runs.
std::string first_step_error(const ir::Schedule& schedule, const ir::Graph& graph) {
  ModelState state(graph);
  init_parameters(state, {.seed = 1});
  Executor executor(schedule, graph, state, {});
  try {
    executor.step(global_batch(TokenSource::synthetic(7, 512), 0, 1, 32));
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(ExecutorTest, UnknownOpIsAnErrorNamingTheInstruction) {
  MGT_REQUIRE_REFERENCE();
  if (!can_lower()) GTEST_SKIP() << "no lowering available";
  const std::string config = (reference().dir / "config.json").string();
  ir::Schedule schedule = lower(config, "{}", 1, 32);
  for (auto& instr : schedule.programs[0].instructions) {
    if (auto* c = std::get_if<ir::Compute>(&instr.op); c && c->op == "q_proj" && c->phase == ir::Phase::fwd) {
      c->op = "no_such_op";
      break;
    }
  }
  const std::string what = first_step_error(schedule, ir::load_model(config));
  EXPECT_NE(what.find("instruction #"), std::string::npos) << what;
  EXPECT_NE(what.find("no_such_op"), std::string::npos) << what;
}

TEST(ExecutorTest, ClampedGatedUnitIsRefusedNotIgnored) {
  MGT_REQUIRE_REFERENCE();
  if (!can_lower()) GTEST_SKIP() << "no lowering available";
  // GPT-OSS's swiglu_limit: the CPU kernels have no clamped SwiGLU, so the step says so instead of
  // training the unclamped unit.
  const std::string config = (reference().dir / "config.json").string();
  const ir::Schedule schedule = lower(config, "{}", 1, 32);
  ir::Graph graph = ir::load_model(config);
  int clamped = 0;
  for (auto& block : graph.blocks)
    for (auto& op : block.ops)
      if (op.kind == ir::OpKind::activation) op.clamp_limit = 7.0, ++clamped;
  ASSERT_GT(clamped, 0);
  const std::string what = first_step_error(schedule, graph);
  EXPECT_NE(what.find("clamp_limit 7"), std::string::npos) << what;
}

TEST(ExecutorTest, MultiRankScheduleWithoutCommunicatorIsRejected) {
  MGT_REQUIRE_REFERENCE();
  // A two-rank schedule needs a communicator; the message says so instead of running half a step.
  ir::Schedule s;
  s.num_gpus = 2;
  s.plan.dp_shard = 2;
  s.mesh = {{{"dp_shard", 2}}};
  ir::add_program(s, "all", {}, 2);
  const ir::Graph graph = ir::load_model((reference().dir / "config.json").string());
  ModelState state(graph);
  EXPECT_THROW(Executor(s, graph, state, {}), ir::InputError);
}

// ---- data (issue 5 part 5) ----

TEST(DataTest, FixedOrderFromAUint16File) {
  const fs::path path = fs::temp_directory_path() / ("mgt_data_test_" + std::to_string(::getpid()) + ".bin");
  {
    std::ofstream out(path, std::ios::binary);
    for (uint16_t t = 0; t < 41; ++t) {
      const uint16_t v = static_cast<uint16_t>(1000 + t);
      out.put(static_cast<char>(v & 0xff));
      out.put(static_cast<char>(v >> 8));
    }
  }
  const TokenSource data = TokenSource::open(path.string(), TokenDType::u16);
  EXPECT_EQ(data.num_tokens(), 41);
  // G = 2, S = 4: step 1 holds sequences 2 and 3: inputs tokens[8:12], tokens[12:16].
  const StepBatch b = global_batch(data, 1, 2, 4);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{1008, 1009, 1010, 1011, 1012, 1013, 1014, 1015}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{1009, 1010, 1011, 1012, 1013, 1014, 1015, 1016}));
  // Step 4 needs 5*8+1 = 41 tokens: exactly available; step 5 is not.
  EXPECT_NO_THROW(global_batch(data, 4, 2, 4));
  try {
    global_batch(data, 5, 2, 4);
    FAIL() << "expected an error";
  } catch (const ir::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("step 5 needs 49 tokens"), std::string::npos) << e.what();
  }
  fs::remove(path);
}

TEST(DataTest, Uint32FileAndOddSizeRejected) {
  const fs::path path = fs::temp_directory_path() / ("mgt_data_test32_" + std::to_string(::getpid()) + ".bin");
  {
    std::ofstream out(path, std::ios::binary);
    for (uint32_t v : {70000u, 1u, 2u}) out.write(reinterpret_cast<const char*>(&v), 4);  // x86: little-endian
    out.put('x');
  }
  EXPECT_THROW(TokenSource::open(path.string(), TokenDType::u32), ir::InputError);  // 13 bytes
  fs::resize_file(path, 12);
  const TokenSource data = TokenSource::open(path.string(), TokenDType::u32);
  const StepBatch b = global_batch(data, 0, 1, 2);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{70000, 1}));
  EXPECT_EQ(b.targets, (std::vector<int32_t>{1, 2}));
  fs::remove(path);
  EXPECT_EQ(token_dtype_from_string("uint16"), TokenDType::u16);
  EXPECT_EQ(token_dtype_from_string("int8"), std::nullopt);
}

TEST(DataTest, SyntheticTokensAreDeterministicAndInRange) {
  const TokenSource a = TokenSource::synthetic(3, 512), b = TokenSource::synthetic(3, 512);
  const StepBatch x = global_batch(a, 2, 4, 16), y = global_batch(b, 2, 4, 16);
  EXPECT_EQ(x.inputs, y.inputs);
  for (int32_t t : x.inputs) EXPECT_TRUE(t >= 0 && t < 512);
  // The order is one stream: the target of a sequence's last token is the next sequence's first input.
  EXPECT_EQ(x.targets[15], x.inputs[16]);
  EXPECT_NE(global_batch(TokenSource::synthetic(4, 512), 2, 4, 16).inputs, x.inputs);
}

TEST(ExecutorNumericsTest, ReadsLlama3RopeAndEps) {
  MGT_REQUIRE_REFERENCE();
  const ModelNumerics n = read_model_numerics((reference().dir / "config.json").string());
  EXPECT_FLOAT_EQ(n.norm_eps, 1e-5f);
  EXPECT_DOUBLE_EQ(n.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(n.rope.factor, 8.0);
  EXPECT_EQ(n.rope.original_max_position_embeddings, 64);
}

}  // namespace
}  // namespace mgt::rt
