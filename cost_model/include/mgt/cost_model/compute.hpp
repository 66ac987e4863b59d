// Compute-time model for one kernel: GEMMs at a shape-dependent efficiency under the dtype's peak,
// attention at the flash-attention efficiency, memory-bound kernels at HBM bandwidth, each with a
// launch floor. Formulas and sources: docs/cost-model.md §2.
#pragma once

#include "mgt/cost_model/cost_params.hpp"
#include "mgt/ir/cluster_spec.hpp"

#include <cstdint>

namespace mgt::cost {

/// Achieved / peak for an (m x k) . (k x n) GEMM. Without a measured table:
///   max_efficiency * prod_{x in m,n,k} x / (x + half_dim)
/// (a saturating curve per dimension: tile quantisation and too few waves hurt small dims; the
/// product form follows the roofline-with-tiles model of NVIDIA's "Matrix Multiplication Background
/// User's Guide", §2-3). With a measured table, the nearest row in log(m*n*k) is used.
double gemm_efficiency(int64_t m, int64_t n, int64_t k, const ir::ClusterSpec& cluster, ir::DType dtype,
                       const CostParams& params);

/// Seconds for one GEMM: 2*m*n*k / (peak * efficiency) + kernel floor.
double gemm_time_s(int64_t m, int64_t n, int64_t k, const ir::ClusterSpec& cluster, ir::DType dtype,
                   const CostParams& params);

/// Seconds for a kernel that moves `bytes` through HBM: bytes / (hbm_bytes_per_s * hbm_efficiency)
/// + kernel floor (the roofline's memory-bound side).
double memory_bound_time_s(int64_t bytes, const ir::ClusterSpec& cluster, const CostParams& params);

/// The optimizer step over `param_elements` parameters moving `bytes`: at the measured "optimizer"
/// rate (parameters per second, kernel_table phase fwd) when the cluster has one, else at memory
/// bandwidth.
double optimizer_time_s(int64_t param_elements, int64_t bytes, const ir::ClusterSpec& cluster, const CostParams& params);

/// Seconds for `flops` of attention at `efficiency` of the dtype peak, plus a kernel floor.
double attention_time_s(double flops, double efficiency, const ir::ClusterSpec& cluster, ir::DType dtype,
                        const CostParams& params);

}  // namespace mgt::cost
