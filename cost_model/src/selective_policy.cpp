// What a framework's selective recompute redoes, op by op (SelectiveRecompute; docs/cost-model.md §4):
// the policies block_cost's walk applies after costing each op.
#include "layer_walk.hpp"

#include "einsum_parts.hpp"

#include <algorithm>

namespace mgt::cost::layer_walk {

using einsum_parts::find_dim;

// Whether a router reads `tensor`, or the logits a projection computes from it: the output of the norm
// in front of a routed MoE MLP, which Megatron-Core keeps as its own module (TENorm) where TE fuses a
// dense layer's norms into the next GEMM (LayerNormLinear).
bool feeds_router(const ir::Block& block, const std::string& tensor) {
  const auto reads = [&](const ir::Op& o, const std::string& name) {
    return std::find(o.inputs.begin(), o.inputs.end(), name) != o.inputs.end();
  };
  for (const ir::Op& router : block.ops) {
    if (router.kind != ir::OpKind::router) continue;
    for (const std::string& in : router.inputs) {
      if (in == tensor) return true;
      for (const ir::Op& producer : block.ops)
        if (producer.output == in && reads(producer, tensor)) return true;
    }
  }
  return false;
}

// torchtitan's op-level selective AC (SelectiveRecompute::every_second_matmul), applied after `op`
// was costed: its policy keeps attention's output and every odd weight matmul's output (aten.mm,
// counted per block; a float8 linear reaches the policy's dispatch mode as aten.mm on float8 tensor
// subclasses before they call _scaled_mm) and recomputes every other op, so the op's forward time is
// what selective recompute redoes unless the op is kept (the norm / activation rule's time is
// replaced). Grouped-expert GEMMs (_grouped_mm, not in the save list) are recomputed.
void op_sac_policy(Walk& w, const ir::Op& op, const BlockCost& before) {
  w.cost.selective_recompute_s = before.selective_recompute_s;
  bool kept = op.kind == ir::OpKind::attention_core;
  if (op.kind == ir::OpKind::contraction) {
    const ir::TensorDecl& b = w.tensor(op.inputs[1]);
    if (b.is_parameter && !find_dim(b, 'e')) kept = ++w.plain_matmuls % 2 == 1;
  }
  if (kept)
    w.op_sac_kept.insert(op.output);
  else
    w.cost.selective_recompute_s += w.cost.fwd_compute_s - before.fwd_compute_s;
}

// Megatron-Core's mla_up_proj module (SelectiveRecompute::megatron_modules), applied after `op` was
// costed: multi_latent_attention.py checkpoints qkv_up_proj_and_rope_apply(q_compressed, kv_compressed)
// with CheckpointWithoutOutput, so the up-projections of the normed latents and the RoPE on their
// outputs run again in backward and attention's q, k, v are not kept. A normed latent is a norm's
// output over a dimension other than the hidden one (the layer's norms read h).
void mla_up_proj_policy(Walk& w, const ir::Op& op, const BlockCost& before) {
  const auto reads = [&](const std::set<std::string>& tensors) {
    return std::any_of(op.inputs.begin(), op.inputs.end(), [&](const std::string& in) { return tensors.count(in) > 0; });
  };
  if (op.kind == ir::OpKind::norm) {
    if (!find_dim(w.tensor(op.inputs[0]), 'h')) w.latent_normed.insert(op.output);
    return;
  }
  const bool up_projection = op.kind == ir::OpKind::contraction && reads(w.latent_normed);
  const bool rope_of_up = op.kind == ir::OpKind::rope && reads(w.mla_up);
  if (!up_projection && !rope_of_up) return;
  w.mla_up.insert(op.output);
  w.recomputed.insert(op.output);
  w.cost.selective_recompute_s += w.cost.fwd_compute_s - before.fwd_compute_s;
}

}  // namespace mgt::cost::layer_walk
