// What the estimator's translation units share (estimator.cpp: time and the estimate;
// estimator_memory.cpp: memory per stage): the bytes per parameter state, the memoised per-shape
// and per-layout structures, and small helpers. Private to cost_model/src.
#pragma once

#include "mgt/cost_model/ep_overlap.hpp"
#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/plan.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace mgt::cost {

namespace estimator_detail {
// Bytes per parameter of each state (docs/cost-model.md §4.1; mixed precision as in Micikevicius
// et al. 2018, ZeRO stages as in Rajbhandari et al. 2020 §5).
inline constexpr int64_t kMasterBytes = 4;   // fp32 parameter (master copy)
inline constexpr int64_t kWorkingBytes = 2;  // bf16 copy the kernels read
inline constexpr int64_t kAdamBytes = 8;     // exp_avg + exp_avg_sq, fp32
// AdamW step traffic per local parameter: read+write master, m, v (24), read grad (4), write bf16 (2).
inline constexpr int64_t kOptimizerTrafficBytes = 30;
// DDP's default gradient bucket (torch DistributedDataParallel bucket_cap_mb=25); the buckets
// filled after backward ends (the first block's gradients) cannot overlap.
inline constexpr int64_t kLastBucketBytes = 25ll << 20;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Bytes to the nearest integer, halves away from zero as std::llround, without its libm call (the
// FSDP peak rounds a candidate's activations a dozen times per stage).
inline int64_t round_bytes(double bytes) { return bytes >= 0 ? int64_t(bytes + 0.5) : -int64_t(0.5 - bytes); }

// Full recompute of N layers per chunk (Megatron --recompute-num-layers) as a fraction of the
// stage's layers; 1 when every layer is checkpointed, 0 without full recompute.
inline double full_recompute_fraction(const ir::Plan& plan, int64_t stage_layers) {
  if (plan.recompute != ir::Recompute::full || stage_layers == 0) return 0.0;
  if (!plan.recompute_layers) return 1.0;
  return std::min(1.0, double(*plan.recompute_layers * plan.vpp) / double(stage_layers));
}
}  // namespace estimator_detail

struct Estimator::ShapeSummary {
  struct Block {
    bool is_layer = true;
    BlockCost cost;
    double tp_fwd_s = 0, tp_bwd_s = 0, cp_fwd_s = 0, cp_bwd_s = 0;
    EpPhaseTimes ep;  // expert-parallel collectives, all and under a merged pass (ep_overlap.hpp)
  };
  std::vector<Block> blocks;
  std::vector<int64_t> tied_local;  // per tied parameter: elements on one rank
};

// Everything a plan fixes once: its Layout (ir::resolve) and the links of its named groups.
struct Estimator::PlanContext {
  ir::Layout layout;
  MeshLinks* mesh = nullptr;  // the memoised links below, and what else the mesh fixes
  LinkEstimate shard_link, expert_link, replicate_link;  // every candidate needs these
  LinkEstimate expert_replicate_link;  // the replicas that hold the same experts (all of them unless ep spans replicas)
  LinkEstimate pp_link;  // the slowest stage boundary (Topology::pipeline_link), when pp > 1
  /// The link of any named group (tp, cp and ep are priced once per memoised shape, dp only under DDP).
  LinkEstimate link(const Topology& topology, ir::MeshGroup group) const {
    return topology.link_for_axes(layout.fixed_spans(group).view());
  }
};

// The links of a plan's data-parallel and pipeline groups, which only its mesh fixes: the degrees
// (tp, cp, dp_shard, dp_replicate, ep, etp, pp) and whether the pipeline wraps around (vpp > 1).
// Memoised: the search asks for them once per candidate, and many candidates share a mesh.
// FSDP2: all-gather bf16 params (before forward, and again before backward after resharding),
// reduce-scatter fp32 grads, every micro-batch; experts shard over the smaller group. LoRA: the frozen
// base is gathered as stored (bf16 / NF4) with the bf16 adapters; only the adapters' gradients are
// reduce-scattered (treated as dense weights). HSDP: each gradient shard all-reduced over the replicas
// holding it, dense over dp_replicate and experts (when they reduce apart) over expert_replicate;
// otherwise one all-reduce of both. The same for a block on every stage, and for every plan with
// the same mesh and block shapes (Estimator::fsdp_block_comm).
struct Estimator::BlockFsdpComm {
  double ag = 0, rs = 0, all_reduce = 0;
};

struct Estimator::MeshLinks {
  std::array<int64_t, 8> key{};  // checked on every hit: the map is keyed by its hash
  LinkEstimate shard, expert, replicate, expert_replicate, pp;
  // Per block shape on this mesh (ShapeSummary, which summaries_ owns for the estimator's life): one
  // copy's FSDP collectives under ZeRO-3, priced once. A mesh meets few shapes (micro-batch sizes,
  // sequence parallel on or off): a short list.
  std::vector<std::pair<const ShapeSummary*, std::vector<BlockFsdpComm>>> fsdp_comm;
};

// One interleaved-pipeline chunk of a stage as its FSDP chain sees it: the blocks it runs, in forward
// order, with their copies; `repeat` alike chunks in a row (the middle chunks of a stage usually are).
struct FsdpChunk {
  struct Part {
    size_t block;
    int64_t copies;
    bool operator==(const Part&) const = default;
  };
  std::vector<Part> parts;
  int64_t repeat = 1;
};

// Which block copies each physical pipeline stage holds (ir::for_each_block_copy places them),
// grouped by composition so that equal stages are timed once.
struct Estimator::StageLayout {
  struct Stage {
    std::vector<int64_t> copies;  // per graph block: copies held by this stage
    int64_t index = 0;            // smallest physical stage index with this composition
    int64_t layers = 0;
    int64_t count = 1;            // physical stages with this composition
    std::vector<FsdpChunk> fsdp_chunks;  // its vpp chunks (fsdp_chunks_of), alike neighbours merged
  };
  std::vector<Stage> stages;      // distinct compositions only
};

}  // namespace mgt::cost
