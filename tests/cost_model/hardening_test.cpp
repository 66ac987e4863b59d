// Hostile sizes in the cost model (issue 8, part 3): a tensor whose per-GPU element count overflows
// int64 (vocab 2^36 x seq 2^30 = 2^66 logits) is an InputError naming the tensor, not wrapped
// arithmetic; sizes below the 2^44 cap are counted exactly.
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mgt::cost {
namespace {

ir::TensorDecl logits(int64_t vocab) { return {"logits", {{'b', 0}, {'s', 0}, {'v', vocab}}, false}; }

TEST(HostileSizes, LogitsBeyondInt64AreAnErrorNamingTheTensor) {
  ShardContext ctx;
  ctx.seq_len = int64_t{1} << 30;
  try {
    local_elements(logits(int64_t{1} << 36), ctx);
    FAIL() << "no error";
  } catch (const ir::InputError& e) {
    EXPECT_EQ(e.field(), "logits");
    EXPECT_NE(std::string(e.what()).find("2^44"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("seq_len 1073741824"), std::string::npos) << e.what();
  }
  // Just under the cap: exact; tp and cp divide it.
  ctx.seq_len = int64_t{1} << 20;
  EXPECT_EQ(local_elements(logits(int64_t{1} << 24), ctx), int64_t{1} << 44);
  ctx.tp = 4;
  ctx.cp = 2;
  EXPECT_EQ(local_elements(logits(int64_t{1} << 26), ctx), (int64_t{1} << 26) / 4 * ((int64_t{1} << 20) / 2));
  EXPECT_EQ(local_elements(logits(int64_t{1} << 27), ctx), int64_t{1} << 44);
  EXPECT_THROW(local_elements(logits((int64_t{1} << 27) + 4), ctx), ir::InputError);
}

}  // namespace
}  // namespace mgt::cost
