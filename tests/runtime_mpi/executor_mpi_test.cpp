// The schedule executor on several ranks (issue 5's cross-plan acceptance test): a tiny Llama (2
// layers, hidden 64, 4 heads, 2 KV heads, vocab 512, seq 32) initialised from a seed, synthetic
// tokens, global batch 4, 3 AdamW steps with gradient clipping. Under every plan the losses must
// equal the one-rank {} losses (computed in the same program on rank 0) within 1e-5 relative, and
// every rank must report the same (global mean) loss. mpirun -np 2: DDP, FSDP, TP with and without
// SP, CP, PP (1F1B), TP + selective and CP + full recompute; -np 4: DDP, FSDP, HSDP, TP x CP, FSDP x
// TP, DDP x CP, PP x FSDP, TP x CP + full recompute; -np 8: FSDP x TP x CP and PP x TP x DDP.
// Each plan runs a second time with the schedule's plan replaced by {"dp_replicate": ranks} (micro_batch
// and grad_accum kept): the losses must not change (the executor reads its groups from the mesh and the collectives).
// MGT_EXECUTOR_PLANS='<plan json>' runs just that plan (debugging). Exits 1 on any failed check.
#include "mgt/runtime/executor.hpp"
#include "mgt/runtime/mpi_communicator.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/planner/lower.hpp"
#include "mgt/runtime/data.hpp"
#include "mgt/runtime/model_state.hpp"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using namespace mgt;

constexpr int64_t kSeqLen = 32, kGlobalBatch = 4, kSteps = 3;
int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  }
}

std::string write_config(int rank) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("mgt_executor_mpi_" + std::to_string(::getpid()) + "_" + std::to_string(rank) + ".json");
  std::ofstream(path) << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
    "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
    "vocab_size":512,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000.0,
    "tie_word_embeddings":false,"hidden_act":"silu"})";
  return path.string();
}

/// `blind_plan`: the schedule's plan keeps only micro_batch and grad_accum and claims every rank is a
/// dp_replicate replica (no tp, cp, pp, sequence parallelism or ZeRO stage), so the executor can find
/// its process groups only from the mesh and the collectives (the schedule is the only contract).
std::vector<double> train(const std::string& config, const std::string& plan_json, int64_t num_gpus, bool with_mpi,
                          bool blind_plan = false) {
  const ir::Graph graph = ir::load_model(config);
  const ir::Plan plan = ir::plan_from_json(ir::parse_json_text(plan_json, "--plan"), "--plan");
  cost::TrainingSettings settings;
  settings.seq_len = kSeqLen;
  settings.global_batch_tokens = kGlobalBatch * kSeqLen;
  ir::Schedule schedule = plan::lower_to_schedule(graph, plan, settings, num_gpus, ir::cluster_preset("h100-sxm"));
  if (blind_plan) {
    ir::Plan kept;
    kept.dp_replicate = num_gpus;  // the verifier checks the world size only
    kept.micro_batch = schedule.plan.micro_batch;
    kept.grad_accum = schedule.plan.grad_accum;
    schedule.plan = kept;
  }
  rt::ModelState state(graph);
  rt::init_parameters(state, {.seed = 7});
  rt::ExecutorOptions options;
  options.numerics = rt::read_model_numerics(config);
  options.adamw.lr = 1e-2;  // large steps: a missing gradient sync moves step 1's loss by > 1e-4
  options.grad_clip = 0.5;  // exercises the global gradient norm
  std::unique_ptr<rt::MpiCommunicator> comm;
  if (with_mpi) comm = std::make_unique<rt::MpiCommunicator>(schedule.mesh);
  rt::Executor executor(schedule, graph, state, options, comm.get());
  const rt::TokenSource data = rt::TokenSource::synthetic(7, graph.info.vocab_size);
  std::vector<double> losses;
  for (int64_t k = 0; k < kSteps; ++k) losses.push_back(executor.step(rt::global_batch(data, k, kGlobalBatch, kSeqLen)).loss);
  check(state.step == kSteps, plan_json + ": state.step");
  return losses;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);  // this program finalises MPI; the communicators leave it alone
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  try {
    if (world != 2 && world != 4 && world != 8)
      throw std::runtime_error("run under mpirun -np 2, 4 or 8 (world size is " + std::to_string(world) + ")");
    std::vector<std::string> plans;
    if (const char* only = std::getenv("MGT_EXECUTOR_PLANS")) {  // debugging: one plan per run
      plans = {only};
    } else if (world == 2) {
      plans = {R"({"dp_replicate":2})", R"({"dp_shard":2})", R"({"tp":2,"sequence_parallel":true})",
               R"({"tp":2,"sequence_parallel":false})", R"({"cp":2})", R"({"pp":2,"micro_batch":2})",
               R"({"tp":2,"recompute":"selective"})", R"({"cp":2,"recompute":"full"})"};
    } else if (world == 4) {
      plans = {R"({"dp_replicate":4})", R"({"dp_shard":4})", R"({"dp_replicate":2,"dp_shard":2})",
               R"({"tp":2,"cp":2})", R"({"dp_shard":2,"tp":2})", R"({"dp_replicate":2,"cp":2})",
               R"({"pp":2,"dp_shard":2,"micro_batch":1})", R"({"tp":2,"cp":2,"recompute":"full","micro_batch":1})"};
    } else {
      plans = {R"({"dp_shard":2,"tp":2,"cp":2})", R"({"pp":2,"tp":2,"dp_replicate":2,"micro_batch":1})"};
    }
    const std::string config = write_config(rank);
    std::vector<double> one_rank(kSteps, 0.0);
    if (rank == 0) one_rank = train(config, "{}", 1, /*with_mpi=*/false);
    MPI_Bcast(one_rank.data(), static_cast<int>(kSteps), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (const std::string& plan : plans) {
      const std::vector<double> losses = train(config, plan, world, /*with_mpi=*/true);
      const std::vector<double> blind = train(config, plan, world, /*with_mpi=*/true, /*blind_plan=*/true);
      check(blind == losses, plan + " rank " + std::to_string(rank) +
                                 ": the losses change when the schedule's plan hides the degrees");
      std::vector<double> rank0 = losses;
      MPI_Bcast(rank0.data(), static_cast<int>(kSteps), MPI_DOUBLE, 0, MPI_COMM_WORLD);
      for (int64_t k = 0; k < kSteps; ++k) {
        const double rel = std::abs(losses[k] - one_rank[k]) / std::abs(one_rank[k]);
        if (rank == 0)
          std::printf("[ loss ] plan %-32s step %lld: %.9f  one rank %.9f  rel %.2e\n", plan.c_str(),
                      static_cast<long long>(k), losses[k], one_rank[k], rel);
        check(rel <= 1e-5, plan + " step " + std::to_string(k) + " rank " + std::to_string(rank) +
                               ": loss differs from one rank");
        check(losses[k] == rank0[k], plan + " step " + std::to_string(k) + ": rank " +
                                         std::to_string(rank) + " reports a different loss than rank 0");
      }
    }
    std::filesystem::remove(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int local = failures, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf(total == 0 ? "executor_mpi_test: all checks passed\n" : "executor_mpi_test: %d failed checks\n", total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
