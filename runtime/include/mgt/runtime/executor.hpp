// The schedule executor (issue 5): runs one rank's program of an ir::Schedule instruction by
// instruction with the kernels of a KernelBackend (the CPU's by default) on a ModelState. It never re-plans: what the
// schedule asks for and the executor cannot do yet is an error naming the instruction. Semantics,
// op coverage and memory accounting: docs/runtime_executor.md.
//
//   ir::Schedule s = plan::lower_to_schedule(graph, plan, settings, 1, cluster);  // in tools/, not here
//   ModelState state(graph);
//   load_hf_weights(state, "model.safetensors");
//   Executor ex(s, graph, state, {.numerics = read_model_numerics("config.json"), .adamw = {...}});
//   StepStats st = ex.step(global_batch(data, k, G, S));   // st.loss: mean over G*S targets, before the update
//
// Dependency rule: the runtime never links the planner or the cost model; the caller lowers. The
// training loop over an executor is rt::Trainer (trainer.hpp). Sources: runtime/src/executor/.
#pragma once

#include "mgt/ir/graph.hpp"
#include "mgt/ir/schedule.hpp"
#include "mgt/runtime/communicator.hpp"
#include "mgt/runtime/cpu/kernels.hpp"
#include "mgt/runtime/data.hpp"
#include "mgt/runtime/kernel_backend.hpp"
#include "mgt/runtime/model_state.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mgt::rt {

/// Numerics the graph does not carry: norm epsilon and rotary parameters.
struct ModelNumerics {
  float norm_eps = 1e-5f;  ///< rms_norm_eps / layer_norm_eps
  cpu::RopeConfig rope;    ///< rope_theta, rope_scaling (default or llama3)
};

/// Reads them from a Hugging Face config.json (rms_norm_eps, layer_norm_eps / layer_norm_epsilon,
/// rope_theta, rope_scaling with rope_type "default" or "llama3"); an mgt.graph/1 file gives the
/// defaults above. Throws ir::InputError naming the file and field for a rope type the kernels lack
/// (linear, dynamic, yarn, longrope).
ModelNumerics read_model_numerics(const std::string& model_path);

struct ExecutorOptions {
  ModelNumerics numerics;
  cpu::AdamWConfig adamw;   ///< torch.optim.AdamW hyper-parameters (weight decay on every parameter)
  double grad_clip = 0.0;   ///< global-norm clipping before AdamW; 0 = off
  /// Packed documents of this many tokens in every sequence (ir::TrainingSettings::document_tokens):
  /// attention stays within a document and rotary positions restart at each; 0 = one per sequence.
  int64_t document_tokens = 0;
  int64_t rank = 0;         ///< this process's global rank (communicator->rank() when one is given)
  bool record_timeline = false;  ///< fill StepStats::timeline (one entry per instruction)
  /// The kernels and memory to run on; nullptr = the CPU kernels. The ModelState must live in the same
  /// backend's memory (ModelState(graph, 1, kernels->memory())). Must outlive the executor.
  KernelBackend* kernels = nullptr;
};

/// When one instruction ran, in seconds from the start of the step (steady clock).
struct InstructionTiming {
  int64_t id = 0;         ///< ir::Instruction::id in this rank's program
  double start_s = 0.0;
  double end_s = 0.0;
};

/// What one step measured.
struct StepStats {
  double loss = 0.0;        ///< mean cross-entropy over all G*S targets, from the forward (before the update)
  double grad_norm = 0.0;   ///< global L2 norm of the (synchronised) gradients before clipping
  double seconds = 0.0;     ///< wall time of the step (instructions only)
  int64_t tokens = 0;       ///< G*S
  int64_t peak_bytes = 0;   ///< highest real allocation during the step (see MemoryStats)
  int64_t planned_peak_bytes = 0;  ///< highest sum of the schedule's Alloc bytes during the step
  int64_t instructions = 0; ///< instructions executed
  std::vector<InstructionTiming> timeline;  ///< program order; only with ExecutorOptions::record_timeline
};

/// Memory measured from the executor's real allocations: the model-state buffers while the schedule
/// holds them (params, grads, optim), every saved activation, activation gradient, in-flight block
/// boundary tensor and kernel scratch.
struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;          ///< since construction
  int64_t planned_current_bytes = 0;
  int64_t planned_peak_bytes = 0;  ///< the schedule's Alloc bytes, since construction
};

class Executor {
 public:
  /// Picks the program of `options.rank` (program_for_rank; comm->rank() when `comm` is given), checks
  /// it can run it on this ModelState (state.padded_elements() == the table's total: every rank holds
  /// the full layout), and keeps references to all five arguments: they must outlive the executor.
  /// `comm` may be null for a one-rank schedule; a multi-rank schedule needs one over the schedule's
  /// mesh. The process groups come from the schedule alone: degrees and coordinates from its mesh, the
  /// FSDP shard group from the axes its parameter all-gathers name. On the communicator run data
  /// parallelism (DDP bucket all-reduces, FSDP all-gathers / reduce-scatters of block copies, HSDP
  /// shard all-reduces), tensor and sequence parallelism (tp partial sums, sequence gathers / scatters
  /// over tp and cp, the vocab-parallel loss) and pipeline send / recv (docs/runtime_executor.md
  /// "Several ranks"). Throws ir::InputError for what the executor cannot run yet (ep > 1, pp > 1 with
  /// tied parameters, ZeRO-1/2); a collective or transfer it does not implement throws at the
  /// instruction, naming it.
  Executor(const ir::Schedule& schedule, const ir::Graph& graph, ModelState& state, ExecutorOptions options,
           Communicator* comm = nullptr);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Runs the program once: zeroes the gradients, executes every instruction in program order (a
  /// topological order of the deps on every stream), including the OptimizerStep (clip + AdamW,
  /// state.step + 1). `batch` is the global batch (G sequences of S tokens); this rank uses the
  /// sequences of its data-parallel replica, micro-batch m taking rows [m*b, (m+1)*b) of them. With
  /// several replicas the returned loss is the global mean, summed over the replicas by the executor
  /// (an all-reduce that is not a schedule instruction); every rank returns the same value.
  /// Errors (std::runtime_error) name the instruction: "instruction #41 (c0 s:compute #41 compute fwd
  /// loss ...): ...".
  StepStats step(const StepBatch& batch);

  /// Makes the parameters, AdamW moments and step complete and equal on every rank: after a step each
  /// rank keeps current only what it updates (its FSDP shard, its tensor-parallel slices); this
  /// exchanges the rest over the communicator (outside the schedule: for checkpoints, between steps).
  /// Collective: every rank must call it. A no-op on one rank and under plain data parallelism.
  void synchronize_state();

  MemoryStats memory() const;
  /// The program this rank runs.
  const ir::Program& program() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgt::rt
