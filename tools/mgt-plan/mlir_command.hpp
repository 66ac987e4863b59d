// MLIR interop commands (docs/mlir.md): `import` (MLIR -> mgt.graph/1), `export-mlir` (graph + plan ->
// linalg + mesh.shard), and the role-less search that `mgt-plan model.mlir --gpus N` runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgt::cli {

/// True for models the role-less planner handles: `.mlir` files and graphs imported from MLIR
/// (mgt.graph/1 with model.architecture "mlir").
bool is_roleless_model(const std::string& path);

/// `import model.mlir [--params a,b] [--json]`: prints mgt.graph/1 (--json) or a summary.
int run_import(const std::string& path, const std::vector<std::string>& params, bool json);

/// `mgt-plan model.mlir --gpus N`: searches role-less plans (planner/spmd.hpp), prints the ranking
/// (or mgt.spmd_plans/2 with --json). Exit 1 when no plan fits.
int run_roleless_search(const std::string& path, const std::vector<std::string>& params, int64_t gpus,
                        const std::string& cluster, int64_t top, bool json);

/// `export-mlir model --gpus N [--plan P] [--out F] [--check]`: the graph as linalg with mesh.shard
/// annotations from `plan_text` (mgt.spmd_plan/1, inline or a file), or from the search's best plan
/// when empty. With `check`, also runs upstream mesh-spmdization on it and compares with mgt's
/// lowering: exit 1 when they differ or MLIR 19 cannot lower the plan.
int run_export_mlir(const std::string& path, const std::vector<std::string>& params, int64_t gpus,
                    const std::string& cluster, const std::optional<std::string>& plan_text, const std::string& out_path,
                    bool check);

}  // namespace mgt::cli
