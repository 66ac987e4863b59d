// The default command, `mgt-plan MODEL --gpus N [--top K] [--emit FORMAT] [--json]`: the ranked plans
// (commands.cpp), or for role-less models (.mlir, graphs imported from MLIR) the role-less search.
#include "mlir_command.hpp"
#include "subcommand.hpp"

#include "mgt/ir/error.hpp"

#include <memory>

namespace mgt::cli {

namespace {
struct SearchFlags {
  PlanFlags plan;
  int64_t top = 5;
  std::string emit;
  std::vector<std::string> params;
};

int run_search_cli(const CLI::App& app, const SearchFlags& f) {
  const PlanOptions o = resolve_plan_flags(app, f.plan);
  if (o.model_path.empty()) throw CLI::RequiredError("model");
  if (app.get_option("--gpus")->count() == 0) throw CLI::RequiredError("--gpus");
  if (o.json && app.get_option("--emit")->count() > 0)
    throw ir::InputError("--json", "", "cannot be combined with --emit: --json prints mgt.plans/1, --emit a framework "
                                       "config, both on stdout",
                         "drop --json to get the config, or --emit to get the plans as JSON");
  if (is_roleless_model(o.model_path)) {
    // The role-less search has no sequence, batch or framework export: such flags are errors, not ignored.
    for (const char* flag : {"--seq-len", "--global-batch-tokens", "--global-batch", "--precision", "--emit",
                             "--allow-cross-node-tp", "--framework", "--task", "--lora-rank", "--lora-targets"})
      if (app.get_option(flag)->count() > 0)
        throw ir::InputError(flag, "", "does not apply to role-less models (.mlir or graphs imported from MLIR)",
                             "drop it; the sizes come from the model's tensors (docs/mlir.md)");
    return run_roleless_search(o.model_path, f.params, o.gpus, o.cluster, f.top, o.json);
  }
  return run_search(o, f.top, f.emit);
}
}  // namespace

Subcommand add_search_cli(CLI::App& app) {
  auto f = std::make_shared<SearchFlags>();
  add_plan_flags(app, f->plan, /*required=*/false);  // checked in the handler: subcommands need neither
  add_framework_flag(app, f->plan);
  app.add_option("--top", f->top, "plans to show (default 5)");
  app.add_option("--emit", f->emit, "print the top plan as a framework config instead of the table: "
                                    "accelerate, axolotl, torchtitan, megatron, deepspeed, torchtitan@0.2");
  app.add_option("--params", f->params, "for .mlir models: arguments that are parameters (as for import)")
      ->delimiter(',');
  return {&app, [&app, f] { return run_search_cli(app, *f); }};
}

}  // namespace mgt::cli
