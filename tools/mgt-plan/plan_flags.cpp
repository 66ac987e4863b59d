// The flags every planning command shares (the search, estimate, simulate, compile), registered by one
// function so that their names, help and checks are the same everywhere.
#include "subcommand.hpp"

#include "mgt/ir/error.hpp"

namespace mgt::cli {

void add_plan_flags(CLI::App& app, PlanFlags& f, bool required) {
  app.add_option("model", f.options.model_path,
                 "model: Hugging Face config.json, mgt.graph/1 JSON, or .mlir (docs/mlir.md)")->required(required);
  app.add_option("--gpus", f.gpus, "number of GPUs (may span many nodes; at most 1048576)")->required(required);
  app.add_option("--cluster", f.options.cluster, "cluster preset name or mgt.cluster/1 file (default h100-sxm; presets: "
                                                 "h100-sxm a100-80g-sxm h200-sxm b200 b300 gb200-nvl72 gb300-nvl72 rtx4090-pcie)");
  app.add_option("--seq-len", f.seq_len, "training sequence length (default min(8192, max_position_embeddings))");
  app.add_option("--global-batch-tokens", f.global_batch_tokens,
                 "tokens per optimizer step, K/M/G suffixes are powers of 2 (default: the largest power-of-two number of sequences within 4M = 4194304 tokens)");
  app.add_option("--global-batch", f.global_batch,
                 "sequences per optimizer step (the batch in sequences of --seq-len tokens, as `run` takes it; "
                 "instead of --global-batch-tokens)");
  app.add_option("--document-tokens", f.document_tokens,
                 "packed training: each sequence holds documents of this many tokens (K suffix as --seq-len); "
                 "attention stays within a document and positions restart (default: one document per sequence)");
  app.add_option("--precision", f.options.precision,
                 "bf16 (default on GPUs), fp16 (both mixed with fp32 master weights), fp8 (linear layers in fp8 with "
                 "per-tensor delayed or current scaling, the rest bf16; MFU stays relative to the bf16 peak), mxfp8 "
                 "or nvfp4 (Blackwell block-scaled linear layers), or fp32 (default on a CPU cluster from probe)");
  app.add_option("--task", f.options.task,
                 "pretrain (default), sft (full fine-tuning: costs as pretrain), lora (frozen bf16 base, trained "
                 "low-rank adapters) or qlora (frozen base in 4-bit NF4)");
  app.add_option("--lora-rank", f.options.lora_rank, "LoRA adapter rank r (default 16; --task lora or qlora)");
  app.add_option("--lora-targets", f.options.lora_targets,
                 "comma-separated projections that get adapters (default q,k,v,o,gate,up,down: <name>_proj ops)");
  app.add_flag("--json", f.options.json, "print JSON (mgt.plans/1, or one plan entry for estimate)");
  app.add_flag("--allow-cross-node-tp", f.options.allow_cross_node_tp, "allow tensor parallel groups to span nodes");
}

void add_framework_flag(CLI::App& app, PlanFlags& f) {
  app.add_option("--framework", f.options.framework,
                 "the training software whose kernels, overlap and overheads price the plans: megatron-lm, "
                 "megatron-core (also nemo, megatron-bridge), megatron-deepspeed (also gpt-neox), deepspeed, pytorch-fsdp "
                 "(also llm-foundry, accelerate, axolotl, metaseq, olmo, litgpt), torchtitan, nanotron; features may "
                 "follow as words, e.g. \"megatron-core ep-a2a-overlap\" (Megatron-Core's EP all-to-all overlap), "
                 "\"torchtitan torch.compile float8\" (default: --emit's framework, "
                 "else the pytorch-fsdp constants with every plan shape searched)");
}

void check_one_batch_flag(bool tokens_given, bool sequences_given) {
  if (tokens_given && sequences_given)
    throw ir::InputError("--global-batch-tokens", "",
                         "cannot be combined with --global-batch: both give the batch size (tokens vs sequences)",
                         "give one: --global-batch-tokens T (tokens) or --global-batch G (sequences of --seq-len "
                         "tokens)");
}

PlanOptions resolve_plan_flags(const CLI::App& app, const PlanFlags& f) {
  const auto given = [&app](const char* flag) { return app.get_option(flag)->count() > 0; };
  check_one_batch_flag(given("--global-batch-tokens"), given("--global-batch"));
  PlanOptions o = f.options;
  if (given("--gpus")) o.gpus = parse_gpu_count(f.gpus);
  if (given("--seq-len")) o.seq_len = f.seq_len;
  if (given("--global-batch-tokens")) o.global_batch_tokens = f.global_batch_tokens;
  if (given("--global-batch")) o.global_batch_seqs = f.global_batch;
  if (given("--document-tokens")) o.document_tokens = f.document_tokens;
  // An empty value would read as "not given" (the default precision) further on.
  if (given("--precision") && o.precision.empty())
    throw ir::InputError("--precision", "", "is empty", "use bf16, fp16, fp8 or fp32, or leave the flag out for the default");
  return o;
}

}  // namespace mgt::cli
