// `probe --backend cuda` (cuda/probe.hpp): bf16 GEMM sweep on the runtime's cuBLAS kernel, device and
// host<->device copies, NCCL collectives over the ranks, NVLink topology, then the mgt.cluster/1 spec.
// Every measurement is checked. Design notes: docs/runtime_cuda.md ("Probe").
#include "mgt/runtime/cuda/probe.hpp"

#include "../probe_util.hpp"
#include "check.hpp"
#include "mgt/ir/collective.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/runtime/cuda/kernels.hpp"
#include "mgt/runtime/mpi_communicator.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace mgt::rt::cuda {

namespace {

using probe_detail::format;
using probe_detail::utc_date;
using Shape = probe_detail::GemmShape;
using Clock = std::chrono::steady_clock;

/// Mean of a double over the world (MPI, started by the communicator).
double mean_over_world(double value, int64_t world) {
  double sum = 0;
  if (MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw std::runtime_error("probe: MPI_Allreduce failed");
  return sum / static_cast<double>(world);
}
int64_t sum_over_world(int64_t value) {
  int64_t sum = 0;
  if (MPI_Allreduce(&value, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw std::runtime_error("probe: MPI_Allreduce failed");
  return sum;
}

/// Seconds per call of `body` (enqueued on `stream`), timed with CUDA events over `reps` calls.
template <class Body>
double time_on_stream(cudaStream_t stream, int reps, Body body) {
  cudaEvent_t start, stop;
  MGT_CUDA_CHECK(cudaEventCreate(&start));
  MGT_CUDA_CHECK(cudaEventCreate(&stop));
  MGT_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int r = 0; r < reps; ++r) body();
  MGT_CUDA_CHECK(cudaEventRecord(stop, stream));
  MGT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  MGT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms) * 1e-3 / reps;
}

/// The square peak first, then tokens-per-rank x output features x input features over the planner's
/// linear sizes; weights at most 2^28 elements, m n k at most 2^40.
std::vector<Shape> gemm_shapes(bool quick) {
  const int64_t square = quick ? 2048 : 8192;
  const std::vector<int64_t> ms = quick ? std::vector<int64_t>{512, 2048} : std::vector<int64_t>{1024, 4096, 16384};
  const std::vector<int64_t> nks =
      quick ? std::vector<int64_t>{1024, 4096} : std::vector<int64_t>{1024, 4096, 8192, 16384};
  return probe_detail::gemm_shape_sweep(square, ms, nks, int64_t{1} << 28, int64_t{1} << 40);
}

/// Times cuda::linear_forward at (m, n, k) and checks `samples` outputs against a double dot product of
/// the (bf16-exact) inputs: |y - ref| <= 1e-3 sum |x w| + 1e-6 (fp32 accumulation over k terms).
GemmSample time_gemm(Context& ctx, const Shape& s, int reps, int64_t samples) {
  DeviceArray<float> x(s.m * s.k), w(s.n * s.k), y(s.m * s.n);
  probe_uniform_bf16(ctx, x.data(), x.size(), /*seed=*/1);
  probe_uniform_bf16(ctx, w.data(), w.size(), /*seed=*/2);
  auto gemm = [&] { linear_forward(ctx, y.data(), x.data(), w.data(), nullptr, s.m, s.k, s.n); };
  gemm();  // warm-up (cuBLAS heuristics, bf16 scratch)
  const auto stream = static_cast<cudaStream_t>(ctx.stream());
  GemmSample g{.m = s.m, .n = s.n, .k = s.k};
  g.time_s = time_on_stream(stream, reps, gemm);
  g.flops_per_s = 2.0 * double(s.m) * double(s.n) * double(s.k) / g.time_s;
  ctx.synchronize();
  for (int64_t t = 0; t < samples; ++t) {
    const int64_t i = t == 0 ? 0 : t == 1 ? s.m - 1 : (t * 7919) % s.m;
    const int64_t j = t == 0 ? 0 : t == 1 ? s.n - 1 : (t * 104729) % s.n;
    float got = 0;
    copy_to_host(&got, y.data() + i * s.n + j, sizeof got);
    double ref = 0, mag = 0;
    for (int64_t l = 0; l < s.k; ++l) {
      const double a = probe_uniform_bf16_value(1, i * s.k + l), b = probe_uniform_bf16_value(2, j * s.k + l);
      ref += a * b;
      mag += std::fabs(a * b);
    }
    ++g.checked;
    if (!(std::fabs(double(got) - ref) <= 1e-3 * mag + 1e-6)) ++g.wrong;
  }
  return g;
}

/// `nvidia-smi topo -m` of this node ("" when nvidia-smi is missing).
std::string topo_text() {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen("nvidia-smi topo -m 2>/dev/null", "r"), pclose);
  if (!pipe) return {};
  std::string text;
  char buffer[4096];
  while (size_t got = fread(buffer, 1, sizeof buffer, pipe.get())) text.append(buffer, got);
  return text;
}

ir::GpuArch arch_of(int major, int minor) {
  if (major >= 10) return ir::GpuArch::blackwell;
  if (major == 9) return ir::GpuArch::hopper;
  if (major == 8 && minor >= 9) return ir::GpuArch::ada;
  return ir::GpuArch::ampere;
}

}  // namespace

bool topo_shows_nvlink_between_all(const std::string& topo, int devices) {
  if (devices < 2) return false;
  std::istringstream lines(topo);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    // A GPU row starts the line with "GPU<i>"; the header starts with whitespace (or an ANSI escape).
    if (line.rfind("GPU", 0) != 0 || line.size() < 4 || !std::isdigit(static_cast<unsigned char>(line[3]))) continue;
    std::istringstream cells(line);
    std::string head;
    cells >> head;
    for (int j = 0; j < devices; ++j) {
      std::string cell;
      if (!(cells >> cell)) return false;
      if (cell != "X" && cell.rfind("NV", 0) != 0) return false;
    }
    ++rows;
  }
  return rows == devices;
}

namespace {

/// Ranks on this host; throws ir::InputError when the ranks span several hosts.
int ranks_on_this_host(NcclCommunicator& comm) {
  int local = 1, local_rank = 0;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, static_cast<int>(comm.rank()), MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &local);
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  const int64_t hosts = sum_over_world(local_rank == 0 ? 1 : 0);
  if (hosts != 1)
    throw ir::InputError("probe", "", "the " + std::to_string(comm.world_size()) + " ranks span " +
                                          std::to_string(hosts) + " hosts",
                         "run probe with every rank on one host; multi-host probing is not supported");
  return local;
}

/// 1. bf16 GEMM sweep (the runtime's kernel: bf16 operand copies + cublasGemmEx), every rank at once;
///    the fp32 square beside it. Returns the fp32 rate (mean over ranks).
double probe_gemms(NcclCommunicator& comm, const ProbeOptions& options, std::ostream* log, Context& bf16,
                   ProbeReport& report) {
  const int64_t world = comm.world_size();
  const std::vector<Shape> shapes = gemm_shapes(options.quick);
  const double target_s = options.quick ? 0.005 : 0.02;
  double rate_guess = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const double flops = 2.0 * double(shapes[i].m) * double(shapes[i].n) * double(shapes[i].k);
    const int reps = i == 0 ? 5 : static_cast<int>(std::clamp(target_s * rate_guess / flops, 3.0, 100.0));
    comm.barrier(comm.all_axes());
    GemmSample g = time_gemm(bf16, shapes[i], reps, options.quick ? 16 : 64);
    g.time_s = mean_over_world(g.time_s, world);
    g.flops_per_s = flops / g.time_s;
    g.checked = sum_over_world(g.checked);
    g.wrong = sum_over_world(g.wrong);
    if (i == 0) rate_guess = g.flops_per_s;
    report.gemms.push_back(g);
  }
  report.peak_square_dim = shapes[0].m;
  for (const auto& g : report.gemms) report.peak_flops_per_s = std::max(report.peak_flops_per_s, g.flops_per_s);
  Context fp32(Precision::fp32, comm.device());
  const GemmSample fp32_square = time_gemm(fp32, shapes[0], 3, 16);
  const double peak_fp32 = mean_over_world(fp32_square.flops_per_s, world);
  if (log) {
    *log << format("# GEMM y = x w^T (rt::cuda::linear_forward, bf16 operands, fp32 accumulate), mean over ranks; "
                   "peak = best rate = %.1f TFLOP/s per GPU; fp32 square %.1f TFLOP/s\n",
                   report.peak_flops_per_s / 1e12, peak_fp32 / 1e12);
    *log << "#      m       n       k   time(us)  TFLOP/s  of peak  checked  wrong\n";
    for (const auto& g : report.gemms)
      *log << format("%8lld%8lld%8lld %10.1f %8.1f %7.1f%% %8lld %6lld\n", static_cast<long long>(g.m),
                     static_cast<long long>(g.n), static_cast<long long>(g.k), g.time_s * 1e6, g.flops_per_s / 1e12,
                     100 * g.flops_per_s / report.peak_flops_per_s, static_cast<long long>(g.checked),
                     static_cast<long long>(g.wrong));
  }
  for (const auto& g : report.gemms)
    if (g.wrong != 0)
      throw std::runtime_error(format("probe: GEMM %lldx%lldx%lld gave %lld wrong outputs of %lld checked",
                                      static_cast<long long>(g.m), static_cast<long long>(g.n),
                                      static_cast<long long>(g.k), static_cast<long long>(g.wrong),
                                      static_cast<long long>(g.checked)));
  if (fp32_square.wrong != 0) throw std::runtime_error("probe: the fp32 square GEMM gave wrong outputs");
  return peak_fp32;
}

/// 2. Device memory copy and pinned host -> device copy, every rank at once. Returns the host ->
///    device rate (mean over ranks).
double probe_memory(NcclCommunicator& comm, const ProbeOptions& options, std::ostream* log, Context& bf16,
                    ProbeReport& report) {
  const int64_t world = comm.world_size();
  const int64_t bytes = options.quick ? (int64_t{256} << 20) : (int64_t{1} << 30);
  const int64_t n = bytes / 4;
  {
    DeviceArray<float> a(n), b(n);
    probe_uniform_bf16(bf16, a.data(), n, 3);
    const auto stream = static_cast<cudaStream_t>(bf16.stream());
    auto copy = [&] {
      MGT_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
    };
    copy();
    comm.barrier(comm.all_axes());
    const double t = time_on_stream(stream, 5, copy);
    report.memory.array_bytes = bytes;
    report.memory.copy_bytes_per_s = mean_over_world(2.0 * double(bytes) / t, world);  // read + write
    report.memory.triad_bytes_per_s = report.memory.copy_bytes_per_s;  // no triad kernel: the copy rate
    for (int64_t s = 0; s < 64; ++s) {
      const int64_t i = (s * 2654435761ll) % n;
      float got = 0;
      copy_to_host(&got, b.data() + i, sizeof got);
      ++report.memory.checked;
      if (got != probe_uniform_bf16_value(3, i)) ++report.memory.wrong;
    }
    report.memory.checked = sum_over_world(report.memory.checked);
    report.memory.wrong = sum_over_world(report.memory.wrong);
  }
  double h2d_bytes_per_s = 0;
  {
    const int64_t h2d = int64_t{256} << 20;
    float* pinned = nullptr;
    MGT_CUDA_CHECK(cudaMallocHost(&pinned, static_cast<size_t>(h2d)));
    DeviceArray<float> d(h2d / 4);
    const auto stream = static_cast<cudaStream_t>(bf16.stream());
    auto copy = [&] {
      MGT_CUDA_CHECK(cudaMemcpyAsync(d.data(), pinned, static_cast<size_t>(h2d), cudaMemcpyHostToDevice, stream));
    };
    copy();
    const double t = time_on_stream(stream, 3, copy);
    cudaFreeHost(pinned);
    h2d_bytes_per_s = mean_over_world(double(h2d) / t, world);
  }
  if (log)
    *log << format("# device memory copy %lld MiB: %.0f GB/s (read + write), %lld checked, %lld wrong; pinned host -> "
                   "device %.1f GB/s\n",
                   static_cast<long long>(bytes >> 20), report.memory.copy_bytes_per_s / 1e9,
                   static_cast<long long>(report.memory.checked), static_cast<long long>(report.memory.wrong),
                   h2d_bytes_per_s / 1e9);
  if (report.memory.wrong != 0) throw std::runtime_error("probe: the device copy gave wrong values");
  return h2d_bytes_per_s;
}

/// 4. Topology and the spec: the CPU probe's construction, then what a GPU node has in addition.
ir::ClusterSpec probe_cluster(const char* host, const cudaDeviceProp& prop, int local,
                              const ProbeOptions& options, const ProbeReport& report, double peak_fp32,
                              double h2d_bytes_per_s, bool nvlink) {
  ir::ClusterSpec c = build_probe_cluster(host, prop.name, utc_date(), options, report.peak_flops_per_s, report.gemms,
                                          report.memory, static_cast<int64_t>(prop.totalGlobalMem), local,
                                          report.collectives);
  c.name = std::string("cuda-") + host;
  c.gpu.arch = arch_of(prop.major, prop.minor);
  // Blackwell Ultra (B300, GB300: sm_103) doubles the SFU's exponent rate over sm_100's 16 per clock
  // per SM; the attention model reads it (docs/cluster.md §2).
  if (prop.major == 10 && prop.minor == 3) c.gpu.sfu_exp2_per_clock_per_sm = 32;
  c.gpu.peak_fp32_flops_per_s = peak_fp32;
  c.gpu.peak_fp8_flops_per_s = 0;  // not measured
  c.gemm_table.clear();
  for (ir::DType dtype : {ir::DType::bf16, ir::DType::f16})  // the f16 rows repeat the bf16 ones (same units)
    for (const auto& g : report.gemms)
      c.gemm_table.push_back({.m = g.m, .n = g.n, .k = g.k, .dtype = dtype,
                              .efficiency = std::min(1.0, g.flops_per_s / report.peak_flops_per_s)});
  if (nvlink && !report.collectives.empty()) {
    // GPU <-> GPU over NVLink: the largest all_reduce's busbw is one ring step's rate, the smallest's time
    // over its 2(n-1) steps the latency; PCIe is then the host link.
    const CollectiveSample* small = nullptr;
    const CollectiveSample* large = nullptr;
    for (const auto& s : report.collectives) {
      if (s.kind != ir::CollectiveKind::all_reduce) continue;
      if (!small || s.bytes < small->bytes) small = &s;
      if (!large || s.bytes > large->bytes) large = &s;
    }
    c.nvlink_domain_gpus = local;
    c.nvlink_bytes_per_s = large->busbw_gbps * 1e9;
    c.nvlink_latency_s = small->time_s / static_cast<double>(2 * (small->group_size - 1));
    c.pcie_bytes_per_s = h2d_bytes_per_s;
  } else if (report.collectives.empty()) {
    c.pcie_bytes_per_s = h2d_bytes_per_s;  // one GPU: the host link is all there is to measure
    c.pcie_latency_s = 0;
  }  // else GPU <-> GPU runs over PCIe: build_probe_cluster took the collectives' rate and latency
  c.nic_bytes_per_s = c.pcie_bytes_per_s;  // one node: the network is not measured
  c.network_latency_s = c.pcie_latency_s;
  return c;
}

}  // namespace

ProbeReport probe_cuda(NcclCommunicator& comm, const ProbeOptions& options, std::ostream* log) {
  const auto total_start = Clock::now();
  const int64_t world = comm.world_size();
  ProbeReport report;
  MGT_CUDA_CHECK(cudaSetDevice(comm.device()));
  cudaDeviceProp prop{};
  MGT_CUDA_CHECK(cudaGetDeviceProperties(&prop, comm.device()));
  int devices = 0;
  MGT_CUDA_CHECK(cudaGetDeviceCount(&devices));

  const int local = ranks_on_this_host(comm);
  report.ranks_per_node = local;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "localhost");
  if (log)
    *log << "# mgt probe --backend cuda on " << host << " (" << prop.name << ", sm_" << prop.major << prop.minor
         << ", " << devices << " device(s)), " << world << (world == 1 ? " rank" : " ranks")
         << (options.quick ? ", quick" : "") << "\n";

  Context bf16(Precision::bf16, comm.device());
  const double peak_fp32 = probe_gemms(comm, options, log, bf16, report);
  const double h2d_bytes_per_s = probe_memory(comm, options, log, bf16, report);

  // 3. NCCL collectives over the world; inputs rank + 1, so every result is known exactly.
  if (world > 1) {
    const Axes all = comm.all_axes();
    const int64_t max_bytes = options.quick ? (int64_t{16} << 20) : (int64_t{256} << 20);
    for (ir::CollectiveKind kind : probe_detail::kProbedCollectives) {
      for (int64_t size = int64_t{1} << 20; size <= max_bytes; size *= 4) {
        const int64_t total = size / 4 / world * world;  // floats of the nccl-tests buffer, a multiple of world
        const int64_t chunk = total / world;
        // The send and receive buffers of the collective table, in floats.
        const ir::CollectiveBytes table = ir::collective_bytes(kind, total * 4, world);
        DeviceArray<float> send(table.send_bytes / 4), recv(table.recv_bytes / 4);
        const int64_t count = table.param_bytes / 4;  // what the call takes: total for all_reduce, else chunk
        fill_constant(bf16, send.data(), send.size(), static_cast<float>(comm.rank() + 1));
        bf16.synchronize();
        auto call = [&] {
          switch (kind) {
            case ir::CollectiveKind::all_reduce: comm.all_reduce(send.data(), recv.data(), count, all); break;
            case ir::CollectiveKind::all_gather: comm.all_gather(send.data(), recv.data(), count, all); break;
            case ir::CollectiveKind::reduce_scatter: comm.reduce_scatter(send.data(), recv.data(), count, all); break;
            default: comm.all_to_all(send.data(), recv.data(), count, all); break;
          }
        };
        call();  // warm-up (connections, buffers)
        const int iterations = static_cast<int>(std::clamp<int64_t>((int64_t{1} << 30) / size, 5, 50));
        comm.barrier(all);
        const auto start = Clock::now();
        for (int it = 0; it < iterations; ++it) call();  // each call waits for its completion
        const double t = std::chrono::duration<double>(Clock::now() - start).count() / iterations;
        std::vector<float> got(static_cast<size_t>(recv.size()));
        copy_to_host(got.data(), recv.data(), got.size() * sizeof(float));
        int64_t wrong = 0;
        const float sum = static_cast<float>(world * (world + 1) / 2);
        for (int64_t i = 0; i < recv.size(); ++i) {
          float want = sum;
          if (kind == ir::CollectiveKind::all_gather || kind == ir::CollectiveKind::all_to_all)
            want = static_cast<float>(i / chunk + 1);  // chunk j comes from rank j
          if (got[size_t(i)] != want) ++wrong;
        }
        CollectiveSample s{.kind = kind, .group_size = world, .bytes = total * 4};
        s.time_s = mean_over_world(t, world);
        s.algbw_gbps = algbw_gbps(s.bytes, s.time_s);
        s.busbw_gbps = busbw_gbps(kind, world, s.bytes, s.time_s);
        s.wrong = sum_over_world(wrong);
        report.collectives.push_back(s);
      }
    }
    probe_detail::log_and_check_collectives(
        report.collectives,
        "# NCCL collectives over the world (" + std::to_string(world) + " GPUs), out of place, every element checked\n",
        log);
  } else if (log) {
    *log << "# one rank: no collectives measured (run under mpirun -np <GPUs> to measure them)\n";
  }

  // 4. Topology and the spec.
  const bool nvlink = topo_shows_nvlink_between_all(topo_text(), devices) && local == devices;
  report.cluster = probe_cluster(host, prop, local, options, report, peak_fp32, h2d_bytes_per_s, nvlink);
  if (log)
    *log << format("# topology: %d GPU(s) on this node, %s; probe took %.1f s\n", devices,
                   nvlink ? "NVLink between every pair (nvidia-smi topo -m)" : "no all-pairs NVLink seen",
                   std::chrono::duration<double>(Clock::now() - total_start).count());
  return report;
}

}  // namespace mgt::rt::cuda
