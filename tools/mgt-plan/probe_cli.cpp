// `mgt-plan probe [--backend cpu] --out FILE [--quick]` (probe_command.hpp).
#include "probe_command.hpp"
#include "subcommand.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_probe_cli(CLI::App& app) {
  struct Flags {
    std::string backend = "cpu", out;
    bool quick = false;
  };
  auto f = std::make_shared<Flags>();
  auto* probe = app.add_subcommand(
      "probe", "measure this machine (GEMM rates, memory bandwidth, MPI collectives under mpirun) and write a "
               "mgt.cluster/1 file for --cluster");
  probe->add_option("--backend", f->backend, "cpu (default) or cuda (one GPU per rank under mpirun)");
  probe->add_option("--out", f->out, "mgt.cluster/1 file to write")->required();
  probe->add_flag("--quick", f->quick, "a few small shapes and sizes (~0.5 s), for tests");
  return {probe, [f] { return run_probe(f->backend, f->out, f->quick); }};
}

}  // namespace mgt::cli
