// rt::KernelBackend on the CUDA kernels (cuda/kernel_backend.hpp): managed memory, host index arrays
// copied to the device, one stream synchronisation per call.
#include "mgt/runtime/cuda/kernel_backend.hpp"

#include "check.hpp"

#include <algorithm>
#include <memory_resource>

namespace mgt::rt::cuda {

namespace {

/// cudaMallocManaged / cudaFree: pages migrate between host and device on touch.
class ManagedMemory final : public std::pmr::memory_resource {
  void* do_allocate(size_t bytes, size_t /*alignment: cudaMallocManaged gives 256*/) override {
    void* p = nullptr;
    const cudaError_t code = cudaMallocManaged(&p, std::max<size_t>(bytes, 1));
    if (code != cudaSuccess)
      throw CudaError("cudaMallocManaged of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(code));
    return p;
  }
  void do_deallocate(void* p, size_t, size_t) override { cudaFree(p); }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }
};

class CudaKernelBackend final : public KernelBackend {
 public:
  CudaKernelBackend(Precision precision, int device) : ctx_(precision, device) {}
  ~CudaKernelBackend() override {
    try {
      ctx_.synchronize();
    } catch (const CudaError&) {
      // a fault was already reported by the call that made it
    }
  }

  std::string name() const override { return ctx_.precision() == Precision::bf16 ? "cuda bf16" : "cuda fp32"; }
  std::pmr::memory_resource* memory() override { return &pool_; }
  void fill_zero(float* x, int64_t n) override {
    if (n > 0) MGT_CUDA_CHECK(cudaMemsetAsync(x, 0, bytes(n), stream()));
    done();
  }
  void copy(float* dst, const float* src, int64_t n) override {
    if (n > 0) MGT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes(n), cudaMemcpyDefault, stream()));
    done();
  }
  int64_t attention_forward_scratch(const cpu::AttentionConfig&) const override { return 0; }
  int64_t attention_backward_scratch(const cpu::AttentionConfig& c) const override {
    return cuda::attention_backward_scratch(c);
  }

  void embedding_forward(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t V, int64_t C) override {
    cuda::embedding_forward(ctx_, out, device_ids(ids, N), wte, N, V, C);
    done();
  }
  void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t V,
                          int64_t C) override {
    cuda::embedding_backward(ctx_, dwte, dout, device_ids(ids, N), N, V, C);
    done();
  }
  void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps,
                       bool unit_offset) override {
    cuda::rmsnorm_forward(ctx_, out, rstd, x, w, N, C, eps, unit_offset);
    done();
  }
  void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                        int64_t N, int64_t C, bool unit_offset) override {
    cuda::rmsnorm_backward(ctx_, dx, dw, dout, x, w, rstd, N, C, unit_offset);
    done();
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                         int64_t N, int64_t C, float eps) override {
    cuda::layernorm_forward(ctx_, out, mean, rstd, x, w, b, N, C, eps);
    done();
  }
  void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x, const float* w,
                          const float* mean, const float* rstd, int64_t N, int64_t C) override {
    cuda::layernorm_backward(ctx_, dx, dw, db, dout, x, w, mean, rstd, N, C);
    done();
  }
  void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t N, int64_t IC, int64_t OC,
                      int64_t ldw) override {
    cuda::linear_forward(ctx_, y, x, w, b, N, IC, OC, ldw);
    done();
  }
  void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int64_t N,
                       int64_t IC, int64_t OC, int64_t ldw) override {
    cuda::linear_backward(ctx_, dx, dw, db, dy, x, w, N, IC, OC, ldw);
    done();
  }
  void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                    int64_t D) override {
    cuda::rope_forward(ctx_, out, x, cos, sin, B, T, H, D);
    done();
  }
  void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                     int64_t D) override {
    cuda::rope_backward(ctx_, dx, dout, cos, sin, B, T, H, D);
    done();
  }
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                         const cpu::AttentionConfig& config, float*) override {
    cuda::attention_forward(ctx_, out, lse, q, k, v, device_positions(config));
    done();
  }
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                          const float* v, const float* lse, const cpu::AttentionConfig& config,
                          float* scratch) override {
    cuda::attention_backward(ctx_, dq, dk, dv, dout, q, k, v, lse, device_positions(config), scratch);
    done();
  }
  void gelu_forward(float* out, const float* x, int64_t n) override { cuda::gelu_forward(ctx_, out, x, n), done(); }
  void gelu_backward(float* dx, const float* dout, const float* x, int64_t n) override {
    cuda::gelu_backward(ctx_, dx, dout, x, n), done();
  }
  void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) override {
    cuda::swiglu_forward(ctx_, out, gate, up, n), done();
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       int64_t n) override {
    cuda::swiglu_backward(ctx_, dgate, dup, dout, gate, up, n), done();
  }
  void geglu_forward(float* out, const float* gate, const float* up, int64_t n) override {
    cuda::geglu_forward(ctx_, out, gate, up, n), done();
  }
  void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                      int64_t n) override {
    cuda::geglu_backward(ctx_, dgate, dup, dout, gate, up, n), done();
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    cuda::residual_forward(ctx_, out, a, b, n), done();
  }
  void residual_backward(float* da, float* db, const float* dout, int64_t n) override {
    cuda::residual_backward(ctx_, da, db, dout, n), done();
  }
  double softmax_cross_entropy_forward_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N,
                                                int64_t V, int64_t num_targets, float dloss) override {
    return cuda::softmax_cross_entropy_forward_backward(ctx_, dlogits, logits, device_ids(targets, N), N, V,
                                                        num_targets, dloss);  // waits for its result
  }
  void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                  const cpu::AdamWConfig& config) override {
    cuda::adamw_step(ctx_, param, grad, m, v, n, step, config), done();
  }
  double grad_sum_squares(const float* grad, int64_t n) override { return cuda::grad_sum_squares(ctx_, grad, n); }
  void scale_in_place(float* x, int64_t n, float coefficient) override {
    cuda::scale_in_place(ctx_, x, n, coefficient), done();
  }

 private:
  static size_t bytes(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }
  cudaStream_t stream() const { return static_cast<cudaStream_t>(ctx_.stream()); }
  void done() { ctx_.synchronize(); }

  // Host index arrays (token ids, targets) copied to a growing device buffer on the stream.
  const int32_t* device_ids(const int32_t* host, int64_t n) {
    if (ids_.size() < n) ids_ = DeviceArray<int32_t>(std::max<int64_t>(n, 2 * ids_.size()));
    if (n > 0)
      MGT_CUDA_CHECK(cudaMemcpyAsync(ids_.data(), host, static_cast<size_t>(n) * sizeof(int32_t), cudaMemcpyDefault,
                                     stream()));
    return ids_.data();
  }
  // AttentionConfig::q_pos (host) -> a device copy.
  cpu::AttentionConfig device_positions(const cpu::AttentionConfig& c) {
    cpu::AttentionConfig d = c;
    if (c.q_pos == nullptr) return d;
    if (positions_.size() < c.T) positions_ = DeviceArray<int64_t>(std::max<int64_t>(c.T, 2 * positions_.size()));
    MGT_CUDA_CHECK(cudaMemcpyAsync(positions_.data(), c.q_pos, static_cast<size_t>(c.T) * sizeof(int64_t),
                                   cudaMemcpyDefault, stream()));
    d.q_pos = positions_.data();
    return d;
  }

  Context ctx_;
  ManagedMemory managed_;
  // Executor tensors come and go every micro-batch: reuse managed blocks instead of cudaMallocManaged
  // (and the implicit device synchronisation of cudaFree) per tensor.
  std::pmr::unsynchronized_pool_resource pool_{{/*max_blocks_per_chunk=*/0, /*largest_required_pool_block=*/256 << 20},
                                               &managed_};
  DeviceArray<int32_t> ids_;
  DeviceArray<int64_t> positions_;
};

}  // namespace

std::unique_ptr<KernelBackend> make_kernel_backend(Precision precision, int device) {
  return std::make_unique<CudaKernelBackend>(precision, device);
}

}  // namespace mgt::rt::cuda
