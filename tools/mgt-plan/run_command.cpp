// `mgt-plan run`: parse and check the flags, build (lower the plan, start the ranks, load the state,
// open the data, price the schedule with the simulator), then `trainer.train()` (rt::Trainer owns the
// loop, the checkpoint format and the report; run_command.hpp, docs/runtime_run.md).
#include "run_command.hpp"

#include "cuda_run.hpp"
#include "commands.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/simulator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/planner/lower.hpp"
#include "mgt/runtime/data.hpp"
#include "mgt/runtime/executor.hpp"
#include "mgt/runtime/launcher.hpp"
#include "mgt/runtime/model_state.hpp"
#include "mgt/runtime/mpi_communicator.hpp"
#include "mgt/runtime/safetensors.hpp"
#include "mgt/runtime/trainer.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <sstream>
#include <tuple>
#include <variant>

namespace mgt::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string number_text(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// ---------------------------------------------------------------------------------------------
// --resume: the flags continue the checkpoint's run record

/// Settings the run continues with: those given on the command line win, the others come from the
/// record. --seq-len and --global-batch fix the data position (step k reads sequences k*G .. k*G+G-1),
/// so a different value is an error; a different optimizer setting or data source is allowed with a
/// note (the run is then no longer the continuation of an uninterrupted one).
RunOptions apply_run_record(const RunOptions& given, const rt::RunRecord& rec, const std::string& path, bool lead) {
  RunOptions o = given;
  const auto is_given = [&](const char* flag) { return given.given.count(flag) > 0; };
  for (const auto& [flag, field, value, saved] :
       {std::tuple{"--seq-len", "seq_len", &o.seq_len, rec.seq_len},
        std::tuple{"--global-batch", "global_batch", &o.global_batch, rec.global_batch}}) {
    if (is_given(flag) && *value != saved) {
      throw ir::InputError(path, field,
                           "the checkpoint was trained with " + std::string(flag) + " " + std::to_string(saved) +
                               ", the command line gives " + std::to_string(*value),
                           "drop " + std::string(flag) + " or pass " + flag + " " + std::to_string(saved) +
                               ": the data position of step k depends on it");
    }
    *value = saved;
  }
  // Packing changes what the model learns from the same tokens (the attention mask), so a resumed run
  // keeps the checkpoint's documents.
  if (is_given("--document-tokens") && o.document_tokens != rec.document_tokens) {
    throw ir::InputError(path, "document_tokens",
                         "the checkpoint was trained with --document-tokens " + std::to_string(rec.document_tokens) +
                             " (0: unpacked), the command line gives " + std::to_string(o.document_tokens),
                         "drop --document-tokens or pass the checkpoint's");
  }
  o.document_tokens = rec.document_tokens;
  const auto note = [&](const std::string& flag, const std::string& now, const std::string& saved) {
    if (lead && now != saved)
      std::fprintf(stderr, "note: %s %s differs from the checkpoint's %s (%s): the run continues with %s\n",
                   flag.c_str(), now.c_str(), saved.c_str(), path.c_str(), now.c_str());
  };
  const auto take_string = [&](const char* flag, const std::string& saved, std::string& value) {
    if (is_given(flag)) note(flag, value.empty() ? "(synthetic)" : value, saved.empty() ? "(synthetic)" : saved);
    else value = saved;
  };
  take_string("--data", rec.data, o.data);
  take_string("--data-dtype", rec.data_dtype, o.data_dtype);
  if (is_given("--seed")) note("--seed", std::to_string(o.seed), std::to_string(rec.seed));
  else o.seed = rec.seed;
  for (const auto& [flag, value, saved] :
       {std::tuple{"--lr", &o.lr, rec.adamw.lr}, std::tuple{"--beta1", &o.beta1, rec.adamw.beta1},
        std::tuple{"--beta2", &o.beta2, rec.adamw.beta2}, std::tuple{"--eps", &o.eps, rec.adamw.eps},
        std::tuple{"--weight-decay", &o.weight_decay, rec.adamw.weight_decay},
        std::tuple{"--grad-clip", &o.grad_clip, rec.grad_clip}}) {
    if (is_given(flag)) note(flag, number_text(*value), number_text(saved));
    else *value = saved;
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// Build

/// The flags' own checks (before any file is read). --seq-len and --global-batch are required
/// unless --resume gives them (the parser's own wording).
void check_flags(const RunOptions& given) {
  const auto positive = [](int64_t v, const char* flag) {
    if (v < 1) throw ir::InputError("command line", flag, "must be >= 1, got " + std::to_string(v));
  };
  const bool resume = !given.resume_dir.empty();
  if (resume && !given.weights.empty()) {
    throw ir::InputError("command line", "--weights",
                         "cannot be combined with --resume (the checkpoint holds the weights)", "drop --weights");
  }
  if (!resume) {
    if (!given.given.count("--seq-len")) throw CLI::RequiredError("--seq-len");
    if (!given.given.count("--global-batch")) throw CLI::RequiredError("--global-batch");
  }
  positive(given.steps, "--steps");
  if (given.task == "lora" || given.task == "qlora")
    throw ir::InputError("command line", "--task",
                         "the runtime trains every weight; " + given.task + " (frozen base, low-rank adapters) is "
                         "planned, estimated, simulated and exported but not run",
                         "run with --task pretrain or sft, or plan it: mgt-plan MODEL --gpus N --task " + given.task +
                             " --emit axolotl");
  if (given.task != "pretrain" && given.task != "sft" && given.task != "lora" && given.task != "qlora")
    throw ir::InputError("command line", "--task", "unknown task \"" + given.task + "\"", "use pretrain or sft");
  if (given.given.count("--seq-len")) positive(given.seq_len, "--seq-len");
  if (given.given.count("--global-batch")) positive(given.global_batch, "--global-batch");
  if (given.given.count("--document-tokens")) positive(given.document_tokens, "--document-tokens");
  rt::check_optimizer_settings({given.lr, given.beta1, given.beta2, given.eps, given.weight_decay}, given.grad_clip,
                               "command line", /*command_line=*/true);
}

/// The sequence length against the model's max_position_embeddings, worded as estimate and the
/// search word it (commands.cpp): positions past it have no trained rotary / position meaning.
void check_seq_len(int64_t seq_len, const ir::Graph& graph) {
  if (graph.info.max_seq_len > 0 && seq_len > graph.info.max_seq_len)
    throw ir::InputError("--seq-len", "", std::to_string(seq_len) + " exceeds the model's max_position_embeddings " +
                                              std::to_string(graph.info.max_seq_len),
                         "use --seq-len " + std::to_string(graph.info.max_seq_len) + " or less");
}

/// The plan's rank count, checked against mgt's limit and the launcher: a one-rank plan under a
/// launcher with several ranks would train alone on every rank (exit 2 with a hint).
std::optional<int64_t> plan_world(const ir::Plan& plan) {
  const int64_t world = ir::world_size(plan);
  if (world > kMaxGpus)  // 10^9 ranks would hang the lowering, not fail it
    throw ir::InputError("--plan", "dp_replicate*dp_shard*cp*tp*pp",
                         std::to_string(world) + " ranks is more than mgt runs (at most " + std::to_string(kMaxGpus) + ")",
                         "shrink the plan's mesh");
  const rt::LauncherEnvironment env = rt::launcher_environment();
  if (world == 1 && env.world_size > 1) {
    std::cerr << "error: plan " << ir::to_string(plan) << " runs on one rank but the launcher started " << env.world_size
              << " (" << env.world_size_variable << ") (hint: a data-parallel plan such as {\"dp_replicate\":"
              << env.world_size << "})\n";
    return std::nullopt;
  }
  return world;
}

/// The settings the plan is lowered and priced with. The CPU backend (and cuda-fp32) compute, store
/// and communicate activations, gradients and gathered parameters in fp32: the schedule's buffer and
/// collective bytes must say so, or the prediction prices half the traffic the ranks move.
cost::TrainingSettings training_settings(const RunOptions& o) {
  cost::TrainingSettings settings;
  settings.seq_len = o.seq_len;
  settings.global_batch_tokens = ir::checked_mul(o.global_batch, o.seq_len, "command line", "--global-batch x --seq-len");
  settings.document_tokens = o.document_tokens;
  if (o.backend != "cuda") settings.compute_dtype = ir::DType::f32;
  return settings;
}

/// The parameters: from the checkpoint (--resume), Hugging Face weights (--weights) or the seed.
void load_state(rt::ModelState& state, const RunOptions& o, const std::optional<rt::RunRecord>& record, bool lead) {
  if (record) {
    rt::resume_checkpoint(state, o.resume_dir, *record, o.model_path);
  } else if (!o.weights.empty()) {
    const rt::LoadReport report = rt::load_hf_weights(state, o.weights);
    if (lead && !report.unused.empty())
      std::fprintf(stderr, "note: %zu tensor(s) in %s are not parameters of the model (first: %s)\n",
                   report.unused.size(), o.weights.c_str(), report.unused.front().c_str());
  } else {
    rt::init_parameters(state, {.seed = o.seed});
  }
}

rt::TokenSource open_data(const RunOptions& o, const ir::Graph& graph) {
  if (o.data.empty()) return rt::TokenSource::synthetic(o.seed, graph.info.vocab_size);
  const auto dtype = rt::token_dtype_from_string(o.data_dtype);
  if (!dtype) throw ir::InputError("command line", "--data-dtype", "unknown dtype '" + o.data_dtype + "'", "uint16 or uint32");
  return rt::TokenSource::open(o.data, *dtype);
}

/// What the checkpoint's run record says about this run (step and parameter count: the trainer's).
rt::RunRecord run_record(const RunOptions& o, const ir::Graph& graph, const ir::Plan& plan,
                         const std::map<std::string, double>& architecture,
                         const std::optional<rt::FileFingerprint>& data_fingerprint) {
  rt::RunRecord r;
  r.model = graph.info.name;
  r.model_path = o.model_path;
  r.architecture = architecture;
  r.data = o.data;
  if (data_fingerprint) {
    r.data_size_bytes = data_fingerprint->size_bytes;
    r.data_checksum = data_fingerprint->checksum;
  }
  r.data_dtype = o.data_dtype;
  r.seed = o.seed;
  r.adamw = {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay};
  r.grad_clip = o.grad_clip;
  r.document_tokens = o.document_tokens;
  r.plan = plan;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Prediction and --trace

/// The simulator on the same schedule and cluster: the prediction for rank 0's program.
struct Priced {
  cost::SimulationResult sim;
  size_t program = 0;
  rt::Prediction prediction;
};
Priced price(const ir::Graph& graph, const ir::ClusterSpec& cluster, const cost::TrainingSettings& settings,
             const ir::Schedule& schedule) {
  Priced p;
  p.sim = cost::Simulator(graph, cluster, settings).simulate(schedule);
  p.program = ir::program_for_rank(schedule, 0).value_or(0);
  const cost::ProgramMemory& memory = p.sim.programs.at(p.program).memory;
  p.prediction = {.cluster = cluster.name,
                  .program = schedule.programs.at(p.program).name,
                  .step_time_s = p.sim.step_time_s,
                  .overhead_s = p.sim.breakdown.overhead_s,
                  .peak_bytes = memory.peak_bytes,
                  .peak_reserved_bytes = memory.peak_reserved_bytes};
  return p;
}

/// Chrome trace of one step: process 0 is rank 0's program as measured, process 1 the same program as
/// the simulator times it on the cluster. Both are drawn by cost::to_chrome_trace (one thread per
/// stream; compute, collective, send / recv and optimizer events; alloc, free and wait left out), the
/// measured one from the executor's timings as a timeline of that program.
json measured_trace(const ir::Schedule& schedule, const Priced& priced, const rt::TrainReport& report,
                    const std::string& cluster) {
  const size_t program = priced.program;
  const ir::Program& prog = schedule.programs.at(program);
  cost::SimulationResult measured;
  for (const rt::InstructionTiming& t : report.last_timeline) {
    if (t.id < 0 || size_t(t.id) >= prog.instructions.size()) continue;
    const ir::Instruction& instr = prog.instructions[size_t(t.id)];
    if (std::holds_alternative<ir::Alloc>(instr.op) || std::holds_alternative<ir::Free>(instr.op) ||
        std::holds_alternative<ir::Wait>(instr.op))
      continue;
    // A measured zero-length event is still drawn (to_chrome_trace leaves out what took no time).
    measured.timeline.push_back({int64_t(program), instr.stream, t.id, t.start_s, std::max(t.end_s, t.start_s + 1e-12)});
  }
  json events = json::array();
  const auto take = [&](json trace, int pid, const std::string& prefix, const std::string& suffix) {
    for (json& e : trace.at("traceEvents")) {
      if (e.value("pid", -1) != int(program)) continue;
      e["pid"] = pid;
      if (e.value("name", "") == "process_name")
        e["args"]["name"] = prefix + e["args"]["name"].get<std::string>() + suffix;
      if (e.value("name", "") == "process_sort_index") e["args"]["sort_index"] = pid;
      events.push_back(std::move(e));
    }
  };
  take(cost::to_chrome_trace(schedule, measured), 0, "measured: ", ", rank 0, step " + std::to_string(report.last_step));
  take(cost::to_chrome_trace(schedule, priced.sim), 1, "simulated on " + cluster + ": ", "");
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"model", schedule.model},
            {"plan", ir::to_string(schedule.plan)},
            {"num_gpus", schedule.num_gpus},
            {"program", prog.name},
            {"step", report.last_step},
            {"cluster", cluster},
            {"measured_step_time_s", report.step_seconds.empty() ? 0.0 : report.step_seconds.back()},
            {"simulated_step_time_s", priced.sim.step_time_s}}}};
}

void write_text(const std::string& path, const std::string& flag, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  if (!out) throw ir::InputError(path, flag, "cannot write the file", "check that the folder exists and is writable");
}


/// The four fp32 buffers of rt::ModelState; an allocation that fails (Llama-3.1-8B on a CPU: 128 GB)
/// is the documented out-of-memory error, naming the need, not an internal std::bad_alloc.
rt::ModelState allocate_model_state(const ir::Graph& graph, std::pmr::memory_resource* memory) {
  try {
    return rt::ModelState(graph, 1, memory);
  } catch (const std::bad_alloc&) {
    const int64_t params = ir::count_parameters(graph).total;
    throw ir::InputError(graph.info.name, "", "out of memory allocating the model state: " + std::to_string(params) +
                                                  " parameters x 16 bytes (fp32 weights, gradients, AdamW moments) = " +
                                                  std::to_string(params * 16 / (int64_t{1} << 30)) + " GiB",
                         "train a smaller model on this machine, or shard it (--plan with dp_shard under mpirun)");
  }
}

/// The ranks: NCCL with the CUDA kernels (--backend cuda), MPI for several CPU ranks, none for one.
/// The communicator checks the launcher's world size equals the plan's (ir::InputError otherwise).
/// Returns false after printing the error when the CUDA backend cannot start (no device, NCCL / MPI).
bool start_ranks(const RunOptions& o, const ir::Schedule& schedule, CudaRun& cuda_run,
                 std::unique_ptr<rt::Communicator>& comm) {
  // One rank has no communicator to refuse it, so the range is checked here for every run.
  if (!(o.comm_timeout_s >= 0) || o.comm_timeout_s > rt::kMaxCommTimeoutSeconds)
    throw ir::InputError("command line", "--comm-timeout", rt::comm_timeout_range_problem(o.comm_timeout_s),
                         "0 waits forever");
  if (o.backend == "cpu") {
    if (schedule.num_gpus > 1)
      comm = std::make_unique<rt::MpiCommunicator>(schedule.mesh, rt::MpiOptions{.timeout_s = o.comm_timeout_s});
    return true;
  }
  try {
    cuda_run = start_cuda_backend(o.backend, schedule.mesh, o.comm_timeout_s);
  } catch (const ir::InputError&) {
    throw;  // e.g. the launcher's world size differs from the plan's: exit 2 as on the CPU
  } catch (const std::runtime_error& e) {  // no device (CudaError), NCCL / MPI start-up (NcclError, MpiError)
    std::cerr << "mgt-plan: --backend " << o.backend << ": " << e.what() << "\n";
    return false;
  }
  comm = std::move(cuda_run.comm);
  return true;
}

/// Builds the executor and the trainer, trains, and writes --trace. An executor error is exit 2 on one
/// rank; on several, the failing rank prints it and ends the job (the others may wait in a collective).
int train(const RunOptions& o, const ir::Graph& graph, const ir::Schedule& schedule, rt::ModelState& state,
          const rt::TokenSource& data, rt::Communicator* comm, const rt::ExecutorOptions& options,
          const std::optional<Priced>& priced, const rt::RunRecord& record) {
  const bool lead = !comm || comm->rank() == 0;
  rt::KernelBackend* kernels = options.kernels;
  try {
    rt::Executor executor(schedule, graph, state, options, comm);
    if (lead) {
      std::printf("run: %s, plan %s, %lld parameters, %lld instructions per step, data %s\n", graph.info.name.c_str(),
                  ir::to_string(schedule.plan).c_str(), static_cast<long long>(state.table().total_elements),
                  static_cast<long long>(executor.program().instructions.size()), data.describe().c_str());
      if (kernels) std::printf("kernels: %s\n", kernels->name().c_str());
      if (!o.resume_dir.empty())
        std::printf("resumed from %s at step %lld\n", o.resume_dir.c_str(), static_cast<long long>(state.step));
    }
    rt::Trainer trainer(executor, state, data,
                        {.steps = o.steps, .seq_len = o.seq_len, .global_batch = o.global_batch, .log_path = o.log_path,
                         .save_dir = o.save_dir, .record = record,
                         .prediction = priced ? std::optional(priced->prediction) : std::nullopt},
                        comm);
    const rt::TrainReport report = trainer.train();
    if (lead && !o.trace_path.empty()) {
      write_text(o.trace_path, "--trace", measured_trace(schedule, *priced, report, priced->prediction.cluster).dump());
      std::printf("trace: %s (step %lld; open in https://ui.perfetto.dev)\n", o.trace_path.c_str(),
                  static_cast<long long>(report.last_step));
    }
  } catch (const ir::InputError& e) {
    if (!comm) throw;
    // Several ranks: the others may wait in a collective for this one (a log that cannot be written,
    // data that does not fit the model), so the error ends the job as an executor error does.
    std::cerr << "mgt-plan (rank " << comm->rank() << "): " << e.what() << "\n";
    std::cerr.flush();
    rt::abort_job(2);
  } catch (const std::runtime_error& e) {
    if (!comm) {
      std::cerr << "error: " << e.what() << "\n";
      return 2;
    }
    std::cerr << "error (rank " << comm->rank() << "): " << e.what() << "\n";
    std::cerr.flush();
    rt::abort_job(2);
  }
  return 0;
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunOptions& o) {
  auto* run = app.add_subcommand("run", "train on this machine's CPUs: the plan's schedule executed instruction by "
                                        "instruction; several ranks under mpirun -np <ranks>");
  run->add_option("model", o.model_path, "model: Hugging Face config.json or mgt.graph/1 JSON")->required();
  run->add_option("--task", o.task, "pretrain (default) or sft: both train every weight (lora / qlora are refused)");
  run->add_option("--plan", o.plan, "plan as inline JSON or a mgt.plan/1 file (default {})");
  run->add_option("--weights", o.weights, "Hugging Face safetensors (file, index or folder); default: init from --seed");
  run->add_option("--data", o.data, "flat little-endian token file; default: synthetic tokens from --seed");
  run->add_option("--data-dtype", o.data_dtype, "uint16 (default) or uint32");
  run->add_option("--seq-len", o.seq_len, "sequence length S (required unless --resume)");
  run->add_option("--global-batch", o.global_batch, "sequences per optimizer step G (required unless --resume)");
  run->add_option("--document-tokens", o.document_tokens,
                  "packed training: each sequence holds documents of this many tokens; attention stays within a "
                  "document and positions restart (default: one document per sequence; with --resume, the checkpoint's)");
  run->add_option("--steps", o.steps, "optimizer steps (with --resume: more steps)")->required();
  run->add_option("--seed", o.seed, "seed for parameter init and synthetic data (default 0)")
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            // CLI11 reads "-1" into a uint64_t as 2^64 - 1; a seed is a whole number as typed.
            if (!text.empty() && text.size() <= 20 && text.find_first_not_of("0123456789") == std::string::npos &&
                (text.size() < 20 || text <= "18446744073709551615"))
              return {};
            return "must be a whole number in [0, 18446744073709551615], got " + text;
          },
          ""));
  run->add_option("--lr", o.lr, "AdamW learning rate (default 1e-3)");
  run->add_option("--beta1", o.beta1, "AdamW beta1 (default 0.9)");
  run->add_option("--beta2", o.beta2, "AdamW beta2 (default 0.999)");
  run->add_option("--eps", o.eps, "AdamW eps (default 1e-8)");
  run->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay on every parameter (default 0.01)");
  run->add_option("--grad-clip", o.grad_clip, "global gradient-norm clipping, 0 = off (default)");
  run->add_option("--log", o.log_path, "write one JSON line per step and a final {\"summary\": ...} line");
  run->add_option("--cluster", o.cluster,
                  "cluster preset or mgt.cluster/1 file (e.g. from probe) for the lowering and the predicted step "
                  "time (default h100-sxm)");
  run->add_option("--save", o.save_dir, "after the last step, write a checkpoint folder (atomically)");
  run->add_option("--resume", o.resume_dir, "continue from a checkpoint folder --save wrote, for --steps more steps");
  run->add_option("--trace", o.trace_path, "Chrome trace of the last step: measured on rank 0 beside the simulation");
  run->add_option("--backend", o.backend,
                  "cpu (default), cuda (bf16 GEMMs, fp32 master weights) or cuda-fp32 (docs/runtime_cuda.md)");
  run->add_option("--comm-timeout", o.comm_timeout_s,
                  "seconds a rank may wait in one collective or send/recv; past it the job ends with a line naming "
                  "the call and the lost rank (MPI: exit 4; NCCL: communicators aborted); 0 = wait forever "
                  "(default 300)");
  run->final_callback([run, &o] {
    for (const CLI::Option* opt : run->get_options())
      if (opt->count() > 0) o.given.insert(opt->get_name());
  });
  return run;
}

int run_training(const RunOptions& given) {
  const bool cuda = given.backend == "cuda" || given.backend == "cuda-fp32";
  if (!cuda && given.backend != "cpu")
    throw ir::InputError("command line", "--backend", "unknown backend '" + given.backend + "'",
                         "use cpu, cuda (bf16 GEMMs) or cuda-fp32");
  if (cuda && !cuda_backend_linked()) return continue_in_cuda_binary();  // mgt-plan -> mgt-plan-cuda
  check_flags(given);

  const ir::Graph graph = ir::load_model(given.model_path);
  const rt::ModelNumerics numerics = rt::read_model_numerics(given.model_path);
  const ir::Plan plan = ir::parse_plan_argument(given.plan);
  const std::optional<int64_t> world = plan_world(plan);
  if (!world) return 2;
  // --resume: the checkpoint's run record fills the flags not given. Before MPI starts, rank 0 of the
  // launcher (if any) is the one that prints notes.
  std::optional<rt::RunRecord> record;
  if (!given.resume_dir.empty()) record = rt::read_run_record(given.resume_dir);
  const std::string record_path = (fs::path(given.resume_dir) / rt::kRunFile).string();
  const bool launcher_lead = rt::launcher_environment().rank == 0;
  const RunOptions o = record ? apply_run_record(given, *record, record_path, launcher_lead) : given;
  check_seq_len(o.seq_len, graph);
  if (o.document_tokens > o.seq_len)
    throw ir::InputError("command line", "--document-tokens",
                         std::to_string(o.document_tokens) + " is longer than a sequence (--seq-len " + std::to_string(o.seq_len) + ")",
                         "give documents of at most --seq-len tokens, or leave the flag out (one document per sequence)");
  const std::map<std::string, double> architecture = rt::model_architecture(graph, numerics);
  // The lead holds the save folder's lock from here to the end, so a second run saving there is
  // refused now, not after training (before MPI starts: the other ranks end with it).
  std::optional<rt::CheckpointLock> save_lock;
  if (!o.save_dir.empty()) {
    rt::checked_save_folder(o.save_dir);
    if (launcher_lead) save_lock.emplace(o.save_dir);
  }
  // The token file's fingerprint: compared with the checkpoint's when resuming on the same path,
  // recorded beside the new checkpoint. One read of the file, by the lead only.
  std::optional<rt::FileFingerprint> data_fingerprint;
  const bool compare = record && !o.data.empty() && o.data == record->data && !record->data_checksum.empty();
  if (launcher_lead && !o.data.empty() && (compare || !o.save_dir.empty())) {
    data_fingerprint = rt::fingerprint_file(o.data);
    if (compare) rt::check_same_data(*record, *data_fingerprint, o.data, o.resume_dir);
  }

  const cost::TrainingSettings settings = training_settings(o);
  const ir::ClusterSpec cluster = ir::load_cluster(o.cluster);
  const ir::Schedule schedule = plan::lower_to_schedule(graph, plan, settings, *world, cluster);
  CudaRun cuda_run;
  std::unique_ptr<rt::Communicator> comm;
  if (!start_ranks(o, schedule, cuda_run, comm)) return 1;
  const bool lead = !comm || comm->rank() == 0;
  // The model state lives where the kernels read it: host memory, or CUDA managed memory.
  rt::ModelState state = allocate_model_state(graph, cuda_run.kernels ? cuda_run.kernels->memory() : std::pmr::get_default_resource());
  load_state(state, o, record, lead);
  // After the parameter count (resume_checkpoint), which names another model better than its fields.
  if (record) rt::check_same_architecture(*record, architecture, o.resume_dir, o.model_path);
  const rt::TokenSource data = open_data(o, graph);
  std::optional<Priced> priced;  // the simulator's prediction, reported by the lead rank
  if (lead) priced = price(graph, cluster, settings, schedule);
  rt::ExecutorOptions options;
  options.numerics = numerics;
  options.adamw = {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay};
  options.grad_clip = o.grad_clip;
  options.document_tokens = o.document_tokens;
  options.record_timeline = !o.trace_path.empty();
  options.kernels = cuda_run.kernels.get();
  return train(o, graph, schedule, state, data, comm.get(), options, priced,
               run_record(o, graph, schedule.plan, architecture, data_fingerprint));
}

}  // namespace mgt::cli
