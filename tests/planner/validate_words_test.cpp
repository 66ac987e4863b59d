// How validate reads a row's recompute and ZeRO stage when the source writes them as words or
// booleans. Each expectation is the plan a reader of the phrase would write by hand.
#include "mgt/planner/validate.hpp"
#include "validation_rows.hpp"

#include <gtest/gtest.h>

#include <optional>

using mgt::ir::Recompute;
using mgt::test::llama_row;
using mgt::test::source_with;
using nlohmann::json;

namespace {

struct Read {
  Recompute recompute;
  std::optional<int64_t> layers;
  bool tuned;  ///< left to validate's search (recompute_choices)
};

Read read_recompute(const json& value) {
  json row = llama_row();  // 2 layers, pp 1
  row["recompute"] = value;
  const auto src = source_with({row});
  const auto s = mgt::plan::setup_row(src, src.rows[0]);
  return {s.plan.recompute, s.plan.recompute_layers, !s.recompute_choices.empty()};
}

}  // namespace

TEST(ValidationWords, RecomputeWordsAndBooleans) {
  for (const json& none : {json("none"), json("no"), json("off"), json("disabled"), json("No recompute"),
                           json("activation checkpointing disabled"), json(false)}) {
    SCOPED_TRACE(none.dump());
    const Read r = read_recompute(none);
    EXPECT_EQ(r.recompute, Recompute::none);
    EXPECT_FALSE(r.tuned);
  }
  for (const json& full : {json("full"), json("activation checkpointing"), json("gradient checkpointing enabled"),
                           json("yes"), json("enabled"), json(true)}) {
    SCOPED_TRACE(full.dump());
    const Read r = read_recompute(full);
    EXPECT_EQ(r.recompute, Recompute::full);
    EXPECT_FALSE(r.layers);
    EXPECT_FALSE(r.tuned);
  }
  for (const json& selective : {json("selective"), json("selective activation recomputation"), json("op-level selective"),
                                json("torchtitan selective op AC")}) {
    SCOPED_TRACE(selective.dump());
    EXPECT_EQ(read_recompute(selective).recompute, Recompute::selective);
  }
  // A layer count, however it is phrased, is the block recompute of that many layers.
  EXPECT_EQ(read_recompute("partial (4 layers)").layers, 4);
  EXPECT_EQ(read_recompute("full, block method, 5 layers").layers, 5);
  EXPECT_EQ(read_recompute("full recompute of 8 transformer blocks").layers, 8);
  // torchtitan's "selective layer" AC checkpoints one block in two: of 2 layers, 1; "every 1" all.
  const Read layer = read_recompute("selective layer");
  EXPECT_EQ(layer.recompute, Recompute::full);
  EXPECT_EQ(layer.layers, 1);
  EXPECT_EQ(read_recompute("selective layer AC, every 1 block").layers, 2);
  // Unknowns are the tuned knob, not a guess.
  for (const json& unstated : {json("not stated"), json("N/A"), json(nullptr)}) {
    SCOPED_TRACE(unstated.dump());
    EXPECT_TRUE(read_recompute(unstated).tuned);
  }
  // "partial" without a count cannot be priced: a skip naming it.
  json row = llama_row();
  row["recompute"] = "partial";
  const auto src = source_with({row});
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_TRUE(results.at(0).skipped);
  EXPECT_NE(results[0].skipped->find("names no layer count"), std::string::npos) << *results[0].skipped;
}

TEST(ValidationWords, ZeroStageNoneIsPlainDataParallel) {
  for (const char* words : {"none", "disabled", "no sharding (DDP)"}) {
    SCOPED_TRACE(words);
    json row = llama_row();
    row["parallel"]["zero_stage"] = words;
    row["parallel"]["fsdp"] = false;
    const auto src = source_with({row});
    const auto s = mgt::plan::setup_row(src, src.rows[0]);
    EXPECT_EQ(s.plan.zero_stage, 0);
    EXPECT_EQ(s.plan.dp_replicate, 8);
    EXPECT_TRUE(s.zero_stage_choices.empty());
  }
  json row = llama_row();
  row["parallel"]["zero_stage"] = "N/A";
  row["parallel"]["fsdp"] = false;
  const auto src = source_with({row});
  EXPECT_FALSE(mgt::plan::setup_row(src, src.rows[0]).zero_stage_choices.empty());  // unstated: tuned
}

TEST(ValidationWords, IntegersWithTheirAnnotationsAreIntegers) {
  // llama_row: 16 GPUs (dp 8 x tp 2), sequence 4096, 64 sequences per step.
  const auto read = [](const char* section, const char* key, const json& value) {
    json row = llama_row();
    row[section][key] = value;
    const auto src = source_with({row});
    return mgt::plan::setup_row(src, src.rows[0]);
  };
  EXPECT_EQ(read("parallel", "num_gpus", "16 (2 nodes of 8)").num_gpus, 16);
  EXPECT_EQ(read("parallel", "num_gpus", "16 GPUs").num_gpus, 16);
  EXPECT_EQ(read("parallel", "tp", "2 (intra-node)").plan.tp, 2);
  EXPECT_EQ(read("training", "seq_length", "4k").settings.seq_len, 4096);  // K = 1024, as the CLI reads it
  EXPECT_EQ(read("training", "seq_length", "4,096 tokens").settings.seq_len, 4096);
  EXPECT_EQ(read("training", "global_batch_size_seqs", "64 sequences").settings.global_batch_seqs(), 64);
  // What is not one integer of the field's unit stays a skip naming the field.
  for (const auto& [key, value] : std::vector<std::pair<const char*, const char*>>{
           {"num_gpus", "2 nodes"}, {"num_gpus", "16k"}, {"tp", "<=8"}, {"tp", "2-4"}, {"num_gpus", "1,0240"}}) {
    SCOPED_TRACE(value);
    json row = llama_row();
    row["parallel"][key] = value;
    const auto src = source_with({row});
    const auto results = mgt::plan::validate_row(src, src.rows[0]);
    ASSERT_TRUE(results.at(0).skipped);
    EXPECT_NE(results[0].skipped->find("is not one integer"), std::string::npos) << *results[0].skipped;
  }
}

TEST(ValidationWords, SequenceParallelAndInterleavingInWords) {
  const auto sp = [](const json& value) {
    json row = llama_row();  // tp 2
    row["parallel"]["sequence_parallel"] = value;
    const auto src = source_with({row});
    const auto s = mgt::plan::setup_row(src, src.rows[0]);
    return std::pair{s.plan.sequence_parallel, !s.sequence_parallel_choices.empty()};
  };
  for (const json& on : {json(true), json("yes"), json("on"), json("enabled"), json("SP"), json(1)})
    EXPECT_EQ(sp(on), std::pair(std::optional<bool>(true), false)) << on.dump();
  for (const json& off : {json(false), json("no"), json("off"), json("disabled"), json(0)})
    EXPECT_EQ(sp(off), std::pair(std::optional<bool>(false), false)) << off.dump();
  EXPECT_TRUE(sp("not stated").second);  // unstated: tuned

  // An 8-layer row on pp 2: V 2 and 4 split it.
  const auto vpp = [](const json& value) {
    json row = llama_row();
    row["model"]["num_layers"] = 8;
    row["parallel"]["pp"] = 2;
    row["parallel"]["dp"] = 4;
    row["parallel"]["vpp"] = value;
    const auto src = source_with({row});
    const auto s = mgt::plan::setup_row(src, src.rows[0]);
    return std::pair{s.plan.vpp, !s.vpp_choices.empty()};
  };
  EXPECT_EQ(vpp("interleaved (V=4)"), std::pair(int64_t(4), false));
  EXPECT_EQ(vpp("4 (interleaved)"), std::pair(int64_t(4), false));
  EXPECT_EQ(vpp("interleaved, vpp: 2"), std::pair(int64_t(2), false));
  EXPECT_EQ(vpp("1F1B"), std::pair(int64_t(1), false));
  EXPECT_EQ(vpp("none"), std::pair(int64_t(1), false));
  EXPECT_TRUE(vpp("interleaved (V not stated)").second);  // interleaved, V open: tuned over 2, 4
}

TEST(ValidationWords, ModelFieldsInWords) {
  const auto shape = [](const char* key, const json& value) {
    json row = llama_row();  // 32 heads, 8 K/V heads, SwiGLU, untied
    row["model"][key] = value;
    const auto src = source_with({row});
    return mgt::plan::setup_row(src, src.rows[0]);
  };
  EXPECT_TRUE(shape("tied_embeddings", "yes").shape.tied);
  EXPECT_TRUE(shape("tied_embeddings", true).shape.tied);
  const auto untied = shape("tied_embeddings", "no");
  EXPECT_FALSE(untied.shape.tied);
  EXPECT_FALSE(mgt::test::any_assumption_has(untied.assumptions, "tied_embeddings not stated"));  // stated: no
  EXPECT_TRUE(mgt::test::any_assumption_has(shape("tied_embeddings", "unknown").assumptions, "tied_embeddings not stated"));
  EXPECT_TRUE(shape("activation", "gated-gelu").shape.gated);
  EXPECT_FALSE(shape("activation", "GeLU (tanh approximation)").shape.gated);
  EXPECT_EQ(shape("num_kv_heads", "MHA").shape.kv_heads, 32);
  EXPECT_EQ(shape("num_kv_heads", "multi-query").shape.kv_heads, 1);
  EXPECT_EQ(shape("num_kv_heads", "8 (GQA)").shape.kv_heads, 8);
}

TEST(ValidationWords, AnImplausibleCountInWordsIsASkipNotACrash) {
  for (const auto& [field, value] : std::vector<std::pair<const char*, const char*>>{
           {"recompute", "full on 99999999999999999999999 layers"},
           {"recompute", "selective layer, every 99999999999999999999999"},
           {"vpp", "interleaved (V=99999999999999999999999)"}}) {
    SCOPED_TRACE(value);
    json row = llama_row();
    if (std::string(field) == "vpp") {
      row["model"]["num_layers"] = 8;
      row["parallel"]["pp"] = 2;
      row["parallel"]["dp"] = 4;
      row["parallel"]["vpp"] = value;
    } else {
      row[field] = value;
    }
    const auto src = source_with({row});
    const auto results = mgt::plan::validate_row(src, src.rows[0]);
    ASSERT_TRUE(results.at(0).skipped);
    EXPECT_NE(results[0].skipped->find("is not a plausible count"), std::string::npos) << *results[0].skipped;
  }
}

// A row's packed documents (training.document_tokens, mgt's own field): the setting the estimate
// takes; a length outside 1..seq_length is a skip naming the field.
TEST(ValidationWords, PackedDocumentsAreReadAndBounded) {
  json row = llama_row();  // sequence 4096
  row["training"]["document_tokens"] = "512 tokens";
  auto src = source_with({row});
  EXPECT_EQ(mgt::plan::setup_row(src, src.rows[0]).settings.document_tokens, 512);
  row["training"]["document_tokens"] = 8192;
  src = source_with({row});
  const auto r = mgt::plan::validate_row(src, src.rows[0]);
  ASSERT_TRUE(r.at(0).skipped);
  EXPECT_NE(r.at(0).skipped->find("training.document_tokens 8192"), std::string::npos) << *r.at(0).skipped;
}
