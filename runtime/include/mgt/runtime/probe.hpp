// `mgt-plan probe --backend cpu`: measures this machine as the CPU backend uses it (Eigen fp32 GEMMs,
// host memory, MPI collectives between ranks) and builds the `mgt.cluster/1` spec whose measured
// tables the cost model reads. Every measurement checks its results (nccl-tests). Design: docs/probe.md.
//
//   rt::MpiCommunicator comm(ir::Mesh{{{"world", rt::mpi_world_size()}}});   // under mpirun -np 2
//   rt::ProbeReport report = rt::probe_cpu(comm, {.quick = false}, comm.rank() == 0 ? &std::cout : nullptr);
//   std::cout << ir::to_json(report.cluster).dump(2);
#pragma once

#include "mgt/ir/cluster_spec.hpp"
#include "mgt/runtime/communicator.hpp"

#include <cstdint>
#include <ostream>
#include <functional>
#include <string>
#include <vector>

namespace mgt::rt {

struct ProbeOptions {
  bool quick = false;  ///< a few small shapes and sizes (~2 s): for tests, not for planning
  std::string command = "mgt-plan probe --backend cpu";  ///< quoted in the spec's `source`
};

/// One timed GEMM y (m, n) = x (m, k) w^T with w (n, k): rt::linear_forward, the runtime's kernel.
struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  double time_s = 0;         ///< median of the timed calls, mean over the ranks
  double flops_per_s = 0;    ///< 2 m n k / time_s
  int64_t checked = 0;       ///< outputs compared with the naive reference, over all ranks
  int64_t wrong = 0;         ///< of those, outside the tolerance
};

/// STREAM-like copy (a = b) and triad (a = b + s c) over float arrays larger than the last-level cache.
struct MemorySample {
  int64_t array_bytes = 0;          ///< bytes per array
  double copy_bytes_per_s = 0;      ///< 2 arrays moved per element (STREAM counts no write-allocate)
  double triad_bytes_per_s = 0;     ///< 3 arrays moved per element
  int64_t checked = 0, wrong = 0;   ///< sampled triad outputs checked, over all ranks
};

/// One timed non-GEMM kernel of the CPU backend at a fixed shape (ir::KernelMeasurement: op, phase and
/// the work unit the cost model prices it by).
struct KernelSample {
  std::string op;     ///< ir::OpKind name or "optimizer"
  std::string phase;  ///< fwd | bwd
  std::string shape;  ///< what was timed, for the log
  double work = 0;    ///< work units per call (elements, or attention forward FLOPs)
  double time_s = 0;  ///< median of the timed calls, mean over the ranks
  double work_per_s = 0;
  int64_t wrong = 0;  ///< non-finite outputs (sampled), over all ranks
};

/// Times the CPU backend's non-GEMM kernels as the executor calls them (rmsnorm, rope, swiglu,
/// residual, embedding, causal GQA attention, fused cross-entropy without and with the gradient,
/// AdamW), each forward and backward, on this rank; median of `repetitions` after a warm-up. No
/// communication. Shapes: docs/probe.md §2b.
/// `before_each` (when set) runs before each kernel's timed calls: probe_cpu passes a barrier, so that
/// every rank times the same kernel at once and memory-bound kernels share the bandwidth as in training.
std::vector<KernelSample> time_kernels(bool quick, int repetitions, const std::function<void()>& before_each = {});

/// One row of the nccl-tests-like table: rt::time_collective over the world.
struct CollectiveSample {
  ir::CollectiveKind kind = ir::CollectiveKind::all_reduce;
  int64_t group_size = 0;
  int64_t bytes = 0;        ///< per-rank buffer in nccl-tests' sense
  double time_s = 0;        ///< per call, mean over the iterations and the ranks
  double algbw_gbps = 0, busbw_gbps = 0;
  int64_t wrong = 0;
};

struct ProbeReport {
  ir::ClusterSpec cluster;
  double peak_flops_per_s = 0;    ///< best GEMM rate measured (square or sweep): the CPU's "peak"
  int64_t peak_square_dim = 0;    ///< the square GEMM timed for the peak
  std::vector<GemmSample> gemms;  ///< the sweep, peak square first
  MemorySample memory;
  std::vector<KernelSample> kernels;
  std::vector<CollectiveSample> collectives;  ///< empty for one rank
  int64_t ranks_per_node = 1;
};

/// Outputs y[i, j] of y = x w^T (x (m, k), w (n, k), row-major) that differ from a double-precision
/// dot product by more than 1e-5 * sum_l |x[i,l] w[j,l]| + 1e-6. Checks `samples` outputs spread
/// over the matrix (the four corners always among them), every output when samples >= m n.
int64_t count_gemm_mismatches(const float* y, const float* x, const float* w, int64_t m, int64_t n, int64_t k,
                              int64_t samples);

/// Times linear_forward at (m, n, k) on this rank: one warm-up call, then `repetitions` timed calls,
/// the median kept (a step sees typical calls, not the best one); inputs are pseudo-random in [-1, 1]; the output is checked with
/// count_gemm_mismatches (`samples` outputs). No communication.
GemmSample time_gemm(int64_t m, int64_t n, int64_t k, int repetitions, int64_t samples = 256);

/// STREAM copy and triad over three arrays of `array_bytes` each on this rank, best of `repetitions`;
/// the triad result is checked on a sample. No communication.
MemorySample time_memory(int64_t array_bytes, int repetitions);

/// Prints the nccl-tests-like table (size count type redop time(us) algbw busbw #wrong) of `rows`.
void print_collective_table(std::ostream& out, const std::vector<CollectiveSample>& rows);

/// Builds the spec from measured numbers (no measuring; a pure function, see docs/probe.md §4).
/// `collectives` may be empty (one rank): the link rates then fall back to the memory copy rate.
ir::ClusterSpec build_probe_cluster(const std::string& host, const std::string& cpu_model, const std::string& date,
                                    const ProbeOptions& options, double peak_flops_per_s,
                                    const std::vector<GemmSample>& gemms, const MemorySample& memory,
                                    int64_t memory_bytes_per_rank, int64_t ranks_per_node,
                                    const std::vector<CollectiveSample>& collectives,
                                    const std::vector<KernelSample>& kernels = {});

/// The whole probe; every rank of `comm`'s world must call it. Steps (docs/probe.md):
/// 1. GEMM sweep on every rank at once (ranks share the machine as they do in training), peak first;
/// 2. memory bandwidth, then the non-GEMM kernels (time_kernels), on every rank at once;
/// 3. all_reduce, all_gather, reduce_scatter, all_to_all over the world, 4 KiB .. 16 MiB (quick:
///    4 KiB .. 1 MiB), when the world has more than one rank;
/// 4. build_probe_cluster.
/// Times are means over the ranks, so every rank returns the same report. Prints progress and the
/// tables to `log` when it is not nullptr (pass it on rank 0 only). Throws std::runtime_error naming
/// the measurement when any check finds a wrong result, and ir::InputError when the ranks span more
/// than one host (probe one host at a time).
ProbeReport probe_cpu(Communicator& comm, const ProbeOptions& options, std::ostream* log);

}  // namespace mgt::rt
