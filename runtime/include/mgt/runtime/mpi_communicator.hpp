// The MPI backend of rt::Communicator (Open MPI 4.1, MPI C API) with one sub-communicator per set of
// mesh axes, plus the collective timing used by `probe --backend cpu` (nccl-tests' algbw/busbw,
// results checked). Design and limits: docs/runtime_communicator.md.
//
//   ir::Mesh mesh{{{"dp", 2}, {"tp", 2}}};
//   rt::MpiCommunicator comm(mesh);                 // under `mpirun -np 4`; MPI_Init if needed
//   comm.reduce_scatter(grad, grad + comm.group_rank({"dp"}) * n, n, {"dp"});
//   rt::CollectiveTiming t = rt::time_collective(comm, ir::CollectiveKind::all_reduce, {"tp"}, 1 << 20, 20);
#pragma once

#include "mgt/runtime/communicator.hpp"

#include <memory>
#include <stdexcept>
#include <string>

namespace mgt::rt {

/// An MPI call failed; what() names the call and carries MPI_Error_string.
class MpiError : public std::runtime_error {
 public:
  MpiError(const std::string& call, int code);
  int code() const { return code_; }

 private:
  int code_;
};

struct MpiOptions {
  /// Ask for MPI_THREAD_MULTIPLE (needed when streams call the communicator from several threads);
  /// otherwise MPI_THREAD_FUNNELED. Only used when this communicator initialises MPI.
  bool thread_multiple = false;
  /// Seconds any one call may wait for its peers (`mgt-plan run --comm-timeout`); 0 waits forever.
  /// When set, every call is issued nonblocking and polled against the deadline; past it the rank
  /// pings the ranks it was waiting for (every rank answers pings while it waits in a call), prints
  /// one line to stderr naming the call and the ranks that did not answer (lost), and ends the job
  /// with MPI_Abort(MPI_COMM_WORLD, kCommTimeoutExitCode). So a killed or frozen rank never hangs
  /// the others.
  double timeout_s = 0;
};

/// The exit status of a job ended by a communication timeout (MpiOptions::timeout_s).
inline constexpr int kCommTimeoutExitCode = 4;

/// Longest timeout_s: 1e9 s (31 years). A deadline is steady_clock's now() plus the timeout in
/// nanoseconds of int64, which overflows past about 9.2e9 s; 0 is the way to wait forever.
inline constexpr double kMaxCommTimeoutSeconds = 1e9;
/// The problem with a timeout outside [0, kMaxCommTimeoutSeconds], worded for --comm-timeout.
std::string comm_timeout_range_problem(double timeout_s);

/// Number of ranks the launcher started (mpirun, srun; 1 for a plain run), e.g. to build a mesh for
/// `probe`. Initialises MPI if needed, as MpiCommunicator does.
int64_t mpi_world_size();

/// rt::Communicator over MPI. Rank and world size come from the launcher (mpirun, srun); a plain
/// run without a launcher is a world of one.
///
/// 1. Initialises MPI unless it already is (MPI_Init_thread). If mgt initialised it, MPI_Finalize
///    runs when the last live MpiCommunicator is destroyed (or at exit if none was created); if the
///    program initialised MPI itself, finalising is left to it. MPI cannot be initialised twice in a
///    process, so keep one communicator alive for the whole run.
/// 2. Checks world size == ir::num_ranks(mesh); otherwise throws ir::InputError naming both.
/// 3. Splits MPI_COMM_WORLD once per distinct set of axes (axes of size 1 ignored), eagerly, in the
///    constructor: color = row-major index over the coordinates on the axes not in the set, key =
///    group_rank() (row-major over the set's axes in mesh order). Eager, not on first use, because
///    MPI_Comm_split is collective over the whole world: ranks of different pipeline stages reach
///    their first collective on different groups, and a lazy split would deadlock. The cache is then
///    read-only, so concurrent calls on different groups need no lock.
/// Point-to-point uses a duplicate of MPI_COMM_WORLD: send = MPI_Ssend (rendezvous), recv =
/// MPI_Recv, batch = MPI_Issend/MPI_Irecv + MPI_Waitall. Tags must lie in [0, MPI_TAG_UB].
class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const ir::Mesh& mesh, MpiOptions options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  MGT_COMMUNICATOR_OVERRIDES;

  /// True when MPI runs with MPI_THREAD_MULTIPLE.
  bool thread_multiple() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- timing for probe (nccl-tests definitions, STYLE.md) ----

struct CollectiveTiming {
  double time_s = 0;  ///< seconds per call, mean over the iterations and over the group's ranks
  int64_t wrong = 0;  ///< elements differing from the expected result after the timed calls, group total
};

/// Times `iterations` calls of one collective over `axes` (after `warmup` untimed calls and a barrier)
/// and then checks every element. `bytes` is the per-rank buffer in nccl-tests' sense (ir::Collective:
/// all-reduce/broadcast buffer, gathered output, unscattered input, all-to-all send total); it must be
/// a multiple of 4 * group size for all_gather, reduce_scatter and all_to_all; the buffers are the
/// collective table's (ir::collective_bytes). Out of place except broadcast; send_recv is not a group
/// collective and throws. Every member of the group must call it.
CollectiveTiming time_collective(Communicator& comm, ir::CollectiveKind kind, const Axes& axes, int64_t bytes,
                                 int iterations, int warmup = 1);

/// bytes / time_s in GB/s (1e9 bytes per second).
double algbw_gbps(int64_t bytes, double time_s);
/// algbw_gbps(bytes, time_s) * ir::bus_factor(kind, group_size): nccl-tests' busbw, with the factor of
/// the collective table (0 for a group of one, mgt/ir/collective.hpp).
double busbw_gbps(ir::CollectiveKind kind, int64_t group_size, int64_t bytes, double time_s);

}  // namespace mgt::rt
