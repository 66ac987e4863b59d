// `mgt-plan validate FILE... [--json]` (validate_command.hpp).
#include "subcommand.hpp"
#include "validate_command.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_validate_cli(CLI::App& app) {
  struct Flags {
    std::vector<std::string> files;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  auto* validate = app.add_subcommand(
      "validate", "predicted vs measured on published training runs (shared/validation format): per source "
                  "median and p90 error, the worst rows");
  validate->add_option("files", f->files, "validation JSON files")->required();
  validate->add_flag("--json", f->json, "print mgt.validation/1");
  return {validate, [f] { return run_validate(f->files, f->json); }};
}

}  // namespace mgt::cli
