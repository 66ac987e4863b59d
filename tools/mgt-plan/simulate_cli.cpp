// `mgt-plan simulate MODEL --gpus N --plan P [--trace F] [--svg F] [--json]` (simulate_command.hpp).
#include "subcommand.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_simulate_cli(CLI::App& app) {
  struct Flags {
    PlanFlags plan;
    std::string plan_text, trace_path, svg_path;
  };
  auto f = std::make_shared<Flags>();
  auto* simulate = app.add_subcommand("simulate", "one plan in detail: the compiled schedule simulated, step "
                                                  "breakdown, memory over time, Chrome trace and SVG");
  add_plan_flags(*simulate, f->plan, /*required=*/true);
  add_framework_flag(*simulate, f->plan);
  simulate->add_option("--plan", f->plan_text, "plan as inline JSON or a mgt.plan/1 file")->required();
  simulate->add_option("--trace", f->trace_path, "write a Chrome-trace JSON (open in Perfetto)");
  simulate->add_option("--svg", f->svg_path, "write an SVG with the step breakdown and memory over time");
  return {simulate, [simulate, f] {
            return run_simulate(resolve_plan_flags(*simulate, f->plan), f->plan_text, f->trace_path, f->svg_path);
          }};
}

}  // namespace mgt::cli
