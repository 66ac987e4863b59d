// mgt_mlir without MLIR: every entry point says so (the CLI exits 1), so the rest of mgt builds and
// runs on machines without libmlir-19-dev.
#include "mgt/mlir/mlir_interop.hpp"

namespace mgt::mlirio {

bool built_in() { return false; }
ir::Graph import_mlir(const std::string&, const ImportOptions&) { throw NotBuiltIn(); }
std::string export_mlir(const ir::Graph&, const MeshAnnotations&) { throw NotBuiltIn(); }
UpstreamResult run_upstream_spmdization(const std::string&) { throw NotBuiltIn(); }

}  // namespace mgt::mlirio
