// `mgt-plan --version` lists the backends compiled in; `mgt-plan run ... --backend cuda` on a machine
// without a CUDA device (or a build without CUDA) fails with one line and exit status 1
// (docs/runtime_cuda.md); so does `probe --backend cuda`. MGT_CUDA_BUILT and MGT_CUDA_VERSION come from CMake (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs mgt-plan from the repository root with arguments that need no quoting.
Result run(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("mgt_backend_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cmd = std::string("cd ") + MGT_SOURCE_DIR + " && exec " + MGT_CLI_PATH + " " + args + " >" +
                          (dir / "out").string() + " 2>" + (dir / "err").string() + " </dev/null";
  const int status = std::system(cmd.c_str());
  Result r;
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  fs::remove_all(dir);
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Version, ListsTheBackendsCompiledIn) {
  const Result r = run("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0], "mgt-plan 0.1.0");
  if (MGT_CUDA_BUILT) {
    EXPECT_EQ(lines[1].rfind(std::string("backends: cpu, cuda+nccl (CUDA runtime ") + MGT_CUDA_VERSION + ", NCCL ", 0),
              0u)
        << lines[1];
  } else {
    EXPECT_EQ(lines[1], "backends: cpu");
  }
}

TEST(RunBackend, CudaWithoutADeviceIsOneLineAndExit1) {
  const Result r = run("run examples/models/Llama-3.1-8B.json --seq-len 8 --global-batch 2 --steps 1 --backend cuda");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  const std::vector<std::string> lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("mgt-plan: --backend cuda: ", 0), 0u) << lines[0];
  if (!MGT_CUDA_BUILT) {
    EXPECT_NE(lines[0].find("this build has no CUDA backend"), std::string::npos) << lines[0];
  } else if (lines[0].find("device(s) found") == std::string::npos) {
    // No device on this machine: the reason is cudaGetDeviceCount's own message.
    EXPECT_NE(lines[0].find("no CUDA device (cudaGetDeviceCount"), std::string::npos) << lines[0];
  }
}

// mgt-plan-cuda itself (what mgt-plan re-executes with a device): the CUDA kernels are started and fail
// with one line, after the schedule was lowered; fp32 and bf16 modes alike.
TEST(RunBackend, CudaBinaryWithoutADeviceIsOneLineAndExit1) {
  if (!MGT_CUDA_BUILT) GTEST_SKIP() << "built without CUDA: no mgt-plan-cuda";
  const std::string cuda_cli = std::string(MGT_CLI_PATH) + "-cuda";
  for (const char* backend : {"cuda", "cuda-fp32"}) {
    const fs::path dir = fs::temp_directory_path() / ("mgt_backend_test_cuda_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string cmd = std::string("cd ") + MGT_SOURCE_DIR + " && exec " + cuda_cli +
                            " run examples/models/Llama-3.1-8B.json --seq-len 8 --global-batch 2 --steps 1 --backend " +
                            backend + " >" + (dir / "out").string() + " 2>" + (dir / "err").string() + " </dev/null";
    const int status = std::system(cmd.c_str());
    const std::string err = slurp(dir / "err");
    fs::remove_all(dir);
    if (err.find("no CUDA device") == std::string::npos) GTEST_SKIP() << "a CUDA device is present";
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1) << err;
    const std::vector<std::string> lines = lines_of(err);
    ASSERT_EQ(lines.size(), 1u) << err;
    EXPECT_EQ(lines[0].rfind(std::string("mgt-plan: --backend ") + backend + ": no CUDA device (", 0), 0u) << lines[0];
  }
}

TEST(ProbeBackend, CudaWithoutADeviceIsOneLineAndExit1) {
  const Result r = run("probe --backend cuda --quick --out /nonexistent-dir/cluster.json");
  const std::vector<std::string> lines = lines_of(r.err);
  if (MGT_CUDA_BUILT && r.err.find("no CUDA device") == std::string::npos)
    GTEST_SKIP() << "a CUDA device is present: the probe runs (scripts/gpu-check)";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("mgt-plan: --backend cuda: ", 0), 0u) << lines[0];
}

TEST(RunBackend, UnknownBackendIsAnInputError) {
  const Result r = run("run examples/models/Llama-3.1-8B.json --seq-len 8 --global-batch 2 --steps 1 --backend tpu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown backend 'tpu'"), std::string::npos) << r.err;
}

}  // namespace
