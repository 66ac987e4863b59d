// CUDA kernels with the CPU kernel set (cuda/kernels.hpp; the CPU kernels in cpu/kernels.cpp are the
// reference and carry the derivations). llm.c style: one thread block per row for row reductions,
// grid-stride loops for elementwise work, cuBLAS for every GEMM. C++17 (nvcc), no CUB.
#include "mgt/runtime/cuda/kernels.hpp"

#include "check.hpp"
#include "kernels_device.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace mgt::rt::cuda {

using namespace kernels;  // the __global__ kernels and their device helpers (kernels_device.cuh)

// ---------------------------------------------------------------------------------------------
// Context

struct Context::Impl {
  Precision precision = Precision::fp32;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  __nv_bfloat16* bf16[2] = {nullptr, nullptr};  // bf16 operand copies for the GEMMs
  size_t bf16_elements[2] = {0, 0};
  double* reduce = nullptr;  // one double: the loss / sum-of-squares accumulator

  __nv_bfloat16* bf16_buffer(int which, size_t n) {
    if (bf16_elements[which] < n) {
      MGT_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (bf16[which] != nullptr) MGT_CUDA_CHECK(cudaFree(bf16[which]));
      bf16[which] = nullptr;
      MGT_CUDA_CHECK(cudaMalloc(&bf16[which], n * sizeof(__nv_bfloat16)));
      bf16_elements[which] = n;
    }
    return bf16[which];
  }
};

Context::Context(Precision precision, int device) : impl_(std::make_unique<Impl>()) {
  require_device(device);
  impl_->precision = precision;
  MGT_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  MGT_CUBLAS_CHECK(cublasCreate(&impl_->cublas));
  MGT_CUBLAS_CHECK(cublasSetStream(impl_->cublas, impl_->stream));
  // fp32 mode: no TF32 and no reduced-precision shortcuts (the mode checked against the CPU). bf16 mode: the
  // default math, so cublasGemmEx may use tensor cores for the bf16 operands (fp32 accumulation either way).
  MGT_CUBLAS_CHECK(cublasSetMathMode(impl_->cublas,
                                     precision == Precision::fp32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
  MGT_CUDA_CHECK(cudaMalloc(&impl_->reduce, sizeof(double)));
}

Context::~Context() {
  if (impl_->stream != nullptr) cudaStreamSynchronize(impl_->stream);
  for (auto* p : impl_->bf16)
    if (p != nullptr) cudaFree(p);
  if (impl_->reduce != nullptr) cudaFree(impl_->reduce);
  if (impl_->cublas != nullptr) cublasDestroy(impl_->cublas);
  if (impl_->stream != nullptr) cudaStreamDestroy(impl_->stream);
}

Precision Context::precision() const { return impl_->precision; }
void* Context::stream() const { return impl_->stream; }
void Context::synchronize() { MGT_CUDA_CHECK(cudaStreamSynchronize(impl_->stream)); }

namespace {

int blocks_for(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 8));
}

void check_launch() { MGT_CUDA_CHECK(cudaGetLastError()); }

// C (m x n, ldc) = alpha op(A) op(B) + beta C, column-major (cuBLAS). fp32: cublasSgemm. bf16: A and B are
// copied to compact bf16 first (stored dims: op N -> rows x cols = m x k / k x n; op T -> k x m / n x k),
// then cublasGemmEx with fp32 output and CUBLAS_COMPUTE_32F.
void gemm(Context::Impl& ctx, cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n, int64_t k,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const float alpha = 1.0f;
  if (ctx.precision == Precision::fp32 || k == 0) {
    MGT_CUBLAS_CHECK(cublasSgemm(ctx.cublas, op_a, op_b, int(m), int(n), int(k), &alpha, A, int(lda), B, int(ldb),
                                 &beta, C, int(ldc)));
    return;
  }
  const int64_t a_rows = op_a == CUBLAS_OP_N ? m : k, a_cols = op_a == CUBLAS_OP_N ? k : m;
  const int64_t b_rows = op_b == CUBLAS_OP_N ? k : n, b_cols = op_b == CUBLAS_OP_N ? n : k;
  __nv_bfloat16* a16 = ctx.bf16_buffer(0, size_t(a_rows * a_cols));
  __nv_bfloat16* b16 = ctx.bf16_buffer(1, size_t(b_rows * b_cols));
  to_bf16_kernel<<<blocks_for(a_rows * a_cols), kThreads, 0, ctx.stream>>>(a16, A, a_rows, a_cols, lda);
  check_launch();
  to_bf16_kernel<<<blocks_for(b_rows * b_cols), kThreads, 0, ctx.stream>>>(b16, B, b_rows, b_cols, ldb);
  check_launch();
  MGT_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, op_a, op_b, int(m), int(n), int(k), &alpha, a16, CUDA_R_16BF,
                                int(a_rows), b16, CUDA_R_16BF, int(b_rows), &beta, C, CUDA_R_32F, int(ldc),
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}


void elementwise(Context& ctx, Elementwise kind, float* out0, float* out1, const float* in0, const float* in1,
                 const float* in2, int64_t n, float scalar = 0.0f) {
  if (n == 0) return;
  elementwise_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(ctx.stream())>>>(kind, out0, out1, in0,
                                                                                             in1, in2, scalar, n);
  check_launch();
}

double read_reduce(Context::Impl& ctx) {
  double value = 0.0;
  MGT_CUDA_CHECK(cudaMemcpyAsync(&value, ctx.reduce, sizeof(double), cudaMemcpyDeviceToHost, ctx.stream));
  MGT_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return value;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public kernels

#define MGT_STREAM static_cast<cudaStream_t>(ctx.stream())

void embedding_forward(Context& ctx, float* out, const int32_t* ids, const float* wte, int64_t N, int64_t /*V*/,
                       int64_t C) {
  if (N * C == 0) return;
  embedding_forward_kernel<<<blocks_for(N * C), kThreads, 0, MGT_STREAM>>>(out, ids, wte, N, C);
  check_launch();
}
void embedding_backward(Context& ctx, float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t /*V*/,
                        int64_t C) {
  if (N * C == 0) return;
  embedding_backward_kernel<<<blocks_for(N * C), kThreads, 0, MGT_STREAM>>>(dwte, dout, ids, N, C);
  check_launch();
}

void rmsnorm_forward(Context& ctx, float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps, bool unit_offset) {
  if (N == 0) return;
  rmsnorm_forward_kernel<<<unsigned(N), kThreads, 0, MGT_STREAM>>>(out, rstd, x, w, C, eps, unit_offset);
  check_launch();
}
void rmsnorm_backward(Context& ctx, float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, bool unit_offset) {
  if (N == 0) return;
  rmsnorm_backward_kernel<<<unsigned(N), kThreads, 0, MGT_STREAM>>>(dx, dw, dout, x, w, rstd, C, unit_offset);
  check_launch();
}
void layernorm_forward(Context& ctx, float* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t N, int64_t C, float eps) {
  if (N == 0) return;
  layernorm_forward_kernel<<<unsigned(N), kThreads, 0, MGT_STREAM>>>(out, mean, rstd, x, w, b, C, eps);
  check_launch();
}
void layernorm_backward(Context& ctx, float* dx, float* dw, float* db, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t N, int64_t C) {
  if (N == 0) return;
  layernorm_backward_kernel<<<unsigned(N), kThreads, 0, MGT_STREAM>>>(dx, dw, db, dout, x, w, mean, rstd, C);
  check_launch();
}

// Row-major y (N, OC) = x (N, IC) w^T is column-major y^T (OC, N) = W^T X with W the column-major
// (IC, OC, ld ldw) view of w and X the (IC, N) view of x.
void linear_forward(Context& ctx, float* y, const float* x, const float* w, const float* b, int64_t N, int64_t IC,
                    int64_t OC, int64_t ldw) {
  if (ldw == 0) ldw = IC;
  gemm(ctx.impl(), CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, w, ldw, x, IC, 0.0f, y, OC);
  if (b != nullptr && N * OC > 0) {
    add_bias_kernel<<<blocks_for(N * OC), kThreads, 0, MGT_STREAM>>>(y, b, N, OC);
    check_launch();
  }
}
// dx^T (IC, N) += W dy^T;  dw^T (IC, OC, ld ldw) += X dy  (column-major views as above).
void linear_backward(Context& ctx, float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                     int64_t N, int64_t IC, int64_t OC, int64_t ldw) {
  if (ldw == 0) ldw = IC;
  if (dx != nullptr) gemm(ctx.impl(), CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, w, ldw, dy, OC, 1.0f, dx, IC);
  if (dw != nullptr) gemm(ctx.impl(), CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, x, IC, dy, OC, 1.0f, dw, ldw);
  if (db != nullptr && OC > 0) {
    bias_grad_kernel<<<unsigned((OC + kThreads - 1) / kThreads), kThreads, 0, MGT_STREAM>>>(db, dy, N, OC);
    check_launch();
  }
}

void rope_forward(Context& ctx, float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T,
                  int64_t H, int64_t D) {
  if (B * T * H * D == 0) return;
  rope_kernel<<<blocks_for(B * T * H * D / 2), kThreads, 0, MGT_STREAM>>>(out, x, cos, sin, B, T, H, D, false);
  check_launch();
}
void rope_backward(Context& ctx, float* dx, const float* dout, const float* cos, const float* sin, int64_t B,
                   int64_t T, int64_t H, int64_t D) {
  if (B * T * H * D == 0) return;
  rope_kernel<<<blocks_for(B * T * H * D / 2), kThreads, 0, MGT_STREAM>>>(dx, dout, cos, sin, B, T, H, D, true);
  check_launch();
}

void attention_forward(Context& ctx, float* out, float* lse, const float* q, const float* k, const float* v,
                       const cpu::AttentionConfig& config) {
  const AttentionShape a = attention_shape(config);
  if (a.B * a.T * a.H == 0) return;
  attention_forward_kernel<<<unsigned(a.B * a.T * a.H), kTile, 0, MGT_STREAM>>>(out, lse, q, k, v, a);
  check_launch();
}
void attention_backward(Context& ctx, float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, const float* lse, const cpu::AttentionConfig& config,
                        float* scratch) {
  const AttentionShape a = attention_shape(config);
  if (a.B * a.T * a.H == 0) return;
  attention_backward_query_kernel<<<unsigned(a.B * a.T * a.H), kTile, 0, MGT_STREAM>>>(dq, scratch, dout, q, k, v,
                                                                                       lse, a);
  check_launch();
  if (a.B * a.Tk * a.KVH == 0) return;
  attention_backward_key_kernel<<<unsigned(a.B * a.Tk * a.KVH), kTile, 0, MGT_STREAM>>>(dk, dv, dout, q, k, v, lse,
                                                                                       scratch, a);
  check_launch();
}

void gelu_forward(Context& ctx, float* out, const float* x, int64_t n) {
  elementwise(ctx, Elementwise::gelu_fwd, out, nullptr, x, nullptr, nullptr, n);
}
void gelu_backward(Context& ctx, float* dx, const float* dout, const float* x, int64_t n) {
  elementwise(ctx, Elementwise::gelu_bwd, dx, nullptr, dout, x, nullptr, n);
}
void swiglu_forward(Context& ctx, float* out, const float* gate, const float* up, int64_t n) {
  elementwise(ctx, Elementwise::swiglu_fwd, out, nullptr, gate, up, nullptr, n);
}
void swiglu_backward(Context& ctx, float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                     int64_t n) {
  elementwise(ctx, Elementwise::swiglu_bwd, dgate, dup, dout, gate, up, n);
}
void geglu_forward(Context& ctx, float* out, const float* gate, const float* up, int64_t n) {
  elementwise(ctx, Elementwise::geglu_fwd, out, nullptr, gate, up, nullptr, n);
}
void geglu_backward(Context& ctx, float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                    int64_t n) {
  elementwise(ctx, Elementwise::geglu_bwd, dgate, dup, dout, gate, up, n);
}
void residual_forward(Context& ctx, float* out, const float* a, const float* b, int64_t n) {
  elementwise(ctx, Elementwise::residual_fwd, out, nullptr, a, b, nullptr, n);
}
void residual_backward(Context& ctx, float* da, float* db, const float* dout, int64_t n) {
  elementwise(ctx, Elementwise::residual_bwd, da, db, dout, nullptr, nullptr, n);
}

double softmax_cross_entropy_forward_backward(Context& ctx, float* dlogits, const float* logits,
                                              const int32_t* targets, int64_t N, int64_t V, int64_t num_targets,
                                              float dloss) {
  Context::Impl& c = ctx.impl();
  MGT_CUDA_CHECK(cudaMemsetAsync(c.reduce, 0, sizeof(double), c.stream));
  if (N > 0) {
    const double inv_count = 1.0 / double(num_targets);
    cross_entropy_kernel<<<unsigned(N), kThreads, 0, c.stream>>>(dlogits, logits, targets, V, inv_count,
                                                                 double(dloss) * inv_count, c.reduce);
    check_launch();
  }
  return read_reduce(c);
}

void adamw_step(Context& ctx, float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                const cpu::AdamWConfig& config) {
  if (n == 0) return;
  const AdamWScalars s = adamw_scalars(config, step);
  adamw_kernel<<<blocks_for(n), kThreads, 0, MGT_STREAM>>>(param, grad, m, v, n, s);
  check_launch();
}

double grad_sum_squares(Context& ctx, const float* grad, int64_t n) {
  Context::Impl& c = ctx.impl();
  MGT_CUDA_CHECK(cudaMemsetAsync(c.reduce, 0, sizeof(double), c.stream));
  if (n > 0) {
    sum_squares_kernel<<<blocks_for(n), kThreads, 0, c.stream>>>(grad, n, c.reduce);
    check_launch();
  }
  return read_reduce(c);
}

void scale_in_place(Context& ctx, float* x, int64_t n, float coefficient) {
  elementwise(ctx, Elementwise::scale, x, nullptr, nullptr, nullptr, nullptr, n, coefficient);
}

float probe_uniform_bf16_value(uint64_t seed, int64_t i) { return uniform_bf16(seed, i); }

void probe_uniform_bf16(Context& ctx, float* x, int64_t n, uint64_t seed) {
  if (n == 0) return;
  probe_uniform_kernel<<<blocks_for(n), kThreads, 0, MGT_STREAM>>>(x, n, seed);
  check_launch();
}

void fill_constant(Context& ctx, float* x, int64_t n, float value) {
  if (n == 0) return;
  fill_constant_kernel<<<blocks_for(n), kThreads, 0, MGT_STREAM>>>(x, n, value);
  check_launch();
}

#undef MGT_STREAM

}  // namespace mgt::rt::cuda
