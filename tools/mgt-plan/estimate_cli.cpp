// `mgt-plan estimate MODEL --gpus N --plan P [--json]`: one given plan estimated, no search.
#include "subcommand.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_estimate_cli(CLI::App& app) {
  struct Flags {
    PlanFlags plan;
    std::string plan_text;
  };
  auto f = std::make_shared<Flags>();
  auto* estimate = app.add_subcommand("estimate", "estimate one given plan, no search");
  add_plan_flags(*estimate, f->plan, /*required=*/true);
  estimate->add_option("--plan", f->plan_text, "plan as inline JSON ('{\"dp_shard\":4,\"tp\":2}') or a mgt.plan/1 file")
      ->required();
  return {estimate, [estimate, f] { return run_estimate(resolve_plan_flags(*estimate, f->plan), f->plan_text); }};
}

}  // namespace mgt::cli
