// mgt.inspect/1: ModelInspection, its counting and its JSON (inspect.hpp; docs/formats.md).
#include "mgt/planner/inspect.hpp"

#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/json_fields.hpp"

namespace mgt::plan {

using json = nlohmann::json;

ModelInspection inspect_model(const ir::Graph& graph, int64_t seq_len) {
  const auto counts = ir::count_parameters(graph);
  // Training FLOPs per token (fwd + bwd) from the same per-block model the estimator uses.
  const cost::ShardContext ctx{1, seq_len, 1, 1, false, ir::DType::bf16};
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");  // only the FLOP counts are used
  const ir::ModelInfo& info = graph.info;
  ModelInspection m;
  m.model = info.name;
  m.architecture = info.architecture;
  m.params_total = counts.total;
  if (info.num_experts > 0) {
    m.params_active = counts.active;
    m.num_experts = info.num_experts;
    m.experts_per_token = info.experts_per_token;
  }
  m.num_layers = info.num_layers;
  m.hidden_size = info.hidden_size;
  m.num_attention_heads = info.num_attention_heads;
  m.num_kv_heads = info.num_kv_heads;
  m.vocab_size = info.vocab_size;
  m.seq_len = seq_len;
  for (const auto& block : graph.blocks) {
    const cost::BlockCost c = cost::block_cost(block, ctx, cluster, {});
    int64_t params = 0;
    for (const auto& t : block.tensors)
      if (t.is_parameter) params += ir::num_elements(t);
    const double per_token = c.model_flops / double(seq_len);
    m.training_flops_per_token += per_token * double(block.repeat);
    m.blocks.push_back({block.name, block.repeat, params, per_token, int64_t(block.ops.size())});
  }
  return m;
}

json to_json(const ModelInspection& m) {
  json blocks = json::array();
  for (const InspectedBlock& b : m.blocks)
    blocks.push_back({{"name", b.name},
                      {"repeat", b.repeat},
                      {"params_per_copy", b.params_per_copy},
                      {"training_flops_per_token_per_copy", b.training_flops_per_token_per_copy},
                      {"ops", b.ops}});
  json doc = {{"format", kInspectFormat},
              {"model", m.model},
              {"architecture", m.architecture},
              {"params_total", m.params_total},
              {"num_layers", m.num_layers},
              {"hidden_size", m.hidden_size},
              {"num_attention_heads", m.num_attention_heads},
              {"num_kv_heads", m.num_kv_heads},
              {"vocab_size", m.vocab_size},
              {"seq_len", m.seq_len},
              {"training_flops_per_token", m.training_flops_per_token},
              {"blocks", std::move(blocks)}};
  if (m.num_experts > 0) {
    doc["params_active"] = m.params_active;
    doc["num_experts"] = m.num_experts;
    doc["experts_per_token"] = m.experts_per_token;
  }
  return doc;
}

ModelInspection model_inspection_from_json(const json& doc, const std::string& source) {
  ir::require_format(doc, kInspectFormat, source);
  ModelInspection m;
  m.model = ir::require_string(doc, "model", source);
  m.architecture = ir::require_string(doc, "architecture", source);
  m.params_total = ir::require_nonnegative_int(doc, "params_total", source);
  if (doc.contains("num_experts")) {  // an MoE model: all three
    m.num_experts = ir::require_positive_int(doc, "num_experts", source);
    m.experts_per_token = ir::require_positive_int(doc, "experts_per_token", source);
    m.params_active = ir::require_nonnegative_int(doc, "params_active", source);
  }
  // Graph JSON models may leave the Hugging Face sizes at 0.
  m.num_layers = ir::require_nonnegative_int(doc, "num_layers", source);
  m.hidden_size = ir::require_nonnegative_int(doc, "hidden_size", source);
  m.num_attention_heads = ir::require_nonnegative_int(doc, "num_attention_heads", source);
  m.num_kv_heads = ir::require_nonnegative_int(doc, "num_kv_heads", source);
  m.vocab_size = ir::require_nonnegative_int(doc, "vocab_size", source);
  m.seq_len = ir::require_positive_int(doc, "seq_len", source);
  m.training_flops_per_token = ir::require_finite_number(doc, "training_flops_per_token", source);
  const json& blocks = ir::require_array(doc, "blocks", source);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string where = source + ": blocks[" + std::to_string(i) + "]";
    const json& b = blocks[i];
    m.blocks.push_back({ir::require_string(b, "name", where), ir::require_positive_int(b, "repeat", where),
                        ir::require_nonnegative_int(b, "params_per_copy", where),
                        ir::require_finite_number(b, "training_flops_per_token_per_copy", where),
                        ir::require_nonnegative_int(b, "ops", where)});
  }
  return m;
}

}  // namespace mgt::plan
