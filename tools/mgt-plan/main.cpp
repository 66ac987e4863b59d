// mgt-plan: the command line. Thin: each subcommand registers its flags and handler (*_cli.cpp);
// main builds the App, registers them, parses and dispatches; errors become exit statuses in
// cli_errors.cpp, and so does a standard output that could not be written.
#include "subcommand.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/input_limits.hpp"
#include "mgt/runtime/cuda/device.hpp"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace mgt::cli {

void configure_app(CLI::App& app) {
  app.footer(R"(
MFU counts model FLOPs = 6 x (parameters that take part in matmuls, active experts only) x tokens
plus causal attention (fwd + bwd = 3 x 2 x b x s x s/2 x heads x (d_qk + d_v) per layer; per document
of --document-tokens when packed), divided by step time x GPUs x dense bf16 peak. Recompute FLOPs are
not model FLOPs.
Exit status: 0 done, 1 no valid plan, 2 bad input. Docs: README.md, docs/planner.md, docs/cost-model.md.)");
  app.require_subcommand(0, 1);
  app.fallthrough(false);
  app.set_version_flag("--version", [] {
    return std::string("mgt-plan " MGT_VERSION "\nbackends: ") + rt::cuda::backends_description();
  }, "print the version and the backends compiled in (cpu; cuda+nccl when built with CUDA)");
}

namespace {

void add_input_limit_flag(CLI::App& app, std::optional<std::string>& mib) {
  app.add_option("--max-input-mib", mib,
                 "largest input file (model, plan, cluster, validation, MLIR) read, in MiB: default 64, at most " +
                     std::to_string(ir::kMaxInputMib) + "; the environment's MGT_MAX_INPUT_BYTES=<bytes> does the same");
}

// The library reads the limit from MGT_MAX_INPUT_BYTES (ir::max_input_bytes); the flag sets it for
// this process, before any file is read.
void apply_input_limit_flag(const std::optional<std::string>& given) {
  if (!given) return;
  const std::string& mib = *given;
  const std::string hint = "give a whole number of MiB from 1 to " + std::to_string(ir::kMaxInputMib) + ", e.g. --max-input-mib 256";
  if (mib.empty() || mib.size() > 7 || mib.find_first_not_of("0123456789") != std::string::npos)
    throw ir::InputError("--max-input-mib", "", "expected a whole number of MiB, got \"" + mib + "\"", hint);
  const int64_t value = std::stoll(mib);
  if (value < 1 || value > ir::kMaxInputMib)
    throw ir::InputError("--max-input-mib", "", "must be in [1, " + std::to_string(ir::kMaxInputMib) + "], got " + mib, hint);
  ::setenv("MGT_MAX_INPUT_BYTES", std::to_string(value << 20).c_str(), 1);
}

}  // namespace

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
  // Every command reads files: the limit flag is the top-level App's (the search's) and each subcommand's.
  std::optional<std::string> max_input_mib;
  add_input_limit_flag(app, max_input_mib);
  for (const Subcommand& s : subcommands) add_input_limit_flag(*s.app, max_input_mib);
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  int status = 0;
  try {
    check_subcommand_spelling(app, args);
    app.parse(argc, argv);
    apply_input_limit_flag(max_input_mib);
    status = dispatch(subcommands, search);
  } catch (...) {
    status = report_exception(app, args);
  }
  return finish_standard_output(status);
}
