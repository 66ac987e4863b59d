// `mgt-plan run`: lower a plan, execute it step by step on the CPU executor (run_command.hpp).
#include "run_command.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/planner/lower.hpp"
#include "mgt/runtime/data.hpp"
#include "mgt/runtime/executor.hpp"
#include "mgt/runtime/model_state.hpp"
#include "mgt/runtime/mpi_communicator.hpp"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

namespace mgt::cli {

CLI::App* add_run_command(CLI::App& app, RunOptions& o) {
  auto* run = app.add_subcommand("run", "train on this machine's CPUs: the plan's schedule executed instruction by "
                                        "instruction; data-parallel plans under mpirun -np <ranks>");
  run->add_option("model", o.model_path, "model: Hugging Face config.json or mgt.graph/1 JSON")->required();
  run->add_option("--plan", o.plan, "plan as inline JSON or a mgt.plan/1 file (default {})");
  run->add_option("--weights", o.weights, "Hugging Face safetensors (file, index or folder); default: init from --seed");
  run->add_option("--data", o.data, "flat little-endian token file; default: synthetic tokens from --seed");
  run->add_option("--data-dtype", o.data_dtype, "uint16 (default) or uint32");
  run->add_option("--seq-len", o.seq_len, "sequence length S")->required();
  run->add_option("--global-batch", o.global_batch, "sequences per optimizer step G")->required();
  run->add_option("--steps", o.steps, "optimizer steps")->required();
  run->add_option("--seed", o.seed, "seed for parameter init and synthetic data (default 0)");
  run->add_option("--lr", o.lr, "AdamW learning rate (default 1e-3)");
  run->add_option("--beta1", o.beta1, "AdamW beta1 (default 0.9)");
  run->add_option("--beta2", o.beta2, "AdamW beta2 (default 0.999)");
  run->add_option("--eps", o.eps, "AdamW eps (default 1e-8)");
  run->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay on every parameter (default 0.01)");
  run->add_option("--grad-clip", o.grad_clip, "global gradient-norm clipping, 0 = off (default)");
  run->add_option("--log", o.log_path, "write one JSON line per step to this file");
  run->add_option("--cluster", o.cluster, "cluster preset or mgt.cluster/1 file for the lowering (default h100-sxm)");
  return run;
}

int run_training(const RunOptions& o) {
  const auto positive = [](int64_t v, const char* flag) {
    if (v < 1) throw ir::InputError("command line", flag, "must be >= 1, got " + std::to_string(v));
  };
  positive(o.seq_len, "--seq-len");
  positive(o.global_batch, "--global-batch");
  positive(o.steps, "--steps");
  const ir::Graph graph = ir::load_model(o.model_path);
  const rt::ModelNumerics numerics = rt::read_model_numerics(o.model_path);
  const ir::Plan plan = ir::parse_plan_argument(o.plan);
  const int64_t world = ir::world_size(plan);
  if (world == 1) {
    // A one-rank plan under a launcher with several ranks: every rank would train alone. The launcher's
    // environment tells without initialising MPI (Open MPI, PMI / Slurm).
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
      const char* v = std::getenv(var);
      if (v && std::atoll(v) > 1) {
        std::cerr << "error: plan " << ir::to_string(plan) << " runs on one rank but the launcher started " << v
                  << " (" << var << ") (hint: a data-parallel plan such as {\"dp_replicate\":" << v << "})\n";
        return 2;
      }
    }
  }
  if (plan.tp > 1 || plan.cp > 1 || plan.ep > 1 || plan.pp > 1) {
    std::cerr << "error: plan " << ir::to_string(plan)
              << ": the CPU executor runs data parallelism only so far (dp_replicate, dp_shard; tp, cp, ep, pp = 1)\n";
    return 2;
  }
  cost::TrainingSettings settings;
  settings.seq_len = o.seq_len;
  settings.global_batch_tokens = o.global_batch * o.seq_len;
  const ir::ClusterSpec cluster = ir::load_cluster(o.cluster);
  const ir::Schedule schedule = plan::lower_to_schedule(graph, plan, settings, world, cluster);
  // Several ranks: one process per rank under mpirun / srun; the communicator checks the launcher's
  // world size equals the plan's (ir::InputError otherwise). Rank 0 prints and logs.
  std::unique_ptr<rt::MpiCommunicator> comm;
  if (world > 1) comm = std::make_unique<rt::MpiCommunicator>(schedule.mesh);
  const bool lead = !comm || comm->rank() == 0;

  rt::ModelState state(graph);
  if (!o.weights.empty()) {
    const rt::LoadReport report = rt::load_hf_weights(state, o.weights);
    if (!report.unused.empty())
      std::fprintf(stderr, "note: %zu tensor(s) in %s are not parameters of the model (first: %s)\n",
                   report.unused.size(), o.weights.c_str(), report.unused.front().c_str());
  } else {
    rt::init_parameters(state, {.seed = o.seed});
  }
  std::optional<rt::TokenSource> data;
  if (!o.data.empty()) {
    const auto dtype = rt::token_dtype_from_string(o.data_dtype);
    if (!dtype) throw ir::InputError("command line", "--data-dtype", "unknown dtype '" + o.data_dtype + "'", "uint16 or uint32");
    data = rt::TokenSource::open(o.data, *dtype);
  } else {
    data = rt::TokenSource::synthetic(o.seed, graph.info.vocab_size);
  }

  rt::ExecutorOptions options;
  options.numerics = numerics;
  options.adamw = {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay};
  options.grad_clip = o.grad_clip;
  std::ofstream log;
  if (lead && !o.log_path.empty()) {
    log.open(o.log_path, std::ios::trunc);
    if (!log) throw ir::InputError(o.log_path, "--log", "cannot write the log file", "check the directory exists");
  }
  try {
    rt::Executor executor(schedule, graph, state, options, comm.get());
    if (lead)
      std::printf("run: %s, plan %s, %lld parameters, %lld instructions per step, data %s\n", graph.info.name.c_str(),
                ir::to_string(schedule.plan).c_str(), static_cast<long long>(state.table().total_elements),
                static_cast<long long>(executor.program().instructions.size()), data->describe().c_str());
    const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
    for (int64_t k = 0; k < o.steps; ++k) {
      const rt::StepStats s = executor.step(rt::global_batch(*data, k, o.global_batch, o.seq_len));
      const double tps = s.seconds > 0 ? static_cast<double>(s.tokens) / s.seconds : 0.0;
      if (!lead) continue;
      std::printf("step %4lld  loss %.6f  grad_norm %.4f  step_time %.3f s  %.0f tokens/s  peak %.2f MiB (planned %.2f MiB)\n",
                  static_cast<long long>(k), s.loss, s.grad_norm, s.seconds, tps, mib(s.peak_bytes),
                  mib(s.planned_peak_bytes));
      std::fflush(stdout);
      if (log) {
        const nlohmann::json line = {{"step", k},           {"loss", s.loss},          {"grad_norm", s.grad_norm},
                                     {"step_time_s", s.seconds}, {"tokens_per_s", tps}, {"tokens", s.tokens},
                                     {"peak_bytes", s.peak_bytes}, {"planned_peak_bytes", s.planned_peak_bytes}};
        log << line.dump() << "\n";
        log.flush();
      }
    }
  } catch (const ir::InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    if (!comm) {
      std::cerr << "error: " << e.what() << "\n";
      return 2;
    }
    // The other ranks may be waiting in a collective: stop the whole job.
    std::cerr << "error (rank " << comm->rank() << "): " << e.what() << "\n";
    std::cerr.flush();
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return 0;
}

}  // namespace mgt::cli
