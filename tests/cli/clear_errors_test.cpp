// Issue 18 item 18: inputs that were accepted silently or refused with an unclear message now get one
// error naming the file or flag, the field and the fix (docs/hardening.md "Inputs: bounded work").
#include "cli_util.hpp"

#include <algorithm>
#include <cctype>
#include <tuple>

namespace mgt_cli_test {
namespace {

constexpr const char* kTinyLlama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
  "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
  "vocab_size":512,"max_position_embeddings":128,"tie_word_embeddings":false,"hidden_act":"silu"})";
constexpr const char* kPlan8 = R"({"dp_shard":8})";

std::string llama_with(const TempDir& dir, const std::string& key, const json& value) {
  json config = llama_config();
  config[key] = value;
  return dir.write("config-" + key + ".json", config.dump(2));
}

TEST(CliClearErrors, HugeSizesNameTheFileAndTheConfigField) {
  // They used to surface as "model: field 'out': the tensor holds more than 2^44 elements".
  TempDir dir;
  for (const auto& [field, value] : std::vector<std::pair<std::string, int64_t>>{{"hidden_size", int64_t{1} << 31},
                                                                                 {"intermediate_size", int64_t{1} << 35},
                                                                                 {"vocab_size", int64_t{1} << 33},
                                                                                 {"head_dim", int64_t{1} << 32}}) {
    const std::string model = llama_with(dir, field, value);
    expect_bad_input({model, "--gpus", "8"}, {model, "field '" + field + "'", std::to_string(value), "16777216"});
  }
}

TEST(CliClearErrors, DuplicateJsonKeysAreRefusedNamingTheKey) {
  TempDir dir;
  const std::string text = llama_config().dump();
  const std::string model = dir.write("dup.json", text.substr(0, text.size() - 1) + R"(,"hidden_size":8192})");
  expect_bad_input({model, "--gpus", "8"}, {model, "field 'hidden_size'", "appears twice"});
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8,"dp_shard":4})"},
                   {"--plan", "field 'dp_shard'", "appears twice"});
}

TEST(CliClearErrors, UnknownActivationNamesTheFieldAndTheAcceptedValues) {
  TempDir dir;
  const std::string model = llama_with(dir, "hidden_act", "banana");
  expect_bad_input({model, "--gpus", "8"}, {model, "field 'hidden_act'", "\"banana\"", "silu, swish"});
  const std::string number = llama_with(dir, "hidden_act", 3);
  expect_bad_input({number, "--gpus", "8"}, {number, "field 'hidden_act'", "expected a string"});
  // What the family computes is accepted under its other spelling.
  const Result swish = run_cli({"estimate", llama_with(dir, "hidden_act", "swish"), "--gpus", "8", "--plan", kPlan8});
  EXPECT_EQ(swish.exit_code, 0) << describe(swish);
}

TEST(CliClearErrors, PlanThatIsJsonButNotAnObjectSaysSo) {
  for (const char* plan : {"[8]", "null", "8"})
    expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", plan}, {"--plan", "is JSON but not an object"});
}

TEST(CliClearErrors, EmptyPrecisionIsRefused) {
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan", kPlan8, "--precision", ""}, {"--precision", "is empty"});
}

TEST(CliClearErrors, RecomputeLayersBeyondAChunkAreRefused) {
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan",
                    R"({"dp_shard":8,"recompute":"full","recompute_layers":100})"},
                   {"recompute_layers", "100", "holds 32"});
  expect_bad_input({"estimate", kLlama8B, "--gpus", "8", "--plan",
                    R"({"dp_shard":4,"pp":2,"recompute":"full","recompute_layers":17})"},
                   {"recompute_layers", "17", "holds 16"});
  const Result ok = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan",
                             R"({"dp_shard":4,"pp":2,"recompute":"full","recompute_layers":16})"});
  EXPECT_NE(ok.exit_code, 2) << describe(ok);
}

TEST(CliClearErrors, CommTimeoutBeyondTheClockSaysWhyOnOneRankToo) {
  TempDir dir;
  const std::string model = dir.write("config.json", kTinyLlama);
  for (const char* timeout : {"1e10", "1e308"})
    expect_bad_input({"run", model, "--seq-len", "16", "--global-batch", "2", "--steps", "1", "--comm-timeout", timeout},
                     {"--comm-timeout", "[0, 1e9]", "overflows"});
}

TEST(CliClearErrors, TokenDataThatIsNotARegularFileIsNamed) {
  TempDir dir;
  const std::string model = dir.write("config.json", kTinyLlama);
  expect_bad_input({"run", model, "--seq-len", "16", "--global-batch", "2", "--steps", "1", "--data", "/dev/zero"},
                   {"/dev/zero", "--data", "not a regular file"});
}

TEST(CliClearErrors, ModelStateThatCannotBeAllocatedIsTheOutOfMemoryError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "an address-space limit and AddressSanitizer's shadow memory do not mix";
#endif
  // Llama-3.1-8B's fp32 weights, gradients and AdamW moments: 8,030,261,248 x 16 bytes = 119 GiB,
  // more than the 8 GiB of address space this run gets.
  const Result r = run_cli({"run", kLlama8B, "--seq-len", "16", "--global-batch", "1", "--steps", "1"},
                           {"prlimit", "--as=8589934592"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_FALSE(contains(r.err, "internal error")) << describe(r);
  EXPECT_TRUE(contains(r.err, "out of memory allocating the model state: 8030261248 parameters")) << describe(r);
  EXPECT_TRUE(contains(r.err, "119 GiB")) << describe(r);
}

TEST(CliClearErrors, DuplicateJsonKeysInClusterAndValidationFilesAreRefusedNamingTheKey) {
  TempDir dir;
  // Appended at the end of the top-level object, and inside a nested one (the cluster's "gpu", a row's "model").
  const auto with_duplicate = [](const std::string& text, const std::string& after, const std::string& insert) {
    const size_t at = text.find(after);
    EXPECT_NE(at, std::string::npos) << after;
    return text.substr(0, at + after.size()) + insert + text.substr(at + after.size());
  };
  const std::string cluster = slurp(fs::path(MGT_SOURCE_DIR) / "examples/clusters/h100-sxm.json");
  const std::string rows = slurp(fs::path(MGT_SOURCE_DIR) / "examples/validation/bloom_176b_bigscience.json");
  for (const auto& [name, text, key] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"cluster-top.json", with_duplicate(cluster, "{", R"("gpus_per_node": 4, )"), "gpus_per_node"},
           {"cluster-gpu.json", with_duplicate(cluster, R"("gpu": {)", R"("hbm_bytes": 1, )"), "hbm_bytes"}}) {
    const std::string path = dir.write(name, text);
    expect_bad_input({kLlama8B, "--gpus", "8", "--cluster", path}, {path, "field '" + key + "'", "appears twice"});
  }
  for (const auto& [name, text, key] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"rows-top.json", with_duplicate(rows, "{", R"("source": "again", )"), "source"},
           {"rows-model.json", with_duplicate(rows, R"("model": {)", R"("num_layers": 72, )"), "num_layers"}}) {
    const std::string path = dir.write(name, text);
    expect_bad_input({"validate", path}, {path, "field '" + key + "'", "appears twice"});
  }
}

TEST(CliClearErrors, SubnormalMeasuredValuesLeaveNoNanInTheValidateSummary) {
  // 1e-308 and 5e-324 (the smallest double) as measured times: the summary read "-nan %".
  TempDir dir;
  json rows = json::parse(slurp(fs::path(MGT_SOURCE_DIR) / "examples/validation/bloom_176b_bigscience.json"));
  rows["rows"][0]["measured"]["iteration_time_s"] = 1e-308;
  rows["rows"][1]["measured"]["iteration_time_s"] = 5e-324;
  const std::string path = dir.write("subnormal.json", rows.dump());
  ASSERT_TRUE(contains(slurp(path), "5e-324"));
  const Result r = run_cli({"validate", path});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  std::string text = r.out + r.err;
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  EXPECT_FALSE(contains(text, "nan")) << describe(r);
  EXPECT_FALSE(contains(text, "inf ")) << describe(r);
  EXPECT_TRUE(contains(r.out, "measured.iteration_time_s 1e-308 is not a normal positive number")) << describe(r);
  EXPECT_TRUE(contains(r.out, "measured.iteration_time_s 4.94066e-324 is not a normal positive number")) << describe(r);
  const Result j = run_cli({"validate", path, "--json"});
  EXPECT_EQ(j.exit_code, 0) << describe(j);
  // nlohmann writes a NaN as null: the summary has none (rows have null for what they do not state).
  const json doc = parse_json_or_fail(j);
  ASSERT_TRUE(doc.is_object());
  const json& summary = doc.at("summary");
  EXPECT_FALSE(contains(summary.dump(), "null")) << summary.dump(2);
  EXPECT_EQ(summary.at("overall").at("rows").get<size_t>(), rows["rows"].size());
  EXPECT_EQ(summary.at("overall").at("rows_skipped").get<int64_t>(), 2);
  EXPECT_GT(summary.at("overall").at("throughput").at("median_abs_pct").get<double>(), 0.0);
}

}  // namespace
}  // namespace mgt_cli_test
