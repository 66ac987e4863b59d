// Shared by the mgt-plan end-to-end tests (tests/cli/*_test.cpp): run the binary with cwd = the
// repository root, stdout and stderr to temp files, and the checks every document shares.
#pragma once

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
#include <sstream>
#include <string>
#include <vector>


namespace mgt_cli_test {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kLlama8B = "examples/models/Llama-3.1-8B.json";
constexpr int64_t kH100Hbm = 85899345920;  // 80 GiB

struct Result {
  int exit_code = -1;  ///< the exit status, or 128 + signal when the process was killed by one
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A temp directory removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("mgt_cli_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

/// Runs `launcher... mgt-plan args...` (launcher: e.g. mpirun and its flags; none by default).
inline Result run_cli(const std::vector<std::string>& args, const std::vector<std::string>& launcher = {}) {
  TempDir dir;
  const fs::path out = dir.path / "stdout", err = dir.path / "stderr";
  std::string cmd = "cd " + shell_quote(MGT_SOURCE_DIR) + " && exec";
  for (const auto& a : launcher) cmd += " " + shell_quote(a);
  cmd += " " + shell_quote(MGT_CLI_PATH);
  for (const auto& a : args) {
    cmd += ' ';
    cmd += shell_quote(a);
  }
  cmd += " >";
  cmd += shell_quote(out.string());
  cmd += " 2>";
  cmd += shell_quote(err.string());
  cmd += " </dev/null";
  const int status = std::system(cmd.c_str());
  Result r;
  if (status == -1) {
    r.exit_code = -1;
  } else if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

inline std::string describe(const Result& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout (first 2000 chars):\n" + r.out.substr(0, 2000) +
         "\n--- stderr:\n" + r.err;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline json parse_json_or_fail(const Result& r) {
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << describe(r);
    return json();
  }
}

/// The plan's one-line form as ir::to_string(Plan) writes it.
inline std::string plan_line(const json& p) {
  const int64_t tp = p.at("tp").get<int64_t>();
  std::string s = "dp_replicate=" + std::to_string(p.at("dp_replicate").get<int64_t>()) +
                  " dp_shard=" + std::to_string(p.at("dp_shard").get<int64_t>()) + " tp=" + std::to_string(tp) +
                  (p.at("sequence_parallel").get<bool>() ? "(sp)" : "") +
                  " cp=" + std::to_string(p.at("cp").get<int64_t>());
  for (const char* axis : {"pp", "vpp", "ep"})
    if (p.value(axis, int64_t(1)) > 1) s += std::string(" ") + axis + "=" + std::to_string(p.at(axis).get<int64_t>());
  s += " mbs=" + std::to_string(p.at("micro_batch").get<int64_t>());
  if (p.contains("grad_accum")) s += " ga=" + std::to_string(p.at("grad_accum").get<int64_t>());
  return s + " recompute=" + p.at("recompute").get<std::string>();
}

/// Checks that `obj` has `key` and that its value passes `is_type` (a json::is_* member);
/// `type_name` ("an integer") words the failure.
inline void expect_key_of_type(const json& obj, const std::string& key, bool (json::*is_type)() const noexcept,
                               const char* type_name) {
  ASSERT_TRUE(obj.contains(key)) << "missing key " << key << " in " << obj.dump();
  EXPECT_TRUE((obj.at(key).*is_type)()) << key << " is not " << type_name << ": " << obj.at(key).dump();
}
/// Checks that the values of these keys are of these JSON types.
inline void expect_int(const json& obj, const std::string& key) {
  expect_key_of_type(obj, key, &json::is_number_integer, "an integer");
}
inline void expect_number(const json& obj, const std::string& key) {
  expect_key_of_type(obj, key, &json::is_number, "a number");
}
inline void expect_string(const json& obj, const std::string& key) {
  expect_key_of_type(obj, key, &json::is_string, "a string");
}
inline void expect_object(const json& obj, const std::string& key) {
  expect_key_of_type(obj, key, &json::is_object, "an object");
}

/// Checks one plan entry (as in mgt.plans/1 "plans" and as `estimate --json` prints it).
inline void check_plan_entry(const json& entry) {
  expect_int(entry, "rank");
  expect_object(entry, "plan");
  expect_object(entry, "memory");
  expect_number(entry, "step_time_s");
  expect_number(entry, "tokens_per_s_per_gpu");
  expect_number(entry, "mfu");
  expect_string(entry, "bottleneck");
  if (::testing::Test::HasFatalFailure()) return;
  const json& plan = entry.at("plan");
  for (const char* k : {"dp_replicate", "dp_shard", "tp", "cp", "pp", "vpp", "ep", "micro_batch", "grad_accum",
                        "zero_stage"})
    expect_int(plan, k);
  expect_string(plan, "recompute");
  ASSERT_TRUE(plan.contains("sequence_parallel"));
  EXPECT_TRUE(plan.at("sequence_parallel").is_boolean());
  const json& memory = entry.at("memory");
  for (const char* k : {"peak_bytes", "hbm_bytes", "headroom_bytes", "parameters_bytes", "gradients_bytes",
                        "optimizer_bytes", "fsdp_buffers_bytes", "activations_bytes", "transient_bytes",
                        "overhead_bytes"})
    expect_int(memory, k);
  if (::testing::Test::HasFailure()) return;
  EXPECT_GT(memory.at("peak_bytes").get<int64_t>(), 0);
  EXPECT_EQ(memory.at("headroom_bytes").get<int64_t>(),
            memory.at("hbm_bytes").get<int64_t>() - memory.at("peak_bytes").get<int64_t>());
  EXPECT_GT(entry.at("step_time_s").get<double>(), 0);
  EXPECT_GT(entry.at("tokens_per_s_per_gpu").get<double>(), 0);
  EXPECT_GT(entry.at("mfu").get<double>(), 0);
  EXPECT_LT(entry.at("mfu").get<double>(), 1);
}

/// Bad input: exit 2 and exactly one stderr line, starting "mgt-plan: ", naming every word of `must_mention`.
inline void expect_bad_input(const std::vector<std::string>& args, const std::vector<std::string>& must_mention) {
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  SCOPED_TRACE("mgt-plan " + joined);
  const Result r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  const auto lines = lines_of(r.err);
  EXPECT_EQ(lines.size(), 1u) << "one stderr line expected\n" << describe(r);
  EXPECT_TRUE(r.err.rfind("mgt-plan: ", 0) == 0) << describe(r);
  EXPECT_FALSE(contains(r.err, "internal error")) << describe(r);
  for (const auto& word : must_mention) EXPECT_TRUE(contains(r.err, word)) << "missing \"" << word << "\"\n" << describe(r);
  EXPECT_TRUE(r.out.empty()) << "nothing on stdout for bad input\n" << describe(r);
}

inline json llama_config() { return json::parse(slurp(fs::path(MGT_SOURCE_DIR) / kLlama8B)); }

}  // namespace mgt_cli_test
