// Model file entry point: reads a JSON file, tells a Hugging Face config.json from an mgt.graph/1
// document, builds the Graph and verifies it before anyone plans with it.
#include "mgt/ir/model_loader.hpp"

#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace mgt::ir {

Graph load_model(const std::string& path) {
  const nlohmann::json doc = read_json_file(path);
  if (!doc.is_object())
    throw InputError(path, "", "expected a JSON object, got " + std::string(doc.type_name()),
                     "pass a Hugging Face config.json or an mgt.graph/1 file");
  Graph graph;
  if (doc.contains("format")) {
    graph = graph_from_json(doc, path);
  } else if (doc.contains("model_type") || doc.contains("architectures")) {
    graph = graph_from_hf_config(doc, path);
  } else {
    throw InputError(path, "format", "not a model file: no \"format\", \"model_type\" or \"architectures\"",
                     "pass a Hugging Face config.json or a file with \"format\": \"mgt.graph/1\"");
  }
  // HF configs are named after their file; a graph JSON keeps its own "name" when it has one.
  if (graph.info.name.empty() || !doc.contains("format"))
    graph.info.name = std::filesystem::path(path).stem().string();
  verify(graph, path);
  return graph;
}

}  // namespace mgt::ir
