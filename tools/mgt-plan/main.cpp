// mgt-plan: the command line. Thin: each subcommand registers its flags and handler (*_cli.cpp);
// main builds the App, registers them, parses and dispatches; errors become exit statuses in
// cli_errors.cpp, and so does a standard output that could not be written.
#include "subcommand.hpp"

#include "mgt/runtime/cuda/device.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace mgt::cli {

void configure_app(CLI::App& app) {
  app.footer(R"(
MFU counts model FLOPs = 6 x (parameters that take part in matmuls, active experts only) x tokens
plus causal attention (fwd + bwd = 3 x 2 x b x s x s/2 x heads x (d_qk + d_v) per layer), divided by
step time x GPUs x dense bf16 peak. Recompute FLOPs are not model FLOPs.
Exit status: 0 done, 1 no valid plan, 2 bad input. Docs: README.md, docs/planner.md, docs/cost-model.md.)");
  app.require_subcommand(0, 1);
  app.fallthrough(false);
  app.set_version_flag("--version", [] {
    return std::string("mgt-plan " MGT_VERSION "\nbackends: ") + rt::cuda::backends_description();
  }, "print the version and the backends compiled in (cpu; cuda+nccl when built with CUDA)");
}

}  // namespace mgt::cli

int main(int argc, char** argv) {
  using namespace mgt::cli;
  CLI::App app{"mgt-plan: how to train this model on these GPUs. Ranks data parallel (replicate / FSDP shard),\n"
               "tensor (+ sequence), context, pipeline (+ interleaving) and expert parallel plans by predicted\n"
               "throughput, with memory per GPU, step time, tokens/s and MFU.",
               "mgt-plan"};
  configure_app(app);
  const Subcommand search = add_search_cli(app);  // the default: no subcommand
  const std::vector<Subcommand> subcommands = {
      add_inspect_cli(app), add_estimate_cli(app), add_simulate_cli(app),  add_compile_cli(app),
      add_probe_cli(app),   add_run_cli(app),      add_validate_cli(app),  add_import_cli(app),
      add_export_mlir_cli(app)};
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  int status = 0;
  try {
    check_subcommand_spelling(app, args);
    app.parse(argc, argv);
    status = dispatch(subcommands, search);
  } catch (...) {
    status = report_exception(app, args);
  }
  return finish_standard_output(status);
}
