// The executor's storage: allocation with fault injection, tensor-parallel slices of the flat
// parameter layout (storage.hpp).
#include "storage.hpp"

#include "mgt/ir/error.hpp"

#include <cstdlib>
#include <new>

namespace mgt::rt::exec {

/// Records the request first, so that an out-of-memory report can give its size.
float* Tensor::allocate(std::pmr::memory_resource* memory, int64_t n) {
  if (__builtin_mul_overflow(n, static_cast<int64_t>(sizeof(float)), &last_request_bytes)) {
    last_request_bytes = INT64_MAX;
    throw std::bad_alloc();
  }
  // Fault injection for tests: MGT_FAULT_OOM_AT=<k> fails the k-th allocation of the process.
  static const char* const oom_at = std::getenv("MGT_FAULT_OOM_AT");
  static int64_t allocations = 0;
  if (oom_at && ++allocations == std::atoll(oom_at)) throw std::bad_alloc();
  return static_cast<float*>(memory->allocate(static_cast<size_t>(last_request_bytes), kAlignment));
}

ParamRef tp_slice(const ParamEntry& e, int64_t tp, int64_t tp_rank) {
  ParamRef r;
  r.offset = e.offset;
  r.rows = e.shape.size() >= 2 ? e.shape[0] : 1;
  r.cols = e.num_elements / std::max<int64_t>(1, r.rows);
  r.ld = r.cols;
  if (tp == 1 || e.tp_axis < 0) return r;
  if (e.tp_dim_size % tp != 0) {
    throw ir::InputError("plan", "tp", "tp = " + std::to_string(tp) + " does not divide " + std::string(1, e.tp_dim) + " = " +
                                           std::to_string(e.tp_dim_size) + " of " + e.name,
                         "choose tp dividing the head, kv-head, ffn and vocab counts");
  }
  if (e.tp_axis == 0) {
    const int64_t rows = (e.shape.empty() ? e.num_elements : e.shape[0]) / tp;
    const int64_t inner = e.num_elements / (e.shape.empty() ? e.num_elements : e.shape[0]);
    if (e.shape.size() < 2) {
      r.rows = 1;
      r.cols = rows * inner;
    } else {
      r.rows = rows;
    }
    r.ld = r.cols;
    r.offset = e.offset + tp_rank * rows * inner;
    return r;
  }
  if (e.tp_axis != 1 || e.shape.size() != 2) {
    throw ir::InputError("model state", e.name, "tensor parallelism splits axis " + std::to_string(e.tp_axis) +
                                                    " of a " + std::to_string(e.shape.size()) + "-d parameter; the CPU executor slices rows or columns of matrices only");
  }
  r.cols = e.shape[1] / tp;
  r.ld = e.shape[1];
  r.offset = e.offset + tp_rank * r.cols;
  return r;
}

Layout slice_layout(const ParamEntry& e, int64_t tp, int64_t tp_rank) {
  const ParamRef r = tp_slice(e, tp, tp_rank);
  Layout l;
  const bool replicated = tp > 1 && e.tp_axis < 0;
  if (r.contiguous()) {
    l.add({r.offset, r.elements(), replicated});
  } else {
    for (int64_t i = 0; i < r.rows; ++i) l.add({r.offset + i * r.ld, r.cols, replicated});
  }
  return l;
}

}  // namespace mgt::rt::exec
