// The CPU kernels behind the KernelBackend interface (kernel_backend.hpp): plain forwarding.
#include "mgt/runtime/kernel_backend.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace mgt::rt {

namespace {

/// Keeps freed blocks and hands them to the next allocation of the same size and alignment. A
/// training step allocates the same buffers in the same order every step; returning them to the
/// operating system (glibc unmaps blocks above its mmap threshold) makes the next step page-fault on
/// every 4 KiB it touches: a quarter of a 4-layer hidden-512 Llama step on the 2-core VM (2.58 s vs
/// 1.98 s per step, docs/runtime_executor.md). PyTorch's caching allocator keeps GPU blocks for the
/// same reason. Blocks live until the process ends; after the first step the cache holds the
/// step's peak and no more, because the sizes repeat.
class CachingResource final : public std::pmr::memory_resource {
 public:
  ~CachingResource() override {
    for (auto& [key, blocks] : free_)
      for (void* p : blocks) upstream_->deallocate(p, key.first, key.second);
  }

 private:
  using Key = std::pair<size_t, size_t>;  // bytes, alignment
  void* do_allocate(size_t bytes, size_t alignment) override {
    {
      std::lock_guard lock(mutex_);
      auto it = free_.find({bytes, alignment});
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        return p;
      }
    }
    return upstream_->allocate(bytes, alignment);
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    std::lock_guard lock(mutex_);
    free_[{bytes, alignment}].push_back(p);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  std::pmr::memory_resource* upstream_ = std::pmr::new_delete_resource();
  std::mutex mutex_;
  std::map<Key, std::vector<void*>> free_;
};

class CpuKernelBackend final : public KernelBackend {
 public:
  std::string name() const override { return "cpu"; }
  std::pmr::memory_resource* memory() override { return &memory_; }
  void fill_zero(float* x, int64_t n) override { std::fill_n(x, n, 0.0f); }
  void copy(float* dst, const float* src, int64_t n) override { std::copy_n(src, n, dst); }
  int64_t attention_forward_scratch(const cpu::AttentionConfig& c) const override {
    return cpu::attention_forward_scratch(c);
  }
  int64_t attention_backward_scratch(const cpu::AttentionConfig& c) const override {
    return cpu::attention_backward_scratch(c);
  }
  void embedding_forward(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t V, int64_t C) override {
    cpu::embedding_forward(out, ids, wte, N, V, C);
  }
  void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t V,
                          int64_t C) override {
    cpu::embedding_backward(dwte, dout, ids, N, V, C);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps,
                       bool unit_offset) override {
    cpu::rmsnorm_forward(out, rstd, x, w, N, C, eps, unit_offset);
  }
  void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                        int64_t N, int64_t C, bool unit_offset) override {
    cpu::rmsnorm_backward(dx, dw, dout, x, w, rstd, N, C, unit_offset);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                         int64_t N, int64_t C, float eps) override {
    cpu::layernorm_forward(out, mean, rstd, x, w, b, N, C, eps);
  }
  void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x, const float* w,
                          const float* mean, const float* rstd, int64_t N, int64_t C) override {
    cpu::layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, N, C);
  }
  void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t N, int64_t IC, int64_t OC,
                      int64_t ldw) override {
    cpu::linear_forward(y, x, w, b, N, IC, OC, ldw);
  }
  void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int64_t N,
                       int64_t IC, int64_t OC, int64_t ldw) override {
    cpu::linear_backward(dx, dw, db, dy, x, w, N, IC, OC, ldw);
  }
  void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                    int64_t D) override {
    cpu::rope_forward(out, x, cos, sin, B, T, H, D);
  }
  void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                     int64_t D) override {
    cpu::rope_backward(dx, dout, cos, sin, B, T, H, D);
  }
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                         const cpu::AttentionConfig& config, float* scratch) override {
    cpu::attention_forward(out, lse, q, k, v, config, scratch);
  }
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                          const float* v, const float* lse, const cpu::AttentionConfig& config,
                          float* scratch) override {
    cpu::attention_backward(dq, dk, dv, dout, q, k, v, lse, config, scratch);
  }
  void gelu_forward(float* out, const float* x, int64_t n) override { cpu::gelu_forward(out, x, n); }
  void gelu_backward(float* dx, const float* dout, const float* x, int64_t n) override {
    cpu::gelu_backward(dx, dout, x, n);
  }
  void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) override {
    cpu::swiglu_forward(out, gate, up, n);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       int64_t n) override {
    cpu::swiglu_backward(dgate, dup, dout, gate, up, n);
  }
  void geglu_forward(float* out, const float* gate, const float* up, int64_t n) override {
    cpu::geglu_forward(out, gate, up, n);
  }
  void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                      int64_t n) override {
    cpu::geglu_backward(dgate, dup, dout, gate, up, n);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    cpu::residual_forward(out, a, b, n);
  }
  void residual_backward(float* da, float* db, const float* dout, int64_t n) override {
    cpu::residual_backward(da, db, dout, n);
  }
  double softmax_cross_entropy_forward_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N,
                                                int64_t V, int64_t num_targets, float dloss) override {
    return cpu::softmax_cross_entropy_forward_backward(dlogits, logits, targets, N, V, num_targets, dloss);
  }
  void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                  const cpu::AdamWConfig& config) override {
    cpu::adamw_step(param, grad, m, v, n, step, config);
  }
  double grad_sum_squares(const float* grad, int64_t n) override { return cpu::grad_sum_squares(grad, n); }
  void scale_in_place(float* x, int64_t n, float coefficient) override { cpu::scale_in_place(x, n, coefficient); }

 private:
  CachingResource memory_;
};

}  // namespace

KernelBackend& cpu_kernel_backend() {
  static CpuKernelBackend backend;
  return backend;
}

}  // namespace mgt::rt
