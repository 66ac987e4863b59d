// `mgt-plan estimate MODEL --gpus N --plan P [--json | --emit FORMAT]`: one given plan estimated, no search.
#include "subcommand.hpp"

#include "mgt/ir/error.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_estimate_cli(CLI::App& app) {
  struct Flags {
    PlanFlags plan;
    std::string plan_text;
    std::string emit;
  };
  auto f = std::make_shared<Flags>();
  auto* estimate = app.add_subcommand("estimate", "estimate one given plan, no search");
  add_plan_flags(*estimate, f->plan, /*required=*/true);
  add_framework_flag(*estimate, f->plan);
  estimate->add_option("--plan", f->plan_text, "plan as inline JSON ('{\"dp_shard\":4,\"tp\":2}') or a mgt.plan/1 file")
      ->required();
  estimate->add_option("--emit", f->emit, "print this plan as a framework config (formats as for the search)");
  return {estimate, [estimate, f] {
            const PlanOptions o = resolve_plan_flags(*estimate, f->plan);
            if (o.json && estimate->get_option("--emit")->count() > 0)
              throw ir::InputError("--json", "", "cannot be combined with --emit: --json prints the estimate, --emit a "
                                   "framework config",
                                   "drop --json to get the config, or --emit to get the estimate as JSON");
            return run_estimate(o, f->plan_text, f->emit);
          }};
}

}  // namespace mgt::cli
