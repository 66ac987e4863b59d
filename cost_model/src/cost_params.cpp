// Cost-model constants: the profile-less default and the CPU backend (docs/calibration.md, docs/cost-model.md §9).
// GPU constants come from the kernel model and a framework profile (framework_profile.cpp).
#include "mgt/cost_model/cost_params.hpp"

#include "mgt/cost_model/framework_profile.hpp"

#include <algorithm>
#include <stdexcept>

namespace mgt::cost {

int64_t zero3_submodule_buffer_bytes(const Zero3SubmoduleLimits& limits, int64_t largest_param, int64_t persistent_params,
                                     int64_t reduce_ranks) {
  if (largest_param < 0 || persistent_params < 0 || reduce_ranks < 1 || limits.max_live_parameters < 0 ||
      limits.max_reuse_distance < 0 || limits.reduce_bucket_size < 0)
    throw std::invalid_argument("zero3_submodule_buffer_bytes: negative element count or fewer than one rank");
  constexpr int64_t kBf16 = 2;  // gathered parameters and gradients: bf16 (the comm dtype with bf16 enabled)
  const int64_t P = largest_param, R = limits.reduce_bucket_size;
  // Gathered (partitioned_param_coordinator.py): a submodule's own fetch is unconditional, prefetch
  // follows the trace only while fewer than max_live_parameters are gathered and issues whole tensors,
  // so it stops below max_live + P; a parameter reused within max_reuse_distance elements of the trace
  // stays gathered (__params_to_release), up to that distance plus the module that crosses it.
  const int64_t reuse_held = limits.max_reuse_distance > 0 ? limits.max_reuse_distance + P : 0;
  const int64_t gathered = persistent_params + std::max(limits.max_live_parameters, reuse_held) + P;
  // Gradients (stage3.py): the IPG bucket (reduce_bucket_size elements, allocated once with
  // contiguous_gradients); a gradient larger than the bucket is not copied into it but reduced from
  // param.grad; reduce_scatter_coalesced interleaves what it reduces into a fresh buffer unless it is
  // one tensor that divides evenly over the ranks; and autograd writes the next gradient meanwhile
  // (the reduce is triggered from that gradient's hook).
  const bool oversize = P > R;
  const int64_t interleaved = std::max(R, oversize && P % reduce_ranks != 0 ? P : 0);
  const int64_t gradients = R + (oversize ? P : 0) + interleaved + P;
  return kBf16 * (gathered + gradients);
}

CostParams default_cost_params(const ir::GpuSpec& gpu) { return cost_params_for(gpu, default_framework_profile()); }

CostParams cpu_cost_params() {
  // The CPU backend (mgt-plan probe --backend cpu): a C++ loop over the schedule, no CUDA context,
  // NCCL buffers, caching allocator or Python dispatch, so none of the GPU runtime's fixed costs; the
  // measured peak is what Eigen reaches, so a large GEMM runs near it when the gemm_table has no row;
  // a kernel call costs a function call (~0.1 us: nothing to launch); host memory is measured by
  // STREAM triad, which the elementwise kernels reach at best; and one thread runs every instruction
  // in turn. Measured kernel rates (kernel_table) replace the bandwidth model where the probe wrote
  // them.
  CostParams p;
  p.gemm_max_efficiency = 0.9;
  p.gemm_half_efficiency_dim = 16.0;
  p.attention_fwd_efficiency = 0.3;
  p.attention_bwd_efficiency = 0.3;
  p.hbm_efficiency = 1.0;
  p.kernel_floor_s = 0.1e-6;
  p.overlap_compute_slowdown = 0.0;
  p.concurrent_streams = false;
  p.cuda_context_bytes = 0;
  p.nccl_buffer_bytes = 0;
  p.allocator_fragmentation = 0.0;
  p.per_microbatch_overhead_s = 0.0;
  p.per_step_overhead_s = 0.0;
  return p;
}

}  // namespace mgt::cost
