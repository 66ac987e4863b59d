// The search (docs/planner.md §1): enumerate, reject by rule, estimate, reject by memory, rank.
#include "mgt/planner/search.hpp"

#include "mgt/ir/format.hpp"
#include "mgt/ir/layout.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace mgt::plan {

namespace {
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      out.push_back(d);
      if (d != n / d) out.push_back(n / d);
    }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether the expert groups (etp = ranks [1, etp], ep = (etp, etp*ep]) nest with tp, cp, dp_shard and
// dp_replicate: every cut of either factorisation divides the next (ir::expert_groups_nest, without
// building the mesh or throwing: the enumeration asks per combination).
bool expert_cuts_nest(int64_t tp, int64_t cp, int64_t dp_shard, int64_t dp_replicate, int64_t etp, int64_t ep) {
  std::array<int64_t, 7> cuts{1, tp, tp * cp, tp * cp * dp_shard, tp * cp * dp_shard * dp_replicate, etp, etp * ep};
  std::sort(cuts.begin(), cuts.end());
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    if (cuts[i + 1] % cuts[i] != 0) return false;
  return true;
}

// The (etp, ep) pairs the search proposes for one factorisation; etp = 0 means "tp" (the plan leaves
// it unset). ep within dp_shard x cp with etp = tp always; the rest as the options allow.
std::vector<std::pair<int64_t, int64_t>> expert_layouts(int64_t tp, int64_t cp, int64_t dp_shard, int64_t dp_replicate,
                                                        const SearchOptions& options) {
  std::vector<std::pair<int64_t, int64_t>> out{{0, 1}};
  if (options.num_experts <= 0) return out;
  const int64_t inside = dp_shard * cp, stage = tp * inside * dp_replicate;
  for (int64_t ep : divisors(inside))
    if (ep > 1 && options.num_experts % ep == 0) out.push_back({0, ep});
  if (options.expert_over_replicas)
    for (int64_t d : divisors(dp_replicate))
      if (d > 1 && options.num_experts % (inside * d) == 0) out.push_back({0, inside * d});
  if (!options.expert_tensor_parallel) return out;
  for (int64_t etp : divisors(tp)) {
    if (etp == tp) continue;
    for (int64_t ep : divisors(stage / etp)) {
      if (options.num_experts % ep != 0 || !expert_cuts_nest(tp, cp, dp_shard, dp_replicate, etp, ep)) continue;
      // ep beyond the tp ranks etp leaves and dp_shard x cp reaches into dp_replicate.
      if (!options.expert_over_replicas && etp * ep > tp * inside) continue;
      out.push_back({etp, ep});
    }
  }
  return out;
}

std::string emit_name(ExportFormat format) {
  return "--emit " + export_format_names()[size_t(format)];
}

std::string gib(int64_t bytes) { return ir::format_number("%.1f", double(bytes) / double(1ll << 30)); }
// A NaN's sign bit means nothing: "nan", never "-nan".
std::string number(double v) { return std::isnan(v) ? "nan" : ir::format_number("%.3g", v); }

// A time or size is usable when it is finite and positive (a term may be 0, never negative).
bool bad_total(double v) { return !std::isfinite(v) || v <= 0; }
bool bad_term(double v) { return !std::isfinite(v) || v < 0; }

int recompute_rank(ir::Recompute r) { return r == ir::Recompute::none ? 0 : (r == ir::Recompute::selective ? 1 : 2); }
}  // namespace

bool pipeline_split_proposed(int64_t num_layers, int64_t pp, int64_t vpp, int64_t mtp_depths) {
  if (vpp > 1 && num_layers < pp * vpp) return false;
  // Other per-rank counts and layouts (Megatron only) are estimated when a plan asks for them.
  const auto split = ir::PipelineSplit::choose(num_layers, pp, vpp, std::nullopt, mtp_depths);
  using Rule = ir::PipelineSplit::Rule;
  return split && (split->rule == Rule::even || split->rule == Rule::mtp_tail ||
                   (split->rule == Rule::account && split->embedding_as_layer));
}

std::vector<ir::Plan> enumerate_candidates(int64_t num_gpus, const SearchOptions& options) {
  std::vector<ir::Plan> out;
  const auto divs = divisors(num_gpus);
  for (int64_t pp : divs) {
    // The search proposes the splits every pipelining framework expresses: equal chunks, or the
    // embedding and loss counted as layers (torchtitan's less_layers say it too), and for a model
    // with multi-token prediction Megatron's layout around it (pipeline_split_proposed).
    if (pp > 1 && (options.num_layers == 0 || !pipeline_split_proposed(options.num_layers, pp, 1, options.mtp_depths)))
      continue;
    std::vector<int64_t> vpps{1};
    if (pp > 1)
      for (int64_t v = 2; v <= options.max_vpp; ++v)
        if (pipeline_split_proposed(options.num_layers, pp, v, options.mtp_depths)) vpps.push_back(v);
    const int64_t rest = num_gpus / pp;
    for (int64_t tp : divisors(rest))
      for (int64_t cp : divisors(rest / tp)) {
        const int64_t dp = rest / tp / cp;
        for (int64_t dp_shard : divisors(dp)) {
          static const std::vector<int64_t> kReplicated{0};
          const std::vector<int64_t>& zeros = dp_shard > 1 ? options.sharded_zero_stages : kReplicated;
          const auto experts = expert_layouts(tp, cp, dp_shard, dp / dp_shard, options);
          for (int64_t zero : zeros)
          if (zero != 2 || pp == 1 || !options.one_fsdp_stage_under_pipeline || !std::ranges::count(zeros, 3))
          for (int64_t vpp : vpps)
            for (const auto& [etp, ep] : experts)
              for (int64_t mbs : options.micro_batches)
                for (ir::Recompute r : options.recompute_modes) {
                  ir::Plan p;
                  if (zero == 1 || zero == 2) p.zero_stage = zero;
                  p.pp = pp;
                  p.vpp = vpp;
                  p.dp_replicate = dp / dp_shard;
                  p.dp_shard = dp_shard;
                  p.cp = cp;
                  p.tp = tp;
                  p.ep = ep;
                  if (etp > 0) p.etp = etp;
                  p.micro_batch = mbs;
                  p.recompute = r;
                  out.push_back(p);
                }
        }
      }
  }
  return out;
}

bool ranks_before(const cost::Estimate& a, const cost::Estimate& b) {
  if (a.tokens_per_s_per_gpu != b.tokens_per_s_per_gpu) return a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu;
  if (a.memory.peak_bytes != b.memory.peak_bytes) return a.memory.peak_bytes < b.memory.peak_bytes;
  const auto& p = a.plan;
  const auto& q = b.plan;
  return std::make_tuple(p.pp, p.tp, p.cp, p.ep, ir::expert_tp(p), p.dp_replicate, p.vpp, -p.micro_batch,
                         recompute_rank(p.recompute)) <
         std::make_tuple(q.pp, q.tp, q.cp, q.ep, ir::expert_tp(q), q.dp_replicate, q.vpp, -q.micro_batch,
                         recompute_rank(q.recompute));
}

std::optional<std::string> estimate_out_of_range(const cost::Estimate& e) {
  // A constant, not a std::string: every estimate of a search passes through here.
  constexpr const char* hint = " (hint: check the cluster's bandwidths, latencies and peak FLOP/s)";
  std::string cause;
  for (const auto& term : cost::kTimeTerms)
    if (bad_term(e.time.*term.field)) {
      cause = std::string(term.label) + " time " + number(e.time.*term.field) + " s";
      break;
    }
  if (cause.empty() && bad_total(e.step_time_s)) cause = "step time " + number(e.step_time_s) + " s";
  if (cause.empty() && bad_total(e.tokens_per_s_per_gpu))
    cause = "throughput " + number(e.tokens_per_s_per_gpu) + " tokens/s per GPU";
  if (cause.empty() && (!std::isfinite(e.mfu) || e.mfu < 0)) cause = "MFU " + number(e.mfu);
  if (!cause.empty()) return "estimate out of range: " + cause + hint;
  for (const auto& term : cost::kMemoryTerms)
    if (e.memory.*term.field < 0)
      return "estimate out of range: " + std::string(term.label) + " memory " + std::to_string(e.memory.*term.field) +
             " bytes" + hint;
  if (e.memory.peak_bytes <= 0)
    return "estimate out of range: peak memory " + std::to_string(e.memory.peak_bytes) + " bytes" + hint;
  return std::nullopt;
}

void restrict_to_framework(SearchOptions& options, const cost::FrameworkProfile& framework) {
  options.pipeline = options.pipeline && framework.offers_pipeline;
  if (!framework.offers_interleaved) options.max_vpp = 1;
  options.sharded_zero_stages.clear();
  for (int64_t z = 1; z <= 3; ++z)
    if (framework.offers_zero[z]) options.sharded_zero_stages.push_back(z);
  options.one_fsdp_stage_under_pipeline = framework.fsdp_gathers_once_under_pipeline;
  options.partial_recompute = framework.offers_partial_recompute;
  // Megatron-Core: --expert-tensor-parallel-size and ep folded over any data-parallel ranks
  // (parallel_state.py, the expert RankGenerator); torchtitan borrows ep from dp_shard x cp only.
  const bool megatron = framework.name == "megatron-lm" || framework.name == "megatron-core";
  options.expert_over_replicas = options.expert_over_replicas && megatron;
  options.expert_tensor_parallel = options.expert_tensor_parallel && (megatron || framework.name == "torchtitan");
}

std::optional<cost::Estimate> fewest_recomputed_layers_that_fit(const cost::Estimator& estimator, ir::Plan plan,
                                                                int64_t num_layers, int64_t hbm_bytes) {
  const int64_t chunks = plan.pp * plan.vpp;
  const int64_t chunk_layers = (num_layers + chunks - 1) / chunks;  // the largest chunk; more is every layer
  std::optional<cost::Estimate> best;
  int64_t lo = 1, hi = chunk_layers - 1;
  while (lo <= hi) {
    plan.recompute_layers = lo + (hi - lo) / 2;
    std::optional<cost::Estimate> e;
    try {
      e = estimator.estimate(plan);
    } catch (const std::exception&) {  // a count the estimator refuses is not a fit
    }
    if (e && !estimate_out_of_range(*e) && e->memory.peak_bytes <= hbm_bytes) {
      hi = *plan.recompute_layers - 1;
      best = std::move(e);
    } else {
      lo = *plan.recompute_layers + 1;
    }
  }
  return best;
}

SearchResult search(const cost::Estimator& estimator, const SearchOptions& options) {
  SearchResult result;
  const ModelFacts facts = model_facts(estimator.graph());
  SearchOptions enumerate = options;
  if (enumerate.num_layers == 0) enumerate.num_layers = facts.num_layers;
  if (enumerate.mtp_depths == 0) enumerate.mtp_depths = facts.mtp_depths;
  if (!options.pipeline) enumerate.num_layers = 0;  // no pp > 1 candidate
  if (enumerate.num_experts == 0) enumerate.num_experts = facts.num_experts;
  const int64_t hbm = estimator.cluster().gpu.hbm_bytes;
  int64_t max_rejected_peak = 0;
  std::vector<cost::Estimate> kept;
  // The exporter's sizes; only the plan changes per candidate (export_refusal reads no names).
  ExportContext target;
  target.num_gpus = options.rules.num_gpus;
  target.gpus_per_node = estimator.cluster().gpus_per_node;
  target.seq_len = estimator.settings().seq_len;
  target.num_layers = estimator.graph().info.num_layers;
  target.mtp_depths = facts.mtp_depths;
  target.num_experts = estimator.graph().info.num_experts;
  target.has_mla = estimator.graph().info.has_mla;
  target.task = estimator.settings().task;
  target.lora = estimator.settings().lora;
  target.non_causal_model = non_causal_model_of(estimator.graph());
  const std::vector<ir::Plan> candidates = enumerate_candidates(options.rules.num_gpus, enumerate);
  std::optional<ir::Plan> fitting_without_recompute;  // the last candidate without recompute that fit
  constexpr int64_t kProgressEvery = 256;  // candidates between progress calls (each takes microseconds)
  for (const ir::Plan& plan : candidates) {
    if (options.on_progress && result.evaluated % kProgressEvery == 0)
      options.on_progress(result.evaluated, int64_t(candidates.size()));
    ++result.evaluated;
    target.plan = plan;
    if (auto broken = first_broken_rule(plan, facts, estimator.cluster(), estimator.settings(), options.rules)) {
      ++result.rejected[*broken];
      if (options.emit && !export_refusal(*options.emit, target)) ++result.expressible_rule_breaks[*broken];
      continue;
    }
    if (options.emit) {
      // Before estimating: a plan the framework cannot run costs no estimate.
      if (auto refusal = export_refusal(*options.emit, target)) {
        ++result.rejected[emit_name(*options.emit) + " cannot express it: " + refusal->problem];
        continue;
      }
    }
    cost::Estimate e = estimator.estimate(plan);
    if (auto out_of_range = estimate_out_of_range(e)) {
      ++result.rejected[*out_of_range];
      continue;
    }
    if (e.memory.peak_bytes > hbm) {
      const int64_t peak = e.memory.peak_bytes;
      if (result.min_rejected_peak_bytes == 0 || peak < result.min_rejected_peak_bytes) {
        result.min_rejected_peak_bytes = peak;
        result.min_rejected_peak_plan = plan;
      }
      max_rejected_peak = std::max(max_rejected_peak, peak);
      continue;
    }
    // Keep the best `top` with a bounded insertion, so the search stays O(candidates * top).
    auto keep = [&](cost::Estimate&& fits) {
      ++result.feasible;
      auto at = std::lower_bound(kept.begin(), kept.end(), fits, ranks_before);
      if (int64_t(at - kept.begin()) < options.top) {
        kept.insert(at, std::move(fits));
        if (int64_t(kept.size()) > options.top) kept.pop_back();
      }
    };
    keep(std::move(e));
    if (!options.partial_recompute) continue;
    if (plan.recompute == ir::Recompute::none) fitting_without_recompute = plan;
    // Block recompute where the same layout does not fit without recompute (else it only adds
    // slower plans); recompute modes are the innermost loop, so that plan was just estimated.
    ir::Plan without = plan;
    without.recompute = ir::Recompute::none;
    if (plan.recompute == ir::Recompute::full && !plan.recompute_layers && fitting_without_recompute != without) {
      ir::Plan block = plan;
      block.recompute_layers = 1;  // any count: the exporters refuse or take recompute_layers as such
      target.plan = block;
      if (!options.emit || !export_refusal(*options.emit, target))
        if (auto fewer = fewest_recomputed_layers_that_fit(estimator, plan, facts.num_layers, hbm)) {
          ++result.evaluated;  // one more candidate, valid; the probes that found it are not candidates
          keep(std::move(*fewer));
        }
    }
  }
  if (result.min_rejected_peak_bytes > 0) {
    const int64_t count = result.evaluated - result.feasible -
                          [&] { int64_t n = 0; for (const auto& [_, c] : result.rejected) n += c; return n; }();
    const std::string range = result.min_rejected_peak_bytes == max_rejected_peak
                                  ? gib(max_rejected_peak)
                                  : gib(result.min_rejected_peak_bytes) + "-" + gib(max_rejected_peak);
    result.rejected["needs " + range + " GiB > " + gib(hbm) + " GiB of HBM per GPU"] = count;
  }
  result.plans = std::move(kept);
  return result;
}

int64_t min_gpus_for_states(const cost::Estimator& estimator) {
  const auto counts = ir::count_parameters(estimator.graph());
  const auto& p = estimator.params();
  const double usable = double(estimator.cluster().gpu.hbm_bytes - p.cuda_context_bytes - p.nccl_buffer_bytes);
  return int64_t(std::ceil(16.0 * double(counts.total) / usable));
}

}  // namespace mgt::plan
