// End-to-end tests of `mgt-plan run` (docs/runtime_run.md) on a tiny Llama (2 layers, hidden 64):
// --save then --resume gives the losses of an uninterrupted run bit for bit (one rank, and
// {"dp_shard":2} under mpirun when it is installed), clear exit-2 errors for unusable checkpoints,
// the --trace structure, and the final {"summary": ...} line of --log. No assertion depends on timing.
// The binary runs with cwd = the repository root; stdout and stderr go to temp files.
#include "cli_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace mgt_cli_test {
namespace {

constexpr const char* kTinyLlama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
  "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
  "vocab_size":512,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000.0,
  "tie_word_embeddings":false,"hidden_act":"silu"})";

/// The lines of `text` that are not empty.
std::vector<std::string> nonempty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

struct Log {
  std::vector<json> steps;
  json summary;
};

Log read_log(const std::string& path) {
  Log log;
  for (const std::string& line : nonempty_lines(slurp(path))) {
    json j = json::parse(line);
    if (j.contains("summary")) log.summary = j.at("summary");
    else log.steps.push_back(std::move(j));
  }
  return log;
}

/// (step, loss) of every step line, in order.
std::vector<std::pair<int64_t, double>> losses(const Log& log) {
  std::vector<std::pair<int64_t, double>> v;
  for (const json& s : log.steps) v.emplace_back(s.at("step").get<int64_t>(), s.at("loss").get<double>());
  return v;
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Flags of the training runs: lr high enough that AdamW's moments matter from step to step.
std::vector<std::string> training_flags(const std::string& model, int64_t global_batch) {
  return {"run",  model,    "--seq-len", "16",     "--global-batch", std::to_string(global_batch),
          "--lr", "1e-2",   "--beta2",   "0.95",   "--grad-clip",    "0.5",
          "--seed", "3"};
}

std::string find_mpirun() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir) / "mpirun";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

// ------------------------------------------------------------------------------------------------

/// 4 steps == 2 steps + --save, then 2 steps + --resume: identical losses, as doubles.
void expect_save_resume_bit_identical(const std::vector<std::string>& launcher, const std::string& plan,
                                      int64_t global_batch) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const auto flags = concat(training_flags(model, global_batch), {"--plan", plan});
  const Result full = run_cli(concat(flags, {"--steps", "4", "--log", d.file("full.jsonl")}), launcher);
  ASSERT_EQ(full.exit_code, 0) << describe(full);
  const Result first = run_cli(concat(flags, {"--steps", "2", "--save", d.file("ckpt"), "--log", d.file("a.jsonl")}), launcher);
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  // Resumed with only the model, the checkpoint and the step count: the rest comes from run.json.
  const Result second = run_cli({"run", model, "--plan", plan, "--resume", d.file("ckpt"), "--steps", "2", "--log",
                             d.file("b.jsonl")},
                            launcher);
  ASSERT_EQ(second.exit_code, 0) << describe(second);
  // And with every flag repeated.
  const Result again = run_cli(concat(flags, {"--resume", d.file("ckpt"), "--steps", "2", "--log", d.file("c.jsonl")}), launcher);
  ASSERT_EQ(again.exit_code, 0) << describe(again);

  const auto want = losses(read_log(d.file("full.jsonl")));
  ASSERT_EQ(want.size(), 4u);
  auto got = losses(read_log(d.file("a.jsonl")));
  const auto tail = losses(read_log(d.file("b.jsonl")));
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(tail.size(), 2u);
  got.insert(got.end(), tail.begin(), tail.end());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].first, int64_t(i));
    EXPECT_EQ(got[i].first, int64_t(i));
    EXPECT_EQ(got[i].second, want[i].second) << "step " << i << ": resumed " << got[i].second << " vs uninterrupted "
                                             << want[i].second;
  }
  EXPECT_EQ(losses(read_log(d.file("c.jsonl"))), tail);
  // The training moves (the comparison is not between constants).
  EXPECT_NE(want[0].second, want[3].second);

  const json rec = json::parse(slurp(d.file("ckpt/run.json")));
  EXPECT_EQ(rec.at("format"), "mgt.run/1");
  EXPECT_EQ(rec.at("step").get<int64_t>(), 2);
  EXPECT_EQ(rec.at("seq_len").get<int64_t>(), 16);
  EXPECT_EQ(rec.at("global_batch").get<int64_t>(), global_batch);
  EXPECT_TRUE(fs::exists(d.file("ckpt/model.safetensors")));
  EXPECT_TRUE(fs::exists(d.file("ckpt/optimizer.safetensors")));
  // Nothing of the staging folders is left beside it.
  for (const auto& entry : fs::directory_iterator(d.path))
    EXPECT_FALSE(contains(entry.path().filename().string(), "ckpt.")) << entry.path();
}

TEST(CliRun, SaveThenResumeEqualsUninterruptedRunOneRank) { expect_save_resume_bit_identical({}, "{}", 2); }

TEST(CliRun, SaveThenResumeWithGradAccumAndRecompute) {
  expect_save_resume_bit_identical({}, R"({"micro_batch":1,"recompute":"full"})", 2);
}

TEST(CliRun, SaveThenResumeDpShard2UnderMpirun) {
  const std::string mpirun = find_mpirun();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not on PATH";
  const std::vector<std::string> launcher = {mpirun, "-np", "2", "--allow-run-as-root", "--oversubscribe",
                                             "--mca", "btl", "self,vader"};
  expect_save_resume_bit_identical(launcher, R"({"dp_shard":2})", 4);

  // An FSDP checkpoint holds the full state (synchronize_state): one rank resumes it under {} and
  // continues within rounding of the two-rank run.
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const auto flags = concat(training_flags(model, 4), {"--plan", R"({"dp_shard":2})"});
  const Result full = run_cli(concat(flags, {"--steps", "4", "--log", d.file("full.jsonl")}), launcher);
  ASSERT_EQ(full.exit_code, 0) << describe(full);
  const Result first = run_cli(concat(flags, {"--steps", "2", "--save", d.file("ckpt")}), launcher);
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  const Result one = run_cli({"run", model, "--resume", d.file("ckpt"), "--steps", "2", "--log", d.file("one.jsonl")});
  ASSERT_EQ(one.exit_code, 0) << describe(one);
  const auto want = losses(read_log(d.file("full.jsonl")));
  const auto got = losses(read_log(d.file("one.jsonl")));
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].first, want[i + 2].first);
    EXPECT_NEAR(got[i].second, want[i + 2].second, 1e-5 * std::abs(want[i + 2].second)) << "step " << i + 2;
  }
}

TEST(CliRun, UnusableCheckpointsAreOneLineErrors) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  json bigger = json::parse(kTinyLlama);
  bigger["num_hidden_layers"] = 3;
  const std::string other = d.write("other.json", bigger.dump());
  const auto flags = training_flags(model, 2);
  const Result saved = run_cli(concat(flags, {"--steps", "1", "--save", d.file("ckpt")}));
  ASSERT_EQ(saved.exit_code, 0) << describe(saved);

  const auto expect_error = [](const Result& r, const std::vector<std::string>& words) {
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << describe(r);
    for (const auto& w : words) EXPECT_TRUE(contains(r.err, w)) << "missing '" << w << "' in: " << r.err;
  };
  // No such folder: names it and says what to pass.
  expect_error(run_cli({"run", model, "--resume", d.file("nowhere"), "--steps", "1"}), {d.file("nowhere"), "--save"});
  // A folder --save did not write.
  fs::create_directories(d.path / "empty");
  expect_error(run_cli({"run", model, "--resume", d.file("empty"), "--steps", "1"}), {"run.json", "--weights"});
  // Another model: the parameter counts differ; the fix names the model it was saved from.
  expect_error(run_cli({"run", other, "--resume", d.file("ckpt"), "--steps", "1"}),
               {d.file("ckpt/run.json"), "parameters", model});
  // A different sequence length would move the data position.
  expect_error(run_cli({"run", model, "--resume", d.file("ckpt"), "--steps", "1", "--seq-len", "8"}),
               {"run.json", "seq_len", "--seq-len 16"});
  expect_error(run_cli({"run", model, "--resume", d.file("ckpt"), "--weights", d.file("ckpt"), "--steps", "1"}),
               {"--weights", "--resume"});
  // Without --resume the batch shape is required.
  expect_error(run_cli({"run", model, "--steps", "1", "--global-batch", "2"}), {"--seq-len"});
  // --save does not replace a folder that is not a checkpoint.
  d.write("notes.txt", "keep me");
  fs::create_directories(d.path / "mine");
  d.write("mine/notes.txt", "keep me");
  expect_error(run_cli(concat(flags, {"--steps", "1", "--save", d.file("mine")})), {d.file("mine"), "--save"});
  EXPECT_EQ(slurp(d.file("mine/notes.txt")), "keep me");
  // The checkpoint itself survived all of it and still resumes.
  const Result ok = run_cli({"run", model, "--resume", d.file("ckpt"), "--steps", "1"});
  EXPECT_EQ(ok.exit_code, 0) << describe(ok);
}

// Packed training (--document-tokens): 2 sequences of 16 tokens in documents of 4 train as 8
// sequences of 4 tokens (the same token stream, attention within each document); the checkpoint
// records the documents and a resume keeps them, refusing another length with one line.
TEST(CliRun, PackedSequencesTrainAsTheirDocumentsAndResumeWithThem) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const Result packed = run_cli({"run", model, "--seq-len", "16", "--global-batch", "2", "--document-tokens", "4",
                                 "--steps", "2", "--log", d.file("packed.jsonl"), "--save", d.file("ckpt")});
  ASSERT_EQ(packed.exit_code, 0) << describe(packed);
  const Result documents = run_cli({"run", model, "--seq-len", "4", "--global-batch", "8", "--steps", "2", "--log",
                                    d.file("documents.jsonl")});
  ASSERT_EQ(documents.exit_code, 0) << describe(documents);
  const auto want = losses(read_log(d.file("documents.jsonl"))), got = losses(read_log(d.file("packed.jsonl")));
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i].second, want[i].second, 1e-5 * want[i].second) << i;
  EXPECT_EQ(json::parse(slurp(d.file("ckpt/run.json"))).at("document_tokens").get<int64_t>(), 4);
  const Result other = run_cli({"run", model, "--resume", d.file("ckpt"), "--steps", "1", "--document-tokens", "8"});
  EXPECT_EQ(other.exit_code, 2) << describe(other);
  EXPECT_EQ(nonempty_lines(other.err).size(), 1u) << describe(other);
  EXPECT_TRUE(contains(other.err, "--document-tokens 4")) << other.err;
  const Result resumed = run_cli({"run", model, "--resume", d.file("ckpt"), "--steps", "1"});
  EXPECT_EQ(resumed.exit_code, 0) << describe(resumed);
  const Result too_long = run_cli({"run", model, "--seq-len", "16", "--global-batch", "2", "--document-tokens", "32",
                                   "--steps", "1"});
  EXPECT_EQ(too_long.exit_code, 2) << describe(too_long);
  EXPECT_TRUE(contains(too_long.err, "longer than a sequence")) << too_long.err;
}

TEST(CliRun, TraceIsChromeTraceOfTheLastStepBesideTheSimulation) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const Result r = run_cli(concat(training_flags(model, 2), {"--plan", R"({"micro_batch":1})", "--steps", "2", "--trace",
                                                         d.file("trace.json")}));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json trace = json::parse(slurp(d.file("trace.json")));
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  EXPECT_EQ(trace.at("otherData").at("step").get<int64_t>(), 1);

  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<std::pair<int, int>, std::vector<json>> events;  // (pid, tid) -> X events
  for (const json& e : trace.at("traceEvents")) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << e.dump();
    const int pid = e.at("pid").get<int>();
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "process_name") process_names[pid] = e.at("args").at("name");
    if (ph == "M" && e.at("name") == "thread_name") thread_names[{pid, e.at("tid").get<int>()}] = e.at("args").at("name");
    if (ph != "X") continue;
    ASSERT_TRUE(e.at("ts").is_number() && e.at("dur").is_number() && e.at("tid").is_number()) << e.dump();
    EXPECT_GE(e.at("ts").get<double>(), 0.0);
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    events[{pid, e.at("tid").get<int>()}].push_back(e);
  }
  ASSERT_EQ(process_names.size(), 2u);
  EXPECT_EQ(process_names[0].rfind("measured: ", 0), 0u) << process_names[0];
  EXPECT_EQ(process_names[1].rfind("simulated on ", 0), 0u) << process_names[1];

  std::map<int64_t, std::string> measured_names, simulated_names;
  std::set<std::string> kinds;
  for (auto& [key, list] : events) {
    EXPECT_TRUE(thread_names.count(key)) << "no thread_name for pid " << key.first << " tid " << key.second;
    std::sort(list.begin(), list.end(), [](const json& a, const json& b) { return a.at("ts") < b.at("ts"); });
    for (size_t i = 0; i < list.size(); ++i) {
      const int64_t id = list[i].at("args").at("id");
      (key.first == 0 ? measured_names : simulated_names)[id] = list[i].at("name");
      if (key.first == 0) kinds.insert(list[i].at("name").get<std::string>().substr(0, 3));
      if (i == 0) continue;
      // The CPU executor runs one instruction at a time, in program order.
      const double prev_end = list[i - 1].at("ts").get<double>() + list[i - 1].at("dur").get<double>();
      EXPECT_GE(list[i].at("ts").get<double>(), prev_end - 1e-3) << list[i - 1].dump() << "\n" << list[i].dump();
      if (key.first == 0) {
        EXPECT_GT(id, list[i - 1].at("args").at("id").get<int64_t>());
      }
    }
  }
  // Every instruction the simulator times appears measured, under the same name.
  ASSERT_FALSE(simulated_names.empty());
  for (const auto& [id, name] : simulated_names) {
    ASSERT_TRUE(measured_names.count(id)) << "instruction " << id << " (" << name << ") not measured";
    EXPECT_EQ(measured_names[id], name);
  }
  EXPECT_TRUE(kinds.count("fwd") && kinds.count("bwd")) << "measured event kinds seen: " << kinds.size();
}

TEST(CliRun, SummaryLineComparesPredictedWithMeasured) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  // The cluster of this machine, as `probe` measures it (quick: structure only, not precision).
  const Result probe = run_cli({"probe", "--backend", "cpu", "--quick", "--out", d.file("cpu.json")});
  ASSERT_EQ(probe.exit_code, 0) << describe(probe);
  for (const int64_t steps : {3, 1}) {
    const std::string log_path = d.file("log" + std::to_string(steps) + ".jsonl");
    const Result r = run_cli(concat(training_flags(model, 2), {"--steps", std::to_string(steps), "--cluster",
                                                           d.file("cpu.json"), "--log", log_path}));
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_TRUE(contains(r.out, "predicted vs measured")) << r.out;
    const Log log = read_log(log_path);
    ASSERT_EQ(log.steps.size(), size_t(steps));
    ASSERT_TRUE(log.summary.is_object()) << slurp(log_path);
    const json& t = log.summary.at("step_time_s");
    const json& m = log.summary.at("peak_bytes");
    // Mean over the steps after the first (the first when there is one).
    double mean = 0.0;
    const size_t from = steps > 1 ? 1 : 0;
    for (size_t i = from; i < log.steps.size(); ++i) mean += log.steps[i].at("step_time_s").get<double>();
    mean /= double(log.steps.size() - from);
    EXPECT_DOUBLE_EQ(t.at("measured").get<double>(), mean);
    EXPECT_EQ(t.at("measured_from_step").get<int64_t>(), int64_t(from));
    EXPECT_GT(t.at("predicted").get<double>(), 0.0);
    EXPECT_GE(t.at("predicted_overheads").get<double>(), 0.0);
    EXPECT_LT(t.at("predicted_overheads").get<double>(), t.at("predicted").get<double>());
    EXPECT_DOUBLE_EQ(t.at("measured_over_predicted").get<double>(),
                     t.at("measured").get<double>() / t.at("predicted").get<double>());
    int64_t peak = 0, planned = 0;
    for (const json& s : log.steps) {
      peak = std::max(peak, s.at("peak_bytes").get<int64_t>());
      planned = std::max(planned, s.at("planned_peak_bytes").get<int64_t>());
    }
    EXPECT_EQ(m.at("measured").get<int64_t>(), peak);
    EXPECT_EQ(m.at("planned").get<int64_t>(), planned);
    // The simulator's peak is the schedule's Alloc/Free peak: what the executor counts as planned.
    EXPECT_EQ(m.at("predicted").get<int64_t>(), planned);
    EXPECT_GE(m.at("predicted_reserved").get<int64_t>(), m.at("predicted").get<int64_t>());
    EXPECT_EQ(log.summary.at("last_step").get<int64_t>(), steps - 1);
  }
}

// ------------------------------------------------------------------------------------------------
// Faults (issue 8, part 4). MGT_FAULT_KILL_AT=<point>:<n> makes the n-th pass through a fault point
// SIGKILL the process (runtime/include/mgt/runtime/safetensors.hpp).

/// A --save killed at every stage of writing leaves the previous checkpoint whole: resuming from it
/// gives the losses of the uninterrupted run bit for bit.
TEST(CliRunFaults, KillDuringSaveLeavesThePreviousCheckpointToResumeFrom) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const auto flags = training_flags(model, 2);
  const Result full = run_cli(concat(flags, {"--steps", "4", "--log", d.file("full.jsonl")}));
  ASSERT_EQ(full.exit_code, 0) << describe(full);
  const Result first = run_cli(concat(flags, {"--steps", "2", "--save", d.file("ckpt")}));
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  const auto want = losses(read_log(d.file("full.jsonl")));
  ASSERT_EQ(want.size(), 4u);
  // Points: inside a file being written, between the files, and just before the folder swap.
  for (const std::string point : {"write:2", "checkpoint-file:1", "checkpoint-file:2", "replace-folder:1"}) {
    const Result killed = run_cli({"run", model, "--resume", d.file("ckpt"), "--steps", "1", "--save", d.file("ckpt")},
                              {"env", "MGT_FAULT_KILL_AT=" + point});
    ASSERT_EQ(killed.exit_code, 128 + 9) << point << ": " << describe(killed);
    EXPECT_TRUE(contains(killed.err, "MGT_FAULT_KILL_AT=" + point)) << describe(killed);
    const json rec = json::parse(slurp(d.file("ckpt/run.json")));
    EXPECT_EQ(rec.at("step").get<int64_t>(), 2) << point;
    const Result resumed = run_cli({"run", model, "--resume", d.file("ckpt"), "--steps", "2", "--log", d.file("r.jsonl")});
    ASSERT_EQ(resumed.exit_code, 0) << point << ": " << describe(resumed);
    const auto got = losses(read_log(d.file("r.jsonl")));
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0], want[2]) << point;
    EXPECT_EQ(got[1], want[3]) << point;
  }
  // A save that completes replaces it whole.
  const Result saved = run_cli({"run", model, "--resume", d.file("ckpt"), "--steps", "1", "--save", d.file("ckpt")});
  ASSERT_EQ(saved.exit_code, 0) << describe(saved);
  EXPECT_EQ(json::parse(slurp(d.file("ckpt/run.json"))).at("step").get<int64_t>(), 3);
}

/// Two ranks under mpirun --enable-recovery (which keeps a job alive when a rank is lost), training
/// with --comm-timeout 2; rank 1 runs with `fault` (MGT_FAULT_KILL_AT or MGT_FAULT_STOP_AT at its 5th
/// collective, inside the first step). A hang is killed after 60 s.
Result run_with_lost_rank_1(const std::string& mpirun, const std::string& fault) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  auto args = concat(training_flags(model, 2), {"--plan", R"({"dp_shard":2})", "--steps", "3", "--comm-timeout", "2"});
  // MPMD: rank 0 runs normally, rank 1 with the fault.
  const std::vector<std::string> victim = {":", "-np", "1", "env", fault, MGT_CLI_PATH};
  return run_cli(concat(args, concat(victim, args)), {"timeout", "-s", "KILL", "60", mpirun, "--allow-run-as-root",
                                                      "--oversubscribe", "--mca", "btl", "self,vader", "--enable-recovery",
                                                      "-np", "1"});
}

/// The survivor stopped waiting after --comm-timeout, named rank 1 and ended the job non-zero.
void expect_job_ended_naming_rank_1(const Result& r, const std::string& fault_line) {
  // mpirun --enable-recovery ignores the ranks' exit statuses (it exited 0 here before the survivor
  // learned to stop it); the job must still end non-zero, and the survivor's line says why.
  EXPECT_NE(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.exit_code, 128 + 9) << "the job hung until the test's timeout\n" << describe(r);
  EXPECT_TRUE(contains(r.err, fault_line)) << describe(r);
  EXPECT_TRUE(contains(r.err, "mgt: rank 0: MPI_")) << describe(r);
  EXPECT_TRUE(contains(r.err, "did not complete within --comm-timeout 2 s; lost rank 1")) << describe(r);
  EXPECT_TRUE(contains(r.err, "; aborting the job")) << describe(r);
  EXPECT_FALSE(contains(r.out, "summary")) << describe(r);
}

/// A rank killed mid-step under a launcher that keeps the job alive (mpirun --enable-recovery): the
/// survivor stops waiting after --comm-timeout, names the lost rank and the call, and ends the job
/// with MPI_Abort, exit status 4, instead of hanging; mpirun, which ignores exit statuses under
/// --enable-recovery, is stopped so that the job fails too.
TEST(CliRunFaults, KilledRankEndsTheJobWithinTheCommTimeoutNamingIt) {
  const std::string mpirun = find_mpirun();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not on PATH";
  expect_job_ended_naming_rank_1(run_with_lost_rank_1(mpirun, "MGT_FAULT_KILL_AT=collective:5"),
                                 "MGT_FAULT_KILL_AT=collective:5: killing this process");
}

/// A rank frozen mid-step (SIGSTOP: alive, its sockets open, never answering): the same (the job
/// exited 0 before).
TEST(CliRunFaults, FrozenRankEndsTheJobWithinTheCommTimeoutNamingIt) {
  const std::string mpirun = find_mpirun();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not on PATH";
  expect_job_ended_naming_rank_1(run_with_lost_rank_1(mpirun, "MGT_FAULT_STOP_AT=collective:5"),
                                 "MGT_FAULT_STOP_AT=collective:5: stopping this process");
}

/// --comm-timeout beyond the clock under mpirun, as on one rank (clear_errors_test.cpp): refused by
/// every rank before MPI starts, saying why, and the job fails.
TEST(CliRunFaults, CommTimeoutBeyondTheClockIsRefusedUnderMpirunSayingWhy) {
  const std::string mpirun = find_mpirun();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not on PATH";
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const Result r = run_cli(concat(training_flags(model, 2), {"--plan", R"({"dp_shard":2})", "--steps", "1", "--comm-timeout", "1e10"}),
                           {mpirun, "-np", "2", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_TRUE(contains(r.err, "--comm-timeout")) << describe(r);
  EXPECT_TRUE(contains(r.err, "must be in [0, 1e9] seconds, got 1e+10")) << describe(r);
  EXPECT_TRUE(contains(r.err, "overflows")) << describe(r);
  EXPECT_FALSE(contains(r.out, "step ")) << describe(r);
}

TEST(CliRun, EncodersAreRefusedWithOneLine) {
  // Tiny BERT, ViT and T5 configs plan and estimate, but the CPU runtime trains the dense rotary
  // decoder families only: one line naming the first parameter it cannot place and the families it
  // runs, exit 2 (a graph file that gets past the naming is refused by the executor for its
  // bidirectional attention, runtime/src/executor/setup.cpp).
  TempDir d;
  const std::vector<std::string> configs{
      R"({"model_type":"bert","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,
          "intermediate_size":128,"vocab_size":512,"max_position_embeddings":128})",
      R"({"model_type":"vit","architectures":["ViTForImageClassification"],"hidden_size":64,"num_hidden_layers":1,
          "num_attention_heads":4,"intermediate_size":128,"image_size":16,"patch_size":4,"num_labels":10})",
      R"({"model_type":"t5","d_model":64,"d_kv":16,"num_heads":4,"d_ff":128,"num_layers":1,"vocab_size":512})"};
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string model = d.write("encoder" + std::to_string(i) + ".json", configs[i]);
    const Result r = run_cli(concat(training_flags(model, 2), {"--steps", "1"}));
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << describe(r);
    EXPECT_TRUE(contains(r.err, "dense rotary families")) << describe(r);
  }
}

TEST(CliRunFaults, CommTimeoutMustBeANonNegativeNumber) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const Result r = run_cli(concat(training_flags(model, 2), {"--steps", "1", "--comm-timeout", "-1"}));
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_TRUE(contains(r.err, "--comm-timeout")) << describe(r);
}

TEST(CliRunFaults, OutOfMemoryNamesTheBufferItsSizeAndThePredictedPeak) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const auto flags = concat(training_flags(model, 2), {"--steps", "1"});
  const Result ok = run_cli(concat(flags, {"--log", d.file("ok.jsonl")}));
  ASSERT_EQ(ok.exit_code, 0) << describe(ok);
  // The simulator's predicted peak (the schedule's Alloc/Free peak) of the same plan.
  const int64_t predicted = read_log(d.file("ok.jsonl")).summary.at("peak_bytes").at("predicted").get<int64_t>();
  // MGT_FAULT_OOM_AT=k makes the executor's k-th allocation fail as std::bad_alloc.
  const Result r = run_cli(flags, {"env", "MGT_FAULT_OOM_AT=12"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << describe(r);
  EXPECT_TRUE(contains(r.err, "out of memory allocating ")) << describe(r);
  EXPECT_TRUE(contains(r.err, " bytes for buffer ")) << describe(r);
  EXPECT_TRUE(contains(r.err, "the plan predicted a peak of " + std::to_string(predicted) + " bytes")) << describe(r);
}

TEST(CliRunHostile, BillionRankPlanIsAnErrorNotAHang) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  // The lowering used to spin on 10^9 ranks (ctest's timeout would catch a hang).
  const Result r = run_cli({"run", model, "--plan", R"({"dp_replicate":1000000000})", "--seq-len", "16", "--global-batch",
                        "1000000000", "--steps", "1"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_TRUE(contains(r.err, "--plan")) << describe(r);
  EXPECT_TRUE(contains(r.err, "1000000000 ranks is more than mgt runs")) << describe(r);
  // A mesh whose product overflows int64 is named as such.
  const Result o = run_cli({"run", model, "--plan", R"({"dp_replicate":4611686018427387906,"tp":4})", "--seq-len", "16",
                        "--global-batch", "8", "--steps", "1"});
  EXPECT_EQ(o.exit_code, 2) << describe(o);
  EXPECT_TRUE(contains(o.err, "overflows")) << describe(o);
  // Batch x sequence length beyond int64.
  const Result b = run_cli({"run", model, "--seq-len", "4294967296", "--global-batch", "4294967296", "--steps", "1"});
  EXPECT_EQ(b.exit_code, 2) << describe(b);
}

}  // namespace
}  // namespace mgt_cli_test
