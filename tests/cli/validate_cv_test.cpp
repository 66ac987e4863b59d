// `mgt-plan validate --cv` end to end on examples/validation without llm-foundry's 216 rows and with
// one coordinate-descent round per fit, so the test stays within seconds of CPU on a loaded 2-core
// machine (the CLI default, every file and 8 rounds, costs ~25 s of CPU): the document's shape, the same rows compared as plain
// `validate`, every fitted value inside its bounds, a source without compared rows predicted the
// same in and out of sample, and Spearman figures that are correlations of groups of >= 4 runs.
#include "cli_util.hpp"

namespace mgt_cli_test {
namespace {

std::vector<std::string> validation_files() {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(fs::path(MGT_SOURCE_DIR) / "examples/validation"))
    if (entry.path().extension() == ".json" && entry.path().stem() != "mosaicml_llmfoundry_mpt")
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ValidateCv, LeaveOneSourceOutDocument) {
  std::vector<std::string> args{"validate", "--cv", "--cv-rounds", "1", "--json"};
  std::vector<std::string> plain{"validate", "--json"};
  for (const auto& f : validation_files()) {
    args.push_back(f);
    plain.push_back(f);
  }
  const Result r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = parse_json_or_fail(r);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.at("format"), "mgt.validation_cv/1");
  EXPECT_EQ(doc.at("fit").at("max_rounds"), 1);

  const Result base = run_cli(plain);
  ASSERT_EQ(base.exit_code, 0) << describe(base);
  const json overall = parse_json_or_fail(base).at("summary").at("overall");
  const json& pooled = doc.at("pooled");
  for (const char* side : {"in_sample", "out_of_sample"}) {
    SCOPED_TRACE(side);
    EXPECT_EQ(pooled.at(side).at("rows"), overall.at("rows"));
    EXPECT_EQ(pooled.at(side).at("rows_compared"), overall.at("rows_compared"));
    EXPECT_EQ(pooled.at(side).at("throughput").at("count"), overall.at("throughput").at("count"));
    EXPECT_EQ(pooled.at(side).at("memory").at("count"), overall.at("memory").at("count"));
  }

  int64_t source_rows = 0;
  for (const auto& s : doc.at("sources")) {
    source_rows += s.at("in_sample").at("rows").get<int64_t>();
    if (s.at("in_sample").at("rows_compared") == 0) {  // nothing the fit can reach: same both ways
      EXPECT_EQ(s.at("in_sample").at("skip_reasons"), s.at("out_of_sample").at("skip_reasons")) << s.at("source");
    }
  }
  EXPECT_EQ(source_rows, overall.at("rows").get<int64_t>());

  const size_t folds_with_fit = [&] {
    size_t n = 0;
    for (const auto& s : doc.at("sources")) n += s.at("in_sample").at("rows_compared").get<int64_t>() > 0;
    return n;
  }();
  ASSERT_FALSE(doc.at("parameters").empty());
  for (const auto& p : doc.at("parameters")) {
    SCOPED_TRACE(p.at("name").get<std::string>());
    const double lower = p.at("lower"), upper = p.at("upper");
    EXPECT_LT(lower, upper);
    EXPECT_GE(p.at("in_sample").get<double>(), lower);
    EXPECT_LE(p.at("in_sample").get<double>(), upper);
    EXPECT_EQ(p.at("out_of_sample").size(), folds_with_fit);
    for (const auto& [fold, value] : p.at("out_of_sample").items()) {
      EXPECT_GE(value.get<double>(), lower) << fold;
      EXPECT_LE(value.get<double>(), upper) << fold;
    }
  }

  ASSERT_FALSE(doc.at("rank_order").empty()) << "BLOOM and nanotron have model x GPU groups of >= 4 runs";
  for (const auto& g : doc.at("rank_order")) {
    EXPECT_GE(g.at("runs").get<int64_t>(), 4);
    for (const char* side : {"in_sample", "out_of_sample"})
      if (!g.at(side).is_null()) {
        EXPECT_GE(g.at(side).get<double>(), -1.0 - 1e-12);
        EXPECT_LE(g.at(side).get<double>(), 1.0 + 1e-12);
      }
  }
}

TEST(ValidateCv, TextTableHasEverySourceAndPooled) {
  // Three sources and a catalog keep it short.
  std::vector<std::string> args{"validate", "--cv", "--cv-rounds", "1"};
  for (const char* f : {"bloom_176b_bigscience", "korthikanti2022_seqpar_selective", "zero_deepspeed_sc20", "catalog_models"})
    args.push_back("examples/validation/" + std::string(f) + ".json");
  const Result r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (const char* needle : {"bloom_176b_bigscience", "korthikanti2022_seqpar_selective", "zero_deepspeed_sc20", "pooled",
                             "out-of-sample", "all.comm_hidden_fraction", "rank order", "BLOOM"})
    EXPECT_TRUE(contains(r.out, needle)) << needle << "\n" << describe(r);
  EXPECT_FALSE(contains(r.out, "catalog_models")) << "catalog files have no rows to cross-validate";
}

TEST(ValidateCv, CvOptionsWithoutCvAreRefused) {
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--cv-rounds", "2"}, {"--cv-start", "prior"}}) {
    std::vector<std::string> args{"validate", "examples/validation/opt_and_fsdp_paper.json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << describe(r);
    EXPECT_TRUE(contains(r.err, extra.front() + " requires --cv")) << describe(r);
  }
  const Result bad_start = run_cli({"validate", "--cv", "--cv-start", "blind", "examples/validation/opt_and_fsdp_paper.json"});
  EXPECT_EQ(bad_start.exit_code, 2) << describe(bad_start);
  EXPECT_TRUE(contains(bad_start.err, "--cv-start")) << describe(bad_start);
}

}  // namespace
}  // namespace mgt_cli_test
