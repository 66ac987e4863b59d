// Answers that say what to do: --emit ranks only what the framework can express, "no plan" names the
// nearest GPU counts and batches that give one, an idle top plan (too few tokens per GPU, or MFU under
// 0.05 from slow links, or a million GPUs) is warned about with a larger batch, and estimates out of
// range (a cluster file with near-zero bandwidths) are rejected, never ranked. "Did you mean", folders
// named as such and --json with --emit: usage_test.cpp.
#include "cli_util.hpp"

#include <cstdio>

namespace mgt_cli_test {
namespace {

// The best plan of the whole ranked list (--json --top large) that `format` can express, filtered by
// the framework's documented limits (docs/exports.md), independently of the search's own check.
json best_plan_where(const std::vector<std::string>& args, bool (*expressible)(const json&)) {
  std::vector<std::string> all = args;
  for (const char* a : {"--json", "--top", "1000000"}) all.push_back(a);
  const Result r = run_cli(all);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  const json doc = parse_json_or_fail(r);
  if (!doc.is_object()) return json();
  for (const auto& entry : doc.at("plans"))
    if (expressible(entry.at("plan"))) return entry.at("plan");
  return json();
}

int64_t degree(const json& plan, const char* key) { return plan.value(key, int64_t(1)); }

bool deepspeed_can(const json& p) {
  return degree(p, "tp") == 1 && degree(p, "cp") == 1 && degree(p, "pp") == 1 && degree(p, "ep") == 1;
}
bool accelerate_can(const json& p) {
  // No pipeline or expert axis; pure replication does not compose with tp/cp; FSDP has no ZeRO-1.
  const bool replicate_with_tp = (degree(p, "tp") > 1 || degree(p, "cp") > 1) && degree(p, "dp_replicate") > 1 &&
                                 degree(p, "dp_shard") == 1;
  return degree(p, "pp") == 1 && degree(p, "ep") == 1 && !replicate_with_tp;
}

void expect_emits_best_expressible(const std::vector<std::string>& args, const std::string& format,
                                   bool (*expressible)(const json&)) {
  SCOPED_TRACE("--emit " + format);
  const json best = best_plan_where(args, expressible);
  ASSERT_FALSE(best.is_null()) << "some plan of the full list is expressible";
  std::vector<std::string> emit = args;
  emit.push_back("--emit");
  emit.push_back(format);
  const Result r = run_cli(emit);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_FALSE(r.out.empty()) << describe(r);
  EXPECT_TRUE(contains(r.err, "recommended: " + plan_line(best) + " -- ")) << plan_line(best) << "\n" << describe(r);
  EXPECT_FALSE(contains(r.err, "passing over")) << describe(r);
}

TEST(CliAnswers, EmitRanksOnlyExpressiblePlans) {
  // Before: the top plans had tp > 1, so DeepSpeed wrote nothing unless the user guessed --top 100000.
  expect_emits_best_expressible({"examples/models/Llama-3.1-70B.json", "--gpus", "64"}, "deepspeed", deepspeed_can);
  expect_emits_best_expressible({kLlama8B, "--gpus", "8", "--seq-len", "32768"}, "deepspeed", deepspeed_can);
  expect_emits_best_expressible({"examples/models/Mixtral-8x7B.json", "--gpus", "32"}, "accelerate", accelerate_can);
}

TEST(CliAnswers, EmitDeepSpeedJsonIsTheConfig) {
  const Result r = run_cli({"examples/models/Llama-3.1-70B.json", "--gpus", "64", "--emit", "deepspeed"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << describe(r);
  // 64 GPUs, all data-parallel: 512 sequences = micro * grad_accum * 64.
  EXPECT_EQ(doc.at("train_batch_size").get<int64_t>(), 512);
  EXPECT_EQ(doc.at("train_micro_batch_size_per_gpu").get<int64_t>() * doc.at("gradient_accumulation_steps").get<int64_t>() *
                64,
            512);
}

TEST(CliAnswers, EmitWithNoExpressiblePlanSaysWhy) {
  // 8B at 128K context on 8 GPUs: every plan that fits splits the sequence (cp) or the layers (tp, pp),
  // none of which a DeepSpeed config expresses; without --emit a plan exists.
  const Result r = run_cli({kLlama8B, "--gpus", "8", "--seq-len", "131072", "--emit", "deepspeed"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(r.out.empty()) << describe(r);
  EXPECT_TRUE(contains(r.err, "can be written for deepspeed")) << describe(r);
  EXPECT_TRUE(contains(r.err, "--emit deepspeed cannot express it: ")) << "the rejection summary names the reason\n"
                                                                        << describe(r);
}

// "memory per GPU: 90.9 GiB of 80.0 GiB" of `mgt-plan estimate`: the peak in GiB, or -1.
double estimated_peak_gib(const std::string& model, int64_t gpus, const std::string& plan, const std::string& framework) {
  const Result r = run_cli({"estimate", model, "--gpus", std::to_string(gpus), "--plan", plan, "--framework", framework});
  double peak = -1;
  const size_t at = r.out.find("memory per GPU: ");
  if (at != std::string::npos) std::sscanf(r.out.c_str() + at, "memory per GPU: %lf GiB", &peak);
  return peak;
}

TEST(CliAnswers, EmitDeepSpeedWithNothingThatFitsSaysByHowMuch) {
  // 405B on 256 GPUs: a DeepSpeed config expresses data parallelism and ZeRO only; 512 sequences over
  // 256 data-parallel ranks. The answer names the lightest such plan and its peak; that peak is what
  // `estimate --framework deepspeed` gives for the plan (DeepSpeed's ZeRO-3 buffers, docs/cost-model.md
  // §4.3), and no other DeepSpeed plan (HSDP split of the 256 ranks x recompute mode, micro-batch 1)
  // is lighter. (On 512 GPUs a DeepSpeed plan fits: tests/cli/deepspeed_export_test.cpp.)
  const std::string model = "examples/models/Llama-3.1-405B.json";
  const Result r = run_cli({model, "--gpus", "256", "--emit", "deepspeed"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(r.out.empty()) << describe(r);
  const std::string head = "every plan deepspeed can express needs more than 80.0 GiB per GPU (the lightest, ";
  const size_t at = r.err.find(head);
  ASSERT_NE(at, std::string::npos) << describe(r);
  const size_t plan_end = r.err.find(", needs ", at);
  ASSERT_NE(plan_end, std::string::npos) << describe(r);
  const std::string named = r.err.substr(at + head.size(), plan_end - at - head.size());
  double named_gib = 0;
  ASSERT_EQ(std::sscanf(r.err.c_str() + plan_end, ", needs %lf GiB)", &named_gib), 1) << describe(r);
  EXPECT_GT(named_gib, 80.0);

  double lightest = 1e300;
  std::string lightest_line;
  for (int64_t replicate : {1, 2, 4, 8, 16})
    for (const char* recompute : {"none", "selective", "full"}) {
      const json plan = {{"dp_replicate", replicate}, {"dp_shard", 256 / replicate}, {"tp", 1}, {"cp", 1},
                         {"sequence_parallel", false}, {"micro_batch", 1},
                         {"recompute", recompute}};  // grad_accum: derived (2), as the search leaves it
      const double peak = estimated_peak_gib(model, 256, plan.dump(), "deepspeed");
      ASSERT_GT(peak, 0) << plan.dump();
      if (peak < lightest) lightest = peak, lightest_line = plan_line(plan);
    }
  EXPECT_NEAR(named_gib, lightest, 0.05) << named << " vs " << lightest_line;
  EXPECT_EQ(named, lightest_line) << describe(r);
}

TEST(CliAnswers, EmitDeepSpeedWhoseOwnPlansBreakARuleNamesIt) {
  // 405B on 2,048 GPUs: a DeepSpeed plan is data parallel over all 2,048 GPUs (no tp, cp, pp or ep),
  // so each step needs at least 2,048 x micro-batch sequences; the default batch is 512.
  const Result r = run_cli({"examples/models/Llama-3.1-405B.json", "--gpus", "2048", "--emit", "deepspeed"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(r.out.empty()) << describe(r);
  const std::string head = "every plan deepspeed can express breaks a rule (";
  const size_t at = r.err.find(head);
  ASSERT_NE(at, std::string::npos) << describe(r);
  const std::string rule = "most often: global batch of 512 sequences is smaller than dp_replicate*dp_shard*micro_batch=";
  const size_t rule_at = r.err.find(rule, at);
  ASSERT_NE(rule_at, std::string::npos) << describe(r);
  const int64_t needed = std::stoll(r.err.substr(rule_at + rule.size()));
  EXPECT_EQ(needed % 2048, 0) << describe(r);
  EXPECT_GT(needed, 512);
}

TEST(CliAnswers, NoPlanNamesTheNearestGpuCountsAndBatch) {
  // 12 = 4 x 3: 512 sequences split over dp in {1, 2, 4}, leaving a factor 3 for tp (32 heads), cp (8192 /
  // 6) or pp (32 layers, 34) -- none divides. 8 and 16 GPUs are powers of two; 516 = 12 x 43 sequences is
  // the multiple of 12 nearest 512, 516 x 8192 = 4227072 tokens.
  const Result r = run_cli({kLlama8B, "--gpus", "12"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_EQ(lines_of(r.err).size(), 1u) << describe(r);
  EXPECT_TRUE(contains(r.err, "no valid plan for 12 GPUs")) << describe(r);
  EXPECT_TRUE(contains(r.err, "plans exist for 8 or 16 GPUs, or for 12 GPUs with --global-batch-tokens 4227072 "
                              "(516 sequences)"))
      << describe(r);
  // And the answers hold: each named setting gives a plan.
  EXPECT_EQ(run_cli({kLlama8B, "--gpus", "8"}).exit_code, 0);
  EXPECT_EQ(run_cli({kLlama8B, "--gpus", "16"}).exit_code, 0);
  EXPECT_EQ(run_cli({kLlama8B, "--gpus", "12", "--global-batch-tokens", "4227072"}).exit_code, 0);
}

TEST(CliAnswers, MillionGpusWithNoPlanNameABatchThatGivesOne) {
  // 1,000,000 = 2^6 x 5^6 GPUs: tp divides the 8 KV heads and pp the 32 layers (powers of two), so the
  // 5^6 factor must go to dp or cp; cp 5^k does not divide 8192 tokens, and dp >= 5^6 = 15625 exceeds
  // 512 sequences. Before, the answer's only advice was "change --gpus, --seq-len or --global-batch-tokens"
  // under a list topped by "tp=5 must divide". The multiple of 10^6 sequences nearest 512 is 10^6:
  // 10^6 x 8192 = 8192000000 tokens.
  const Result r = run_cli({kLlama8B, "--gpus", "1000000"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "no valid plan for 1000000 GPUs")) << describe(r);
  EXPECT_TRUE(contains(r.err, "plans exist for 1000000 GPUs with --global-batch-tokens 8192000000 (1000000 sequences)"))
      << describe(r);
}

// The GPU count the CLI names in "needs at least N GPUs of this kind", or 0.
int64_t needed_gpus(const std::string& err) {
  const std::string key = "needs at least ";
  const auto at = err.find(key);
  return at == std::string::npos ? 0 : std::stoll(err.substr(at + key.size()));
}

// The first count at or above `floor` that is a multiple of 8 (one H100 node) or a power of two.
int64_t next_grid_count(int64_t floor) {
  int64_t pow2 = 1;
  while (pow2 < floor) pow2 *= 2;
  return std::min((floor + 7) / 8 * 8, pow2);
}

TEST(CliAnswers, TooBigForEightGpusNamesTheSmallestCountThatFits) {
  // Fully sharded fp32 weights + gradients + AdamW moments are 16 bytes per parameter; an H100 holds
  // 80 GiB. Falcon-40B: 41303293952 x 16 / 80 GiB = 7.69 -> at least 8 GPUs for the states alone, so
  // with activations the first grid count above 8 is the answer: 16. Llama-4-Scout (text):
  // 107769861120 x 16 / 80 GiB = 20.07 -> 21; grid counts 24 then 32. (Parameter counts: the hand
  // counts of tests/ir/hf_families_test.cpp.)
  constexpr double kHbm = 80.0 * (int64_t{1} << 30);
  struct Case {
    const char* model;
    int64_t params, needed;  ///< needed: by hand, below
  };
  // Falcon-40B's floor 9 -> 16 (nothing on the grid between); Scout's 21 -> 24 has no plan, 32 does.
  for (const Case& c : {Case{"examples/models/families/Falcon-40B.json", 41303293952, 16},
                        Case{"examples/models/families/Llama-4-Scout-17B-16E.json", 107769861120, 32}}) {
    SCOPED_TRACE(c.model);
    const int64_t floor = std::max<int64_t>(9, int64_t(std::ceil(16.0 * double(c.params) / kHbm)));
    const Result r = run_cli({c.model, "--gpus", "8"});
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_EQ(lines_of(r.err).size(), 1u) << describe(r);
    const int64_t n = needed_gpus(r.err);
    EXPECT_EQ(n, c.needed) << describe(r);
    EXPECT_GE(n, next_grid_count(floor)) << describe(r);
    EXPECT_TRUE(contains(r.err, "GPUs of this kind (H100-SXM5-80GB): on 8 every plan needs more than 80.0 GiB per GPU; "
                                "the best plan on " + std::to_string(n) + " GPUs is "))
        << describe(r);
    // N is the smallest grid count that fits: a plan at N, none at the grid count before it.
    EXPECT_EQ(run_cli({c.model, "--gpus", std::to_string(n)}).exit_code, 0);
    for (int64_t below = next_grid_count(floor); below < n; below = next_grid_count(below + 1))
      EXPECT_EQ(run_cli({c.model, "--gpus", std::to_string(below)}).exit_code, 1) << below;
  }
}

TEST(CliAnswers, EveryFamilyExampleGetsAPlanOrANeededGpuCount) {
  for (const auto& entry : fs::directory_iterator(fs::path(MGT_SOURCE_DIR) / "examples" / "models" / "families")) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().filename().string());
    const Result r = run_cli({entry.path().string(), "--gpus", "8"});
    if (r.exit_code == 0) {
      EXPECT_TRUE(contains(r.out, "recommended: ")) << describe(r);
    } else {
      EXPECT_EQ(r.exit_code, 1) << describe(r);
      EXPECT_GT(needed_gpus(r.err), 8) << describe(r);
    }
  }
}

TEST(CliAnswers, IdleTopPlanIsWarnedWithALargerBatch) {
  // 405B on 16,384 GPUs with 4M tokens: 4194304 / 16384 = 256 tokens per GPU per step.
  const Result r = run_cli({"examples/models/Llama-3.1-405B.json", "--gpus", "16384"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(contains(r.err, "mgt-plan: warning: the top plan keeps the GPUs mostly idle")) << describe(r);
  EXPECT_TRUE(contains(r.err, "256 tokens per GPU per step (4194304 tokens over 16384 GPUs)")) << describe(r);
  // The smallest doubling giving 8192 tokens per GPU: 4194304 x 32 = 134217728 (= 16384 x 8192).
  EXPECT_TRUE(contains(r.err, "; --global-batch-tokens 134217728 gives MFU ")) << describe(r);
  EXPECT_FALSE(contains(r.out, "warning")) << "the warning goes to stderr\n" << describe(r);
}

// h100-sxm with every link (NVLink, PCIe, NIC) at 50 MB/s: every plan waits on communication.
std::string slow_links_cluster(const TempDir& dir) {
  json cluster = json::parse(slurp(fs::path(MGT_SOURCE_DIR) / "examples" / "clusters" / "h100-sxm.json"));
  for (const char* link : {"nvlink_bytes_per_s", "pcie_bytes_per_s", "nic_bytes_per_s"}) cluster[link] = 5e7;
  cluster["name"] = "h100-slow-links";
  return dir.write("slow-links.json", cluster.dump(2));
}

TEST(CliAnswers, CommunicationBoundTopPlanIsWarnedWithALargerBatch) {
  // 8B on 8 GPUs: 524288 tokens per GPU per step is plenty, yet MFU < 0.05 on 50 MB/s links. The
  // warning names a larger batch; running that batch gives the MFU it claims, above the top plan's.
  TempDir dir;
  const std::string cluster = slow_links_cluster(dir);
  const Result r = run_cli({kLlama8B, "--gpus", "8", "--cluster", cluster, "--json", "--top", "1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const double top_mfu = parse_json_or_fail(r).at("plans").at(0).at("mfu").get<double>();
  EXPECT_LT(top_mfu, 0.05);
  EXPECT_TRUE(contains(r.err, "mgt-plan: warning: the top plan keeps the GPUs mostly idle: MFU ")) << describe(r);
  EXPECT_TRUE(contains(r.err, "524288 tokens per GPU per step (4194304 tokens over 8 GPUs); --global-batch-tokens "))
      << describe(r);
  const size_t at = r.err.find("; --global-batch-tokens ");
  ASSERT_NE(at, std::string::npos) << describe(r);
  int64_t suggested = 0;
  double claimed = 0;
  ASSERT_EQ(std::sscanf(r.err.c_str() + at, "; --global-batch-tokens %lld gives MFU %lf", (long long*)&suggested, &claimed), 2)
      << describe(r);
  // A doubling (x2 to x16) of the 4M batch.
  EXPECT_TRUE(suggested == 4194304ll * 2 || suggested == 4194304ll * 4 || suggested == 4194304ll * 8 ||
              suggested == 4194304ll * 16)
      << suggested;
  const Result better = run_cli({kLlama8B, "--gpus", "8", "--cluster", cluster, "--global-batch-tokens",
                                 std::to_string(suggested), "--json", "--top", "1"});
  ASSERT_EQ(better.exit_code, 0) << describe(better);
  const double better_mfu = parse_json_or_fail(better).at("plans").at(0).at("mfu").get<double>();
  EXPECT_NEAR(better_mfu, claimed, 5e-4);
  EXPECT_GT(better_mfu, top_mfu);
}

TEST(CliAnswers, MillionGpusGetAWarningAndABatchWithoutASecondSearch) {
  // 4194304 tokens over 1048576 GPUs = 4 tokens per GPU; 8192 tokens per GPU need 1048576 x 8192 =
  // 8589934592 tokens. Past 65,536 GPUs the batch is named, not searched.
  const Result r = run_cli({kLlama8B, "--gpus", "1048576", "--top", "1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(contains(r.err, "mgt-plan: warning: the top plan keeps the GPUs mostly idle: MFU 0.0")) << describe(r);
  EXPECT_TRUE(contains(r.err, "4 tokens per GPU per step (4194304 tokens over 1048576 GPUs); try --global-batch-tokens " +
                                  std::to_string(1048576ll * 8192) + " (8192 tokens per GPU)"))
      << describe(r);
}

TEST(CliAnswers, NoWarningForABusyPlan) {
  // 8B on 16 GPUs: 262144 tokens per GPU per step, MFU well above 0.05.
  const Result r = run_cli({kLlama8B, "--gpus", "16"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_FALSE(contains(r.err, "warning")) << describe(r);
}

std::string tiny_peak_cluster(const TempDir& dir) {
  json cluster = json::parse(slurp(fs::path(MGT_SOURCE_DIR) / "examples" / "clusters" / "h100-sxm.json"));
  cluster["gpu"]["peak_bf16_flops_per_s"] = 1e-300;
  return dir.write("tiny-peak.json", cluster.dump(2));
}

/// The search `args` ranks nothing: exit 1 and no "recommended:" in text, no plan (and no NaN written
/// as null) in --json. Returns the text run.
Result expect_nothing_ranked(const std::vector<std::string>& args) {
  const Result r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(contains(r.out, "estimate out of range: ")) << describe(r);
  EXPECT_FALSE(contains(r.out, "recommended:")) << describe(r);
  std::vector<std::string> with_json = args;
  with_json.push_back("--json");
  const Result j = run_cli(with_json);
  EXPECT_EQ(j.exit_code, 1) << describe(j);
  EXPECT_FALSE(contains(j.out, "null")) << describe(j);
  const json doc = parse_json_or_fail(j);
  EXPECT_TRUE(doc.is_object() && doc.at("plans").empty()) << describe(j);
  return r;
}

TEST(CliAnswers, EstimatesOutOfRangeAreRejectedNotRanked) {
  // A bf16 peak of 1e-300 FLOP/s: every compute time overflows to inf, so no plan ranks.
  TempDir dir;
  const std::string cluster = tiny_peak_cluster(dir);
  const Result r = expect_nothing_ranked({kLlama8B, "--gpus", "8", "--cluster", cluster});
  EXPECT_TRUE(contains(r.out, "estimate out of range: compute time inf s")) << describe(r);
  EXPECT_TRUE(contains(r.out, "check the cluster's bandwidths")) << describe(r);

  const Result e = run_cli({kLlama8B, "--gpus", "8", "--cluster", cluster, "--emit", "megatron"});
  EXPECT_EQ(e.exit_code, 1) << describe(e);
  EXPECT_TRUE(e.out.empty()) << "no config for an estimate out of range\n" << describe(e);
}

TEST(CliAnswers, SearchOnTinyBandwidthsOrHugeLatenciesRanksNothingAndPrintsNoNan) {
  // Every link at 1e-300 B/s, or every latency at 1e308 s, on 2 nodes: the search used to rank
  // "-nan s/step" first. Every candidate is now rejected as out of range, in text and in --json.
  TempDir dir;
  json base = json::parse(slurp(fs::path(MGT_SOURCE_DIR) / "examples" / "clusters" / "h100-sxm.json"));
  json tiny = base, slow = base;
  for (const char* link : {"nic_bytes_per_s", "nvlink_bytes_per_s", "pcie_bytes_per_s"}) tiny[link] = 1e-300;
  for (const char* latency : {"network_latency_s", "nvlink_latency_s", "pcie_latency_s"}) slow[latency] = 1e308;
  for (const auto& [name, cluster] : {std::pair{"tiny-bandwidth", tiny}, std::pair{"huge-latency", slow}}) {
    SCOPED_TRACE(name);
    const std::string path = dir.write(std::string(name) + ".json", cluster.dump());
    const Result r = expect_nothing_ranked({kLlama8B, "--gpus", "16", "--cluster", path});
    EXPECT_FALSE(contains(r.out + r.err, "-nan")) << describe(r);
    EXPECT_TRUE(contains(r.err, "no valid plan for 16 GPUs")) << describe(r);
  }
}

}  // namespace
}  // namespace mgt_cli_test
