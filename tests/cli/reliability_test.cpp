// End-to-end tests of "nothing lost, nothing absurd" (docs/hardening.md, "Training runs"): `mgt-plan run`
// refuses absurd hyper-parameters, stops at a non-finite loss without touching the checkpoint, refuses
// NaN weights, a sequence longer than the model's positions, a resume on another architecture or a
// replaced token file, token ids beyond the vocab, a second writer of the same --save folder, and every
// command fails when its standard output or --log cannot be written. On the tiny Llama of run_test.cpp.
#include "cli_util.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <tuple>

namespace {

using namespace mgt_cli_test;

constexpr const char* kTinyLlama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
  "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
  "vocab_size":512,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000.0,
  "tie_word_embeddings":false,"hidden_act":"silu"})";

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> run_flags(const std::string& model, const std::string& seq_len = "16") {
  return {"run", model, "--seq-len", seq_len, "--global-batch", "2"};
}

/// The binary with stdout sent to `stdout_path` (e.g. /dev/full); stderr captured.
Result run_with_stdout(const std::vector<std::string>& args, const std::string& stdout_path) {
  TempDir dir;
  const fs::path err = dir.path / "stderr";
  std::string cmd = "cd " + shell_quote(MGT_SOURCE_DIR) + " && exec " + shell_quote(MGT_CLI_PATH);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(stdout_path) + " 2>" + shell_quote(err.string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  Result r;
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (status != -1 && WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  r.err = slurp(err);
  return r;
}

/// An error that is not a crash: exit 2 and stderr naming every word.
void expect_error(const Result& r, const std::vector<std::string>& words) {
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_FALSE(contains(r.err, "internal error")) << describe(r);
  for (const auto& w : words) EXPECT_TRUE(contains(r.err, w)) << "missing '" << w << "'\n" << describe(r);
}

/// Sets every float of every tensor of a F32 safetensors file with `value(name, index)`.
void rewrite_tensors(const std::string& path, const std::function<float(const std::string&, int64_t)>& value) {
  std::string bytes = slurp(path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[size_t(i)]);
  const json header = json::parse(bytes.substr(8, header_len));
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    ASSERT_EQ(entry.at("dtype"), "F32");
    const int64_t begin = entry.at("data_offsets")[0].get<int64_t>(), end = entry.at("data_offsets")[1].get<int64_t>();
    for (int64_t i = 0; i < (end - begin) / 4; ++i) {
      const float v = value(name, i);
      std::memcpy(&bytes[size_t(8 + int64_t(header_len) + begin + 4 * i)], &v, 4);
    }
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

/// uint16 little-endian tokens.
// Trains `model` one step and saves the checkpoint in d/ckpt, the good state the tests then damage.
void save_one_step(const std::string& model, const TempDir& d) {
  const Result saved = run_cli(concat(run_flags(model), {"--steps", "1", "--save", d.path / "ckpt"}));
  ASSERT_EQ(saved.exit_code, 0) << describe(saved);
}

/// A copy of d/ckpt's weights named `name` in d, every float set by `value(tensor, index)`.
std::string rewritten_weights(const TempDir& d, const std::string& name,
                              const std::function<float(const std::string&, int64_t)>& value) {
  const std::string path = (d.path / name).string();
  fs::copy_file(d.path / "ckpt/model.safetensors", path);
  rewrite_tensors(path, value);
  return path;
}

std::string token_file(const std::vector<uint16_t>& tokens) {
  std::string bytes;
  for (uint16_t t : tokens) {
    bytes.push_back(char(t & 0xff));
    bytes.push_back(char(t >> 8));
  }
  return bytes;
}

/// Holds `<dir>.lock` as another run would (flock, "pid P on host H" inside) until destroyed.
struct HeldLock {
  int fd = -1;
  HeldLock(const std::string& dir, const std::string& holder) {
    fd = ::open((dir + ".lock").c_str(), O_RDWR | O_CREAT, 0644);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    EXPECT_EQ(::write(fd, holder.data(), holder.size()), ssize_t(holder.size()));
  }
  ~HeldLock() { ::close(fd); }
};

// ------------------------------------------------------------------------------------------------
// Item 5: absurd hyper-parameters, non-finite losses, NaN weights

TEST(CliReliability, HyperParametersOutsideTheirRangeNameTheFlagAndTheRange) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"--lr", "nan", "[0, 10]"},          {"--lr", "inf", "[0, 10]"},          {"--lr", "1e308", "[0, 10]"},
      {"--lr", "-1", "[0, 10]"},           {"--eps", "0", "(0, 1]"},            {"--eps", "-1", "(0, 1]"},
      {"--beta1", "2", "[0, 1)"},          {"--beta1", "1", "[0, 1)"},          {"--beta2", "-0.5", "[0, 1)"},
      {"--weight-decay", "nan", "[0, 1]"}, {"--weight-decay", "-100", "[0, 1]"}, {"--grad-clip", "-1", "[0, inf)"},
      {"--grad-clip", "nan", "[0, inf)"}};
  for (const auto& [flag, value, range] : cases)
    expect_bad_input(concat(run_flags(model), {"--steps", "1", flag, value}),
                     {flag, range, "got " + (value == "1e308" ? std::string("1e+308") : value)});
  expect_bad_input(concat(run_flags(model), {"--steps", "1", "--seed", "-1"}), {"--seed", "-1", "[0, 18446744073709551615]"});
  // The edges that are valid still train.
  const Result ok = run_cli(concat(run_flags(model), {"--steps", "1", "--lr", "0", "--beta1", "0", "--beta2", "0",
                                                      "--eps", "1", "--weight-decay", "1", "--grad-clip", "0",
                                                      "--seed", "18446744073709551615"}));
  EXPECT_EQ(ok.exit_code, 0) << describe(ok);
}

/// Weights of 1e15 overflow attention's scores to inf: step 0's loss is NaN. The run stops there with
/// an error naming the step, and the good checkpoint in --save DIR stays as it was.
TEST(CliReliability, NonFiniteLossStopsTheRunAndKeepsTheCheckpoint) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  ASSERT_NO_FATAL_FAILURE(save_one_step(model, d));
  const std::string huge = rewritten_weights(d, "huge.safetensors", [](const std::string&, int64_t) { return 1e15f; });
  const std::string before = slurp(d.path / "ckpt/model.safetensors");

  const Result r = run_cli(concat(run_flags(model), {"--steps", "3", "--weights", huge, "--save", d.path / "ckpt",
                                                     "--log", d.path / "log.jsonl"}));
  expect_error(r, {"step 0: loss ", "not finite", "nothing was saved"});
  EXPECT_FALSE(contains(r.out, "step    1")) << describe(r);  // stopped at step 0
  EXPECT_FALSE(contains(r.out, "saved")) << describe(r);
  EXPECT_EQ(json::parse(slurp(d.path / "ckpt/run.json")).at("step").get<int64_t>(), 1);
  EXPECT_EQ(slurp(d.path / "ckpt/model.safetensors"), before);
  EXPECT_EQ(lines_of(slurp(d.path / "log.jsonl")).size(), 1u);  // step 0, then nothing
}

/// A gradient that overflows while the loss stays finite. One-hot embeddings (token 1 is e_0), every
/// layer weight 0 (each layer adds nothing to the residual), final norm weight 1 except 3e38 on
/// channel 1, and lm_head 0 except row 1, channel 1 = 1: the normed hidden state is (8, 0, ..., 0), so
/// every logit is 0 and the loss is ln(512) exactly; but the loss's gradient on channel 1 of the normed
/// state, -(1 - 1/512) / tokens, comes back through the norm times 3e38 / rms(x) = 3e38 x 8, past
/// float's 3.4e38, on every token: the gradient norm is not finite at step 0, and the run stops there.
TEST(CliReliability, NonFiniteGradientNormWithAFiniteLossStopsTheRunAndKeepsTheCheckpoint) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  ASSERT_NO_FATAL_FAILURE(save_one_step(model, d));
  constexpr int64_t kHidden = 64;
  const std::string weights = rewritten_weights(d, "overflow.safetensors", [](const std::string& name, int64_t i) {
    if (name == "model.embed_tokens.weight") return i % kHidden == 0 ? 1.0f : 0.0f;
    if (name == "model.norm.weight") return i == 1 ? 3e38f : 1.0f;
    if (name == "lm_head.weight") return i == 1 * kHidden + 1 ? 1.0f : 0.0f;
    return 0.0f;
  });
  const std::string before = slurp(d.path / "ckpt/model.safetensors");
  const Result r = run_cli(concat(run_flags(model), {"--steps", "3", "--weights", weights, "--data",
                                                     d.write("ones.bin", token_file(std::vector<uint16_t>(100, 1))),
                                                     "--save", d.path / "ckpt"}));
  expect_error(r, {"step 0: loss ", "grad_norm ", "not finite", "nothing was saved"});
  char loss[64];
  std::snprintf(loss, sizeof loss, "step    0  loss %.6f  grad_norm ", std::log(512.0));
  EXPECT_TRUE(contains(r.out, loss)) << "the loss is finite, ln(512)\n" << describe(r);
  EXPECT_FALSE(contains(r.out, "step    1")) << describe(r);
  EXPECT_EQ(json::parse(slurp(d.path / "ckpt/run.json")).at("step").get<int64_t>(), 1);
  EXPECT_EQ(slurp(d.path / "ckpt/model.safetensors"), before);
}

TEST(CliReliability, NanOrInfWeightsAreRefusedNamingFileAndTensor) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  ASSERT_NO_FATAL_FAILURE(save_one_step(model, d));
  const std::string file = (d.path / "nan.safetensors").string();
  const std::string tensor = "model.layers.1.mlp.up_proj.weight";
  for (const float bad : {std::nanf(""), -INFINITY}) {
    fs::copy_file(d.path / "ckpt/model.safetensors", file, fs::copy_options::overwrite_existing);
    rewrite_tensors(file, [&](const std::string& name, int64_t i) { return name == tensor && i == 5 ? bad : 0.01f; });
    expect_bad_input(concat(run_flags(model), {"--steps", "1", "--weights", file}),
                     {file, tensor, "element 5", std::isnan(bad) ? "is nan" : "is -inf"});
  }
  // The same in a checkpoint: --resume refuses it too.
  rewrite_tensors((d.path / "ckpt/model.safetensors").string(),
                  [&](const std::string& name, int64_t i) { return name == tensor && i == 0 ? INFINITY : 0.01f; });
  expect_bad_input({"run", model, "--resume", d.path / "ckpt", "--steps", "1"}, {"model.safetensors", tensor, "is inf"});
}

// ------------------------------------------------------------------------------------------------
// Item 6: sequence length, another architecture, a replaced token file

TEST(CliReliability, SeqLenAboveMaxPositionEmbeddingsIsRefusedAsEstimateRefusesIt) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  expect_bad_input(concat(run_flags(model, "129"), {"--steps", "1"}),
                   {"--seq-len", "129 exceeds the model's max_position_embeddings 128", "use --seq-len 128 or less"});
  const Result ok = run_cli({"run", model, "--seq-len", "128", "--global-batch", "1", "--steps", "1"});
  EXPECT_EQ(ok.exit_code, 0) << describe(ok);
}

TEST(CliReliability, ResumeOnAnotherArchitectureWithTheSameShapesIsRefusedNamingTheField) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  ASSERT_NO_FATAL_FAILURE(save_one_step(model, d));
  // 8 heads of 8 and 4 kv heads of 8: every weight keeps its shape (q_proj [64, 64], k_proj [32, 64]).
  json heads = json::parse(kTinyLlama);
  heads["num_attention_heads"] = 8;
  heads["num_key_value_heads"] = 4;
  heads["head_dim"] = 8;
  json eps = json::parse(kTinyLlama);
  eps["rms_norm_eps"] = 1e-6;
  json theta = json::parse(kTinyLlama);
  theta["rope_theta"] = 500000.0;
  for (const auto& [name, config, words] :
       std::vector<std::tuple<std::string, json, std::vector<std::string>>>{
           {"heads.json", heads, {"num_attention_heads 4", "has 8"}},
           {"eps.json", eps, {"rms_norm_eps 9.999999747378752e-06", "has 9.999999974752427e-07"}},
           {"theta.json", theta, {"rope_theta 10000", "has 500000"}}}) {
    const std::string other = d.write(name, config.dump());
    std::vector<std::string> must = {(d.path / "ckpt/run.json").string(), other, model};
    must.insert(must.end(), words.begin(), words.end());
    expect_bad_input({"run", other, "--resume", d.path / "ckpt", "--steps", "1"}, must);
  }
  const Result same = run_cli({"run", model, "--resume", d.path / "ckpt", "--steps", "1"});
  EXPECT_EQ(same.exit_code, 0) << describe(same);
}

TEST(CliReliability, TokenFileReplacedUnderTheSamePathIsRefusedOnResume) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  std::vector<uint16_t> tokens(400);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t((i * 37) % 512);
  const std::string data = d.write("tokens.bin", token_file(tokens));
  const auto flags = concat(run_flags(model), {"--data", data});
  const Result saved = run_cli(concat(flags, {"--steps", "2", "--save", d.path / "ckpt"}));
  ASSERT_EQ(saved.exit_code, 0) << describe(saved);
  const json rec = json::parse(slurp(d.path / "ckpt/run.json"));
  EXPECT_EQ(rec.at("data_size_bytes").get<int64_t>(), 800);
  EXPECT_EQ(rec.at("data_checksum").get<std::string>().rfind("mix64:", 0), 0u);

  // One token changed, same size (and the mtime of a copy would say nothing).
  std::vector<uint16_t> changed = tokens;
  changed[200] = 7;
  d.write("tokens.bin", token_file(changed));
  expect_bad_input({"run", model, "--resume", d.path / "ckpt", "--steps", "1"},
                   {data, "--data", "changed since the checkpoint was saved", "800 bytes", rec.at("data_checksum")});
  // Shorter: the sizes differ.
  d.write("tokens.bin", token_file(std::vector<uint16_t>(tokens.begin(), tokens.end() - 10)));
  expect_bad_input({"run", model, "--resume", d.path / "ckpt", "--steps", "1"}, {data, "now 780 bytes", "800 bytes"});
  // The original back: resumes.
  d.write("tokens.bin", token_file(tokens));
  const Result resumed = run_cli({"run", model, "--resume", d.path / "ckpt", "--steps", "1"});
  EXPECT_EQ(resumed.exit_code, 0) << describe(resumed);
}

// ------------------------------------------------------------------------------------------------
// Items 8 and 9: output that cannot be written

TEST(CliReliability, StandardOutputThatCannotBeWrittenFailsEveryCommand) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const std::string plan = R"({"dp_shard":8})";
  const std::vector<std::vector<std::string>> commands = {
      {kLlama8B, "--gpus", "8", "--emit", "deepspeed"},
      {kLlama8B, "--gpus", "8", "--json"},
      {"estimate", kLlama8B, "--gpus", "8", "--plan", plan, "--json"},
      {"compile", kLlama8B, "--gpus", "8", "--plan", plan, "--text"},
      {"simulate", kLlama8B, "--gpus", "8", "--plan", plan, "--json"},
      {"run", model, "--seq-len", "16", "--global-batch", "2", "--steps", "2"},
      {"--help"}};
  for (const auto& args : commands) {
    SCOPED_TRACE(args.front() + " " + args.back());
    // Each one writes fine to a file.
    const std::string out = (d.path / "out.txt").string();
    const Result ok = run_with_stdout(args, out);
    EXPECT_EQ(ok.exit_code, 0) << describe(ok);
    EXPECT_FALSE(slurp(out).empty());
    const Result full = run_with_stdout(args, "/dev/full");
    EXPECT_EQ(full.exit_code, 2) << describe(full);
    EXPECT_TRUE(contains(full.err, "mgt-plan: cannot write to standard output: No space left on device"))
        << describe(full);
  }
}

TEST(CliReliability, LogThatCannotBeWrittenFailsTheRun) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const Result r = run_cli(concat(run_flags(model), {"--steps", "2", "--log", "/dev/full", "--save", d.path / "ckpt"}));
  expect_error(r, {"/dev/full", "--log", "No space left on device"});
  EXPECT_FALSE(contains(r.out, "step    1")) << describe(r);  // stopped at the first line it could not write
  EXPECT_FALSE(fs::exists(d.path / "ckpt"));
}

/// A disk that fills part-way through the run: RLIMIT_FSIZE caps every file the run writes at 1000
/// bytes, with SIGXFSZ ignored so that write(2) fails with EFBIG instead of killing the process (as
/// ENOSPC would on a full disk). Standard output goes to /dev/null, which no file-size limit applies to.
/// The first log lines fit; the one past 1000 bytes fails the run, naming the log.
TEST(CliReliability, LogThatFillsTheDiskPartWayFailsTheRunNamingTheFile) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const std::string log = d.file("log.jsonl");
  constexpr int64_t kFileLimitBytes = 1000;
  const Result r = run_cli(concat(run_flags(model), {"--steps", "40", "--log", log}),
                           {"sh", "-c", "trap '' XFSZ; exec prlimit --fsize=" + std::to_string(kFileLimitBytes) +
                                            " \"$0\" \"$@\" >/dev/null"});
  expect_error(r, {log, "--log", "cannot write the log file", std::strerror(EFBIG)});
  const std::string written = slurp(log);
  EXPECT_LE(int64_t(written.size()), kFileLimitBytes);
  // The lines before the limit are whole, one per step from 0; the run stopped at the line that did not fit.
  const auto lines = lines_of(written.substr(0, written.rfind('\n') + 1));
  ASSERT_GE(lines.size(), 2u) << written;
  EXPECT_LT(lines.size(), 40u) << written;
  for (size_t k = 0; k < lines.size(); ++k) EXPECT_EQ(json::parse(lines[k]).at("step").get<int64_t>(), int64_t(k));
}

// ------------------------------------------------------------------------------------------------
// Items 10 and 13: one writer per --save folder; what failed saves left is cleaned up

TEST(CliReliability, SecondWriterOfASaveFolderIsRefusedNamingTheHolder) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const std::string ckpt = (d.path / "ckpt").string();
  {
    const HeldLock other(ckpt, "pid 4242 on host node7\n");
    const Result r = run_cli(concat(run_flags(model), {"--steps", "1", "--save", ckpt}));
    expect_error(r, {ckpt, "--save", "another run is saving to this folder", ckpt + ".lock",
                     "locked by pid 4242 on host node7"});
    EXPECT_TRUE(r.out.empty()) << describe(r);  // refused before training
    EXPECT_FALSE(fs::exists(ckpt));
  }
  // Released (as when that run ends or dies): the save goes through and removes its lock file.
  const Result r = run_cli(concat(run_flags(model), {"--steps", "1", "--save", ckpt}));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "saved " + ckpt + ": step 1")) << describe(r);
  EXPECT_FALSE(fs::exists(ckpt + ".lock"));
}

/// `mgt-plan args...` started in the background (stdout and stderr to files in `dir`).
struct Background {
  pid_t pid = -1;
  fs::path out, err;
  Background(const std::vector<std::string>& args, const TempDir& dir, const std::string& name)
      : out(dir.path / (name + ".out")), err(dir.path / (name + ".err")) {
    std::string cmd = "cd " + shell_quote(MGT_SOURCE_DIR) + " && exec " + shell_quote(MGT_CLI_PATH);
    for (const auto& a : args) cmd += " " + shell_quote(a);
    cmd += " >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string()) + " </dev/null";
    pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  /// Waits for the exit; the status as run_cli reports it.
  Result wait() {
    int status = 0;
    Result r;
    if (::waitpid(pid, &status, 0) == pid)
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid = -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }
  ~Background() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

/// Two real runs saving to one folder at once: the second is refused naming the first (its pid and
/// host, read from the lock file), and the first saves. The first is frozen (SIGSTOP) once its lock
/// file names it, so that it still holds the lock however long the second takes: no timing guess.
TEST(CliReliability, SecondOfTwoRunsSavingToOneFolderAtOnceIsRefusedAndTheFirstSaves) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const std::string ckpt = d.file("ckpt");
  constexpr int64_t kFirstSteps = 300;
  Background first(concat(run_flags(model), {"--steps", std::to_string(kFirstSteps), "--save", ckpt}), d, "first");
  ASSERT_GT(first.pid, 0);
  char host[256] = "";
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string holder = "pid " + std::to_string(first.pid) + " on host " + host;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!contains(slurp(ckpt + ".lock"), holder + "\n") && std::chrono::steady_clock::now() < deadline &&
         ::waitpid(first.pid, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(contains(slurp(ckpt + ".lock"), holder)) << "the first run never held " << ckpt << ".lock";
  ASSERT_EQ(::kill(first.pid, SIGSTOP), 0);
  ASSERT_EQ(::waitpid(first.pid, nullptr, WNOHANG), 0) << "the first run ended before it could be held";

  const Result second = run_cli(concat(run_flags(model), {"--steps", "1", "--save", ckpt}));
  expect_error(second, {ckpt, "--save", "another run is saving to this folder", "locked by " + holder});
  EXPECT_TRUE(second.out.empty()) << describe(second);  // refused before training

  ASSERT_EQ(::kill(first.pid, SIGCONT), 0);
  const Result r = first.wait();
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "saved " + ckpt + ": step " + std::to_string(kFirstSteps))) << describe(r);
  EXPECT_EQ(json::parse(slurp(ckpt + "/run.json")).at("step").get<int64_t>(), kFirstSteps);
  EXPECT_FALSE(fs::exists(ckpt + ".lock"));
}

TEST(CliReliability, SaveRemovesStagingFoldersThatFailedSavesLeft) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  const std::string ckpt = (d.path / "ckpt").string();
  // What a save killed before its swap leaves (run_test.cpp's KillDuringSave... makes them for real).
  for (const std::string stale : {".partial-123", ".partial-123.tmp-123", ".partial-77"}) {
    fs::create_directories(ckpt + stale);
    std::ofstream(ckpt + stale + "/model.safetensors") << "half";
  }
  // Not staging folders of ckpt: kept.
  for (const std::string keep : {"ckpt.partial-x", "ckpt2.partial-5", "ckpt.old-9"}) fs::create_directories(d.path / keep);
  {
    // While another writer holds the folder, its staging folders are its own: the run is refused
    // and removes nothing.
    const HeldLock other(ckpt, "pid 4242 on host node7\n");
    const Result r = run_cli(concat(run_flags(model), {"--steps", "1", "--save", ckpt}));
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    EXPECT_TRUE(fs::exists(ckpt + ".partial-123"));
  }
  const Result r = run_cli(concat(run_flags(model), {"--steps", "1", "--save", ckpt}));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (const std::string stale : {".partial-123", ".partial-123.tmp-123", ".partial-77"}) {
    EXPECT_FALSE(fs::exists(ckpt + stale)) << stale;
    EXPECT_TRUE(contains(r.err, "note: removed " + ckpt + stale)) << describe(r);
  }
  for (const std::string keep : {"ckpt.partial-x", "ckpt2.partial-5", "ckpt.old-9"}) EXPECT_TRUE(fs::exists(d.path / keep)) << keep;
  EXPECT_EQ(json::parse(slurp(ckpt + "/run.json")).at("step").get<int64_t>(), 1);
}

// ------------------------------------------------------------------------------------------------
// Item 12: token ids beyond the vocab

TEST(CliReliability, TokenIdBeyondTheVocabIsRefusedBeforeTrainingNamingFileAndOffset) {
  TempDir d;
  const std::string model = d.write("config.json", kTinyLlama);
  std::vector<uint16_t> tokens(400, 1);
  tokens[300] = 600;  // vocab 512; step 9 of 32-token steps reads it
  const std::string data = d.write("tokens.bin", token_file(tokens));
  const Result r = run_cli(concat(run_flags(model), {"--data", data, "--steps", "12", "--save", d.path / "ckpt"}));
  expect_error(r, {data, "--data", "token 600 at index 300 (byte offset 600)", "vocab_size 512"});
  EXPECT_FALSE(contains(r.out, "step ")) << describe(r);  // checked before step 0
  EXPECT_FALSE(fs::exists(d.path / "ckpt"));
  // Steps 0..8 end at token 288 (+1): they do not read it, and train.
  const Result ok = run_cli(concat(run_flags(model), {"--data", data, "--steps", "9"}));
  EXPECT_EQ(ok.exit_code, 0) << describe(ok);
  // A file too short for the steps asked is refused up front too, not at the step that runs out.
  const Result short_file = run_cli(concat(run_flags(model), {"--data", data, "--steps", "13"}));
  expect_error(short_file, {data, "--data", "reads 417 tokens from token 0 but the file holds 400"});
  EXPECT_FALSE(contains(short_file.out, "step ")) << describe(short_file);
}

}  // namespace
