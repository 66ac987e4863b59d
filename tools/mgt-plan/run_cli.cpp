// `mgt-plan run`: its flags are registered by add_run_command (run_command.cpp); this adds the batch in
// tokens, --global-batch-tokens, as the planning commands take it, and converts it to the sequences
// run_training counts in (--global-batch).
#include "run_command.hpp"
#include "subcommand.hpp"

#include "mgt/ir/error.hpp"

#include <memory>

namespace mgt::cli {

namespace {
// --global-batch-tokens T -> --global-batch T / S: a multiple of --seq-len S, which must be given.
RunOptions with_batch_in_sequences(RunOptions o, const std::string& tokens_text) {
  check_one_batch_flag(true, o.given.count("--global-batch") > 0);
  if (o.given.count("--seq-len") == 0)
    throw ir::InputError("--global-batch-tokens", "", "needs --seq-len to count the sequences per step",
                         "give --seq-len S, or the batch in sequences with --global-batch G");
  if (o.seq_len < 1)
    throw ir::InputError("command line", "--seq-len", "must be >= 1, got " + std::to_string(o.seq_len));
  const int64_t tokens = parse_size(tokens_text, "--global-batch-tokens");
  if (tokens % o.seq_len != 0)
    throw ir::InputError("--global-batch-tokens", "",
                         std::to_string(tokens) + " tokens is not a whole number of " + std::to_string(o.seq_len) +
                             "-token sequences",
                         "use a multiple of --seq-len");
  o.global_batch = tokens / o.seq_len;
  o.given.insert("--global-batch");
  return o;
}
}  // namespace

Subcommand add_run_cli(CLI::App& app) {
  struct Flags {
    RunOptions options;
    std::string global_batch_tokens;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* run = add_run_command(app, f->options);
  run->add_option("--global-batch-tokens", f->global_batch_tokens,
                  "tokens per optimizer step, a multiple of --seq-len (K/M/G suffixes are powers of 2); instead of "
                  "--global-batch");
  return {run, [run, f] {
            if (run->get_option("--global-batch-tokens")->count() == 0) return run_training(f->options);
            return run_training(with_batch_in_sequences(f->options, f->global_batch_tokens));
          }};
}

}  // namespace mgt::cli
