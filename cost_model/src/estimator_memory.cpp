// The estimator's memory per pipeline stage (docs/cost-model.md §4): model states per ZeRO stage,
// the activations of the micro-batches in flight, FSDP buffers at their worst moment.
#include "estimator_internal.hpp"

#include "mgt/cost_model/compute.hpp"
#include "mgt/cost_model/task_cost.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mgt::cost {

using namespace estimator_detail;

namespace {

// Parameters, gradients and optimizer state per ZeRO stage (fp32 master + bf16 working params,
// fp32 grads, Adam moments); `shard_params` is the stage's share after data-parallel sharding.
void set_model_state_bytes(MemoryBreakdown& sm, int64_t zero_stage, int64_t params, int64_t shard_params,
                           int64_t grad_bytes) {
  switch (zero_stage) {
    case 0:
      sm.parameters_bytes = params * (kMasterBytes + kWorkingBytes);
      sm.gradients_bytes = params * grad_bytes;
      sm.optimizer_bytes = params * kAdamBytes;
      break;
    case 1:  // Megatron distributed optimizer: bf16 params, fp32 grads, sharded master + Adam
      sm.parameters_bytes = params * kWorkingBytes + shard_params * kMasterBytes;
      sm.gradients_bytes = params * grad_bytes;
      sm.optimizer_bytes = shard_params * kAdamBytes;
      break;
    case 2:
      sm.parameters_bytes = params * kWorkingBytes + shard_params * kMasterBytes;
      sm.gradients_bytes = shard_params * grad_bytes;
      sm.optimizer_bytes = shard_params * kAdamBytes;
      break;
    default:
      sm.parameters_bytes = shard_params * kMasterBytes;
      sm.gradients_bytes = shard_params * grad_bytes;
      sm.optimizer_bytes = shard_params * kAdamBytes;
      break;
  }
}

// Micro-batches in flight on stage k (Megatron schedules): 1F1B warms up pp - k - 1 forwards, so
// pp - k are live, at most grad_accum; the interleaved schedule warms up 2 (pp - k - 1) + (vpp - 1) pp
// chunks of 1/vpp of the stage's layers, at most all grad_accum * vpp chunks, and all of them when
// grad_accum == pp (schedules.py). On the first stage that is pp (1 + (pp - 1) / (pp vpp))
// (Korthikanti et al. 2022 §4.2.3).
double micro_batches_in_flight(const ir::Plan& plan, int64_t grad_accum, int64_t stage_index) {
  const int64_t k = stage_index;
  double in_flight = 0;
  if (plan.vpp == 1) {
    in_flight = double(std::min<int64_t>(grad_accum, plan.pp - k));
  } else {
    const int64_t all = grad_accum * plan.vpp;
    const int64_t chunks =
        grad_accum == plan.pp ? all : std::min<int64_t>(all, 2 * (plan.pp - k - 1) + (plan.vpp - 1) * plan.pp + 1);
    in_flight = double(chunks) / double(plan.vpp);
  }
  return std::max(in_flight, 1.0);
}

// The stage's blocks in forward order (each repeated `copies` times) for FSDP's per-copy phases.
struct StageBlock {
  int64_t params = 0, copies = 0, logits_bytes = 0;
  double saved_bytes = 0;  // activations one copy saves for backward, one micro-batch
  bool is_layer = false;
};

// The worst moment of an FSDP2 stage: its buffers, transient and activations then, bytes.
struct FsdpPeak {
  int64_t fsdp_bytes = 0, transient_bytes = 0, activations_bytes = 0;
};

// Parameters (`largest_*_block`) in elements; `logits`, `backward_transient` and `activations_bytes`
// (the activations without FSDP, the peak's fallback) in bytes; `per_microbatch_saved` in bytes of
// one micro-batch.
FsdpPeak fsdp_peak(const std::vector<StageBlock>& order, const ir::Plan& plan, int64_t largest_layer_block,
                   int64_t largest_block, int64_t logits, int64_t backward_transient, double in_flight,
                   double per_microbatch_saved, int64_t activations_bytes, int64_t grad_bytes) {
  // FSDP2's buffers peak in backward, copy by copy, and the loss's logits peak only during the head's
  // backward: take the worst moment, not the sum of each one's worst (docs/cost-model.md §4.3).
  // Backward of copy b (P = its unsharded parameters; b-1 the copy before it in forward order,
  // prefetched; b+1 the copy after it, whose fp32 reduce-scatter input is still in flight):
  //   while its kernels run:  transient + w_b + g_b(bf16) + w_{b-1} + g_{b+1}(fp32)
  //   after its last kernel:  w_{b-1} + g_b(bf16) + g_b(fp32), w_b already resharded.
  // With pp, each chunk's last layer copy stays gathered while its micro-batches are in flight.
  // Activations: the other in-flight micro-batches hold all of theirs; the one in backward holds
  // the copies before b (and b's own while its kernels run), within its chunk under vpp.
  const int64_t kept = plan.pp > 1 ? plan.vpp * largest_layer_block * kWorkingBytes : 0;
  const double all_saved = in_flight * per_microbatch_saved;
  int64_t worst = 0, worst_fsdp = 0, worst_transient = 0, worst_act = activations_bytes;
  auto consider = [&](int64_t transient, int64_t fsdp, double act) {
    const int64_t a = round_bytes(act);
    if (transient + fsdp + a > worst)
      worst = transient + fsdp + a, worst_fsdp = fsdp, worst_transient = transient, worst_act = a;
  };
  double saved_before = 0;  // one micro-batch, the copies before block i
  int64_t stage_layer_copies = 0;
  for (const StageBlock& b : order) stage_layer_copies += b.is_layer ? b.copies : 0;
  const int64_t layers_per_chunk = ceil_div(std::max<int64_t>(stage_layer_copies, 1), plan.vpp);
  for (size_t i = 0; i < order.size(); ++i) {
    const StageBlock& b = order[i];
    const int64_t before = i > 0 ? order[i - 1].params : 0, after = i + 1 < order.size() ? order[i + 1].params : 0;
    const bool head = b.logits_bytes > 0;
    // The head's neighbour is the kept last layer: counted once.
    const int64_t held = head ? std::max<int64_t>(0, kept - largest_layer_block * kWorkingBytes) : kept;
    const int64_t transient = head ? b.logits_bytes : backward_transient;
    // First and last copy of the run (neighbours from other blocks), and a middle one.
    const int64_t first_next = b.copies > 1 ? b.params : after, last_prev = b.copies > 1 ? b.params : before;
    const std::pair<int64_t, int64_t> neighbours[] = {{before, first_next}, {last_prev, after}, {b.params, b.params}};
    const double copy_index[] = {0, double(b.copies - 1), double(b.copies - 2)};  // first, last, a middle one
    for (size_t k = 0; k < (b.copies >= 3 ? 3u : 2u); ++k) {
      const auto& [prev, next] = neighbours[k];
      const double through_b = saved_before + (copy_index[k] + 1) * b.saved_bytes;
      const double running = all_saved - (per_microbatch_saved - through_b) / double(plan.vpp);
      // A chunk's last layer copy is itself the one kept gathered: its weights count once. The
      // run's last copy always is; the others are when each chunk holds a single layer.
      const bool kept_itself = kept > 0 && b.is_layer && (k == 1 || layers_per_chunk == 1);
      const int64_t held_beside = held - (kept_itself ? b.params * kWorkingBytes : 0);
      consider(transient, held_beside + b.params * 2 * kWorkingBytes + prev * kWorkingBytes + next * grad_bytes,
               running);
      consider(0, held + prev * kWorkingBytes + b.params * (kWorkingBytes + grad_bytes),
               running - b.saved_bytes / double(plan.vpp));
    }
    saved_before += double(b.copies) * b.saved_bytes;
  }
  // The end of the last forward: every in-flight micro-batch's activations, the loss's logits.
  consider(logits, kept + largest_block * kWorkingBytes, all_saved);
  return {worst_fsdp, worst_transient, worst_act};
}

}  // namespace

MemoryBreakdown Estimator::stage_memory(const ShapeSummary& s, const std::vector<int64_t>& copies_per_block,
                                        int64_t stage_layers, int64_t stage_index, const PlanContext& x) const {
  const ir::Plan& plan = x.layout.plan;
  MemoryBreakdown sm;
  int64_t params = 0, expert = 0, largest_block = 0, largest_saved_none = 0, largest_tensor = 0, logits = 0;
  int64_t adapters = 0, nf4 = 0;  // LoRA adapters, QLoRA's NF4-stored base weights
  // Reused per thread: the search calls this for every candidate stage, and the blocks are few.
  static thread_local std::vector<StageBlock> order;
  order.clear();
  int64_t largest_layer_block = 0, largest_param_tensor = 0, persistent = 0;
  double per_microbatch_saved = 0;
  const double full_fraction = full_recompute_fraction(plan, stage_layers);
  for (size_t b = 0; b < s.blocks.size(); ++b) {
    const int64_t copies = copies_per_block[b];
    if (copies == 0) continue;
    const auto& blk = s.blocks[b];
    const BlockCost& c = blk.cost;
    params += copies * c.param_elements_local;
    expert += copies * c.expert_param_elements_local;
    adapters += copies * c.adapter_param_elements_local;
    nf4 += copies * c.nf4_param_elements_local;
    largest_param_tensor = std::max(largest_param_tensor, c.largest_param_elements_local);
    persistent += copies * c.persistent_param_elements_local;
    const int64_t p_local = c.param_elements_local;
    largest_block = std::max(largest_block, p_local);
    order.push_back({p_local, copies, c.logits_bytes, 0, blk.is_layer});
    if (blk.is_layer) largest_layer_block = std::max(largest_layer_block, p_local);
    double saved = double(c.saved_bytes_none);
    if (blk.is_layer && plan.recompute == ir::Recompute::selective) saved = double(c.saved_bytes_selective);
    if (blk.is_layer && full_fraction > 0)
      saved = full_fraction * double(c.saved_bytes_full) + (1.0 - full_fraction) * double(c.saved_bytes_none);
    per_microbatch_saved += double(copies) * saved;
    order.back().saved_bytes = saved;
    if (blk.is_layer) largest_saved_none = std::max(largest_saved_none, c.saved_bytes_none);
    largest_tensor = std::max(largest_tensor, c.largest_tensor_bytes);
    logits = std::max(logits, c.logits_bytes);
  }
  params -= tied_on_stage(copies_per_block, s);
  const int64_t shard = x.layout.zero_stage >= 1 ? x.layout.shard_group : 1;
  const int64_t expert_shard = x.layout.zero_stage >= 1 ? x.layout.expert_shard_group : 1;
  // LoRA / QLoRA: the frozen base is held as stored (sharded only under ZeRO-3 / FSDP, which shards
  // every parameter); the states below are the adapters', the only trained weights.
  int64_t frozen_bytes = 0;
  if (settings_.frozen_base()) {
    const double base = frozen_base_bytes(params, std::min(nf4, params));
    frozen_bytes = int64_t(std::ceil(x.layout.zero_stage == 3 ? base / double(x.layout.shard_group) : base));
    params = adapters, expert = 0;
  }
  const int64_t shard_params = ceil_div(params - expert, shard) + ceil_div(expert, expert_shard);
  set_model_state_bytes(sm, x.layout.zero_stage, params, shard_params, params_.gradient_bytes);
  sm.parameters_bytes += frozen_bytes;
  const double in_flight = micro_batches_in_flight(plan, x.layout.grad_accum, stage_index);
  sm.activations_bytes = round_bytes(in_flight * per_microbatch_saved);
  // Backward holds one layer's rematerialised activations (full recompute) and the gradients of the
  // two largest tensors in flight; the loss holds the logits working set.
  const int64_t backward_transient = (full_fraction > 0 ? largest_saved_none : 0) + 2 * largest_tensor;
  sm.transient_bytes = std::max(logits, backward_transient);
  if (x.layout.zero_stage == 3 && x.layout.fsdp && params_.zero3_submodule_limits) {
    // DeepSpeed: per-tensor gathers under its limits, a bound at every moment, so it adds to the
    // activations and transients at their worst (docs/cost-model.md §4.3). Its gradients reduce over
    // the whole data-parallel world (hpZ's secondary shard is for parameters only).
    sm.fsdp_buffers_bytes = zero3_submodule_buffer_bytes(*params_.zero3_submodule_limits, largest_param_tensor,
                                                         persistent, plan.dp_replicate * plan.dp_shard);
  } else if (x.layout.zero_stage == 3 && x.layout.fsdp) {
    const FsdpPeak peak = fsdp_peak(order, plan, largest_layer_block, largest_block, logits, backward_transient, in_flight,
                                    per_microbatch_saved, sm.activations_bytes, params_.gradient_bytes);
    sm.fsdp_buffers_bytes = peak.fsdp_bytes;
    sm.transient_bytes = peak.transient_bytes;
    sm.activations_bytes = peak.activations_bytes;
  }
  const int64_t allocated = sm.parameters_bytes + sm.gradients_bytes + sm.optimizer_bytes + sm.fsdp_buffers_bytes +
                            sm.activations_bytes + sm.transient_bytes;
  sm.overhead_bytes = params_.cuda_context_bytes + params_.nccl_buffer_bytes +
                      round_bytes(params_.allocator_fragmentation * double(allocated));
  sm.peak_bytes = allocated + sm.overhead_bytes;
  return sm;
}

}  // namespace mgt::cost
