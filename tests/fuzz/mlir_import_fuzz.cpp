// Fuzz target: `.mlir` import (mgt::mlirio::import_mlir: MLIR's own parser, then the mapping of
// linalg / tosa / arith / tensor ops into an ir::Graph). A graph that imports must pass ir::verify and
// survive mgt.graph/1 and back unchanged. Built only when mgt_mlir is compiled against MLIR.
#include "fuzz_common.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/mlir/mlir_interop.hpp"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mgt::fuzz::write_scratch("model.mlir", mgt::fuzz::text_of(data, size));
  mgt::ir::Graph graph;
  try {
    graph = mgt::mlirio::import_mlir(path);
  } catch (const mgt::ir::InputError&) {
    return 0;
  }
  const nlohmann::json out = mgt::ir::to_json(graph);
  const mgt::ir::Graph again = mgt::ir::graph_from_json(out, "round trip");
  if (mgt::ir::to_json(again) != out) __builtin_trap();
  return 0;
}
