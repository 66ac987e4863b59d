// Low-precision linear layers (--precision fp8 | mxfp8 | nvfp4) and the Blackwell Ultra presets: the
// datasheet peaks per GPU, the time of one weight GEMM at the fp8 and fp4 peaks worked out by hand, the LM
// head kept in bf16, and the refusal of block-scaled formats on Hopper naming the GPU and what it supports.
#include "mgt/cost_model/compute.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/task_cost.hpp"

#include "tiny_llama.hpp"

#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace mgt::cost {
namespace {

TEST(precision, blackwell_ultra_presets_carry_datasheet_peaks) {
  // HGX B300: 36 PF bf16 and 72 PF fp8 sparse, 108 PF fp4 dense per 8 GPUs; 288 GB at 8 TB/s; 8 GPUs per NVLink domain.
  const ir::ClusterSpec b300 = ir::cluster_preset("b300");
  EXPECT_DOUBLE_EQ(b300.gpu.peak_bf16_flops_per_s, 36e15 / 2 / 8);
  EXPECT_DOUBLE_EQ(b300.gpu.peak_fp8_flops_per_s, 72e15 / 2 / 8);
  EXPECT_DOUBLE_EQ(b300.gpu.peak_fp4_flops_per_s, 108e15 / 8);
  EXPECT_EQ(b300.gpu.hbm_bytes, 288ll << 30);
  EXPECT_DOUBLE_EQ(b300.gpu.hbm_bytes_per_s, 8e12);
  EXPECT_EQ(b300.nvlink_domain_gpus, 8);
  EXPECT_DOUBLE_EQ(b300.nvlink_bytes_per_s, 1.8e12 / 2);
  EXPECT_DOUBLE_EQ(b300.nic_bytes_per_s, 800e9 / 8);
  // GB300 NVL72: 360 PF bf16 and 720 PF fp8 sparse, 1080 PF fp4 dense per 72 GPUs; one 72-GPU NVLink domain.
  const ir::ClusterSpec gb300 = ir::cluster_preset("gb300-nvl72");
  EXPECT_DOUBLE_EQ(gb300.gpu.peak_bf16_flops_per_s, 360e15 / 2 / 72);
  EXPECT_DOUBLE_EQ(gb300.gpu.peak_fp8_flops_per_s, 720e15 / 2 / 72);
  EXPECT_DOUBLE_EQ(gb300.gpu.peak_fp4_flops_per_s, 1080e15 / 72);
  EXPECT_EQ(gb300.nvlink_domain_gpus, 72);
  EXPECT_EQ(gb300.gpus_per_node, 4);
  EXPECT_EQ(gb300.nics_per_node, 4);
  // B200 / GB200 gain their fp4 peaks (72 PF per 8 GPUs, 1440 PF sparse per 72).
  EXPECT_DOUBLE_EQ(ir::cluster_preset("b200").gpu.peak_fp4_flops_per_s, 72e15 / 8);
  EXPECT_DOUBLE_EQ(ir::cluster_preset("gb200-nvl72").gpu.peak_fp4_flops_per_s, 1440e15 / 2 / 72);
}

ir::Block one_linear() {
  ir::Block b;
  b.name = "mlp";
  b.is_layer = true;
  b.tensors = {tiny::tensor("x", "bsh"), tiny::tensor("w", "hf", true), tiny::tensor("y", "bsf")};
  b.ops = {tiny::make_op("up_proj", ir::OpKind::contraction, {"x", "w"}, "y", "bsh,hf->bsf")};
  return b;
}

// One micro-batch of 4096 tokens with its linears in `format`.
ShardContext low_precision_context(ir::LinearFormat format) {
  ShardContext ctx;
  ctx.seq_len = 4096;
  ctx.fp8_linears = true;
  ctx.linear_format = format;
  return ctx;
}

TEST(precision, gemm_time_at_the_fp8_and_fp4_peaks) {
  const ir::ClusterSpec b300 = ir::cluster_preset("b300");
  const CostParams params;
  // Forward y = x w: m = 4096 tokens, n = f = 128, k = h = 64; FLOPs 2 m n k. The GEMM runs at the
  // fp8 peak x its rate over fp8 (fp8 and MXFP8 1, NVFP4 1.47: TE's B300 GEMM profiles; under
  // B300's fp4 peak of 13.5 PF), then TE
  // quantises x (m k elements) before it: fp8 current scaling 8 B per element, MXFP8 7 B (both fitted to
  // the same profiles), NVFP4 2 + 2 + 0.5 + 0.5 + 2/16 = 5.125 B (counted); one memory-bound kernel at
  // HBM x hbm_efficiency plus its floor.
  const double flops = 2.0 * 4096 * 128 * 64;
  const double eff = gemm_efficiency(4096, 128, 64, b300, ir::DType::fp8, params);
  const double x_elements = 4096.0 * 64;
  struct Case {
    ir::LinearFormat format;
    double rate, quantize_bytes;
  };
  for (const Case& c : {Case{ir::LinearFormat::fp8, 4500e12 * 1.0, 8.0}, Case{ir::LinearFormat::mxfp8, 4500e12 * 1.0, 7.0},
                        Case{ir::LinearFormat::nvfp4, 4500e12 * 1.47, 5.125}}) {
    const BlockCost cost = block_cost(one_linear(), low_precision_context(c.format), b300, params);
    const double gemm_s = flops / (c.rate * eff) + params.kernel_floor_s;
    const double quantize_s = std::llround(c.quantize_bytes * x_elements) / (8e12 * params.hbm_efficiency) + params.kernel_floor_s;
    EXPECT_NEAR(cost.fwd_compute_s, gemm_s + quantize_s, 1e-15) << ir::to_string(c.format);
  }
}

// Backward quantises the output gradient dy (m x n elements) once for both GEMMs (dgrad and wgrad):
// an nvfp4 linear's backward is the two GEMMs at 4.5 PF x 1.47 plus 5.125 B x m n at HBM bandwidth,
// three kernel floors.
TEST(precision, backward_quantises_the_output_gradient_once) {
  const ir::ClusterSpec b300 = ir::cluster_preset("b300");
  const CostParams params;
  const double rate = 4500e12 * 1.47;
  // dx = dy w^T: m 4096, n 64, k 128; dw = x^T dy: m 64, n 128, k 4096.
  const double dgrad = 2.0 * 4096 * 64 * 128 / (rate * gemm_efficiency(4096, 64, 128, b300, ir::DType::fp8, params));
  const double wgrad = 2.0 * 64 * 128 * 4096 / (rate * gemm_efficiency(64, 128, 4096, b300, ir::DType::fp8, params));
  const double quantize_dy = std::llround(5.125 * 4096 * 128) / (8e12 * params.hbm_efficiency);
  const BlockCost cost = block_cost(one_linear(), low_precision_context(ir::LinearFormat::nvfp4), b300, params);
  EXPECT_NEAR(cost.bwd_compute_s, dgrad + wgrad + quantize_dy + 3 * params.kernel_floor_s, 1e-15);
}

TEST(precision, lm_head_stays_in_the_compute_dtype) {
  const ir::ClusterSpec b300 = ir::cluster_preset("b300");
  ShardContext ctx;
  ctx.seq_len = 1024;
  const BlockCost bf16 = block_cost(tiny::head(), ctx, b300, {});
  ctx.fp8_linears = true;
  ctx.linear_format = ir::LinearFormat::nvfp4;
  EXPECT_DOUBLE_EQ(block_cost(tiny::head(), ctx, b300, {}).fwd_compute_s, bf16.fwd_compute_s);
}

// NVFP4's rate is a multiple of the fp8 rate, capped by the fp4 peak: GB200 (fp8 5 PF, fp4 10 PF)
// runs NVFP4 GEMMs at 5 x 1.47 = 7.35 PF, not at B300's share of its fp4 peak (0.49 x 10 = 4.9 PF, slower
// than its fp8 GEMMs' 5 PF); a part whose fp4 peak were only 1.2x its fp8 peak stops at that peak.
TEST(precision, nvfp4_rate_is_a_multiple_of_the_fp8_rate_under_the_fp4_peak) {
  const ir::GpuSpec gb200 = ir::cluster_preset("gb200-nvl72").gpu;
  EXPECT_DOUBLE_EQ(linear_gemm_rate_flops_per_s(gb200, ir::LinearFormat::nvfp4, ir::DType::bf16), 5000e12 * 1.47);
  EXPECT_DOUBLE_EQ(linear_gemm_rate_flops_per_s(gb200, ir::LinearFormat::mxfp8, ir::DType::bf16), 5000e12);
  EXPECT_DOUBLE_EQ(linear_gemm_rate_flops_per_s(gb200, ir::LinearFormat::none, ir::DType::bf16), 2500e12);
  ir::GpuSpec narrow = gb200;
  narrow.peak_fp4_flops_per_s = 1.2 * narrow.peak_fp8_flops_per_s;
  EXPECT_DOUBLE_EQ(linear_gemm_rate_flops_per_s(narrow, ir::LinearFormat::nvfp4, ir::DType::bf16), 6000e12);
}

TEST(precision, block_scaled_formats_refused_before_blackwell) {
  const ir::GpuSpec h100 = ir::cluster_preset("h100-sxm").gpu;
  for (const auto format : {ir::LinearFormat::mxfp8, ir::LinearFormat::nvfp4}) {
    try {
      linear_gemm_peak_flops_per_s(h100, format, ir::DType::bf16);
      FAIL() << "no refusal for " << ir::to_string(format);
    } catch (const ir::InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(h100.name), std::string::npos) << what;
      EXPECT_NE(what.find("supports fp32, bf16, fp16, fp8"), std::string::npos) << what;
      EXPECT_NE(what.find(ir::to_string(format)), std::string::npos) << what;
    }
  }
  EXPECT_DOUBLE_EQ(linear_gemm_peak_flops_per_s(h100, ir::LinearFormat::fp8, ir::DType::bf16), h100.peak_fp8_flops_per_s);
}

}  // namespace
}  // namespace mgt::cost
