// Fuzz target: an mgt.graph/1 document (ir::graph_from_json), the verifier, the parameter count, and
// the writer's output read back (it must load again).
#include "fuzz_common.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mgt::ir::Graph graph;
  try {
    const nlohmann::json doc = mgt::ir::parse_json_text(mgt::fuzz::text_of(data, size), "model.graph.json");
    graph = mgt::ir::graph_from_json(doc, "model.graph.json");
    mgt::ir::verify(graph, "model.graph.json");
    (void)mgt::ir::count_parameters(graph);
  } catch (const mgt::ir::InputError&) {
    return 0;
  }
  // A graph that loaded and verified is written and read back without complaint.
  const nlohmann::json out = mgt::ir::to_json(graph);
  const mgt::ir::Graph again = mgt::ir::graph_from_json(out, "round trip");
  mgt::ir::verify(again, "round trip");
  if (mgt::ir::to_json(again) != out) __builtin_trap();  // and unchanged
  return 0;
}
