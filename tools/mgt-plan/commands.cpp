// The mgt-plan subcommands: load inputs, call the planner / estimator, print.
#include "commands.hpp"

#include "compile_command.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "simulate_command.hpp"

#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/task_cost.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/export.hpp"
#include "mgt/planner/inspect.hpp"
#include "mgt/planner/plans_report.hpp"
#include "mgt/planner/search.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <climits>
#include <cstdio>
#include <optional>
#include <utility>
#include <iostream>

namespace mgt::cli {

int64_t parse_size(const std::string& text, const std::string& flag) {
  const std::string hint = "give a positive integer, optionally with K, M or G (powers of 2), e.g. 4M";
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    throw ir::InputError(flag, "", "expected a size, got \"" + text + "\"", hint);
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    throw ir::InputError(flag, "", "size \"" + text + "\" does not fit in 64 bits", hint);
  }
  int shift = 0;
  const std::string suffix = text.substr(used);
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty()) throw ir::InputError(flag, "", "unknown size suffix \"" + suffix + "\"", hint);
  if (value <= 0) throw ir::InputError(flag, "", "must be positive, got " + text, hint);
  if (value > (INT64_MAX >> shift)) throw ir::InputError(flag, "", "size \"" + text + "\" overflows 64 bits", hint);
  return int64_t(value) << shift;
}

std::string framework_of_emit(const std::string& emit) {
  switch (plan::export_format_from_string(emit)) {
    case plan::ExportFormat::accelerate:
    case plan::ExportFormat::axolotl: return "pytorch-fsdp";
    case plan::ExportFormat::torchtitan:
    case plan::ExportFormat::torchtitan_0_2: return "torchtitan";
    case plan::ExportFormat::megatron: return "megatron-core";
    case plan::ExportFormat::deepspeed: return "deepspeed";
  }
  return "";
}

int64_t parse_gpu_count(const std::string& text) {
  const std::string hint = "give the number of GPUs, 1 to " + std::to_string(kMaxGpus) + ", e.g. --gpus 8";
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    if (!text.empty() && text[0] == '-') throw ir::InputError("--gpus", "", "must be positive, got " + text, hint);
    throw ir::InputError("--gpus", "", "expected a whole number, got \"" + text + "\"", hint);
  }
  if (text.size() > 7 || std::stoll(text) > kMaxGpus)
    throw ir::InputError("--gpus", "", text + " is more GPUs than mgt plans for", hint);
  const int64_t gpus = std::stoll(text);
  if (gpus <= 0) throw ir::InputError("--gpus", "", "must be positive, got " + text, hint);
  return gpus;
}

namespace {

int64_t default_seq_len(const ir::Graph& graph) {
  constexpr int64_t kDefault = 8192;  // torchtitan's and Llama 3 pre-training's sequence length
  return graph.info.max_seq_len > 0 ? std::min(kDefault, graph.info.max_seq_len) : kDefault;
}

void check_seq_len(int64_t seq_len, const ir::Graph& graph) {
  if (graph.info.max_seq_len > 0 && seq_len > graph.info.max_seq_len)
    throw ir::InputError("--seq-len", "", std::to_string(seq_len) + " exceeds the model's max_position_embeddings " +
                                              std::to_string(graph.info.max_seq_len),
                         "use --seq-len " + std::to_string(graph.info.max_seq_len) + " or less");
}

// About 4M tokens per step (Llama 3 pre-training's early batch; 512 x 8192): the largest power-of-two
// number of sequences within 4,194,304 tokens, so that the batch splits over power-of-two meshes.
ir::Task parse_task(const PlanOptions& o) {
  const auto task = ir::task_from_string(o.task);
  if (!task)
    throw ir::InputError("--task", "", "unknown task \"" + o.task + "\"", "use pretrain, sft, lora or qlora");
  return *task;
}

ir::LoraSettings parse_lora(const PlanOptions& o) {
  ir::LoraSettings lora;
  if (o.lora_rank < 1 || o.lora_rank > 65536)
    throw ir::InputError("--lora-rank", "", "must be in [1, 65536], got " + std::to_string(o.lora_rank),
                         "use a rank such as 8, 16 or 64");
  lora.rank = o.lora_rank;
  lora.alpha = 2 * o.lora_rank;  // PEFT / Axolotl examples: alpha = 2 r
  lora.targets.clear();
  std::string name;
  for (size_t i = 0; i <= o.lora_targets.size(); ++i) {
    if (i < o.lora_targets.size() && o.lora_targets[i] != ',') {
      name += o.lora_targets[i];
      continue;
    }
    if (name.empty())
      throw ir::InputError("--lora-targets", "", "empty projection name in \"" + o.lora_targets + "\"",
                           "give comma-separated names such as q,k,v,o,gate,up,down");
    lora.targets.push_back(name);
    name.clear();
  }
  return lora;
}

// A target list that names no projection of the model would plan LoRA with nothing to train.
void check_lora_targets(const ir::Graph& graph, const ir::LoraSettings& lora) {
  for (const auto& block : graph.blocks)
    for (const auto& op : block.ops)
      if (op.kind == ir::OpKind::contraction && cost::is_lora_target(op.name, lora)) return;
  throw ir::InputError("--lora-targets", "", "no contraction of the model is named <target>_proj or <target>",
                       "name projections of this model, e.g. q,k,v,o,gate,up,down (mgt-plan inspect lists the ops)");
}

// LoRA / QLoRA exports only where the format has adapter keys, and a model that is not a causal
// language model only where the format trains it: refused before searching, with the exporter's own
// words (export_refusal), rather than as "no plan" after rejecting every candidate.
void check_exportable(const std::optional<plan::ExportFormat>& format, const ir::TrainingSettings& settings,
                      const ir::Graph& graph) {
  if (!format) return;
  plan::ExportContext probe;
  probe.task = settings.task;
  probe.non_causal_model = plan::non_causal_model_of(graph);
  if (auto refusal = plan::export_refusal(*format, probe); refusal && (refusal->field == "task" || refusal->field == "model"))
    throw ir::InputError("--emit " + plan::export_format_names()[size_t(*format)], refusal->field, refusal->problem,
                         refusal->hint);
}

int64_t default_global_batch_tokens(int64_t seq_len) {
  int64_t seqs = 1;
  while (seqs * 2 * seq_len <= (4ll << 20)) seqs *= 2;
  return seqs * seq_len;
}

// Loads the model and cluster and resolves the settings, validating every flag.
struct Loaded {
  ir::Graph graph;
  ir::ClusterSpec cluster;
  RunContext run;
  ProgressLine* progress = nullptr;  ///< shown by the extra searches behind an answer (search_with)
  std::optional<cost::FrameworkProfile> framework;  ///< --framework (or --emit's); none: the defaults
  std::string rule_framework;  ///< --framework or --emit as given: whose own planning rules apply (RuleOptions)
  cost::CostParams params;                          ///< what the estimator prices with
};

// --framework, else --emit's framework; an unknown name gets the default profile, said on stderr.
std::optional<cost::FrameworkProfile> resolve_framework(const PlanOptions& o, const std::string& emit) {
  const std::string name = !o.framework.empty() ? o.framework : (emit.empty() ? "" : framework_of_emit(emit));
  if (name.empty()) return std::nullopt;
  const cost::FrameworkSelection selected = cost::select_framework(name);
  if (!selected.known) {
    std::string names;
    for (const auto& n : cost::framework_profile_names()) names += (names.empty() ? "" : ", ") + n;
    cost::warn_once("--framework " + name + " has no profile; the default " + selected.profile.name +
                    " profile is used (profiles: " + names + ")");
  }
  // A phrase ("megatron-core ep-a2a-overlap") says how it was read, so a misspelt feature is seen.
  for (const auto& note : selected.notes)
    if (note.find(" read as ") != std::string::npos) cost::warn_once("--framework: " + note);
  if (selected.profile.ep_a2a_overlap) cost::warn_once("--framework: " + selected.profile.name + " with ep-a2a-overlap");
  return selected.profile;
}

// The exported configs carry the plan, not the data pipeline: packing is set where the data is
// built, so say so instead of dropping it silently.
void note_packing_not_exported(const cost::TrainingSettings& settings) {
  if (settings.document_tokens <= 0) return;
  std::fprintf(stderr,
               "note: priced with packed documents of %lld tokens (--document-tokens); the config above does not pack "
               "data: enable packing where your data is built (Axolotl sample_packing, torchtitan's block-causal "
               "attention mask, Megatron --reset-position-ids --reset-attention-mask)\n",
               static_cast<long long>(settings.document_tokens));
}

Loaded load(const PlanOptions& o, const std::string& emit = "") {
  if (o.gpus <= 0 || o.gpus > kMaxGpus)
    throw ir::InputError("--gpus", "", "must be in 1.." + std::to_string(kMaxGpus) + ", got " + std::to_string(o.gpus),
                         "e.g. --gpus 8");
  Loaded l{ir::load_model(o.model_path), ir::load_cluster(o.cluster), {}, nullptr, std::nullopt, {}, {}};
  cost::TrainingSettings settings;
  settings.seq_len = o.seq_len ? parse_size(*o.seq_len, "--seq-len") : default_seq_len(l.graph);
  check_seq_len(settings.seq_len, l.graph);
  if (o.global_batch_tokens) {
    settings.global_batch_tokens = parse_size(*o.global_batch_tokens, "--global-batch-tokens");
  } else if (o.global_batch_seqs) {  // sequences x seq_len; the flag parser rejects both given
    settings.global_batch_tokens = ir::checked_mul(parse_size(*o.global_batch_seqs, "--global-batch"), settings.seq_len,
                                                   "--global-batch", "sequences x --seq-len");
  } else {
    settings.global_batch_tokens = default_global_batch_tokens(settings.seq_len);
  }
  if (o.document_tokens) {
    settings.document_tokens = parse_size(*o.document_tokens, "--document-tokens");
    if (settings.document_tokens > settings.seq_len)
      throw ir::InputError("--document-tokens", "",
                           std::to_string(settings.document_tokens) + " is longer than a sequence (--seq-len " +
                               std::to_string(settings.seq_len) + ")",
                           "give documents of at most --seq-len tokens, or leave the flag out (one document per sequence)");
  }
  if (settings.global_batch_tokens % settings.seq_len != 0)
    throw ir::InputError("--global-batch-tokens", "",
                         std::to_string(settings.global_batch_tokens) + " tokens is not a whole number of " +
                             std::to_string(settings.seq_len) + "-token sequences",
                         "use a multiple of --seq-len");
  // Default: bf16 mixed precision on GPUs; fp32 on the CPU backend (gpu.arch cpu), which computes
  // and communicates in fp32 only.
  const std::string precision =
      !o.precision.empty() ? o.precision : (l.cluster.gpu.arch == ir::GpuArch::cpu ? "fp32" : "bf16");
  if (precision == "fp32") {
    settings.compute_dtype = ir::DType::f32;
  } else if (precision == "bf16") {
    settings.compute_dtype = ir::DType::bf16;
  } else if (precision == "fp16") {
    settings.compute_dtype = ir::DType::f16;
  } else if (precision == "fp8" || precision == "mxfp8" || precision == "nvfp4") {
    settings.compute_dtype = ir::DType::bf16;
    settings.fp8_linears = true;
    settings.linear_format = precision == "fp8"     ? ir::LinearFormat::fp8
                             : precision == "mxfp8" ? ir::LinearFormat::mxfp8
                                                    : ir::LinearFormat::nvfp4;
    if (precision == "fp8" && l.cluster.gpu.peak_fp8_flops_per_s <= 0)
      throw ir::InputError("--precision", "", "fp8 needs fp8 tensor cores; " + l.cluster.gpu.name + " has none (it supports " +
                                                  cost::supported_precisions(l.cluster.gpu) + ")",
                           "use --precision bf16, or a Hopper or newer cluster");
    cost::linear_gemm_peak_flops_per_s(l.cluster.gpu, settings.linear_format, settings.compute_dtype);  // refuses pre-Blackwell
  } else {
    throw ir::InputError("--precision", "", "unknown precision \"" + precision + "\"",
                         "use bf16, fp16, fp8, mxfp8, nvfp4 or fp32");
  }
  l.framework = resolve_framework(o, emit);
  l.rule_framework = !o.framework.empty() ? o.framework : emit;
  l.params = l.framework ? cost::cost_params_for(l.cluster.gpu, *l.framework) : cost::default_cost_params(l.cluster.gpu);
  if (l.framework) cost::apply_plan_semantics(*l.framework, settings);
  settings.task = parse_task(o);
  settings.lora = parse_lora(o);
  if (settings.frozen_base()) check_lora_targets(l.graph, settings.lora);
  l.run.model_path = o.model_path;
  l.run.cluster_arg = o.cluster;
  l.run.num_gpus = o.gpus;
  l.run.settings = settings;
  l.run.seq_len_defaulted = !o.seq_len;
  l.run.batch_defaulted = !o.global_batch_tokens && !o.global_batch_seqs;
  return l;
}

}  // namespace

namespace {

std::string fixed3(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", value);
  return buf;
}

// The same search for another GPU count or batch: top 1, the same settings, rules and target.
plan::SearchResult search_with(const Loaded& l, const PlanOptions& o, int64_t gpus, int64_t batch_tokens,
                               std::optional<plan::ExportFormat> emit) {
  cost::TrainingSettings settings = l.run.settings;
  settings.global_batch_tokens = batch_tokens;
  const cost::Estimator estimator(l.graph, l.cluster, gpus, settings, l.params);
  plan::SearchOptions options;
  options.rules = {gpus, o.allow_cross_node_tp, l.rule_framework};
  options.top = 1;
  options.emit = emit;
  if (l.progress)
    options.on_progress = [&l, gpus, batch_tokens](int64_t done, int64_t total) {
      l.progress->update("trying " + std::to_string(gpus) + " GPUs, " + std::to_string(batch_tokens) + " tokens", done,
                         total);
    };
  if (l.framework) plan::restrict_to_framework(options, *l.framework);
  return plan::search(estimator, options);
}

// Erases the progress line before an answer is printed.
void end_progress(const Loaded& l) {
  if (l.progress) l.progress->finish();
}

// The nearest GPU counts below and above `gpus` that give a plan, trying node multiples and powers
// of two only (at most kTries searches each way, so a "no plan" answer stays fast). 0 = none found.
int64_t nearest_gpus_with_plan(const Loaded& l, const PlanOptions& o, std::optional<plan::ExportFormat> emit,
                               bool above) {
  constexpr int kTries = 4;
  const int64_t g = l.run.num_gpus;
  const int64_t node = std::max<int64_t>(1, l.cluster.gpus_per_node);
  std::vector<int64_t> counts;
  for (int64_t k = 1; k <= kTries; ++k) {
    const int64_t m = above ? (g / node + k) * node : ((g - 1) / node - (k - 1)) * node;
    if (m > 0 && m <= kMaxGpus) counts.push_back(m);
  }
  for (int64_t p = 1; p <= kMaxGpus; p *= 2)
    if (above ? p > g : p < g) counts.push_back(p);
  std::sort(counts.begin(), counts.end(), [&](int64_t a, int64_t b) { return std::llabs(a - g) < std::llabs(b - g); });
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  for (size_t i = 0; i < counts.size() && i < size_t(kTries); ++i)
    if (!search_with(l, o, counts[i], l.run.settings.global_batch_tokens, emit).plans.empty()) return counts[i];
  return 0;
}

// The smallest GPU count above `gpus`, among node multiples and powers of two, at which some plan
// fits, with that plan; searched upward from the 16-bytes-per-parameter floor (min_gpus_for_states),
// at most kTries searches (each well under a second at these counts). nullopt when none is found.
struct Enough {
  int64_t gpus = 0;
  cost::Estimate best;
};
std::optional<Enough> smallest_gpus_with_plan(const Loaded& l, const PlanOptions& o, const cost::Estimator& estimator,
                                              std::optional<plan::ExportFormat> emit) {
  constexpr int kTries = 24;
  const int64_t node = std::max<int64_t>(1, l.cluster.gpus_per_node);
  int64_t g = std::max(l.run.num_gpus + 1, plan::min_gpus_for_states(estimator));
  for (int tries = 0; tries < kTries && g <= kMaxGpus; ++tries) {
    // The next count >= g that is a node multiple or a power of two.
    int64_t pow2 = 1;
    while (pow2 < g) pow2 *= 2;
    g = std::min((g + node - 1) / node * node, pow2);
    if (g > kMaxGpus) break;
    plan::SearchResult r = search_with(l, o, g, l.run.settings.global_batch_tokens, emit);
    if (!r.plans.empty()) return Enough{g, std::move(r.plans.front())};
    ++g;
  }
  return std::nullopt;
}

// A model too big for --gpus (no plan below it either): "needs at least N GPUs", N and its best plan
// found by searching upward, else the 16-bytes-per-parameter floor. False when memory is not the cause.
bool explain_too_few_gpus(const Loaded& l, const PlanOptions& o, const cost::Estimator& estimator,
                          const plan::SearchResult& result, std::optional<plan::ExportFormat> emit) {
  // The 16-bytes-per-parameter floor is full training's; LoRA's frozen base needs far less (the
  // nearest GPU count that has a plan answers instead).
  if (l.run.settings.frozen_base()) return false;
  if (result.min_rejected_peak_bytes == 0 || nearest_gpus_with_plan(l, o, emit, /*above=*/false) > 0) return false;
  const std::string head = "mgt-plan: " + l.graph.info.name + " needs at least ";
  const std::string gpu = " GPUs of this kind (" + l.cluster.gpu.name + ")";
  if (const auto enough = smallest_gpus_with_plan(l, o, estimator, emit)) {
    end_progress(l);
    std::cerr << head << enough->gpus << gpu << ": on " << o.gpus << " every plan needs more than "
              << format_gib(l.cluster.gpu.hbm_bytes) << " GiB per GPU; the best plan on " << enough->gpus
              << " GPUs is " << ir::to_string(enough->best.plan) << " -- " << format_gib(enough->best.memory.peak_bytes)
              << " GiB per GPU, " << fixed3(enough->best.step_time_s) << " s/step (hint: --gpus " << enough->gpus
              << ")\n";
    return true;
  }
  const int64_t floor = plan::min_gpus_for_states(estimator);
  if (floor <= o.gpus) return false;
  end_progress(l);
  std::cerr << head << floor << gpu << ": 16 bytes per parameter for fp32 weights, gradients and AdamW states, "
            << "fully sharded, before activations; --gpus is " << o.gpus << "\n";
  return true;
}

// "; plans exist for 8 or 16 GPUs, or for 12 GPUs with --global-batch-tokens 4227072 (516 sequences)",
// found by searching them; empty when none of the few tried gives a plan.
std::string nearest_answers(const Loaded& l, const PlanOptions& o, std::optional<plan::ExportFormat> emit) {
  const int64_t g = l.run.num_gpus;
  std::vector<std::string> options;
  const int64_t below = nearest_gpus_with_plan(l, o, emit, false), up = nearest_gpus_with_plan(l, o, emit, true);
  if (below > 0 || up > 0)
    options.push_back(below > 0 && up > 0 ? std::to_string(below) + " or " + std::to_string(up) + " GPUs"
                                          : std::to_string(below > 0 ? below : up) + " GPUs");
  // Batches of whole multiples of the GPU count split over any data-parallel size; nearest first.
  const int64_t seq_len = l.run.settings.seq_len, seqs = l.run.settings.global_batch_tokens / seq_len;
  std::vector<int64_t> batches;
  for (int64_t s : {seqs / g * g, (seqs + g - 1) / g * g, (seqs / g + 1) * g})
    if (s > 0 && s != seqs && std::find(batches.begin(), batches.end(), s) == batches.end()) batches.push_back(s);
  std::stable_sort(batches.begin(), batches.end(),
                   [&](int64_t a, int64_t b) { return std::llabs(a - seqs) < std::llabs(b - seqs); });
  for (int64_t s : batches)
    if (!search_with(l, o, g, s * seq_len, emit).plans.empty()) {
      options.push_back(std::to_string(g) + " GPUs with --global-batch-tokens " + std::to_string(s * seq_len) + " (" +
                        std::to_string(s) + " sequences)");
      break;
    }
  if (options.empty()) return "";
  return "; plans exist for " + options.front() + (options.size() > 1 ? ", or for " + options[1] : "");
}

// What counts as a plan that leaves the GPUs mostly idle (warn_if_absurd), and the tokens per GPU per
// step a suggested batch aims for.
constexpr double kMinMfu = 0.05;
constexpr int64_t kMinTokensPerGpu = 1024, kGoodTokensPerGpu = 8192;

// A larger batch and the MFU of its best plan, found by searching: doublings of the batch from the
// smallest that gives each GPU kGoodTokensPerGpu tokens (or from twice the batch when it already
// does: then the plan is bound by per-step communication, which more tokens amortise), at most
// kTries searches, stopping at the first with MFU >= kMinMfu. Nullopt when none beats `top`.
std::optional<std::pair<int64_t, double>> larger_batch(const Loaded& l, const PlanOptions& o, const cost::Estimate& top,
                                                       int64_t first, std::optional<plan::ExportFormat> emit) {
  constexpr int kTries = 4;
  std::optional<std::pair<int64_t, double>> best;
  for (int64_t batch = first, tries = 0; tries < kTries && batch <= (INT64_MAX >> 2); batch *= 2, ++tries) {
    const plan::SearchResult r = search_with(l, o, l.run.num_gpus, batch, emit);
    if (r.plans.empty()) continue;
    const double mfu = r.plans.front().mfu;
    if (mfu > top.mfu && (!best || mfu > best->second)) best = {batch, mfu};
    if (mfu >= kMinMfu) break;
  }
  return best;
}

// A plan that leaves the GPUs mostly idle: MFU under 5%, or too few tokens per GPU per step to fill
// the matrix units (under 1024: a few rows per GEMM). Warns on stderr with a batch found by searching.
void warn_if_absurd(const Loaded& l, const PlanOptions& o, const cost::Estimate& top,
                    std::optional<plan::ExportFormat> emit) {
  const int64_t g = l.run.num_gpus, batch = l.run.settings.global_batch_tokens, seq_len = l.run.settings.seq_len;
  const int64_t per_gpu = batch / g;
  if (top.mfu >= kMinMfu && per_gpu >= kMinTokensPerGpu) return;
  int64_t first = batch;
  while (first / g < kGoodTokensPerGpu && first <= (INT64_MAX >> 2)) first *= 2;
  if (first == batch) first = batch * 2;
  first = (first + seq_len - 1) / seq_len * seq_len;
  // Past 2^16 GPUs one search takes tens of seconds: name the batch without searching it.
  constexpr int64_t kMaxGpusSearchedAgain = 1 << 16;
  std::string advice = " (hint: raise --global-batch-tokens, or plan for fewer GPUs)\n";
  if (g > kMaxGpusSearchedAgain) {
    advice = "; try --global-batch-tokens " + std::to_string(first) + " (" + std::to_string(first / g) +
             " tokens per GPU) (hint: raise the batch, or plan for fewer GPUs)\n";
  } else if (const auto better = larger_batch(l, o, top, first, emit)) {
    advice = "; --global-batch-tokens " + std::to_string(better->first) + " gives MFU " + fixed3(better->second) +
             " (hint: raise the batch, or plan for fewer GPUs)\n";
  }
  end_progress(l);
  std::cerr << "mgt-plan: warning: the top plan keeps the GPUs mostly idle: MFU " << fixed3(top.mfu) << ", "
            << per_gpu << " tokens per GPU per step (" << batch << " tokens over " << g << " GPUs)" << advice;
}

// --emit with no plan: the target's refusals, or the usual answer when no plan passes the rules at all.
int no_plan_for_emit(const Loaded& l, const PlanOptions& o, const plan::SearchResult& result, plan::ExportFormat format,
                     const std::string& emit) {
  std::cerr << format_rejections(result);
  std::cerr.flush();
  const std::string refused = "--emit " + emit + " cannot express it: ";
  int64_t refusals = 0;
  for (const auto& [reason, n] : result.rejected)
    if (reason.rfind(refused, 0) == 0) refusals += n;
  const plan::SearchResult any = search_with(l, o, o.gpus, l.run.settings.global_batch_tokens, std::nullopt);
  const std::string nearest = nearest_answers(l, o, format);
  end_progress(l);
  if (refusals > 0 && !any.plans.empty()) {
    // What the target can express was estimated and did not fit: say by how much, for its lightest plan.
    // What the target can express was estimated and did not fit: say by how much, for its lightest
    // plan; else its plans broke rules before any estimate: name the commonest.
    std::string memory;
    if (result.min_rejected_peak_plan) {
      memory = "every plan " + emit + " can express needs more than " + format_gib(l.cluster.gpu.hbm_bytes) +
               " GiB per GPU (the lightest, " + ir::to_string(*result.min_rejected_peak_plan) + ", needs " +
               format_gib(result.min_rejected_peak_bytes) + " GiB), and ";
    } else if (!result.expressible_rule_breaks.empty()) {
      const auto commonest = std::max_element(result.expressible_rule_breaks.begin(), result.expressible_rule_breaks.end(),
                                              [](const auto& a, const auto& b) { return a.second < b.second; });
      int64_t breaks = 0;
      for (const auto& [reason, n] : result.expressible_rule_breaks) breaks += n;
      memory = "every plan " + emit + " can express breaks a rule (" + std::to_string(breaks) + " candidates; most often: " +
               commonest->first + "), and ";
    }
    std::cerr << "mgt-plan: no plan for " << o.gpus << " GPUs can be written for " << emit << ": " << memory << refusals
              << " candidates that pass the rules are plans " << emit << " cannot express (reasons above), e.g. the "
              << "best plan, " << ir::to_string(any.plans.front().plan) << nearest
              << " (hint: choose another --emit format, e.g. megatron or torchtitan)\n";
  } else {
    std::cerr << "mgt-plan: no valid plan for " << o.gpus << " GPUs: every candidate was rejected (reasons above)"
              << nearest << " (hint: change --gpus, --seq-len or --global-batch-tokens)\n";
  }
  return 1;
}

}  // namespace

int run_search(const PlanOptions& o, int64_t top, const std::string& emit) {
  if (top <= 0) throw ir::InputError("--top", "", "must be positive, got " + std::to_string(top));
  std::optional<plan::ExportFormat> format;
  if (!emit.empty()) format = plan::export_format_from_string(emit);
  Loaded l = load(o, emit);
  l.run.graph = &l.graph;
  l.run.cluster = &l.cluster;
  check_exportable(format, l.run.settings, l.graph);
  const cost::Estimator estimator(l.graph, l.cluster, o.gpus, l.run.settings, l.params);
  plan::SearchOptions options;
  options.rules = {o.gpus, o.allow_cross_node_tp, l.rule_framework};
  options.top = top;
  options.emit = format;  // rank only what the target framework can express
  ProgressLine progress = ProgressLine::for_stderr(o.json);
  options.on_progress = [&progress](int64_t done, int64_t total) { progress.update("searching plans", done, total); };
  if (l.framework) plan::restrict_to_framework(options, *l.framework);  // ... and what its profile offers
  const plan::SearchResult result = plan::search(estimator, options);
  progress.finish();
  l.progress = &progress;  // the searches behind an answer show it too
  const int64_t hbm = l.cluster.gpu.hbm_bytes;

  if (format) {
    if (result.plans.empty()) return no_plan_for_emit(l, o, result, *format, emit);
    const cost::Estimate& best = result.plans.front();
    plan::ExportContext ctx{best.plan, o.model_path, l.graph.info.name, o.gpus, l.cluster.gpus_per_node,
                            l.run.settings.seq_len, l.run.settings.global_batch_seqs(), l.graph.info.num_layers,
                            l.run.settings.task, l.run.settings.lora, plan::non_causal_model_of(l.graph),
                            ir::mtp_depths(l.graph), l.graph.info.num_experts, l.graph.info.has_mla,
                            l.params.gradient_bytes, l.params.ep_comm_hidden_fraction > 0};
    std::cout << plan::export_plan(*format, ctx);
    note_packing_not_exported(l.run.settings);
    std::cerr << format_recommendation(best, hbm);
    warn_if_absurd(l, o, best, format);
    return 0;
  }
  if (o.json) {
    const plan::PlansReport report =
        plan::make_plans_report(l.graph, o.model_path, l.cluster, o.gpus, l.run.settings, result);
    std::cout << plan::to_json(report).dump(2) << "\n";
    if (!result.plans.empty()) warn_if_absurd(l, o, result.plans.front(), format);
    return result.plans.empty() ? 1 : 0;
  }
  std::cout << format_header(l.run) << "\n";
  if (!result.plans.empty()) std::cout << format_table(result.plans, hbm) << "\n";
  std::cout << format_rejections(result);
  if (result.plans.empty()) {
    std::cout.flush();  // the table and reasons first, then the answer
    if (!explain_too_few_gpus(l, o, estimator, result, format)) {
      const std::string nearest = nearest_answers(l, o, format);
      end_progress(l);
      std::cerr << "mgt-plan: no valid plan for " << o.gpus << " GPUs: every candidate was rejected (reasons above)"
                << nearest << " (hint: change --gpus, --seq-len or --global-batch-tokens)\n";
    }
    return 1;
  }
  std::cout << "\n" << format_recommendation(result.plans.front(), hbm);
  std::cout.flush();
  warn_if_absurd(l, o, result.plans.front(), format);
  return 0;
}

namespace {
// Loads everything a single-plan command needs and checks the plan against the planner's rules.
Loaded load_for_plan(const PlanOptions& o, const ir::Plan& plan, const std::string& emit = "") {
  Loaded l = load(o, emit);
  const plan::ModelFacts facts = plan::model_facts(l.graph);
  if (auto broken = plan::first_broken_rule(plan, facts, l.cluster, l.run.settings,
                                                    {o.gpus, o.allow_cross_node_tp, l.rule_framework}))
    throw ir::InputError("--plan", "", *broken, "change the plan or the flags");
  return l;
}
}  // namespace

int run_simulate(const PlanOptions& o, const std::string& plan_text, const std::string& trace_path,
                 const std::string& svg_path) {
  const ir::Plan plan = ir::parse_plan_argument(plan_text);
  const Loaded l = load_for_plan(o, plan);
  return run_simulate(l.graph, l.cluster, plan, l.run.settings, o.gpus, trace_path, svg_path, o.json, l.params);
}

int run_compile(const PlanOptions& o, const std::string& plan_text, const std::string& out_path, bool text) {
  const ir::Plan plan = ir::parse_plan_argument(plan_text);
  const Loaded l = load_for_plan(o, plan);
  return run_compile(l.graph, l.cluster, plan, l.run.settings, o.gpus, out_path, text, l.params);
}

int run_estimate(const PlanOptions& o, const std::string& plan_text, const std::string& emit) {
  std::optional<plan::ExportFormat> format;
  if (!emit.empty()) format = plan::export_format_from_string(emit);
  const ir::Plan plan = ir::parse_plan_argument(plan_text);
  Loaded l = load_for_plan(o, plan, emit);
  l.run.graph = &l.graph;
  l.run.cluster = &l.cluster;
  check_exportable(format, l.run.settings, l.graph);
  const cost::Estimator estimator(l.graph, l.cluster, o.gpus, l.run.settings, l.params);
  const cost::Estimate e = estimator.estimate(plan);
  // A NaN, infinite or negative estimate is no answer (the search rejects such plans the same way).
  if (auto why = plan::estimate_out_of_range(e)) throw ir::InputError(o.cluster, "", "plan " + ir::to_string(e.plan) + ": " + *why);
  const int64_t hbm = l.cluster.gpu.hbm_bytes;
  if (format) {
    // The given plan, exactly: the estimate's resolved plan carries grad_accum from the global batch.
    plan::ExportContext ctx{e.plan, o.model_path, l.graph.info.name, o.gpus, l.cluster.gpus_per_node,
                            l.run.settings.seq_len, l.run.settings.global_batch_seqs(), l.graph.info.num_layers,
                            l.run.settings.task, l.run.settings.lora, plan::non_causal_model_of(l.graph),
                            ir::mtp_depths(l.graph), l.graph.info.num_experts, l.graph.info.has_mla,
                            l.params.gradient_bytes, l.params.ep_comm_hidden_fraction > 0};
    std::cout << plan::export_plan(*format, ctx);
    note_packing_not_exported(l.run.settings);
    std::cerr << format_breakdown(e, hbm);
    if (e.memory.peak_bytes > hbm)
      std::cerr << "does not fit: needs " << format_gib(e.memory.peak_bytes) << " GiB > " << format_gib(hbm) << " GiB\n";
    return e.memory.peak_bytes > hbm ? 1 : 0;
  }
  if (o.json) {
    std::cout << plan::to_json(plan::RankedEstimate{1, hbm, e}).dump(2) << "\n";
  } else {
    std::cout << format_header(l.run) << "\n" << format_breakdown(e, hbm);
    if (e.memory.peak_bytes > hbm) std::cout << "does not fit: needs " << format_gib(e.memory.peak_bytes) << " GiB > "
                                             << format_gib(hbm) << " GiB\n";
  }
  return e.memory.peak_bytes > hbm ? 1 : 0;
}

int run_inspect(const std::string& model_path, const std::optional<std::string>& seq_len_text, bool json) {
  const ir::Graph graph = ir::load_model(model_path);
  const int64_t seq_len = seq_len_text ? parse_size(*seq_len_text, "--seq-len") : default_seq_len(graph);
  check_seq_len(seq_len, graph);
  const plan::ModelInspection m = plan::inspect_model(graph, seq_len);
  if (json) {
    std::cout << plan::to_json(m).dump(2) << "\n";
    return 0;
  }
  std::printf("%s (%s)\n", m.model.c_str(), m.architecture.c_str());
  std::printf("parameters: %lld", (long long)m.params_total);
  if (m.num_experts > 0) std::printf(" total, %lld active per token", (long long)m.params_active);
  std::printf("\ntraining FLOPs per token at seq_len %lld: %.4g (fwd + bwd, incl. attention: halved under a causal mask)\n",
              (long long)seq_len, m.training_flops_per_token);
  // The name column is as wide as the longest block name (global_moe_layer_35), so the columns stay aligned.
  int name_width = 14;
  for (const plan::InspectedBlock& b : m.blocks) name_width = std::max(name_width, int(b.name.size()));
  std::printf("%-*s %7s %16s %20s\n", name_width, "block", "repeat", "params/copy", "train FLOPs/token/copy");
  for (const plan::InspectedBlock& b : m.blocks)
    std::printf("%-*s %7lld %16lld %20.4g\n", name_width, b.name.c_str(), (long long)b.repeat,
                (long long)b.params_per_copy, b.training_flops_per_token_per_copy);
  return 0;
}

}  // namespace mgt::cli
