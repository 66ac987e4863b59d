// The subcommands of mgt-plan as main() sees them: each registers its own flags on the App and returns
// the handler to run when it was chosen (one *_cli.cpp per subcommand). main() only builds the App,
// registers them, parses and dispatches.
#pragma once

#include "commands.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace mgt::cli {

/// A registered subcommand: `app` is the CLI11 subcommand (the top-level App for the default search);
/// `run` returns the exit status, or throws (ir::InputError, CLI::ParseError) for main's handler.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// The top-level description, footer, version flag and subcommand rules.
void configure_app(CLI::App& app);

// One registration per subcommand, in the order `mgt-plan --help` lists them.
Subcommand add_search_cli(CLI::App& app);  ///< the default command: `mgt-plan MODEL --gpus N`
Subcommand add_inspect_cli(CLI::App& app);
Subcommand add_estimate_cli(CLI::App& app);
Subcommand add_simulate_cli(CLI::App& app);
Subcommand add_compile_cli(CLI::App& app);
Subcommand add_probe_cli(CLI::App& app);
Subcommand add_run_cli(CLI::App& app);
Subcommand add_validate_cli(CLI::App& app);
Subcommand add_import_cli(CLI::App& app);
Subcommand add_export_mlir_cli(CLI::App& app);

/// Flag values as typed; converted and validated after parsing so errors name the flag and the fix.
struct PlanFlags {
  PlanOptions options;
  std::string gpus, seq_len, global_batch_tokens, global_batch, document_tokens;
};

/// The model positional and the flags every planning command takes (--gpus, --cluster, --seq-len,
/// --global-batch-tokens, --global-batch, --precision, --json, --allow-cross-node-tp), bound to `flags`.
/// `required`: the model and --gpus are required by the parser (false for the top-level search, which
/// checks them itself so that a subcommand needs neither).
void add_plan_flags(CLI::App& app, PlanFlags& flags, bool required);
/// --framework NAME (the search, estimate and simulate; docs/cost-model.md §9).
void add_framework_flag(CLI::App& app, PlanFlags& flags);

/// The options as given: a flag given (even as "") is a value to validate, never the default.
/// Throws ir::InputError when both --global-batch-tokens and --global-batch are given.
PlanOptions resolve_plan_flags(const CLI::App& app, const PlanFlags& flags);

/// Throws ir::InputError naming both flags when the batch is given both in tokens and in sequences.
void check_one_batch_flag(bool tokens_given, bool sequences_given);

/// Runs the chosen subcommand (after a successful parse): the first parsed one in `subcommands`, else
/// `fallback` (the search).
int dispatch(const std::vector<Subcommand>& subcommands, const Subcommand& fallback);

/// Rethrows the exception in flight and turns it into the exit status, printing one line on stderr:
/// 0 help / version, 1 a feature not built in, 2 bad input (with "did you mean" for a mistyped flag),
/// 3 internal error. `args` are argv[1..].
int report_exception(const CLI::App& app, const std::vector<std::string>& args);

/// Flushes standard output (C stdio and std::cout) and checks that every write to it succeeded: a
/// full disk, a closed descriptor or /dev/full must not look like a finished command with an empty
/// file. Returns `status`, or, after printing "mgt-plan: cannot write to standard output: <reason>"
/// on stderr, `status` when non-zero and 2 otherwise. Called once, at the end of main.
int finish_standard_output(int status);

/// Throws CLI::ParseError "unknown subcommand X: did you mean Y?" when the first argument is no
/// subcommand, no existing file and within two edits of a subcommand's name (`inspec`).
void check_subcommand_spelling(const CLI::App& app, const std::vector<std::string>& args);

/// Levenshtein distance (insertions, deletions, substitutions), for the suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace mgt::cli
