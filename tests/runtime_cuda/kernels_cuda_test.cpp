// CUDA kernels against the CPU kernels (the oracle), ggml test-backend-ops style: the same random
// inputs through cpu:: on the host and cuda:: on the device, compared element by element with a
// tolerance per op. Every test skips (GTEST_SKIP) when cudaGetDeviceCount finds no device.
#include "mgt/runtime/cpu/kernels.hpp"
#include "mgt/runtime/cuda/device.hpp"
#include "mgt/runtime/cuda/kernels.hpp"

#include "kernel_check.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace mgt::rt {
namespace {

using cuda::DeviceArray;
using test::random_vec;
using test::Vec;
constexpr test::CloseCheck expect_close{"cuda"};

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    const cuda::DeviceCount n = cuda::device_count();
    if (n.count == 0) GTEST_SKIP() << "no CUDA device: " << n.reason;
    ctx = std::make_unique<cuda::Context>(cuda::Precision::fp32);
  }
  Vec down(const DeviceArray<float>& d) {
    ctx->synchronize();
    return d.download();
  }
  std::unique_ptr<cuda::Context> ctx;
};

TEST(CudaDevice, NoDeviceIsReportedNotThrown) {
  const cuda::DeviceCount n = cuda::device_count();
  EXPECT_TRUE(cuda::compiled_in());
  if (n.count > 0) GTEST_SKIP() << n.count << " CUDA device(s) present: the no-device path is not reachable";
  EXPECT_FALSE(n.reason.empty());
  try {
    cuda::Context ctx;
    ADD_FAILURE() << "Context without a device did not throw";
  } catch (const cuda::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
  EXPECT_NE(cuda::backends_description().find("cuda+nccl"), std::string::npos);
}

TEST_F(CudaKernels, Embedding) {
  const int64_t N = 37, V = 11, C = 24;
  std::vector<int32_t> ids(N);
  for (int64_t n = 0; n < N; ++n) ids[n] = static_cast<int32_t>((n * 7) % V);  // repeats: scatter-add collides
  const Vec wte = random_vec(V * C, 1), dout = random_vec(N * C, 2);
  Vec out(N * C), dwte = random_vec(V * C, 3);
  DeviceArray<int32_t> d_ids(ids);
  DeviceArray<float> d_wte(wte), d_out(N * C), d_dout(dout), d_dwte(dwte);
  cpu::embedding_forward(out.data(), ids.data(), wte.data(), N, V, C);
  cpu::embedding_backward(dwte.data(), dout.data(), ids.data(), N, V, C);
  cuda::embedding_forward(*ctx, d_out.data(), d_ids.data(), d_wte.data(), N, V, C);
  cuda::embedding_backward(*ctx, d_dwte.data(), d_dout.data(), d_ids.data(), N, V, C);
  expect_close(down(d_out), out, 0, 0, "embedding out");
  expect_close(down(d_dwte), dwte, 1e-6f, 1e-6f, "embedding dwte");
}

TEST_F(CudaKernels, RmsNormForwardBackward) {
  const int64_t N = 19, C = 300;
  for (bool unit_offset : {false, true}) {
    const Vec x = random_vec(N * C, 4), w = random_vec(C, 5), dout = random_vec(N * C, 6);
    Vec out(N * C), rstd(N), dx = random_vec(N * C, 7), dw = random_vec(C, 8);
    DeviceArray<float> d_x(x), d_w(w), d_dout(dout), d_out(N * C), d_rstd(N), d_dx(dx), d_dw(dw);
    cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f, unit_offset);
    cpu::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C, unit_offset);
    cuda::rmsnorm_forward(*ctx, d_out.data(), d_rstd.data(), d_x.data(), d_w.data(), N, C, 1e-5f, unit_offset);
    cuda::rmsnorm_backward(*ctx, d_dx.data(), d_dw.data(), d_dout.data(), d_x.data(), d_w.data(), d_rstd.data(), N, C,
                           unit_offset);
    expect_close(down(d_out), out, 1e-5f, 1e-6f, "rmsnorm out");
    expect_close(down(d_rstd), rstd, 1e-6f, 0, "rmsnorm rstd");
    expect_close(down(d_dx), dx, 1e-5f, 1e-5f, "rmsnorm dx");
    expect_close(down(d_dw), dw, 1e-5f, 1e-5f, "rmsnorm dw");
  }
}

TEST_F(CudaKernels, LayerNormForwardBackward) {
  const int64_t N = 13, C = 257;
  const Vec x = random_vec(N * C, 9, 2.0f), w = random_vec(C, 10), b = random_vec(C, 11), dout = random_vec(N * C, 12);
  Vec out(N * C), mean(N), rstd(N), dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  DeviceArray<float> d_x(x), d_w(w), d_b(b), d_dout(dout), d_out(N * C), d_mean(N), d_rstd(N), d_dx(dx), d_dw(dw),
      d_db(db);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
  cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(),
                          N, C);
  cuda::layernorm_forward(*ctx, d_out.data(), d_mean.data(), d_rstd.data(), d_x.data(), d_w.data(), d_b.data(), N, C,
                          1e-5f);
  cuda::layernorm_backward(*ctx, d_dx.data(), d_dw.data(), d_db.data(), d_dout.data(), d_x.data(), d_w.data(),
                           d_mean.data(), d_rstd.data(), N, C);
  expect_close(down(d_out), out, 1e-5f, 1e-6f, "layernorm out");
  expect_close(down(d_dx), dx, 1e-5f, 1e-5f, "layernorm dx");
  expect_close(down(d_dw), dw, 1e-5f, 1e-5f, "layernorm dw");
  expect_close(down(d_db), db, 1e-5f, 1e-5f, "layernorm db");
}

// A row-parallel slice (ldw > IC) with bias, forward and backward; fp32 tight, bf16 within bf16 rounding.
void check_linear(cuda::Context& ctx, float rtol, float atol) {
  const int64_t N = 33, IC = 40, OC = 24, ldw = 64;
  const Vec x = random_vec(N * IC, 13), w = random_vec(OC * ldw, 14), b = random_vec(OC, 15),
            dy = random_vec(N * OC, 16);
  Vec y(N * OC), dx = random_vec(N * IC, 17), dw = random_vec(OC * ldw, 18), db = random_vec(OC, 19);
  DeviceArray<float> d_x(x), d_w(w), d_b(b), d_dy(dy), d_y(N * OC), d_dx(dx), d_dw(dw), d_db(db);
  cpu::linear_forward(y.data(), x.data(), w.data(), b.data(), N, IC, OC, ldw);
  cpu::linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, IC, OC, ldw);
  cuda::linear_forward(ctx, d_y.data(), d_x.data(), d_w.data(), d_b.data(), N, IC, OC, ldw);
  cuda::linear_backward(ctx, d_dx.data(), d_dw.data(), d_db.data(), d_dy.data(), d_x.data(), d_w.data(), N, IC, OC,
                        ldw);
  ctx.synchronize();
  expect_close(d_y.download(), y, rtol, atol, "linear y");
  expect_close(d_dx.download(), dx, rtol, atol, "linear dx");
  expect_close(d_dw.download(), dw, rtol, atol, "linear dw (including the untouched columns past IC)");
  expect_close(d_db.download(), db, 1e-5f, 1e-5f, "linear db");
}

TEST_F(CudaKernels, LinearFp32) { check_linear(*ctx, 1e-5f, 1e-5f); }

TEST_F(CudaKernels, LinearBf16) {
  cuda::Context bf16(cuda::Precision::bf16);
  // bf16 operands (8 mantissa bits) with fp32 accumulation over IC = 40 or N = 33 products of |.| < 1.
  check_linear(bf16, 2e-2f, 6e-2f);
}

TEST_F(CudaKernels, Rope) {
  const int64_t B = 2, T = 9, H = 3, D = 16;
  cpu::RopeConfig rope;
  Vec cos(T * D / 2), sin(T * D / 2);
  cpu::rope_tables(cos.data(), sin.data(), T, D, /*position_offset=*/5, rope);
  const Vec x = random_vec(B * T * H * D, 20), dout = random_vec(B * T * H * D, 21);
  Vec out(B * T * H * D), dx = random_vec(B * T * H * D, 22);
  DeviceArray<float> d_cos(cos), d_sin(sin), d_x(x), d_dout(dout), d_out(B * T * H * D), d_dx(dx);
  cpu::rope_forward(out.data(), x.data(), cos.data(), sin.data(), B, T, H, D);
  cpu::rope_backward(dx.data(), dout.data(), cos.data(), sin.data(), B, T, H, D);
  cuda::rope_forward(*ctx, d_out.data(), d_x.data(), d_cos.data(), d_sin.data(), B, T, H, D);
  cuda::rope_backward(*ctx, d_dx.data(), d_dout.data(), d_cos.data(), d_sin.data(), B, T, H, D);
  expect_close(down(d_out), out, 1e-6f, 1e-6f, "rope out");
  expect_close(down(d_dx), dx, 1e-6f, 1e-6f, "rope dx");
}

// GQA attention forward and backward; T > 128 so that several key tiles and the online softmax are used.
void check_attention(cuda::Context& ctx, cpu::AttentionConfig c, const std::vector<int64_t>& q_pos) {
  const int64_t Tk = cpu::attention_keys(c);
  const int64_t nq = c.B * c.T * c.H * c.D, nkv = c.B * Tk * c.KVH * c.D;
  const Vec q = random_vec(nq, 23), k = random_vec(nkv, 24), v = random_vec(nkv, 25), dout = random_vec(nq, 26);
  // Gradients start non-zero: the kernels accumulate (+=).
  const Vec dq0 = random_vec(nq, 27), dk0 = random_vec(nkv, 28), dv0 = random_vec(nkv, 29);
  Vec out(nq), lse(c.B * c.H * c.T), dq = dq0, dk = dk0, dv = dv0;
  Vec scratch(cpu::attention_backward_scratch(c));
  DeviceArray<int64_t> d_pos(q_pos.empty() ? std::vector<int64_t>{0} : q_pos);
  cpu::AttentionConfig host = c;
  host.q_pos = q_pos.empty() ? nullptr : q_pos.data();
  cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), host, scratch.data());
  cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), lse.data(), host,
                          scratch.data());
  cpu::AttentionConfig dev = c;
  dev.q_pos = q_pos.empty() ? nullptr : d_pos.data();
  DeviceArray<float> d_q(q), d_k(k), d_v(v), d_dout(dout), d_out(nq), d_lse(c.B * c.H * c.T), d_dq(dq0), d_dk(dk0),
      d_dv(dv0), d_scratch(cuda::attention_backward_scratch(c));
  cuda::attention_forward(ctx, d_out.data(), d_lse.data(), d_q.data(), d_k.data(), d_v.data(), dev);
  cuda::attention_backward(ctx, d_dq.data(), d_dk.data(), d_dv.data(), d_dout.data(), d_q.data(), d_k.data(),
                           d_v.data(), d_lse.data(), dev, d_scratch.data());
  ctx.synchronize();
  expect_close(d_out.download(), out, 1e-4f, 1e-5f, "attention out");
  expect_close(d_lse.download(), lse, 1e-5f, 1e-5f, "attention lse");
  expect_close(d_dq.download(), dq, 1e-4f, 1e-5f, "attention dq");
  expect_close(d_dk.download(), dk, 1e-4f, 1e-5f, "attention dk");
  expect_close(d_dv.download(), dv, 1e-4f, 1e-5f, "attention dv");
}

TEST_F(CudaKernels, AttentionCausalGqa) {
  cpu::AttentionConfig c;
  c.B = 2, c.T = 150, c.H = 4, c.KVH = 2, c.D = 32;
  check_attention(*ctx, c, {});
}

TEST_F(CudaKernels, AttentionSlidingWindowAndContextParallelPositions) {
  cpu::AttentionConfig w;
  w.B = 1, w.T = 140, w.H = 2, w.KVH = 1, w.D = 64, w.window = 37;
  check_attention(*ctx, w, {});
  // A cp shard: 2 chunks of 20 queries (positions 0..19 and 100..119) against all Tk = 120 keys.
  cpu::AttentionConfig cp;
  cp.B = 1, cp.T = 40, cp.H = 2, cp.KVH = 2, cp.D = 16, cp.Tk = 120;
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < 20; ++t) pos.push_back(t);
  for (int64_t t = 100; t < 120; ++t) pos.push_back(t);
  check_attention(*ctx, cp, pos);
}

TEST_F(CudaKernels, Elementwise) {
  const int64_t n = 1000;
  const Vec a = random_vec(n, 27, 3.0f), b = random_vec(n, 28, 3.0f), dout = random_vec(n, 29);
  DeviceArray<float> d_a(a), d_b(b), d_dout(dout), d_out(n);
  Vec out(n);
  cpu::gelu_forward(out.data(), a.data(), n);
  cuda::gelu_forward(*ctx, d_out.data(), d_a.data(), n);
  expect_close(down(d_out), out, 1e-5f, 1e-6f, "gelu");
  cpu::swiglu_forward(out.data(), a.data(), b.data(), n);
  cuda::swiglu_forward(*ctx, d_out.data(), d_a.data(), d_b.data(), n);
  expect_close(down(d_out), out, 1e-5f, 1e-6f, "swiglu");
  cpu::geglu_forward(out.data(), a.data(), b.data(), n);
  cuda::geglu_forward(*ctx, d_out.data(), d_a.data(), d_b.data(), n);
  expect_close(down(d_out), out, 1e-5f, 1e-6f, "geglu");
  cpu::residual_forward(out.data(), a.data(), b.data(), n);
  cuda::residual_forward(*ctx, d_out.data(), d_a.data(), d_b.data(), n);
  expect_close(down(d_out), out, 0, 0, "residual");

  Vec g1 = random_vec(n, 30), g2 = random_vec(n, 31);
  DeviceArray<float> d_g1(g1), d_g2(g2);
  cpu::gelu_backward(g1.data(), dout.data(), a.data(), n);
  cuda::gelu_backward(*ctx, d_g1.data(), d_dout.data(), d_a.data(), n);
  expect_close(down(d_g1), g1, 1e-5f, 1e-6f, "gelu backward");
  cpu::swiglu_backward(g1.data(), g2.data(), dout.data(), a.data(), b.data(), n);
  cuda::swiglu_backward(*ctx, d_g1.data(), d_g2.data(), d_dout.data(), d_a.data(), d_b.data(), n);
  expect_close(down(d_g1), g1, 1e-5f, 1e-6f, "swiglu dgate");
  expect_close(down(d_g2), g2, 1e-5f, 1e-6f, "swiglu dup");
  cpu::geglu_backward(g1.data(), g2.data(), dout.data(), a.data(), b.data(), n);
  cuda::geglu_backward(*ctx, d_g1.data(), d_g2.data(), d_dout.data(), d_a.data(), d_b.data(), n);
  expect_close(down(d_g1), g1, 1e-5f, 1e-6f, "geglu dgate");
  expect_close(down(d_g2), g2, 1e-5f, 1e-6f, "geglu dup");
  cpu::residual_backward(g1.data(), g2.data(), dout.data(), n);
  cuda::residual_backward(*ctx, d_g1.data(), d_g2.data(), d_dout.data(), n);
  expect_close(down(d_g1), g1, 0, 0, "residual da");
  expect_close(down(d_g2), g2, 0, 0, "residual db");
}

TEST_F(CudaKernels, SoftmaxCrossEntropyInPlaceWithIgnoredTargets) {
  const int64_t N = 7, V = 1000;
  const Vec logits = random_vec(N * V, 32, 4.0f);
  std::vector<int32_t> targets = {3, 999, -100, 0, 512, -1, 77};
  Vec cpu_logits = logits;
  const double cpu_loss = cpu::softmax_cross_entropy_forward_backward(cpu_logits.data(), cpu_logits.data(),
                                                                      targets.data(), N, V, /*num_targets=*/20, 0.5f);
  DeviceArray<float> d_logits(logits);
  DeviceArray<int32_t> d_targets(targets);
  const double loss = cuda::softmax_cross_entropy_forward_backward(*ctx, d_logits.data(), d_logits.data(),
                                                                   d_targets.data(), N, V, 20, 0.5f);
  EXPECT_NEAR(loss, cpu_loss, 1e-9 * std::fabs(cpu_loss));
  expect_close(down(d_logits), cpu_logits, 1e-5f, 1e-9f, "dlogits");
  DeviceArray<float> d_fresh(logits);
  EXPECT_NEAR(cuda::softmax_cross_entropy_forward_backward(*ctx, nullptr, d_fresh.data(), d_targets.data(), N, V, 20),
              cpu::softmax_cross_entropy_forward_backward(nullptr, logits.data(), targets.data(), N, V, 20),
              1e-9 * std::fabs(cpu_loss));
}

TEST_F(CudaKernels, AdamWThreeStepsNormAndScale) {
  const int64_t n = 5000;
  Vec p = random_vec(n, 33), m(n, 0.0f), v(n, 0.0f);
  DeviceArray<float> d_p(p), d_m(m), d_v(v);
  const cpu::AdamWConfig config{1e-2, 0.9, 0.95, 1e-8, 0.1};
  for (int64_t step = 1; step <= 3; ++step) {
    const Vec g = random_vec(n, 40 + static_cast<uint32_t>(step));
    DeviceArray<float> d_g(g);
    cpu::adamw_step(p.data(), g.data(), m.data(), v.data(), n, step, config);
    cuda::adamw_step(*ctx, d_p.data(), d_g.data(), d_m.data(), d_v.data(), n, step, config);
    EXPECT_NEAR(cuda::grad_sum_squares(*ctx, d_g.data(), n), cpu::grad_sum_squares(g.data(), n), 1e-9 * n);
  }
  expect_close(down(d_p), p, 1e-5f, 1e-6f, "adamw param");
  expect_close(down(d_m), m, 1e-5f, 1e-7f, "adamw m");
  expect_close(down(d_v), v, 1e-5f, 1e-9f, "adamw v");
  cpu::scale_in_place(p.data(), n, 0.25f);
  cuda::scale_in_place(*ctx, d_p.data(), n, 0.25f);
  expect_close(down(d_p), p, 1e-6f, 0, "scale_in_place");
}

}  // namespace
}  // namespace mgt::rt
