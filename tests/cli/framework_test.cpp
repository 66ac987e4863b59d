// `--framework NAME` on the search, `estimate` and `simulate`, and `--emit X` implying X's framework
// (docs/cost-model.md §9).
#include "cli_util.hpp"

#include <cctype>
#include <cstdio>

namespace mgt_cli_test {
namespace {

const std::string kPlan = R"({"dp_shard":4,"tp":2})";

double step_time(const Result& r) { return parse_json_or_fail(r)["step_time_s"].get<double>(); }

TEST(CliFramework, EstimatePricesWithTheNamedFramework) {
  const Result none = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", kPlan, "--json"});
  const Result fsdp = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", kPlan, "--json", "--framework", "pytorch-fsdp"});
  const Result mcore = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", kPlan, "--json", "--framework", "nemo"});
  ASSERT_EQ(none.exit_code, 0) << describe(none);
  ASSERT_EQ(mcore.exit_code, 0) << describe(mcore);
  // No framework named is the pytorch-fsdp profile; Megatron-Core's fused kernels, cuDNN attention and
  // TP overlap make the same plan faster on H100.
  EXPECT_EQ(step_time(none), step_time(fsdp));
  EXPECT_LT(step_time(mcore), step_time(none));
}

TEST(CliFramework, SimulateTakesTheFramework) {
  const Result none = run_cli({"simulate", kLlama8B, "--gpus", "8", "--plan", kPlan, "--json"});
  const Result mcore = run_cli({"simulate", kLlama8B, "--gpus", "8", "--plan", kPlan, "--json", "--framework", "megatron-core"});
  ASSERT_EQ(none.exit_code, 0) << describe(none);
  ASSERT_EQ(mcore.exit_code, 0) << describe(mcore);
  EXPECT_LT(parse_json_or_fail(mcore)["step_time_s"].get<double>(), parse_json_or_fail(none)["step_time_s"].get<double>());
}

TEST(CliFramework, UnknownFrameworkUsesTheDefaultAndSaysSo) {
  const Result known = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", kPlan, "--json"});
  const Result r = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", kPlan, "--json", "--framework", "my-trainer"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(contains(r.err, "my-trainer has no profile")) << r.err;
  EXPECT_TRUE(contains(r.err, "pytorch-fsdp")) << r.err;
  EXPECT_EQ(step_time(r), step_time(known));
}

TEST(CliFramework, EmitImpliesItsFrameworkUnlessOneIsGiven) {
  const std::vector<std::string> base{kLlama8B, "--gpus", "16", "--top", "1", "--emit", "megatron"};
  auto with = [&base](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const Result implied = with({}), named = with({"--framework", "megatron-core"}), other = with({"--framework", "megatron-lm"});
  ASSERT_EQ(implied.exit_code, 0) << describe(implied);
  ASSERT_EQ(named.exit_code, 0) << describe(named);
  ASSERT_EQ(other.exit_code, 0) << describe(other);
  EXPECT_EQ(implied.out, named.out);
  EXPECT_EQ(implied.err, named.err);  // the recommendation with its step time
  EXPECT_NE(implied.err, other.err);  // megatron-lm 2021 prices the plans otherwise
}

TEST(CliFramework, SearchRanksOnlyWhatTheFrameworkOffers) {
  // PyTorch FSDP has no pipeline: no plan with pp > 1 is ranked. Megatron-Core offers ZeRO-1.
  const Result fsdp = run_cli({"examples/models/Llama-3.1-70B.json", "--gpus", "64", "--top", "20", "--json", "--framework", "pytorch-fsdp"});
  ASSERT_EQ(fsdp.exit_code, 0) << describe(fsdp);
  const json fsdp_doc = parse_json_or_fail(fsdp);
  for (const auto& p : fsdp_doc["plans"]) EXPECT_EQ(p["plan"]["pp"].get<int64_t>(), 1) << plan_line(p["plan"]);
  const Result mcore = run_cli({"examples/models/Llama-3.1-70B.json", "--gpus", "64", "--top", "50", "--json", "--framework", "megatron-core"});
  ASSERT_EQ(mcore.exit_code, 0) << describe(mcore);
  bool zero1 = false;
  const json mcore_doc = parse_json_or_fail(mcore);
  for (const auto& p : mcore_doc["plans"]) zero1 = zero1 || p["plan"]["zero_stage"].get<int64_t>() == 1;
  EXPECT_TRUE(zero1) << mcore.out.substr(0, 2000);
}

TEST(CliFramework, RolelessModelsRefuseTheFlag) {
  const Result r = run_cli({"tests/mlir/data/attention_scores.mlir", "--gpus", "8", "--framework", "megatron-core"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_TRUE(contains(r.err, "--framework")) << r.err;
}

// The plan table shows expert tensor parallel where it differs from tp ("ep/etp"), so a plan whose
// recommended line says etp=K reads the same in its table row (issue 16: Megatron's expert layouts).
// 512 GPUs: there the best plan carves etp 1 from tp 4 (ep 16 inside two nodes); on 2048 the cross-node
// all-to-all's NIC bound (topology.hpp) makes ep 32 with etp = tp the best.
TEST(CliFramework, PlanTableShowsExpertTensorParallelBesideEp) {
  const Result r = run_cli({"examples/models/DeepSeek-V3.json", "--gpus", "512", "--framework", "megatron-core", "--top", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t rec = r.out.find("recommended:");
  ASSERT_NE(rec, std::string::npos) << r.out;
  const std::string recommended = r.out.substr(rec, r.out.find('\n', rec) - rec);
  const auto value_of = [&](const std::string& key) -> std::string {
    const size_t at = recommended.find(" " + key + "=");
    if (at == std::string::npos) return "";
    const size_t from = at + key.size() + 2;
    return recommended.substr(from, recommended.find(' ', from) - from);
  };
  // The search's best plan here carves etp from tp (see the recommended line); without it this test
  // would check nothing, so its absence fails.
  ASSERT_NE(value_of("etp"), "") << recommended;
  const std::string cell = " " + value_of("ep") + "/" + value_of("etp") + " ";
  const size_t row = r.out.find("\n   1 ");
  ASSERT_NE(row, std::string::npos) << r.out;
  const std::string first_row = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
  EXPECT_NE(first_row.find(cell), std::string::npos) << "row: " << first_row << "\nrecommended: " << recommended;
  EXPECT_NE(r.out.find("ep column: ep/etp where etp != tp"), std::string::npos);
}

// Block recompute (megatron-core): a plan that recomputes N layers per stage reads "full:N" in its
// table row and carries recompute_layers N in the JSON; without a framework that offers it, no plan
// does. 65,536-token sequences on 8 H100s: some layouts fit only with a few layers recomputed.
TEST(CliFramework, BlockRecomputePlansReadTheSameInTheTableAndTheJson) {
  const std::vector<std::string> args = {kLlama8B, "--gpus", "8", "--seq-len", "65536", "--global-batch", "16"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_cli(a);
  };
  const Result table = with({"--framework", "megatron-core"});
  const Result doc = with({"--framework", "megatron-core", "--json"});
  ASSERT_EQ(table.exit_code, 0) << describe(table);
  const json plans = parse_json_or_fail(doc)["plans"];
  int blocks = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const json& plan = plans[i]["plan"];
    if (!plan.contains("recompute_layers")) continue;
    ++blocks;
    EXPECT_EQ(plan["recompute"], "full");
    const std::string rank = "\n" + std::string(i + 1 < 10 ? "   " : "  ") + std::to_string(i + 1) + " ";
    const size_t row = table.out.find(rank);
    ASSERT_NE(row, std::string::npos) << table.out;
    const std::string line = table.out.substr(row + 1, table.out.find('\n', row + 1) - row - 1);
    EXPECT_NE(line.find(" full:" + std::to_string(plan["recompute_layers"].get<int64_t>()) + " "), std::string::npos)
        << line;
  }
  EXPECT_GT(blocks, 0) << "no block-recompute plan in the top five: " << table.out;
  EXPECT_NE(table.out.find("recompute full:N = the first N layers of each (virtual) stage"), std::string::npos);
  const Result plain = with({});
  ASSERT_EQ(plain.exit_code, 0) << describe(plain);
  for (size_t at = plain.out.find("full:"); at != std::string::npos; at = plain.out.find("full:", at + 1))
    EXPECT_FALSE(std::isdigit(static_cast<unsigned char>(plain.out[at + 5]))) << plain.out;  // the legend's "full:N" only
}

TEST(CliFramework, NanotronSplitsThePipelineByComputeAndSaysWhenItCannot) {
  // nanotron has no interleaved schedule; its compute-balanced split of Llama-3.1-8B's 32 layers on
  // pp 4 is 9 | 9 | 8 | 6 (the LM head weighs 2.16 layers), which the estimate accepts.
  const Result interleaved = run_cli({"estimate", kLlama8B, "--gpus", "8", "--framework", "nanotron", "--plan",
                                      R"({"pp":4,"vpp":2,"dp_shard":2})"});
  EXPECT_NE(interleaved.exit_code, 0) << describe(interleaved);
  EXPECT_NE(interleaved.err.find("vpp=2: this framework places layers by compute (nanotron) and has no interleaved schedule; use vpp=1"),
            std::string::npos) << interleaved.err;
  const Result four = run_cli({"estimate", kLlama8B, "--gpus", "8", "--framework", "nanotron", "--plan", R"({"pp":4,"dp_shard":2})"});
  EXPECT_EQ(four.exit_code, 0) << describe(four);
}

// A host-bound plan (Llama-3.1-8B, tp 8, one 256-token sequence: kernels of a few microseconds)
// names the eager launches as its bottleneck, and the text's "of which" line and the JSON's
// host_wait_s are the same number, inside compute; a plan whose kernels outlast their launches
// (8192 tokens a GPU) has neither.
TEST(CliFramework, HostBoundPlansSayHowMuchOfComputeWaitsForLaunches) {
  const std::vector<std::string> small = {"estimate", kLlama8B, "--gpus", "8", "--seq-len", "256", "--global-batch", "1",
                                          "--plan", "{\"tp\":8}"};
  std::vector<std::string> small_json = small;
  small_json.push_back("--json");
  const Result text = run_cli(small), doc = run_cli(small_json);
  ASSERT_EQ(text.exit_code, 0) << describe(text);
  const json e = parse_json_or_fail(doc);
  const double wait_s = e["host_wait_s"].get<double>();
  EXPECT_GT(wait_s, 0.0);
  EXPECT_LT(wait_s, e["time"]["compute_s"].get<double>());
  EXPECT_EQ(e["bottleneck"], "host dispatch (eager kernel launches)");
  char line[64];
  std::snprintf(line, sizeof line, "of which %.3f s waits for the host", wait_s);
  EXPECT_NE(text.out.find(line), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("bottleneck: host dispatch (eager kernel launches)"), std::string::npos) << text.out;

  const Result large = run_cli({"estimate", kLlama8B, "--gpus", "8", "--seq-len", "8192", "--global-batch", "8", "--plan",
                                "{\"dp_shard\":8}", "--json"});
  ASSERT_EQ(large.exit_code, 0) << describe(large);
  EXPECT_EQ(parse_json_or_fail(large)["host_wait_s"].get<double>(), 0.0);
}

// A framework named with its features as words: the EP all-to-all overlap of Megatron-Core hides
// part of the MoE dispatch, so the same expert-parallel plan estimates faster, and stderr says how the
// phrase was read (a misspelt feature shows as read without it, changing nothing).
TEST(CliFramework, FeaturesNamedInThePhraseAreAppliedAndSaid) {
  const std::string moe = std::string(MGT_SOURCE_DIR) + "/examples/models/Qwen3-30B-A3B.json";
  const std::vector<std::string> base{"estimate", moe, "--gpus", "8", "--cluster", "b200", "--seq-len", "2048", "--global-batch", "64",
                                      "--plan", R"({"dp_shard":8,"ep":8,"zero_stage":1})", "--json", "--framework"};
  auto with = [&base](const std::string& framework) {
    std::vector<std::string> args = base;
    args.push_back(framework);
    return run_cli(args);
  };
  const Result plain = with("megatron-core"), overlap = with("megatron-core ep-a2a-overlap"),
               typo = with("megatron-core ep-a2a-overlp");
  ASSERT_EQ(plain.exit_code, 0) << describe(plain);
  ASSERT_EQ(overlap.exit_code, 0) << describe(overlap);
  ASSERT_EQ(typo.exit_code, 0) << describe(typo);
  const auto exposed_ep = [](const Result& r) { return parse_json_or_fail(r)["time"]["exposed_ep_s"].get<double>(); };
  EXPECT_LT(exposed_ep(overlap), exposed_ep(plain));
  EXPECT_LT(step_time(overlap), step_time(plain));
  EXPECT_EQ(step_time(typo), step_time(plain));
  EXPECT_TRUE(contains(overlap.err, "megatron-core with ep-a2a-overlap")) << overlap.err;
  EXPECT_TRUE(contains(typo.err, "read as megatron-core")) << typo.err;
  EXPECT_FALSE(contains(typo.err, "with ep-a2a-overlap")) << typo.err;
}

}  // namespace
}  // namespace mgt_cli_test
