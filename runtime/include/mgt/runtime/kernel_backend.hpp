// The kernel set the executor calls, as one interface that the CPU kernels (cpu/kernels.hpp) and the
// CUDA kernels (cuda/kernel_backend.hpp) implement, so the same executor runs either backend (ggml's
// backend vtable). Signatures are the CPU kernels' (cpu/kernels.hpp documents shapes and the +=
// convention); what a backend adds is where memory lives and when results are visible:
//
// * Every float buffer the executor passes comes from memory(): host memory for the CPU, CUDA managed
//   memory (readable and writable from host and device) for CUDA. Token ids, targets and q_pos are
//   ordinary host arrays; a device backend copies them itself.
// * Every call has finished when it returns (a device backend synchronises), so the executor's own
//   host code (gathers, bucket packing, checks) may read and write results at once.
//
// Design and the cost of this contract on a GPU: docs/runtime_cuda.md.
#pragma once

#include "mgt/runtime/cpu/kernels.hpp"

#include <cstdint>
#include <memory_resource>
#include <string>

namespace mgt::rt {

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;

  /// "cpu", "cuda fp32" or "cuda bf16".
  virtual std::string name() const = 0;
  /// Where the executor's tensors, the model state and communicator scratch are allocated.
  virtual std::pmr::memory_resource* memory() = 0;
  /// x[0..n) = 0.
  virtual void fill_zero(float* x, int64_t n) = 0;
  /// dst[0..n) = src[0..n) (non-overlapping).
  virtual void copy(float* dst, const float* src, int64_t n) = 0;
  /// Scratch floats the attention kernels need (the CPU's T*Tk and 2*T*Tk; 0 on CUDA).
  virtual int64_t attention_forward_scratch(const cpu::AttentionConfig& c) const = 0;
  virtual int64_t attention_backward_scratch(const cpu::AttentionConfig& c) const = 0;

  virtual void embedding_forward(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t V, int64_t C) = 0;
  virtual void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t V,
                                  int64_t C) = 0;
  virtual void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps,
                               bool unit_offset) = 0;
  virtual void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                                const float* rstd, int64_t N, int64_t C, bool unit_offset) = 0;
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                                 int64_t N, int64_t C, float eps) = 0;
  virtual void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x, const float* w,
                                  const float* mean, const float* rstd, int64_t N, int64_t C) = 0;
  virtual void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t N, int64_t IC,
                              int64_t OC, int64_t ldw) = 0;
  virtual void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                               int64_t N, int64_t IC, int64_t OC, int64_t ldw) = 0;
  virtual void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T,
                            int64_t H, int64_t D) = 0;
  virtual void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B, int64_t T,
                             int64_t H, int64_t D) = 0;
  virtual void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                                 const cpu::AttentionConfig& config, float* scratch) = 0;
  virtual void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                  const float* v, const float* lse, const cpu::AttentionConfig& config,
                                  float* scratch) = 0;
  virtual void gelu_forward(float* out, const float* x, int64_t n) = 0;
  virtual void gelu_backward(float* dx, const float* dout, const float* x, int64_t n) = 0;
  virtual void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) = 0;
  virtual void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                               int64_t n) = 0;
  virtual void geglu_forward(float* out, const float* gate, const float* up, int64_t n) = 0;
  virtual void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                              int64_t n) = 0;
  virtual void residual_forward(float* out, const float* a, const float* b, int64_t n) = 0;
  virtual void residual_backward(float* da, float* db, const float* dout, int64_t n) = 0;
  virtual double softmax_cross_entropy_forward_backward(float* dlogits, const float* logits, const int32_t* targets,
                                                        int64_t N, int64_t V, int64_t num_targets, float dloss) = 0;
  virtual void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                          const cpu::AdamWConfig& config) = 0;
  virtual double grad_sum_squares(const float* grad, int64_t n) = 0;
  virtual void scale_in_place(float* x, int64_t n, float coefficient) = 0;
};

/// The CPU kernels (fp32, Eigen) on host memory (std::pmr::new_delete_resource). One shared instance.
KernelBackend& cpu_kernel_backend();

}  // namespace mgt::rt
