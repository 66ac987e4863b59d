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

namespace {

// The scalar fields of mgt.inspect/1, for the writer and the reader below: the model's identity, the MoE
// fields (written for MoE models only), its sizes, and one block's.
constexpr ir::JsonField<ModelInspection> kIdentityFields[] = {
    {"model", &ModelInspection::model},
    {"architecture", &ModelInspection::architecture},
    {"params_total", &ModelInspection::params_total}};

constexpr ir::JsonField<ModelInspection> kMoeFields[] = {
    {"num_experts", &ModelInspection::num_experts, ir::kPositive},
    {"experts_per_token", &ModelInspection::experts_per_token, ir::kPositive},
    {"params_active", &ModelInspection::params_active}};

// Graph JSON models may leave the Hugging Face sizes at 0.
constexpr ir::JsonField<ModelInspection> kSizeFields[] = {
    {"num_layers", &ModelInspection::num_layers},     {"hidden_size", &ModelInspection::hidden_size},
    {"num_attention_heads", &ModelInspection::num_attention_heads},
    {"num_kv_heads", &ModelInspection::num_kv_heads}, {"vocab_size", &ModelInspection::vocab_size},
    {"seq_len", &ModelInspection::seq_len, ir::kPositive},
    {"training_flops_per_token", &ModelInspection::training_flops_per_token}};

constexpr ir::JsonField<InspectedBlock> kBlockFields[] = {
    {"name", &InspectedBlock::name}, {"repeat", &InspectedBlock::repeat, ir::kPositive},
    {"params_per_copy", &InspectedBlock::params_per_copy},
    {"training_flops_per_token_per_copy", &InspectedBlock::training_flops_per_token_per_copy},
    {"ops", &InspectedBlock::ops}};

}  // namespace

json to_json(const ModelInspection& m) {
  json blocks = json::array();
  for (const InspectedBlock& b : m.blocks) {
    json block = json::object();
    ir::write_fields(b, kBlockFields, block);
    blocks.push_back(std::move(block));
  }
  json doc = {{"format", kInspectFormat}, {"blocks", std::move(blocks)}};
  ir::write_fields(m, kIdentityFields, doc);
  ir::write_fields(m, kSizeFields, doc);
  if (m.num_experts > 0) ir::write_fields(m, kMoeFields, doc);
  return doc;
}

ModelInspection model_inspection_from_json(const json& doc, const std::string& source) {
  ir::require_format(doc, kInspectFormat, source);
  ModelInspection m;
  ir::read_fields(doc, kIdentityFields, source, m);
  if (doc.contains("num_experts")) ir::read_fields(doc, kMoeFields, source, m);  // an MoE model: all three
  ir::read_fields(doc, kSizeFields, source, m);
  const json& blocks = ir::require_array(doc, "blocks", source);
  for (size_t i = 0; i < blocks.size(); ++i) {
    InspectedBlock b;
    ir::read_fields(blocks[i], kBlockFields, source + ": blocks[" + std::to_string(i) + "]", b);
    m.blocks.push_back(std::move(b));
  }
  return m;
}

}  // namespace mgt::plan
