// The "round" cluster and cost parameters of the hand-computed cost-model tests: rates chosen so that
// every expected time is a short product written out by hand (1 PFLOP/s, 1 TB/s, GEMMs at exactly
// half of peak), the training settings by sequence count, and the relative-tolerance check.
#pragma once

#include "mgt/cost_model/cost_params.hpp"
#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>

namespace mgt::cost::round {

constexpr double kPeak = 1e15, kGemmEff = 0.5, kHbm = 1e12;

/// 8-GPU NVLink nodes: kPeak bf16 FLOP/s, 80 GiB of HBM at kHbm B/s, 100 GB/s NVLink, 50 GB/s PCIe,
/// 8 NICs of 10 GB/s; latencies 1 us NVLink, 2 us PCIe, 5 us network (all 0 without `latencies`).
inline ir::ClusterSpec cluster(bool latencies = true) {
  ir::ClusterSpec c;
  c.name = "round";
  c.gpu.name = "round-gpu";
  c.gpu.peak_bf16_flops_per_s = kPeak;
  c.gpu.hbm_bytes = 80ll << 30;
  c.gpu.hbm_bytes_per_s = kHbm;
  c.gpus_per_node = 8;
  c.nvlink_domain_gpus = 8;
  c.nvlink_bytes_per_s = 100e9;
  c.nvlink_latency_s = latencies ? 1e-6 : 0;
  c.pcie_bytes_per_s = 50e9;
  c.pcie_latency_s = latencies ? 2e-6 : 0;
  c.nics_per_node = 8;
  c.nic_bytes_per_s = 10e9;
  c.network_latency_s = latencies ? 5e-6 : 0;
  return c;
}

/// Every GEMM at exactly kGemmEff of peak (half-efficiency dim 0), attention 0.5 fwd / 0.25 bwd, HBM and
/// links at their raw rates, no kernel floor, no overlap slowdown, no per-step or per-micro-batch
/// overhead; 1 GiB CUDA context, 256 MiB NCCL buffers, 5 % allocator fragmentation.
inline CostParams params() {
  return {.gemm_max_efficiency = kGemmEff,
          .gemm_half_efficiency_dim = 0,
          .attention_fwd_efficiency = 0.5,
          .attention_bwd_efficiency = 0.25,
          .attention_curve = {},
          .hbm_efficiency = 1.0,
          .kernel_floor_s = 0,
          .nvlink_efficiency = 1.0,
          .network_efficiency = 1.0,
          .pcie_efficiency = 1.0,
          .overlap_compute_slowdown = 0,
          .cuda_context_bytes = 1ll << 30,
          .nccl_buffer_bytes = 1ll << 28,
          .allocator_fragmentation = 0.05,
          .per_microbatch_overhead_s = 0,
          .per_step_overhead_s = 0,
          .zero3_submodule_limits = std::nullopt};
}

constexpr int64_t kSeq = 1024;

/// `seqs` sequences of kSeq tokens per step.
inline TrainingSettings settings(int64_t seqs = 64) {
  TrainingSettings s;
  s.seq_len = kSeq;
  s.global_batch_tokens = seqs * kSeq;
  return s;
}

/// |result - correct| within `rel` of |correct|.
inline void expect_near_rel(double result, double correct, double rel = 1e-12) {
  EXPECT_NEAR(result, correct, std::abs(correct) * rel) << "correct " << correct;
}

}  // namespace mgt::cost::round
