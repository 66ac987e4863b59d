// Return-code checks for the CUDA runtime and cuBLAS (private to mgt_runtime_cuda): every call is
// checked and a failure throws rt::cuda::CudaError naming the call, the file:line and the message.
#pragma once

#include "mgt/runtime/cuda/device.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace mgt::rt::cuda::detail {

inline void check_cuda(cudaError_t code, const char* call, const char* file, int line) {
  if (code == cudaSuccess) return;
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  cudaGetErrorName(code) + " (" + std::to_string(static_cast<int>(code)) + "): " +
                  cudaGetErrorString(code));
}

inline void check_cublas(cublasStatus_t code, const char* call, const char* file, int line) {
  if (code == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  cublasGetStatusName(code) + ": " + cublasGetStatusString(code));
}

}  // namespace mgt::rt::cuda::detail

#define MGT_CUDA_CHECK(call) ::mgt::rt::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define MGT_CUBLAS_CHECK(call) ::mgt::rt::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)
