// `mgt-plan import MODEL.mlir [--params a,b] [--json]` (mlir_command.hpp).
#include "mlir_command.hpp"
#include "subcommand.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_import_cli(CLI::App& app) {
  struct Flags {
    std::string path;
    std::vector<std::string> params;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  auto* import = app.add_subcommand("import", "MLIR (linalg / tosa / arith / tensor on tensors) -> mgt.graph/1 "
                                              "(docs/mlir.md)");
  import->add_option("model", f->path, "model.mlir")->required();
  import->add_option("--params", f->params, "arguments that are parameters (mgt.name or arg<i>), besides "
                                            "those with the {mgt.param} attribute")->delimiter(',');
  import->add_flag("--json", f->json, "print mgt.graph/1");
  return {import, [f] { return run_import(f->path, f->params, f->json); }};
}

}  // namespace mgt::cli
