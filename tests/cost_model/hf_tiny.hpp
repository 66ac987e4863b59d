// Tiny Hugging Face configs built into verified graphs, and the one-micro-batch shard context their
// per-token hand counts use. Shared by the cost tests that start from a config.json.
#pragma once

#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/model_loader.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>

namespace mgt::cost::hf_tiny {

/// One sequence of `seq_len` tokens, no parallelism.
inline ShardContext context(int64_t seq_len) {
  ShardContext ctx;
  ctx.micro_batch = 1;
  ctx.seq_len = seq_len;
  return ctx;
}

/// The graph of a config.json object, verified.
inline ir::Graph build(const nlohmann::json& config) {
  ir::Graph g = ir::graph_from_hf_config(config, "tiny.json");
  ir::verify(g, "tiny.json");
  return g;
}

}  // namespace mgt::cost::hf_tiny
