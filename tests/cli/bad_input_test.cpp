// Bad input to the CLI: every test asserts through expect_bad_input (cli_util.hpp: exit 2, one
// "mgt-plan: " line naming the given words, nothing on stdout, no internal error).
// End-to-end tests of mgt-plan on bad input (README.md "Use"): every class of bad model, plan, cluster,
// size or flag exits 2 with one stderr line naming the file or flag, the field and the fix.
#include "cli_util.hpp"

namespace {

using namespace mgt_cli_test;
namespace fs = std::filesystem;
using nlohmann::json;

// ------------------------------------------------------------------------------------------------
// (6) bad input: exit 2 and exactly one stderr line naming the source and the field

TEST(CliBadInput, MalformedModelJson) {
  TempDir dir;
  const std::string path = dir.write("broken.json", "{\"architectures\": [\n");
  expect_bad_input({path, "--gpus", "8"}, {path, "malformed JSON", "line"});
  expect_bad_input({"inspect", path}, {path, "malformed JSON"});
  expect_bad_input({"estimate", path, "--gpus", "8", "--plan", R"({"dp_shard":8})"}, {path});
}

TEST(CliBadInput, MissingModelFile) {
  expect_bad_input({"examples/models/no-such-model.json", "--gpus", "8"}, {"no-such-model.json"});
}

TEST(CliBadInput, UnknownArchitecture) {
  TempDir dir;
  json config = llama_config();
  config["architectures"] = {"FooForCausalLM"};
  config["model_type"] = "foo";
  const std::string path = dir.write("foo.json", config.dump());
  expect_bad_input({path, "--gpus", "8"}, {path, "model_type", "foo", "llama"});
}

TEST(CliBadInput, MissingHiddenSize) {
  TempDir dir;
  json config = llama_config();
  config.erase("hidden_size");
  const std::string path = dir.write("nohidden.json", config.dump());
  expect_bad_input({path, "--gpus", "8"}, {path, "hidden_size", "missing"});
  expect_bad_input({"inspect", path, "--json"}, {path, "hidden_size"});
}

TEST(CliBadInput, NonPositiveAttentionHeads) {
  TempDir dir;
  for (int heads : {0, -4}) {
    json config = llama_config();
    config["num_attention_heads"] = heads;
    const std::string path = dir.write("heads" + std::to_string(heads) + ".json", config.dump());
    expect_bad_input({path, "--gpus", "8"}, {path, "num_attention_heads", std::to_string(heads)});
  }
}

TEST(CliBadInput, NonPositiveGpus) {
  expect_bad_input({kLlama8B, "--gpus", "0"}, {"--gpus", "positive", "0"});
  expect_bad_input({kLlama8B, "--gpus", "-3"}, {"--gpus", "-3"});
  expect_bad_input({"estimate", kLlama8B, "--gpus", "0", "--plan", R"({"dp_shard":1})"}, {"--gpus"});
  expect_bad_input({kLlama8B, "--gpus", "eight"}, {"--gpus"});
}

TEST(CliBadInput, GpuCountThatOverflows) {
  // 99999999999999999999 does not fit in int64: a usage error, not an internal error.
  expect_bad_input({kLlama8B, "--gpus", "99999999999999999999"}, {"--gpus"});
}

TEST(CliBadInput, PlanProductNotGpuCount) {
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":3})"},
                   {"--plan", "dp_replicate*dp_shard*cp*tp*pp=3 must equal --gpus 8"});
}

TEST(CliBadInput, UnknownPlanKey) {
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8,"foo":1})"},
                   {"--plan", "foo", "unknown plan key"});
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8)"}, {"--plan"});
}

TEST(CliBadInput, PlanBreakingARule) {
  expect_bad_input({"estimate", kLlama8B, "--gpus", "16", "--plan", R"({"tp":16})"},
                   {"--plan", "tp=16 must divide num_key_value_heads=8"});
}

TEST(CliBadInput, UnknownClusterListsPresets) {
  expect_bad_input({kLlama8B, "--gpus", "8", "--cluster", "nope"},
                   {"nope", "--cluster", "h100-sxm", "a100-80g-sxm", "h200-sxm", "b200", "gb200-nvl72", "rtx4090-pcie"});
}

TEST(CliBadInput, BlockScaledPrecisionOnHopperNamesTheGpu) {
  for (const char* precision : {"mxfp8", "nvfp4"})
    expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8})", "--precision", precision},
                     {"--precision", precision, "H100", "supports fp32, bf16, fp16, fp8", "Blackwell"});
}

TEST(CliBadInput, TaskAndLoraFlags) {
  expect_bad_input({kLlama8B, "--gpus", "8", "--task", "dpo"}, {"--task", "dpo", "pretrain, sft, lora or qlora"});
  expect_bad_input({kLlama8B, "--gpus", "8", "--task", "lora", "--lora-rank", "0"}, {"--lora-rank", "0"});
  expect_bad_input({kLlama8B, "--gpus", "8", "--task", "lora", "--lora-targets", "wqkv"},
                   {"--lora-targets", "no contraction"});
  expect_bad_input({kLlama8B, "--gpus", "8", "--task", "lora", "--emit", "torchtitan"},
                   {"--emit torchtitan", "cannot express lora", "--emit axolotl"});
  expect_bad_input({"run", kLlama8B, "--seq-len", "16", "--global-batch", "1", "--steps", "1", "--task", "qlora"},
                   {"--task", "qlora", "not run"});
}

TEST(CliBadInput, MalformedClusterFile) {
  TempDir dir;
  const std::string path = dir.write("cluster.json", "{\"format\": \"mgt.cluster/1\", \n");
  expect_bad_input({kLlama8B, "--gpus", "8", "--cluster", path}, {path, "malformed JSON"});
}

TEST(CliBadInput, SeqLenAboveMaxPositionEmbeddings) {
  expect_bad_input({kLlama8B, "--gpus", "8", "--seq-len", "200000"},
                   {"--seq-len", "200000", "max_position_embeddings", "131072"});
}

TEST(CliBadInput, InspectSeqLenAboveMaxPositionEmbeddings) {
  // inspect validates --seq-len like the search and estimate do.
  expect_bad_input({"inspect", kLlama8B, "--seq-len", "200000"}, {"--seq-len", "200000", "max_position_embeddings"});
}

TEST(CliBadInput, GlobalBatchNotMultipleOfSeqLen) {
  expect_bad_input({kLlama8B, "--gpus", "8", "--global-batch-tokens", "10000"},
                   {"--global-batch-tokens", "10000", "8192"});
}

TEST(CliBadInput, BadSizeSuffix) {
  expect_bad_input({kLlama8B, "--gpus", "8", "--global-batch-tokens", "4X"}, {"--global-batch-tokens", "X"});
  expect_bad_input({kLlama8B, "--gpus", "8", "--seq-len", "4X"}, {"--seq-len", "X"});
  expect_bad_input({kLlama8B, "--gpus", "8", "--seq-len", "-8"}, {"--seq-len"});
  expect_bad_input({kLlama8B, "--gpus", "8", "--seq-len", "0"}, {"--seq-len", "positive"});
}

TEST(CliBadInput, EmptySizeValueIsNotTheDefault) {
  // An explicitly empty value (e.g. --seq-len "$UNSET") is bad input, not a silent default.
  expect_bad_input({kLlama8B, "--gpus", "8", "--seq-len", ""}, {"--seq-len"});
  expect_bad_input({kLlama8B, "--gpus", "8", "--global-batch-tokens", ""}, {"--global-batch-tokens"});
}

TEST(CliBadInput, HugeSizesOverflow) {
  expect_bad_input({kLlama8B, "--gpus", "8", "--global-batch-tokens", "99999999999999999999"},
                   {"--global-batch-tokens", "64 bits"});
  expect_bad_input({kLlama8B, "--gpus", "8", "--seq-len", "99999999999999999999"}, {"--seq-len", "64 bits"});
  expect_bad_input({kLlama8B, "--gpus", "8", "--global-batch-tokens", "9999999999999G"},
                   {"--global-batch-tokens", "64 bits"});
}

TEST(CliBadInput, UnknownEmitFormat) {
  expect_bad_input({kLlama8B, "--gpus", "8", "--emit", "foo"},
                   {"--emit", "foo", "accelerate", "axolotl", "torchtitan", "megatron", "deepspeed"});
}

TEST(CliBadInput, UnknownFlagAndMissingArguments) {
  expect_bad_input({kLlama8B, "--gpus", "8", "--no-such-flag"}, {"--no-such-flag"});
  expect_bad_input({kLlama8B}, {"--gpus"});
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8"}, {"--plan"});
}

}  // namespace
