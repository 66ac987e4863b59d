// `mgt-plan run --backend cuda` (docs/runtime_cuda.md): mgt-plan links no CUDA library but the runtime
// (cuda_exec.cpp); mgt-plan-cuda is the same program with the CUDA backend linked (cuda_backend.cpp).
// Kept apart from run_command.hpp so that those two TUs do not parse CLI11.
#pragma once

#include "mgt/ir/schedule.hpp"
#include "mgt/runtime/communicator.hpp"
#include "mgt/runtime/kernel_backend.hpp"
#include "mgt/runtime/probe.hpp"

#include <memory>
#include <string>

namespace mgt::cli {

/// True in mgt-plan-cuda.
bool cuda_backend_linked();
/// mgt-plan: without a CUDA device prints one line and returns 1; with one, re-executes the same
/// command line as mgt-plan-cuda (returns 1 only if that fails).
int continue_in_cuda_binary();

struct CudaRun {
  std::unique_ptr<rt::KernelBackend> kernels;
  std::unique_ptr<rt::Communicator> comm;  ///< NCCL, for a mesh of several ranks; else null
};
/// mgt-plan-cuda: the CUDA kernels ("cuda": bf16 GEMMs, "cuda-fp32") and, for several ranks, an
/// NcclCommunicator on `mesh` (created first: it selects this rank's device). Throws
/// rt::cuda::CudaError without a device.
CudaRun start_cuda_backend(const std::string& backend, const ir::Mesh& mesh, double comm_timeout_s);

struct CudaProbe {
  rt::ProbeReport report;
  bool root = true;  ///< rank 0: prints and writes the file
};
/// mgt-plan-cuda: `probe --backend cuda`, an NcclCommunicator over the MPI world (one GPU per rank) and
/// rt::cuda::probe_cuda, printing from rank 0.
CudaProbe probe_cuda_backend(const rt::ProbeOptions& options);

}  // namespace mgt::cli
