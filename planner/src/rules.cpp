// Planning rules (docs/planner.md §2). Each returns a message that names the numbers and the field.
#include "mgt/planner/rules.hpp"

#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/layout.hpp"

#include <limits>
#include <set>

namespace mgt::plan {

ModelFacts model_facts(const ir::Graph& graph) {
  ModelFacts facts;
  facts.num_layers = ir::num_layers(graph);
  facts.num_experts = graph.info.num_experts;
  if (auto it = graph.info.dim_sources.find('e'); it != graph.info.dim_sources.end()) facts.experts_field = it->second;
  if (graph.info.architecture == "GPT2LMHeadModel") facts.layers_field = "n_layer";
  std::set<std::pair<char, int64_t>> seen;
  for (const auto& block : graph.blocks) {
    for (const auto& op : block.ops) {
      if (op.kind == ir::OpKind::attention_core) facts.has_attention = true;
      if (op.kind == ir::OpKind::ssm_scan && op.chunk_size == 0) facts.has_mamba1 = true;
      if (op.kind == ir::OpKind::ssm_scan && op.chunk_size > 0)
        if (const ir::TensorDecl* x = ir::find_tensor(block, op.inputs.front()); x && x->dims.size() == 4)
          facts.ssd_heads = x->dims[2].size;
    }
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
  const std::string where = std::to_string(domain) + "-GPU " + (cluster.nvlink_domain_gpus > 1 ? "NVLink domain" : "node");
  if (!options.allow_cross_node_tp && plan.tp > domain)
    return tp + " exceeds one " + where + " (pass --allow-cross-node-tp to allow)";
  if (!options.allow_cross_node_tp && domain % plan.tp != 0)
    return tp + " must divide the " + where + " so no tp group straddles two (pass --allow-cross-node-tp to allow)";
  if (plan.cp > 1 && !facts.has_attention && facts.ssd_heads == 0)
    return cp + " needs attention or Mamba-2 layers to split the sequence";
  // Megatron-Core splits Mamba-2 layers over cp by heads (MambaContextParallel); Mamba-1 has no split.
  if (plan.cp > 1 && facts.has_mamba1)
    return cp + ": Mamba-1 layers scan the whole sequence and no framework splits them over cp (use tp or pp)";
  if (plan.cp > 1 && facts.ssd_heads % (plan.tp * plan.cp) != 0)
    return "tp*cp=" + std::to_string(plan.tp * plan.cp) + " must divide the Mamba-2 heads (" +
           std::to_string(facts.ssd_heads) + "): Megatron-Core's context parallel splits heads over tp*cp";
  // Pipeline: the layers split into pp * vpp chunks (ir::PipelineSplit: equal chunks, or the first
  // and last one layer lighter), and the schedule needs micro-batches to fill the pipe.
  if (plan.pp > 1 || plan.vpp > 1) {
    if (plan.vpp > 1 && plan.pp == 1) return "vpp=" + std::to_string(plan.vpp) + " needs pp > 1";
    // The product is checked before it is formed: a wrapped one (vpp near 2^63) could "divide" the layers.
    if (plan.pp < 1 || plan.vpp < 1 || plan.vpp > std::numeric_limits<int64_t>::max() / plan.pp)
      return "pp*vpp (pp=" + std::to_string(plan.pp) + ", vpp=" + std::to_string(plan.vpp) + ") overflows; it must divide " +
             facts.layers_field + "=" + std::to_string(facts.num_layers) + " or " + facts.layers_field + "+2";
    const std::string pv = "pp*vpp=" + std::to_string(plan.pp * plan.vpp);
    if (!ir::PipelineSplit::splits(facts.num_layers, plan.pp * plan.vpp))
      return pv + " must divide " + facts.layers_field + "=" + std::to_string(facts.num_layers) + " or " +
             facts.layers_field + "+2";
  }
  // Expert parallel borrows ranks from dp_shard x cp (torchtitan) and splits the experts evenly.
  if (plan.ep > 1) {
    if (facts.num_experts == 0) return "ep=" + std::to_string(plan.ep) + " needs a mixture-of-experts model";
    if (facts.num_experts % plan.ep != 0)
      return "ep=" + std::to_string(plan.ep) + " must divide " + facts.experts_field + "=" + std::to_string(facts.num_experts);
    if ((plan.dp_shard * plan.cp) % plan.ep != 0)
      return "ep=" + std::to_string(plan.ep) + " must divide dp_shard*cp=" + std::to_string(plan.dp_shard * plan.cp);
    // The mesh nests ep inside cp, or cp inside ep: one must divide the other.
    if (plan.cp % plan.ep != 0 && plan.ep % plan.cp != 0)
      return "ep=" + std::to_string(plan.ep) + " and cp=" + std::to_string(plan.cp) + " must divide one another";
  }
  // Load-balanced causal CP cuts the sequence into 2*cp chunks, each split over tp by SP; without CP,
  // sequence parallelism alone splits it over tp.
  if (plan.cp > 1 && settings.seq_len % (2 * plan.cp * plan.tp) != 0)
    return "seq_len=" + std::to_string(settings.seq_len) + " must be divisible by 2*cp*tp=" +
           std::to_string(2 * plan.cp * plan.tp);
  if (plan.cp == 1 && plan.tp > 1 && ir::sequence_parallel(plan) && settings.seq_len % plan.tp != 0)
    return "seq_len=" + std::to_string(settings.seq_len) + " must be divisible by tp=" + std::to_string(plan.tp) +
           " (sequence parallel splits it over tp)";
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
  if (plan.pp > 1) {
    const int64_t micro_batches = seqs / (replicas * plan.micro_batch);
    if (micro_batches < plan.pp)
      return "pp=" + std::to_string(plan.pp) + " needs at least pp micro-batches per step, got grad_accum=" +
             std::to_string(micro_batches);
    // Megatron-LM's interleaved schedule requires the micro-batch count to be a multiple of pp.
    if (plan.vpp > 1 && micro_batches % plan.pp != 0)
      return "vpp>1 needs grad_accum divisible by pp=" + std::to_string(plan.pp) + ", got " + std::to_string(micro_batches);
  }
  return std::nullopt;
}

}  // namespace mgt::plan
