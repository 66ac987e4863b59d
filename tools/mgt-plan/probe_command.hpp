// `mgt-plan probe --backend cpu --out FILE [--quick]`: measures this machine (GEMM sweep, host memory
// bandwidth, MPI collectives when run under mpirun) and writes an `mgt.cluster/1` file for
// `--cluster FILE` (docs/probe.md).
#pragma once

#include <string>

namespace mgt::cli {

/// Runs rt::probe_cpu on every rank of the MPI world (one rank without a launcher); rank 0 prints the
/// tables, writes `out_path` (atomically: a temporary file renamed) and re-reads it with
/// ir::load_cluster, which must give the spec written. Returns 0. Throws ir::InputError for a
/// `backend` other than "cpu", an empty `out_path`, a file it cannot write, or ranks on several hosts;
/// std::runtime_error when a measurement finds a wrong result.
int run_probe(const std::string& backend, const std::string& out_path, bool quick);

}  // namespace mgt::cli
