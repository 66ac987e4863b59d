// `mgt-plan probe`: the MPI world as a one-axis mesh, rt::probe_cpu, and the file written and re-read.
#include "probe_command.hpp"

#include "cuda_run.hpp"

#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/runtime/mpi_communicator.hpp"
#include "mgt/runtime/probe.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

namespace mgt::cli {

namespace {

/// Writes `text` to `path` through a temporary file in the same directory, so a reader never sees
/// half a file.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw ir::InputError(path, "", "cannot write file", "check that the directory exists and is writable");
    out << text;
    if (!out.flush()) throw ir::InputError(path, "", "writing failed", "check the free space");
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) throw ir::InputError(path, "", "cannot rename " + temporary + ": " + ec.message(), "check the directory");
}

}  // namespace

int run_probe(const std::string& backend, const std::string& out_path, bool quick) {
  const bool cuda = backend == "cuda";
  if (!cuda && backend != "cpu")
    throw ir::InputError("--backend", "", "unsupported backend \"" + backend + "\"", "use --backend cpu or cuda");
  if (out_path.empty())
    throw ir::InputError("--out", "", "missing", "give the path of the mgt.cluster/1 file to write");
  if (cuda && !cuda_backend_linked()) return continue_in_cuda_binary();  // mgt-plan -> mgt-plan-cuda

  rt::ProbeOptions options;
  options.quick = quick;
  options.command = "mgt-plan probe --backend " + backend + (quick ? " --quick" : "");
  rt::ProbeReport report;
  bool root = true;
  std::unique_ptr<rt::MpiCommunicator> comm;  // cpu: kept until the file is written, as before
  if (cuda) {
    CudaProbe probe = probe_cuda_backend(options);  // NCCL over the MPI world, one GPU per rank
    report = std::move(probe.report);
    root = probe.root;
  } else {
    // The collectives are timed as `mgt-plan run` issues them: its default --comm-timeout (300 s) makes
    // every call nonblocking and polled against the deadline (MpiOptions::timeout_s), which Open MPI
    // runs through other algorithms than the blocking calls (2x slower all_reduce at 26 MB on 2 ranks).
    comm = std::make_unique<rt::MpiCommunicator>(ir::Mesh{{{"world", rt::mpi_world_size()}}},
                                                 rt::MpiOptions{.timeout_s = 300});
    root = comm->rank() == 0;
    report = rt::probe_cpu(*comm, options, root ? &std::cout : nullptr);
  }

  if (root) {
    nlohmann::json doc = ir::to_json(report.cluster);
    doc["comment"] =
        cuda ? "CUDA backend: one rank per GPU; peaks are the best measured bf16 GEMM rate (rt::cuda::linear_forward) "
               "and one fp32 square GEMM, hbm is the device copy rate, nvlink from NCCL all_reduce when every GPU pair "
               "has NVLink, pcie the pinned host-to-device rate; fp8 not measured (docs/runtime_cuda.md)"
             : "CPU backend: the gpu is one rank (one core), peaks are the best measured fp32 GEMM rate, hbm is host "
               "memory (RAM / ranks, STREAM triad), links are MPI over shared memory; arch is a placeholder "
               "(docs/probe.md)";
    write_atomically(out_path, doc.dump(2) + "\n");
    if (!(ir::load_cluster(out_path) == report.cluster))
      throw std::runtime_error("probe: " + out_path + " does not read back as the spec written");
    std::cout << "# wrote " << out_path << " (mgt.cluster/1: " << report.cluster.gemm_table.size()
              << " gemm rows, " << report.cluster.collective_table.size() << " collective rows; re-read: equal)\n";
  }
  // No barrier after writing: when rank 0 fails to write, the others must not wait for it.
  return 0;
}

}  // namespace mgt::cli
