// The hand-computed time of one dense layer of the tiny model (tiny_llama.hpp) on the round cluster
// (round_hardware.hpp): the reference the estimator tests compare block and stage times against.
#pragma once

#include "round_hardware.hpp"
#include "tiny_llama.hpp"

#include <cstdint>

namespace mgt::cost::hand {

struct BlockTimes {
  double fwd = 0, bwd = 0;  // seconds, one micro-batch
  double total() const { return fwd + bwd; }
};

// One dense layer's kernels for one micro-batch of b sequences of s tokens. Weight GEMMs run at
// `weight_rate` FLOP/s (bf16: peak x 0.5; fp8: fp8 peak x 0.4); everything else in bf16. Backward of
// a GEMM is two GEMMs of the forward's FLOPs (dA, dB). A low-precision format quantises, at
// `quantize_bytes` per element, each distinct linear input once (x for q/k/v, the attention output, x
// for gate/up, the activation) and each linear's output gradient.
inline BlockTimes hand_layer(int64_t b, int64_t s, double weight_rate = round::kPeak * round::kGemmEff,
                             double quantize_bytes = 0) {
  using round::kHbm, round::kPeak, tiny::A, tiny::D, tiny::F, tiny::H, tiny::K;
  const double T = double(b * s);
  auto mem = [](double bytes) { return bytes / kHbm; };
  const double x_bytes = T * H * 2, f_bytes = T * F * 2;
  const double norm_f = mem(2 * x_bytes), norm_b = mem(3 * x_bytes);
  const double qkvo_f = 2 * T * H * (A * D + 2 * K * D + A * D) / weight_rate;
  const double mlp_f = 2 * T * H * 3 * F / weight_rate;
  const double rope = mem(2 * T * A * D * 2) + mem(2 * T * K * D * 2);
  const double attn_flops = 2.0 * double(b) * double(s) * double(s) * A * (D + D) * 0.5;  // causal
  const double res_f = mem(3 * x_bytes), res_b = mem(2 * x_bytes);
  const double act_f = mem(3 * f_bytes), act_b = mem(5 * f_bytes);  // silu_glu: 2 in + 1 out; 4 + 1
  const double quantize_f = mem(quantize_bytes * T * (2 * H + A * D + F));
  const double quantize_b = mem(quantize_bytes * T * (A * D + 2 * K * D + 2 * H + 2 * F));
  return {2 * norm_f + qkvo_f + rope + attn_flops / (kPeak * 0.5) + 2 * res_f + mlp_f + act_f + quantize_f,
          2 * norm_b + 2 * qkvo_f + rope + 2.5 * attn_flops / (kPeak * 0.25) + 2 * res_b + 2 * mlp_f + act_b + quantize_b};
}

}  // namespace mgt::cost::hand
