// `mgt-plan probe --backend cuda`: measures this node's GPUs as the CUDA backend uses them (the runtime's
// cuBLAS GEMM kernel in bf16, device memory copies, host<->device copies, NCCL collectives between the
// ranks, one GPU each) and builds the `mgt.cluster/1` spec. Every measurement checks its results
// (nccl-tests). Untested for lack of a GPU: docs/runtime_cuda.md.
//
//   rt::NcclCommunicator comm(ir::Mesh{{{"world", rt::mpi_world_size()}}});   // mpirun -np <GPUs>
//   rt::ProbeReport r = rt::cuda::probe_cuda(comm, {.quick = false}, comm.rank() == 0 ? &std::cout : nullptr);
#pragma once

#include "mgt/runtime/cuda/nccl_communicator.hpp"
#include "mgt/runtime/probe.hpp"

#include <ostream>
#include <string>

namespace mgt::rt::cuda {

/// Steps, every rank at once (ranks share the node as they do in training):
/// 1. bf16 GEMM sweep with cuda::linear_forward (square peak first, then m x n x k over the planner's
///    linear sizes), timed with CUDA events, outputs sampled against a double dot product; one square
///    fp32 GEMM for the fp32 peak;
/// 2. device memory copy (1 GiB; quick 256 MiB) and pinned host -> device copy rates;
/// 3. all_reduce, all_gather, reduce_scatter, all_to_all over the world, 1 MiB .. 256 MiB (quick:
///    .. 16 MiB), every element of the last call checked;
/// 4. topology: NVLink between every pair of the node's GPUs (`nvidia-smi topo -m`, else
///    cudaDeviceCanAccessPeer) makes the node one NVLink domain; the spec from the measurements.
/// Throws std::runtime_error naming the measurement when a check fails, ir::InputError when the ranks
/// span several hosts.
ProbeReport probe_cuda(NcclCommunicator& comm, const ProbeOptions& options, std::ostream* log);

/// True when `topo` (the text of `nvidia-smi topo -m`) has `devices` GPU rows whose GPU x GPU cells are
/// all "X" or "NV<n>" (NVLink between every pair); false for fewer than 2 devices or anything else.
bool topo_shows_nvlink_between_all(const std::string& topo, int devices);

}  // namespace mgt::rt::cuda
