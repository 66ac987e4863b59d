// `mgt-plan export-mlir MODEL --gpus N [--plan P] [--out F] [--check]` (mlir_command.hpp).
#include "mlir_command.hpp"
#include "subcommand.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_export_mlir_cli(CLI::App& app) {
  struct Flags {
    std::string path, gpus, plan, out = "-", cluster = "h100-sxm";
    std::vector<std::string> params;
    bool check = false;
  };
  auto f = std::make_shared<Flags>();
  auto* export_mlir = app.add_subcommand("export-mlir", "a role-less graph and plan as linalg + mesh.shard "
                                                        "annotations (docs/mlir.md)");
  export_mlir->add_option("model", f->path, "model.mlir or a mgt.graph/1 JSON imported from MLIR")->required();
  export_mlir->add_option("--gpus", f->gpus, "number of GPUs: the product of the plan's mesh axes")->required();
  export_mlir->add_option("--plan", f->plan, "mgt.spmd_plan/1 inline or a file (default: the search's best plan)");
  export_mlir->add_option("--cluster", f->cluster, "cluster for the search when --plan is absent");
  export_mlir->add_option("--params", f->params, "as for import")->delimiter(',');
  export_mlir->add_option("--out", f->out, "output file (default - = stdout)");
  export_mlir->add_flag("--check", f->check, "also run upstream sharding-propagation + mesh-spmdization on it and "
                                             "compare the collectives and per-device shapes with mgt's (exit 1 if "
                                             "they differ)");
  return {export_mlir, [export_mlir, f] {
            std::optional<std::string> plan;
            if (export_mlir->get_option("--plan")->count() > 0) plan = f->plan;
            return run_export_mlir(f->path, f->params, parse_gpu_count(f->gpus), f->cluster, plan, f->out, f->check);
          }};
}

}  // namespace mgt::cli
