// rt::Trainer (trainer.hpp): the loop gives the executor's own losses, the log and the summary carry
// what the steps measured beside the prediction handed in, and a save then resume continues the run bit
// for bit. Expected values come from running the executor directly, not from the trainer.
#include "mgt/runtime/trainer.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/lower.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using namespace mgt;
namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kSeqLen = 16, kGlobalBatch = 2;

struct Fixture {
  fs::path dir;
  ir::Graph graph;
  ir::Schedule schedule;
  rt::TokenSource data = rt::TokenSource::synthetic(5, 512);

  Fixture() {
    dir = fs::temp_directory_path() / ("mgt_trainer_test_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string config = (dir / "config.json").string();
    std::ofstream(config) << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
      "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
      "vocab_size":512,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000.0,
      "tie_word_embeddings":false,"hidden_act":"silu"})";
    graph = ir::load_model(config);
    cost::TrainingSettings settings;
    settings.seq_len = kSeqLen;
    settings.global_batch_tokens = kGlobalBatch * kSeqLen;
    settings.compute_dtype = ir::DType::f32;
    schedule = plan::lower_to_schedule(graph, ir::Plan{}, settings, 1, ir::cluster_preset("h100-sxm"));
  }
  ~Fixture() { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }

  /// The losses of `steps` steps of the executor alone, from a seed-3 state.
  std::vector<double> direct_losses(int64_t steps) const {
    rt::ModelState state(graph);
    rt::init_parameters(state, {.seed = 3});
    rt::Executor executor(schedule, graph, state, {});
    std::vector<double> losses;
    for (int64_t k = 0; k < steps; ++k)
      losses.push_back(executor.step(rt::global_batch(data, k, kGlobalBatch, kSeqLen)).loss);
    return losses;
  }
};

std::vector<json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

TEST(Trainer, LogsTheExecutorsLossesAndTheSummaryOfWhatItMeasured) {
  Fixture f;
  const std::vector<double> want = f.direct_losses(3);
  rt::ModelState state(f.graph);
  rt::init_parameters(state, {.seed = 3});
  rt::Executor executor(f.schedule, f.graph, state, {});
  const rt::Prediction predicted{.cluster = "made-up", .program = "stage0", .step_time_s = 0.5, .overhead_s = 0.125,
                                 .peak_bytes = 1000, .peak_reserved_bytes = 3000};
  rt::Trainer trainer(executor, state, f.data,
                      {.steps = 3, .seq_len = kSeqLen, .global_batch = kGlobalBatch, .log_path = f.file("log.jsonl"),
                       .prediction = predicted});
  const rt::TrainReport report = trainer.train();

  const std::vector<json> log = read_lines(f.file("log.jsonl"));
  ASSERT_EQ(log.size(), 4u);  // three steps, then the summary
  int64_t peak = 0, planned = 0;
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(log[k].at("step").get<int64_t>(), int64_t(k));
    EXPECT_EQ(log[k].at("loss").get<double>(), want[k]) << "step " << k;
    EXPECT_EQ(log[k].at("tokens").get<int64_t>(), kGlobalBatch * kSeqLen);
    EXPECT_EQ(log[k].at("step_time_s").get<double>(), report.step_seconds[k]);
    peak = std::max(peak, log[k].at("peak_bytes").get<int64_t>());
    planned = std::max(planned, log[k].at("planned_peak_bytes").get<int64_t>());
  }
  EXPECT_EQ(report.first_step, 0);
  EXPECT_EQ(report.last_step, 2);
  EXPECT_EQ(state.step, 3);
  // Measured: the mean of steps 1 and 2 (step 0 is warm-up); the highest peaks of the steps.
  const double mean = (report.step_seconds[1] + report.step_seconds[2]) / 2;
  EXPECT_DOUBLE_EQ(report.measured_step_s, mean);
  EXPECT_EQ(report.measured_from_step, 1);
  EXPECT_EQ(report.peak_bytes, peak);
  EXPECT_EQ(report.planned_peak_bytes, planned);

  const json& s = log[3].at("summary");
  EXPECT_EQ(s.at("cluster"), "made-up");
  EXPECT_EQ(s.at("program"), "stage0");
  EXPECT_EQ(s.at("last_step").get<int64_t>(), 2);
  EXPECT_EQ(s.at("step_time_s").at("predicted").get<double>(), 0.5);
  EXPECT_EQ(s.at("step_time_s").at("predicted_overheads").get<double>(), 0.125);
  EXPECT_DOUBLE_EQ(s.at("step_time_s").at("measured").get<double>(), mean);
  EXPECT_DOUBLE_EQ(s.at("step_time_s").at("measured_over_predicted").get<double>(), mean / 0.5);
  EXPECT_EQ(s.at("peak_bytes").at("predicted").get<int64_t>(), 1000);
  EXPECT_EQ(s.at("peak_bytes").at("predicted_reserved").get<int64_t>(), 3000);
  EXPECT_EQ(s.at("peak_bytes").at("measured").get<int64_t>(), peak);
  EXPECT_DOUBLE_EQ(s.at("peak_bytes").at("measured_over_predicted").get<double>(), double(peak) / 1000.0);
}

TEST(Trainer, SaveThenResumeContinuesBitForBit) {
  Fixture f;
  const std::vector<double> want = f.direct_losses(3);
  rt::RunRecord record;
  record.model = "tiny";
  record.model_path = "config.json";
  record.seed = 3;
  record.adamw.lr = 2e-3;  // the record says what the run used; the executor's options are the caller's
  record.grad_clip = 0.25;
  {
    rt::ModelState state(f.graph);
    rt::init_parameters(state, {.seed = 3});
    rt::Executor executor(f.schedule, f.graph, state, {});
    rt::Trainer(executor, state, f.data,
                {.steps = 2, .seq_len = kSeqLen, .global_batch = kGlobalBatch, .save_dir = f.file("ckpt"), .record = record})
        .train();
  }
  const rt::RunRecord saved = rt::read_run_record(f.file("ckpt"));
  EXPECT_EQ(saved.step, std::optional<int64_t>(2));
  EXPECT_EQ(saved.seq_len, kSeqLen);
  EXPECT_EQ(saved.global_batch, kGlobalBatch);
  EXPECT_EQ(saved.seed, 3u);
  EXPECT_EQ(saved.adamw.lr, 2e-3);
  EXPECT_EQ(saved.grad_clip, 0.25);
  EXPECT_EQ(saved.model, "tiny");
  const json doc = json::parse(std::ifstream(f.file("ckpt/run.json")));
  EXPECT_EQ(doc.at("format"), "mgt.run/1");
  EXPECT_EQ(doc.at("tokens_seen").get<int64_t>(), 2 * kGlobalBatch * kSeqLen);
  // mgt.run/1 as the save wrote it: read and written again, byte for byte (run_record_test.cpp has the rest).
  EXPECT_EQ(rt::to_json(rt::run_record_from_json(doc, "run.json")).dump(2) + "\n",
            std::string(std::istreambuf_iterator<char>(std::ifstream(f.file("ckpt/run.json")).rdbuf()), {}));

  rt::ModelState state(f.graph);
  EXPECT_EQ(saved.parameters, state.table().total_elements);
  rt::resume_checkpoint(state, f.file("ckpt"), saved, "config.json");
  EXPECT_EQ(state.step, 2);
  rt::Executor executor(f.schedule, f.graph, state, {});
  rt::Trainer trainer(executor, state, f.data,
                      {.steps = 1, .seq_len = kSeqLen, .global_batch = kGlobalBatch, .log_path = f.file("more.jsonl")});
  const rt::TrainReport report = trainer.train();
  EXPECT_EQ(report.first_step, 2);
  const std::vector<json> log = read_lines(f.file("more.jsonl"));
  ASSERT_EQ(log.size(), 1u);  // no prediction: no summary line
  EXPECT_EQ(log[0].at("step").get<int64_t>(), 2);
  EXPECT_EQ(log[0].at("loss").get<double>(), want[2]);
}

TEST(Trainer, UnusableFoldersAreInputErrorsNamingThem) {
  Fixture f;
  const auto expect_error = [](const auto& call, const std::string& words) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one naming " << words;
    } catch (const ir::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_error([&] { rt::read_run_record(f.file("nowhere")); }, "no such checkpoint folder");
  fs::create_directories(f.file("empty"));
  expect_error([&] { rt::read_run_record(f.file("empty")); }, "run.json");
  std::ofstream(f.file("mine.txt")) << "keep me";
  expect_error([&] { rt::checked_save_folder(f.file("mine.txt")); }, "exists and is not a folder");
  fs::create_directories(f.file("notes"));
  std::ofstream(f.file("notes/a.txt")) << "keep me";
  expect_error([&] { rt::checked_save_folder(f.file("notes")); }, "not a checkpoint folder");
  EXPECT_EQ(rt::checked_save_folder(f.file("new/")), f.file("new"));
}

}  // namespace
