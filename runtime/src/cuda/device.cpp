// Device queries and device memory of the CUDA backend (cuda/device.hpp). Host code on the CUDA
// runtime API, built by g++; no driver API (-lcuda would stop the binary from starting without a driver).
#include "mgt/runtime/cuda/device.hpp"

#include "check.hpp"

#include <nccl.h>

namespace mgt::rt::cuda {

bool compiled_in() { return true; }

std::string backends_description() {
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = CUDART_VERSION;
  const int nccl = NCCL_VERSION_CODE;  // the header's: this target does not link libnccl (see CMakeLists)
  return "cpu, cuda+nccl (CUDA runtime " + std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) +
         ", NCCL " + std::to_string(nccl / 10000) + "." + std::to_string(nccl / 100 % 100) + "." +
         std::to_string(nccl % 100) + ", archs " MGT_CUDA_ARCHITECTURES ")";
}

DeviceCount device_count() {
  DeviceCount result;
  const cudaError_t code = cudaGetDeviceCount(&result.count);
  if (code != cudaSuccess) {
    result.count = 0;
    result.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(code);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
  } else if (result.count == 0) {
    result.reason = "cudaGetDeviceCount found 0 devices";
  }
  return result;
}

void require_device(int device) {
  const DeviceCount n = device_count();
  if (n.count == 0) throw CudaError("no CUDA device (" + n.reason + ")");
  MGT_CUDA_CHECK(cudaSetDevice(device % n.count));
}

void* device_malloc(size_t bytes) {
  void* ptr = nullptr;
  if (bytes == 0) return nullptr;
  const cudaError_t code = cudaMalloc(&ptr, bytes);
  if (code != cudaSuccess) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw CudaError("cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(code) + " (" +
                    std::to_string(free_bytes) + " of " + std::to_string(total_bytes) + " bytes free)");
  }
  return ptr;
}
void device_free(void* ptr) noexcept {
  if (ptr != nullptr) cudaFree(ptr);
}
void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) MGT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) MGT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void device_memset_zero(void* dst, size_t bytes) {
  if (bytes > 0) MGT_CUDA_CHECK(cudaMemset(dst, 0, bytes));
}
void device_synchronize() { MGT_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace mgt::rt::cuda
