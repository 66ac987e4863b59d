// Role-less sharding plans (`mgt.spmd_plan/1`) for graphs without named dims, such as graphs imported
// from MLIR: each mesh axis splits one dim of one block input (the activation "x" or a parameter);
// shardings propagate through the ops by their einsum letters (DESIGN.md "The IR": a split
// contracted dim leaves a partial sum that an all-reduce finishes). `lower_spmd` is mgt's own
// lowering of such a plan (forward collectives and per-device shapes; docs/mlir.md compares it with
// upstream MLIR's mesh-spmdization), `search_spmd` ranks plans with the cost model's kernel and
// collective times.
#pragma once

#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/collective.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/sharding.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgt::plan {

/// What one mesh axis splits: dim `dim` (0-based, layout order) of block input `tensor`.
struct AxisSplit {
  std::string tensor;
  int64_t dim = 0;
  bool operator==(const AxisSplit&) const = default;
};

/// A device mesh and, per axis, the input dim it splits (splits.size() == mesh.size()).
struct SpmdPlan {
  std::vector<int64_t> mesh;
  std::vector<AxisSplit> splits;
  bool operator==(const SpmdPlan&) const = default;
};

/// "mesh=2x4 x[0]@0 w1[1]@1" (axis i after the '@').
std::string to_string(const SpmdPlan& plan);
/// Reads {"format": "mgt.spmd_plan/1", "mesh": [2, 4], "splits": [{"tensor": "x", "dim": 0}, ...]}.
SpmdPlan spmd_plan_from_json(const nlohmann::json& doc, const std::string& source);
nlohmann::json to_json(const SpmdPlan& plan);

/// The step kind of the lowering: a collective of the ir's table (all_reduce, all_gather, all_to_all),
/// or none for all_slice, MLIR's free local slice of a replicated dim. all_slice stays out of
/// ir::CollectiveKind because it moves no bytes and meets no other rank: a Schedule, a communicator or
/// the simulator has nothing to run or price for it.
using SpmdStepKind = std::optional<ir::CollectiveKind>;
inline constexpr SpmdStepKind kAllSlice = std::nullopt;
/// The kind's name; "all_slice" for kAllSlice (MLIR's op names, for the cross-check).
std::string to_string(const SpmdStepKind& kind);

/// One resharding step, per MLIR's one-axis-at-a-time convention (all_reduce may list several axes).
struct SpmdCollective {
  SpmdStepKind kind = ir::CollectiveKind::all_reduce;
  std::vector<int> axes;              ///< mesh axes of the group
  std::string tensor;                 ///< the tensor moved
  std::string op;                     ///< the op that produced it (all_reduce) or reads it (the rest)
  std::vector<int64_t> input_shape;   ///< per-device shape before
  std::vector<int64_t> output_shape;  ///< per-device shape after
  bool operator==(const SpmdCollective&) const = default;
};

struct SpmdOpLowering {
  std::string op;
  std::vector<ir::TensorSharding> operands;         ///< what the op reads, after resharding
  ir::TensorSharding raw_result;                     ///< what it writes (partial over contracted split axes)
  ir::TensorSharding result;                         ///< after the all-reduce of partial sums
  std::vector<std::vector<int64_t>> operand_shapes;  ///< per-device
  std::vector<int64_t> result_shape;                 ///< per-device
  double local_flops = 0;                            ///< forward, one device
};

struct SpmdLowering {
  std::vector<int64_t> mesh;
  std::map<std::string, ir::TensorSharding> inputs;  ///< block inputs ("x" and parameters) as the plan lays them
  std::vector<SpmdOpLowering> ops;                   ///< in program order
  std::vector<SpmdCollective> collectives;           ///< forward pass, in program order
};

/// Lowers `plan` on the graph's single block. Rules (docs/mlir.md, "Propagation"):
///  1. each op assigns its einsum letters to mesh axes from its operands in order; a split that
///     conflicts with an earlier assignment (letter on another axis, axis on another letter) is
///     undone on that operand (all_gather, or all_to_all when the axis moves to another dim);
///  2. an operand dim whose letter is split but the operand is not gets a free all_slice;
///  3. contracted letters that are split leave the result partial on their axes, summed at once by
///     one all_reduce.
/// Throws InputError naming `source` for a plan that names unknown tensors/dims, repeats an axis,
/// or splits a dim its axes' sizes do not divide; or for a graph with more than one block.
SpmdLowering lower_spmd(const ir::Graph& graph, const SpmdPlan& plan, const std::string& source);

/// One training step of a lowered plan, per device (docs/mlir.md, "Cost").
struct SpmdEstimate {
  SpmdPlan plan;
  double step_s = 0;
  double compute_s = 0;  ///< forward + backward kernels
  double comm_s = 0;     ///< forward reshards, backward gradient reductions (not overlapped)
  int64_t peak_bytes = 0;       ///< 16 bytes per local parameter (fp32 weight, grad, AdamW) + saved activations
  int64_t param_bytes = 0;      ///< the 16-byte states alone
  int64_t collectives = 0;      ///< forward + backward collectives that move bytes
};

/// Costs `plan`: kernels with cost::gemm_time_s / memory_bound_time_s on local shapes (backward
/// contractions 2x forward), collectives with cost::collective_time_s over the mesh axes' placement
/// (last axis innermost); backward adds, per op operand, an all_reduce of its gradient over the split
/// axes of letters it lacks (data-parallel weight gradients, Megatron's f operator), the
/// reduce_scatter twin of each forward all_gather, and an all_gather for each forward all_slice.
SpmdEstimate estimate_spmd(const ir::Graph& graph, const SpmdPlan& plan, const ir::ClusterSpec& cluster,
                           int64_t num_gpus, ir::DType dtype);

struct SpmdSearchResult {
  std::vector<SpmdEstimate> plans;  ///< best first
  int64_t evaluated = 0;
  int64_t feasible = 0;
  std::map<std::string, int64_t> rejected;  ///< reason -> count
};

/// Every mesh (1-D {n} and 2-D {p, n/p}) and every choice of input dim per axis whose size the axis
/// divides; ranked by step time, then peak memory, then the plan's text (deterministic).
SpmdSearchResult search_spmd(const ir::Graph& graph, const ir::ClusterSpec& cluster, int64_t num_gpus,
                             ir::DType dtype, int64_t top);

inline constexpr const char* kSpmdPlansFormat = "mgt.spmd_plans/2";

/// `mgt-plan MODEL.mlir --gpus N --json`: the search's ranked plans (docs/formats.md). Each entry is
/// written as {"plan", "step_time_s", "compute_s", "comm_s", "peak_bytes", "collectives"}; param_bytes is
/// not carried (read back as 0).
struct SpmdPlansReport {
  std::string model_path;  ///< "model": the model file as given
  int64_t num_gpus = 0;    ///< "gpus"
  std::string gpu;         ///< "cluster": the GPU the plans were priced on (ir::GpuSpec::name)
  SpmdSearchResult result;
};
/// `"format": "mgt.spmd_plans/2"` and every field.
nlohmann::json to_json(const SpmdPlansReport& report);
/// Reads what to_json writes; throws ir::InputError naming `source` and the field that is missing or of
/// the wrong type, or another "format".
SpmdPlansReport spmd_plans_report_from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace mgt::plan
