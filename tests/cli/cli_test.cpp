// End-to-end tests of the mgt-plan binary (README.md "Use", docs/formats.md): the mgt.plans/1 JSON document, the text
// table, determinism, `estimate` and `inspect`, "no valid plan" (exit 1), the framework exporters,
// --help, the precision default and simulate --json. Bad input: bad_input_test.cpp; flag dialect and
// suggestions: usage_test.cpp. The binary runs with cwd = the repository root (cli_util.hpp).
#include "cli_util.hpp"

namespace {

using namespace mgt_cli_test;
namespace fs = std::filesystem;
using nlohmann::json;

// ------------------------------------------------------------------------------------------------
// (1) mgt.plans/1

TEST(CliSearchJson, Llama8BOn8GpusHasEveryDocumentedKey) {
  const Result r = run_cli({kLlama8B, "--gpus", "8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = parse_json_or_fail(r);
  ASSERT_TRUE(doc.is_object()) << describe(r);

  expect_string(doc, "format");
  EXPECT_EQ(doc.value("format", ""), "mgt.plans/1");
  expect_object(doc, "model");
  expect_object(doc, "cluster");
  expect_object(doc, "settings");
  expect_int(doc, "evaluated");
  expect_object(doc, "rejected");
  ASSERT_TRUE(doc.contains("plans"));
  ASSERT_TRUE(doc.at("plans").is_array());
  ASSERT_FALSE(HasFatalFailure());

  const json& model = doc.at("model");
  expect_string(model, "name");
  expect_string(model, "path");
  expect_string(model, "architecture");
  expect_int(model, "params_total");
  EXPECT_EQ(model.value("name", ""), "Llama-3.1-8B");
  EXPECT_EQ(model.value("params_total", int64_t(0)), 8030261248);

  const json& cluster = doc.at("cluster");
  expect_string(cluster, "name");
  expect_string(cluster, "gpu");
  expect_int(cluster, "num_gpus");
  expect_int(cluster, "gpus_per_node");
  expect_int(cluster, "hbm_bytes");
  EXPECT_EQ(cluster.value("name", ""), "h100-sxm");
  EXPECT_EQ(cluster.value("num_gpus", int64_t(0)), 8);
  EXPECT_EQ(cluster.value("hbm_bytes", int64_t(0)), kH100Hbm);

  const json& settings = doc.at("settings");
  expect_int(settings, "seq_len");
  expect_int(settings, "global_batch_tokens");
  expect_int(settings, "global_batch_seqs");
  EXPECT_EQ(settings.value("seq_len", int64_t(0)), 8192);
  EXPECT_EQ(settings.value("global_batch_tokens", int64_t(0)), 4194304);
  EXPECT_EQ(settings.value("global_batch_seqs", int64_t(0)), 512);

  const json& plans = doc.at("plans");
  ASSERT_FALSE(plans.empty());
  EXPECT_LE(plans.size(), 5u) << "--top defaults to 5";
  int64_t rank = 1;
  double previous_tokens = INFINITY;
  for (const json& entry : plans) {
    SCOPED_TRACE("plan rank " + std::to_string(rank));
    check_plan_entry(entry);
    if (HasFatalFailure()) return;
    EXPECT_EQ(entry.at("rank").get<int64_t>(), rank);
    const double tokens = entry.at("tokens_per_s_per_gpu").get<double>();
    EXPECT_LE(tokens, previous_tokens) << "plans are ranked by tokens/s/GPU, best first";
    previous_tokens = tokens;
    const json& p = entry.at("plan");
    const int64_t dp_rep = p.at("dp_replicate"), dp_shard = p.at("dp_shard"), tp = p.at("tp"), cp = p.at("cp");
    EXPECT_EQ(dp_rep * dp_shard * tp * cp * p.at("pp").get<int64_t>(), 8) << p.dump();
    EXPECT_EQ(p.at("micro_batch").get<int64_t>() * p.at("grad_accum").get<int64_t>() * dp_rep * dp_shard, 512)
        << "micro_batch * grad_accum * dp_replicate * dp_shard is the global batch of 512 sequences: " << p.dump();
    EXPECT_LE(entry.at("memory").at("peak_bytes").get<int64_t>(), kH100Hbm) << "every listed plan fits";
    EXPECT_EQ(p.at("sequence_parallel").get<bool>(), tp > 1);
    EXPECT_EQ(p.at("zero_stage").get<int64_t>(), dp_shard > 1 ? 3 : 0);
    ++rank;
  }

  const json& top = plans.front();
  EXPECT_LE(top.at("memory").at("peak_bytes").get<int64_t>(), kH100Hbm);
  EXPECT_GE(top.at("mfu").get<double>(), 0.3);
  EXPECT_LE(top.at("mfu").get<double>(), 0.65);

  int64_t rejected = 0;
  for (const auto& [reason, count] : doc.at("rejected").items()) {
    EXPECT_FALSE(reason.empty());
    ASSERT_TRUE(count.is_number_integer()) << reason;
    EXPECT_GT(count.get<int64_t>(), 0) << reason;
    rejected += count.get<int64_t>();
  }
  const int64_t evaluated = doc.at("evaluated").get<int64_t>();
  EXPECT_GE(evaluated, rejected + int64_t(plans.size()));
  // At least the 20 ordered factorisations of 8 into dp_replicate x dp_shard x cp x tp, with 5
  // micro-batches and 3 recompute modes (pipeline and expert candidates come on top).
  EXPECT_GE(evaluated, 300);
}

TEST(CliSearchJson, TopFlagControlsPlanCountAndValidPlusRejectedIsEvaluated) {
  const Result all = run_cli({kLlama8B, "--gpus", "8", "--json", "--top", "1000"});
  ASSERT_EQ(all.exit_code, 0) << describe(all);
  const json doc = parse_json_or_fail(all);
  ASSERT_TRUE(doc.is_object());
  int64_t rejected = 0;
  for (const auto& [_, count] : doc.at("rejected").items()) rejected += count.get<int64_t>();
  // With --top large enough every valid plan is listed, so valid + rejected == evaluated exactly.
  EXPECT_EQ(int64_t(doc.at("plans").size()) + rejected, doc.at("evaluated").get<int64_t>());

  const Result one = run_cli({kLlama8B, "--gpus", "8", "--json", "--top", "1"});
  ASSERT_EQ(one.exit_code, 0) << describe(one);
  const json first = parse_json_or_fail(one);
  ASSERT_EQ(first.at("plans").size(), 1u);
  EXPECT_EQ(first.at("plans")[0], doc.at("plans")[0]) << "the best plan does not depend on --top";

  const Result zero = run_cli({kLlama8B, "--gpus", "8", "--top", "0"});
  EXPECT_EQ(zero.exit_code, 2) << describe(zero);
  EXPECT_TRUE(contains(zero.err, "--top")) << describe(zero);
}

// ------------------------------------------------------------------------------------------------
// (2) the text table

TEST(CliSearchText, TableHeaderRejectionsAndRecommendation) {
  const Result r = run_cli({kLlama8B, "--gpus", "8"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // The header states every default.
  for (const char* word : {"model:", "Llama-3.1-8B", "cluster:", "8 x H100", "h100-sxm, the default", "settings:",
                           "seq_len 8192 (default)", "4,194,304 tokens", "512 sequences (default)", "bf16",
                           "fp32 master weights", "AdamW"})
    EXPECT_TRUE(contains(r.out, word)) << "missing \"" << word << "\"\n" << describe(r);
  // The table's column headings.
  for (const char* word : {"rank", "dp_rep", "dp_shard", "tp", "cp", "mbs", "ga", "recompute", "mem GiB (headroom)",
                           "step s", "tok/s/GPU", "MFU", "bottleneck"})
    EXPECT_TRUE(contains(r.out, word)) << "missing column \"" << word << "\"\n" << describe(r);
  EXPECT_TRUE(contains(r.out, "evaluated ")) << describe(r);
  EXPECT_TRUE(contains(r.out, " candidates: ")) << describe(r);
  EXPECT_TRUE(contains(r.out, "recommended: ")) << describe(r);

  // The counts line adds up: valid + rejected == evaluated.
  long long evaluated = -1, valid = -1, rejected = -1;
  for (const auto& line : lines_of(r.out))
    if (line.rfind("evaluated ", 0) == 0) {
      std::string digits;
      for (char c : line)
        if (c != ',') digits += c;
      ASSERT_EQ(std::sscanf(digits.c_str(), "evaluated %lld candidates: %lld valid %lld rejected", &evaluated, &valid,
                            &rejected),
                3)
          << line;
    }
  EXPECT_EQ(valid + rejected, evaluated);

  // The recommended line names the JSON's top plan.
  const Result j = run_cli({kLlama8B, "--gpus", "8", "--json"});
  ASSERT_EQ(j.exit_code, 0) << describe(j);
  const json doc = parse_json_or_fail(j);
  ASSERT_FALSE(doc.at("plans").empty());
  const std::string expected = "recommended: " + plan_line(doc.at("plans")[0].at("plan")) + " -- ";
  EXPECT_TRUE(contains(r.out, expected)) << "expected \"" << expected << "\"\n" << describe(r);
  int64_t rejected_json = 0;
  for (const auto& [_, count] : doc.at("rejected").items()) rejected_json += count.get<int64_t>();
  EXPECT_EQ(rejected, rejected_json);
  EXPECT_EQ(evaluated, doc.at("evaluated").get<int64_t>());
  EXPECT_TRUE(r.err.empty()) << describe(r);
}

// ------------------------------------------------------------------------------------------------
// (3) determinism

TEST(CliDeterminism, TwoRunsAreByteIdentical) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{kLlama8B, "--gpus", "8"}, std::vector<std::string>{kLlama8B, "--gpus", "8", "--json"},
        std::vector<std::string>{kLlama8B, "--gpus", "16", "--top", "50", "--json"}}) {
    const Result a = run_cli(args);
    const Result b = run_cli(args);
    ASSERT_EQ(a.exit_code, 0) << describe(a);
    EXPECT_EQ(a.exit_code, b.exit_code);
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(a.err, b.err);
  }
}

// ------------------------------------------------------------------------------------------------
// (4) estimate

TEST(CliEstimate, OnePlanEntryWithDerivedDefaults) {
  const Result r = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":4,"tp":2})", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json entry = parse_json_or_fail(r);
  ASSERT_TRUE(entry.is_object()) << describe(r);
  check_plan_entry(entry);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(entry.at("rank").get<int64_t>(), 1);
  const json& p = entry.at("plan");
  EXPECT_EQ(p.at("dp_shard").get<int64_t>(), 4);
  EXPECT_EQ(p.at("tp").get<int64_t>(), 2);
  EXPECT_EQ(p.at("dp_replicate").get<int64_t>(), 1);
  EXPECT_EQ(p.at("cp").get<int64_t>(), 1);
  EXPECT_EQ(p.at("micro_batch").get<int64_t>(), 1);
  EXPECT_EQ(p.at("sequence_parallel").get<bool>(), true);
  EXPECT_EQ(p.at("zero_stage").get<int64_t>(), 3);
  EXPECT_EQ(p.at("grad_accum").get<int64_t>(), 512 / (4 * 1));
  EXPECT_EQ(p.at("recompute").get<std::string>(), "none");
  EXPECT_FALSE(entry.contains("plans")) << "estimate --json prints one plan entry, not a plans document";
}

TEST(CliEstimate, TextBreakdownAndPlanFile) {
  TempDir dir;
  const std::string plan_file = dir.write("plan.json", R"({"format":"mgt.plan/1","dp_shard":8,"recompute":"full"})");
  const Result r = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", plan_file});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "plan: dp_replicate=1 dp_shard=8 tp=1 cp=1 mbs=1 ga=64 recompute=full")) << describe(r);
  EXPECT_TRUE(contains(r.out, "memory per GPU")) << describe(r);
  EXPECT_TRUE(contains(r.out, "step time")) << describe(r);
  EXPECT_FALSE(contains(r.out, "does not fit")) << describe(r);
}

TEST(CliEstimate, PlanThatDoesNotFitExitsOne) {
  // 16 sequences of 8192 tokens per micro-batch without recompute cannot fit in 80 GiB.
  const Result r = run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8,"micro_batch":16})"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(contains(r.out, "does not fit")) << describe(r);
  const Result j =
      run_cli({"estimate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8,"micro_batch":16})", "--json"});
  EXPECT_EQ(j.exit_code, 1) << describe(j);
  const json entry = parse_json_or_fail(j);
  ASSERT_TRUE(entry.is_object());
  EXPECT_GT(entry.at("memory").at("peak_bytes").get<int64_t>(), kH100Hbm);
  EXPECT_LT(entry.at("memory").at("headroom_bytes").get<int64_t>(), 0);
}

// ------------------------------------------------------------------------------------------------
// (5) inspect on every example HF config

TEST(CliInspect, ParamsMatchPublishedCountsForEveryExample) {
  const fs::path models = fs::path(MGT_SOURCE_DIR) / "examples" / "models";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(models)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".json") continue;
    if (name.size() >= 11 && name.compare(name.size() - 11, 11, ".graph.json") == 0) continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files.size(), 14u);
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    const json config = json::parse(slurp(file));
    ASSERT_TRUE(config.contains("_published_params"));
    const json& pub = config.at("_published_params");
    // DeepSeek-V3: main model plus its multi-token-prediction module (shared embedding and head).
    const int64_t expected_total = pub.contains("computed_trained_with_mtp") ? pub.at("computed_trained_with_mtp").get<int64_t>()
                                                                              : pub.at("total").get<int64_t>();
    const std::string rel = "examples/models/" + file.filename().string();
    const Result r = run_cli({"inspect", rel, "--json"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    const json doc = parse_json_or_fail(r);
    ASSERT_TRUE(doc.is_object());
    EXPECT_EQ(doc.value("format", ""), "mgt.inspect/1");
    ASSERT_TRUE(doc.contains("params_total"));
    EXPECT_EQ(doc.at("params_total").get<int64_t>(), expected_total);
    EXPECT_GT(doc.value("training_flops_per_token", 0.0), 0.0);
    const bool moe = pub.contains("active_per_token_computed") || pub.contains("computed_active");
    if (moe) {
      const int64_t expected_active = pub.contains("computed_active_with_mtp")
                                          ? pub.at("computed_active_with_mtp").get<int64_t>()
                                          : pub.at("active_per_token_computed").get<int64_t>();
      ASSERT_TRUE(doc.contains("params_active")) << r.out.substr(0, 500);
      EXPECT_EQ(doc.at("params_active").get<int64_t>(), expected_active);
      EXPECT_LT(doc.at("params_active").get<int64_t>(), doc.at("params_total").get<int64_t>());
    }
  }
}

// ------------------------------------------------------------------------------------------------
// (7) no valid plan: exit 1

TEST(CliNoPlan, Llama405BNeedsMoreThan8Gpus) {
  const Result r = run_cli({"examples/models/Llama-3.1-405B.json", "--gpus", "8"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "needs at least")) << describe(r);
  EXPECT_TRUE(contains(r.err, "on 8 every plan needs more than")) << describe(r);
  EXPECT_EQ(lines_of(r.err).size(), 1u) << describe(r);
  EXPECT_TRUE(contains(r.out, "evaluated ")) << "the rejection summary is still printed\n" << describe(r);
  EXPECT_FALSE(contains(r.out, "recommended:")) << describe(r);

  const Result j = run_cli({"examples/models/Llama-3.1-405B.json", "--gpus", "8", "--json"});
  EXPECT_EQ(j.exit_code, 1) << describe(j);
  const json doc = parse_json_or_fail(j);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.value("format", ""), "mgt.plans/1");
  EXPECT_TRUE(doc.at("plans").empty());
  int64_t rejected = 0;
  for (const auto& [_, count] : doc.at("rejected").items()) rejected += count.get<int64_t>();
  EXPECT_EQ(rejected, doc.at("evaluated").get<int64_t>());

  const Result e = run_cli({"examples/models/Llama-3.1-405B.json", "--gpus", "8", "--emit", "torchtitan"});
  EXPECT_EQ(e.exit_code, 1) << describe(e);
  EXPECT_TRUE(e.out.empty()) << describe(e);
}

TEST(CliNoPlan, EveryCandidateBreaksARule) {
  // 7 GPUs for Llama-3.1-8B: tp=7 divides no head count, cp=7 does not divide 8192 into 14 chunks, and
  // 512 sequences do not split over 7 replicas.
  const Result r = run_cli({kLlama8B, "--gpus", "7"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "no valid plan")) << describe(r);
  EXPECT_EQ(lines_of(r.err).size(), 1u) << describe(r);
  EXPECT_TRUE(contains(r.out, " candidates: 0 valid, ")) << describe(r);
  EXPECT_TRUE(contains(r.out, "tp=7 must divide num_attention_heads=32")) << describe(r);
  EXPECT_FALSE(contains(r.out, "GiB of HBM")) << "no candidate got as far as the memory check\n" << describe(r);

  const Result j = run_cli({kLlama8B, "--gpus", "7", "--json"});
  EXPECT_EQ(j.exit_code, 1) << describe(j);
  const json doc = parse_json_or_fail(j);
  ASSERT_TRUE(doc.is_object());
  EXPECT_TRUE(doc.at("plans").empty());
  int64_t rejected = 0;
  for (const auto& [_, count] : doc.at("rejected").items()) rejected += count.get<int64_t>();
  EXPECT_EQ(rejected, doc.at("evaluated").get<int64_t>());
  EXPECT_GE(rejected, 60);

  // One sequence per step on 13 GPUs (prime): 13 replicas cannot share one sequence, tp=13 divides no
  // head count and cp=13 does not cut 8192 tokens into 26 chunks.
  const Result small = run_cli({kLlama8B, "--gpus", "13", "--global-batch-tokens", "8192"});
  EXPECT_EQ(small.exit_code, 1) << describe(small);
  EXPECT_TRUE(contains(small.err, "no valid plan")) << describe(small);
}

// ------------------------------------------------------------------------------------------------
// (8) --emit

std::string num(const json& v) { return std::to_string(v.get<int64_t>()); }

// The expected lines of each format for `plan` (the top plan of the search --emit runs).
std::vector<std::string> expected_lines(const std::string& format, const json& plan, int64_t seqs) {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"accelerate",
       {"num_processes: 16", "parallelism_config_dp_shard_size: " + num(plan["dp_shard"]),
        "parallelism_config_dp_replicate_size: " + num(plan["dp_replicate"]),
        "parallelism_config_tp_size: " + num(plan["tp"]), "parallelism_config_cp_size: " + num(plan["cp"])}},
      {"axolotl",
       {"sequence_len: 8192", "micro_batch_size: " + num(plan["micro_batch"]),
        "gradient_accumulation_steps: " + num(plan["grad_accum"]), "dp_shard_size: " + num(plan["dp_shard"]),
        "dp_replicate_size: " + num(plan["dp_replicate"]), "tensor_parallel_size: " + num(plan["tp"]),
        "context_parallel_size: " + num(plan["cp"])}},
      {"torchtitan",
       {"local_batch_size = " + num(plan["micro_batch"]), "global_batch_size = " + std::to_string(seqs),
        "seq_len = 8192", "data_parallel_replicate_degree = " + num(plan["dp_replicate"]),
        "data_parallel_shard_degree = " + num(plan["dp_shard"]), "tensor_parallel_degree = " + num(plan["tp"]),
        "context_parallel_degree = " + num(plan["cp"])}},
      {"megatron",
       {"--tensor-model-parallel-size " + num(plan["tp"]), "--context-parallel-size " + num(plan["cp"]),
        "--micro-batch-size " + num(plan["micro_batch"]), "--global-batch-size " + std::to_string(seqs),
        "--seq-length 8192"}},
      {"deepspeed",
       {"\"train_batch_size\": " + std::to_string(seqs),
        "\"train_micro_batch_size_per_gpu\": " + num(plan["micro_batch"]),
        "\"gradient_accumulation_steps\": " + num(plan["grad_accum"])}},
  };
  return expected.at(format);
}

// --emit X writes the top plan of the search that X's framework offers and prices (--framework).
TEST(CliEmit, EveryFormatMatchesTheTopPlan) {
  const std::map<std::string, std::string> framework_of = {{"accelerate", "pytorch-fsdp"}, {"axolotl", "pytorch-fsdp"},
                                                           {"torchtitan", "torchtitan"}, {"megatron", "megatron-core"},
                                                           {"deepspeed", "deepspeed"}};
  for (const auto& [format, framework] : framework_of) {
    SCOPED_TRACE("--emit " + format);
    const Result j = run_cli({kLlama8B, "--gpus", "16", "--json", "--framework", framework});
    ASSERT_EQ(j.exit_code, 0) << describe(j);
    const json doc = parse_json_or_fail(j);
    ASSERT_FALSE(doc.at("plans").empty());
    const json plan = doc.at("plans")[0].at("plan");
    const int64_t seqs = doc.at("settings").at("global_batch_seqs").get<int64_t>();
    const std::string recommended = "recommended: " + plan_line(plan) + " -- ";
    const std::vector<std::string> lines = expected_lines(format, plan, seqs);
    const Result r = run_cli({kLlama8B, "--gpus", "16", "--emit", format});
    const int64_t tp = plan.at("tp"), cp = plan.at("cp"), pp = plan.value("pp", int64_t(1)),
                  ep = plan.value("ep", int64_t(1));
    const bool inexpressible = (format == "deepspeed" && (tp > 1 || cp > 1 || pp > 1 || ep > 1)) ||
                               ((format == "accelerate" || format == "axolotl") && (pp > 1 || ep > 1));
    if (inexpressible) {
      // The framework cannot express this plan; the exporter must say so rather than emit a wrong file.
      EXPECT_NE(r.exit_code, 0) << describe(r);
      EXPECT_TRUE(contains(r.err, "--emit " + format)) << describe(r);
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    for (const auto& line : lines) EXPECT_TRUE(contains(r.out, line)) << "missing \"" << line << "\"\n" << describe(r);
    EXPECT_TRUE(contains(r.out, "mgt-plan")) << "a header names the generator\n" << describe(r);
    EXPECT_TRUE(contains(r.err, recommended)) << "stderr names the exported plan\n" << describe(r);
    EXPECT_FALSE(contains(r.out, "recommended:")) << "stdout holds only the config\n" << describe(r);
    if (format == "deepspeed") {
      // The DeepSpeed output is plain JSON.
      EXPECT_TRUE(json::accept(r.out)) << describe(r);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// (9) an mgt.graph/1 model

TEST(CliGraphModel, VitBasePlans) {
  const fs::path vit = fs::path(MGT_SOURCE_DIR) / "examples" / "models" / "vit-base.graph.json";
  if (!fs::exists(vit)) GTEST_SKIP() << "no " << vit;
  const Result r = run_cli({"examples/models/vit-base.graph.json", "--gpus", "8"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "recommended: ")) << describe(r);
  const Result i = run_cli({"inspect", "examples/models/vit-base.graph.json", "--json"});
  EXPECT_EQ(i.exit_code, 0) << describe(i);
}

TEST(CliFamilies, EncodersEncoderDecoderAndGlmPlanOnEightGpus) {
  // Issue 16: each new family example gets a plan on 8 GPUs or a "needs at least N GPUs" answer;
  // these all fit (the largest, GLM-4-9B, in 66.7 GiB of 80 under FSDP).
  for (const char* name : {"GLM-4-9B-Chat-HF", "GLM-4-9B-0414", "BERT-base-uncased", "ViT-base-patch16-224",
                           "Flan-T5-base", "CLIP-ViT-B-32"}) {
    const Result r = run_cli({"examples/models/families/" + std::string(name) + ".json", "--gpus", "8"});
    EXPECT_EQ(r.exit_code, 0) << name << describe(r);
    EXPECT_TRUE(contains(r.out, "recommended: ")) << name << describe(r);
  }
  // DeepSeek-V3 with its MTP module does not fit on 8 GPUs of 80 GiB: one line naming the count.
  const Result ds = run_cli({"examples/models/DeepSeek-V3.json", "--gpus", "8"});
  EXPECT_EQ(ds.exit_code, 1) << describe(ds);
  EXPECT_TRUE(contains(ds.err, "needs at least")) << describe(ds);
}

TEST(CliGraphModel, MlpPlans) {
  const Result r = run_cli({"examples/models/mlp.graph.json", "--gpus", "8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = parse_json_or_fail(r);
  ASSERT_FALSE(doc.at("plans").empty());
  for (const json& entry : doc.at("plans"))
    EXPECT_EQ(entry.at("plan").at("cp").get<int64_t>(), 1) << "no attention, so no context parallelism";
}

// ------------------------------------------------------------------------------------------------
// (10) --help

TEST(CliHelp, ExitsZeroAndDefinesMfu) {
  const Result r = run_cli({"--help"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "MFU")) << describe(r);
  EXPECT_TRUE(contains(r.out, "model FLOPs")) << describe(r);
  EXPECT_TRUE(contains(r.out, "6 x")) << describe(r);
  EXPECT_TRUE(contains(r.out, "peak")) << describe(r);
  EXPECT_TRUE(contains(r.out, "--gpus")) << describe(r);
  EXPECT_TRUE(contains(r.out, "Exit status")) << describe(r);
  for (const char* sub : {"estimate", "inspect"}) {
    const Result s = run_cli({sub, "--help"});
    EXPECT_EQ(s.exit_code, 0) << describe(s);
    EXPECT_TRUE(contains(s.out, "--json")) << describe(s);
  }
}

}  // namespace

namespace {

// A CPU cluster (gpu.arch cpu, as probe --backend cpu writes) plans in fp32 unless --precision says
// otherwise; a GPU cluster keeps bf16 mixed precision.
TEST(CliPrecision, CpuClusterDefaultsToFp32) {
  TempDir dir;
  json cluster = json::parse(slurp(fs::path(MGT_SOURCE_DIR) / "examples" / "clusters" / "h100-sxm.json"));
  cluster["gpu"]["arch"] = "cpu";
  const std::string cpu = dir.write("cpu.json", cluster.dump());
  auto dtype_of = [](const Result& r) {
    return json::parse(r.out).at("settings").value("compute_dtype", std::string("missing"));
  };
  const Result on_cpu = run_cli({kLlama8B, "--gpus", "8", "--cluster", cpu, "--json", "--top", "1"});
  ASSERT_EQ(on_cpu.exit_code, 0) << describe(on_cpu);
  EXPECT_EQ(dtype_of(on_cpu), "f32");
  const Result forced = run_cli({kLlama8B, "--gpus", "8", "--cluster", cpu, "--precision", "bf16", "--json", "--top", "1"});
  ASSERT_EQ(forced.exit_code, 0) << describe(forced);
  EXPECT_EQ(dtype_of(forced), "bf16");
  const Result on_gpu = run_cli({kLlama8B, "--gpus", "8", "--json", "--top", "1"});
  ASSERT_EQ(on_gpu.exit_code, 0) << describe(on_gpu);
  EXPECT_EQ(dtype_of(on_gpu), "bf16");
  const Result text = run_cli({kLlama8B, "--gpus", "8", "--cluster", cpu, "--top", "1"});
  EXPECT_NE(text.out.find("fp32 compute"), std::string::npos) << text.out;
}

}  // namespace

namespace {

// simulate --json (mgt.simulation/1): the analytic figures beside the simulated ones, memory by kind
// summing to the allocated peak, and the buffers live then, largest first. For Qwen3-8B with
// micro-batch 2 x 1024 tokens the largest is the loss's working set: 2048 x 151936 logits x 10 bytes
// (bf16 logits, fp32 upcast, fp32 gradient; docs/cost-model.md §4.3), during the head's backward.
TEST(CliSimulate, JsonHasAnalyticFiguresAndWhatIsLiveAtThePeak) {
  const Result r = run_cli({"simulate", "examples/models/Qwen3-8B.json", "--gpus", "32", "--seq-len", "1024",
                            "--global-batch-tokens", "64K", "--plan",
                            R"({"dp_shard":16,"pp":2,"micro_batch":2,"recompute":"full"})", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("format"), "mgt.simulation/1");
  EXPECT_GT(doc.at("step_time_s").get<double>(), 0.0);
  EXPECT_GT(doc.at("analytic").at("step_time_s").get<double>(), 0.0);
  EXPECT_GT(doc.at("analytic").at("peak_bytes").get<int64_t>(), 0);
  const json& memory = doc.at("memory");
  int64_t by_kind = 0;
  for (const auto& [kind, bytes] : memory.at("by_kind").items()) by_kind += bytes.get<int64_t>();
  EXPECT_EQ(by_kind, memory.at("peak_allocated_bytes").get<int64_t>());
  const json& live = memory.at("largest_live");
  ASSERT_EQ(live.size(), 8u);
  EXPECT_EQ(live[0].at("name"), "logits[head.0]");
  EXPECT_EQ(live[0].at("kind"), "logits");
  EXPECT_EQ(live[0].at("bytes").get<int64_t>(), int64_t{2048} * 151936 * 10);
  int64_t listed = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    listed += live[i].at("bytes").get<int64_t>();
    if (i > 0) {
      EXPECT_LE(live[i].at("bytes").get<int64_t>(), live[i - 1].at("bytes").get<int64_t>());
    }
  }
  EXPECT_LE(listed, memory.at("peak_allocated_bytes").get<int64_t>());
}

// --document-tokens on the planning commands: packed documents make attention cheaper (the same plan
// estimates faster at the same tokens), the settings line says so, and a document longer than a
// sequence is one clear error.
TEST(CliPlanning, PackedDocumentsAreAnInputOfThePlanningCommands) {
  const std::vector<std::string> base{"estimate", kLlama8B, "--gpus", "8", "--seq-len", "8192", "--global-batch", "32",
                                      "--plan", R"({"dp_shard":8})", "--json"};
  std::vector<std::string> packed_args = base;
  packed_args.insert(packed_args.end(), {"--document-tokens", "512"});
  const Result whole = run_cli(base), packed = run_cli(packed_args);
  ASSERT_EQ(whole.exit_code, 0) << describe(whole);
  ASSERT_EQ(packed.exit_code, 0) << describe(packed);
  EXPECT_LT(parse_json_or_fail(packed)["step_time_s"].get<double>(), parse_json_or_fail(whole)["step_time_s"].get<double>());
  const Result table = run_cli({kLlama8B, "--gpus", "8", "--seq-len", "8192", "--document-tokens", "1K", "--top", "1"});
  ASSERT_EQ(table.exit_code, 0) << describe(table);
  EXPECT_TRUE(contains(table.out, "packed: documents of 1024 tokens")) << table.out;
  const Result bad = run_cli({"estimate", kLlama8B, "--gpus", "8", "--seq-len", "4096", "--document-tokens", "8192",
                              "--plan", R"({"dp_shard":8})"});
  EXPECT_EQ(bad.exit_code, 2) << describe(bad);
  EXPECT_TRUE(contains(bad.err, "--document-tokens")) << bad.err;
  EXPECT_TRUE(contains(bad.err, "longer than a sequence")) << bad.err;
  // An exported config does not carry the data pipeline's packing: said, not dropped silently.
  const Result emitted = run_cli({kLlama8B, "--gpus", "8", "--seq-len", "4096", "--document-tokens", "512", "--emit", "axolotl"});
  ASSERT_EQ(emitted.exit_code, 0) << describe(emitted);
  EXPECT_TRUE(contains(emitted.err, "does not pack data")) << emitted.err;
}

}  // namespace
