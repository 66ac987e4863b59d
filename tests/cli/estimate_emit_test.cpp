// `mgt-plan estimate ... --plan P --emit X` writes the given plan P, not the search's best, to stdout as the
// framework's file; the estimate goes to stderr.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace {

struct Output {
  int exit_code = -1;
  std::string out;
};

/// Runs mgt-plan from the source root with `arguments` (shell-quoted by the caller); stderr is dropped.
Output run_mgt_plan(const std::string& arguments) {
  const std::string command =
      std::string("cd '") + MGT_SOURCE_DIR + "' && '" + MGT_CLI_PATH + "' " + arguments + " 2>/dev/null";
  Output result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(CliEstimateEmit, WritesTheGivenPlan) {
  // Llama-3.1-8B on 16 GPUs: dp_shard 8 x tp 2, micro-batch 2. The default batch is 512 sequences of
  // 8192 tokens (4M tokens), so grad_accum = 512 / (2 * 8) = 32.
  const std::string plan = "'{\"dp_shard\":8,\"tp\":2,\"micro_batch\":2,\"zero_stage\":2}'";
  const Output ds = run_mgt_plan("estimate examples/models/Llama-3.1-8B.json --gpus 16 --plan " + plan +
                                 " --emit megatron");
  ASSERT_EQ(ds.exit_code, 0) << ds.out;
  EXPECT_NE(ds.out.find("\n  --tensor-model-parallel-size 2\n"), std::string::npos) << ds.out;
  EXPECT_NE(ds.out.find("\n  --micro-batch-size 2\n"), std::string::npos) << ds.out;
  EXPECT_NE(ds.out.find("\n  --global-batch-size 512\n"), std::string::npos) << ds.out;
  EXPECT_NE(ds.out.find("\n  --use-distributed-optimizer\n"), std::string::npos) << ds.out;
  EXPECT_NE(ds.out.find("\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n"), std::string::npos) << ds.out;

  // DeepSpeed cannot express tp: the error, not a different plan.
  const Output bad = run_mgt_plan("estimate examples/models/Llama-3.1-8B.json --gpus 16 --plan " + plan +
                                  " --emit deepspeed");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(bad.out.empty()) << bad.out;

  const Output pure = run_mgt_plan(
      "estimate examples/models/Llama-3.1-8B.json --gpus 16 --plan '{\"dp_shard\":16,\"micro_batch\":1}' --emit deepspeed");
  ASSERT_EQ(pure.exit_code, 0) << pure.out;
  const auto doc = nlohmann::json::parse(pure.out);
  EXPECT_EQ(doc.at("train_micro_batch_size_per_gpu"), 1);
  EXPECT_EQ(doc.at("gradient_accumulation_steps"), 512 / 16);
  EXPECT_EQ(doc.at("zero_optimization").at("stage"), 3);
}

}  // namespace
