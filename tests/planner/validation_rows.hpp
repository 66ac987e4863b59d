// Synthetic validation rows shared by the validate tests (validate_test.cpp, validate_model_test.cpp):
// a Llama-like and a Megatron-GPT-like row, a one-source document around rows, and the assumption search.
#pragma once

#include "mgt/planner/validate.hpp"
#include "validation_hardware.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace mgt::test {

using nlohmann::json;

/// A Llama-like dense row (8B-style, 2 layers to stay small) with an iteration time.
inline json llama_row() {
  return json::parse(R"({
    "id": "llama_row", "system": "h100",
    "model": {"name": "Llama-mini", "type": "dense", "num_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
              "num_kv_heads": 8, "head_dim": 128, "ffn_hidden_size": 14336, "vocab_size": 128256, "seq_length": 8192,
              "activation": "swiglu", "normalization": "rmsnorm", "tied_embeddings": false, "params_B": 1.0},
    "training": {"global_batch_size_seqs": 64, "micro_batch_size": 2, "seq_length": 4096},
    "parallel": {"num_gpus": 16, "dp": 8, "tp": 2, "pp": 1, "vpp": null, "cp": 1, "ep": 1,
                 "sequence_parallel": true, "zero_stage": 3, "fsdp": true},
    "recompute": "selective", "precision": "bf16",
    "measured": {"iteration_time_s": 2.5}})");
}

/// A Megatron-GPT-like row (plain GeLU MLP, LayerNorm).
inline json gpt_row() {
  return json::parse(R"({
    "id": "gpt_row", "system": "h100",
    "model": {"name": "GPT-mini", "type": "dense", "num_layers": 4, "hidden_size": 2048, "num_attention_heads": 16,
              "num_kv_heads": 16, "head_dim": 128, "ffn_hidden_size": 8192, "vocab_size": 51200, "seq_length": 2048,
              "activation": "gelu", "normalization": "layernorm", "tied_embeddings": false, "params_B": 0.33},
    "training": {"global_batch_size_seqs": 32, "micro_batch_size": 1, "seq_length": 2048},
    "parallel": {"num_gpus": 8, "dp": 8, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "zero_stage": 0, "fsdp": false},
    "recompute": "full", "precision": "fp16 mixed",
    "measured": {}})");
}

inline mgt::plan::ValidationSource source_with(const std::vector<json>& rows, const std::string& notes = "",
                                                    const json& block = h100_block()) {
  json doc = {{"source", "synthetic"}, {"source_notes", notes}, {"hardware", {{"h100", block}}}, {"rows", rows}};
  return mgt::plan::validation_source_from_json(doc, "synthetic.json");
}

/// Whether any of a row's assumptions contains `text`.
inline bool any_assumption_has(const std::vector<std::string>& assumptions, const std::string& text) {
  return std::any_of(assumptions.begin(), assumptions.end(),
                     [&](const std::string& a) { return a.find(text) != std::string::npos; });
}

}  // namespace mgt::test
