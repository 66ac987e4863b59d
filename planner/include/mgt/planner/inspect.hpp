// mgt.inspect/1: what `mgt-plan inspect MODEL` reports of a model (sizes, parameter counts and training
// FLOPs per token, per block), as a struct with its writer and reader (docs/formats.md).
//
//   const plan::ModelInspection m = plan::inspect_model(ir::load_model(path), /*seq_len=*/8192);
//   std::cout << plan::to_json(m).dump(2);   // plan::model_inspection_from_json reads it back
#pragma once

#include "mgt/ir/graph.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mgt::plan {

inline constexpr const char* kInspectFormat = "mgt.inspect/1";

/// One block of the graph, per copy (the graph repeats it `repeat` times).
struct InspectedBlock {
  std::string name;
  int64_t repeat = 1;
  int64_t params_per_copy = 0;
  double training_flops_per_token_per_copy = 0;  ///< forward + backward, MFU convention
  int64_t ops = 0;                               ///< ops in the block
};

struct ModelInspection {
  std::string model;  ///< the graph's name
  std::string architecture;
  int64_t params_total = 0;
  int64_t params_active = 0;  ///< per token; written for MoE models (num_experts > 0) only
  int64_t num_experts = 0;    ///< 0 for dense models
  int64_t experts_per_token = 0;
  int64_t num_layers = 0, hidden_size = 0, num_attention_heads = 0, num_kv_heads = 0, vocab_size = 0;
  int64_t seq_len = 0;  ///< tokens per sequence the FLOPs are counted at
  /// 6 x active matmul parameters + causal attention (3 x forward), summed over blocks x repeat.
  double training_flops_per_token = 0;
  std::vector<InspectedBlock> blocks;
};

/// Counts `graph` at `seq_len` with the estimator's per-block model (cost::block_cost, one GPU, bf16).
ModelInspection inspect_model(const ir::Graph& graph, int64_t seq_len);

/// Every field (the MoE ones when num_experts > 0), `"format": "mgt.inspect/1"`.
nlohmann::json to_json(const ModelInspection& inspection);
/// Reads what to_json writes; throws ir::InputError naming `source` and the field that is missing or
/// of the wrong type, or another "format".
ModelInspection model_inspection_from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace mgt::plan
