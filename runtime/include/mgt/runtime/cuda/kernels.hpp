// CUDA kernels with the CPU kernel set (cpu/kernels.hpp is the reference and the oracle of the tests
// in tests/runtime_cuda): same names, same argument order, same shapes and the same accumulate (+=)
// convention for gradients; every pointer is a DEVICE pointer (AttentionConfig::q_pos too). Kernels
// are enqueued on the Context's stream and return at once; the two that return a number
// (softmax_cross_entropy_forward_backward, grad_sum_squares) wait for it. Design, precision modes
// and what is untested without a GPU: docs/runtime_cuda.md.
//
//   rt::cuda::Context ctx(rt::cuda::Precision::bf16);     // throws CudaError without a device
//   rt::cuda::linear_forward(ctx, y, x, w, b, N, IC, OC);  // cuBLAS: bf16 inputs, fp32 accumulate/output
//   ctx.synchronize();
#pragma once

#include "mgt/runtime/cpu/kernels.hpp"

#include <cstdint>
#include <memory>

namespace mgt::rt::cuda {

/// fp32: every kernel in fp32 (TF32 off), for checking against the CPU. bf16: the GEMMs (linear,
/// LM head) read bf16 copies of their fp32 operands and accumulate and write fp32; every other kernel,
/// the stored activations, gradients, master weights and AdamW moments stay fp32.
enum class Precision { fp32, bf16 };

/// A stream, a cuBLAS handle and scratch for the bf16 operand copies and reductions. One per thread.
class Context {
 public:
  /// Selects `device` (require_device) and creates the stream and handle; throws CudaError.
  explicit Context(Precision precision = Precision::fp32, int device = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Precision precision() const;
  /// The cudaStream_t every kernel runs on, as void* (this header carries no CUDA types).
  void* stream() const;
  /// Waits for the stream; throws CudaError for a fault of an earlier kernel.
  void synchronize();

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

void embedding_forward(Context& ctx, float* out, const int32_t* ids, const float* wte, int64_t N, int64_t V,
                       int64_t C);
void embedding_backward(Context& ctx, float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t V,
                        int64_t C);

void rmsnorm_forward(Context& ctx, float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps, bool unit_offset = false);
void rmsnorm_backward(Context& ctx, float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, bool unit_offset = false);
void layernorm_forward(Context& ctx, float* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t N, int64_t C, float eps);
void layernorm_backward(Context& ctx, float* dx, float* dw, float* db, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t N, int64_t C);

/// cuBLAS; `ldw` as the CPU kernel (row stride of w and dw, 0 = IC).
void linear_forward(Context& ctx, float* y, const float* x, const float* w, const float* b, int64_t N, int64_t IC,
                    int64_t OC, int64_t ldw = 0);
void linear_backward(Context& ctx, float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                     int64_t N, int64_t IC, int64_t OC, int64_t ldw = 0);

/// cos, sin (T, D/2) device tables; built on the host with cpu::rope_tables (the executor caches them)
/// and uploaded by the caller.
void rope_forward(Context& ctx, float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T,
                  int64_t H, int64_t D);
void rope_backward(Context& ctx, float* dx, const float* dout, const float* cos, const float* sin, int64_t B,
                   int64_t T, int64_t H, int64_t D);

/// One thread block per (b, h, query row): scores over key tiles with an online softmax (no T x Tk
/// scratch, no scratch argument); causal mask, window, Tk and q_pos (device array) as the CPU kernel.
/// Requires D <= 256.
void attention_forward(Context& ctx, float* out, float* lse, const float* q, const float* k, const float* v,
                       const cpu::AttentionConfig& config);
/// Device floats attention_backward needs as scratch: B*H*T (each query row's sum_s P dP).
inline int64_t attention_backward_scratch(const cpu::AttentionConfig& c) { return c.B * c.H * c.T; }
/// Recomputes P from lse. Two kernels, no atomics: one block per query row (dq, and the row's sum_s P dP
/// into scratch), then one block per (b, kv head, key) (dk, dv: the GQA group's query heads sum into their
/// kv head, as the CPU kernel). scratch: attention_backward_scratch(config) device floats.
void attention_backward(Context& ctx, float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, const float* lse, const cpu::AttentionConfig& config,
                        float* scratch);

void gelu_forward(Context& ctx, float* out, const float* x, int64_t n);
void gelu_backward(Context& ctx, float* dx, const float* dout, const float* x, int64_t n);
void swiglu_forward(Context& ctx, float* out, const float* gate, const float* up, int64_t n);
void swiglu_backward(Context& ctx, float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                     int64_t n);
void geglu_forward(Context& ctx, float* out, const float* gate, const float* up, int64_t n);
void geglu_backward(Context& ctx, float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                    int64_t n);
void residual_forward(Context& ctx, float* out, const float* a, const float* b, int64_t n);
void residual_backward(Context& ctx, float* da, float* db, const float* dout, int64_t n);

/// Fused softmax cross-entropy, one block per row, row sums in double; waits and returns the sum over
/// rows / num_targets as the CPU kernel. dlogits may alias logits.
double softmax_cross_entropy_forward_backward(Context& ctx, float* dlogits, const float* logits,
                                              const int32_t* targets, int64_t N, int64_t V, int64_t num_targets,
                                              float dloss = 1.0f);

/// torch.optim.AdamW, fp32 master weights and moments; bias corrections computed on the host in double.
void adamw_step(Context& ctx, float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                const cpu::AdamWConfig& config);
/// Sum of squares accumulated in double; waits and returns it.
double grad_sum_squares(Context& ctx, const float* grad, int64_t n);
void scale_in_place(Context& ctx, float* x, int64_t n, float coefficient);

// ---- probe inputs ----

/// The value probe_uniform_bf16 writes at index i: splitmix64(seed ^ i) mapped to [-1, 1) and truncated
/// to a bf16-representable float (so bf16 GEMM operands are exact). Host and device compute it alike.
float probe_uniform_bf16_value(uint64_t seed, int64_t i);
/// x[i] = probe_uniform_bf16_value(seed, i) for i < n, on the device.
void probe_uniform_bf16(Context& ctx, float* x, int64_t n, uint64_t seed);
/// x[i] = value for i < n.
void fill_constant(Context& ctx, float* x, int64_t n, float value);

}  // namespace mgt::rt::cuda
