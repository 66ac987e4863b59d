// `mgt-plan simulate --svg`: the report carries the cluster's GPU memory as its capacity line (the
// elements themselves are checked in tests/cost_model/timeline_svg_test.cpp).
#include "cli_util.hpp"

namespace mgt_cli_test {
namespace {

TEST(CliSimulateSvg, CapacityLineIsTheClustersGpuMemory) {
  TempDir dir;
  const std::string svg = dir.file("step.svg");
  const Result r = run_cli({"simulate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8})", "--svg", svg});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string text = slurp(svg);
  // h100-sxm: 85899345920 bytes = 80 GiB.
  static_assert(kH100Hbm == 80ll << 30);
  EXPECT_TRUE(contains(text, ">GPU memory capacity 80.00 GiB</text>")) << text.substr(0, 2000);
  EXPECT_TRUE(contains(text, "id=\"peak-reserved\"")) << text.substr(0, 2000);
  EXPECT_TRUE(contains(text, "id=\"legend-caption\"")) << text.substr(0, 2000);
}

}  // namespace
}  // namespace mgt_cli_test
