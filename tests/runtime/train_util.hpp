// A short single-rank training run of a model config under a plan, shared by the tests that compare a
// kernel backend's losses and gradient norms with the CPU executor's (kernel_backend_test.cpp, and the
// CUDA tests in tests/runtime_cuda).
#pragma once

#include "mgt/runtime/executor.hpp"
#include "mgt/runtime/kernel_backend.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/planner/lower.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory_resource>
#include <string>
#include <vector>

namespace mgt::rt::test {

struct TinyRun {
  int64_t seq_len = 16;
  int64_t batch_seqs = 4;  ///< sequences per step (global batch)
  int64_t steps = 3;
  uint64_t init_seed = 3;  ///< init_parameters
  uint64_t data_seed = 5;  ///< synthetic tokens
  int64_t data_vocab = 512;
  bool backend_memory = true;  ///< parameters in kernels->memory() (else the default resource)
  int64_t document_tokens = 0;  ///< packed documents per sequence (0: one per sequence)
};

/// The StepStats of `run.steps` AdamW steps (grad clip 1.0, the config's numerics) of a fresh model on
/// `kernels` (nullptr: the CPU executor's own), one rank, the plan lowered for one GPU of h100-sxm.
inline std::vector<StepStats> train_tiny(const std::string& config, const std::string& plan_json, KernelBackend* kernels,
                                         const TinyRun& run) {
  const ir::Graph graph = ir::load_model(config);
  cost::TrainingSettings settings;
  settings.seq_len = run.seq_len;
  settings.global_batch_tokens = run.batch_seqs * run.seq_len;
  settings.document_tokens = run.document_tokens;
  const ir::Schedule schedule = plan::lower_to_schedule(
      graph, ir::plan_from_json(ir::parse_json_text(plan_json, "p"), "p"), settings, 1, ir::cluster_preset("h100-sxm"));
  ModelState state(graph, 1,
                   kernels && run.backend_memory ? kernels->memory() : std::pmr::get_default_resource());
  init_parameters(state, {.seed = run.init_seed});
  ExecutorOptions options;
  options.numerics = read_model_numerics(config);
  options.grad_clip = 1.0;
  options.kernels = kernels;
  options.document_tokens = run.document_tokens;
  Executor executor(schedule, graph, state, options);
  const TokenSource data = TokenSource::synthetic(run.data_seed, run.data_vocab);
  std::vector<StepStats> stats;
  for (int64_t k = 0; k < run.steps; ++k) stats.push_back(executor.step(global_batch(data, k, run.batch_seqs, run.seq_len)));
  return stats;
}

}  // namespace mgt::rt::test
