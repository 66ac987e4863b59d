// Loads a model file: a Hugging Face config.json (detected by "architectures"/"model_type") or an
// mgt graph JSON (detected by "format": "mgt.graph/1").
#pragma once

#include "mgt/ir/graph.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace mgt::ir {

/// Builds the graph of a Hugging Face transformer config. The supported `model_type`s are the rows
/// of the family table in ir/src/hf_families.cpp (docs/graph_format.md lists them). Throws InputError
/// naming `source` and the field (unknown architecture, missing or non-positive sizes).
Graph graph_from_hf_config(const nlohmann::json& config, const std::string& source);

/// Reads `mgt.graph/1` (docs/graph_format.md).
Graph graph_from_json(const nlohmann::json& doc, const std::string& source);
nlohmann::json to_json(const Graph& graph);

/// Reads a file and dispatches on its content; the model name defaults to the file stem.
Graph load_model(const std::string& path);

}  // namespace mgt::ir
