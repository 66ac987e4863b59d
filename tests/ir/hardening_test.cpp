// Hostile input to the mgt_ir readers (issue 8, part 3): JSON numbers beyond the double range (JSON's
// only way to spell inf), nesting deep enough to overflow the stack of whoever prints or copies the
// value, and sizes whose products overflow int64. Each must be an InputError naming the file and,
// where there is one, the field; never another exception or a crash.
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/ir/schedule.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace mgt::ir {
namespace {

using nlohmann::json;

/// Runs `f`, expects an InputError whose message holds every one of `parts`.
template <typename F>
void expect_input_error(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << p << " not in: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an InputError: " << e.what();
  }
}

std::string nested(int64_t depth, const std::string& inner = "1") {
  return std::string(static_cast<size_t>(depth), '[') + inner + std::string(static_cast<size_t>(depth), ']');
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const char* const kTinyLlama = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100})";

TEST(HostileJson, NumberBeyondDoubleRangeIsAnInputErrorNamingTheSource) {
  // nlohmann reports 1e999 as out_of_range, not parse_error; it must still be an InputError.
  expect_input_error([] { parse_json_text(R"({"hidden_size": 1e999})", "big.json"); }, {"big.json", "1e999", "finite"});
  expect_input_error([] { parse_json_text(R"([-1e400])", "neg.json"); }, {"neg.json"});
  // Through every reader's entry point.
  const std::string config = write_file("inf.json", R"({"model_type": "llama", "hidden_size": 1e999})");
  expect_input_error([&] { load_model(config); }, {"inf.json"});
  expect_input_error([] { parse_plan_argument(R"({"tp": 1e999})"); }, {"--plan"});
  const std::string cluster = write_file("inf-cluster.json", R"({"format": "mgt.cluster/1", "gpu": {"hbm_bytes": 1e999}})");
  expect_input_error([&] { load_cluster(cluster); }, {"inf-cluster.json"});
}

TEST(HostileJson, FiniteFloatWhereAnIntegerBelongsIsRejected) {
  json c = json::parse(kTinyLlama);
  c["hidden_size"] = 1.5e300;
  expect_input_error([&] { graph_from_hf_config(c, "float.json"); }, {"float.json", "hidden_size", "integer"});
}

TEST(HostileJson, DeepNestingIsRejectedBeforeAnythingRecursesIntoIt) {
  // Printing this value in an error message (or copying it) recursed once per level and overflowed
  // the stack: a crash instead of an error.
  const std::string deep = nested(1'000'000);
  expect_input_error([&] { parse_json_text(deep, "deep.json"); }, {"deep.json", "nested deeper than 256", "line 1, column 257"});
  expect_input_error([&] { parse_plan_argument("{\"tp\": " + deep + "}"); }, {"--plan", "nested"});
  expect_input_error([&] { load_model(write_file("deep-model.json", "{\"hidden_size\": " + deep + "}")); },
                     {"deep-model.json", "nested"});
  // Brackets inside strings do not count; ordinary depth is accepted.
  EXPECT_NO_THROW(parse_json_text("{\"a\": \"" + std::string(1000, '[') + "\"}", "strings.json"));
  EXPECT_NO_THROW(parse_json_text(nested(kMaxJsonDepth), "ok.json"));
  expect_input_error([&] { parse_json_text(nested(kMaxJsonDepth + 1), "one-more.json"); }, {"one-more.json"});
}

TEST(HostileSizes, HiddenAndVocabOf2To40OverflowWithTheFieldNamed) {
  json c = json::parse(kTinyLlama);
  c["hidden_size"] = int64_t{1} << 40;
  c["num_attention_heads"] = 1;
  c["num_key_value_heads"] = 1;
  // h x h of the attention projections would be 2^80 elements; the dimension bound (2^24) names the
  // field first.
  expect_input_error([&] { verify(graph_from_hf_config(c, "h.json"), "h.json"); }, {"h.json", "hidden_size", "16777216"});
  json v = json::parse(kTinyLlama);
  v["vocab_size"] = int64_t{1} << 40;
  v["hidden_size"] = int64_t{1} << 24;
  v["num_attention_heads"] = 1;
  v["num_key_value_heads"] = 1;
  v["intermediate_size"] = 1;
  expect_input_error([&] { verify(graph_from_hf_config(v, "v.json"), "v.json"); }, {"v.json", "overflows"});
}

TEST(HostileSizes, ZeroAndNegativeSizesNameTheField) {
  for (const char* field : {"hidden_size", "vocab_size", "num_hidden_layers", "intermediate_size", "num_attention_heads"}) {
    for (int64_t bad : {int64_t{0}, int64_t{-1}, INT64_MIN}) {
      json c = json::parse(kTinyLlama);
      c[field] = bad;
      expect_input_error([&] { graph_from_hf_config(c, "bad.json"); }, {"bad.json", field});
    }
  }
  // A value beyond int64 (an unsigned JSON integer).
  json c = json::parse(kTinyLlama);
  c["hidden_size"] = uint64_t{1} << 63;
  expect_input_error([&] { graph_from_hf_config(c, "u64.json"); }, {"u64.json", "hidden_size", "64-bit"});
}

TEST(HostileSizes, PlanSizesAreCheckedAndTheWorldSizeCannotOverflow) {
  expect_input_error([] { parse_plan_argument(R"({"tp": 0})"); }, {"--plan", "tp", "positive"});
  expect_input_error([] { parse_plan_argument(R"({"dp_shard": -8})"); }, {"--plan", "dp_shard"});
  // 10^9 GPUs is representable; 2^62 x 4 is not, and must not wrap around to a small world.
  const Plan plan = parse_plan_argument(R"({"dp_replicate": 1000000000})");
  EXPECT_EQ(world_size(plan), 1'000'000'000);
  // (2^62 + 2) x 4 wraps to 8: it used to pass as a plan for --gpus 8.
  expect_input_error([] { parse_plan_argument(R"({"dp_replicate": 4611686018427387906, "tp": 4})"); },
                     {"--plan", "overflows"});
  Plan wraps;
  wraps.dp_replicate = (int64_t{1} << 62) + 2;
  wraps.tp = 4;
  expect_input_error([&] { world_size(wraps); }, {"overflows"});
}

/// A graph whose one layer block normalises and adds back `x` [b, s, h]: three activations of h a
/// token and one parameter of h, repeated `layers` times.
json norm_stack(int64_t hidden, int64_t layers) {
  return json::parse(R"({"format": "mgt.graph/1", "name": "norms", "dims": {"h": )" + std::to_string(hidden) + R"(},
    "blocks": [{"name": "layer", "repeat": )" + std::to_string(layers) + R"(,
      "tensors": [{"name": "x", "dims": "bsh"}, {"name": "w", "dims": "h", "parameter": true},
                  {"name": "xn", "dims": "bsh"}, {"name": "out", "dims": "bsh"}],
      "ops": [{"name": "norm", "kind": "norm", "inputs": ["x", "w"], "output": "xn", "norm": "rms"},
              {"name": "add", "kind": "residual", "inputs": ["x", "xn"], "output": "out"}]}]})");
}

TEST(HostileSizes, ActivationsOfOneTokenBeyondTwoTo40BytesNameTheDims) {
  // 2^24 x 65,536 = 2^40 parameters (under 2^50), but 3 x 2^24 x 65,536 activations x 4 bytes =
  // 3 x 2^42 bytes a token: times the tokens of a micro-batch, the byte counts would wrap.
  const Graph big = graph_from_json(norm_stack(int64_t{1} << 24, 65536), "norms.json");
  expect_input_error([&] { verify(big, "norms.json"); },
                     {"norms.json", "field 'dims.h'", std::to_string(int64_t{3} << 42) + " bytes", "2^40 = 1099511627776",
                      "layer.x [h 16777216], in a block repeated 65536 times"});
  // 4,096 layers: 3 x 2^38 bytes a token, within the bound.
  EXPECT_NO_THROW(verify(graph_from_json(norm_stack(int64_t{1} << 24, 4096), "norms.json"), "norms.json"));
}

TEST(HostileSizes, ParametersBeyondTwoTo50NameTheConfigFields) {
  json c = json::parse(kTinyLlama);
  c["hidden_size"] = int64_t{1} << 20;
  c["intermediate_size"] = int64_t{1} << 21;
  c["num_hidden_layers"] = 65536;
  // Through load_model as through a graph built for a validation row.
  const std::string path = write_file("huge-llama.json", c.dump());
  expect_input_error([&] { load_model(path); },
                     {path, "field 'hidden_size, intermediate_size'", "more than 2^50", "in a block repeated 65536 times"});
}

}  // namespace
}  // namespace mgt::ir
