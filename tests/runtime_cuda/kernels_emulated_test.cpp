// The CUDA kernels' device code (runtime/src/cuda/kernels_device.cuh) run on the CPU through
// cuda_emulation.hpp, against the CPU kernels: the same checks as kernels_cuda_test.cpp, on a machine
// without a GPU. What this covers: indexing, masking, tiling, block reductions and accumulation of every
// own kernel. What it does not: cuBLAS (the linear GEMMs), CUDA's float rounding and fused multiply-add,
// memory and launch behaviour on a real device (kernels_cuda_test.cpp on a GPU).
#include "cuda_emulation.hpp"
#include "kernel_check.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"  // the header's kernels this test does not launch
#include "../../runtime/src/cuda/kernels_device.cuh"
#pragma GCC diagnostic pop

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/planner/lower.hpp"
#include "mgt/runtime/cpu/kernels.hpp"
#include "mgt/runtime/cuda/kernels.hpp"
#include "mgt/runtime/executor.hpp"
#include "mgt/runtime/kernel_backend.hpp"

#include "../runtime/train_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

namespace mgt::rt::cuda::kernels {
namespace {

using cuda_emulation::launch;
using test::random_vec;
using test::Vec;
constexpr test::CloseCheck expect_close{"emulated"};

class EmulatedCudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* why = cuda_emulation::unsupported()) GTEST_SKIP() << why;
  }
};

unsigned grid_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

TEST_F(EmulatedCudaKernels, Embedding) {
  const int64_t N = 37, V = 11, C = 24;
  std::vector<int32_t> ids(N);
  for (int64_t n = 0; n < N; ++n) ids[size_t(n)] = static_cast<int32_t>((n * 7) % V);
  const Vec wte = random_vec(V * C, 1), dout = random_vec(N * C, 2);
  Vec out(N * C), want_out(N * C), dwte = random_vec(V * C, 3), want_dwte = dwte;
  cpu::embedding_forward(want_out.data(), ids.data(), wte.data(), N, V, C);
  cpu::embedding_backward(want_dwte.data(), dout.data(), ids.data(), N, V, C);
  launch(grid_for(N * C), kThreads, embedding_forward_kernel, out.data(), ids.data(), wte.data(), N, C);
  launch(grid_for(N * C), kThreads, embedding_backward_kernel, dwte.data(), dout.data(), ids.data(), N, C);
  expect_close(out, want_out, 0, 0, "embedding out");
  expect_close(dwte, want_dwte, 1e-6f, 1e-6f, "embedding dwte");
}

TEST_F(EmulatedCudaKernels, RmsNormAndLayerNorm) {
  const int64_t N = 9, C = 300;  // C > 256: threads loop over the row
  for (bool unit_offset : {false, true}) {
    const Vec x = random_vec(N * C, 4), w = random_vec(C, 5), dout = random_vec(N * C, 6);
    Vec out(N * C), rstd(N), want_out(N * C), want_rstd(N);
    Vec dx = random_vec(N * C, 7), dw = random_vec(C, 8), want_dx = dx, want_dw = dw;
    cpu::rmsnorm_forward(want_out.data(), want_rstd.data(), x.data(), w.data(), N, C, 1e-5f, unit_offset);
    cpu::rmsnorm_backward(want_dx.data(), want_dw.data(), dout.data(), x.data(), w.data(), want_rstd.data(), N, C,
                          unit_offset);
    launch(unsigned(N), kThreads, rmsnorm_forward_kernel, out.data(), rstd.data(), x.data(), w.data(), C, 1e-5f,
           unit_offset);
    launch(unsigned(N), kThreads, rmsnorm_backward_kernel, dx.data(), dw.data(), dout.data(), x.data(), w.data(),
           rstd.data(), C, unit_offset);
    expect_close(out, want_out, 1e-5f, 1e-6f, "rmsnorm out");
    expect_close(rstd, want_rstd, 1e-6f, 0, "rmsnorm rstd");
    expect_close(dx, want_dx, 1e-5f, 1e-5f, "rmsnorm dx");
    expect_close(dw, want_dw, 1e-5f, 1e-5f, "rmsnorm dw");
  }
  const Vec x = random_vec(N * C, 9, 2.0f), w = random_vec(C, 10), b = random_vec(C, 11), dout = random_vec(N * C, 12);
  Vec out(N * C), mean(N), rstd(N), want_out(N * C), want_mean(N), want_rstd(N);
  Vec dx(N * C, 0.5f), dw(C, 0.25f), db(C, -1.0f), want_dx = dx, want_dw = dw, want_db = db;
  cpu::layernorm_forward(want_out.data(), want_mean.data(), want_rstd.data(), x.data(), w.data(), b.data(), N, C,
                         1e-5f);
  cpu::layernorm_backward(want_dx.data(), want_dw.data(), want_db.data(), dout.data(), x.data(), w.data(),
                          want_mean.data(), want_rstd.data(), N, C);
  launch(unsigned(N), kThreads, layernorm_forward_kernel, out.data(), mean.data(), rstd.data(), x.data(), w.data(),
         b.data(), C, 1e-5f);
  launch(unsigned(N), kThreads, layernorm_backward_kernel, dx.data(), dw.data(), db.data(), dout.data(), x.data(),
         w.data(), mean.data(), rstd.data(), C);
  expect_close(out, want_out, 1e-5f, 1e-6f, "layernorm out");
  expect_close(dx, want_dx, 1e-5f, 1e-5f, "layernorm dx");
  expect_close(dw, want_dw, 1e-5f, 1e-5f, "layernorm dw");
  expect_close(db, want_db, 1e-5f, 1e-5f, "layernorm db");
}

TEST_F(EmulatedCudaKernels, BiasAddBiasGradientAndBf16Copy) {
  const int64_t N = 5, OC = 300;
  const Vec b = random_vec(OC, 13), dy = random_vec(N * OC, 14);
  Vec y = random_vec(N * OC, 15), want_y = y, db = random_vec(OC, 16), want_db = db;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) want_y[size_t(n * OC + o)] += b[size_t(o)];
  for (int64_t o = 0; o < OC; ++o) {
    float sum = 0;
    for (int64_t n = 0; n < N; ++n) sum += dy[size_t(n * OC + o)];
    want_db[size_t(o)] += sum;
  }
  launch(grid_for(N * OC), kThreads, add_bias_kernel, y.data(), b.data(), N, OC);
  launch(grid_for(OC), kThreads, bias_grad_kernel, db.data(), dy.data(), N, OC);
  expect_close(y, want_y, 0, 0, "bias add");
  expect_close(db, want_db, 0, 0, "bias grad");
  // Column-major 3 x 2 with leading dimension 4 -> compact bf16 (the 99s are padding past each column). bf16
  // steps by 2^-7 at 1: 1 + 2^-8 and 1 + 3 * 2^-8 are ties and round to even (1 and 1 + 2^-6).
  const Vec src = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 99.0f, -2.0f, 0.5f, 0.0f, 99.0f};
  std::vector<__nv_bfloat16> dst(6);
  launch(1, kThreads, to_bf16_kernel, dst.data(), src.data(), int64_t{3}, int64_t{2}, int64_t{4});
  const uint16_t want[] = {0x3F80, 0x3F80, 0x3F82, 0xC000, 0x3F00, 0x0000};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dst[size_t(i)].bits, want[i]) << i;
}

TEST_F(EmulatedCudaKernels, Rope) {
  const int64_t B = 2, T = 9, H = 3, D = 16;
  Vec cos(T * D / 2), sin(T * D / 2);
  cpu::rope_tables(cos.data(), sin.data(), T, D, /*position_offset=*/5, cpu::RopeConfig{});
  const Vec x = random_vec(B * T * H * D, 20), dout = random_vec(B * T * H * D, 21);
  Vec out(B * T * H * D), want_out(B * T * H * D), dx = random_vec(B * T * H * D, 22), want_dx = dx;
  cpu::rope_forward(want_out.data(), x.data(), cos.data(), sin.data(), B, T, H, D);
  cpu::rope_backward(want_dx.data(), dout.data(), cos.data(), sin.data(), B, T, H, D);
  launch(grid_for(B * T * H * D / 2), kThreads, rope_kernel, out.data(), x.data(), cos.data(), sin.data(), B, T, H, D,
         false);
  launch(grid_for(B * T * H * D / 2), kThreads, rope_kernel, dx.data(), dout.data(), cos.data(), sin.data(), B, T, H,
         D, true);
  expect_close(out, want_out, 1e-6f, 1e-6f, "rope out");
  expect_close(dx, want_dx, 1e-6f, 1e-6f, "rope dx");
}

void check_attention(cpu::AttentionConfig c, const std::vector<int64_t>& q_pos) {
  c.q_pos = q_pos.empty() ? nullptr : q_pos.data();
  const int64_t Tk = cpu::attention_keys(c);
  const int64_t nq = c.B * c.T * c.H * c.D, nkv = c.B * Tk * c.KVH * c.D;
  const Vec q = random_vec(nq, 23), k = random_vec(nkv, 24), v = random_vec(nkv, 25), dout = random_vec(nq, 26);
  Vec want_out(nq), want_lse(c.B * c.H * c.T), scratch(cpu::attention_backward_scratch(c));
  Vec want_dq = random_vec(nq, 27), want_dk = random_vec(nkv, 28), want_dv = random_vec(nkv, 29);
  Vec out(nq), lse(c.B * c.H * c.T), dq = want_dq, dk = want_dk, dv = want_dv, row_dot(c.B * c.H * c.T);
  cpu::attention_forward(want_out.data(), want_lse.data(), q.data(), k.data(), v.data(), c, scratch.data());
  cpu::attention_backward(want_dq.data(), want_dk.data(), want_dv.data(), dout.data(), q.data(), k.data(), v.data(),
                          want_lse.data(), c, scratch.data());
  const AttentionShape a = attention_shape(c);
  launch(unsigned(c.B * c.T * c.H), kTile, attention_forward_kernel, out.data(), lse.data(), q.data(), k.data(),
         v.data(), a);
  launch(unsigned(c.B * c.T * c.H), kTile, attention_backward_query_kernel, dq.data(), row_dot.data(), dout.data(),
         q.data(), k.data(), v.data(), lse.data(), a);
  launch(unsigned(c.B * Tk * c.KVH), kTile, attention_backward_key_kernel, dk.data(), dv.data(), dout.data(), q.data(),
         k.data(), v.data(), lse.data(), row_dot.data(), a);
  expect_close(out, want_out, 1e-4f, 1e-5f, "attention out");
  expect_close(lse, want_lse, 1e-5f, 1e-5f, "attention lse");
  expect_close(dq, want_dq, 1e-4f, 1e-5f, "attention dq");
  expect_close(dk, want_dk, 1e-4f, 1e-5f, "attention dk");
  expect_close(dv, want_dv, 1e-4f, 1e-5f, "attention dv");
}

TEST_F(EmulatedCudaKernels, AttentionCausalGqaOverTwoKeyTiles) {
  cpu::AttentionConfig c;
  c.B = 1, c.T = 130, c.H = 4, c.KVH = 2, c.D = 16;  // 130 keys: two tiles of 128, the second of 2
  check_attention(c, {});
}

TEST_F(EmulatedCudaKernels, AttentionWindowNonCausalAndContextParallelPositions) {
  cpu::AttentionConfig w;
  w.B = 2, w.T = 24, w.H = 2, w.KVH = 2, w.D = 8, w.window = 5;
  check_attention(w, {});
  cpu::AttentionConfig full;
  full.B = 1, full.T = 12, full.H = 3, full.KVH = 1, full.D = 8, full.causal = false, full.scale = 0.3f;
  check_attention(full, {});
  cpu::AttentionConfig cp;  // a cp shard: queries at positions 0..9 and 30..39 against all 40 keys
  cp.B = 1, cp.T = 20, cp.H = 2, cp.KVH = 1, cp.D = 8, cp.Tk = 40;
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < 10; ++t) pos.push_back(t);
  for (int64_t t = 30; t < 40; ++t) pos.push_back(t);
  check_attention(cp, pos);
}

TEST_F(EmulatedCudaKernels, Elementwise) {
  const int64_t n = 700;
  const Vec a = random_vec(n, 30, 3.0f), b = random_vec(n, 31, 3.0f), dout = random_vec(n, 32);
  struct Case {
    Elementwise kind;
    const char* name;
  };
  Vec want0(n), want1(n);
  const auto run = [&](Elementwise kind, Vec& o0, Vec& o1, const float* i0, const float* i1, const float* i2) {
    launch(grid_for(n), kThreads, elementwise_kernel, kind, o0.data(), o1.data(), i0, i1, i2, 0.0f, n);
  };
  Vec o0(n), o1(n);
  cpu::gelu_forward(want0.data(), a.data(), n);
  run(Elementwise::gelu_fwd, o0, o1, a.data(), nullptr, nullptr);
  expect_close(o0, want0, 1e-5f, 1e-6f, "gelu");
  cpu::swiglu_forward(want0.data(), a.data(), b.data(), n);
  run(Elementwise::swiglu_fwd, o0, o1, a.data(), b.data(), nullptr);
  expect_close(o0, want0, 1e-5f, 1e-6f, "swiglu");
  cpu::geglu_forward(want0.data(), a.data(), b.data(), n);
  run(Elementwise::geglu_fwd, o0, o1, a.data(), b.data(), nullptr);
  expect_close(o0, want0, 1e-5f, 1e-6f, "geglu");
  cpu::residual_forward(want0.data(), a.data(), b.data(), n);
  run(Elementwise::residual_fwd, o0, o1, a.data(), b.data(), nullptr);  // exact: one addition
  expect_close(o0, want0, 0, 0, "residual");

  o0 = want0 = random_vec(n, 33);
  o1 = want1 = random_vec(n, 34);
  cpu::gelu_backward(want0.data(), dout.data(), a.data(), n);
  run(Elementwise::gelu_bwd, o0, o1, dout.data(), a.data(), nullptr);
  expect_close(o0, want0, 1e-5f, 1e-6f, "gelu backward");
  cpu::swiglu_backward(want0.data(), want1.data(), dout.data(), a.data(), b.data(), n);
  run(Elementwise::swiglu_bwd, o0, o1, dout.data(), a.data(), b.data());
  expect_close(o0, want0, 1e-5f, 1e-6f, "swiglu dgate");
  expect_close(o1, want1, 1e-5f, 1e-6f, "swiglu dup");
  cpu::geglu_backward(want0.data(), want1.data(), dout.data(), a.data(), b.data(), n);
  run(Elementwise::geglu_bwd, o0, o1, dout.data(), a.data(), b.data());
  expect_close(o0, want0, 1e-5f, 1e-6f, "geglu dgate");
  expect_close(o1, want1, 1e-5f, 1e-6f, "geglu dup");
  o0 = want0, o1 = want1;  // exact from here: the earlier cases differ in the last bits
  cpu::residual_backward(want0.data(), want1.data(), dout.data(), n);
  run(Elementwise::residual_bwd, o0, o1, dout.data(), nullptr, nullptr);
  expect_close(o0, want0, 0, 0, "residual da");
  expect_close(o1, want1, 0, 0, "residual db");
  cpu::scale_in_place(want0.data(), n, 0.25f);
  launch(grid_for(n), kThreads, elementwise_kernel, Elementwise::scale, o0.data(), static_cast<float*>(nullptr),
         static_cast<const float*>(nullptr), static_cast<const float*>(nullptr), static_cast<const float*>(nullptr),
         0.25f, n);
  expect_close(o0, want0, 0, 0, "scale");
}

TEST_F(EmulatedCudaKernels, SoftmaxCrossEntropyInPlaceWithIgnoredTargets) {
  const int64_t N = 5, V = 600, num_targets = 11;
  const Vec logits = random_vec(N * V, 35, 4.0f);
  const std::vector<int32_t> targets = {3, 599, -100, 0, 77};
  Vec want = logits, got = logits;
  const double want_loss = cpu::softmax_cross_entropy_forward_backward(want.data(), want.data(), targets.data(), N, V,
                                                                       num_targets, 0.5f);
  double loss = 0;
  const double inv = 1.0 / double(num_targets);
  launch(unsigned(N), kThreads, cross_entropy_kernel, got.data(), static_cast<const float*>(got.data()), targets.data(),
         V, inv, 0.5 * inv, &loss);
  EXPECT_NEAR(loss, want_loss, 1e-9 * std::fabs(want_loss));
  expect_close(got, want, 1e-5f, 1e-9f, "dlogits");
}

TEST_F(EmulatedCudaKernels, AdamWSumOfSquaresAndProbeInputs) {
  const int64_t n = 1000;
  Vec p = random_vec(n, 36), m(n, 0.0f), v(n, 0.0f), want_p = p, want_m = m, want_v = v;
  const cpu::AdamWConfig config{1e-2, 0.9, 0.95, 1e-8, 0.1};
  for (int64_t step = 1; step <= 3; ++step) {
    const Vec g = random_vec(n, 40 + static_cast<uint32_t>(step));
    cpu::adamw_step(want_p.data(), g.data(), want_m.data(), want_v.data(), n, step, config);
    launch(grid_for(n), kThreads, adamw_kernel, p.data(), g.data(), m.data(), v.data(), n, adamw_scalars(config, step));
    double sum = 0;
    launch(2, kThreads, sum_squares_kernel, g.data(), n, &sum);  // 2 blocks: grid-stride + atomic sum
    EXPECT_NEAR(sum, cpu::grad_sum_squares(g.data(), n), 1e-9 * double(n));
  }
  expect_close(p, want_p, 1e-5f, 1e-6f, "adamw param");
  expect_close(m, want_m, 1e-5f, 1e-7f, "adamw m");
  expect_close(v, want_v, 1e-5f, 1e-9f, "adamw v");
  Vec x(n), c(n);
  launch(grid_for(n), kThreads, probe_uniform_kernel, x.data(), n, uint64_t{9});
  launch(grid_for(n), kThreads, fill_constant_kernel, c.data(), n, 2.5f);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(x[size_t(i)], uniform_bf16(9, i));
    EXPECT_EQ(c[size_t(i)], 2.5f);
  }
}

// ---------------------------------------------------------------------------------------------
// The executor on the emulated kernel set: a KernelBackend that launches the device kernels as the CUDA
// backend's wrappers do (kernels.cu: same grids and scratch; row kernels with smaller blocks), with the CPU
// GEMM standing in for cuBLAS, must train a tiny Llama to the CPU backend's losses.

class EmulatedBackend final : public KernelBackend {
  // Row kernels (norms, loss, sums) work with any multiple of 32 threads; 32 instead of the GPU's 256 keeps
  // the emulation fast. The unit tests above run them with the GPU's block sizes.
  static constexpr unsigned kRowThreads = 32;

 public:
  std::string name() const override { return "emulated cuda"; }
  std::pmr::memory_resource* memory() override { return std::pmr::new_delete_resource(); }
  void fill_zero(float* x, int64_t n) override { std::fill_n(x, n, 0.0f); }
  void copy(float* dst, const float* src, int64_t n) override { std::copy_n(src, n, dst); }
  int64_t attention_forward_scratch(const cpu::AttentionConfig&) const override { return 0; }
  int64_t attention_backward_scratch(const cpu::AttentionConfig& c) const override {
    return cuda::attention_backward_scratch(c);
  }
  void embedding_forward(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t, int64_t C) override {
    launch(grid_for(N * C), kThreads, embedding_forward_kernel, out, ids, wte, N, C);
  }
  void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t, int64_t C) override {
    launch(grid_for(N * C), kThreads, embedding_backward_kernel, dwte, dout, ids, N, C);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps,
                       bool unit_offset) override {
    launch(unsigned(N), kRowThreads, rmsnorm_forward_kernel, out, rstd, x, w, C, eps, unit_offset);
  }
  void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                        int64_t N, int64_t C, bool unit_offset) override {
    launch(unsigned(N), kRowThreads, rmsnorm_backward_kernel, dx, dw, dout, x, w, rstd, C, unit_offset);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                         int64_t N, int64_t C, float eps) override {
    launch(unsigned(N), kRowThreads, layernorm_forward_kernel, out, mean, rstd, x, w, b, C, eps);
  }
  void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x, const float* w,
                          const float* mean, const float* rstd, int64_t N, int64_t C) override {
    launch(unsigned(N), kRowThreads, layernorm_backward_kernel, dx, dw, db, dout, x, w, mean, rstd, C);
  }
  void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t N, int64_t IC, int64_t OC,
                      int64_t ldw) override {  // cuBLAS on a GPU; the bias by the device kernel
    cpu::linear_forward(y, x, w, nullptr, N, IC, OC, ldw);
    if (b != nullptr) launch(grid_for(N * OC), kThreads, add_bias_kernel, y, b, N, OC);
  }
  void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int64_t N,
                       int64_t IC, int64_t OC, int64_t ldw) override {
    cpu::linear_backward(dx, dw, nullptr, dy, x, w, N, IC, OC, ldw);
    if (db != nullptr) launch(grid_for(OC), kThreads, bias_grad_kernel, db, dy, N, OC);
  }
  void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                    int64_t D) override {
    launch(grid_for(B * T * H * D / 2), kThreads, rope_kernel, out, x, cos, sin, B, T, H, D, false);
  }
  void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                     int64_t D) override {
    launch(grid_for(B * T * H * D / 2), kThreads, rope_kernel, dx, dout, cos, sin, B, T, H, D, true);
  }
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                         const cpu::AttentionConfig& c, float*) override {
    const AttentionShape a = attention_shape(c);
    launch(unsigned(a.B * a.T * a.H), kTile, attention_forward_kernel, out, lse, q, k, v, a);
  }
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                          const float* v, const float* lse, const cpu::AttentionConfig& c, float* scratch) override {
    const AttentionShape a = attention_shape(c);
    launch(unsigned(a.B * a.T * a.H), kTile, attention_backward_query_kernel, dq, scratch, dout, q, k, v, lse, a);
    launch(unsigned(a.B * a.Tk * a.KVH), kTile, attention_backward_key_kernel, dk, dv, dout, q, k, v, lse,
           static_cast<const float*>(scratch), a);
  }
  void gelu_forward(float* out, const float* x, int64_t n) override {
    ew(Elementwise::gelu_fwd, out, nullptr, x, nullptr, nullptr, n);
  }
  void gelu_backward(float* dx, const float* dout, const float* x, int64_t n) override {
    ew(Elementwise::gelu_bwd, dx, nullptr, dout, x, nullptr, n);
  }
  void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) override {
    ew(Elementwise::swiglu_fwd, out, nullptr, gate, up, nullptr, n);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       int64_t n) override {
    ew(Elementwise::swiglu_bwd, dgate, dup, dout, gate, up, n);
  }
  void geglu_forward(float* out, const float* gate, const float* up, int64_t n) override {
    ew(Elementwise::geglu_fwd, out, nullptr, gate, up, nullptr, n);
  }
  void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                      int64_t n) override {
    ew(Elementwise::geglu_bwd, dgate, dup, dout, gate, up, n);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    ew(Elementwise::residual_fwd, out, nullptr, a, b, nullptr, n);
  }
  void residual_backward(float* da, float* db, const float* dout, int64_t n) override {
    ew(Elementwise::residual_bwd, da, db, dout, nullptr, nullptr, n);
  }
  double softmax_cross_entropy_forward_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N,
                                                int64_t V, int64_t num_targets, float dloss) override {
    double loss = 0;
    const double inv = 1.0 / double(num_targets);
    if (N > 0)
      launch(unsigned(N), kRowThreads, cross_entropy_kernel, dlogits, logits, targets, V, inv, double(dloss) * inv, &loss);
    return loss;
  }
  void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                  const cpu::AdamWConfig& config) override {
    launch(grid_for(n), kThreads, adamw_kernel, param, grad, m, v, n, adamw_scalars(config, step));
  }
  double grad_sum_squares(const float* grad, int64_t n) override {
    double sum = 0;
    if (n > 0) launch(grid_for(n), kRowThreads, sum_squares_kernel, grad, n, &sum);
    return sum;
  }
  void scale_in_place(float* x, int64_t n, float coefficient) override {
    launch(grid_for(n), kThreads, elementwise_kernel, Elementwise::scale, x, static_cast<float*>(nullptr),
           static_cast<const float*>(nullptr), static_cast<const float*>(nullptr), static_cast<const float*>(nullptr),
           coefficient, n);
  }

 private:
  static void ew(Elementwise kind, float* o0, float* o1, const float* i0, const float* i1, const float* i2, int64_t n) {
    if (n > 0) launch(grid_for(n), kThreads, elementwise_kernel, kind, o0, o1, i0, i1, i2, 0.0f, n);
  }
};

/// Loss and global gradient norm of each step (the norm sees every gradient, the loss only through updates).
std::vector<double> train(const std::string& config, const std::string& plan_json, KernelBackend* kernels) {
  std::vector<double> losses;
  for (const StepStats& stats :
       test::train_tiny(config, plan_json, kernels, {.seq_len = 8, .batch_seqs = 2, .steps = 2, .init_seed = 17,
                                                     .data_seed = 19, .data_vocab = 256, .backend_memory = false})) {
    losses.push_back(stats.loss);
    losses.push_back(stats.grad_norm);
  }
  return losses;
}

TEST_F(EmulatedCudaKernels, ExecutorTrainsTheTinyLlamaToTheCpuLossesAndGradientNorms) {
  const std::filesystem::path config =
      std::filesystem::temp_directory_path() / ("mgt_emulated_llama_" + std::to_string(::getpid()) + ".json");
  std::ofstream(config) << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":32,
    "intermediate_size":64,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"num_hidden_layers":2,
    "vocab_size":256,"max_position_embeddings":64,"rms_norm_eps":1e-5,"rope_theta":10000.0,
    "tie_word_embeddings":false,"hidden_act":"silu"})";
  for (const char* plan : {R"({})", R"({"micro_batch":1,"recompute":"full"})"}) {
    EmulatedBackend emulated;
    const std::vector<double> want = train(config.string(), plan, nullptr);
    const std::vector<double> got = train(config.string(), plan, &emulated);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_NEAR(got[k], want[k], 1e-5 * std::fabs(want[k])) << plan << (k % 2 ? " grad norm" : " loss") << " step "
                                                                << k / 2;
  }
  std::filesystem::remove(config);
}

}  // namespace
}  // namespace mgt::rt::cuda::kernels
