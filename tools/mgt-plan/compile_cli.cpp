// `mgt-plan compile MODEL --gpus N --plan P [--out F] [--text]` (compile_command.hpp).
#include "subcommand.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_compile_cli(CLI::App& app) {
  struct Flags {
    PlanFlags plan;
    std::string plan_text, out = "-";
    bool text = false;
  };
  auto f = std::make_shared<Flags>();
  auto* compile = app.add_subcommand("compile", "the schedule every rank class runs (mgt.schedule/1)");
  add_plan_flags(*compile, f->plan, /*required=*/true);
  compile->add_option("--plan", f->plan_text, "plan as inline JSON or a mgt.plan/1 file")->required();
  compile->add_option("--out", f->out, "output file (default - = stdout)");
  compile->add_flag("--text", f->text, "write the human-readable text form instead of JSON");
  return {compile, [compile, f] {
            return run_compile(resolve_plan_flags(*compile, f->plan), f->plan_text, f->out, f->text);
          }};
}

}  // namespace mgt::cli
