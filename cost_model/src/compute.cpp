// Kernel time model (docs/cost-model.md §2).
#include "mgt/cost_model/compute.hpp"

#include <cmath>
#include <limits>

namespace mgt::cost {

double gemm_efficiency(int64_t m, int64_t n, int64_t k, const ir::ClusterSpec& cluster, ir::DType dtype,
                       const CostParams& params) {
  if (!cluster.gemm_table.empty()) {
    // Measured rates win: the nearest rows of the same dtype in (log m, log n, log k), so that shapes
    // of equal work but different aspect (a thin GEMM vs a square one) find their own kind. Rows at
    // the same least distance are averaged: a shape between grid points (512 x 1536 x 512 among
    // powers of 4) is as near to the grid's smaller shapes as to its larger ones, and which of them
    // comes first in the file must not decide.
    const double lm = std::log(double(m)), ln = std::log(double(n)), lk = std::log(double(k));
    double best_distance = std::numeric_limits<double>::infinity();
    double sum = 0;
    int count = 0;
    for (const auto& row : cluster.gemm_table) {
      if (row.dtype != dtype) continue;
      const double dm = std::log(double(row.m)) - lm, dn = std::log(double(row.n)) - ln,
                   dk = std::log(double(row.k)) - lk;
      const double distance = dm * dm + dn * dn + dk * dk;
      if (distance < best_distance - 1e-9) {
        best_distance = distance;
        sum = row.efficiency;
        count = 1;
      } else if (distance <= best_distance + 1e-9) {
        sum += row.efficiency;
        ++count;
      }
    }
    const double best = count > 0 ? sum / count : 0.0;
    if (best > 0) return best;
  }
  const double half = params.gemm_half_efficiency_dim;
  auto along = [half](int64_t x) { return double(x) / (double(x) + half); };
  const double best = dtype == ir::DType::fp8 ? params.fp8_gemm_max_efficiency : params.gemm_max_efficiency;
  return best * along(m) * along(n) * along(k);
}

double gemm_time_s(int64_t m, int64_t n, int64_t k, const ir::ClusterSpec& cluster, ir::DType dtype,
                   const CostParams& params) {
  if (m <= 0 || n <= 0 || k <= 0) return 0.0;
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const double rate = ir::peak_flops_per_s(cluster.gpu, dtype) * gemm_efficiency(m, n, k, cluster, dtype, params);
  return flops / rate + params.kernel_floor_s;
}

double memory_bound_time_s(int64_t bytes, const ir::ClusterSpec& cluster, const CostParams& params) {
  if (bytes <= 0) return 0.0;
  return double(bytes) / (cluster.gpu.hbm_bytes_per_s * params.hbm_efficiency) + params.kernel_floor_s;
}

double optimizer_time_s(int64_t param_elements, int64_t bytes, const ir::ClusterSpec& cluster, const CostParams& params) {
  const double rate = ir::measured_kernel_rate(cluster, "optimizer", "fwd");
  if (rate > 0) return param_elements > 0 ? double(param_elements) / rate + params.kernel_floor_s : 0.0;
  return memory_bound_time_s(bytes, cluster, params);
}

double attention_time_s(double flops, double efficiency, const ir::ClusterSpec& cluster, ir::DType dtype,
                        const CostParams& params) {
  if (flops <= 0) return 0.0;
  return flops / (ir::peak_flops_per_s(cluster.gpu, dtype) * efficiency) + params.kernel_floor_s;
}

}  // namespace mgt::cost
