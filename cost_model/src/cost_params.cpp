// Cost-model constants: the profile-less default and the CPU backend (docs/cost-model.md §7, §9).
// GPU constants come from the kernel model and a framework profile (framework_profile.cpp).
#include "mgt/cost_model/cost_params.hpp"

#include "mgt/cost_model/framework_profile.hpp"

namespace mgt::cost {

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
