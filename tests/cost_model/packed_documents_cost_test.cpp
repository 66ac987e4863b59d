// Packed documents in the cost model (ShardContext::document_tokens; docs/cost-model.md §2): a query
// reaches only its own document's keys, so attention over a sequence of s tokens packed with documents
// of d costs what s/d sequences of d tokens cost, and everything else is per token.
#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/ir/plan.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mgt::cost {
namespace {

Estimate estimate(int64_t seq_len, int64_t sequences, int64_t document_tokens) {
  const ir::Graph graph = ir::load_model(std::string(MGT_SOURCE_DIR) + "/examples/models/Llama-3.1-8B.json");
  TrainingSettings settings;
  settings.seq_len = seq_len;
  settings.global_batch_tokens = seq_len * sequences;
  settings.document_tokens = document_tokens;
  const ir::ClusterSpec cluster = ir::cluster_preset("h100-sxm");
  return Estimator(graph, cluster, 8, settings, default_cost_params(cluster.gpu))
      .estimate(ir::parse_plan_argument(R"({"dp_shard":8})"));
}

TEST(PackedDocumentsCost, ModelFlopsAreThoseOfTheDocumentsAsSequences) {
  const Estimate packed = estimate(4096, 64, 256), documents = estimate(256, 1024, 0), whole = estimate(4096, 64, 0);
  // The same tokens; attention per document: the model FLOPs of 1024 sequences of 256 tokens.
  EXPECT_NEAR(packed.model_flops_per_step, documents.model_flops_per_step, 1e-9 * documents.model_flops_per_step);
  // Attention over 4096 keys per sequence is dearer than over 256 per document; the rest is per token.
  EXPECT_LT(packed.model_flops_per_step, whole.model_flops_per_step);
  EXPECT_LT(packed.time.compute_s, whole.time.compute_s);
  // Llama-3.1-8B: 32 layers x 32 heads x 128 dims; causal attention FLOPs per token, fwd + bwd =
  // 3 x 2 x s/2 x heads x (d_qk + d_v) per layer, for s = 4096 against 256 (hand count).
  const double per_token_attention = [](double s) { return 3.0 * 2.0 * (s / 2.0) * 32.0 * 256.0 * 32.0; }(4096) -
                                     [](double s) { return 3.0 * 2.0 * (s / 2.0) * 32.0 * 256.0 * 32.0; }(256);
  EXPECT_NEAR(whole.model_flops_per_step - packed.model_flops_per_step, per_token_attention * 64 * 4096,
              1e-6 * per_token_attention * 64 * 4096);
}

TEST(PackedDocumentsCost, OneDocumentPerSequenceIsUnpacked) {
  const Estimate unpacked = estimate(2048, 32, 0), one = estimate(2048, 32, 2048);
  EXPECT_DOUBLE_EQ(one.step_time_s, unpacked.step_time_s);
  EXPECT_DOUBLE_EQ(one.model_flops_per_step, unpacked.model_flops_per_step);
}

}  // namespace
}  // namespace mgt::cost
