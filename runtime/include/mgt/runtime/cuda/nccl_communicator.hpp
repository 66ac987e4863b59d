// The NCCL backend of rt::Communicator: the same interface and semantics as the MPI backend
// (docs/runtime_communicator.md), over DEVICE buffers, one GPU per process. Design, the timeout and
// abort path, and what is untested without GPUs: docs/runtime_cuda.md.
//
//   rt::NcclCommunicator comm(schedule.mesh, {.timeout_s = 300});   // under mpirun -np <GPUs>
//   comm.all_reduce(grad, grad, n, {"dp_shard"});                    // device pointers, in place
#pragma once

#include "mgt/runtime/communicator.hpp"

#include <memory>
#include <stdexcept>
#include <string>

namespace mgt::rt {

/// An NCCL call failed, a peer reported an asynchronous error, or a collective timed out; what() names
/// this rank, the operation and the group, and the communicators are aborted by then.
class NcclError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NcclOptions {
  /// --comm-timeout: an operation not complete after this many seconds aborts every communicator
  /// (ncclCommAbort) and throws NcclError naming the rank and the operation.
  double timeout_s = 300.0;
  /// CUDA device of this rank; -1: the rank's index among the ranks on its node (MPI_COMM_TYPE_SHARED)
  /// modulo the node's device count.
  int device = -1;
};

/// rt::Communicator over NCCL (one communicator per distinct set of mesh axes) with MPI for the
/// bootstrap:
/// 1. Checks for a CUDA device first (throws rt::cuda::CudaError "no CUDA device (...)" before MPI
///    starts), then starts MPI through an MpiCommunicator on the same mesh (world size checked) and
///    selects the device.
/// 2. Rank 0 calls ncclGetUniqueId; MPI_Bcast gives it to every rank; ncclCommInitRankConfig builds
///    the world communicator (non-blocking config, so every call can be abandoned).
/// 3. ncclCommSplit once per distinct set of axes of size > 1, eagerly (as the MPI backend, and for
///    the same reason): color = row-major index over the other axes, key = group rank.
/// Every call is enqueued on this communicator's stream, then waited for by polling cudaStreamQuery and
/// ncclCommGetAsyncError; past timeout_s, or on an asynchronous error, every communicator is aborted.
/// Point-to-point runs on the world communicator; NCCL matches sends and receives between two ranks in
/// issue order, so tags are checked (>= 0) but not used for matching; the Schedule verifier
/// guarantees the order. Collectives over a group of one copy (or do nothing) on the device.
class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const ir::Mesh& mesh, NcclOptions options = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  MGT_COMMUNICATOR_OVERRIDES;

  /// The cudaStream_t every operation runs on (void*: no CUDA types in this header).
  void* stream() const;
  /// The CUDA device this rank uses.
  int device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgt::rt
