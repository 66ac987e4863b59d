// The CUDA kernels (cuda/kernels.hpp) behind rt::KernelBackend, so the executor runs them unchanged:
// buffers in CUDA managed memory (pooled), token ids / targets / q_pos copied to the device per call,
// and a stream synchronisation after every call (the interface's contract: results visible to the
// host on return). Costs and what remains: docs/runtime_cuda.md.
//
//   auto kernels = rt::cuda::make_kernel_backend(rt::cuda::Precision::bf16);   // CudaError without a GPU
//   rt::ModelState state(graph, 1, kernels->memory());
//   rt::Executor ex(schedule, graph, state, {.numerics = ..., .kernels = kernels.get()});
#pragma once

#include "mgt/runtime/cuda/kernels.hpp"
#include "mgt/runtime/kernel_backend.hpp"

#include <memory>

namespace mgt::rt::cuda {

/// Selects `device` and creates the Context; throws CudaError "no CUDA device (...)" without one.
std::unique_ptr<KernelBackend> make_kernel_backend(Precision precision, int device = 0);

}  // namespace mgt::rt::cuda
