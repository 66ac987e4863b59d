// End-to-end tests of how mgt-plan reads its command line (README.md "Use"): the batch size in tokens
// (--global-batch-tokens) or in sequences (--global-batch) for every command that takes one, never
// both; "did you mean" for a mistyped flag or subcommand; a directory or device given as a file named
// as such; --json with --emit refused. The binary runs with cwd = the repository root (cli_util.hpp).
#include "cli_util.hpp"

#include <sys/stat.h>

namespace {

using namespace mgt_cli_test;
namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kPlan8 = R"({"dp_shard":8})";
constexpr const char* kTinyLlama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
  "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
  "vocab_size":512,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000.0,
  "tie_word_embeddings":false,"hidden_act":"silu"})";

// ------------------------------------------------------------------------------------------------
// one batch dialect: --global-batch-tokens T (tokens) or --global-batch G (sequences of --seq-len)

TEST(CliBatchFlags, SequencesTimesSeqLenGiveTheSameSearchAsTokens) {
  // 256 sequences x 4096 tokens = 1,048,576 tokens = 1M (binary suffix).
  const Result seqs = run_cli({kLlama8B, "--gpus", "8", "--seq-len", "4096", "--global-batch", "256", "--json", "--top", "2"});
  const Result tokens =
      run_cli({kLlama8B, "--gpus", "8", "--seq-len", "4096", "--global-batch-tokens", "1M", "--json", "--top", "2"});
  ASSERT_EQ(seqs.exit_code, 0) << describe(seqs);
  ASSERT_EQ(tokens.exit_code, 0) << describe(tokens);
  const json doc = parse_json_or_fail(seqs);
  EXPECT_EQ(doc.at("settings").at("global_batch_tokens").get<int64_t>(), 1048576);
  EXPECT_EQ(doc.at("settings").at("global_batch_seqs").get<int64_t>(), 256);
  EXPECT_EQ(seqs.out, tokens.out);
}

TEST(CliBatchFlags, EstimateHeaderShowsTheGivenBatchNotTheDefault) {
  // At the default seq_len 8192 (Llama-3.1-8B), 64 sequences are 524,288 tokens.
  const Result r = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", kPlan8, "--global-batch", "64"});
  ASSERT_LE(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(contains(r.out, "global batch 524,288 tokens = 64 sequences\n")) << describe(r);
  const Result tokens = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", kPlan8, "--global-batch-tokens", "512K"});
  EXPECT_EQ(r.out, tokens.out);
}

TEST(CliBatchFlags, BothFlagsAreOneErrorNamingBoth) {
  const std::vector<std::string> both = {"--global-batch-tokens", "4M", "--global-batch", "512"};
  const auto with_both = [&both](std::vector<std::string> args) {
    args.insert(args.end(), both.begin(), both.end());
    return args;
  };
  const std::vector<std::string> names = {"--global-batch-tokens", "--global-batch", "cannot be combined"};
  expect_bad_input(with_both({kLlama8B, "--gpus", "8"}), names);
  for (const char* command : {"estimate", "simulate", "compile"})
    expect_bad_input(with_both({command, kLlama8B, "--gpus", "8", "--plan", kPlan8}), names);
  TempDir dir;
  const std::string tiny = dir.write("tiny.json", kTinyLlama);
  expect_bad_input({"run", tiny, "--seq-len", "32", "--steps", "1", "--global-batch", "4", "--global-batch-tokens", "128"},
                   names);
}

TEST(CliBatchFlags, RunTakesTheBatchInTokens) {
  // 128 tokens of 32-token sequences = 4 sequences: the same steps as --global-batch 4.
  TempDir dir;
  const std::string tiny = dir.write("tiny.json", kTinyLlama);
  const std::string log_tokens = (dir.path / "tokens.jsonl").string(), log_seqs = (dir.path / "seqs.jsonl").string();
  const Result tokens = run_cli({"run", tiny, "--seq-len", "32", "--global-batch-tokens", "128", "--steps", "2", "--log", log_tokens});
  const Result seqs = run_cli({"run", tiny, "--seq-len", "32", "--global-batch", "4", "--steps", "2", "--log", log_seqs});
  ASSERT_EQ(tokens.exit_code, 0) << describe(tokens);
  ASSERT_EQ(seqs.exit_code, 0) << describe(seqs);
  const auto a = lines_of(slurp(log_tokens)), b = lines_of(slurp(log_seqs));
  ASSERT_EQ(a.size(), 3u) << slurp(log_tokens);  // two steps and the summary
  ASSERT_EQ(b.size(), 3u) << slurp(log_seqs);
  for (size_t step = 0; step < 2; ++step) {
    const json x = json::parse(a[step]), y = json::parse(b[step]);
    EXPECT_EQ(x.at("tokens").get<int64_t>(), 128);
    EXPECT_EQ(x.at("loss").get<double>(), y.at("loss").get<double>()) << "step " << step;
  }
  expect_bad_input({"run", tiny, "--seq-len", "32", "--global-batch-tokens", "100", "--steps", "1"},
                   {"--global-batch-tokens", "100", "32-token", "multiple of --seq-len"});
  expect_bad_input({"run", tiny, "--global-batch-tokens", "128", "--steps", "1"}, {"--global-batch-tokens", "--seq-len"});
}

TEST(CliBatchFlags, RolelessModelsRejectTheBatchInSequences) {
  expect_bad_input({"examples/mlir/mlp.mlir", "--gpus", "8", "--global-batch", "8"},
                   {"--global-batch", "does not apply to role-less models"});
}

// ------------------------------------------------------------------------------------------------
// "did you mean": edit distance against the names registered with the parser

TEST(CliSuggestions, MistypedFlag) {
  expect_bad_input({kLlama8B, "--gpu", "8"}, {"unknown flag --gpu", "did you mean --gpus?"});
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plna", kPlan8},
                   {"unknown flag --plna", "did you mean --plan?", "mgt-plan estimate --help"});
  expect_bad_input({"inspect", kLlama8B, "--sq-len=4096"}, {"unknown flag --sq-len", "did you mean --seq-len?"});
  // Nothing close: CLI11's own message, unchanged.
  expect_bad_input({kLlama8B, "--gpus", "8", "--no-such-flag"}, {"not expected: --no-such-flag"});
}

TEST(CliSuggestions, MistypedSubcommand) {
  expect_bad_input({"inspec", kLlama8B}, {"unknown subcommand inspec", "did you mean inspect?"});
  expect_bad_input({"estimte", kLlama8B, "--gpus", "8", "--plan", kPlan8}, {"did you mean estimate?"});
  expect_bad_input({"export-mlr", "examples/mlir/mlp.mlir", "--gpus", "8"}, {"did you mean export-mlir?"});
  // Far from every subcommand: a model path that does not exist, named as before.
  expect_bad_input({"no-such-model.json", "--gpus", "8"}, {"no-such-model.json", "cannot open file"});
}

// ------------------------------------------------------------------------------------------------
// a directory or device where a JSON file is expected

TEST(CliFiles, DirectoryIsNamedAsSuch) {
  TempDir dir;
  const std::string folder = dir.path.string();
  const std::vector<std::string> words = {folder, "is a directory, not a file"};
  expect_bad_input({folder, "--gpus", "8"}, words);
  expect_bad_input({"inspect", folder}, words);
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", folder}, words);
  expect_bad_input({kLlama8B, "--gpus", "8", "--cluster", folder}, words);
  expect_bad_input({"validate", folder}, words);
  for (const auto& args : std::vector<std::vector<std::string>>{{folder, "--gpus", "8"}, {"inspect", folder}}) {
    const Result r = run_cli(args);
    EXPECT_FALSE(contains(r.err, "malformed JSON")) << describe(r);
  }
}

TEST(CliFiles, EmptyDeviceOrFifoIsNamedAsSuch) {
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", "/dev/null"},
                   {"/dev/null", "is a character device, not a regular file, and gave no data"});
  TempDir dir;
  const std::string fifo = (dir.path / "plan.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A FIFO with JSON in it is read (as `--plan <(...)` gives one): the writer closes after the plan.
  // `timeout`: a writer whose reader never comes does not outlive the test.
  const std::string plan = dir.write("plan.json", kPlan8);
  const std::string writer = "timeout 60 sh -c " + shell_quote("cat " + shell_quote(plan) + " > " + shell_quote(fifo)) + " &";
  ASSERT_EQ(std::system(writer.c_str()), 0);
  const Result r = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", fifo, "--json"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
}

// ------------------------------------------------------------------------------------------------
// --json and --emit both print on stdout: refused together, naming both

TEST(CliJsonEmit, TogetherAreAnErrorNamingBoth) {
  expect_bad_input({kLlama8B, "--gpus", "8", "--json", "--emit", "torchtitan"}, {"--json", "--emit", "cannot be combined"});
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", kPlan8, "--json", "--emit", "deepspeed"},
                   {"--json", "--emit", "cannot be combined"});
  const Result emit = run_cli({kLlama8B, "--gpus", "8", "--emit", "torchtitan"});
  EXPECT_EQ(emit.exit_code, 0) << describe(emit);
}

}  // namespace
