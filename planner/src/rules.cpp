// Planning rules (docs/planner.md §2). Each returns a message that names the numbers and the field.
#include "mgt/planner/rules.hpp"

#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/layout.hpp"
#include "mgt/ir/layout.hpp"

#include <limits>
#include <set>

namespace mgt::plan {

ModelFacts model_facts(const ir::Graph& graph) {
  ModelFacts facts;
  facts.num_layers = ir::num_layers(graph);
  ir::TrainingSettings by_compute;
  by_compute.pipeline_balanced_by_compute = true;
  facts.compute_balanced_head = ir::compute_balanced_head(graph, by_compute);
  facts.mtp_depths = ir::mtp_depths(graph);
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

namespace {
bool accelerate_family(const std::string& framework) { return framework == "accelerate" || framework == "axolotl"; }

// Expert parallel and expert tensor parallel fold into the ranks of a pipeline stage (Megatron-Core's
// MoE parallel folding; ir::resolve checks the same), split the experts evenly, and, under
// torchtitan, borrow only from dp_shard x cp with the experts' tensor split that of tp or none.
std::optional<std::string> expert_rule(const ir::Plan& plan, const ModelFacts& facts, const std::string& framework) {
  const int64_t etp = ir::expert_tp(plan);
  const auto ep = [&] { return "ep=" + std::to_string(plan.ep); };
  if ((plan.ep > 1 || etp != plan.tp) && facts.num_experts == 0)
    return (plan.ep > 1 ? ep() : "etp=" + std::to_string(etp)) + " needs a mixture-of-experts model";
  if (plan.ep == 1 && etp == plan.tp) return std::nullopt;
  if (facts.num_experts % plan.ep != 0) return ep() + " must divide " + facts.experts_field + "=" + std::to_string(facts.num_experts);
  const int64_t stage_ranks = plan.dp_replicate * plan.dp_shard * plan.cp * plan.tp;
  if (etp < 1 || stage_ranks % etp != 0 || (stage_ranks / etp) % plan.ep != 0)
    return "etp*ep=" + std::to_string(etp) + "*" + std::to_string(plan.ep) + " must divide dp_replicate*dp_shard*cp*tp=" +
           std::to_string(stage_ranks);
  if (!ir::expert_groups_nest(plan))
    return "etp=" + std::to_string(etp) + " and " + ep() + " do not nest with tp, cp, dp_shard and dp_replicate";
  if (framework == "torchtitan" && (plan.dp_shard * plan.cp) % plan.ep != 0)
    return ep() + " must divide dp_shard*cp=" + std::to_string(plan.dp_shard * plan.cp) + " (torchtitan borrows expert ranks from them)";
  if (framework == "torchtitan" && etp != plan.tp && etp != 1)
    return "etp=" + std::to_string(etp) + " must be 1 or tp under torchtitan";
  return std::nullopt;
}
}  // namespace

std::optional<std::string> first_broken_rule(const ir::Plan& plan, const ModelFacts& facts,
                                             const ir::ClusterSpec& cluster, const cost::TrainingSettings& settings,
                                             const RuleOptions& options) {
  // Messages are built only for a rule that breaks: the search checks every candidate.
  const auto tp = [&] { return "tp=" + std::to_string(plan.tp); };
  const auto cp = [&] { return "cp=" + std::to_string(plan.cp); };
  if (ir::world_size(plan) != options.num_gpus)
    return "dp_replicate*dp_shard*cp*tp*pp=" + std::to_string(ir::world_size(plan)) + " must equal --gpus " +
           std::to_string(options.num_gpus);
  // Megatron-LM / torchtitan: heads and the FFN split evenly over tp.
  for (const auto& [field, size] : facts.tp_divisible)
    if (size % plan.tp != 0) return tp() + " must divide " + field + "=" + std::to_string(size);
  // Tensor parallelism stays inside the NVLink domain (a node, or a GB200 NVL72 rack).
  const int64_t domain = cluster.nvlink_domain_gpus > 1 ? cluster.nvlink_domain_gpus : cluster.gpus_per_node;
  const auto where = [&] { return std::to_string(domain) + "-GPU " + (cluster.nvlink_domain_gpus > 1 ? "NVLink domain" : "node"); };
  if (!options.allow_cross_node_tp && plan.tp > domain)
    return tp() + " exceeds one " + where() + " (pass --allow-cross-node-tp to allow)";
  if (!options.allow_cross_node_tp && domain % plan.tp != 0)
    return tp() + " must divide the " + where() + " so no tp group straddles two (pass --allow-cross-node-tp to allow)";
  if (plan.cp > 1 && !facts.has_attention && facts.ssd_heads == 0)
    return cp() + " needs attention or Mamba-2 layers to split the sequence";
  // Megatron-Core splits Mamba-2 layers over cp by heads (MambaContextParallel); Mamba-1 has no split.
  if (plan.cp > 1 && facts.has_mamba1)
    return cp() + ": Mamba-1 layers scan the whole sequence and no framework splits them over cp (use tp or pp)";
  if (plan.cp > 1 && facts.ssd_heads % (plan.tp * plan.cp) != 0)
    return "tp*cp=" + std::to_string(plan.tp * plan.cp) + " must divide the Mamba-2 heads (" +
           std::to_string(facts.ssd_heads) + "): Megatron-Core's context parallel splits heads over tp*cp";
  // Pipeline: the layers split into pp * vpp chunks (ir::PipelineSplit: equal chunks, or the split
  // Megatron is told with its uneven-pipeline flags), and the schedule needs micro-batches to fill the pipe.
  if (plan.pp > 1 || plan.vpp > 1) {
    if (plan.vpp > 1 && plan.pp == 1) return "vpp=" + std::to_string(plan.vpp) + " needs pp > 1";
    const auto head = settings.pipeline_balanced_by_compute ? facts.compute_balanced_head : std::nullopt;
    if (!ir::PipelineSplit::choose(facts.num_layers, plan.pp, plan.vpp, head, facts.mtp_depths))
      return ir::PipelineSplit::why_none(facts.num_layers, plan.pp, plan.vpp, head, facts.layers_field);
  }
  if (auto broken = expert_rule(plan, facts, options.framework)) return broken;
  // Load-balanced causal CP cuts the sequence into 2*cp chunks, each split over tp by SP; without CP,
  // sequence parallelism alone splits it over tp.
  if (plan.cp > 1 && settings.seq_len % (2 * plan.cp * plan.tp) != 0)
    return "seq_len=" + std::to_string(settings.seq_len) + " must be divisible by 2*cp*tp=" +
           std::to_string(2 * plan.cp * plan.tp);
  if (plan.cp == 1 && plan.tp > 1 && ir::sequence_parallel(plan) && settings.seq_len % plan.tp != 0)
    return "seq_len=" + std::to_string(settings.seq_len) + " must be divisible by tp=" + std::to_string(plan.tp) +
           " (sequence parallel splits it over tp)";
  // Accelerate ParallelismConfig (Axolotl builds on it): pure replication (dp_shard == 1) cannot be
  // combined with tp or cp. Accelerate's rule only: Megatron and torchtitan replicate beside tp.
  if (accelerate_family(options.framework) && plan.dp_replicate > 1 && plan.dp_shard == 1 && (plan.tp > 1 || plan.cp > 1))
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
