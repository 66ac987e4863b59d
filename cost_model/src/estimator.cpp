// The analytic estimator (docs/cost_model.md). Per plan it combines memoised per-shape block costs
// with data-parallel terms; everything is O(number of distinct blocks) per candidate.
#include "mgt/cost_model/estimator.hpp"

#include "mgt/cost_model/collective.hpp"
#include "mgt/cost_model/compute.hpp"
#include "mgt/ir/error.hpp"

#include <algorithm>
#include <cmath>

namespace mgt::cost {

namespace {
// Bytes per parameter of each state (docs/cost_model.md §4.1, mixed precision as in Micikevicius
// et al. 2018 and ZeRO, Rajbhandari et al. 2020 §3: 2 + 2 + 12 for fp16 grads; here fp32 grads).
constexpr int64_t kMasterBytes = 4;     // fp32 parameter (master copy)
constexpr int64_t kWorkingBytes = 2;    // bf16 copy the kernels read
constexpr int64_t kGradBytes = 4;       // fp32 gradient (reduce dtype fp32, torchtitan default)
constexpr int64_t kAdamBytes = 8;       // exp_avg + exp_avg_sq, fp32
// AdamW step traffic per local parameter: read+write master, m, v (24), read grad (4), write bf16 (2).
constexpr int64_t kOptimizerTrafficBytes = 30;
// DDP's default gradient bucket (torch.nn.parallel.DistributedDataParallel bucket_cap_mb=25): the
// last bucket's all-reduce starts after backward ends and cannot overlap.
constexpr int64_t kLastBucketBytes = 25ll << 20;
}  // namespace

struct Estimator::ShapeSummary {
  struct Block {
    int64_t repeat = 1;
    bool is_layer = true;
    BlockCost cost;
    double tp_fwd_s = 0, tp_bwd_s = 0, cp_fwd_s = 0, cp_bwd_s = 0;
  };
  std::vector<Block> blocks;
  int64_t param_elements_local = 0;  // whole model after tp, tied counted once
  int64_t largest_block_params_local = 0;
};

Estimator::Estimator(const ir::Graph& graph, const ir::ClusterSpec& cluster, int64_t num_gpus,
                     TrainingSettings settings, CostParams params)
    : graph_(graph), cluster_(cluster), num_gpus_(num_gpus), settings_(settings), params_(params),
      topology_(cluster, num_gpus, params) {
  // A tied parameter appears in two blocks; count its elements once.
  for (const auto& [first, second] : graph_.tied_parameters) {
    const auto dot = second.find('.');
    for (const auto& block : graph_.blocks) {
      if (block.name != second.substr(0, dot)) continue;
      if (const auto* t = ir::find_tensor(block, second.substr(dot + 1))) tied_param_elements_ += ir::num_elements(*t);
    }
    (void)first;
  }
}

Estimator::~Estimator() = default;
Estimator::Estimator(Estimator&&) noexcept = default;

const Estimator::ShapeSummary& Estimator::summary_for(const ir::Plan& plan) const {
  const bool sp = ir::sequence_parallel(plan);
  const uint64_t key = (uint64_t(plan.tp) << 44) ^ (uint64_t(plan.cp) << 24) ^ (uint64_t(plan.micro_batch) << 1) ^
                       uint64_t(sp);
  auto it = summaries_.find(key);
  if (it != summaries_.end()) return *it->second;

  ShardContext ctx{plan.micro_batch, settings_.seq_len, plan.tp, plan.cp, sp, settings_.compute_dtype};
  const LinkEstimate tp_link = topology_.link_for_group({{AxisPlacement{plan.tp, 1}}});
  const LinkEstimate cp_link = topology_.link_for_group({{AxisPlacement{plan.cp, plan.tp}}});
  auto price = [&](const std::vector<BlockCollective>& collectives, BlockCollective::Axis axis) {
    double total = 0;
    for (const auto& c : collectives) {
      if (c.axis != axis) continue;
      total += axis == BlockCollective::Axis::tp ? collective_time_s(c.kind, plan.tp, c.bytes, tp_link)
                                                 : collective_time_s(c.kind, plan.cp, c.bytes, cp_link);
    }
    return total;
  };

  auto summary = std::make_unique<ShapeSummary>();
  for (const auto& block : graph_.blocks) {
    ShapeSummary::Block b;
    b.repeat = block.repeat;
    b.is_layer = block.is_layer;
    b.cost = block_cost(block, ctx, cluster_, params_);
    b.tp_fwd_s = price(b.cost.fwd_collectives, BlockCollective::Axis::tp);
    b.tp_bwd_s = price(b.cost.bwd_collectives, BlockCollective::Axis::tp);
    b.cp_fwd_s = price(b.cost.fwd_collectives, BlockCollective::Axis::cp);
    b.cp_bwd_s = price(b.cost.bwd_collectives, BlockCollective::Axis::cp);
    summary->param_elements_local += b.repeat * b.cost.param_elements_local;
    summary->largest_block_params_local = std::max(summary->largest_block_params_local, b.cost.param_elements_local);
    summary->blocks.push_back(std::move(b));
  }
  // Tied weights are split over tp like the vocab dim they carry.
  summary->param_elements_local -= (tied_param_elements_ + plan.tp - 1) / plan.tp;
  return *summaries_.emplace(key, std::move(summary)).first->second;
}

Estimate Estimator::estimate(const ir::Plan& input_plan) const {
  ir::Plan plan = input_plan;
  if (ir::world_size(plan) != num_gpus_)
    throw ir::InputError("--plan", "dp_replicate*dp_shard*cp*tp*pp",
                         "plan uses " + std::to_string(ir::world_size(plan)) + " GPUs, not --gpus " +
                             std::to_string(num_gpus_),
                         "make the product equal the GPU count");
  if (plan.pp != 1 || plan.vpp != 1 || plan.ep != 1)
    throw ir::InputError("--plan", plan.pp != 1 ? "pp" : (plan.vpp != 1 ? "vpp" : "ep"),
                         "pipeline and expert parallelism are not estimated yet", "use pp=1, vpp=1, ep=1");
  const int64_t replicas = plan.dp_replicate * plan.dp_shard;  // model replicas that see distinct sequences
  const int64_t seqs = settings_.global_batch_seqs();
  if (seqs % (replicas * plan.micro_batch) != 0)
    throw ir::InputError("--plan", "micro_batch",
                         "global batch of " + std::to_string(seqs) + " sequences does not divide into " +
                             std::to_string(replicas) + " data-parallel replicas x micro_batch " +
                             std::to_string(plan.micro_batch),
                         "change --global-batch-tokens, micro_batch or the data-parallel sizes");
  const int64_t grad_accum = seqs / (replicas * plan.micro_batch);
  if (plan.grad_accum && *plan.grad_accum != grad_accum)
    throw ir::InputError("--plan", "grad_accum",
                         "grad_accum " + std::to_string(*plan.grad_accum) + " disagrees with the global batch, which needs " +
                             std::to_string(grad_accum),
                         "drop grad_accum to derive it");
  plan.grad_accum = grad_accum;
  plan.sequence_parallel = ir::sequence_parallel(plan);
  plan.zero_stage = ir::zero_stage(plan);
  const int64_t zero = *plan.zero_stage;

  const ShapeSummary& s = summary_for(plan);
  Estimate e;
  TimeBreakdown& t = e.time;
  MemoryBreakdown& m = e.memory;

  // ---- data-parallel groups on the mesh (dp_replicate, dp_shard, cp, tp), tp innermost ----
  const int64_t shard_group = plan.dp_shard * plan.cp;  // FSDP/ZeRO shard over dp_shard x cp (torchtitan)
  const GroupPlacement shard_placement{{AxisPlacement{plan.cp, plan.tp}, AxisPlacement{plan.dp_shard, plan.tp * plan.cp}}};
  const GroupPlacement replicate_placement{{AxisPlacement{plan.dp_replicate, plan.tp * plan.cp * plan.dp_shard}}};
  const LinkEstimate shard_link = topology_.link_for_group(shard_placement);
  const LinkEstimate replicate_link = topology_.link_for_group(replicate_placement);
  const bool fsdp = zero == 3 && shard_group > 1;

  // ---- one micro-batch (docs/cost_model.md §5) ----
  double compute = 0, recompute = 0, tp = 0, cp = 0, fsdp_exposed = 0, hidden_comm = 0, bwd_last = 0;
  double model_flops = 0;
  for (const auto& b : s.blocks) {
    const BlockCost& c = b.cost;
    const double r = double(b.repeat);
    compute += r * (c.fwd_compute_s + c.bwd_compute_s);
    bwd_last += r * c.bwd_compute_s;
    model_flops += r * c.model_flops;
    tp += r * (b.tp_fwd_s + b.tp_bwd_s);
    if (b.is_layer && plan.recompute == ir::Recompute::selective) recompute += r * c.selective_recompute_s;
    if (b.is_layer && plan.recompute == ir::Recompute::full) {
      recompute += r * c.fwd_compute_s;
      tp += r * b.tp_fwd_s;  // the recomputed forward repeats its collectives
    }
    // Ring-style CP exchange overlaps the attention kernels (Liu et al. 2023, Ring Attention §3).
    const double cp_fwd_hidden = std::min(b.cp_fwd_s, c.attention_fwd_s);
    const double cp_bwd_hidden = std::min(b.cp_bwd_s, c.attention_bwd_s);
    cp += r * (b.cp_fwd_s - cp_fwd_hidden + b.cp_bwd_s - cp_bwd_hidden);
    hidden_comm += r * (cp_fwd_hidden + cp_bwd_hidden);
    if (fsdp) {
      // FSDP2: all-gather bf16 params before forward and again before backward (reshard after
      // forward), reduce-scatter fp32 grads after backward, each prefetched under the neighbour
      // block's compute (Zhao et al. 2023 "PyTorch FSDP" §3.3-3.4).
      const int64_t gathered = c.param_elements_local * kWorkingBytes;
      const int64_t reduced = c.param_elements_local * kGradBytes;
      const double ag = collective_time_s(CollectiveKind::all_gather, shard_group, gathered, shard_link);
      const double rs = collective_time_s(CollectiveKind::reduce_scatter, shard_group, reduced, shard_link);
      const double fwd_hidden = std::min(ag, c.fwd_compute_s);
      const double bwd_hidden = std::min(ag + rs, c.bwd_compute_s);
      fsdp_exposed += r * ((ag - fwd_hidden) + (ag + rs - bwd_hidden));
      hidden_comm += r * (fwd_hidden + bwd_hidden);
    }
  }
  if (fsdp) {
    // The first block's all-gather has nothing to hide under.
    const int64_t first = s.blocks.front().cost.param_elements_local * kWorkingBytes;
    fsdp_exposed += collective_time_s(CollectiveKind::all_gather, shard_group, first, shard_link);
  }
  // Compute runs slower while NCCL kernels share the SMs.
  const double contention = params_.overlap_compute_slowdown * hidden_comm;

  t.compute_s = double(grad_accum) * compute;
  t.recompute_s = double(grad_accum) * recompute;
  t.exposed_tp_s = double(grad_accum) * tp;
  t.exposed_cp_s = double(grad_accum) * cp;
  t.exposed_fsdp_s = double(grad_accum) * (fsdp_exposed + contention);

  // ---- once per step: gradient synchronisation outside FSDP, optimizer, fixed costs ----
  const int64_t params_local = s.param_elements_local;
  const int64_t shard = (zero >= 1) ? shard_group : 1;
  const int64_t params_shard = (params_local + shard - 1) / shard;
  double dp_time = 0;
  if (zero == 0) {
    // DDP over every replica and cp rank: all-reduce of fp32 grads.
    const int64_t group = plan.dp_replicate * plan.dp_shard * plan.cp;
    const GroupPlacement all{{AxisPlacement{plan.cp, plan.tp}, AxisPlacement{plan.dp_shard, plan.tp * plan.cp},
                              AxisPlacement{plan.dp_replicate, plan.tp * plan.cp * plan.dp_shard}}};
    const LinkEstimate link = topology_.link_for_group(all);
    const double ar = collective_time_s(CollectiveKind::all_reduce, group, params_local * kGradBytes, link);
    const double last = collective_time_s(CollectiveKind::all_reduce, group,
                                          std::min<int64_t>(kLastBucketBytes, params_local * kGradBytes), link);
    dp_time = std::max(ar - bwd_last, last);
  } else {
    if (zero <= 2) {
      // ZeRO-1/2: reduce-scatter grads then all-gather updated bf16 params, once per step.
      dp_time += collective_time_s(CollectiveKind::reduce_scatter, shard_group, params_local * kGradBytes, shard_link);
      dp_time += collective_time_s(CollectiveKind::all_gather, shard_group, params_local * kWorkingBytes, shard_link);
    }
    // HSDP / replicated shards: all-reduce of the local gradient shard across dp_replicate.
    const double ar = collective_time_s(CollectiveKind::all_reduce, plan.dp_replicate, params_shard * kGradBytes,
                                        replicate_link);
    dp_time += std::max(0.0, ar - (zero == 3 ? bwd_last : 0.0));
  }
  t.exposed_dp_s = dp_time;
  t.optimizer_s = memory_bound_time_s(params_shard * kOptimizerTrafficBytes, cluster_, params_);
  t.overhead_s = double(grad_accum) * params_.per_microbatch_overhead_s + params_.per_step_overhead_s;

  e.step_time_s = t.compute_s + t.recompute_s + t.exposed_tp_s + t.exposed_cp_s + t.exposed_fsdp_s + t.exposed_dp_s +
                  t.optimizer_s + t.overhead_s;
  e.model_flops_per_step = model_flops * double(grad_accum) * double(replicas);
  e.tokens_per_s_per_gpu = double(settings_.global_batch_seqs() * settings_.seq_len) / e.step_time_s / double(num_gpus_);
  e.mfu = e.model_flops_per_step /
          (e.step_time_s * double(num_gpus_) * ir::peak_flops_per_s(cluster_.gpu, settings_.compute_dtype));
  e.bottleneck = bottleneck_of(t, e.step_time_s);

  // ---- memory per GPU (docs/cost_model.md §4) ----
  switch (zero) {
    case 0:
      m.parameters_bytes = params_local * (kMasterBytes + kWorkingBytes);
      m.gradients_bytes = params_local * kGradBytes;
      m.optimizer_bytes = params_local * kAdamBytes;
      break;
    case 1:  // Megatron distributed optimizer: bf16 params, fp32 grads, sharded master + Adam
      m.parameters_bytes = params_local * kWorkingBytes + params_shard * kMasterBytes;
      m.gradients_bytes = params_local * kGradBytes;
      m.optimizer_bytes = params_shard * kAdamBytes;
      break;
    case 2:
      m.parameters_bytes = params_local * kWorkingBytes + params_shard * kMasterBytes;
      m.gradients_bytes = params_shard * kGradBytes;
      m.optimizer_bytes = params_shard * kAdamBytes;
      break;
    default:
      m.parameters_bytes = params_shard * kMasterBytes;
      m.gradients_bytes = params_shard * kGradBytes;
      m.optimizer_bytes = params_shard * kAdamBytes;
      if (fsdp)  // current + prefetched block unsharded in bf16, plus one block's unsharded grads (bf16 -> fp32)
        m.fsdp_buffers_bytes = s.largest_block_params_local * (2 * kWorkingBytes + kWorkingBytes + kGradBytes);
      break;
  }
  int64_t activations = 0, largest_saved_none = 0, largest_tensor = 0, logits = 0;
  for (const auto& b : s.blocks) {
    const BlockCost& c = b.cost;
    int64_t saved = c.saved_bytes_none;
    if (b.is_layer && plan.recompute == ir::Recompute::selective) saved = c.saved_bytes_selective;
    if (b.is_layer && plan.recompute == ir::Recompute::full) saved = c.saved_bytes_full;
    activations += b.repeat * saved;
    largest_saved_none = std::max(largest_saved_none, b.is_layer ? c.saved_bytes_none : 0);
    largest_tensor = std::max(largest_tensor, c.largest_tensor_bytes);
    logits = std::max(logits, c.logits_bytes);
  }
  m.activations_bytes = activations;
  // Backward holds one block's rematerialised activations (full recompute) and the gradients of
  // the two largest tensors in flight; the loss holds the logits working set.
  const int64_t backward_transient =
      (plan.recompute == ir::Recompute::full ? largest_saved_none : 0) + 2 * largest_tensor;
  m.transient_bytes = std::max(logits, backward_transient);
  const int64_t allocated = m.parameters_bytes + m.gradients_bytes + m.optimizer_bytes + m.fsdp_buffers_bytes +
                            m.activations_bytes + m.transient_bytes;
  m.overhead_bytes = params_.cuda_context_bytes + params_.nccl_buffer_bytes +
                     int64_t(std::llround(params_.allocator_fragmentation * double(allocated)));
  m.peak_bytes = allocated + m.overhead_bytes;
  e.plan = plan;
  return e;
}

std::string bottleneck_of(const TimeBreakdown& t, double step_time_s) {
  // Communication binds when what is exposed is at least 10 % of the step; otherwise compute does.
  struct Term { const char* name; double s; };
  const Term terms[] = {{"exposed tp communication", t.exposed_tp_s},
                        {"exposed cp communication", t.exposed_cp_s},
                        {"exposed fsdp communication", t.exposed_fsdp_s},
                        {"exposed dp communication", t.exposed_dp_s}};
  const Term* worst = &terms[0];
  for (const auto& term : terms)
    if (term.s > worst->s) worst = &term;
  if (worst->s >= 0.10 * step_time_s) return worst->name;
  if (t.optimizer_s + t.overhead_s >= 0.25 * step_time_s) return "fixed costs (optimizer and per-step overhead)";
  return "compute";
}

}  // namespace mgt::cost
