// The analytic estimator (docs/cost-model.md). Per plan it combines memoised per-shape block costs
// (ShapeSummary) with a memoised pipeline layout (StageLayout) and the data-parallel terms; a
// candidate costs O(distinct stages x distinct blocks) arithmetic.
#include "mgt/cost_model/estimator.hpp"

#include "estimator_internal.hpp"

#include "mgt/cost_model/collective.hpp"
#include "mgt/cost_model/compute.hpp"
#include "mgt/cost_model/task_cost.hpp"
#include "mgt/cost_model/tp_overlap.hpp"
#include "mgt/ir/error.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <span>

namespace mgt::cost {

using namespace estimator_detail;

namespace {
// A stage's FSDP chains (Estimator::stage_time). Interleaved pipelines run each chunk as a task of its
// own, so each chunk's chain starts and ends on its own (its first all-gather and last reduce-scatter
// exposed): the stage's layer copies split into vpp contiguous chunks, the blocks before them going
// with the first, the blocks after them with the last (docs/lowering.md). Memoised with the layout:
// it depends on the copies and vpp only.
std::vector<FsdpChunk> fsdp_chunks_of(const ir::Graph& graph, const std::vector<int64_t>& copies, int64_t vpp) {
  using Chunk = FsdpChunk;
  std::vector<Chunk> chunks(static_cast<size_t>(vpp));
  int64_t layers = 0;
  for (size_t b = 0; b < copies.size(); ++b) layers += graph.blocks[b].is_layer ? copies[b] : 0;
  const int64_t chunk_layers = (layers + vpp - 1) / vpp;
  size_t c = 0;
  int64_t filled = 0, seen = 0;
  for (size_t b = 0; b < copies.size(); ++b) {
    if (copies[b] == 0) continue;
    if (vpp == 1 || !graph.blocks[b].is_layer) {
      chunks[vpp == 1 || seen == 0 ? 0 : chunks.size() - 1].parts.push_back({b, copies[b]});
      continue;
    }
    for (int64_t left = copies[b]; left > 0;) {
      const int64_t take = std::min(left, std::max<int64_t>(1, chunk_layers - filled));
      chunks[c].parts.push_back({b, take});
      left -= take, filled += take, seen += take;
      if (filled >= chunk_layers && c + 1 < chunks.size()) ++c, filled = 0;
    }
  }
  std::vector<Chunk> merged;
  for (auto& chunk : chunks) {
    if (!merged.empty() && merged.back().parts == chunk.parts) ++merged.back().repeat;
    else merged.push_back(std::move(chunk));
  }
  return merged;
}
}  // namespace

Estimator::Estimator(const ir::Graph& graph, const ir::ClusterSpec& cluster, int64_t num_gpus,
                     TrainingSettings settings)
    : Estimator(graph, cluster, num_gpus, settings, default_cost_params(cluster.gpu)) {}

Estimator::Estimator(const ir::Graph& graph, const ir::ClusterSpec& cluster, int64_t num_gpus,
                     TrainingSettings settings, CostParams params)
    : graph_(graph), cluster_(cluster), num_gpus_(num_gpus), settings_(settings), params_(params),
      topology_(cluster, num_gpus, params), routing_(token_routing(graph)) {
  // A tied parameter appears in two blocks ("embed.wte", "head.wte"); count it once where both sit.
  auto block_index = [this](const std::string& qualified) -> std::optional<size_t> {
    const std::string name = qualified.substr(0, qualified.find('.'));
    for (size_t b = 0; b < graph_.blocks.size(); ++b)
      if (graph_.blocks[b].name == name) return b;
    return std::nullopt;
  };
  for (const auto& [first, second] : graph_.tied_parameters) {
    const auto b1 = block_index(first), b2 = block_index(second);
    if (!b1 || !b2) continue;  // ir::verify rejects such ties; nothing to correct
    const auto& tensors = graph_.blocks[*b2].tensors;
    const std::string tensor = second.substr(second.find('.') + 1);
    for (size_t t = 0; t < tensors.size(); ++t)
      if (tensors[t].name == tensor) tied_.push_back({*b1, *b2, t});
  }
}

Estimator::~Estimator() = default;
Estimator::Estimator(Estimator&&) noexcept = default;

const Estimator::ShapeSummary& Estimator::summary_for(const PlanContext& x) const {
  const ir::Plan& plan = x.layout.plan;
  const bool sp = *plan.sequence_parallel;
  const uint64_t key = (uint64_t(plan.tp) << 48) ^ (uint64_t(x.layout.expert_tp) << 40) ^ (uint64_t(plan.cp) << 32) ^
                       (uint64_t(plan.ep) << 16) ^
                       (uint64_t(plan.micro_batch) << 1) ^ uint64_t(sp);
  auto it = summaries_.find(key);
  if (it != summaries_.end()) return *it->second;

  const ShardContext ctx = shard_context(plan, settings_);
  const LinkEstimate tp_link = x.link(topology_, ir::MeshGroup::tp);
  const LinkEstimate cp_link = x.link(topology_, ir::MeshGroup::cp);
  const LinkEstimate ep_link = x.link(topology_, ir::MeshGroup::ep);
  auto price = [&](const std::vector<BlockCollective>& collectives, BlockCollective::Axis axis) {
    double total = 0;
    for (const auto& c : collectives) {
      if (c.axis != axis) continue;
      switch (axis) {
        case BlockCollective::Axis::tp: total += collective_time_s(cluster_, c.kind, plan.tp, c.bytes, tp_link); break;
        case BlockCollective::Axis::cp: total += collective_time_s(cluster_, c.kind, plan.cp, c.bytes, cp_link); break;
        case BlockCollective::Axis::ep: break;  // ep_phase_times
      }
    }
    return total;
  };

  auto summary = std::make_unique<ShapeSummary>();
  for (const auto& block : graph_.blocks) {
    ShapeSummary::Block b;
    b.is_layer = block.is_layer;
    b.cost = block_cost(block, ctx, cluster_, params_);
    const TpPhaseTimes tp = tp_phase_times(b.cost, cluster_, plan.tp, tp_link, params_);
    b.tp_fwd_s = tp.fwd_exposed_s;
    b.tp_bwd_s = tp.bwd_exposed_s;
    b.cp_fwd_s = price(b.cost.fwd_collectives, BlockCollective::Axis::cp);
    b.cp_bwd_s = price(b.cost.bwd_collectives, BlockCollective::Axis::cp);
    b.ep = ep_phase_times(b.cost, cluster_, plan.ep, ep_link, routing_, params_);
    summary->blocks.push_back(std::move(b));
  }
  // A tied weight on a rank holds its own local shape (the vocab dim padded per rank).
  for (const auto& tie : tied_) {
    int64_t local = 1;
    for (const auto& d : graph_.blocks[tie.second_block].tensors[tie.second_tensor].dims)
      local *= is_tp_dim(d.name) ? ceil_div(d.size, plan.tp) : d.size;
    summary->tied_local.push_back(local);
  }
  return *summaries_.emplace(key, std::move(summary)).first->second;
}

const Estimator::StageLayout& Estimator::layout_for(const ir::Layout& resolved) const {
  // The split is resolve's (its settings are this estimator's), so (pp, vpp) names it.
  const ir::Plan& plan = resolved.plan;
  const uint64_t key = (uint64_t(plan.pp) << 32) ^ uint64_t(plan.vpp);
  auto it = layouts_.find(key);
  if (it != layouts_.end()) return *it->second;
  const ir::PipelineSplit& split = resolved.pipeline;
  const size_t n = graph_.blocks.size();
  std::vector<std::vector<int64_t>> copies(size_t(plan.pp), std::vector<int64_t>(n, 0));
  ir::for_each_block_copy(graph_, split, [&](size_t b, int64_t, int64_t chunk) { copies[size_t(chunk % plan.pp)][b] += 1; });
  auto layout = std::make_unique<StageLayout>();
  std::map<std::vector<int64_t>, size_t> seen;
  for (int64_t k = 0; k < plan.pp; ++k) {
    const auto& c = copies[size_t(k)];
    if (auto it = seen.find(c); it != seen.end()) {
      ++layout->stages[it->second].count;
      continue;
    }
    seen[c] = layout->stages.size();
    StageLayout::Stage stage{c, k, 0, 1, fsdp_chunks_of(graph_, c, plan.vpp)};
    for (size_t b = 0; b < n; ++b)
      if (graph_.blocks[b].is_layer) stage.layers += c[b];
    layout->stages.push_back(std::move(stage));
  }
  return *layouts_.emplace(key, std::move(layout)).first->second;
}

namespace {

// FSDP exposure along a chain of block copies in forward order (Zhao et al. 2023, PyTorch FSDP
// §3.3-3.4): the all-gather of copy i is prefetched under the forward of copy i-1; in backward the
// compute of copy i hides the prefetch all-gather of copy i-1 and the reduce-scatter of copy i+1.
// The first forward all-gather and the last reduce-scatter have nothing to hide under.
struct FsdpRun {
  int64_t copies;
  double ag, rs, fwd, bwd;
  double rs_last;  ///< the last micro-batch's: rs, then HSDP's replica all-reduce on the same stream
  bool operator==(const FsdpRun&) const = default;
};
struct FsdpExposure {
  /// What the chain adds to one micro-batch: per window max(comm − compute, slowdown × min(comm,
  /// compute)). Kernels run `slowdown` slower while NCCL shares the SMs; when the communication is the
  /// longer of the two the slowed kernels still finish under it, so the window costs its exposed part
  /// only (as the simulator times it).
  double cost = 0;
  double ends = 0;  ///< of `cost`: the first all-gather and the last reduce-scatter, nothing to hide under
};
/// A chain's exposure in every micro-batch and, with `kLast`, in the last one (rs_last for rs): the
/// windows are the same, so one pass prices both.
struct FsdpExposures {
  FsdpExposure every, last;
};
// `concurrent`: whether communication runs beside compute at all (CostParams::concurrent_streams;
// the CPU backend runs a rank's instructions one after another, so nothing hides).
template <bool kLast>
void add_fsdp_exposure(std::span<const FsdpRun> runs, double slowdown, bool concurrent, FsdpExposures& out) {
  const auto exposed = [slowdown, concurrent](double comm, double compute) {
    if (!concurrent) compute = 0;
    return std::max(comm - compute, slowdown * std::min(comm, compute));
  };
  // A window whose communication is `ag` plus a reduce-scatter (`rs`, or `rs_last` in the last micro-batch).
  const auto overlap = [&](double ag, double rs, double rs_last, double compute, double times) {
    out.every.cost += times * exposed(ag + rs, compute);
    if constexpr (kLast) out.last.cost += times * exposed(ag + rs_last, compute);
  };
  const auto exposed_alone = [&out](double comm, double comm_last) {
    out.every.ends += comm, out.every.cost += comm;
    if constexpr (kLast) out.last.ends += comm_last, out.last.cost += comm_last;
  };
  const FsdpRun none{0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < runs.size(); ++i) {
    const FsdpRun& r = runs[i];
    const FsdpRun& prev = i > 0 ? runs[i - 1] : none;
    const FsdpRun& next = i + 1 < runs.size() ? runs[i + 1] : none;
    // forward
    if (i == 0) {
      exposed_alone(r.ag, r.ag);
    } else {
      overlap(r.ag, 0, 0, prev.fwd, 1);
    }
    if (r.copies > 1) overlap(r.ag, 0, 0, r.fwd, double(r.copies - 1));
    // backward: copy j of this run, with its neighbours in forward order
    if (r.copies == 1) {
      overlap(prev.ag, next.rs, next.rs_last, r.bwd, 1);
    } else {
      overlap(prev.ag, r.rs, r.rs_last, r.bwd, 1);                                      // first copy of the run
      overlap(r.ag, next.rs, next.rs_last, r.bwd, 1);                                   // last copy of the run
      if (r.copies > 2) overlap(r.ag, r.rs, r.rs_last, r.bwd, double(r.copies - 2));  // the middle copies
    }
  }
  if (!runs.empty()) exposed_alone(runs.front().rs, runs.front().rs_last);  // the last reduce-scatter of backward
}

}  // namespace

int64_t Estimator::tied_on_stage(const std::vector<int64_t>& copies, const ShapeSummary& s) const {
  // A tied weight held twice on one stage is one parameter; on two stages (PP), two copies.
  int64_t duplicate = 0;
  for (size_t i = 0; i < tied_.size(); ++i)
    if (copies[tied_[i].first_block] > 0 && copies[tied_[i].second_block] > 0) duplicate += s.tied_local[i];
  return duplicate;
}

// One micro-batch on one pipeline stage (docs/cost-model.md §5).
struct Estimator::StageTime {
  double compute = 0, recompute = 0, tp = 0, cp = 0, ep = 0, fsdp = 0, pp = 0, bwd = 0;
  double host_wait = 0;  // of compute: the wait for an eager host's launches
  // Backward as the data-parallel stream sees it: kernels, recompute and the TP / CP collectives the
  // compute stream waits for (other communicators); gradient buckets hide under all of it.
  double bwd_window = 0;
  double hsdp = 0;  // once per step: the replica all-reduces FSDP2 chains after each reduce-scatter
  double hsdp_before_tail = 0;  // of hsdp: what delays the stage's last backward kernel (not the tail)
  int64_t params = 0, expert_params = 0;  // on this stage, after tp / ep, before data-parallel sharding
  int64_t adapter_params = 0;             // LoRA adapters on this stage (the only trained weights then)
  double total() const { return compute + recompute + tp + cp + ep + fsdp + pp; }
};

Estimator::PlanContext Estimator::context_for(const ir::Plan& input_plan) const {
  PlanContext x{ir::resolve(graph_, input_plan, settings_, num_gpus_), nullptr, {}, {}, {}, {}, {}};
  const ir::Plan& plan = x.layout.plan;
  const std::array<int64_t, 8> key{plan.tp, plan.cp, plan.dp_shard, plan.dp_replicate, plan.ep, x.layout.expert_tp,
                                   plan.pp, plan.vpp > 1 ? 1 : 0};
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the degrees
  for (const int64_t v : key) hash = (hash ^ uint64_t(v)) * 0x100000001b3ull;
  std::unique_ptr<MeshLinks>& links = mesh_links_[hash];
  if (!links || links->key != key) {  // a miss, or another mesh with the same hash: (re)compute
    links = std::make_unique<MeshLinks>();
    links->key = key;
    // An expert group equals its dense one unless ep or etp cut the mesh (dense models always): then
    // its link is the dense group's, without a second lookup.
    const auto expert_link_like = [&](ir::MeshGroup group, const ir::Layout::FixedSpans& dense, const LinkEstimate& dense_link) {
      const ir::Layout::FixedSpans spans = x.layout.fixed_spans(group);
      return std::ranges::equal(spans.view(), dense.view()) ? dense_link : topology_.link_for_axes(spans.view());
    };
    const ir::Layout::FixedSpans shard = x.layout.fixed_spans(ir::MeshGroup::shard);
    const ir::Layout::FixedSpans replicate = x.layout.fixed_spans(ir::MeshGroup::replicate);
    links->shard = topology_.link_for_axes(shard.view());
    links->expert = expert_link_like(ir::MeshGroup::expert_shard, shard, links->shard);
    links->replicate = topology_.link_for_axes(replicate.view());
    links->expert_replicate = expert_link_like(ir::MeshGroup::expert_replicate, replicate, links->replicate);
    // The slowest boundary paces a 1F1B pipeline: every stage waits for what crosses it.
    if (plan.pp > 1) links->pp = topology_.pipeline_link(x.layout.pp_stride(), plan.pp, /*wraps=*/plan.vpp > 1);
  }
  x.mesh = links.get();
  x.shard_link = links->shard;
  x.expert_link = links->expert;
  x.replicate_link = links->replicate;
  x.expert_replicate_link = links->expert_replicate;
  x.pp_link = links->pp;
  return x;
}

namespace {
// The FSDP exposure of a stage: its chunks' chains (FsdpChunk, fsdp_chunks_of), each timed
// from the per-block runs (`block_runs[b]`: one copy's collectives and compute windows) with the
// chunk's copies; alike chunks in a row are timed once and added `repeat` times. With `kLast`, also
// the last micro-batch's (FsdpExposures::last).
template <bool kLast>
FsdpExposures chained_fsdp_exposure(const std::vector<FsdpChunk>& chunks, const std::vector<FsdpRun>& block_runs,
                                    double slowdown, bool concurrent) {
  static thread_local std::vector<FsdpRun> chain;  // reused: the search times every candidate's stages
  FsdpExposures sum;
  for (const auto& chunk : chunks) {
    chain.clear();
    for (const auto& part : chunk.parts) {
      chain.push_back(block_runs[part.block]);
      chain.back().copies = part.copies;
    }
    FsdpExposures e;
    add_fsdp_exposure<kLast>(chain, slowdown, concurrent, e);
    const double repeat = double(chunk.repeat);
    sum.every.cost += repeat * e.every.cost, sum.every.ends += repeat * e.every.ends;
    sum.last.cost += repeat * e.last.cost, sum.last.ends += repeat * e.last.ends;
  }
  return sum;
}

}  // namespace

const std::vector<Estimator::BlockFsdpComm>& Estimator::fsdp_comm_for(const ShapeSummary& s, const PlanContext& x) const {
  if (!x.layout.fsdp) {
    static thread_local std::vector<BlockFsdpComm> none;  // nothing gathered: zeros, one per block
    none.assign(s.blocks.size(), BlockFsdpComm{});
    return none;
  }
  auto& known = x.mesh->fsdp_comm;
  for (const auto& [shape, comm] : known)
    if (shape == &s) return comm;
  known.emplace_back(&s, std::vector<BlockFsdpComm>{});
  fsdp_block_comm(s, x, known.back().second);
  return known.back().second;
}

// One copy's FSDP collectives per block (BlockFsdpComm); depends only on the mesh and the shapes.
void Estimator::fsdp_block_comm(const ShapeSummary& s, const PlanContext& x, std::vector<BlockFsdpComm>& out) const {
  const int64_t grad_bytes = params_.gradient_bytes;  // per gradient element reduced
  const ir::Plan& plan = x.layout.plan;
  out.assign(s.blocks.size(), BlockFsdpComm{});
  if (!x.layout.fsdp) return;
  if (zero3_blocks_compute()) {
    // DeepSpeed v0.3.12-v0.5.4, per parameter tensor above the persistence threshold
    // (partition_parameters.py _allgather_param, _reduce_scatter_gradients): a gather of its own with a
    // ring's latency, torch.zeros of the full tensor (HBM writes), and ProcessGroupNCCL's copy_ of each
    // rank's chunk (one kernel each, `world` of them); the gradient (fp16, DeepSpeed's fp16 optimizer)
    // reduce-scattered alone after a copy-in per rank. Every call is waited for (fetch is blocking and
    // synchronises the device), so these are times the compute stream stands still.
    const int64_t world = x.layout.shard_group;
    for (size_t b = 0; b < s.blocks.size(); ++b) {
      const BlockCost& c = s.blocks[b].cost;
      const int64_t tensors = c.gathered_param_tensors;
      if (tensors == 0) continue;
      const int64_t elements = c.param_elements_local - c.persistent_param_elements_local;
      const int64_t tensor_bytes = ceil_div(elements * kWorkingBytes, tensors);
      const double copies_s = double(tensors) * double(world) * params_.kernel_floor_s;
      const double zero_fill_s = double(elements * kWorkingBytes) / cluster_.gpu.hbm_bytes_per_s;
      out[b].ag = double(tensors) * collective_time_s(cluster_, CollectiveKind::all_gather, world, tensor_bytes, x.shard_link) +
                  copies_s + zero_fill_s;
      out[b].rs = double(tensors) * collective_time_s(cluster_, CollectiveKind::reduce_scatter, world, tensor_bytes, x.shard_link) +
                  copies_s;
    }
    return;
  }
  const bool frozen = settings_.frozen_base();
  const bool apart = ir::experts_reduce_apart(x.layout);
  const int64_t expert_replicas = x.layout.size(ir::MeshGroup::expert_replicate);
  for (size_t b = 0; b < s.blocks.size(); ++b) {
    const BlockCost& c = s.blocks[b].cost;
    const int64_t dense = frozen ? c.adapter_param_elements_local : c.param_elements_local - c.expert_param_elements_local;
    const int64_t expert = frozen ? 0 : c.expert_param_elements_local;
    const int64_t gathered_bytes =
        dense * kWorkingBytes + (frozen ? int64_t(frozen_base_bytes(c.param_elements_local, c.nf4_param_elements_local)) : 0);
    BlockFsdpComm& m = out[b];
    m.ag = collective_time_s(cluster_, CollectiveKind::all_gather, x.layout.shard_group, gathered_bytes, x.shard_link) +
           collective_time_s(cluster_, CollectiveKind::all_gather, x.layout.expert_shard_group, expert * kWorkingBytes, x.expert_link);
    m.rs = collective_time_s(cluster_, CollectiveKind::reduce_scatter, x.layout.shard_group, dense * grad_bytes, x.shard_link) +
           collective_time_s(cluster_, CollectiveKind::reduce_scatter, x.layout.expert_shard_group, expert * grad_bytes, x.expert_link);
    const int64_t dense_shard = ceil_div(dense, x.layout.shard_group), expert_shard = ceil_div(expert, x.layout.expert_shard_group);
    m.all_reduce = collective_time_s(cluster_, CollectiveKind::all_reduce, plan.dp_replicate,
                                     (apart ? dense_shard : dense_shard + expert_shard) * grad_bytes, x.replicate_link) +
                   (apart ? collective_time_s(cluster_, CollectiveKind::all_reduce, expert_replicas, expert_shard * grad_bytes,
                                              x.expert_replicate_link)
                          : 0.0);
  }
}

Estimator::StageTime Estimator::stage_time(const ShapeSummary& s, const std::vector<int64_t>& copies_per_block,
                                           const std::vector<FsdpChunk>& fsdp_chunks, int64_t stage_layers,
                                           const PlanContext& x, const std::vector<BlockFsdpComm>& comm) const {
  const ir::Plan& plan = x.layout.plan;
  StageTime st;
  const double full_fraction = full_recompute_fraction(plan, stage_layers);
  // Under EP A2A overlap the steady state's merged passes hide part of each dispatch / combine.
  const double ep_merged = ep_merged_fraction(plan, x.layout.grad_accum, params_.ep_comm_hidden_fraction);
  // Per-thread scratch, per graph block: the search times every stage of every candidate.
  static thread_local std::vector<FsdpRun> runs;  // one copy's FSDP collectives and windows
  runs.assign(s.blocks.size(), FsdpRun{0, 0, 0, 0, 0, 0});
  for (size_t b = 0; b < s.blocks.size(); ++b) {
    const int64_t copies = copies_per_block[b];
    if (copies == 0) continue;
    const auto& blk = s.blocks[b];
    const BlockCost& c = blk.cost;
    const double r = double(copies);
    st.compute += r * (c.fwd_compute_s + c.bwd_compute_s);
    st.host_wait += r * c.host_wait_s;
    st.bwd += r * c.bwd_compute_s;
    st.bwd_window += r * (c.bwd_compute_s + blk.tp_bwd_s + blk.cp_bwd_s);
    if (blk.is_layer && plan.recompute == ir::Recompute::selective) st.bwd_window += r * c.selective_recompute_s;
    if (blk.is_layer && full_fraction > 0)
      st.bwd_window += full_fraction * r * (c.fwd_compute_s + blk.tp_fwd_s + blk.cp_fwd_s);
    st.tp += r * (blk.tp_fwd_s + blk.tp_bwd_s);
    st.ep += r * (blk.ep.fwd_exposed_s(ep_merged) + blk.ep.bwd_exposed_s(ep_merged));
    if (blk.is_layer && plan.recompute == ir::Recompute::selective) st.recompute += r * c.selective_recompute_s;
    if (blk.is_layer && full_fraction > 0) {
      st.recompute += full_fraction * r * c.fwd_compute_s;
      st.tp += full_fraction * r * blk.tp_fwd_s;  // the recomputed forward repeats its collectives
      st.cp += full_fraction * r * blk.cp_fwd_s;  // ... the K/V all-gather included
      st.ep += full_fraction * r * (blk.ep.fwd_comm_s + blk.ep.bwd_comm_s) / 2;  // ... and its dispatch / combine
    }
    // All-gather CP (Llama 3, Dubey et al. 2024 §3.3.2; what the schedule lowers and the runtime
    // runs): the attention kernel waits for the gathered K/V, so the exchange is exposed. A ring
    // exchange would hide it under the attention kernels (Liu et al. 2023, Ring Attention §3).
    st.cp += r * (blk.cp_fwd_s + blk.cp_bwd_s);
    st.params += copies * c.param_elements_local;
    st.expert_params += copies * c.expert_param_elements_local;
    st.adapter_params += copies * c.adapter_param_elements_local;
    if (x.layout.fsdp) {
      // The data-parallel stream runs beside everything else the block keeps the GPU busy with:
      // its kernels, its exposed TP / CP collectives (other communicators, other links) and, in
      // backward, the recomputed forward.
      const double fwd_window = c.fwd_compute_s + blk.tp_fwd_s + blk.cp_fwd_s;
      double bwd_window = c.bwd_compute_s + blk.tp_bwd_s + blk.cp_bwd_s;
      if (blk.is_layer && plan.recompute == ir::Recompute::selective) bwd_window += c.selective_recompute_s;
      if (blk.is_layer && full_fraction > 0) bwd_window += full_fraction * (c.fwd_compute_s + blk.tp_fwd_s + blk.cp_fwd_s);
      runs[b] = {copies, comm[b].ag, comm[b].rs, fwd_window, bwd_window, comm[b].rs + comm[b].all_reduce};
    }
    if (plan.pp > 1 && blk.is_layer && c.boundary_bytes > 0 && st.pp == 0) {
      // Each micro-batch crosses vpp chunk boundaries forward and vpp backward on every stage.
      st.pp = 2.0 * double(plan.vpp) * collective_time_s(cluster_, CollectiveKind::send_recv, 2, c.boundary_bytes, x.pp_link) *
              (1.0 - params_.p2p_hidden_fraction);
    }
  }
  st.params -= tied_on_stage(copies_per_block, s);
  if (x.layout.fsdp && zero3_blocks_compute()) {
    // Blocking per-tensor ZeRO-3 (fsdp_block_comm): nothing hides. Each copy gathers its tensors for
    // the forward, again for a recomputed forward, and again for the backward (the reuse that
    // stage3_max_reuse_distance allows at the recompute / backward turn is not taken), and
    // reduce-scatters their gradients once.
    for (size_t b = 0; b < s.blocks.size(); ++b) {
      const double gathers = 2.0 + (s.blocks[b].is_layer ? full_fraction : 0.0);
      st.fsdp += double(copies_per_block[b]) * (gathers * comm[b].ag + comm[b].rs);
    }
    return st;
  }
  if (!x.layout.fsdp) return st;
  const double slowdown = params_.overlap_compute_slowdown;
  // HSDP: in the last micro-batch each block's gradient shard is also all-reduced across
  // dp_replicate, right after its reduce-scatter on the same stream (FSDP2 HSDP).
  const bool hsdp = plan.dp_replicate > 1 || x.layout.size(ir::MeshGroup::expert_replicate) > 1;
  const FsdpExposures f = hsdp ? chained_fsdp_exposure<true>(fsdp_chunks, runs, slowdown, params_.concurrent_streams)
                               : chained_fsdp_exposure<false>(fsdp_chunks, runs, slowdown, params_.concurrent_streams);
  // Every micro-batch, ends included: FSDP2 waits for the last reduce-scatter at the end of backward,
  // and the next forward's first all-gather queues behind it on the same NCCL stream. The slowed
  // compute is booked with the traffic that causes it.
  st.fsdp = f.every.cost;
  if (hsdp) {
    st.hsdp = f.last.cost - f.every.cost;
    st.hsdp_before_tail = std::max(0.0, st.hsdp - (f.last.ends - f.every.ends));
  }
  return st;
}

double Estimator::data_parallel_time_s(const PlanContext& x, const StageTime& slowest, int64_t params,
                                       int64_t expert_params, int64_t params_shard, int64_t last_ready_params) const {
  const int64_t grad_bytes = params_.gradient_bytes;  // per gradient element reduced
  const ir::Plan& plan = x.layout.plan;
  // Routed experts differ across ep (and etp): their gradients reduce over the expert-data-parallel
  // group, the ranks holding the same expert shard, and the dense ones over dp (Megatron-Core
  // distributed_data_parallel.py: expert buffers use intra_expt_dp_group; parallel_state.py: its size
  // is world / (etp * ep * pp)). The lowering's DDP and ZeRO passes emit the same collectives.
  const bool apart = ir::experts_reduce_apart(x.layout) && expert_params > 0;
  const int64_t dense_params = apart ? params - expert_params : params, own_expert = apart ? expert_params : 0;
  if (x.layout.zero_stage == 0) {
    // DDP: fp32 grads all-reduced in 25 MiB buckets, each paying the ring latency, overlapped with the
    // last backward except the last bucket of each group (dense over dp, experts over expert_dp).
    auto bucketed = [&](ir::MeshGroup group, int64_t bytes) {
      const int64_t buckets = std::max<int64_t>(1, ceil_div(bytes, kLastBucketBytes));
      const double per_bucket = collective_time_s(cluster_, CollectiveKind::all_reduce, x.layout.size(group),
                                                  ceil_div(bytes, buckets), x.link(topology_, group), ddp_bucket_copies(plan.tp));
      return std::pair{double(buckets) * per_bucket, per_bucket};
    };
    const auto [dense_total, dense_last] = bucketed(ir::MeshGroup::dp, dense_params * grad_bytes);
    const auto [expert_total, expert_last] =
        own_expert > 0 ? bucketed(ir::MeshGroup::expert_dp, own_expert * grad_bytes) : std::pair{0.0, 0.0};
    const double hidden_under = params_.concurrent_streams ? slowest.bwd_window * params_.dp_grad_reduce_hidden_fraction : 0.0;
    const int64_t tail_buckets = std::max<int64_t>(1, ceil_div(std::min(last_ready_params, dense_params) * grad_bytes, kLastBucketBytes));
    const double tail = double(std::min(tail_buckets, std::max<int64_t>(1, ceil_div(dense_params * grad_bytes, kLastBucketBytes)))) * dense_last;
    return std::max(dense_total + expert_total - hidden_under, tail + expert_last);
  }
  if (x.layout.zero_stage == 3) return slowest.hsdp;  // per block, inside the FSDP chain of the last micro-batch
  // ZeRO-1: reduce-scatter grads once per step, bucketed under the last backward; ZeRO-2 keeps only a
  // gradient shard, so it reduce-scatters under every micro-batch's backward (DeepSpeed stage 2).
  // The updated bf16 params are all-gathered under the next forward (Megatron --overlap-grad-reduce /
  // --overlap-param-gather, DeepSpeed overlap_comm). The last bucket of each has nothing to hide under.
  // Dense states shard over dp_shard x cp, expert states over its expert ranks (expert_shard).
  auto collective = [&](CollectiveKind kind, int64_t dense_bytes, int64_t expert_bytes) {
    return collective_time_s(cluster_, kind, x.layout.shard_group, dense_bytes, x.shard_link) +
           collective_time_s(cluster_, kind, x.layout.expert_shard_group, expert_bytes, x.expert_link);
  };
  const int64_t last_bucket = std::min(kLastBucketBytes, dense_params * grad_bytes);
  const double rs = collective(CollectiveKind::reduce_scatter, dense_params * grad_bytes, own_expert * grad_bytes);
  const double rs_last = collective(CollectiveKind::reduce_scatter, last_bucket, 0);
  const double ag = collective(CollectiveKind::all_gather, dense_params * kWorkingBytes, own_expert * kWorkingBytes);
  const double ag_last = collective(CollectiveKind::all_gather, std::min(kLastBucketBytes, dense_params * kWorkingBytes), 0);
  const bool concurrent = params_.concurrent_streams;  // else nothing hides (the CPU backend)
  const double bwd = concurrent ? slowest.bwd * params_.dp_grad_reduce_hidden_fraction : 0.0;
  const double fwd = concurrent ? (slowest.compute - slowest.bwd) * params_.dp_param_gather_hidden_fraction : 0.0;
  double t = (x.layout.zero_stage == 2 ? double(x.layout.grad_accum) : 1.0) * std::max(rs - bwd, rs_last);
  t += std::max(ag - fwd, ag_last);
  // The local gradient shard is then all-reduced across the replicas holding the same states: dense
  // over dp_replicate, experts over expert_replicate (the expert-DP ranks outside the shard group).
  const int64_t expert_shard = apart ? ceil_div(expert_params, x.layout.expert_shard_group) : 0;
  t += collective_time_s(cluster_, CollectiveKind::all_reduce, plan.dp_replicate, (params_shard - expert_shard) * grad_bytes,
                         x.replicate_link);
  t += collective_time_s(cluster_, CollectiveKind::all_reduce, x.layout.size(ir::MeshGroup::expert_replicate),
                         expert_shard * grad_bytes, x.expert_replicate_link);
  return t;
}

// The estimate, top to bottom: resolve the plan, time every distinct pipeline stage, run the
// pipeline schedule, add the once-per-step terms, take memory at the worst stage.
Estimate Estimator::estimate(const ir::Plan& input_plan) const {
  const PlanContext x = context_for(input_plan);
  const ir::Plan& plan = x.layout.plan;
  const ShapeSummary& s = summary_for(x);
  const StageLayout& layout = layout_for(x.layout);
  Estimate e;
  e.plan = plan;
  TimeBreakdown& t = e.time;

  // ---- one micro-batch per stage; the slowest stage paces the pipeline ----
  StageTime slowest;
  double all_stages_s = 0;  // sum over physical stages of one micro-batch's time (pipeline fill/drain)
  double all_stages_hsdp_s = 0;  // their HSDP all-reduce exposure in the last micro-batch
  int64_t most_params = 0, most_expert_params = 0, most_adapter_params = 0, last_ready_params = 0;
  const std::vector<BlockFsdpComm>& comm = fsdp_comm_for(s, x);
  for (const auto& stage : layout.stages) {
    const StageTime st = stage_time(s, stage.copies, stage.fsdp_chunks, stage.layers, x, comm);
    all_stages_s += double(stage.count) * st.total();
    all_stages_hsdp_s += double(stage.count) * st.hsdp_before_tail;
    if (st.total() > slowest.total()) slowest = st;
    // The stage's first block (the embedding on stage 0) finishes backward last: its gradients fill
    // the DDP buffer's last buckets (lower_passes.cpp DdpBuffer; PyTorch DDP buckets in reverse
    // parameter order), which nothing is left to hide.
    for (size_t b = 0; b < stage.copies.size(); ++b)
      if (stage.copies[b] > 0) {
        last_ready_params = std::max(last_ready_params, s.blocks[b].cost.param_elements_local -
                                                            s.blocks[b].cost.expert_param_elements_local);
        break;
      }
    if (st.params > most_params) {
      most_params = st.params;
      most_expert_params = st.expert_params;
      most_adapter_params = st.adapter_params;
    }
  }

  // ---- pipeline schedule: 1F1B / interleaved (Narayanan 2021 §2.2) ----
  // The slowest stage runs every micro-batch; filling and draining the pipe adds the other stages'
  // time for one micro-batch, divided over vpp chunks: (pp - 1) / vpp slots when stages are equal,
  // less when only the last (LM head) or first stage is heavy.
  const double ga = double(x.layout.grad_accum);
  t.compute_s = ga * slowest.compute;
  t.recompute_s = ga * slowest.recompute;
  t.exposed_tp_s = ga * slowest.tp;
  t.exposed_cp_s = ga * slowest.cp;
  t.exposed_ep_s = ga * slowest.ep;
  t.exposed_pp_s = ga * slowest.pp;
  t.exposed_fsdp_s = ga * slowest.fsdp;
  // The drain runs the other stages' last backward, which their HSDP all-reduces slow down when the
  // FSDP stream is behind (the slowest stage's own are booked as exposed DP below); the all-reduce
  // after a stage's last kernel (the chain's tail) runs beside the next stage's backward.
  t.bubble_s = (all_stages_s - slowest.total() + all_stages_hsdp_s - slowest.hsdp_before_tail) / double(plan.vpp);

  // ---- once per step: gradient synchronisation outside FSDP, optimizer, fixed costs ----
  // Under LoRA only the adapters have gradients and optimizer states.
  if (settings_.frozen_base()) most_params = most_adapter_params, most_expert_params = 0;
  const int64_t shard = x.layout.zero_stage >= 1 ? x.layout.shard_group : 1;
  const int64_t expert_shard = x.layout.zero_stage >= 1 ? x.layout.expert_shard_group : 1;
  const int64_t params_shard =
      ceil_div(most_params - most_expert_params, shard) + ceil_div(most_expert_params, expert_shard);
  t.exposed_dp_s = data_parallel_time_s(x, slowest, most_params, most_expert_params, params_shard, last_ready_params);
  t.optimizer_s = optimizer_time_s(params_shard, params_shard * kOptimizerTrafficBytes, cluster_, params_);
  t.overhead_s = ga * params_.per_microbatch_overhead_s + params_.per_step_overhead_s;

  e.step_time_s = t.compute_s + t.recompute_s + t.exposed_tp_s + t.exposed_cp_s + t.exposed_ep_s + t.exposed_pp_s +
                  t.exposed_fsdp_s + t.bubble_s + t.exposed_dp_s + t.optimizer_s + t.overhead_s;
  double model_flops = 0;  // whole model, one micro-batch of one replica
  for (size_t b = 0; b < s.blocks.size(); ++b) model_flops += double(graph_.blocks[b].repeat) * s.blocks[b].cost.model_flops;
  e.model_flops_per_step = model_flops * ga * double(x.layout.replicas);
  e.tokens_per_s_per_gpu = double(settings_.global_batch_seqs() * settings_.seq_len) / e.step_time_s / double(num_gpus_);
  e.mfu = e.model_flops_per_step /
          (e.step_time_s * double(num_gpus_) * ir::peak_flops_per_s(cluster_.gpu, settings_.compute_dtype));
  e.host_wait_s = ga * slowest.host_wait;
  e.bottleneck = bottleneck_of(t, e.step_time_s, e.host_wait_s);

  // ---- memory per GPU: the worst pipeline stage (docs/cost-model.md §4) ----
  for (const auto& stage : layout.stages) {
    const MemoryBreakdown sm = stage_memory(s, stage.copies, stage.layers, stage.index, x);
    if (sm.peak_bytes > e.memory.peak_bytes) e.memory = sm;
  }
  return e;
}

}  // namespace mgt::cost
