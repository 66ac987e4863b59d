// mgt-plan's MLIR commands end to end (tools/mgt-plan/mlir_command.cpp): exit codes and the lines
// that matter (docs/mlir.md). With MLIR: import, plan and export the examples, exit 2 with MLIR's
// file:line diagnostic for malformed input. Without MLIR: exit 1 saying it is not built in.
#include "mgt/mlir/mlir_interop.hpp"

#include "../cli/cli_util.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
// Runs mgt-plan from the source root, as the CLI tests do.
using mgt_cli_test::Result, mgt_cli_test::run_cli;

TEST(MlirCli, WithoutMlirSaysNotBuiltIn) {
  if (mgt::mlirio::built_in()) GTEST_SKIP() << "built with MLIR";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"import", "examples/mlir/mlp.mlir"}, {"export-mlir", "examples/mlir/mlp.mlir", "--gpus", "8"}}) {
    const Result r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("MLIR is not built in"), std::string::npos) << r.err;
  }
}

TEST(MlirCli, ImportJsonIsAGraph) {
  if (!mgt::mlirio::built_in()) GTEST_SKIP() << "built without MLIR";
  const Result r = run_cli({"import", "examples/mlir/mlp.mlir", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"format\": \"mgt.graph/1\""), std::string::npos);
  EXPECT_NE(r.out.find("\"einsum\": \"ij,jk->ik\""), std::string::npos) << r.out;
}

TEST(MlirCli, MalformedExitsTwoWithFileLine) {
  if (!mgt::mlirio::built_in()) GTEST_SKIP() << "built without MLIR";
  const Result r = run_cli({"import", "tests/mlir/data/malformed.mlir"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tests/mlir/data/malformed.mlir:5:27: error: use of undeclared SSA value name"),
            std::string::npos) << r.err;
}

// mlir-opt-19 itself segfaults on this file (an MLIR 19 parser bug); mgt-plan exits 2 with one line.
TEST(MlirCli, UpstreamParserBugIsAnInputErrorNotACrash) {
  if (!mgt::mlirio::built_in()) GTEST_SKIP() << "built without MLIR";
  const Result r = run_cli({"import", "tests/mlir/data/iterator_types_not_string.mlir"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tests/mlir/data/iterator_types_not_string.mlir:7:84: error: linalg.generic iterator_types "
                       "element 1 is not a string literal"),
            std::string::npos)
      << r.err;
}

TEST(MlirCli, UnsupportedOpExitsTwoWithNameAndLocation) {
  if (!mgt::mlirio::built_in()) GTEST_SKIP() << "built without MLIR";
  const Result r = run_cli({"tests/mlir/data/unsupported.mlir", "--gpus", "8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'tosa.reshape' at tests/mlir/data/unsupported.mlir:7:8"), std::string::npos) << r.err;
}

TEST(MlirCli, PlansAnMlirModel) {
  if (!mgt::mlirio::built_in()) GTEST_SKIP() << "built without MLIR";
  const Result r = run_cli({"examples/mlir/transformer_block.mlir", "--gpus", "8", "--top", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("best: {\"format\":\"mgt.spmd_plan/1\""), std::string::npos) << r.out;
  const Result seq = run_cli({"examples/mlir/transformer_block.mlir", "--gpus", "8", "--seq-len", "4096"});
  EXPECT_EQ(seq.exit_code, 2);
  EXPECT_NE(seq.err.find("--seq-len: does not apply to role-less models"), std::string::npos) << seq.err;
}

TEST(MlirCli, ImportedGraphPlansAndExports) {
  if (!mgt::mlirio::built_in()) GTEST_SKIP() << "built without MLIR";
  const fs::path graph = fs::temp_directory_path() / ("mgt_mlp_graph_" + std::to_string(::getpid()) + ".json");
  const Result imported = run_cli({"import", "examples/mlir/mlp.mlir", "--json"});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  std::ofstream(graph) << imported.out;
  const Result planned = run_cli({graph.string(), "--gpus", "8"});
  EXPECT_EQ(planned.exit_code, 0) << planned.err;
  const Result exported = run_cli({"export-mlir", graph.string(), "--gpus", "8", "--plan",
                                   R"({"format": "mgt.spmd_plan/1", "mesh": [8], "splits": [{"tensor": "w1", "dim": 1}]})"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.out.find("mesh.mesh @mesh(shape = 8)"), std::string::npos) << exported.out;
  EXPECT_NE(exported.out.find("mesh.shard %w1 to <@mesh, [[], [0]]>"), std::string::npos) << exported.out;
  EXPECT_EQ(exported.err.find("note:"), std::string::npos) << exported.err;  // a 1-D plan MLIR 19 lowers
  // --check: 1 all_slice (w2's rows) + 1 all_reduce, shapes of the 3 ops, as CrossCheck.* works out.
  const Result checked = run_cli({"export-mlir", graph.string(), "--gpus", "8", "--out", "-", "--check", "--plan",
                                  R"({"format": "mgt.spmd_plan/1", "mesh": [8], "splits": [{"tensor": "w1", "dim": 1}]})"});
  EXPECT_EQ(checked.exit_code, 0) << checked.err;
  EXPECT_NE(checked.err.find("check: upstream mesh-spmdization agrees: 2 collectives, per-device shapes of 3 ops"),
            std::string::npos) << checked.err;
  const Result two_d = run_cli({"export-mlir", graph.string(), "--gpus", "8", "--plan",
                                R"({"format": "mgt.spmd_plan/1", "mesh": [2, 4], "splits": [{"tensor": "x", "dim": 0}, {"tensor": "w1", "dim": 1}]})"});
  EXPECT_EQ(two_d.exit_code, 0) << two_d.err;
  EXPECT_NE(two_d.err.find("note: MLIR 19's mesh-spmdization cannot lower this plan: op 'matmul2' writes a result that is "
                           "both split and partial"), std::string::npos) << two_d.err;
  const Result two_d_checked = run_cli({"export-mlir", graph.string(), "--gpus", "8", "--check", "--plan",
                                        R"({"format": "mgt.spmd_plan/1", "mesh": [2, 4], "splits": [{"tensor": "x", "dim": 0}, {"tensor": "w1", "dim": 1}]})"});
  EXPECT_EQ(two_d_checked.exit_code, 1);
  EXPECT_NE(two_d_checked.err.find("check: not run: MLIR 19 cannot lower this plan"), std::string::npos) << two_d_checked.err;
  const Result wrong = run_cli({"export-mlir", "examples/mlir/mlp.mlir", "--gpus", "4", "--plan",
                                R"({"format": "mgt.spmd_plan/1", "mesh": [8], "splits": [{"tensor": "w1", "dim": 1}]})"});
  fs::remove(graph);
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("--plan: field 'mesh': the mesh has 8 devices but --gpus is 4"), std::string::npos) << wrong.err;
}

}  // namespace
