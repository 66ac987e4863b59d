// Fixtures shared by the planner tests: the example models (loaded once per process), the H100 preset
// and training settings by sequence length and batch size. Inputs only; every expected value stays in
// the test that checks it.
#pragma once

#include "../common/plans.hpp"

#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/ir/training_settings.hpp"

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace mgt::test {

/// The path of examples/models/<file_name> in the source tree.
inline std::string example(const std::string& file_name) {
  return std::string(MGT_SOURCE_DIR) + "/examples/models/" + file_name;
}

/// examples/models/<name>.json, loaded on first use and kept for the rest of the process.
inline const ir::Graph& model(const std::string& name) {
  static std::map<std::string, ir::Graph> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, ir::load_model(example(name + ".json"))).first;
  return it->second;
}

inline const ir::Graph& llama8b() { return model("Llama-3.1-8B"); }

inline const ir::ClusterSpec& h100() {
  static const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  return cluster;
}

/// `seqs` sequences of `seq_len` tokens per step.
inline ir::TrainingSettings settings(int64_t seq_len, int64_t seqs) {
  ir::TrainingSettings s;
  s.seq_len = seq_len;
  s.global_batch_tokens = seq_len * seqs;
  return s;
}

/// A plan with these degrees, micro-batch, accumulation and recompute; every other field default.
inline ir::Plan make_plan(int64_t dp_replicate, int64_t dp_shard, int64_t tp, int64_t cp, int64_t pp,
                          int64_t micro_batch, int64_t grad_accum, ir::Recompute recompute = ir::Recompute::none) {
  ir::Plan plan = plan_of(dp_replicate, dp_shard, tp, cp, pp, /*vpp=*/1, micro_batch);
  plan.grad_accum = grad_accum;
  plan.recompute = recompute;
  return plan;
}

/// The lines of an exported file, without their '\n'.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace mgt::test
