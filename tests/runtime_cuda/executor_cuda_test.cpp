// The executor on the CUDA kernels against the same executor on the CPU kernels (issue 6 acceptance):
// a tiny Llama, 3 AdamW steps, the fp32 CUDA mode within 1e-4 relative of the CPU losses and the
// bf16 mode (bf16 GEMM operands, fp32 accumulation and master weights) within 1e-2. Skips without a
// CUDA device.
#include "mgt/runtime/cuda/device.hpp"
#include "mgt/runtime/cuda/kernel_backend.hpp"
#include "mgt/runtime/executor.hpp"

#include "../runtime/train_util.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/planner/lower.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace mgt::rt {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTinyLlama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
  "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
  "vocab_size":512,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000.0,
  "tie_word_embeddings":false,"hidden_act":"silu"})";

std::vector<double> train(const std::string& config, const std::string& plan_json, KernelBackend* kernels) {
  std::vector<double> losses;
  for (const StepStats& s : test::train_tiny(config, plan_json, kernels, {.seq_len = 32, .batch_seqs = 4, .steps = 3,
                                                                          .init_seed = 11, .data_seed = 13}))
    losses.push_back(s.loss);
  return losses;
}

void compare(cuda::Precision precision, double tolerance) {
  const cuda::DeviceCount n = cuda::device_count();
  if (n.count == 0) GTEST_SKIP() << "no CUDA device: " << n.reason;
  const fs::path config = fs::temp_directory_path() / ("mgt_executor_cuda_" + std::to_string(::getpid()) + ".json");
  std::ofstream(config) << kTinyLlama;
  for (const char* plan : {R"({})", R"({"micro_batch":2,"recompute":"full"})"}) {
    const std::vector<double> want = train(config.string(), plan, nullptr);
    auto kernels = cuda::make_kernel_backend(precision);
    const std::vector<double> got = train(config.string(), plan, kernels.get());
    for (size_t k = 0; k < want.size(); ++k) {
      const double rel = std::fabs(got[k] - want[k]) / std::fabs(want[k]);
      std::printf("[ loss ] %s plan %s step %zu: cuda %.9f cpu %.9f rel %.2e\n", kernels->name().c_str(), plan, k,
                  got[k], want[k], rel);
      EXPECT_LE(rel, tolerance) << plan << " step " << k;
    }
  }
  fs::remove(config);
}

TEST(ExecutorCuda, Fp32LossesWithin1em4OfTheCpu) { compare(cuda::Precision::fp32, 1e-4); }
TEST(ExecutorCuda, Bf16LossesWithin1em2OfTheCpu) { compare(cuda::Precision::bf16, 1e-2); }

}  // namespace
}  // namespace mgt::rt
