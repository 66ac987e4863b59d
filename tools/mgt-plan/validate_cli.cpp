// `mgt-plan validate FILE... [--json] [--cv [--cv-rounds N] [--cv-start shipped|prior]]` (validate_command.hpp).
#include "subcommand.hpp"
#include "validate_command.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_validate_cli(CLI::App& app) {
  struct Flags {
    std::vector<std::string> files;
    bool json = false;
    bool cv = false;
    int cv_rounds = 8;
    std::string cv_start = "prior";  // the honest score: no fold starts from values the left-out source helped fit
  };
  auto f = std::make_shared<Flags>();
  auto* validate = app.add_subcommand(
      "validate", "predicted vs measured on published training runs (shared/validation format): per source "
                  "median and p90 error, the worst rows");
  validate->add_option("files", f->files, "validation JSON files")->required();
  validate->add_flag("--json", f->json, "print mgt.validation/1 (with --cv: mgt.validation_cv/1)");
  auto* cv = validate->add_flag("--cv", f->cv,
                     "leave-one-source-out: refit the fitted constants without each source and predict it; per source "
                     "and pooled, in-sample vs out-of-sample, and the rank order per model and GPU");
  validate->add_option("--cv-rounds", f->cv_rounds, "at most this many coordinate-descent rounds per fit (with --cv)")
      ->check(CLI::Range(1, 100))
      ->needs(cv);
  validate->add_option("--cv-start", f->cv_start,
                       "where every fit starts (with --cv): prior (default: the FrameworkProfile and CostParams "
                       "initialisers, before any fit) or shipped (the fitted profiles, which saw every source)")
      ->check(CLI::IsMember({"shipped", "prior"}))
      ->needs(cv);
  return {validate, [f] { return run_validate(f->files, f->json, f->cv, f->cv_rounds, f->cv_start); }};
}

}  // namespace mgt::cli
