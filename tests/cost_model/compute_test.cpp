// Tests for the kernel time model (compute.hpp): every expected value is written out from the
// formulas of docs/cost-model.md §2 on a cluster with round numbers, never copied from the code.
#include "mgt/cost_model/compute.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace mgt::cost {
namespace {

// 1 PFLOP/s bf16, 0.1 PFLOP/s fp32, 1 TB/s HBM.
ir::ClusterSpec round_cluster() {
  ir::ClusterSpec cluster;
  cluster.name = "round";
  cluster.gpu.name = "round-gpu";
  cluster.gpu.peak_bf16_flops_per_s = 1e15;
  cluster.gpu.peak_fp32_flops_per_s = 1e14;
  cluster.gpu.peak_fp8_flops_per_s = 2e15;
  cluster.gpu.hbm_bytes = 80ll << 30;
  cluster.gpu.hbm_bytes_per_s = 1e12;
  return cluster;
}

// Fixed curve constants for these tests (not the calibrated defaults, which may move).
CostParams curve_params() {
  CostParams params;
  params.gemm_max_efficiency = 0.70;
  params.gemm_half_efficiency_dim = 96.0;
  params.kernel_floor_s = 4.0e-6;
  params.hbm_efficiency = 0.80;
  return params;
}

TEST(gemm_efficiency, default_curve_is_product_of_saturating_dims) {
  const ir::ClusterSpec cluster = round_cluster();
  const CostParams params = curve_params();  // defaults: max 0.70, half dim 96
  // m = 4096, n = 1024, k = 96: k sits exactly at the half point.
  const double correct = 0.70 * (4096.0 / (4096.0 + 96.0)) * (1024.0 / (1024.0 + 96.0)) * 0.5;
  const double result = gemm_efficiency(4096, 1024, 96, cluster, ir::DType::bf16, params);
  EXPECT_NEAR(result, correct, 1e-15);
  EXPECT_NEAR(result, 0.70 * 0.977099236641 * 0.914285714286 * 0.5, 1e-10);
}

TEST(gemm_efficiency, zero_half_dim_gives_max_efficiency) {
  CostParams params = curve_params();
  params.gemm_max_efficiency = 0.5;
  params.gemm_half_efficiency_dim = 0;
  EXPECT_DOUBLE_EQ(gemm_efficiency(17, 64, 4096, round_cluster(), ir::DType::bf16, params), 0.5);
}

TEST(gemm_time_s, two_mnk_over_peak_times_efficiency_plus_floor) {
  const ir::ClusterSpec cluster = round_cluster();
  const CostParams params = curve_params();  // default curve and 4 us floor
  const int64_t m = 8192, n = 4096, k = 2048;
  const double eff = 0.70 * (8192.0 / 8288.0) * (4096.0 / 4192.0) * (2048.0 / 2144.0);
  const double correct = 2.0 * 8192 * 4096 * 2048 / (1e15 * eff) + 4e-6;
  EXPECT_NEAR(gemm_time_s(m, n, k, cluster, ir::DType::bf16, params), correct, 1e-15);

  // fp32 runs against the fp32 peak (0.1 PFLOP/s).
  const double correct_f32 = 2.0 * 8192 * 4096 * 2048 / (1e14 * eff) + 4e-6;
  EXPECT_NEAR(gemm_time_s(m, n, k, cluster, ir::DType::f32, params), correct_f32, 1e-14);
}

TEST(gemm_time_s, round_params) {
  CostParams params = curve_params();
  params.gemm_max_efficiency = 0.5;
  params.gemm_half_efficiency_dim = 0;
  params.kernel_floor_s = 0;
  // 2 * 1000 * 2000 * 500 = 2e9 FLOP at 0.5 PFLOP/s = 4 us.
  EXPECT_NEAR(gemm_time_s(1000, 2000, 500, round_cluster(), ir::DType::bf16, params), 4e-6, 1e-18);
}

TEST(gemm_time_s, empty_gemm_is_free) {
  const CostParams params = curve_params();
  EXPECT_EQ(gemm_time_s(0, 128, 128, round_cluster(), ir::DType::bf16, params), 0.0);
  EXPECT_EQ(gemm_time_s(128, 128, -1, round_cluster(), ir::DType::bf16, params), 0.0);
}

TEST(memory_bound_time_s, bytes_over_effective_bandwidth_plus_floor) {
  CostParams params = curve_params();
  params.hbm_efficiency = 0.8;
  params.kernel_floor_s = 4e-6;
  // 8e9 B at 0.8 TB/s = 10 ms, plus 4 us.
  EXPECT_NEAR(memory_bound_time_s(8'000'000'000, round_cluster(), params), 10e-3 + 4e-6, 1e-15);
  params.hbm_efficiency = 1.0;
  params.kernel_floor_s = 0;
  EXPECT_NEAR(memory_bound_time_s(3'000'000, round_cluster(), params), 3e-6, 1e-18);
  EXPECT_EQ(memory_bound_time_s(0, round_cluster(), params), 0.0);
}

TEST(attention_time_s, flops_over_peak_times_efficiency_plus_floor) {
  CostParams params = curve_params();
  params.kernel_floor_s = 5e-6;
  // 1e12 FLOP at 0.45 of 1 PFLOP/s.
  EXPECT_NEAR(attention_time_s(1e12, 0.45, round_cluster(), ir::DType::bf16, params), 1e12 / (0.45e15) + 5e-6, 1e-15);
  // fp8 peak 2 PFLOP/s at 0.5: 1e12 / 1e15 = 1 ms.
  EXPECT_NEAR(attention_time_s(1e12, 0.5, round_cluster(), ir::DType::fp8, params), 1e-3 + 5e-6, 1e-15);
  EXPECT_EQ(attention_time_s(0, 0.45, round_cluster(), ir::DType::bf16, params), 0.0);
}

TEST(gemm_efficiency, measured_table_nearest_in_log_shape) {
  ir::ClusterSpec cluster = round_cluster();
  // Work m*n*k: 1e6, 1e9, 1e12; an fp8 row that would be nearest but has another dtype.
  cluster.gemm_table = {
      {.m = 100, .n = 100, .k = 100, .dtype = ir::DType::bf16, .efficiency = 0.2},
      {.m = 1000, .n = 1000, .k = 1000, .dtype = ir::DType::bf16, .efficiency = 0.5},
      {.m = 10000, .n = 10000, .k = 10000, .dtype = ir::DType::bf16, .efficiency = 0.8},
      {.m = 3000, .n = 1000, .k = 1000, .dtype = ir::DType::fp8, .efficiency = 0.9},
  };
  const CostParams params = curve_params();
  // Distance: squared ln ratios of m, n and k summed.
  // (3000, 1000, 1000): (ln 3)^2 = 1.2 from 1000^3, 1.4 + 2 (ln 10)^2 = 12 from 10000^3.
  EXPECT_DOUBLE_EQ(gemm_efficiency(3000, 1000, 1000, cluster, ir::DType::bf16, params), 0.5);
  // (5000, 10000, 1000): (ln 5)^2 + (ln 10)^2 = 7.9 from 1000^3, (ln 2)^2 + (ln 10)^2 = 5.8 from 10000^3.
  EXPECT_DOUBLE_EQ(gemm_efficiency(5000, 10000, 1000, cluster, ir::DType::bf16, params), 0.8);
  // (1000, 100, 100): (ln 10)^2 = 5.3 from 100^3, 2 (ln 10)^2 from 1000^3.
  EXPECT_DOUBLE_EQ(gemm_efficiency(1000, 100, 100, cluster, ir::DType::bf16, params), 0.2);
  // fp8 sees only its own row.
  EXPECT_DOUBLE_EQ(gemm_efficiency(100, 100, 100, cluster, ir::DType::fp8, params), 0.9);
  // No row of the dtype: the analytic curve.
  const double curve = 0.70 * (256.0 / 352.0) * (256.0 / 352.0) * (256.0 / 352.0);
  EXPECT_NEAR(gemm_efficiency(256, 256, 256, cluster, ir::DType::f32, params), curve, 1e-15);
  // Equal work, different aspect: each shape finds its own row, not whichever comes first.
  ir::ClusterSpec aspect = round_cluster();
  aspect.gemm_table = {{.m = 4096, .n = 64, .k = 64, .dtype = ir::DType::bf16, .efficiency = 0.3},
                       {.m = 256, .n = 256, .k = 256, .dtype = ir::DType::bf16, .efficiency = 0.9}};
  EXPECT_DOUBLE_EQ(gemm_efficiency(256, 256, 256, aspect, ir::DType::bf16, params), 0.9);
  EXPECT_DOUBLE_EQ(gemm_efficiency(4096, 64, 64, aspect, ir::DType::bf16, params), 0.3);
  // (2048, 128, 64): 2 (ln 2)^2 = 0.96 from the thin row, (ln 8)^2 + (ln 2)^2 + (ln 4)^2 = 6.7 from the cube.
  EXPECT_DOUBLE_EQ(gemm_efficiency(2048, 128, 64, aspect, ir::DType::bf16, params), 0.3);
  // (512, 512, 512) lies 3 (ln 2)^2 from 256^3 and from 1024^3: the two rows are averaged,
  // (0.9 + 0.5) / 2.
  aspect.gemm_table.push_back({.m = 1024, .n = 1024, .k = 1024, .dtype = ir::DType::bf16, .efficiency = 0.5});
  EXPECT_NEAR(gemm_efficiency(512, 512, 512, aspect, ir::DType::bf16, params), 0.7, 1e-12);
  // The table feeds gemm_time_s: 2e9 * 3 FLOP at 0.5 PFLOP/s + 4 us.
  EXPECT_NEAR(gemm_time_s(3000, 1000, 1000, cluster, ir::DType::bf16, params), 6e9 / 0.5e15 + 4e-6, 1e-15);
}

}  // namespace
}  // namespace mgt::cost
