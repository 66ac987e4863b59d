// `mgt-plan run`: lower a plan, execute it step by step on the CPU executor, save / resume checkpoints,
// write the measured trace and compare with the simulator (run_command.hpp, docs/runtime_run.md).
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
#include "mgt/runtime/cuda/device.hpp"
#include "mgt/runtime/data.hpp"
#include "mgt/runtime/executor.hpp"
#include "mgt/runtime/model_state.hpp"
#include "mgt/runtime/mpi_communicator.hpp"
#include "mgt/runtime/safetensors.hpp"

#include <mpi.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
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

constexpr const char* kRunFormat = "mgt.run/1";
constexpr const char* kRunFile = "run.json";

std::string number_text(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// ---------------------------------------------------------------------------------------------
// --resume: the run record written beside the checkpoint.

/// Reads `<dir>/run.json` (format mgt.run/1); throws InputError naming the folder or the file.
json read_run_record(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ir::InputError(dir, "--resume", fs::exists(dir, ec) ? "not a folder" : "no such checkpoint folder",
                         "pass a folder written by mgt-plan run --save DIR");
  }
  const std::string path = (fs::path(dir) / kRunFile).string();
  if (!fs::exists(path, ec)) {
    throw ir::InputError(path, "", "missing: the folder was not written by mgt-plan run --save",
                         "resume from a folder --save wrote; to start from its weights alone pass it to --weights");
  }
  json doc = ir::read_json_file(path);
  ir::require_format(doc, kRunFormat, path);
  return doc;
}

/// Settings the run continues with: those given on the command line win, the others come from the
/// record. --seq-len and --global-batch fix the data position (step k reads sequences k*G .. k*G+G-1),
/// so a different value is an error; a different optimizer setting or data source is allowed with a
/// note (the run is then no longer the continuation of an uninterrupted one).
RunOptions apply_run_record(const RunOptions& given, const json& rec, const std::string& path, bool lead) {
  RunOptions o = given;
  const auto is_given = [&](const char* flag) { return given.given.count(flag) > 0; };
  for (const auto& [flag, field, value] : {std::tuple{"--seq-len", "seq_len", &o.seq_len},
                                           std::tuple{"--global-batch", "global_batch", &o.global_batch}}) {
    const int64_t saved = ir::require_positive_int(rec, field, path);
    if (is_given(flag) && *value != saved) {
      throw ir::InputError(path, field,
                           "the checkpoint was trained with " + std::string(flag) + " " + std::to_string(saved) +
                               ", the command line gives " + std::to_string(*value),
                           "drop " + std::string(flag) + " or pass " + flag + " " + std::to_string(saved) +
                               ": the data position of step k depends on it");
    }
    *value = saved;
  }
  const auto note = [&](const std::string& flag, const std::string& now, const std::string& saved) {
    if (lead && now != saved)
      std::fprintf(stderr, "note: %s %s differs from the checkpoint's %s (%s): the run continues with %s\n",
                   flag.c_str(), now.c_str(), saved.c_str(), path.c_str(), now.c_str());
  };
  const auto take_string = [&](const char* flag, const char* field, std::string& value) {
    const std::string saved = ir::require_string(rec, field, path);
    if (is_given(flag)) note(flag, value.empty() ? "(synthetic)" : value, saved.empty() ? "(synthetic)" : saved);
    else value = saved;
  };
  take_string("--data", "data", o.data);
  take_string("--data-dtype", "data_dtype", o.data_dtype);
  if (!rec.contains("seed") || !rec.at("seed").is_number_unsigned())
    throw ir::InputError(path, "seed", "missing or not a non-negative integer", "--save writes it");
  const uint64_t saved_seed = rec.at("seed").get<uint64_t>();
  if (is_given("--seed")) note("--seed", std::to_string(o.seed), std::to_string(saved_seed));
  else o.seed = saved_seed;
  if (!rec.contains("adamw") || !rec.at("adamw").is_object())
    throw ir::InputError(path, "adamw", "missing or not an object", "--save writes it");
  const json& adamw = rec.at("adamw");
  for (const auto& [flag, field, value] :
       {std::tuple{"--lr", "lr", &o.lr}, std::tuple{"--beta1", "beta1", &o.beta1},
        std::tuple{"--beta2", "beta2", &o.beta2}, std::tuple{"--eps", "eps", &o.eps},
        std::tuple{"--weight-decay", "weight_decay", &o.weight_decay}}) {
    if (!adamw.contains(field) || !adamw.at(field).is_number())
      throw ir::InputError(path, std::string("adamw.") + field, "missing or not a number", "--save writes it");
    const double saved = adamw.at(field).get<double>();
    if (is_given(flag)) note(flag, number_text(*value), number_text(saved));
    else *value = saved;
  }
  const double saved_clip = ir::optional_number(rec, "grad_clip", 0.0, path);
  if (is_given("--grad-clip")) note("--grad-clip", number_text(o.grad_clip), number_text(saved_clip));
  else o.grad_clip = saved_clip;
  return o;
}

/// Checks the record against the model about to be trained, then loads the checkpoint.
void load_resume(rt::ModelState& state, const std::string& dir, const json& rec, const std::string& path,
                 const std::string& model_path) {
  const int64_t saved = ir::require_positive_int(rec, "parameters", path);
  const int64_t have = state.table().total_elements;
  if (saved != have) {
    const std::string saved_model = rec.value("model_path", std::string("?"));
    throw ir::InputError(path, "parameters",
                         "the checkpoint holds " + std::to_string(saved) + " parameters of model '" +
                             rec.value("model", std::string("?")) + "' (" + saved_model + "), but " + model_path +
                             " has " + std::to_string(have),
                         "resume with the model the checkpoint was saved from: mgt-plan run " + saved_model +
                             " --resume " + dir + " ...");
  }
  rt::load_checkpoint(state, dir);
  const int64_t record_step = ir::optional_nonnegative_int(rec, "step", state.step, path);
  if (record_step != state.step) {
    throw ir::InputError(path, "step",
                         std::to_string(record_step) + " differs from optimizer.safetensors' step " +
                             std::to_string(state.step),
                         "the folder mixes two checkpoints: save again");
  }
}

// ---------------------------------------------------------------------------------------------
// --save

/// The folder --save writes: a new one, or one that holds a checkpoint (it is replaced whole). Checked
/// before training too, so a bad --save fails before the steps run.
fs::path save_target(const std::string& dir) {
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  if (target.empty() || target.filename() == "." || target.filename() == "..")
    throw ir::InputError(dir, "--save", "not a folder name", "pass a new folder, e.g. --save ckpt");
  std::error_code ec;
  if (fs::exists(target, ec)) {
    if (!fs::is_directory(target, ec))
      throw ir::InputError(dir, "--save", "exists and is not a folder", "pass a new folder name");
    const bool checkpoint = fs::exists(target / kRunFile, ec) || fs::exists(target / "optimizer.safetensors", ec);
    if (!checkpoint && !fs::is_empty(target, ec))
      throw ir::InputError(dir, "--save", "exists and is not a checkpoint folder (--save replaces the folder)",
                           "pass a new folder name, or remove this one first");
  }
  return target;
}

/// save_checkpoint into a staging folder, the run record beside it, then the staging folder renamed
/// over `dir`: a reader sees the old checkpoint or the new one, never a mix.
void write_checkpoint(const rt::ModelState& state, const std::string& dir, const json& record) {
  const fs::path target = save_target(dir);
  std::error_code ec;
  const std::string pid = std::to_string(::getpid());
  const fs::path staging = target.string() + ".partial-" + pid;
  fs::remove_all(staging, ec);
  rt::save_checkpoint(state, staging.string());
  rt::write_file_durably((staging / kRunFile).string(), record.dump(2) + "\n");
  // Trades names with the previous checkpoint in one atomic rename: a crash at any moment leaves
  // `dir` holding the old checkpoint or the new one, whole.
  rt::replace_folder_durably(staging.string(), target.string());
}

// ---------------------------------------------------------------------------------------------
// --trace

/// The simulator's process name (cost_model/src/trace.cpp): name, pinned coordinates, rank count.
std::string program_title(const ir::Program& prog) {
  std::string name = prog.name;
  for (const auto& c : prog.coords) name += " " + c.axis + ":" + std::to_string(c.index);
  return name + " (" + std::to_string(prog.num_ranks) + (prog.num_ranks == 1 ? " rank)" : " ranks)");
}

json instruction_args(const ir::Instruction& instr) {
  json args{{"id", instr.id}};
  if (const auto* c = std::get_if<ir::Compute>(&instr.op)) {
    args["block"] = c->block;
    args["flops"] = c->flops;
    args["bytes"] = c->bytes;
  } else if (const auto* c = std::get_if<ir::Collective>(&instr.op)) {
    args["bytes"] = c->bytes;
    args["group_size"] = c->group_size;
  } else if (const auto* o = std::get_if<ir::OptimizerStep>(&instr.op)) {
    args["bytes"] = o->bytes;
    args["param_elements"] = o->param_elements;
  } else {
    args["bytes"] = ir::moved_bytes(instr);
  }
  return args;
}

/// Chrome trace of one step: process 0 is rank 0's program as measured (one thread per stream, one
/// "X" event per compute, collective, send, recv and optimizer instruction; alloc, free and wait are
/// left out as in the simulator's trace), process 1 the same program as the simulator times it on the
/// cluster (its events and memory counter from cost::to_chrome_trace).
json measured_trace(const ir::Schedule& schedule, size_t program, const std::vector<rt::InstructionTiming>& timeline,
                    const cost::SimulationResult& sim, int64_t step, const std::string& cluster,
                    double measured_step_s) {
  constexpr double kUs = 1e6;
  const ir::Program& prog = schedule.programs.at(program);
  json events = json::array();
  const auto process = [&](int pid, const std::string& name) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
    events.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
  };
  process(0, "measured: " + program_title(prog) + ", rank 0, step " + std::to_string(step));
  for (int s = 0; s < ir::kNumStreams; ++s) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", s},
                      {"args", {{"name", ir::to_string(ir::Stream(s))}}}});
    events.push_back(
        {{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 0}, {"tid", s}, {"args", {{"sort_index", s}}}});
  }
  for (const rt::InstructionTiming& t : timeline) {
    if (t.id < 0 || size_t(t.id) >= prog.instructions.size()) continue;
    const ir::Instruction& instr = prog.instructions[size_t(t.id)];
    if (std::holds_alternative<ir::Alloc>(instr.op) || std::holds_alternative<ir::Free>(instr.op) ||
        std::holds_alternative<ir::Wait>(instr.op))
      continue;
    const double ts = t.start_s * kUs;
    events.push_back({{"name", cost::instruction_label(instr)}, {"cat", ir::to_string(instr.stream)}, {"ph", "X"},
                      {"ts", ts}, {"dur", std::max(0.0, t.end_s * kUs - ts)}, {"pid", 0},
                      {"tid", int(instr.stream)}, {"args", instruction_args(instr)}});
  }
  // The simulated program beside it, as pid 1.
  json simulated = cost::to_chrome_trace(schedule, sim);
  for (json& e : simulated.at("traceEvents")) {
    if (e.value("pid", -1) != int(program)) continue;
    e["pid"] = 1;
    if (e.value("name", "") == "process_name") e["args"]["name"] = "simulated on " + cluster + ": " + program_title(prog);
    if (e.value("name", "") == "process_sort_index") e["args"]["sort_index"] = 1;
    events.push_back(std::move(e));
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"model", schedule.model},
            {"plan", ir::to_string(schedule.plan)},
            {"num_gpus", schedule.num_gpus},
            {"program", prog.name},
            {"step", step},
            {"cluster", cluster},
            {"measured_step_time_s", measured_step_s},
            {"simulated_step_time_s", sim.step_time_s}}}};
}

void write_text(const std::string& path, const std::string& flag, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  if (!out) throw ir::InputError(path, flag, "cannot write the file", "check that the folder exists and is writable");
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunOptions& o) {
  auto* run = app.add_subcommand("run", "train on this machine's CPUs: the plan's schedule executed instruction by "
                                        "instruction; several ranks under mpirun -np <ranks>");
  run->add_option("model", o.model_path, "model: Hugging Face config.json or mgt.graph/1 JSON")->required();
  run->add_option("--plan", o.plan, "plan as inline JSON or a mgt.plan/1 file (default {})");
  run->add_option("--weights", o.weights, "Hugging Face safetensors (file, index or folder); default: init from --seed");
  run->add_option("--data", o.data, "flat little-endian token file; default: synthetic tokens from --seed");
  run->add_option("--data-dtype", o.data_dtype, "uint16 (default) or uint32");
  run->add_option("--seq-len", o.seq_len, "sequence length S (required unless --resume)");
  run->add_option("--global-batch", o.global_batch, "sequences per optimizer step G (required unless --resume)");
  run->add_option("--steps", o.steps, "optimizer steps (with --resume: more steps)")->required();
  run->add_option("--seed", o.seed, "seed for parameter init and synthetic data (default 0)");
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
  const auto positive = [](int64_t v, const char* flag) {
    if (v < 1) throw ir::InputError("command line", flag, "must be >= 1, got " + std::to_string(v));
  };
  const bool resume = !given.resume_dir.empty();
  if (resume && !given.weights.empty()) {
    throw ir::InputError("command line", "--weights",
                         "cannot be combined with --resume (the checkpoint holds the weights)", "drop --weights");
  }
  if (!resume) {
    // Required unless --resume gives them (the parser's own wording).
    if (!given.given.count("--seq-len")) throw CLI::RequiredError("--seq-len");
    if (!given.given.count("--global-batch")) throw CLI::RequiredError("--global-batch");
  }
  positive(given.steps, "--steps");
  if (given.given.count("--seq-len")) positive(given.seq_len, "--seq-len");
  if (given.given.count("--global-batch")) positive(given.global_batch, "--global-batch");

  const ir::Graph graph = ir::load_model(given.model_path);
  const rt::ModelNumerics numerics = rt::read_model_numerics(given.model_path);
  const ir::Plan plan = ir::parse_plan_argument(given.plan);
  const int64_t world = ir::world_size(plan);
  if (world > kMaxGpus)  // 10^9 ranks would hang the lowering, not fail it
    throw ir::InputError("--plan", "dp_replicate*dp_shard*cp*tp*pp",
                         std::to_string(world) + " ranks is more than mgt runs (at most " + std::to_string(kMaxGpus) + ")",
                         "shrink the plan's mesh");
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
  // Before MPI starts, rank 0 of the launcher (if any) is the one that prints notes.
  const char* launcher_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!launcher_rank) launcher_rank = std::getenv("PMI_RANK");
  const bool early_lead = !launcher_rank || std::atoll(launcher_rank) == 0;

  json record;
  std::string record_path;
  if (resume) {
    record = read_run_record(given.resume_dir);
    record_path = (fs::path(given.resume_dir) / kRunFile).string();
  }
  const RunOptions o = resume ? apply_run_record(given, record, record_path, early_lead) : given;
  if (!o.save_dir.empty()) save_target(o.save_dir);

  // The executor throws a clear ir::InputError for a plan it cannot run (docs/runtime_executor.md).
  cost::TrainingSettings settings;
  settings.seq_len = o.seq_len;
  settings.global_batch_tokens = ir::checked_mul(o.global_batch, o.seq_len, "command line", "--global-batch x --seq-len");
  // The CPU backend (and cuda-fp32) compute, store and communicate activations, gradients and
  // gathered parameters in fp32: the schedule's buffer and collective bytes must say so, or the
  // prediction prices half the traffic the ranks move.
  if (o.backend != "cuda") settings.compute_dtype = ir::DType::f32;
  const ir::ClusterSpec cluster = ir::load_cluster(o.cluster);
  const ir::Schedule schedule = plan::lower_to_schedule(graph, plan, settings, world, cluster);
  // Several ranks: one process per rank under mpirun / srun; the communicator checks the launcher's
  // world size equals the plan's (ir::InputError otherwise). Rank 0 prints and logs.
  // --backend cuda: the CUDA kernels and, for several ranks, NCCL (mgt-plan-cuda, cuda_backend.cpp).
  if (!(o.comm_timeout_s >= 0))
    throw ir::InputError("command line", "--comm-timeout", "must be >= 0 seconds", "0 waits forever");
  CudaRun cuda_run;
  std::unique_ptr<rt::Communicator> comm;
  if (cuda) {
    try {
      cuda_run = start_cuda_backend(o.backend, schedule.mesh, o.comm_timeout_s);
    } catch (const ir::InputError&) {
      throw;  // e.g. the launcher's world size differs from the plan's: exit 2 as on the CPU
    } catch (const std::runtime_error& e) {  // no device (CudaError), NCCL / MPI start-up (NcclError, MpiError)
      std::cerr << "mgt-plan: --backend " << o.backend << ": " << e.what() << "\n";
      return 1;
    }
    comm = std::move(cuda_run.comm);
  } else if (world > 1) {
    comm = std::make_unique<rt::MpiCommunicator>(schedule.mesh, rt::MpiOptions{.timeout_s = o.comm_timeout_s});
  }
  const bool lead = !comm || comm->rank() == 0;

  // The model state lives where the kernels read it: host memory, or CUDA managed memory.
  rt::ModelState state(graph, 1, cuda_run.kernels ? cuda_run.kernels->memory() : std::pmr::get_default_resource());
  if (resume) {
    load_resume(state, o.resume_dir, record, record_path, o.model_path);
  } else if (!o.weights.empty()) {
    const rt::LoadReport report = rt::load_hf_weights(state, o.weights);
    if (lead && !report.unused.empty())
      std::fprintf(stderr, "note: %zu tensor(s) in %s are not parameters of the model (first: %s)\n",
                   report.unused.size(), o.weights.c_str(), report.unused.front().c_str());
  } else {
    rt::init_parameters(state, {.seed = o.seed});
  }
  const int64_t first_step = state.step;  // data step k = optimizer steps taken before it
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
  options.record_timeline = !o.trace_path.empty();
  options.kernels = cuda_run.kernels.get();
  std::ofstream log;
  if (lead && !o.log_path.empty()) {
    log.open(o.log_path, std::ios::trunc);
    if (!log) throw ir::InputError(o.log_path, "--log", "cannot write the log file", "check the directory exists");
  }
  try {
    rt::Executor executor(schedule, graph, state, options, comm.get());
    if (lead) {
      std::printf("run: %s, plan %s, %lld parameters, %lld instructions per step, data %s\n", graph.info.name.c_str(),
                  ir::to_string(schedule.plan).c_str(), static_cast<long long>(state.table().total_elements),
                  static_cast<long long>(executor.program().instructions.size()), data->describe().c_str());
      if (cuda) std::printf("kernels: %s\n", cuda_run.kernels->name().c_str());
      if (resume)
        std::printf("resumed from %s at step %lld\n", o.resume_dir.c_str(), static_cast<long long>(first_step));
    }
    const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
    std::vector<double> step_seconds;
    int64_t peak_bytes = 0, planned_peak_bytes = 0;
    std::vector<rt::InstructionTiming> last_timeline;
    for (int64_t k = first_step; k < first_step + o.steps; ++k) {
      rt::StepStats s = executor.step(rt::global_batch(*data, k, o.global_batch, o.seq_len));
      const double tps = s.seconds > 0 ? static_cast<double>(s.tokens) / s.seconds : 0.0;
      step_seconds.push_back(s.seconds);
      peak_bytes = std::max(peak_bytes, s.peak_bytes);
      planned_peak_bytes = std::max(planned_peak_bytes, s.planned_peak_bytes);
      last_timeline = std::move(s.timeline);
      if (!lead) continue;
      std::printf("step %4lld  loss %.6f  grad_norm %.4f  step_time %.3f s  %.0f tokens/s  peak %.2f MiB (planned %.2f MiB)\n",
                  static_cast<long long>(k), s.loss, s.grad_norm, s.seconds, tps, mib(s.peak_bytes),
                  mib(s.planned_peak_bytes));
      std::fflush(stdout);
      if (log) {
        // nlohmann writes doubles in the shortest form that reads back to the same value.
        const json line = {{"step", k},           {"loss", s.loss},          {"grad_norm", s.grad_norm},
                           {"step_time_s", s.seconds}, {"tokens_per_s", tps}, {"tokens", s.tokens},
                           {"peak_bytes", s.peak_bytes}, {"planned_peak_bytes", s.planned_peak_bytes}};
        log << line.dump() << "\n";
        log.flush();
      }
    }
    const int64_t last_step = first_step + o.steps - 1;

    if (!o.save_dir.empty()) {
      executor.synchronize_state();  // collective: the full parameters and moments on every rank
      if (lead) {
        const json rec = {{"format", kRunFormat},
                          {"model", graph.info.name},
                          {"model_path", o.model_path},
                          {"parameters", state.table().total_elements},
                          {"step", state.step},
                          {"seq_len", o.seq_len},
                          {"global_batch", o.global_batch},
                          {"tokens_seen", state.step * o.global_batch * o.seq_len},
                          {"data", o.data},
                          {"data_dtype", o.data_dtype},
                          {"seed", o.seed},
                          {"adamw",
                           {{"lr", o.lr}, {"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps},
                            {"weight_decay", o.weight_decay}}},
                          {"grad_clip", o.grad_clip},
                          {"plan", ir::to_json(schedule.plan)}};
        write_checkpoint(state, o.save_dir, rec);
        std::printf("saved %s: step %lld (resume with --resume %s)\n", o.save_dir.c_str(),
                    static_cast<long long>(state.step), o.save_dir.c_str());
      }
    }

    if (lead) {
      // Predicted: the simulator on the same schedule and cluster. Measured: the mean step time over
      // the steps after the first (warm-up), or the one step; the highest measured peak.
      const cost::Simulator simulator(graph, cluster, settings);
      const cost::SimulationResult sim = simulator.simulate(schedule);
      const size_t program = ir::program_for_rank(schedule, 0).value_or(0);
      const cost::ProgramMemory& pmem = sim.programs.at(program).memory;
      const size_t skip = step_seconds.size() > 1 ? 1 : 0;
      double measured_s = 0.0;
      for (size_t i = skip; i < step_seconds.size(); ++i) measured_s += step_seconds[i];
      measured_s /= static_cast<double>(step_seconds.size() - skip);
      const double time_ratio = sim.step_time_s > 0 ? measured_s / sim.step_time_s : 0.0;
      const double mem_ratio = pmem.peak_bytes > 0 ? double(peak_bytes) / double(pmem.peak_bytes) : 0.0;
      const int64_t mean_from = first_step + static_cast<int64_t>(skip);
      std::printf("predicted vs measured (%s, rank 0 program %s):\n", cluster.name.c_str(),
                  schedule.programs.at(program).name.c_str());
      std::printf("  step time    predicted %.3f ms (of which %.3f ms fixed per-step and per-micro-batch overheads)  "
                  "measured %.3f ms (mean of steps %lld..%lld)  measured/predicted %.3f\n",
                  sim.step_time_s * 1e3, sim.breakdown.overhead_s * 1e3, measured_s * 1e3,
                  static_cast<long long>(mean_from), static_cast<long long>(last_step), time_ratio);
      std::printf("  peak memory  predicted %.2f MiB (schedule; %.2f MiB with runtime overhead)  measured %.2f MiB  "
                  "measured/predicted %.3f\n",
                  mib(pmem.peak_bytes), mib(pmem.peak_reserved_bytes), mib(peak_bytes), mem_ratio);
      if (log) {
        const json summary = {
            {"summary",
             {{"cluster", cluster.name},
              {"program", schedule.programs.at(program).name},
              {"first_step", first_step},
              {"last_step", last_step},
              {"step_time_s",
               {{"predicted", sim.step_time_s},
                {"predicted_overheads", sim.breakdown.overhead_s},
                {"measured", measured_s},
                {"measured_from_step", mean_from},
                {"measured_over_predicted", time_ratio}}},
              {"peak_bytes",
               {{"predicted", pmem.peak_bytes},
                {"predicted_reserved", pmem.peak_reserved_bytes},
                {"measured", peak_bytes},
                {"planned", planned_peak_bytes},
                {"measured_over_predicted", mem_ratio}}}}}};
        log << summary.dump() << "\n";
        log.flush();
      }
      if (!o.trace_path.empty()) {
        const json trace = measured_trace(schedule, program, last_timeline, sim, last_step, cluster.name,
                                          step_seconds.back());
        write_text(o.trace_path, "--trace", trace.dump());
        std::printf("trace: %s (step %lld; open in https://ui.perfetto.dev)\n", o.trace_path.c_str(),
                    static_cast<long long>(last_step));
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
