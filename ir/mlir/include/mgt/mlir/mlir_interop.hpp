// MLIR interop (docs/mlir.md): import linalg / tosa / arith / tensor on tensors into an ir::Graph,
// export a graph and its shardings as linalg + mesh dialect text, and run upstream MLIR's
// sharding-propagation and mesh-spmdization on such text. This header is MLIR-free on purpose: only
// the mgt_mlir library sees MLIR and LLVM headers, so the rest of the build stays fast. When MLIR 19
// is not found at configure time, mgt_mlir is a stub whose functions throw NotBuiltIn.
#pragma once

#include "mgt/ir/graph.hpp"
#include "mgt/ir/sharding.hpp"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgt::mlirio {

/// Thrown by every function below when mgt was built without MLIR (the CLI exits 1).
class NotBuiltIn : public std::runtime_error {
 public:
  NotBuiltIn() : std::runtime_error("MLIR is not built in (hint: install libmlir-19-dev and mlir-19-tools, "
                                    "e.g. scripts/install-deps.sh, and re-run cmake)") {}
};

/// True when mgt_mlir was compiled against MLIR.
bool built_in();

struct ImportOptions {
  /// Function arguments to treat as parameters besides those carrying the `mgt.param` attribute:
  /// names from the `mgt.name` argument attribute, or "arg<i>" (0-based).
  std::vector<std::string> params;
};

/// Parses `path` with MLIR's parser (func, linalg, tosa, arith, tensor, math, mesh registered) and
/// turns its first func.func into a one-block ir::Graph: linalg contractions (matmul, batch_matmul,
/// multiply-add linalg.generic) and tosa.matmul become einsum contractions; elementwise relu / gelu /
/// silu bodies and tosa.clamp(min 0) become activations; elementwise adds become residuals; tensor.empty,
/// linalg.fill and outs-only arguments are destinations; mesh.shard is looked through. Throws
/// ir::InputError: for a file MLIR rejects, with the source "<file>:<line>:<col>" and MLIR's message;
/// for ops it cannot map, naming every such op and its location.
ir::Graph import_mlir(const std::string& path, const ImportOptions& options = {});

/// Per-op shardings, in the graph's op order, as mgt's lowering decides them.
struct OpShardings {
  std::vector<ir::TensorSharding> operands;  ///< as the op reads them
  ir::TensorSharding raw_result;             ///< as it writes (partial sums included)
  ir::TensorSharding result;                 ///< after mgt's all-reduce; what consumers see
};

/// A device mesh and the shardings to annotate; an empty mesh exports plain linalg.
struct MeshAnnotations {
  std::vector<int64_t> mesh;
  std::map<std::string, ir::TensorSharding> inputs;  ///< block inputs ("x" and parameters)
  std::vector<OpShardings> ops;
};

/// Writes the graph's single block as one func.func @main of linalg.generic ops on f32 tensors
/// (destinations as extra arguments, since MLIR 19's sharding propagation rejects top-level
/// tensor.empty), with `mesh.mesh @mesh` and `mesh.shard` annotations: each input and each op result
/// as laid out, each operand as its op reads it (annotate_for_users). The text is parsed and verified
/// before it is returned. Throws ir::InputError for ops without a linalg form (norm, attention, ...) or
/// symbolic dims.
std::string export_mlir(const ir::Graph& graph, const MeshAnnotations& annotations);

/// The known MLIR 19 mesh-spmdization gaps (docs/mlir.md "Differences") that an export of `graph`
/// with `annotations` would hit, one line each naming the op: on a mesh of 2+ axes, (1) a result
/// both partial and split (the scf.if type error), (2) an operand resharded by more than one axis
/// (MLIR 19 reshards 1-D meshes only; its release build segfaults). Empty: upstream lowers it.
/// Pure logic, available without MLIR.
std::vector<std::string> upstream_gaps(const ir::Graph& graph, const MeshAnnotations& annotations);

/// One collective that upstream mesh-spmdization inserted.
struct UpstreamCollective {
  std::string kind;                   ///< "all_reduce", "all_gather", "all_slice", "all_to_all", ...
  std::vector<int> axes;              ///< mesh_axes
  std::vector<int64_t> input_shape;   ///< per-device
  std::vector<int64_t> output_shape;  ///< per-device
};

struct UpstreamResult {
  std::vector<UpstreamCollective> collectives;        ///< in program order
  std::vector<std::vector<int64_t>> op_result_shapes;  ///< per linalg.generic (the exported ops), per-device
  std::string module_text;                             ///< the spmdized module
};

/// Runs builtin.module(func.func(sharding-propagation, mesh-spmdization)) through the C++ pass manager
/// on `module_text` and reads back what it inserted. Throws std::runtime_error with MLIR's
/// diagnostics when parsing or a pass fails.
UpstreamResult run_upstream_spmdization(const std::string& module_text);

}  // namespace mgt::mlirio
