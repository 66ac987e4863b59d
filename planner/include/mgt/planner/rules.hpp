// Rejection rules a plan must pass before it is estimated: the rules users meet in Accelerate,
// torchtitan and Megatron-LM, each with a message that quotes the numbers (docs/planner.md).
#pragma once

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/plan.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mgt::plan {

struct RuleOptions {
  int64_t num_gpus = 1;
  bool allow_cross_node_tp = false;
  /// The target framework (a framework_profile name): its own rules apply (Accelerate's
  /// replication rule, torchtitan's expert borrowing); empty = only the rules every framework shares.
  std::string framework{};
};

/// Facts the rules need from the model, computed once: every distinct size of a tensor-parallel dim
/// (a, k, f; v is padded) with the config field it comes from, and whether the model has attention.
struct ModelFacts {
  std::vector<std::pair<std::string, int64_t>> tp_divisible;  ///< {"num_key_value_heads", 8}, ...
  bool has_attention = false;
  int64_t num_layers = 0;         ///< repeats of layer blocks (what pipeline stages split)
  std::string layers_field = "num_hidden_layers";
  int64_t num_experts = 0;        ///< 0 for dense models
  std::string experts_field;      ///< "num_local_experts", "n_routed_experts", ...
  bool has_mamba1 = false;        ///< Mamba-1 selective scans (no context-parallel split exists)
  int64_t ssd_heads = 0;          ///< Mamba-2 heads (context parallel splits them with tp); 0 = none
  /// The LM head's cost in layers as nanotron weighs them (ir::compute_balanced_head), for the
  /// pipeline split of frameworks that balance compute.
  std::optional<double> compute_balanced_head;
  int64_t mtp_depths = 0;         ///< multi-token prediction depths (ir::mtp_depths): the last chunk's tail
};
ModelFacts model_facts(const ir::Graph& graph);

/// The first rule `plan` breaks, as a message ("tp=16 must divide num_key_value_heads=8"), or
/// nullopt. Memory is not checked here (the estimator decides it).
std::optional<std::string> first_broken_rule(const ir::Plan& plan, const ModelFacts& facts,
                                             const ir::ClusterSpec& cluster, const cost::TrainingSettings& settings,
                                             const RuleOptions& options);

}  // namespace mgt::plan
