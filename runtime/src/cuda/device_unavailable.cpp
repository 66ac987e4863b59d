// cuda/device.hpp in a build without the CUDA backend (no nvcc or NCCL at configure time, or
// -DMGT_ENABLE_CUDA=OFF): every query says so, every allocation throws.
#include "mgt/runtime/cuda/device.hpp"

namespace mgt::rt::cuda {

namespace {
constexpr const char* kNotBuilt =
    "this build has no CUDA backend (hint: install the CUDA toolkit with nvcc and NCCL, then reconfigure)";
[[noreturn]] void not_built() { throw CudaError(kNotBuilt); }
}  // namespace

bool compiled_in() { return false; }
std::string backends_description() { return "cpu"; }
DeviceCount device_count() { return DeviceCount{0, kNotBuilt}; }
void require_device(int) { not_built(); }
void* device_malloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  not_built();
}
void device_free(void*) noexcept {}
void copy_to_device(void*, const void*, size_t bytes) {
  if (bytes > 0) not_built();
}
void copy_to_host(void*, const void*, size_t bytes) {
  if (bytes > 0) not_built();
}
void device_memset_zero(void*, size_t bytes) {
  if (bytes > 0) not_built();
}
void device_synchronize() { not_built(); }

}  // namespace mgt::rt::cuda
