// Estimate / TimeBreakdown / MemoryBreakdown JSON (cost_model/breakdown_json.hpp): one key per term,
// spelled as in mgt.plans/1, and a lossless round trip.
#include "mgt/cost_model/breakdown_json.hpp"

#include "mgt/ir/error.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

using mgt::cost::Estimate;
using mgt::cost::MemoryBreakdown;
using mgt::cost::TimeBreakdown;

Estimate sample_estimate() {
  Estimate e;
  e.plan.dp_shard = 4;
  e.plan.tp = 2;
  e.plan.zero_stage = 3;
  e.plan.micro_batch = 2;
  e.plan.grad_accum = 8;
  e.plan.sequence_parallel = true;
  e.memory = {1, 2, 3, 4, 5, 6, 7, 28};
  e.time = {0.5, 0.25, 0.125, 0.0625, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
  e.step_time_s = 32.875;
  e.tokens_per_s_per_gpu = 1234.5;
  e.mfu = 0.4;
  e.model_flops_per_step = 1e18;
  e.bottleneck = "compute";
  e.host_wait_s = 0.125;
  return e;
}

TEST(BreakdownJson, TimeKeysAreTheMgtPlansSpelling) {
  TimeBreakdown t;
  t.exposed_fsdp_s = 0.3;
  t.bubble_s = 0.7;
  const auto j = mgt::cost::to_json(t);
  const std::set<std::string> expected = {"compute_s",    "recompute_s",  "exposed_tp_s", "exposed_cp_s",
                                          "exposed_fsdp_s", "exposed_dp_s", "exposed_pp_s", "exposed_ep_s",
                                          "bubble_s",     "optimizer_s",  "overhead_s"};
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(j.at("exposed_fsdp_s").get<double>(), 0.3);
  EXPECT_EQ(j.at("bubble_s").get<double>(), 0.7);
}

TEST(BreakdownJson, MemoryKeysIncludePeak) {
  MemoryBreakdown m;
  m.fsdp_buffers_bytes = 17;
  m.peak_bytes = 99;
  const auto j = mgt::cost::to_json(m);
  EXPECT_EQ(j.size(), 8u);
  EXPECT_EQ(j.at("fsdp_buffers_bytes").get<int64_t>(), 17);
  EXPECT_EQ(j.at("peak_bytes").get<int64_t>(), 99);
}

TEST(BreakdownJson, EstimateRoundTrips) {
  const Estimate e = sample_estimate();
  const auto j = mgt::cost::to_json(e);
  const Estimate back = mgt::cost::estimate_from_json(j, "test");
  EXPECT_EQ(back.plan, e.plan);
  EXPECT_EQ(back.memory, e.memory);
  EXPECT_EQ(back.time, e.time);
  EXPECT_EQ(back.step_time_s, e.step_time_s);
  EXPECT_EQ(back.tokens_per_s_per_gpu, e.tokens_per_s_per_gpu);
  EXPECT_EQ(back.mfu, e.mfu);
  EXPECT_EQ(back.model_flops_per_step, e.model_flops_per_step);
  EXPECT_EQ(back.bottleneck, e.bottleneck);
  EXPECT_EQ(back.host_wait_s, 0.125);
  EXPECT_EQ(mgt::cost::to_json(back), j);
  // A document written before the host-dispatch model has no host_wait_s: no wait.
  auto old = j;
  old.erase("host_wait_s");
  EXPECT_EQ(mgt::cost::estimate_from_json(old, "test").host_wait_s, 0.0);
}

TEST(BreakdownJson, ReaderNamesAMissingOrNegativeTerm) {
  auto j = mgt::cost::to_json(sample_estimate());
  j["time"].erase("bubble_s");
  try {
    (void)mgt::cost::estimate_from_json(j, "plans.json");
    FAIL() << "a missing term must throw";
  } catch (const mgt::ir::InputError& e) {
    EXPECT_EQ(e.field(), "bubble_s");
  }
  j = mgt::cost::to_json(sample_estimate());
  j["memory"]["activations_bytes"] = -1;
  EXPECT_THROW((void)mgt::cost::estimate_from_json(j, "plans.json"), mgt::ir::InputError);
}

}  // namespace
