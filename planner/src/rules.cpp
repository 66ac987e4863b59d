// Planning rules (docs/planner.md §2). Each returns a message that names the numbers and the field.
#include "mgt/planner/rules.hpp"

#include "mgt/cost_model/layer_cost.hpp"

#include <set>

namespace mgt::plan {

ModelFacts model_facts(const ir::Graph& graph) {
  ModelFacts facts;
  std::set<std::pair<char, int64_t>> seen;
  for (const auto& block : graph.blocks) {
    for (const auto& op : block.ops)
      if (op.kind == ir::OpKind::attention_core) facts.has_attention = true;
    for (const auto& t : block.tensors)
      for (const auto& d : t.dims) {
        // The vocabulary is padded to a multiple of tp (Megatron --make-vocab-size-divisible-by).
        if (!cost::is_tp_dim(d.name) || d.name == 'v' || !seen.insert({d.name, d.size}).second) continue;
        auto src = graph.info.dim_sources.find(d.name);
        std::string field = src != graph.info.dim_sources.end() ? src->second : std::string("dim '") + d.name + "'";
        // Heads: the attention head count is the natural field, not heads * head_dim.
        facts.tp_divisible.emplace_back(field, d.size);
      }
  }
  return facts;
}

std::optional<std::string> first_broken_rule(const ir::Plan& plan, const ModelFacts& facts,
                                             const ir::ClusterSpec& cluster, const cost::TrainingSettings& settings,
                                             const RuleOptions& options) {
  const std::string tp = "tp=" + std::to_string(plan.tp);
  const std::string cp = "cp=" + std::to_string(plan.cp);
  if (ir::world_size(plan) != options.num_gpus)
    return "dp_replicate*dp_shard*cp*tp*pp=" + std::to_string(ir::world_size(plan)) + " must equal --gpus " +
           std::to_string(options.num_gpus);
  // Megatron-LM / torchtitan: heads and the FFN split evenly over tp.
  for (const auto& [field, size] : facts.tp_divisible)
    if (size % plan.tp != 0) return tp + " must divide " + field + "=" + std::to_string(size);
  // Tensor parallelism stays inside the NVLink domain (a node, or a GB200 NVL72 rack).
  const int64_t domain = cluster.nvlink_domain_gpus > 1 ? cluster.nvlink_domain_gpus : cluster.gpus_per_node;
  if (!options.allow_cross_node_tp && (plan.tp > domain || domain % plan.tp != 0))
    return tp + " does not fit in one " + std::to_string(domain) + "-GPU " +
           (cluster.nvlink_domain_gpus > 1 ? "NVLink domain" : "node") + " (pass --allow-cross-node-tp to allow)";
  if (plan.cp > 1 && !facts.has_attention) return cp + " needs attention layers to split the sequence";
  // Load-balanced causal CP cuts the sequence into 2*cp chunks, each split over tp by SP.
  const int64_t seq_divisor = 2 * plan.cp * plan.tp;
  if ((plan.cp > 1 || plan.tp > 1) && settings.seq_len % seq_divisor != 0)
    return "seq_len=" + std::to_string(settings.seq_len) + " must be divisible by 2*cp*tp=" +
           std::to_string(seq_divisor);
  // Accelerate ParallelismConfig: pure replication (dp_shard == 1) cannot be combined with tp or cp;
  // mgt keeps the rule so every recommended plan can be exported to Accelerate.
  if (plan.dp_replicate > 1 && plan.dp_shard == 1 && (plan.tp > 1 || plan.cp > 1))
    return "dp_replicate>1 with dp_shard=1 cannot combine with tp or cp (Accelerate rule; use dp_shard)";
  const int64_t replicas = plan.dp_replicate * plan.dp_shard;
  const int64_t seqs = settings.global_batch_seqs();
  if (seqs < replicas * plan.micro_batch)
    return "global batch of " + std::to_string(seqs) + " sequences is smaller than dp_replicate*dp_shard*micro_batch=" +
           std::to_string(replicas * plan.micro_batch);
  if (seqs % (replicas * plan.micro_batch) != 0)
    return "global batch of " + std::to_string(seqs) + " sequences does not divide by dp_replicate*dp_shard*micro_batch=" +
           std::to_string(replicas * plan.micro_batch);
  return std::nullopt;
}

}  // namespace mgt::plan
