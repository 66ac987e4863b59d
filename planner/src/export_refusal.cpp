// The refusal rules of every exporter in one place: what each framework cannot express, as a cheap
// predicate on the plan's degrees and the context's sizes. The exporters throw these refusals
// (check_expressible); the search calls export_refusal to rank only the plans a target can run. No
// text is built unless a plan is refused, so the check costs a few integer compares per candidate.
#include "export_common.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>

namespace mgt::plan {

namespace {

using ir::Plan;
using ir::Recompute;
using Refusal = std::optional<ExportRefusal>;

std::string str(int64_t v) { return std::to_string(v); }

constexpr const char* kPipelineHint = "use --emit megatron or --emit torchtitan for pipeline plans";
constexpr const char* kExpertHint = "use --emit megatron or --emit torchtitan for expert-parallel plans";

Refusal refuse(const char* field, std::string problem, std::string hint) {
  return ExportRefusal{field, std::move(problem), std::move(hint)};
}

// An axis a framework's config cannot express, refused when the plan uses it (degree > 1). No text
// is built unless the plan is refused.
struct UnsupportedAxis {
  const char* axis;  // "tp", "cp", "pp" or "ep"
  const char* problem;
  const char* hint;
};

int64_t axis_degree(const Plan& p, std::string_view axis) {
  if (axis == "tp") return p.tp;
  if (axis == "cp") return p.cp;
  if (axis == "pp") return p.pp;
  return p.ep;
}

// The first of `axes` the plan uses, refused as "<problem> (<axis> <degree>)".
Refusal unsupported_axis_refusal(const Plan& p, std::initializer_list<UnsupportedAxis> axes) {
  for (const UnsupportedAxis& a : axes)
    if (const int64_t degree = axis_degree(p, a.axis); degree > 1)
      return refuse(a.axis, std::string(a.problem) + " (" + a.axis + " " + str(degree) + ")", a.hint);
  return std::nullopt;
}

Refusal seq_len_refusal(const ExportContext& c) {
  if (c.seq_len <= 0) return refuse("seq_len", "sequence length is " + str(c.seq_len), "pass the training sequence length");
  return std::nullopt;
}

// Frameworks that checkpoint whole layers only.
Refusal partial_recompute_refusal(const Plan& p, const std::string& framework) {
  if (p.recompute == Recompute::full && p.recompute_layers.has_value())
    return refuse("recompute_layers",
                  framework + " checkpoints every layer; it cannot recompute only " + str(*p.recompute_layers) +
                      " layers per stage",
                  "drop recompute_layers (recompute all layers), or use --emit megatron (--recompute-method block)");
  return std::nullopt;
}

Refusal cp_chunks_refusal(const ExportContext& c, const char* hint) {
  const Plan& p = c.plan;
  if (p.cp > 1 && c.seq_len % (2 * p.cp) != 0)
    return refuse("cp", "seq_len " + str(c.seq_len) + " is not divisible by 2*cp = " + str(2 * p.cp), hint);
  return std::nullopt;
}

Refusal fill_nodes_refusal(const ExportContext& c, int64_t per_node, const char* hint) {
  if (c.num_gpus % per_node != 0)
    return refuse("num_gpus", str(c.num_gpus) + " GPUs do not fill nodes of " + str(c.gpus_per_node), hint);
  return std::nullopt;
}

// Accelerate and Axolotl (Accelerate's ParallelismConfig underneath) share the FSDP rules.
Refusal replicate_with_tp_refusal(const Plan& p, std::string problem, const char* hint) {
  if ((p.tp > 1 || p.cp > 1) && p.dp_replicate > 1 && p.dp_shard == 1)
    return refuse("dp_replicate", std::move(problem) + std::to_string(p.dp_replicate) + ", dp_shard 1) with tp/cp", hint);
  return std::nullopt;
}

Refusal accelerate_refusal(const ExportContext& c) {
  const Plan& p = c.plan;
  if (auto r = unsupported_axis_refusal(
          p, {{"pp", "Accelerate's ParallelismConfig has no pipeline axis", kPipelineHint},
              {"ep", "Accelerate's ParallelismConfig has no expert axis", kExpertHint}}))
    return r;
  if (auto r = replicate_with_tp_refusal(p, "Accelerate cannot compose pure replication (dp_replicate ",
                                         "move the replicas into dp_shard (FSDP) or use dp_shard > 1 (HSDP)"))
    return r;
  const int64_t machines = (c.num_gpus + c.gpus_per_node - 1) / c.gpus_per_node;
  if (machines > 1)
    if (auto r = fill_nodes_refusal(c, c.gpus_per_node, "Accelerate starts the same number of processes on every machine"))
      return r;
  if (auto r = partial_recompute_refusal(p, "Accelerate")) return r;
  return detail::fsdp_stage_refusal(p);
}

Refusal axolotl_refusal(const ExportContext& c) {
  const Plan& p = c.plan;
  if (auto r = seq_len_refusal(c)) return r;
  // Axolotl's expert_parallel_size is its own mesh axis (ep * dp_shard = world), not folded into dp.
  if (auto r = unsupported_axis_refusal(
          p, {{"pp", "Axolotl has no pipeline parallelism", kPipelineHint},
              {"ep", "Axolotl's expert_parallel_size is a separate mesh axis, not folded into dp", kExpertHint}}))
    return r;
  if (auto r = replicate_with_tp_refusal(p, "Axolotl (Accelerate ParallelismConfig) cannot compose DDP (dp_replicate ",
                                         "use dp_shard > 1 (FSDP or HSDP) with tp/cp"))
    return r;
  if (auto r = partial_recompute_refusal(p, "Axolotl")) return r;
  return detail::fsdp_stage_refusal(p);
}

// What this ds_config.json expresses is data parallelism and ZeRO (docs/exports.md, "What a DeepSpeed
// config cannot express"). DeepSpeed 0.19's AutoTP (tensor_parallel.autotp_size) is config-driven
// tensor parallelism without sequence parallelism; the export does not write it yet.
// DeepSpeed's sequence parallelism is Ulysses (all-to-all over attention heads, set up by the training
// script), not the ring context parallelism mgt estimates for cp. Its pipeline engine runs only a model
// rewritten as a deepspeed.pipe.PipelineModule, which also asserts ZeRO stage < 2.
Refusal deepspeed_refusal(const ExportContext& c) {
  const Plan& p = c.plan;
  const char* const megatron_deepspeed = "use --emit megatron (Megatron-DeepSpeed) or --emit torchtitan";
  if (auto r = unsupported_axis_refusal(
          p, {{"tp", "the DeepSpeed export writes no tensor parallelism (AutoTP is not supported yet)", megatron_deepspeed},
              {"cp",
               "a DeepSpeed config cannot express ring-attention context parallelism (its Ulysses sequence "
               "parallelism is set up in the training script)",
               megatron_deepspeed},
              {"pp", "pipeline parallelism needs the model rewritten as a DeepSpeed PipelineModule, not this config",
               "use --emit megatron or --emit torchtitan"},
              {"ep", "DeepSpeed MoE expert parallelism is set in model code, not this config",
               "use --emit megatron or --emit torchtitan"}}))
    return r;
  return partial_recompute_refusal(p, "DeepSpeed");
}

Refusal megatron_refusal(const ExportContext& c) {
  const Plan& p = c.plan;
  if (auto r = seq_len_refusal(c)) return r;
  if (auto r = cp_chunks_refusal(c, "context parallelism splits each sequence into 2*cp load-balanced chunks")) return r;
  if (p.vpp > 1 && p.pp == 1) return refuse("vpp", "vpp " + str(p.vpp) + " needs pp > 1", "set vpp 1 or pp > 1");
  if (p.pp > 1)
    if (auto r = detail::pipeline_refusal(c, /*per_rank_counts=*/true)) return r;
  return fill_nodes_refusal(c, std::min(c.num_gpus, c.gpus_per_node),
                            "torchrun starts the same number of processes on every node");
}

// torchtitan shards only over data_parallel_shard_degree, and its FSDP has no ZeRO-1.
Refusal torchtitan_shard_refusal(const Plan& p) {
  const int64_t stage = ir::zero_stage(p);
  if (p.dp_shard == 1 && stage > 0)
    return refuse("zero_stage", "torchtitan shards only over data_parallel_shard_degree, which is 1",
                  "set dp_shard > 1 or zero_stage 0");
  if (p.dp_shard > 1 && stage < 2)
    return refuse("zero_stage", "torchtitan's FSDP always shards parameters, it cannot express zero_stage " + str(stage),
                  "use zero_stage 2 or 3, or --emit megatron / deepspeed for ZeRO-1");
  return std::nullopt;
}

Refusal expert_ranks_refusal(const Plan& p) {
  if (p.ep > 1 && (p.dp_shard * p.cp) % p.ep != 0)
    return refuse("ep",
                  "torchtitan borrows expert ranks from dp_shard*cp = " + str(p.dp_shard * p.cp) + ", which ep " +
                      str(p.ep) + " does not divide",
                  "choose ep dividing dp_shard*cp");
  return std::nullopt;
}

// What every torchtitan version refuses first: no sequence length, partial recompute, and a
// sequence the cp load balancer cannot cut into 2*cp chunks (`cp_hint` says how the version splits it).
Refusal torchtitan_sequence_refusal(const ExportContext& c, const char* cp_hint) {
  if (auto r = seq_len_refusal(c)) return r;
  if (auto r = partial_recompute_refusal(c.plan, "torchtitan")) return r;
  return cp_chunks_refusal(c, cp_hint);
}

Refusal torchtitan_refusal(const ExportContext& c) {
  const Plan& p = c.plan;
  if (auto r = torchtitan_sequence_refusal(c, "torchtitan's headtail load balancer splits each sequence into 2*cp chunks"))
    return r;
  // ParallelDims: efsdp = dp_shard*cp*tp/ep with ep innermost, so expert ranks include the tp ranks
  // and expert weights are not tp-split, unlike mgt's ep inside dp_shard*cp.
  if (p.ep > 1 && p.tp > 1)
    return refuse("ep",
                  "torchtitan 0.3 lays ep " + str(p.ep) + " over dp_shard*cp*tp with tp innermost, so it cannot "
                  "keep tp " + str(p.tp) + " inside the experts as the plan does",
                  "use tp 1 with ep, or --emit megatron");
  if (auto r = expert_ranks_refusal(p)) return r;
  if (auto r = torchtitan_shard_refusal(p)) return r;
  if (p.pp > 1) return detail::pipeline_refusal(c, /*per_rank_counts=*/false);
  return std::nullopt;
}

Refusal torchtitan_0_2_refusal(const ExportContext& c) {
  const Plan& p = c.plan;
  if (auto r = torchtitan_sequence_refusal(c, "context parallelism splits each sequence into 2*cp load-balanced chunks"))
    return r;
  if (p.vpp > 1)
    return refuse("vpp",
                  "the plan has vpp " + str(p.vpp) + " but the layer count needed for "
                  "pipeline_parallel_layers_per_stage is not known here",
                  "set pipeline_parallel_schedule = \"Interleaved1F1B\" and pipeline_parallel_layers_per_stage = "
                  "num_layers / (pp * vpp) by hand, or use --emit megatron");
  if (auto r = expert_ranks_refusal(p)) return r;
  return torchtitan_shard_refusal(p);
}

// Models that are not causal language models (encoders, T5, CLIP, a CLIP tower alone;
// ExportContext::non_causal_model). The Accelerate and DeepSpeed configs leave the model to the
// training script, so they serve any model; the other formats train causal LMs only.
constexpr const char* kAnyModelHint =
    "use --emit accelerate or --emit deepspeed, whose configs leave the model to your training script";

Refusal non_causal_model_refusal(ExportFormat format, const ExportContext& c) {
  const std::string& what = c.non_causal_model;
  const Plan& p = c.plan;
  switch (format) {
    case ExportFormat::axolotl:
      // Axolotl loads base_model with AutoModelForCausalLM and trains it on next-token prediction.
      return refuse("model", "Axolotl fine-tunes causal language models (AutoModelForCausalLM); " + what + " is not one",
                    kAnyModelHint);
    case ExportFormat::torchtitan:
    case ExportFormat::torchtitan_0_2:
      // torchtitan's model registry (torchtitan/models): decoder-only LMs and FLUX, no encoder trainer.
      return refuse("model", "torchtitan trains the decoder-only language models of its model registry; it has no "
                             "trainer for " + what, kAnyModelHint);
    case ExportFormat::megatron:
      return refuse("model", "this export launches Megatron-LM's pretrain_gpt.py, which trains causal GPT models; " +
                                 what + " is not one, and mgt writes none of Megatron-LM's other entry points "
                                 "(pretrain_bert.py, pretrain_t5.py, pretrain_vision_classify.py)", kAnyModelHint);
    case ExportFormat::accelerate:
      // Accelerate's tensor parallelism applies the transformers model's plan; transformers supports TP
      // only for architectures whose config defines base_model_tp_plan (docs, "Tensor parallelism"),
      // which the BERT, ViT, T5 and CLIP configs do not.
      if (p.tp > 1)
        return refuse("tp", "Accelerate's tensor parallelism needs a transformers tp_plan, which " + what +
                                " does not define (tp " + str(p.tp) + ")", "use tp 1 (FSDP) for this model");
      if (p.cp > 1)
        return refuse("cp", "mgt writes Accelerate context parallelism for causal language models only, not for " +
                                what + " (cp " + str(p.cp) + ")", "use cp 1 for this model");
      return std::nullopt;
    case ExportFormat::deepspeed: return std::nullopt;  // data parallel and ZeRO only: any model
  }
  return std::nullopt;
}

}  // namespace

namespace detail {

Refusal fsdp_stage_refusal(const Plan& p) {
  // FSDP has no ZeRO-1 (parameters are always sharded), so stages 0/1 with dp_shard > 1 and any
  // sharding without a dp_shard axis are errors rather than silent changes of memory use.
  const int64_t stage = ir::zero_stage(p);
  if (p.dp_shard > 1 && stage < 2)
    return refuse("zero_stage",
                  "FSDP always shards parameters over dp_shard " + str(p.dp_shard) + ", it cannot express zero_stage " +
                      str(stage),
                  "use zero_stage 2 or 3, or --emit megatron / deepspeed for ZeRO-1");
  if (p.dp_shard == 1 && stage > 0)
    return refuse("zero_stage", "zero_stage " + str(stage) + " needs a dp_shard axis, but dp_shard is 1",
                  "set dp_shard > 1 or zero_stage 0");
  return std::nullopt;
}

Refusal pipeline_refusal(const ExportContext& c, bool per_rank_counts) {
  const Plan& p = c.plan;
  const int64_t chunks = p.pp * p.vpp;
  const int64_t layers = c.num_layers;
  if (layers <= 0)
    return refuse("pp", "a pipeline of pp*vpp = " + str(chunks) + " stages needs the layer count, which is unknown",
                  "export from a model file (mgt-plan <model> ... --emit), which gives the layer count");
  const auto split = ir::PipelineSplit::choose(layers, p.pp, p.vpp, std::nullopt, c.mtp_depths);
  if (!split)
    return refuse("pp", "pp*vpp = " + str(chunks) + " exceeds the " + str(layers) + " layers", "use fewer pipeline stages");
  using Rule = ir::PipelineSplit::Rule;
  // Megatron's layout may leave the last chunk to the MTP modules and the loss ("mL").
  const bool tail_only_last = split->rule == Rule::mtp_tail && per_rank_counts;
  if (split->layers_in_chunk(0) < 1 || (!tail_only_last && split->layers_in_chunk(chunks - 1) < 1))
    return refuse("pp", "pp*vpp = " + str(chunks) + " leaves the first or last stage no layer", "use fewer pipeline stages");
  // torchtitan sizes stages as layers_per_stage with the first / last one lighter by the embedding
  // and output it counts as layers: Megatron's even and account-for splits, not per-rank counts.
  if (!per_rank_counts && (split->rule == Rule::first_last || split->rule == Rule::balanced || split->rule == Rule::mtp_tail))
    return refuse("pp",
                  "the " + str(layers) + " layers split over pp*vpp = " + str(chunks) +
                      " chunks only with per-stage layer counts, which torchtitan's layers_per_stage cannot express",
                  "choose pp*vpp dividing the layer count, layers+1 or layers+2, or use --emit megatron");
  return std::nullopt;
}

void check_expressible(const Resolved& r, ExportFormat format) {
  if (auto refusal = export_refusal(format, r.context))
    throw ir::InputError(r.source, refusal->field, refusal->problem, refusal->hint);
}

}  // namespace detail

std::string non_causal_model_of(const ir::Graph& graph) {
  bool loss = false;
  for (const auto& block : graph.blocks)
    for (const auto& op : block.ops) {
      if (op.kind == ir::OpKind::attention_core && !op.causal)
        return graph.info.architecture + " (bidirectional attention: not a causal language model)";
      loss = loss || op.kind == ir::OpKind::softmax_cross_entropy;
    }
  return loss ? "" : graph.info.architecture + " (no loss: a model without a language-modelling head)";
}

std::optional<ExportRefusal> export_refusal(ExportFormat format, const ExportContext& context) {
  // LoRA / QLoRA: of our formats only Axolotl's config has adapter keys (adapter, lora_r, ...). The
  // Accelerate and DeepSpeed configs leave the model to the training script, and neither torchtitan nor
  // Megatron-LM's pretrain_gpt.py has LoRA.
  if ((context.task == ir::Task::lora || context.task == ir::Task::qlora) && format != ExportFormat::axolotl)
    return ExportRefusal{"task",
                         export_format_names()[size_t(format)] + " cannot express " + ir::to_string(context.task) +
                             " (its config has no adapter keys)",
                         "use --emit axolotl, or --task pretrain / sft"};
  if (!context.non_causal_model.empty())
    if (auto r = non_causal_model_refusal(format, context)) return r;
  switch (format) {
    case ExportFormat::accelerate: return accelerate_refusal(context);
    case ExportFormat::axolotl: return axolotl_refusal(context);
    case ExportFormat::torchtitan: return torchtitan_refusal(context);
    case ExportFormat::megatron: return megatron_refusal(context);
    case ExportFormat::deepspeed: return deepspeed_refusal(context);
    case ExportFormat::torchtitan_0_2: return torchtitan_0_2_refusal(context);
  }
  return std::nullopt;
}

}  // namespace mgt::plan
