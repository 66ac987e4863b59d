// `mgt-plan probe`: the MPI world as a one-axis mesh, rt::probe_cpu, and the file written and re-read.
#include "probe_command.hpp"

#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/runtime/mpi_communicator.hpp"
#include "mgt/runtime/probe.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

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
  if (backend != "cpu")
    throw ir::InputError("--backend", "", "unsupported backend \"" + backend + "\"",
                         "use --backend cpu; the cuda probe arrives with the CUDA backend issue");
  if (out_path.empty())
    throw ir::InputError("--out", "", "missing", "give the path of the mgt.cluster/1 file to write");

  rt::MpiCommunicator comm(ir::Mesh{{{"world", rt::mpi_world_size()}}});
  const bool root = comm.rank() == 0;
  rt::ProbeOptions options;
  options.quick = quick;
  options.command = std::string("mgt-plan probe --backend cpu") + (quick ? " --quick" : "");
  rt::ProbeReport report = rt::probe_cpu(comm, options, root ? &std::cout : nullptr);

  if (root) {
    nlohmann::json doc = ir::to_json(report.cluster);
    doc["comment"] =
        "CPU backend: the gpu is one rank (one core), peaks are the best measured fp32 GEMM rate, hbm is host "
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
