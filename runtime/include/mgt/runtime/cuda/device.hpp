// The CUDA backend's device queries and device memory (docs/runtime_cuda.md). This header has no
// CUDA types, so every part of mgt can include it; in a build without nvcc the same functions exist
// and report that the backend is not compiled in.
//
//   if (rt::cuda::device_count().count == 0) { ... }        // no GPU: skip, or one clear error line
//   rt::cuda::DeviceArray<float> x(n);  x.upload(host);  ...  x.download(host);
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgt::rt::cuda {

/// A CUDA runtime, cuBLAS or NCCL call failed; what() names the call, the code and its message.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// True when this build has the CUDA backend (nvcc, cuBLAS and NCCL were found at configure time).
bool compiled_in();

/// The backends this build runs, for `mgt-plan --version`: "cpu" or
/// "cpu, cuda+nccl (CUDA runtime 13.0, NCCL 2.28.9, sm_90 + PTX)".
std::string backends_description();

struct DeviceCount {
  int count = 0;       ///< devices the CUDA runtime sees; 0 when none or when CUDA is not compiled in
  std::string reason;  ///< why count is 0 (cudaGetDeviceCount's error string, or "not compiled in")
};
/// cudaGetDeviceCount, with any failure treated as "no device" (without a driver the runtime returns
/// cudaErrorInsufficientDriver, not cudaErrorNoDevice; STACK.md §3.2). Never throws.
DeviceCount device_count();

/// Throws CudaError "no CUDA device (<reason>)" unless device_count().count > 0; then selects device
/// `device % count` for this thread.
void require_device(int device = 0);

/// cudaMalloc / cudaFree / cudaMemcpy (synchronous) / cudaMemset; errors throw CudaError.
void* device_malloc(size_t bytes);
void device_free(void* ptr) noexcept;
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void device_memset_zero(void* dst, size_t bytes);
/// cudaDeviceSynchronize, throwing CudaError for an earlier asynchronous fault.
void device_synchronize();

/// An owning device array of n elements (uninitialised), for tests and the executor's buffers.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(int64_t n) : n_(n), ptr_(static_cast<T*>(device_malloc(bytes_of(n)))) {}
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(static_cast<int64_t>(host.size())) { upload(host); }
  ~DeviceArray() { device_free(ptr_); }
  DeviceArray(DeviceArray&& o) noexcept : n_(o.n_), ptr_(o.ptr_) { o.n_ = 0, o.ptr_ = nullptr; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) device_free(ptr_), n_ = o.n_, ptr_ = o.ptr_, o.n_ = 0, o.ptr_ = nullptr;
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  int64_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    if (static_cast<int64_t>(host.size()) != n_) throw std::invalid_argument("DeviceArray::upload: size mismatch");
    copy_to_device(ptr_, host.data(), bytes_of(n_));
  }
  std::vector<T> download() const {
    std::vector<T> host(static_cast<size_t>(n_));
    copy_to_host(host.data(), ptr_, bytes_of(n_));
    return host;
  }
  void zero() { device_memset_zero(ptr_, bytes_of(n_)); }

 private:
  static size_t bytes_of(int64_t n) { return static_cast<size_t>(n) * sizeof(T); }
  int64_t n_ = 0;
  T* ptr_ = nullptr;
};

}  // namespace mgt::rt::cuda
