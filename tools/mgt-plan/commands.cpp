// The mgt-plan subcommands: load inputs, call the planner / estimator, print.
#include "commands.hpp"

#include "compile_command.hpp"
#include "report.hpp"
#include "simulate_command.hpp"

#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/planner/export.hpp"
#include "mgt/planner/search.hpp"

#include <cctype>
#include <climits>
#include <cstdio>
#include <optional>
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
};

Loaded load(const PlanOptions& o) {
  if (o.gpus <= 0 || o.gpus > kMaxGpus)
    throw ir::InputError("--gpus", "", "must be in 1.." + std::to_string(kMaxGpus) + ", got " + std::to_string(o.gpus),
                         "e.g. --gpus 8");
  Loaded l{ir::load_model(o.model_path), ir::load_cluster(o.cluster), {}};
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
  } else if (precision == "fp8") {
    settings.compute_dtype = ir::DType::bf16;
    settings.fp8_linears = true;
    if (l.cluster.gpu.peak_fp8_flops_per_s <= 0)
      throw ir::InputError("--precision", "", "fp8 needs fp8 tensor cores; " + l.cluster.gpu.name + " has none",
                           "use --precision bf16, or a Hopper or newer cluster");
  } else {
    throw ir::InputError("--precision", "", "unknown precision \"" + precision + "\"", "use bf16, fp16, fp8 or fp32");
  }
  l.run.model_path = o.model_path;
  l.run.cluster_arg = o.cluster;
  l.run.num_gpus = o.gpus;
  l.run.settings = settings;
  l.run.seq_len_defaulted = !o.seq_len;
  l.run.batch_defaulted = !o.global_batch_tokens && !o.global_batch_seqs;
  return l;
}

}  // namespace

int run_search(const PlanOptions& o, int64_t top, const std::string& emit) {
  if (top <= 0) throw ir::InputError("--top", "", "must be positive, got " + std::to_string(top));
  std::optional<plan::ExportFormat> format;
  if (!emit.empty()) format = plan::export_format_from_string(emit);
  Loaded l = load(o);
  l.run.graph = &l.graph;
  l.run.cluster = &l.cluster;
  const cost::Estimator estimator(l.graph, l.cluster, o.gpus, l.run.settings);
  plan::SearchOptions options;
  options.rules = {o.gpus, o.allow_cross_node_tp};
  options.top = top;
  const plan::SearchResult result = plan::search(estimator, options);
  const int64_t hbm = l.cluster.gpu.hbm_bytes;

  if (format) {
    // The best plan this framework can express: a plan it cannot (DeepSpeed with tp, Accelerate with
    // pipelines) is passed over with its reason, never silently changed.
    for (const auto& candidate : result.plans) {
      plan::ExportContext ctx{candidate.plan, o.model_path, l.graph.info.name, o.gpus, l.cluster.gpus_per_node,
                              l.run.settings.seq_len, l.run.settings.global_batch_seqs(), l.graph.info.num_layers};
      try {
        std::cout << plan::export_plan(*format, ctx);
      } catch (const ir::InputError& e) {
        std::cerr << "mgt-plan: passing over " << ir::to_string(candidate.plan) << ": " << e.what() << "\n";
        continue;
      }
      std::cerr << format_recommendation(candidate, hbm);
      return 0;
    }
    std::cerr << "mgt-plan: none of the " << result.plans.size() << " best plans can be written for " << emit
              << " (hint: raise --top, or choose another --emit format)\n";
    return 1;
  }
  if (o.json) {
    nlohmann::json doc = run_to_json(l.run);
    doc["format"] = "mgt.plans/1";
    doc["plans"] = nlohmann::json::array();
    for (size_t i = 0; i < result.plans.size(); ++i)
      doc["plans"].push_back(estimate_to_json(result.plans[i], int64_t(i) + 1, hbm));
    doc["evaluated"] = result.evaluated;
    doc["rejected"] = result.rejected;
    std::cout << doc.dump(2) << "\n";
    return result.plans.empty() ? 1 : 0;
  }
  std::cout << format_header(l.run) << "\n";
  if (!result.plans.empty()) std::cout << format_table(result.plans, hbm) << "\n";
  std::cout << format_rejections(result);
  if (result.plans.empty()) {
    const int64_t needed = plan::min_gpus_for_states(estimator);
    if (result.min_rejected_peak_bytes > 0 && needed > o.gpus) {
      std::cerr << "mgt-plan: " << l.graph.info.name << " needs at least " << needed << " GPUs of this kind ("
                << l.cluster.gpu.name << "): 16 bytes per parameter for fp32 weights, gradients and AdamW states, "
                << "fully sharded, before activations; --gpus is " << o.gpus << "\n";
    } else {
      std::cerr << "mgt-plan: no valid plan for " << o.gpus << " GPUs: every candidate was rejected (reasons above)"
                << " (hint: change --gpus, --seq-len or --global-batch-tokens)\n";
    }
    return 1;
  }
  std::cout << "\n" << format_recommendation(result.plans.front(), hbm);
  return 0;
}

namespace {
// Loads everything a single-plan command needs and checks the plan against the planner's rules.
Loaded load_for_plan(const PlanOptions& o, const ir::Plan& plan) {
  Loaded l = load(o);
  const plan::ModelFacts facts = plan::model_facts(l.graph);
  if (auto broken = plan::first_broken_rule(plan, facts, l.cluster, l.run.settings, {o.gpus, o.allow_cross_node_tp}))
    throw ir::InputError("--plan", "", *broken, "change the plan or the flags");
  return l;
}
}  // namespace

int run_simulate(const PlanOptions& o, const std::string& plan_text, const std::string& trace_path,
                 const std::string& svg_path) {
  const ir::Plan plan = ir::parse_plan_argument(plan_text);
  const Loaded l = load_for_plan(o, plan);
  return run_simulate(l.graph, l.cluster, plan, l.run.settings, o.gpus, trace_path, svg_path, o.json);
}

int run_compile(const PlanOptions& o, const std::string& plan_text, const std::string& out_path, bool text) {
  const ir::Plan plan = ir::parse_plan_argument(plan_text);
  const Loaded l = load_for_plan(o, plan);
  return run_compile(l.graph, l.cluster, plan, l.run.settings, o.gpus, out_path, text);
}

int run_estimate(const PlanOptions& o, const std::string& plan_text, const std::string& emit) {
  std::optional<plan::ExportFormat> format;
  if (!emit.empty()) format = plan::export_format_from_string(emit);
  const ir::Plan plan = ir::parse_plan_argument(plan_text);
  Loaded l = load_for_plan(o, plan);
  l.run.graph = &l.graph;
  l.run.cluster = &l.cluster;
  const cost::Estimator estimator(l.graph, l.cluster, o.gpus, l.run.settings);
  const cost::Estimate e = estimator.estimate(plan);
  const int64_t hbm = l.cluster.gpu.hbm_bytes;
  if (format) {
    // The given plan, exactly: the estimate's resolved plan carries grad_accum from the global batch.
    plan::ExportContext ctx{e.plan, o.model_path, l.graph.info.name, o.gpus, l.cluster.gpus_per_node,
                            l.run.settings.seq_len, l.run.settings.global_batch_seqs(), l.graph.info.num_layers};
    std::cout << plan::export_plan(*format, ctx);
    std::cerr << format_breakdown(e, hbm);
    if (e.memory.peak_bytes > hbm)
      std::cerr << "does not fit: needs " << format_gib(e.memory.peak_bytes) << " GiB > " << format_gib(hbm) << " GiB\n";
    return e.memory.peak_bytes > hbm ? 1 : 0;
  }
  if (o.json) {
    std::cout << estimate_to_json(e, 1, hbm).dump(2) << "\n";
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
  const auto counts = ir::count_parameters(graph);
  // Training FLOPs per token (fwd + bwd) from the same per-block model the estimator uses.
  const cost::ShardContext ctx{1, seq_len, 1, 1, false, ir::DType::bf16};
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");  // only the FLOP counts are used
  nlohmann::json blocks = nlohmann::json::array();
  double flops_per_token = 0;
  for (const auto& block : graph.blocks) {
    const cost::BlockCost c = cost::block_cost(block, ctx, cluster, {});
    int64_t params = 0;
    for (const auto& t : block.tensors)
      if (t.is_parameter) params += ir::num_elements(t);
    const double per_token = c.model_flops / double(seq_len);
    flops_per_token += per_token * double(block.repeat);
    blocks.push_back({{"name", block.name}, {"repeat", block.repeat}, {"params_per_copy", params},
                      {"training_flops_per_token_per_copy", per_token}, {"ops", block.ops.size()}});
  }
  const auto& info = graph.info;
  nlohmann::json doc = {{"format", "mgt.inspect/1"},
                        {"model", info.name},
                        {"architecture", info.architecture},
                        {"params_total", counts.total},
                        {"num_layers", info.num_layers},
                        {"hidden_size", info.hidden_size},
                        {"num_attention_heads", info.num_attention_heads},
                        {"num_kv_heads", info.num_kv_heads},
                        {"vocab_size", info.vocab_size},
                        {"seq_len", seq_len},
                        {"training_flops_per_token", flops_per_token},
                        {"blocks", blocks}};
  if (info.num_experts > 0) {
    doc["params_active"] = counts.active;
    doc["num_experts"] = info.num_experts;
    doc["experts_per_token"] = info.experts_per_token;
  }
  if (json) {
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::printf("%s (%s)\n", info.name.c_str(), info.architecture.c_str());
  std::printf("parameters: %lld", (long long)counts.total);
  if (info.num_experts > 0) std::printf(" total, %lld active per token", (long long)counts.active);
  std::printf("\ntraining FLOPs per token at seq_len %lld: %.4g (fwd + bwd, incl. causal attention)\n",
              (long long)seq_len, flops_per_token);
  std::printf("%-14s %7s %16s %20s\n", "block", "repeat", "params/copy", "train FLOPs/token/copy");
  for (const auto& b : blocks)
    std::printf("%-14s %7lld %16lld %20.4g\n", b["name"].get<std::string>().c_str(), (long long)b["repeat"].get<int64_t>(),
                (long long)b["params_per_copy"].get<int64_t>(), b["training_flops_per_token_per_copy"].get<double>());
  return 0;
}

}  // namespace mgt::cli
