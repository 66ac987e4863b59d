// The executor's kernel seam (kernel_backend.hpp), checked on the CPU: a backend that forwards to the
// CPU kernels but allocates from its own tracking memory resource, and checks that every float buffer
// each kernel receives lies inside memory that resource handed out. That is the property the CUDA
// backend relies on (it hands out managed memory; a host std::vector would fault on the device). The
// losses must equal those of the default (CPU) executor bit for bit, and every kernel kind is used.
#include "mgt/runtime/executor.hpp"
#include "mgt/runtime/kernel_backend.hpp"

#include "train_util.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/planner/lower.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory_resource>
#include <set>
#include <string>

#include <unistd.h>

namespace mgt::rt {
namespace {

namespace fs = std::filesystem;

// The CPU backend's memory keeps freed blocks for the next allocation of the same size (no page
// faults on the next step's fresh buffers); other sizes get their own block, and a block is never
// handed out twice while live.
TEST(CpuKernelBackendMemory, ReusesAFreedBlockOfTheSameSizeOnly) {
  std::pmr::memory_resource* mem = cpu_kernel_backend().memory();
  const size_t bytes = (size_t{3} << 20) + 4096;  // an odd size no other test allocates
  void* a = mem->allocate(bytes, 64);
  void* b = mem->allocate(bytes, 64);
  EXPECT_NE(a, b);
  static_cast<float*>(a)[0] = 1.0f;  // writable
  mem->deallocate(a, bytes, 64);
  void* other = mem->allocate(bytes + 4096, 64);  // a different size does not take a's block
  EXPECT_NE(other, a);
  void* again = mem->allocate(bytes, 64);
  EXPECT_EQ(again, a);
  mem->deallocate(again, bytes, 64);
  mem->deallocate(b, bytes, 64);
  mem->deallocate(other, bytes + 4096, 64);
}

constexpr const char* kTinyLlama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
  "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
  "vocab_size":512,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000.0,
  "tie_word_embeddings":false,"hidden_act":"silu"})";

/// Remembers every live allocation [begin, end).
class TrackingMemory final : public std::pmr::memory_resource {
 public:
  bool owns(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    auto it = live_.upper_bound(c);
    if (it == live_.begin()) return false;
    --it;
    return c < it->first + it->second;
  }
  int64_t allocations = 0;

 private:
  void* do_allocate(size_t bytes, size_t alignment) override {
    void* p = std::pmr::new_delete_resource()->allocate(bytes, alignment);
    live_[static_cast<const char*>(p)] = bytes;
    ++allocations;
    return p;
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    live_.erase(static_cast<const char*>(p));
    std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }
  std::map<const char*, size_t> live_;
};

/// The CPU kernels, with every float argument checked against TrackingMemory.
class CheckingBackend final : public KernelBackend {
 public:
  std::set<std::string> used;
  std::string name() const override { return "checking cpu"; }
  std::pmr::memory_resource* memory() override { return &memory_; }
  const TrackingMemory& tracking() const { return memory_; }

  void fill_zero(float* x, int64_t n) override { check("fill_zero", {x}), cpu().fill_zero(x, n); }
  void copy(float* dst, const float* src, int64_t n) override { check("copy", {dst, src}), cpu().copy(dst, src, n); }
  int64_t attention_forward_scratch(const cpu::AttentionConfig& c) const override {
    return cpu_kernel_backend().attention_forward_scratch(c);
  }
  int64_t attention_backward_scratch(const cpu::AttentionConfig& c) const override {
    return cpu_kernel_backend().attention_backward_scratch(c);
  }
  void embedding_forward(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t V, int64_t C) override {
    check("embedding_forward", {out, wte}), cpu().embedding_forward(out, ids, wte, N, V, C);
  }
  void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t V,
                          int64_t C) override {
    check("embedding_backward", {dwte, dout}), cpu().embedding_backward(dwte, dout, ids, N, V, C);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps,
                       bool unit_offset) override {
    check("rmsnorm_forward", {out, rstd, x, w}), cpu().rmsnorm_forward(out, rstd, x, w, N, C, eps, unit_offset);
  }
  void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                        int64_t N, int64_t C, bool unit_offset) override {
    check("rmsnorm_backward", {dx, dw, dout, x, w, rstd});
    cpu().rmsnorm_backward(dx, dw, dout, x, w, rstd, N, C, unit_offset);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                         int64_t N, int64_t C, float eps) override {
    check("layernorm_forward", {out, mean, rstd, x, w, b}), cpu().layernorm_forward(out, mean, rstd, x, w, b, N, C, eps);
  }
  void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x, const float* w,
                          const float* mean, const float* rstd, int64_t N, int64_t C) override {
    check("layernorm_backward", {dx, dw, db, dout, x, w, mean, rstd});
    cpu().layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, N, C);
  }
  void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t N, int64_t IC, int64_t OC,
                      int64_t ldw) override {
    check("linear_forward", {y, x, w, b}), cpu().linear_forward(y, x, w, b, N, IC, OC, ldw);
  }
  void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int64_t N,
                       int64_t IC, int64_t OC, int64_t ldw) override {
    check("linear_backward", {dx, dw, db, dy, x, w}), cpu().linear_backward(dx, dw, db, dy, x, w, N, IC, OC, ldw);
  }
  void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                    int64_t D) override {
    check("rope_forward", {out, x, cos, sin}), cpu().rope_forward(out, x, cos, sin, B, T, H, D);
  }
  void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B, int64_t T, int64_t H,
                     int64_t D) override {
    check("rope_backward", {dx, dout, cos, sin}), cpu().rope_backward(dx, dout, cos, sin, B, T, H, D);
  }
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                         const cpu::AttentionConfig& c, float* scratch) override {
    check("attention_forward", {out, lse, q, k, v, scratch}), cpu().attention_forward(out, lse, q, k, v, c, scratch);
  }
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                          const float* v, const float* lse, const cpu::AttentionConfig& c, float* scratch) override {
    check("attention_backward", {dq, dk, dv, dout, q, k, v, lse, scratch});
    cpu().attention_backward(dq, dk, dv, dout, q, k, v, lse, c, scratch);
  }
  void gelu_forward(float* out, const float* x, int64_t n) override {
    check("gelu_forward", {out, x}), cpu().gelu_forward(out, x, n);
  }
  void gelu_backward(float* dx, const float* dout, const float* x, int64_t n) override {
    check("gelu_backward", {dx, dout, x}), cpu().gelu_backward(dx, dout, x, n);
  }
  void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) override {
    check("swiglu_forward", {out, gate, up}), cpu().swiglu_forward(out, gate, up, n);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       int64_t n) override {
    check("swiglu_backward", {dgate, dup, dout, gate, up}), cpu().swiglu_backward(dgate, dup, dout, gate, up, n);
  }
  void geglu_forward(float* out, const float* gate, const float* up, int64_t n) override {
    check("geglu_forward", {out, gate, up}), cpu().geglu_forward(out, gate, up, n);
  }
  void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                      int64_t n) override {
    check("geglu_backward", {dgate, dup, dout, gate, up}), cpu().geglu_backward(dgate, dup, dout, gate, up, n);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    check("residual_forward", {out, a, b}), cpu().residual_forward(out, a, b, n);
  }
  void residual_backward(float* da, float* db, const float* dout, int64_t n) override {
    check("residual_backward", {da, db, dout}), cpu().residual_backward(da, db, dout, n);
  }
  double softmax_cross_entropy_forward_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N,
                                                int64_t V, int64_t num_targets, float dloss) override {
    check("softmax_cross_entropy", {dlogits, logits});
    return cpu().softmax_cross_entropy_forward_backward(dlogits, logits, targets, N, V, num_targets, dloss);
  }
  void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                  const cpu::AdamWConfig& config) override {
    check("adamw_step", {param, grad, m, v}), cpu().adamw_step(param, grad, m, v, n, step, config);
  }
  double grad_sum_squares(const float* grad, int64_t n) override {
    check("grad_sum_squares", {grad});
    return cpu().grad_sum_squares(grad, n);
  }
  void scale_in_place(float* x, int64_t n, float coefficient) override {
    check("scale_in_place", {x}), cpu().scale_in_place(x, n, coefficient);
  }

 private:
  static KernelBackend& cpu() { return cpu_kernel_backend(); }
  void check(const char* kernel, std::initializer_list<const float*> buffers) {
    used.insert(kernel);
    int i = 0;
    for (const float* p : buffers) {
      if (p != nullptr && !memory_.owns(p)) ADD_FAILURE() << kernel << ": argument " << i << " is not backend memory";
      ++i;
    }
  }
  TrackingMemory memory_;
};

struct Trained {
  std::vector<double> losses, grad_norms;
};

Trained train(const std::string& config, const std::string& plan_json, KernelBackend* kernels) {
  Trained t;
  for (const StepStats& s : test::train_tiny(config, plan_json, kernels, {.seq_len = 16, .batch_seqs = 4, .steps = 3,
                                                                          .init_seed = 3, .data_seed = 5})) {
    t.losses.push_back(s.loss);
    t.grad_norms.push_back(s.grad_norm);
  }
  return t;
}

TEST(KernelBackend, ExecutorPassesOnlyBackendMemoryAndMatchesTheDefault) {
  const fs::path config = fs::temp_directory_path() / ("mgt_kernel_backend_" + std::to_string(::getpid()) + ".json");
  std::ofstream(config) << kTinyLlama;
  for (const char* plan : {R"({})", R"({"micro_batch":2,"recompute":"full"})"}) {
    CheckingBackend checking;
    const Trained want = train(config.string(), plan, nullptr);
    const Trained got = train(config.string(), plan, &checking);
    EXPECT_EQ(got.losses, want.losses) << plan;  // the same kernels in the same order: bit for bit
    EXPECT_EQ(got.grad_norms, want.grad_norms) << plan;
    EXPECT_GT(checking.tracking().allocations, 10);
    for (const char* k : {"embedding_forward", "embedding_backward", "rmsnorm_forward", "rmsnorm_backward",
                          "linear_forward", "linear_backward", "rope_forward", "rope_backward", "attention_forward",
                          "attention_backward", "swiglu_forward", "swiglu_backward", "residual_forward",
                          "residual_backward", "softmax_cross_entropy", "adamw_step", "grad_sum_squares", "fill_zero"})
      EXPECT_TRUE(checking.used.count(k)) << plan << ": the executor never called " << k;
  }
  fs::remove(config);
}

TEST(KernelBackend, CpuBackendNamesItselfAndUsesHostMemory) {
  EXPECT_EQ(cpu_kernel_backend().name(), "cpu");
  // Host memory behind a cache of freed blocks (CpuKernelBackendMemory above), not plain new/delete.
  EXPECT_NE(cpu_kernel_backend().memory(), nullptr);
  EXPECT_TRUE(cpu_kernel_backend().memory()->is_equal(*cpu_kernel_backend().memory()));
  cpu::AttentionConfig c;
  c.B = 1, c.T = 8, c.H = 2, c.KVH = 1, c.D = 4;
  EXPECT_EQ(cpu_kernel_backend().attention_forward_scratch(c), 64);
  EXPECT_EQ(cpu_kernel_backend().attention_backward_scratch(c), 128);
}

}  // namespace
}  // namespace mgt::rt
