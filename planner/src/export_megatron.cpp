// Megatron-LM exporter: a bash launch script for pretrain_gpt.py, the plan's flags in a bash array.
// Flag names and rules: megatron/training/arguments.py (validate_args) and
// megatron/core/transformer/transformer_config.py, as docs/exports.md cites.
#include "export_common.hpp"

#include "mgt/cost_model/ep_overlap.hpp"
#include "mgt/ir/error.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace mgt::plan::detail {

namespace {

using ir::Plan;
using ir::Recompute;

/// Megatron's flags for the Layout's pipeline split (ir::PipelineSplit; transformer_block.py
/// get_num_layers_to_build): validate_args requires num_layers % pp == 0 unless one of them is given.
void pipeline_split_flags(const ir::PipelineSplit& split, std::vector<std::string>& flags) {
  using Rule = ir::PipelineSplit::Rule;
  switch (split.rule) {
    case Rule::even: return;
    case Rule::account:  // (layers + embedding + loss) % (pp * vpp) == 0; first / last chunk lighter
      if (split.embedding_as_layer) flags.push_back("--account-for-embedding-in-pipeline-split");
      if (split.loss_as_layer) flags.push_back("--account-for-loss-in-pipeline-split");
      return;
    case Rule::first_last:  // per pipeline rank, all its virtual chunks together
      flags.push_back("--decoder-first-pipeline-num-layers " + std::to_string(split.first_rank_layers));
      flags.push_back("--decoder-last-pipeline-num-layers " + std::to_string(split.last_rank_layers));
      return;
    case Rule::balanced:
    case Rule::compute_balanced:
    case Rule::mtp_tail: {  // one "|"-separated entry per chunk in forward order: E embedding, t layer, m MTP, L loss
      std::string layout;
      for (int64_t c = 0; c < split.virtual_stages; ++c) {
        const bool last = c == split.virtual_stages - 1;
        if (c > 0) layout += "|";
        if (c == 0) layout += "E";
        const int64_t layers = split.layers_in_chunk(c);
        if (layers > 0 || !last) layout += "t*" + std::to_string(layers);
        for (int64_t d = 0; last && d < split.mtp_depths; ++d) layout += layers > 0 || d > 0 ? ",m" : "m";
        if (last) layout += layers > 0 || split.mtp_depths > 0 ? ",L" : "L";
      }
      flags.push_back("--pipeline-model-parallel-layout \"" + layout + "\"");
      return;
    }
  }
}

/// The plan's flags, one flag and its value per entry.
std::vector<std::string> megatron_flags(const Resolved& r) {
  const Plan& p = r.plan;
  const int64_t stage = ir::zero_stage(p);
  std::vector<std::string> flags;
  flags.push_back("--tensor-model-parallel-size " + std::to_string(p.tp));
  flags.push_back("--pipeline-model-parallel-size " + std::to_string(p.pp));
  if (p.vpp > 1) flags.push_back("--num-virtual-stages-per-pipeline-rank " + std::to_string(p.vpp));
  if (r.context.num_layers > 0) flags.push_back("--num-layers " + std::to_string(r.context.num_layers));
  // megatron/training/arguments.py _add_mtp_args: the layout's "m" entries must match this count.
  if (r.context.mtp_depths > 0) flags.push_back("--mtp-num-layers " + std::to_string(r.context.mtp_depths));
  if (p.pp > 1) pipeline_split_flags(pipeline_split(r), flags);
  flags.push_back("--context-parallel-size " + std::to_string(p.cp));
  if (p.ep > 1) flags.push_back("--expert-model-parallel-size " + std::to_string(p.ep));
  // Megatron defaults the experts' tensor split to tp; said only when the plan differs.
  if (ir::expert_tp(p) != p.tp) flags.push_back("--expert-tensor-parallel-size " + std::to_string(ir::expert_tp(p)));
  // The experts as the cost model prices them: one grouped GEMM per projection (TE GroupedLinear),
  // not Megatron's default loop over local experts.
  if (r.context.num_experts > 0) flags.push_back("--moe-grouped-gemm");
  if (p.tp > 1 && ir::sequence_parallel(p)) flags.push_back("--sequence-parallel");
  flags.push_back("--micro-batch-size " + std::to_string(p.micro_batch));
  flags.push_back("--global-batch-size " + std::to_string(r.global_batch));
  flags.push_back("--seq-length " + std::to_string(r.context.seq_len));
  flags.push_back("--bf16");
  if (p.recompute == Recompute::selective) {
    // What the megatron-core profile prices (cost::SelectiveRecompute::megatron_modules), not Megatron's
    // default core_attn, which redoes fused attention to save nothing. moe_act needs the grouped GEMM
    // the profile prices experts with, mla_up_proj latent attention (transformer_config.py).
    std::string modules = "layernorm";
    if (r.context.num_experts > 0) modules += " moe_act";
    if (r.context.has_mla) modules += " mla_up_proj";
    flags.push_back("--recompute-granularity selective");
    flags.push_back("--recompute-modules " + modules);
  }
  if (p.recompute == Recompute::full) {
    flags.push_back("--recompute-granularity full");
    // uniform with 1 layer per chunk checkpoints every layer; block checkpoints the first N layers
    // of every (virtual) stage, mgt's recompute_layers.
    flags.push_back(p.recompute_layers ? "--recompute-method block" : "--recompute-method uniform");
    flags.push_back("--recompute-num-layers " + std::to_string(p.recompute_layers.value_or(1)));
  }
  // Gradients held and reduced in bf16 where the plan was priced so (the nemo and megatron-bridge
  // profiles); Megatron-LM's --bf16 otherwise accumulates and reduces them in fp32.
  if (r.context.gradient_bytes == 2) flags.push_back("--grad-reduce-in-bf16");
  if (stage >= 1 && stage < 3) flags.push_back("--use-distributed-optimizer");
  // Shard optimizer state within dp_shard and keep dp_replicate copies (HSDP-like).
  if (stage >= 1 && p.dp_replicate > 1 && p.dp_shard > 1)
    flags.push_back("--num-distributed-optimizer-instances " + std::to_string(p.dp_replicate));
  if (stage >= 3) {
    // Megatron-FSDP, as examples/megatron_fsdp/README.md requires; validate_args asserts
    // ckpt_format fsdp_dtensor. It brings its own sharded optimizer (no --use-distributed-optimizer).
    flags.push_back("--use-megatron-fsdp");
    flags.push_back("--data-parallel-sharding-strategy optim_grads_params");
    flags.push_back("--no-gradient-accumulation-fusion");
    flags.push_back("--ckpt-format fsdp_dtensor");
  }
  // What the megatron-core profile prices (cost::FrameworkProfile: gradient reduction under backward,
  // the ZeRO parameter all-gather under the next forward); Megatron leaves both off by default and
  // validate_args accepts --overlap-param-gather only with --overlap-grad-reduce and a sharded optimizer.
  if (p.dp_replicate * p.dp_shard > 1) {
    flags.push_back("--overlap-grad-reduce");
    if (stage >= 1) flags.push_back("--overlap-param-gather");
  }
  // EP A2A overlap where the plan was priced with it and Megatron accepts it (transformer_config.py:
  // ep > 1, no full recompute, vpp when pp > 1); --delay-wgrad-compute splits the weight gradients out
  // of the merged backward, as the MoE README pairs them, except under Megatron-FSDP, whose v2 adapter
  // refuses it (mcore_fsdp_adapter.py: "MFSDP v2 does not support delay_wgrad_compute").
  if (r.context.ep_a2a_overlap && cost::ep_a2a_overlap_allowed(p)) {
    flags.push_back("--overlap-moe-expert-parallel-comm");
    if (stage < 3) flags.push_back("--delay-wgrad-compute");
  }
  return flags;
}

/// The CUDA_DEVICE_MAX_CONNECTIONS lines: validate_args asserts it is 1 with tp or cp on Hopper and
/// older, and asserts it is not 1 under Megatron-FSDP (which only warns about tp/cp then).
void write_environment(std::ostream& out, const Plan& p) {
  if (ir::zero_stage(p) >= 3) {
    out << "# Megatron-FSDP: validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS is not 1\n";
    out << "unset CUDA_DEVICE_MAX_CONNECTIONS\n";
  } else if (p.tp > 1 || p.cp > 1) {
    out << "# tp/cp: validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1 (Hopper and older GPUs)\n";
    out << "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  }
}

}  // namespace

// Megatron derives its data-parallel size as world / (tp * pp * cp), which must equal
// dp_replicate * dp_shard (the shared product rule checks it).
std::string export_megatron(const ExportContext& context) {
  Resolved r = resolve(context, "megatron");
  const Plan& p = r.plan;
  check_expressible(r, ExportFormat::megatron);
  const int64_t dp = context.num_gpus / (p.tp * p.pp * p.cp);
  const int64_t stage = ir::zero_stage(p);
  const std::vector<std::string> flags = megatron_flags(r);
  const int64_t per_node = std::min(context.num_gpus, context.gpus_per_node);
  const int64_t nodes = (context.num_gpus + per_node - 1) / per_node;

  std::ostringstream out;
  out << "#!/usr/bin/env bash\n";
  out << "# " << header_line(context) << "\n";
  out << "# for " << export_versions(ExportFormat::megatron) << "\n";
  out << "# usage: MEGATRON=<Megatron-LM checkout> NODE_RANK=<0.." << nodes - 1 << "> MASTER_ADDR=<node 0> \\\n";
  out << "#          bash <this file> <model and data flags: --hidden-size ... --data-path ... --tokenizer-type ...>\n";
  out << "# data-parallel size (derived by Megatron) = " << context.num_gpus << " / (tp*pp*cp) = " << dp
      << "; global batch = micro " << p.micro_batch << " * ga " << r.grad_accum << " * dp " << dp << "\n";
  out << "# zero_stage " << stage
      << (stage == 0  ? ": plain DDP"
          : stage < 3 ? ": distributed optimizer (optimizer state and main grads sharded over dp)"
                      : ": Megatron-FSDP optim_grads_params (parameters, grads, optimizer sharded)")
      << "\n";
  out << "set -euo pipefail\n\n";
  write_environment(out, p);
  out << "GPUS_PER_NODE=" << per_node << "\n";
  out << "NNODES=" << nodes << "\n";
  out << ": \"${MEGATRON:?set MEGATRON to your Megatron-LM checkout}\"\n";
  out << "if (( $# == 0 )); then echo \"usage: $0 <model and data flags>\" >&2; exit 2; fi\n\n";
  out << "DISTRIBUTED_ARGS=(\n";
  out << "  --nproc_per_node \"$GPUS_PER_NODE\" --nnodes \"$NNODES\" --node_rank \"${NODE_RANK:-0}\"\n";
  out << "  --master_addr \"${MASTER_ADDR:-localhost}\" --master_port \"${MASTER_PORT:-6000}\"\n";
  out << ")\n\n";
  out << "PLAN_ARGS=(\n";
  for (const auto& flag : flags) out << "  " << flag << "\n";
  out << ")\n\n";
  out << "exec torchrun \"${DISTRIBUTED_ARGS[@]}\" \"$MEGATRON/pretrain_gpt.py\" \"${PLAN_ARGS[@]}\" \"$@\"\n";
  return out.str();
}

}  // namespace mgt::plan::detail
