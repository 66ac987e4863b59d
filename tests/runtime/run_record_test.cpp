// mgt.run/1 (runtime/include/mgt/runtime/trainer.hpp, RunRecord): a hand-written record read field by
// field and written back; bad records naming the field. The round trip of a record a real save wrote
// is in trainer_test.cpp (SaveThenResumeContinuesBitForBit).
#include "mgt/runtime/trainer.hpp"

#include "../common/format_checks.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using mgt::test::expect_each_error_names_the_field, mgt::test::expect_written_back_with_plan_resolved;
using json = nlohmann::json;

const char* const kHandWritten = R"({
  "format": "mgt.run/1", "model": "tiny", "model_path": "config.json", "parameters": 1234, "step": 3,
  "seq_len": 16, "global_batch": 4, "tokens_seen": 192, "data": "tokens.bin", "data_dtype": "uint32",
  "seed": 7, "adamw": {"lr": 0.001, "beta1": 0.9, "beta2": 0.95, "eps": 1e-08, "weight_decay": 0.1},
  "grad_clip": 1.0, "plan": {"dp_shard": 2, "tp": 2, "grad_accum": 2},
  "data_size_bytes": 4096, "data_checksum": "mix64:00ff",
  "architecture": {"hidden_size": 64.0, "rope_theta": 10000.0}
})";

TEST(RunRecord, HandWrittenRecordReadsFieldByField) {
  const mgt::rt::RunRecord r = mgt::rt::run_record_from_json(json::parse(kHandWritten), "run.json");
  EXPECT_EQ(r.model, "tiny");
  EXPECT_EQ(r.model_path, "config.json");
  EXPECT_EQ(r.parameters, 1234);
  EXPECT_EQ(r.step, std::optional<int64_t>(3));
  EXPECT_EQ(r.seq_len, 16);
  EXPECT_EQ(r.global_batch, 4);
  EXPECT_EQ(r.data, "tokens.bin");
  EXPECT_EQ(r.data_dtype, "uint32");
  EXPECT_EQ(r.seed, 7u);
  EXPECT_EQ(r.adamw.lr, 0.001);
  EXPECT_EQ(r.adamw.beta2, 0.95);
  EXPECT_EQ(r.adamw.weight_decay, 0.1);
  EXPECT_EQ(r.grad_clip, 1.0);
  EXPECT_EQ(r.plan.dp_shard, 2);
  EXPECT_EQ(r.plan.tp, 2);
  EXPECT_EQ(r.data_size_bytes, 4096);
  EXPECT_EQ(r.data_checksum, "mix64:00ff");
  EXPECT_EQ(r.architecture.at("rope_theta"), 10000.0);
  expect_written_back_with_plan_resolved(kHandWritten, r);
}

TEST(RunRecord, BadRecordsNameTheField) {
  expect_each_error_names_the_field(kHandWritten, mgt::rt::run_record_from_json, {
      {"global_batch", [](json& doc) { doc.erase("global_batch"); }},
      {"adamw.eps", [](json& doc) { doc["adamw"].erase("eps"); }},
      {"seed", [](json& doc) { doc["seed"] = -1; }},
      // not step x global_batch x seq_len
      {"tokens_seen", [](json& doc) { doc["tokens_seen"] = 100; }},
      {"tp", [](json& doc) { doc["plan"]["tp"] = 0; }},
  });
}

}  // namespace
