// The analytic estimator: memory per GPU and time per step for one plan, computed per distinct block
// (never per layer copy). Every term is documented in docs/cost-model.md with its source.
#pragma once

#include "mgt/cost_model/cost_params.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/layout.hpp"
#include "mgt/ir/plan.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace mgt::cost {

/// What the user trains (sequence length, global batch, precision) lives in ir, beside the Layout.
using TrainingSettings = ir::TrainingSettings;

struct MemoryBreakdown {
  int64_t parameters_bytes = 0;    ///< fp32 master (sharded under ZeRO/FSDP) + bf16 working copy where kept
  int64_t gradients_bytes = 0;     ///< fp32 gradients (sharded under ZeRO-2/3)
  int64_t optimizer_bytes = 0;     ///< AdamW exp_avg and exp_avg_sq, fp32
  int64_t fsdp_buffers_bytes = 0;  ///< unsharded bf16 params of the current + prefetched block, its grads
  int64_t activations_bytes = 0;   ///< saved for backward, one micro-batch in flight
  int64_t transient_bytes = 0;     ///< max(loss working set, backward transients)
  int64_t overhead_bytes = 0;      ///< CUDA context, NCCL buffers, allocator fragmentation
  int64_t peak_bytes = 0;          ///< the sum: what the GPU must hold at the worst moment
  bool operator==(const MemoryBreakdown&) const = default;
};

struct TimeBreakdown {
  double compute_s = 0;       ///< forward + backward kernels, all micro-batches
  double recompute_s = 0;
  double exposed_tp_s = 0;    ///< tensor / sequence parallel collectives (not overlapped)
  double exposed_cp_s = 0;    ///< context parallel K/V exchange not hidden under attention
  double exposed_fsdp_s = 0;  ///< FSDP/ZeRO all-gather and reduce-scatter not hidden under compute
  double exposed_dp_s = 0;    ///< data-parallel gradient all-reduce not hidden under backward
  double exposed_pp_s = 0;    ///< pipeline point-to-point sends not hidden
  double exposed_ep_s = 0;    ///< expert-parallel all-to-all (dispatch and combine)
  double bubble_s = 0;        ///< pipeline fill and drain: (pp - 1) / vpp micro-batch slots idle
  double optimizer_s = 0;
  double overhead_s = 0;      ///< fixed per micro-batch and per step costs
  bool operator==(const TimeBreakdown&) const = default;
};

/// One term of a breakdown: its key in every JSON format (mgt.plans/1, mgt.simulation/1,
/// mgt.validation/1), the member, and the label text output and plots show.
template <typename Breakdown, typename Value>
struct BreakdownTerm {
  const char* json_name;
  Value Breakdown::*field;
  const char* label;
};

/// Every TimeBreakdown term, in declaration order (they sum to the step time). Printers, writers
/// and readers iterate this list instead of naming the members.
inline constexpr BreakdownTerm<TimeBreakdown, double> kTimeTerms[] = {
    {"compute_s", &TimeBreakdown::compute_s, "compute"},
    {"recompute_s", &TimeBreakdown::recompute_s, "recompute"},
    {"exposed_tp_s", &TimeBreakdown::exposed_tp_s, "exposed TP"},
    {"exposed_cp_s", &TimeBreakdown::exposed_cp_s, "exposed CP"},
    {"exposed_fsdp_s", &TimeBreakdown::exposed_fsdp_s, "exposed FSDP"},
    {"exposed_dp_s", &TimeBreakdown::exposed_dp_s, "exposed DP"},
    {"exposed_pp_s", &TimeBreakdown::exposed_pp_s, "exposed PP"},
    {"exposed_ep_s", &TimeBreakdown::exposed_ep_s, "exposed EP"},
    {"bubble_s", &TimeBreakdown::bubble_s, "pipeline bubble"},
    {"optimizer_s", &TimeBreakdown::optimizer_s, "optimizer"},
    {"overhead_s", &TimeBreakdown::overhead_s, "fixed overhead"},
};
static_assert(sizeof(TimeBreakdown) == sizeof(kTimeTerms) / sizeof(kTimeTerms[0]) * sizeof(double),
              "a TimeBreakdown member is missing from kTimeTerms");

/// Every MemoryBreakdown component, in declaration order, without peak_bytes (their sum).
inline constexpr BreakdownTerm<MemoryBreakdown, int64_t> kMemoryTerms[] = {
    {"parameters_bytes", &MemoryBreakdown::parameters_bytes, "parameters"},
    {"gradients_bytes", &MemoryBreakdown::gradients_bytes, "gradients"},
    {"optimizer_bytes", &MemoryBreakdown::optimizer_bytes, "optimizer"},
    {"fsdp_buffers_bytes", &MemoryBreakdown::fsdp_buffers_bytes, "fsdp buffers"},
    {"activations_bytes", &MemoryBreakdown::activations_bytes, "activations"},
    {"transient_bytes", &MemoryBreakdown::transient_bytes, "transient"},
    {"overhead_bytes", &MemoryBreakdown::overhead_bytes, "overhead"},
};
static_assert(sizeof(MemoryBreakdown) == (sizeof(kMemoryTerms) / sizeof(kMemoryTerms[0]) + 1) * sizeof(int64_t),
              "a MemoryBreakdown member is missing from kMemoryTerms");

struct Estimate {
  ir::Plan plan;  ///< resolved: grad_accum, sequence_parallel and zero_stage set
  MemoryBreakdown memory;
  TimeBreakdown time;
  double step_time_s = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;                ///< model FLOPs / (step time * GPUs * dense peak)
  double model_flops_per_step = 0;
  std::string bottleneck;        ///< "compute", or "exposed <tp|cp|fsdp|dp> communication"
  /// Of time.compute_s: the wait for an eager host's kernel launches (host_dispatch.hpp), which CUDA
  /// graphs or torch.compile would shorten. Not a term of its own: the kernels and the wait are one
  /// stretch of the compute stream.
  double host_wait_s = 0;
};

/// A pipeline chunk's block copies in forward order, as its FSDP chain runs them (estimator.cpp).
struct FsdpChunk;

/// Estimates plans for one model, cluster and setting. Not thread-safe (it memoises per-shape block
/// costs); use one Estimator per thread.
class Estimator {
 public:
  /// With the calibrated constants for the cluster's GPU generation (default_cost_params).
  Estimator(const ir::Graph& graph, const ir::ClusterSpec& cluster, int64_t num_gpus, TrainingSettings settings);
  Estimator(const ir::Graph& graph, const ir::ClusterSpec& cluster, int64_t num_gpus, TrainingSettings settings,
            CostParams params);
  ~Estimator();
  Estimator(Estimator&&) noexcept;

  /// Estimates `plan`. Throws the InputError of ir::resolve for a plan it cannot mean on this
  /// model, batch and GPU count (planner rules reject those before the search estimates them).
  Estimate estimate(const ir::Plan& plan) const;

  const ir::Graph& graph() const { return graph_; }
  const ir::ClusterSpec& cluster() const { return cluster_; }
  const TrainingSettings& settings() const { return settings_; }
  const CostParams& params() const { return params_; }
  int64_t num_gpus() const { return num_gpus_; }

 private:
  struct ShapeSummary;  // per (tp, cp, ep, micro_batch, sp): block costs with communication priced
  struct StageLayout;   // per (pp, vpp): which block copies each pipeline stage holds
  struct PlanContext;  // the resolved Layout and its groups' links
  struct MeshLinks;    // per mesh (the degrees and whether the pipeline wraps): the links every candidate needs
  const ShapeSummary& summary_for(const PlanContext& x) const;
  const StageLayout& layout_for(const ir::Layout& layout) const;
  struct StageTime;    // one micro-batch on one pipeline stage
  PlanContext context_for(const ir::Plan& plan) const;
  struct BlockFsdpComm;  // one copy's FSDP / HSDP collectives, per block, once per plan
  void fsdp_block_comm(const ShapeSummary& s, const PlanContext& x, std::vector<BlockFsdpComm>& out) const;
  /// fsdp_block_comm memoised per mesh and shape (zeros when the plan gathers nothing).
  const std::vector<BlockFsdpComm>& fsdp_comm_for(const ShapeSummary& s, const PlanContext& x) const;
  /// ZeRO-3 as DeepSpeed v0.3.12-v0.5.4 ran it: per tensor, blocking (Zero3SubmoduleLimits::per_tensor_blocking).
  /// LoRA / QLoRA (a frozen base; those releases predate them) keep the per-block pricing, which
  /// reduces only the adapters' gradients.
  bool zero3_blocks_compute() const {
    return params_.zero3_submodule_limits && params_.zero3_submodule_limits->per_tensor_blocking &&
           !settings_.frozen_base();
  }
  StageTime stage_time(const ShapeSummary& s, const std::vector<int64_t>& copies_per_block,
                       const std::vector<FsdpChunk>& fsdp_chunks, int64_t stage_layers, const PlanContext& x,
                       const std::vector<BlockFsdpComm>& comm) const;
  double data_parallel_time_s(const PlanContext& x, const StageTime& slowest, int64_t params, int64_t expert_params,
                              int64_t params_shard, int64_t last_ready_params) const;
  MemoryBreakdown stage_memory(const ShapeSummary& s, const std::vector<int64_t>& copies_per_block,
                               int64_t stage_layers, int64_t stage_index, const PlanContext& x) const;
  /// Elements counted twice on a stage that holds both copies of a tied parameter.
  int64_t tied_on_stage(const std::vector<int64_t>& copies_per_block, const ShapeSummary& s) const;

  ir::Graph graph_;
  ir::ClusterSpec cluster_;
  int64_t num_gpus_;
  TrainingSettings settings_;
  CostParams params_;
  Topology topology_;
  TokenRouting routing_;  ///< the expert-parallel dispatch's routing (token_routing)
  struct Tie {
    size_t first_block, second_block, second_tensor;  ///< where the two copies of a tied parameter live
  };
  std::vector<Tie> tied_;
  mutable std::unordered_map<uint64_t, std::unique_ptr<ShapeSummary>> summaries_;
  mutable std::unordered_map<uint64_t, std::unique_ptr<StageLayout>> layouts_;
  mutable std::unordered_map<uint64_t, std::unique_ptr<MeshLinks>> mesh_links_;  // by a hash of MeshLinks::key
};

/// Human name of the binding constraint from a time breakdown (see Estimate::bottleneck), given the
/// part of its compute that waits on the host (Estimate::host_wait_s).
std::string bottleneck_of(const TimeBreakdown& time, double step_time_s, double host_wait_s = 0);

}  // namespace mgt::cost
