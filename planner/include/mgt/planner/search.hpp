// The planner's search: enumerate every factorisation of the GPU count into
// dp_replicate x dp_shard x cp x tp, with micro-batch sizes and recompute modes; reject by rule and
// by memory with counted reasons; rank the rest by throughput (docs/planner.md).
#pragma once

#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/planner/export.hpp"
#include "mgt/planner/rules.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgt::plan {

struct SearchOptions {
  RuleOptions rules;
  std::vector<int64_t> micro_batches = {1, 2, 4, 8, 16};
  std::vector<ir::Recompute> recompute_modes = {ir::Recompute::none, ir::Recompute::selective, ir::Recompute::full};
  int64_t max_vpp = 8;        ///< interleaving factors tried: divisors of layers / pp up to this
  int64_t num_layers = 0;     ///< pipeline stages split these; 0 = no pipeline parallel in the search
  int64_t mtp_depths = 0;     ///< multi-token prediction depths on the last chunk (ir::PipelineSplit::choose)
  int64_t num_experts = 0;    ///< expert parallel sizes tried: divisors of this; 0 = ep 1 only
  int64_t top = 5;  ///< plans kept in the result
  /// Rank only plans this framework can express (export_refusal); the others are counted among the
  /// rejections with the exporter's reason, as rule breaks are. Unset: every framework-free plan.
  std::optional<ExportFormat> emit;
  /// Called every few hundred candidates with (candidates done, candidates in all), for a progress
  /// display (tools/mgt-plan/progress.hpp); unset: none. It must not throw.
  std::function<void(int64_t done, int64_t total)> on_progress;
  /// ZeRO stages tried for plans with dp_shard > 1 (3 = FSDP-style parameter sharding, left unset in
  /// the plan as before; 1 / 2 = Megatron's distributed optimizer, DeepSpeed ZeRO-1/2, FSDP
  /// SHARD_GRAD_OP).
  std::vector<int64_t> sharded_zero_stages = {3};
  /// Under a pipeline the framework runs ZeRO-2 and ZeRO-3 alike (torchtitan:
  /// cost::FrameworkProfile::fsdp_gathers_once_under_pipeline), so pipelined plans try only 3 of the two.
  bool one_fsdp_stage_under_pipeline = false;
  bool pipeline = true;  ///< pipeline parallel candidates at all (false: pp 1 only)
  /// Expert layouts beyond ep inside dp_shard x cp (MoE models only), as Megatron-Core folds them
  /// (parallel_state.py: etp x ep x expert-dp over the ranks of a stage, etp innermost):
  /// ep carved from dp_replicate as well (ep a multiple of dp_shard*cp dividing the stage's ranks / etp) ...
  bool expert_over_replicas = true;
  /// ... and expert tensor parallel sizes other than tp: every divisor of tp (etp 1 included).
  bool expert_tensor_parallel = true;
  /// Beside every full-recompute plan that fits, full recompute of only the fewest layers per
  /// (virtual) stage that still fit (ir::Plan::recompute_layers; Megatron --recompute-method block).
  bool partial_recompute = false;
};

/// Whether the search proposes a pipeline of `pp` stages with `vpp` chunks each for `num_layers`
/// layers: a split every pipelining framework expresses (ir::PipelineSplit: equal chunks, the
/// embedding and loss counted as layers, or Megatron's layout around multi-token prediction), and for
/// vpp > 1 at least one layer per chunk. `validate` offers the same interleavings for a row that
/// leaves vpp open.
bool pipeline_split_proposed(int64_t num_layers, int64_t pp, int64_t vpp, int64_t mtp_depths = 0);

/// Block recompute of a full-recompute `plan` (every layer recomputed) that fits in `hbm_bytes`: the
/// estimate with the fewest recompute_layers per (virtual) stage that still fits, found by bisection
/// over 1 .. layers per chunk - 1 (the step time grows and the activation memory falls with the
/// count); nullopt when only every layer fits.
std::optional<cost::Estimate> fewest_recomputed_layers_that_fit(const cost::Estimator& estimator, ir::Plan plan,
                                                                int64_t num_layers, int64_t hbm_bytes);

/// What `framework` offers: pipelines (interleaved or not), its sharded ZeRO stages and block
/// recompute (cost::FrameworkProfile::offers_*), on top of `options`; expert parallel over replicas and etp
/// other than tp only under Megatron-LM / Megatron-Core (--expert-tensor-parallel-size, MoE parallel
/// folding), etp 1 or tp under torchtitan (ParallelDims etp), neither elsewhere.
void restrict_to_framework(SearchOptions& options, const cost::FrameworkProfile& framework);

struct SearchResult {
  std::vector<cost::Estimate> plans;          ///< best first, at most `top`
  int64_t evaluated = 0;                      ///< candidates considered
  int64_t feasible = 0;                       ///< candidates that passed every rule and fit
  std::map<std::string, int64_t> rejected;    ///< reason -> count
  int64_t min_rejected_peak_bytes = 0;        ///< smallest peak among memory rejections (0 if none)
  /// The plan with that smallest peak (the first such in candidate order); unset when no candidate
  /// was rejected for memory. With `emit` set it is the lightest plan the framework can express.
  std::optional<ir::Plan> min_rejected_peak_plan;
  /// With `emit` set: the rule breaks (reason -> count) of the candidates the framework could express,
  /// so that "no plan for this framework" can say which rule its own plans break.
  std::map<std::string, int64_t> expressible_rule_breaks;
};

/// All candidate plans for `num_gpus`, in a fixed order (deterministic output). Only structurally
/// possible pp, vpp, etp and ep values are generated (the pipeline splits the search proposes; ep
/// divides num_experts and dp_shard * cp, or with expert_over_replicas is a multiple of it; etp
/// divides tp; the expert groups nest with tp, cp and the data-parallel axes); the other rules are
/// left to first_broken_rule so they are counted.
std::vector<ir::Plan> enumerate_candidates(int64_t num_gpus, const SearchOptions& options);

/// Why an estimate cannot be ranked: a step time, throughput, MFU or memory that is not finite or
/// not positive (e.g. a cluster file with near-zero bandwidths or peaks), naming the term that
/// caused it; nullopt when every number is in range.
std::optional<std::string> estimate_out_of_range(const cost::Estimate& estimate);

/// Runs the search. Estimates out of range (estimate_out_of_range) are rejected with their reason.
///  Ranking: highest tokens/s per GPU first; ties broken by lower peak memory, then
/// smaller pp, tp, cp, ep, etp, dp_replicate, vpp, larger micro-batch, lighter recompute (so output is byte-identical
/// across runs).
SearchResult search(const cost::Estimator& estimator, const SearchOptions& options);

/// True when `a` ranks before `b` under the rule above.
bool ranks_before(const cost::Estimate& a, const cost::Estimate& b);

/// A lower bound on GPUs for the model's fp32 weights, grads and AdamW states (16 bytes per
/// parameter, fully sharded) to fit beside the fixed overheads.
int64_t min_gpus_for_states(const cost::Estimator& estimator);

}  // namespace mgt::plan
