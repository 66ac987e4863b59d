// A row that leaves tp or pp unstated (validate_layout.cpp; docs/validation.md §5): validate takes the
// degrees as tuned. The choice is checked against the same row stated with every other layout: the
// tuned prediction is that of the stated row it chose, and no other stated layout that fits is faster.
#include "mgt/planner/validate.hpp"
#include "validation_rows.hpp"

#include <gtest/gtest.h>

#include <string>

using mgt::test::any_assumption_has;
using mgt::test::llama_row;
using mgt::test::source_with;
using nlohmann::json;

namespace {

json unstated_layout_row() {
  json row = llama_row();  // 2 layers of an 8B-wide Llama, 16 H100, sequence 4096
  row["id"] = "layout_row";
  row["parallel"] = {{"num_gpus", 16}, {"cp", 1}, {"ep", 1}};
  row["recompute"] = "none";
  row["training"]["micro_batch_size"] = 1;
  return row;
}

struct Outcome {
  mgt::plan::ValidationResult result;
  bool fits = false;
};

Outcome validate(const json& row) {
  const auto src = source_with({row});
  const auto results = mgt::plan::validate_row(src, src.rows[0]);
  EXPECT_EQ(results.size(), 1u);
  Outcome o{results.at(0)};
  if (o.result.estimate) o.fits = o.result.estimate->memory.peak_bytes <= o.result.hbm_bytes;
  return o;
}

}  // namespace

TEST(ValidationLayout, UnstatedDegreesAreTunedToTheFastestStatedLayout) {
  const Outcome tuned = validate(unstated_layout_row());
  ASSERT_FALSE(tuned.result.skipped) << *tuned.result.skipped;
  ASSERT_TRUE(tuned.result.estimate && tuned.result.predicted);
  const int64_t tp = tuned.result.estimate->plan.tp, pp = tuned.result.estimate->plan.pp;
  EXPECT_TRUE(any_assumption_has(tuned.result.assumptions, "parallel.tp and pp not stated: tuned over"));
  EXPECT_TRUE(any_assumption_has(tuned.result.assumptions, "chosen tp " + std::to_string(tp) + ", pp " + std::to_string(pp)));

  // Every layout stated by hand: tp a power of two within the 8-GPU node, pp dividing the rest.
  int64_t compared = 0, ranked = 0;
  for (const int64_t t : {1, 2, 4, 8})
    for (const int64_t p : {1, 2}) {  // 2 layers: pp 1 or 2
      json row = unstated_layout_row();
      row["parallel"]["tp"] = t;
      row["parallel"]["pp"] = p;
      const Outcome stated = validate(row);
      if (stated.result.skipped || !stated.result.predicted) continue;
      ++compared;
      if (t == tp && p == pp) {
        EXPECT_DOUBLE_EQ(*stated.result.predicted, *tuned.result.predicted) << "tp " << t << " pp " << p;
      } else if (stated.fits && tuned.fits) {
        ++ranked;
        // The row's metric is an iteration time: compare the rate it comes from.
        EXPECT_LE(stated.result.estimate->tokens_per_s_per_gpu, tuned.result.estimate->tokens_per_s_per_gpu)
            << "tp " << t << " pp " << p;
      }
    }
  EXPECT_GE(compared, 4);
  EXPECT_GE(ranked, 2);  // other layouts that fit were there to lose
}

// A stated dp fixes tp x pp: with pp stated too, tp is what is left, one layout.
TEST(ValidationLayout, AStatedDpAndPpLeaveOneTp) {
  json row = unstated_layout_row();
  row["parallel"]["dp"] = 4;
  row["parallel"]["pp"] = 1;
  const Outcome o = validate(row);
  ASSERT_FALSE(o.result.skipped) << *o.result.skipped;
  EXPECT_EQ(o.result.estimate->plan.tp, 4);
  EXPECT_TRUE(any_assumption_has(o.result.assumptions, "parallel.tp not stated: tuned over 1 layouts"));
}

// No layout can run: a skip that names what was tried, not a guess.
TEST(ValidationLayout, NoLayoutThatRunsIsASkipNamingWhy) {
  json row = unstated_layout_row();
  row["training"]["global_batch_size_seqs"] = 1;  // fewer sequences than any data-parallel degree >= 2
  row["parallel"]["num_gpus"] = 64;               // tp <= 8 leaves dp >= 4 (pp <= 2 for 2 layers)
  const Outcome o = validate(row);
  ASSERT_TRUE(o.result.skipped);
  EXPECT_NE(o.result.skipped->find("no layout of 64 GPUs with cp 1 can run"), std::string::npos) << *o.result.skipped;
  EXPECT_NE(o.result.skipped->find("smaller than dp"), std::string::npos) << *o.result.skipped;
}

// Stated degrees are not tuned: the row keeps its layout and says nothing about tuning it.
TEST(ValidationLayout, AStatedLayoutIsKept) {
  const Outcome o = validate(llama_row());
  ASSERT_FALSE(o.result.skipped);
  EXPECT_EQ(o.result.estimate->plan.tp, 2);
  EXPECT_FALSE(any_assumption_has(o.result.assumptions, "tuned over"));
}
