// Fuzz target: a Hugging Face config.json (ir::graph_from_hf_config), then the graph verifier and the
// parameter count, as load_model runs them.
#include "fuzz_common.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json doc = mgt::ir::parse_json_text(mgt::fuzz::text_of(data, size), "config.json");
    const mgt::ir::Graph graph = mgt::ir::graph_from_hf_config(doc, "config.json");
    mgt::ir::verify(graph, "config.json");
    (void)mgt::ir::count_parameters(graph);
    // The graph a config builds survives mgt.graph/1 and back unchanged.
    const nlohmann::json out = mgt::ir::to_json(graph);
    if (mgt::ir::to_json(mgt::ir::graph_from_json(out, "round trip")) != out) __builtin_trap();
  } catch (const mgt::ir::InputError&) {
  }
  return 0;
}
