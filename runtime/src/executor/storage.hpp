// The executor's storage (executor.hpp; docs/runtime_executor.md "Memory"): every float it allocates is
// a Tensor bound to a Tracker (measured memory); a rank's share of the flat parameter, gradient and
// optimizer buffers is a Layout of segments, so FSDP shards and DDP buckets are offset arithmetic over
// it (llm.c's flat buffers with named views). Private to the runtime.
#pragma once

#include "mgt/ir/graph.hpp"
#include "mgt/ir/schedule.hpp"
#include "mgt/runtime/kernel_backend.hpp"
#include "mgt/runtime/model_state.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory_resource>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace mgt::rt::exec {

// ---------------------------------------------------------------------------------------------
// Memory accounting: every float the executor allocates goes through a Tensor bound to a Tracker.

struct Tracker {
  KernelBackend* kernels = nullptr;  ///< where Tensors are allocated and zeroed
  int64_t current = 0, peak = 0, step_peak = 0;
  int64_t planned = 0, planned_peak = 0, planned_step_peak = 0;
  void add(int64_t bytes) {
    current += bytes;
    peak = std::max(peak, current);
    step_peak = std::max(step_peak, current);
  }
  void sub(int64_t bytes) { current -= bytes; }
  void add_planned(int64_t bytes) {
    planned += bytes;
    planned_peak = std::max(planned_peak, planned);
    planned_step_peak = std::max(planned_step_peak, planned);
  }
};

class Tensor {
 public:
  Tensor() = default;
  /// n zeroed floats from the tracker's kernel backend (host memory, or CUDA managed memory).
  Tensor(Tracker* tracker, int64_t n) : tracker_(tracker), n_(n) {
    if (n_ > 0) {
      data_ = allocate(tracker_->kernels->memory(), n_);
      tracker_->kernels->fill_zero(data_, n_);
    }
    tracker_->add(bytes());
  }
  ~Tensor() { release(); }
  Tensor(Tensor&& o) noexcept : tracker_(o.tracker_), data_(o.data_), n_(o.n_) {
    o.tracker_ = nullptr;
    o.data_ = nullptr;
    o.n_ = 0;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      release();
      tracker_ = o.tracker_;
      data_ = o.data_;
      n_ = o.n_;
      o.tracker_ = nullptr;
      o.data_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  int64_t size() const { return n_; }

 private:
  static constexpr size_t kAlignment = 256;  // cuBLAS / vector loads
  int64_t bytes() const { return n_ * static_cast<int64_t>(sizeof(float)); }
  /// Records the request first, so that an out-of-memory report can give its size.
  static float* allocate(std::pmr::memory_resource* memory, int64_t n);
  void release() {
    if (tracker_) {
      tracker_->sub(bytes());
      if (data_) tracker_->kernels->memory()->deallocate(data_, static_cast<size_t>(bytes()), kAlignment);
    }
    tracker_ = nullptr;
    data_ = nullptr;
    n_ = 0;
  }
  Tracker* tracker_ = nullptr;
  float* data_ = nullptr;
  int64_t n_ = 0;

 public:
  static inline thread_local int64_t last_request_bytes = 0;  ///< bytes of the latest allocation asked for
};

/// A live buffer of the schedule: what the executor really stores under its name.
struct Buffer {
  ir::BufferKind kind = ir::BufferKind::activations;
  int64_t planned_bytes = 0;
  int64_t state_bytes = 0;  ///< model-state buffers (params, grads, optim) counted while live
  std::map<std::string, Tensor> tensors;
};

/// Per graph block: what the interpreter needs to know about its ops, computed once.
struct BlockInfo {
  std::map<std::string, size_t> op_index;
  std::map<std::string, size_t> producer;      ///< activation tensor -> op writing it
  std::map<std::string, size_t> last_reader;   ///< activation tensor -> last op reading it (forward)
  std::set<std::string> needed_by_backward;    ///< activations some op's backward reads
  bool has_input = false;                      ///< declares "x" (the block input)
  std::string output;                          ///< the last op's output ("" for a head)
  size_t first_input_reader = 0;               ///< lowest op index reading "x"
};

using OpKey = std::tuple<std::string, int64_t, int64_t, std::string>;  // block, copy, micro-batch, op

// ---------------------------------------------------------------------------------------------
// A rank's share of the flat parameter layout: the tensor-parallel slices of the parameters it
// holds, as flat ranges in a fixed "packed" order. FSDP shards and DDP buckets are ranges of that
// packed order, so data parallelism composes with tp and pp by offset arithmetic.

struct Segment {
  int64_t begin = 0;           ///< first element in the flat buffers
  int64_t size = 0;
  bool tp_replicated = false;  ///< a parameter every tp rank holds whole (norm weights)
};

struct Layout {
  std::vector<Segment> segments;
  int64_t size = 0;  ///< packed elements
  void add(Segment s) {
    if (s.size <= 0) return;
    segments.push_back(s);
    size += s.size;
  }
  void append(const Layout& other) {
    for (const Segment& s : other.segments) add(s);
  }
};

/// f(segment, flat_begin, count, offset in `range`) for the part of packed `range` in each segment.
template <typename F>
void for_each_in(const Layout& layout, ShardRange range, F&& f) {
  int64_t pos = 0;
  for (const Segment& s : layout.segments) {
    const int64_t b = std::max(range.begin, pos), e = std::min(range.end, pos + s.size);
    if (b < e) f(s, s.begin + (b - pos), e - b, b - range.begin);
    pos += s.size;
    if (pos >= range.end) break;
  }
}
inline void pack(const Layout& l, ShardRange r, const float* flat, float* out) {
  for_each_in(l, r, [&](const Segment&, int64_t fb, int64_t n, int64_t o) { std::copy_n(flat + fb, n, out + o); });
}
inline void unpack(const Layout& l, ShardRange r, const float* in, float* flat) {
  for_each_in(l, r, [&](const Segment&, int64_t fb, int64_t n, int64_t o) { std::copy_n(in + o, n, flat + fb); });
}

/// Where a parameter's tp-local slice lies in the flat buffers: rows x cols with row stride `ld`.
struct ParamRef {
  int64_t offset = 0;
  int64_t rows = 1, cols = 0, ld = 0;
  bool contiguous() const { return ld == cols || rows == 1; }
  int64_t elements() const { return rows * cols; }
};

/// A rank's slice of a parameter (ParamEntry::tp_axis: rows for 0, columns for 1; whole otherwise).
/// Throws ir::InputError when tp does not divide the split dim.
ParamRef tp_slice(const ParamEntry& e, int64_t tp, int64_t tp_rank);
/// The slice as segments of the flat buffers (one per row of a column-split matrix).
Layout slice_layout(const ParamEntry& e, int64_t tp, int64_t tp_rank);

}  // namespace mgt::rt::exec
