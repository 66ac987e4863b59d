// `run --backend cuda | cuda-fp32` in mgt-plan-cuda (mgt-plan with the CUDA backend linked): the CUDA
// kernels behind the executor's KernelBackend and, for several ranks, the NCCL communicator.
#include "cuda_run.hpp"

#include "mgt/runtime/cuda/kernel_backend.hpp"
#include "mgt/runtime/cuda/nccl_communicator.hpp"
#include "mgt/runtime/cuda/probe.hpp"
#include "mgt/runtime/mpi_communicator.hpp"

#include <iostream>

namespace mgt::cli {

bool cuda_backend_linked() { return true; }

int continue_in_cuda_binary() { return 1; }  // never called: this binary runs --backend cuda itself

CudaRun start_cuda_backend(const std::string& backend, const ir::Mesh& mesh, double comm_timeout_s) {
  CudaRun run;
  int device = 0;
  if (ir::num_ranks(mesh) > 1) {  // first: it picks this rank's device (its index on the node)
    auto nccl = std::make_unique<rt::NcclCommunicator>(mesh, rt::NcclOptions{.timeout_s = comm_timeout_s});
    device = nccl->device();
    run.comm = std::move(nccl);
  }
  run.kernels = rt::cuda::make_kernel_backend(
      backend == "cuda-fp32" ? rt::cuda::Precision::fp32 : rt::cuda::Precision::bf16, device);
  return run;
}

CudaProbe probe_cuda_backend(const rt::ProbeOptions& options) {
  rt::NcclCommunicator comm(ir::Mesh{{{"world", rt::mpi_world_size()}}});
  CudaProbe probe;
  probe.root = comm.rank() == 0;
  probe.report = rt::cuda::probe_cuda(comm, options, probe.root ? &std::cout : nullptr);
  return probe;
}

}  // namespace mgt::cli
