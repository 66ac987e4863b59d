// `run --backend cuda` in mgt-plan itself, which links no CUDA library but the runtime (cuBLAS and
// NCCL would add ~0.2 s to every start): without a device, one error line and exit 1; with one, the
// same command line continues in mgt-plan-cuda (cuda_backend.cpp), built beside mgt-plan with CUDA.
#include "cuda_run.hpp"

#include "mgt/runtime/cuda/device.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgt::cli {

bool cuda_backend_linked() { return false; }

int continue_in_cuda_binary() {
  if (!rt::cuda::compiled_in()) {
    std::cerr << "mgt-plan: --backend cuda: this build has no CUDA backend (hint: install the CUDA toolkit with "
                 "nvcc and NCCL, then reconfigure)\n";
    return 1;
  }
  const rt::cuda::DeviceCount devices = rt::cuda::device_count();
  if (devices.count == 0) {
    std::cerr << "mgt-plan: --backend cuda: no CUDA device (" << devices.reason << ")\n";
    return 1;
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path cuda_binary = self.parent_path() / "mgt-plan-cuda";
  if (ec || !std::filesystem::exists(cuda_binary, ec)) {
    std::cerr << "mgt-plan: --backend cuda: " << cuda_binary.string()
              << " is missing (hint: build the mgt-plan-cuda target)\n";
    return 1;
  }
  // The arguments as given, from /proc/self/cmdline (NUL-separated).
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(cuda_binary.c_str(), argv.data());
  std::cerr << "mgt-plan: --backend cuda: cannot run " << cuda_binary.string() << "\n";
  return 1;
}

CudaRun start_cuda_backend(const std::string&, const ir::Mesh&, double) {
  throw std::logic_error("start_cuda_backend: mgt-plan continues in mgt-plan-cuda for --backend cuda");
}

CudaProbe probe_cuda_backend(const rt::ProbeOptions&) {
  throw std::logic_error("probe_cuda_backend: mgt-plan continues in mgt-plan-cuda for --backend cuda");
}

}  // namespace mgt::cli
