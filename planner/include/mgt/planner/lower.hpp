// Lowering: a plan and a graph become an ir::Schedule (one program per pipeline stage) that the
// simulator times and the runtime executes. Passes, conventions and their reasons: docs/lowering.md.
//
//   ir::Schedule s = plan::lower_to_schedule(graph, plan, settings, /*num_gpus=*/64, cluster);
//   ir::verify_or_throw(s, "lowering");
#pragma once

#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/layout.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/ir/schedule.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgt::plan {

struct LowerOptions {
#ifdef NDEBUG
  bool verify_each_pass = false;
#else
  bool verify_each_pass = true;  ///< run ir::verify after every pass (debug builds, tests)
#endif
  /// The constants of the simulator that will time the schedule: the pipeline transfer order comes
  /// from a dry run with its per-op times (lower_pipeline.cpp), so the two must agree (a host-bound
  /// layer under one and not the other orders the pp stream for the wrong finish times). Default:
  /// cost::default_cost_params(cluster.gpu), what Simulator uses when given none.
  std::optional<cost::CostParams> params;
};

/// Lowers `plan` (which must pass planner rules) to the schedule of one training step. Its meaning
/// (resolved plan, mesh, groups, pipeline chunks) comes from ir::resolve, whose InputError it
/// throws for a plan that cannot be expressed; the resolved plan is stored in the schedule. With
/// `verify_each_pass`, throws std::logic_error naming the pass when a pass breaks a verifier rule.
ir::Schedule lower_to_schedule(const ir::Graph& graph, const ir::Plan& plan, const ir::TrainingSettings& settings,
                               int64_t num_gpus, const ir::ClusterSpec& cluster, const LowerOptions& options = {});

/// Names of the passes in the order lower_to_schedule runs them.
std::vector<std::string> lowering_pass_names();

// ---- the pass interface (lower.cpp builds the state, lower_passes.cpp holds the passes) ----
namespace lowering {

/// Where an instruction sits in its program before ids are assigned: programs are sorted by key
/// (then by insertion order) when the schedule is materialised. `task` 0 is the prologue, 1..T the
/// pipeline tasks in compute order, T+1 the epilogue; `unit` 0 is before the task's first block
/// copy, 1..U its copies in processing order, U+1 after them; `part` 0 is the copy's prologue, then
/// one part per op (recompute ops first in backward), then the epilogue; `slot` orders what one
/// anchor gets (negative before the compute, positive after); `seq` orders chains (pp).
struct Key {
  int32_t task = 0, unit = 0, part = 0, slot = 0, seq = 0;
  auto operator<=>(const Key&) const = default;
};

/// An instruction under construction; deps and Wait::on hold node handles until materialisation.
struct Node {
  Key key;
  ir::Instruction instr;
};

/// A buffer a pass uses; the memory pass emits its Alloc at `alloc_at` and its Free at `free_at`.
struct BufferUse {
  std::string name;
  int64_t bytes = 0;
  ir::BufferKind kind = ir::BufferKind::activations;
  Key alloc_at, free_at;
  ir::Stream alloc_stream = ir::Stream::compute, free_stream = ir::Stream::compute;
  std::vector<int64_t> alloc_deps; ///< node handles the Alloc waits for (FSDP prefetch issue point)
  std::vector<int64_t> free_deps;  ///< node handles the Free waits for
  bool closed = false;             ///< free_at set
};

/// One op of a block with its per-op cost under the plan's shard context.
struct OpInfo {
  cost::OpCost cost;
  std::vector<ir::Dim> dims;  ///< local sizes of the op's distinct dims
  int64_t fwd_flops = 0, bytes = 0;
  bool is_loss = false, is_attention = false, has_weight_grad = false, selective = false;
};

struct BlockInfo {
  cost::BlockCost cost;
  std::vector<OpInfo> ops;
  int64_t fwd_ws_bytes = 0;       ///< largest forward collective of one copy (0: none)
  int64_t bwd_collective_bytes = 0;
  int64_t recompute_collective_bytes = 0;  ///< forward tp/ep collectives repeated under full recompute
};

/// One copy of a block on a stage.
struct Unit {
  int32_t block = 0;
  int64_t copy = 0;
  bool full_recompute = false;
  int64_t tied_elements = 0;  ///< elements of a tied parameter already held by another copy on the stage
};

struct Task {
  bool fwd = true;
  int32_t chunk = 0;  ///< local chunk index; virtual stage = chunk * pp + stage
  int64_t micro_batch = 0;
};

/// Handles of the compute nodes of one block copy in one task (-1 = none), per op.
struct UnitNodes {
  std::vector<int64_t> fwd, recompute, bwd_data, bwd_weight;
  std::vector<int64_t> collectives;  ///< tp / cp / ep collectives using the copy's workspace
  int64_t first = -1, last = -1;  ///< first and last compute node in stream order
};

struct Stage {
  int64_t index = 0;
  std::vector<std::vector<Unit>> chunks;  ///< per local chunk, copies in forward order
  std::vector<Task> tasks;                ///< compute order (1F1B or interleaved)
  int64_t params = 0, expert = 0, shard_params = 0;  ///< local elements, estimator's terms (trained weights)
  int64_t frozen_bytes = 0;  ///< LoRA / QLoRA: the frozen base held on this rank (params are then the adapters)
  // built by the passes:
  std::vector<Node> nodes;
  std::vector<BufferUse> buffers;
  std::vector<std::vector<UnitNodes>> unit_nodes;  ///< per task, per processed copy
  std::vector<int64_t> compute_order;              ///< compute nodes sorted by key
  std::vector<int64_t> next_compute, prev_compute; ///< per node handle (-1 = none)
  std::vector<int64_t> after_optimizer;            ///< nodes that wait for the optimizer step
};

/// Everything the passes read, computed once (lower.cpp).
struct State {
  const ir::Graph* graph = nullptr;
  const ir::ClusterSpec* cluster = nullptr;
  cost::CostParams params;  ///< per-op times of the pipeline dry run (LowerOptions::params)
  /// The gradient buffers' element size and dtype (cost::CostParams::gradient_bytes: fp32 or bf16).
  int64_t grad_bytes() const { return params.gradient_bytes; }
  ir::DType grad_dtype() const { return params.gradient_bytes == 2 ? ir::DType::bf16 : ir::DType::f32; }
  ir::TrainingSettings settings;
  ir::Layout layout;  ///< the plan's meaning (ir::resolve): resolved plan, grad_accum, zero stage, groups
  cost::ShardContext ctx;
  std::vector<BlockInfo> blocks;
  int64_t boundary_bytes = 0;  ///< what a stage sends the next per micro-batch (a layer's input)
  // groups, as mesh axes (docs/lowering.md "Mesh")
  std::vector<std::string> tp_axes, cp_axes, ep_axes, shard_axes, expert_shard_axes, replicate_axes, dp_axes;
  std::vector<std::string> expert_replicate_axes, expert_dp_axes;  ///< where expert gradients reduce (ir::experts_reduce_apart)
  std::vector<Stage> stages;
  ir::Schedule schedule;  ///< mesh and programs (instructions filled at materialisation)
  std::map<std::vector<std::string>, int64_t> nodes_cache;

  /// Nodes one group over `axes` spans (cluster.gpus_per_node GPUs per node).
  int64_t group_nodes(const std::vector<std::string>& axes);
  ir::Collective collective(ir::CollectiveKind kind, const std::vector<std::string>& axes, int64_t bytes,
                            ir::DType dtype, std::string buffer);
};

/// Appends a node; returns its handle.
int64_t add(Stage& stage, Key key, ir::Stream stream, ir::Payload op, std::vector<int64_t> deps = {});
/// Sorts every stage's nodes into its program (ids assigned, deps remapped).
void materialize(State& state);
/// Recomputes compute_order / next_compute / prev_compute / UnitNodes::first,last.
void index_computes(State& state);

// The passes, in order (docs/lowering.md "Passes").
void compute_pass(State& state);
void recompute_pass(State& state);
void tp_pass(State& state);
void cp_pass(State& state);
void ep_pass(State& state);
void fsdp_pass(State& state);
void dp_pass(State& state);
void zero_pass(State& state);
void pp_pass(State& state);
void optimizer_pass(State& state);
void memory_pass(State& state);

}  // namespace lowering
}  // namespace mgt::plan
