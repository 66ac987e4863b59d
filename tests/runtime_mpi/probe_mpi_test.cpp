// rt::probe_cpu in quick mode under mpirun (ctest runs it with 2 ranks; a plain run is one rank): the
// GEMM checker catches corrupted outputs, the spec written reads back equal through ir::load_cluster,
// the GEMM table's efficiencies lie in (0, 1], and with several ranks every collective has rows with
// positive busbw. One line per check; exit status 1 on any failure, so ctest fails.
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/runtime/mpi_communicator.hpp"
#include "mgt/runtime/probe.hpp"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace mgt;

int g_failures = 0;
int64_t g_rank = 0;

/// Counts a failure; prints every check on rank 0 and failures on every rank.
void check(bool ok, const std::string& what) {
  if (!ok) ++g_failures;
  if (!ok || g_rank == 0)
    std::printf("%s [rank %lld] %s\n", ok ? "ok  " : "FAIL", static_cast<long long>(g_rank), what.c_str());
}

/// y = x w^T computed naively in float, for the checker's own test.
std::vector<float> naive_gemm(const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n,
                              int64_t k) {
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) s += static_cast<double>(x[i * k + l]) * w[j * k + l];
      y[i * n + j] = static_cast<float>(s);
    }
  return y;
}

/// The checker: zero on a correct result, the corrupted count when outputs are corrupted.
void test_gemm_checker() {
  const int64_t m = 8, n = 6, k = 40;
  std::vector<float> x(m * k), w(n * k);
  for (int64_t i = 0; i < m * k; ++i) x[i] = static_cast<float>((i * 7 % 19) - 9) / 9.0f;
  for (int64_t i = 0; i < n * k; ++i) w[i] = static_cast<float>((i * 5 % 23) - 11) / 11.0f;
  std::vector<float> y = naive_gemm(x, w, m, n, k);
  check(rt::count_gemm_mismatches(y.data(), x.data(), w.data(), m, n, k, m * n) == 0,
        "count_gemm_mismatches: a correct result has no mismatch");

  std::vector<float> bad = y;
  bad[3 * n + 2] += 0.5f;       // every output checked: found
  bad[m * n - 1] = std::nanf("");  // a corner: found even when sampled
  check(rt::count_gemm_mismatches(bad.data(), x.data(), w.data(), m, n, k, m * n) == 2,
        "count_gemm_mismatches: two corrupted outputs of all checked are both found");
  check(rt::count_gemm_mismatches(bad.data(), x.data(), w.data(), m, n, k, 5) >= 1,
        "count_gemm_mismatches: a corrupted corner is found with 5 samples");

  // The product with the wrong weight rows (an indexing bug) is found on a sample.
  std::vector<float> shifted(n * k);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t l = 0; l < k; ++l) shifted[j * k + l] = w[((j + 1) % n) * k + l];
  std::vector<float> wrong = naive_gemm(x, shifted, m, n, k);
  check(rt::count_gemm_mismatches(wrong.data(), x.data(), w.data(), m, n, k, 16) > 0,
        "count_gemm_mismatches: a product with the wrong weight rows is found on 16 samples");

  // time_gemm checks its own output and finds nothing wrong.
  rt::GemmSample s = rt::time_gemm(32, 48, 64, /*repetitions=*/2, /*samples=*/100);
  check(s.wrong == 0 && s.checked == 100 && s.flops_per_s > 0, "time_gemm 32x48x64: 100 outputs checked, none wrong");
}

/// The one-rank spec (no collectives) is valid: link rates fall back to positive values.
void test_single_rank_spec() {
  rt::MemorySample memory{.array_bytes = 1 << 20, .copy_bytes_per_s = 2e10, .triad_bytes_per_s = 3e10};
  std::vector<rt::GemmSample> gemms = {{.m = 64, .n = 64, .k = 64, .time_s = 1e-5, .flops_per_s = 5e10}};
  ir::ClusterSpec c = rt::build_probe_cluster("host", "CPU", "2025-01-01", {}, /*peak_flops_per_s=*/1e11, gemms,
                                              memory, /*memory_bytes_per_rank=*/int64_t{1} << 30,
                                              /*ranks_per_node=*/1, /*collectives=*/{});
  bool parses = true;
  try {
    parses = ir::cluster_from_json(ir::to_json(c), "single-rank") == c;
  } catch (const std::exception& e) {
    std::printf("  %s\n", e.what());
    parses = false;
  }
  check(parses && c.pcie_bytes_per_s > 0 && c.collective_table.empty() && c.gemm_table.size() == 3 &&
            c.gemm_table[0].efficiency == 0.5,
        "build_probe_cluster, one rank: parses, positive link rates, no collective rows, one row per dtype");
}

void test_probe(rt::MpiCommunicator& comm) {
  const bool root = comm.rank() == 0;
  rt::ProbeReport report = rt::probe_cpu(comm, {.quick = true}, root ? &std::cout : nullptr);
  const ir::ClusterSpec& c = report.cluster;

  check(!c.gemm_table.empty(), "gemm_table has " + std::to_string(c.gemm_table.size()) + " rows");
  bool in_range = true;
  for (const auto& g : c.gemm_table) in_range = in_range && g.efficiency > 0 && g.efficiency <= 1.05;
  check(in_range, "every gemm efficiency lies in (0, 1.05]");
  bool has_f32 = false, has_bf16 = false;
  for (const auto& g : c.gemm_table) {
    has_f32 = has_f32 || g.dtype == ir::DType::f32;
    has_bf16 = has_bf16 || g.dtype == ir::DType::bf16;
  }
  check(has_f32 && has_bf16, "gemm_table has f32 and bf16 rows");
  check(c.gpu.peak_fp32_flops_per_s == report.peak_flops_per_s && report.peak_flops_per_s > 0,
        "peak fp32 = the best measured GEMM rate");
  check(c.gpu.hbm_bytes > 0 && c.gpu.hbm_bytes_per_s > 0 && report.memory.wrong == 0 && report.memory.checked > 0,
        "memory: capacity and bandwidth positive, triad checked");
  check(c.gpus_per_node == comm.world_size(), "gpus_per_node = ranks on this host");
  check(c.gpu.arch == ir::GpuArch::cpu, "arch cpu: the cost model's CPU-backend defaults");
  // Every non-GEMM kernel the executor runs, both phases (the optimizer has one), each a positive rate
  // equal to its work over its time.
  bool kernels_ok = c.kernel_table.size() == 15 && report.kernels.size() == 15;
  for (const char* op : {"norm", "rope", "activation", "residual", "embedding", "attention_core", "softmax_cross_entropy"})
    for (const char* phase : {"fwd", "bwd"}) kernels_ok = kernels_ok && ir::measured_kernel_rate(c, op, phase) > 0;
  kernels_ok = kernels_ok && ir::measured_kernel_rate(c, "optimizer", "fwd") > 0;
  for (const auto& k : report.kernels)
    kernels_ok = kernels_ok && k.wrong == 0 && k.time_s > 0 && std::abs(k.work_per_s * k.time_s - k.work) <= 1e-9 * k.work;
  check(kernels_ok, "kernel_table: 15 rows (7 kernels x fwd/bwd + AdamW), rate = work / time, outputs finite");

  if (comm.world_size() > 1) {
    for (const std::string op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}) {
      int64_t rows = 0;
      bool positive = true;
      for (const auto& r : c.collective_table)
        if (r.op == op) {
          ++rows;
          positive = positive && r.bus_bytes_per_s > 0 && r.group_size == comm.world_size() && r.nodes_spanned == 1;
        }
      check(rows > 0 && positive, op + ": " + std::to_string(rows) + " rows, positive busbw, the whole world");
    }
    bool all_right = true;
    for (const auto& s : report.collectives) all_right = all_right && s.wrong == 0;
    check(all_right, "every collective result checked, none wrong");
    check(c.pcie_bytes_per_s > 0 && c.pcie_latency_s > 0, "link rate and latency from the all_reduce sweep");
  } else {
    check(c.collective_table.empty(), "one rank: no collective rows");
  }

  if (root) {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("mgt_probe_test_" + std::to_string(getpid()) + ".json")).string();
    {
      std::ofstream out(path);
      out << ir::to_json(c).dump(2);
    }
    bool equal = false;
    try {
      equal = ir::load_cluster(path) == c;
    } catch (const std::exception& e) {
      std::printf("  %s\n", e.what());
    }
    std::filesystem::remove(path);
    check(equal, "the spec written reads back equal through ir::load_cluster");
  }
}

}  // namespace

int main() {
  try {
    rt::MpiCommunicator comm(ir::Mesh{{{"world", rt::mpi_world_size()}}});
    g_rank = comm.rank();
    if (comm.rank() == 0) {
      test_gemm_checker();
      test_single_rank_spec();
    }
    test_probe(comm);
    std::printf("rank %lld: %d failure(s)\n", static_cast<long long>(comm.rank()), g_failures);
  } catch (const std::exception& e) {
    // The other ranks may be waiting in a collective: abort the job rather than hang until the timeout.
    std::printf("FAIL exception: %s\n", e.what());
    std::fflush(stdout);
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  return g_failures == 0 ? 0 : 1;
}
