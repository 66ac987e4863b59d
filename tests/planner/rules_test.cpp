// Tests for the planning rules (planner/src/rules.cpp): model_facts, and every rejection in
// first_broken_rule with its exact message, on hand-built plans.
#include "mgt/planner/rules.hpp"

#include "planner_fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

using mgt::cost::TrainingSettings;
using mgt::ir::Plan;
using mgt::plan::first_broken_rule, mgt::plan::model_facts, mgt::plan::ModelFacts, mgt::plan::RuleOptions;
using mgt::test::example, mgt::test::h100, mgt::test::llama8b;

const ModelFacts& llama8b_facts() {
  static const ModelFacts facts = model_facts(llama8b());
  return facts;
}

Plan make_plan(int64_t dp_replicate, int64_t dp_shard, int64_t cp, int64_t tp, int64_t micro_batch = 1) {
  return mgt::test::plan_of(dp_replicate, dp_shard, tp, cp, /*pp=*/1, /*vpp=*/1, micro_batch);
}

TrainingSettings settings(int64_t seq_len = 8192, int64_t global_batch_seqs = 512) {
  return mgt::test::settings(seq_len, global_batch_seqs);
}

RuleOptions options(int64_t gpus, bool cross_node_tp = false, const std::string& framework = "") {
  RuleOptions o;
  o.num_gpus = gpus;
  o.allow_cross_node_tp = cross_node_tp;
  o.framework = framework;
  return o;
}

std::string broken(const Plan& plan, const ModelFacts& facts, const mgt::ir::ClusterSpec& cluster,
                   const TrainingSettings& s, const RuleOptions& o) {
  const auto r = first_broken_rule(plan, facts, cluster, s, o);
  return r ? *r : std::string("<none>");
}

// ---- model_facts ---------------------------------------------------------------------------------

TEST(ModelFacts, Llama8BListsHeadsKvHeadsAndFfn) {
  const ModelFacts& facts = llama8b_facts();
  EXPECT_TRUE(facts.has_attention);
  const auto has = [&](const std::string& field, int64_t size) {
    return std::find(facts.tp_divisible.begin(), facts.tp_divisible.end(), std::make_pair(field, size)) !=
           facts.tp_divisible.end();
  };
  EXPECT_TRUE(has("num_key_value_heads", 8));
  EXPECT_TRUE(has("num_attention_heads", 32));
  EXPECT_TRUE(has("intermediate_size", 14336));
  // The vocabulary is padded to a multiple of tp, so it is not a divisibility fact.
  for (const auto& [field, size] : facts.tp_divisible) {
    EXPECT_NE(size, 128256) << field;
    EXPECT_FALSE(field.empty());
  }
  // Each (field, size) appears once although every layer copy and tensor repeats it.
  auto sorted = facts.tp_divisible;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
}

TEST(ModelFacts, MlpGraphHasNoAttention) {
  const ModelFacts facts = model_facts(mgt::ir::load_model(example("mlp.graph.json")));
  EXPECT_FALSE(facts.has_attention);
  ASSERT_FALSE(facts.tp_divisible.empty());
  bool has_ffn = false;
  for (const auto& [field, size] : facts.tp_divisible)
    if (size == 4096) has_ffn = true;
  EXPECT_TRUE(has_ffn) << "the 4096-wide f dim splits over tp";
}

TEST(ModelFacts, MixtralListsKvHeads) {
  const ModelFacts facts = model_facts(mgt::ir::load_model(example("Mixtral-8x7B.json")));
  EXPECT_TRUE(facts.has_attention);
  EXPECT_NE(std::find(facts.tp_divisible.begin(), facts.tp_divisible.end(),
                      std::make_pair(std::string("num_key_value_heads"), int64_t(8))),
            facts.tp_divisible.end());
}

// ---- first_broken_rule: valid plans -----------------------------------------------------------------

TEST(FirstBrokenRule, ValidPlansPass) {
  const auto c = h100();
  const auto s = settings();
  EXPECT_EQ(broken(make_plan(1, 8, 1, 1), llama8b_facts(), c, s, options(8)), "<none>");
  EXPECT_EQ(broken(make_plan(1, 4, 1, 2), llama8b_facts(), c, s, options(8)), "<none>");
  EXPECT_EQ(broken(make_plan(1, 1, 1, 8), llama8b_facts(), c, s, options(8)), "<none>");
  EXPECT_EQ(broken(make_plan(1, 2, 4, 1), llama8b_facts(), c, s, options(8)), "<none>");
  EXPECT_EQ(broken(make_plan(2, 2, 1, 2), llama8b_facts(), c, s, options(8)), "<none>") << "HSDP + tp is fine";
  EXPECT_EQ(broken(make_plan(8, 1, 1, 1), llama8b_facts(), c, s, options(8)), "<none>") << "pure DDP is fine";
  EXPECT_EQ(broken(make_plan(1, 1, 1, 1, 16), llama8b_facts(), c, s, options(1)), "<none>");
  EXPECT_EQ(broken(make_plan(2, 8, 1, 1, 16), llama8b_facts(), c, s, options(16)), "<none>");
}

// ---- product ---------------------------------------------------------------------------------------

TEST(FirstBrokenRule, PipelineProductThatOverflowsIsRefusedBeforeItIsFormed) {
  // pp 2 x vpp 2^63 - 1 wraps to -2, which "divides" 32 layers; 2 x (2^62 + 2) wraps to 8, which does.
  for (const int64_t vpp : {std::numeric_limits<int64_t>::max(), int64_t{4611686018427387906}}) {
    Plan plan = make_plan(1, 1, 1, 1);
    plan.pp = 2;
    plan.vpp = vpp;
    EXPECT_EQ(broken(plan, llama8b_facts(), h100(), settings(), options(2)),
              "pp*vpp (pp=2, vpp=" + std::to_string(vpp) + ") must be at most num_hidden_layers=32");
  }
}

TEST(FirstBrokenRule, ProductMustEqualGpus) {
  const auto c = h100();
  const auto s = settings();
  EXPECT_EQ(broken(make_plan(1, 3, 1, 1), llama8b_facts(), c, s, options(8)),
            "dp_replicate*dp_shard*cp*tp*pp=3 must equal --gpus 8");
  EXPECT_EQ(broken(make_plan(2, 4, 2, 1), llama8b_facts(), c, s, options(8)),
            "dp_replicate*dp_shard*cp*tp*pp=16 must equal --gpus 8");
  Plan with_pp = make_plan(1, 4, 1, 1);
  with_pp.pp = 2;
  EXPECT_EQ(broken(with_pp, llama8b_facts(), c, s, options(4)), "dp_replicate*dp_shard*cp*tp*pp=8 must equal --gpus 4");
  // The product is checked first: this plan also breaks the kv-heads rule.
  EXPECT_EQ(broken(make_plan(1, 1, 1, 16), llama8b_facts(), c, s, options(8)),
            "dp_replicate*dp_shard*cp*tp*pp=16 must equal --gpus 8");
}

// ---- tp divisibility -------------------------------------------------------------------------------

TEST(FirstBrokenRule, TpMustDivideKvHeads) {
  const auto s = settings();
  EXPECT_EQ(broken(make_plan(1, 1, 1, 16), llama8b_facts(), h100(), s, options(16)),
            "tp=16 must divide num_key_value_heads=8");
  // Even when tp may cross nodes.
  EXPECT_EQ(broken(make_plan(1, 1, 1, 16), llama8b_facts(), h100(), s, options(16, true)),
            "tp=16 must divide num_key_value_heads=8");
  EXPECT_EQ(broken(make_plan(1, 2, 1, 16), llama8b_facts(), h100(), s, options(32)),
            "tp=16 must divide num_key_value_heads=8");
}

TEST(FirstBrokenRule, TpMustDivideEveryFactInOrder) {
  ModelFacts facts;
  facts.has_attention = true;
  facts.tp_divisible = {{"num_attention_heads", 12}, {"num_key_value_heads", 4}, {"intermediate_size", 3072}};
  const auto s = settings();
  EXPECT_EQ(broken(make_plan(1, 1, 1, 8), facts, h100(), s, options(8)), "tp=8 must divide num_attention_heads=12");
  EXPECT_EQ(broken(make_plan(1, 2, 1, 3), facts, h100(), s, options(6)), "tp=3 must divide num_key_value_heads=4");
  EXPECT_EQ(broken(make_plan(1, 2, 1, 4), facts, h100(), s, options(8)), "<none>");
}

// ---- tp within the NVLink domain / node ------------------------------------------------------------

TEST(FirstBrokenRule, TpBeyondNvlinkDomainNeedsTheFlag) {
  ModelFacts facts;
  facts.has_attention = true;
  facts.tp_divisible = {{"num_attention_heads", 64}, {"num_key_value_heads", 16}};
  const auto s = settings();
  EXPECT_EQ(broken(make_plan(1, 1, 1, 16), facts, h100(), s, options(16)),
            "tp=16 exceeds one 8-GPU NVLink domain (pass --allow-cross-node-tp to allow)");
  EXPECT_EQ(broken(make_plan(1, 1, 1, 16), facts, h100(), s, options(16, true)), "<none>");
  EXPECT_EQ(broken(make_plan(1, 2, 1, 8), facts, h100(), s, options(16)), "<none>");
}

TEST(FirstBrokenRule, TpBeyondPcieNodeNeedsTheFlag) {
  // No NVLink (nvlink_domain_gpus 1): the node is the tp domain and the message says "node".
  auto cluster = h100();
  cluster.nvlink_domain_gpus = 1;
  cluster.gpus_per_node = 4;
  const auto s = settings();
  EXPECT_EQ(broken(make_plan(1, 1, 1, 8), llama8b_facts(), cluster, s, options(8)),
            "tp=8 exceeds one 4-GPU node (pass --allow-cross-node-tp to allow)");
  EXPECT_EQ(broken(make_plan(1, 1, 1, 8), llama8b_facts(), cluster, s, options(8, true)), "<none>");
  EXPECT_EQ(broken(make_plan(1, 2, 1, 4), llama8b_facts(), cluster, s, options(8)), "<none>");
}

TEST(FirstBrokenRule, TpMustTileTheDomain) {
  // tp=3 fits in 8 GPUs by count but 3 groups do not tile an 8-GPU domain.
  ModelFacts facts;
  facts.has_attention = true;
  facts.tp_divisible = {{"num_attention_heads", 24}};
  EXPECT_EQ(broken(make_plan(1, 2, 1, 3), facts, h100(), settings(8184), options(6)),
            "tp=3 must divide the 8-GPU NVLink domain so no tp group straddles two (pass --allow-cross-node-tp to "
            "allow)");
  EXPECT_EQ(broken(make_plan(1, 2, 1, 3), facts, h100(), settings(8184), options(6, true)), "<none>");
}

TEST(FirstBrokenRule, Gb200Nvl72AllowsTpAcrossTrays) {
  const auto cluster = mgt::ir::cluster_preset("gb200-nvl72");
  ASSERT_GT(cluster.nvlink_domain_gpus, cluster.gpus_per_node);
  ModelFacts facts;
  facts.has_attention = true;
  facts.tp_divisible = {{"num_attention_heads", 64}};
  const int64_t tp = cluster.gpus_per_node * 2;
  if (cluster.nvlink_domain_gpus % tp != 0) GTEST_SKIP() << "domain " << cluster.nvlink_domain_gpus;
  EXPECT_EQ(broken(make_plan(1, 1, 1, tp), facts, cluster, settings(), options(tp)), "<none>");
}

// ---- cp needs attention ----------------------------------------------------------------------------

TEST(FirstBrokenRule, CpOverMambaLayersAsMegatronCoreSplitsThem) {
  // Mamba-2 (Megatron-Core MambaContextParallel): heads split over tp*cp. Codestral: 128 heads.
  ModelFacts ssd;
  ssd.ssd_heads = 128;
  EXPECT_EQ(broken(make_plan(1, 1, 2, 1), ssd, h100(), settings(), options(2)), "<none>");
  ssd.ssd_heads = 24;  // 24 % (tp 2 x cp 8) != 0
  EXPECT_EQ(broken(make_plan(1, 1, 8, 2), ssd, h100(), settings(), options(16)),
            "tp*cp=16 must divide the Mamba-2 heads (24): Megatron-Core's context parallel splits heads over tp*cp");
  // Mamba-1 (Jamba, Falcon-Mamba): no framework splits the selective scan over the sequence.
  ModelFacts jamba;
  jamba.has_attention = true;
  jamba.has_mamba1 = true;
  EXPECT_EQ(broken(make_plan(1, 1, 2, 1), jamba, h100(), settings(), options(2)),
            "cp=2: Mamba-1 layers scan the whole sequence and no framework splits them over cp (use tp or pp)");
}

TEST(FirstBrokenRule, CpNeedsAttention) {
  const ModelFacts facts = model_facts(mgt::ir::load_model(example("mlp.graph.json")));
  ASSERT_FALSE(facts.has_attention);
  EXPECT_EQ(broken(make_plan(1, 1, 2, 1), facts, h100(), settings(), options(2)),
            "cp=2 needs attention or Mamba-2 layers to split the sequence");
  EXPECT_EQ(broken(make_plan(1, 2, 4, 1), facts, h100(), settings(), options(8)),
            "cp=4 needs attention or Mamba-2 layers to split the sequence");
  EXPECT_EQ(broken(make_plan(1, 2, 1, 1), facts, h100(), settings(), options(2)), "<none>");
  // The same plan is fine on a model with attention.
  EXPECT_EQ(broken(make_plan(1, 1, 2, 1), llama8b_facts(), h100(), settings(), options(2)), "<none>");
}

// ---- seq_len divisibility --------------------------------------------------------------------------

TEST(FirstBrokenRule, SeqLenDivisibleBy2CpTp) {
  // Without cp, sequence parallelism alone needs seq_len divisible by tp.
  EXPECT_EQ(broken(make_plan(1, 2, 1, 2), llama8b_facts(), h100(), settings(4098), options(4)), "<none>");
  EXPECT_EQ(broken(make_plan(1, 1, 1, 4), llama8b_facts(), h100(), settings(4098), options(4)),
            "seq_len=4098 must be divisible by tp=4 (sequence parallel splits it over tp)");
  EXPECT_EQ(broken(make_plan(1, 2, 2, 1), llama8b_facts(), h100(), settings(4098), options(4)),
            "seq_len=4098 must be divisible by 2*cp*tp=4");
  EXPECT_EQ(broken(make_plan(1, 1, 2, 4), llama8b_facts(), h100(), settings(4104), options(8)),
            "seq_len=4104 must be divisible by 2*cp*tp=16");
  EXPECT_EQ(broken(make_plan(1, 1, 2, 4), llama8b_facts(), h100(), settings(4096), options(8)), "<none>");
  // Without tp or cp the sequence is not split: any length is fine.
  EXPECT_EQ(broken(make_plan(1, 4, 1, 1), llama8b_facts(), h100(), settings(4099), options(4)), "<none>");
}

// ---- the Accelerate rule ---------------------------------------------------------------------------

TEST(FirstBrokenRule, AccelerateForbidsPureReplicationWithTpOrCp) {
  const std::string msg = "dp_replicate>1 with dp_shard=1 cannot combine with tp or cp (Accelerate rule; use dp_shard)";
  for (const std::string framework : {"accelerate", "axolotl"}) {
    EXPECT_EQ(broken(make_plan(2, 1, 1, 4), llama8b_facts(), h100(), settings(), options(8, false, framework)), msg);
    EXPECT_EQ(broken(make_plan(4, 1, 2, 1), llama8b_facts(), h100(), settings(), options(8, false, framework)), msg);
    EXPECT_EQ(broken(make_plan(2, 1, 2, 2), llama8b_facts(), h100(), settings(), options(8, false, framework)), msg);
    EXPECT_EQ(broken(make_plan(2, 2, 1, 2), llama8b_facts(), h100(), settings(), options(8, false, framework)), "<none>");
    EXPECT_EQ(broken(make_plan(1, 1, 2, 4), llama8b_facts(), h100(), settings(), options(8, false, framework)), "<none>");
  }
  // Accelerate's rule only: Megatron (DDP beside tp) and torchtitan replicate with tp or cp.
  for (const std::string framework : {"", "megatron-core", "torchtitan"})
    EXPECT_EQ(broken(make_plan(2, 1, 1, 4), llama8b_facts(), h100(), settings(), options(8, false, framework)), "<none>");
}

// ---- the global batch ------------------------------------------------------------------------------

TEST(FirstBrokenRule, GlobalBatchSmallerThanReplicasTimesMicroBatch) {
  EXPECT_EQ(broken(make_plan(1, 8, 1, 1), llama8b_facts(), h100(), settings(8192, 4), options(8)),
            "global batch of 4 sequences is smaller than dp_replicate*dp_shard*micro_batch=8");
  EXPECT_EQ(broken(make_plan(2, 2, 1, 2, 4), llama8b_facts(), h100(), settings(8192, 8), options(8)),
            "global batch of 8 sequences is smaller than dp_replicate*dp_shard*micro_batch=16");
  EXPECT_EQ(broken(make_plan(1, 1, 1, 8), llama8b_facts(), h100(), settings(8192, 1), options(8)), "<none>");
}

TEST(FirstBrokenRule, GlobalBatchNotDivisible) {
  EXPECT_EQ(broken(make_plan(1, 8, 1, 1), llama8b_facts(), h100(), settings(8192, 12), options(8)),
            "global batch of 12 sequences does not divide by dp_replicate*dp_shard*micro_batch=8");
  EXPECT_EQ(broken(make_plan(1, 2, 1, 4, 4), llama8b_facts(), h100(), settings(8192, 12), options(8)),
            "global batch of 12 sequences does not divide by dp_replicate*dp_shard*micro_batch=8");
  EXPECT_EQ(broken(make_plan(1, 4, 1, 2, 3), llama8b_facts(), h100(), settings(8192, 12), options(8)), "<none>");
}

}  // namespace

// ---- pipeline and expert parallel rules (issue 3) ---------------------------------------------------

namespace {
Plan with(Plan p, int64_t pp, int64_t vpp, int64_t ep = 1) {
  p.pp = pp;
  p.vpp = vpp;
  p.ep = ep;
  return p;
}
}  // namespace

TEST(FirstBrokenRule, PipelineChunksMustSplitTheLayers) {
  // Llama-3.1-8B has 32 layers: pp*vpp must divide 32 or 34 (first and last chunk one layer lighter).
  const auto& f = llama8b_facts();
  EXPECT_EQ(f.num_layers, 32);
  EXPECT_EQ(broken(with(make_plan(1, 4, 1, 1), 2, 1), f, h100(), settings(), options(8)), "<none>");
  EXPECT_EQ(broken(with(make_plan(1, 4, 1, 1), 2, 4), f, h100(), settings(), options(8)), "<none>");   // 8 | 32
  EXPECT_EQ(broken(with(make_plan(1, 1, 1, 1), 2, 17), f, h100(), settings(), options(2)), "<none>");  // 34 | 34
  // 32 layers on pp 3: 11, 11, 10 (Megatron's first / last stage counts).
  EXPECT_EQ(broken(with(make_plan(1, 2, 1, 1), 3, 1), f, h100(), settings(), options(6)), "<none>");
  EXPECT_EQ(broken(with(make_plan(1, 1, 1, 1), 2, 20), f, h100(), settings(), options(2)),
            "pp*vpp (pp=2, vpp=20) must be at most num_hidden_layers=32");
  EXPECT_EQ(broken(with(make_plan(1, 1, 1, 1), 1, 2), f, h100(), settings(), options(1)), "vpp=2 needs pp > 1");
}

TEST(FirstBrokenRule, PipelineNeedsEnoughMicroBatches) {
  const auto& f = llama8b_facts();
  // 512 sequences over dp 64 x mbs 2 = 4 micro-batches: pp 8 cannot fill, pp 4 can.
  EXPECT_EQ(broken(with(make_plan(1, 64, 1, 1, 2), 8, 1), f, h100(), settings(8192, 512), options(512)),
            "pp=8 needs at least pp micro-batches per step, got grad_accum=4");
  EXPECT_EQ(broken(with(make_plan(1, 64, 1, 1, 2), 4, 1), f, h100(), settings(8192, 512), options(256)), "<none>");
  // Interleaving: grad_accum must be a multiple of pp (Megatron): 6 micro-batches on pp 4 fail.
  EXPECT_EQ(broken(with(make_plan(1, 1, 1, 1, 1), 4, 2), f, h100(), settings(8192, 6), options(4)),
            "vpp>1 needs grad_accum divisible by pp=4, got 6");
}

TEST(FirstBrokenRule, ExpertParallelNeedsExpertsAndNestsWithCp) {
  const auto mixtral = model_facts(mgt::ir::load_model(example("Mixtral-8x7B.json")));
  EXPECT_EQ(mixtral.num_experts, 8);
  EXPECT_EQ(broken(with(make_plan(1, 8, 1, 1), 1, 1, 8), mixtral, h100(), settings(), options(8)), "<none>");
  EXPECT_EQ(broken(with(make_plan(1, 4, 1, 2), 1, 1, 4), mixtral, h100(), settings(), options(8)), "<none>");
  EXPECT_EQ(broken(with(make_plan(1, 8, 1, 1), 1, 1, 3), mixtral, h100(), settings(), options(8)),
            "ep=3 must divide " + mixtral.experts_field + "=8");
  EXPECT_EQ(broken(with(make_plan(1, 2, 1, 4), 1, 1, 4), mixtral, h100(), settings(), options(8)),
            "etp*ep=4*4 must divide dp_replicate*dp_shard*cp*tp=8");
  // Expert parallel over data-parallel replicas (Megatron's expert data parallel); torchtitan borrows
  // expert ranks from dp_shard x cp only.
  EXPECT_EQ(broken(with(make_plan(8, 1, 1, 1), 1, 1, 8), mixtral, h100(), settings(), options(8)), "<none>");
  EXPECT_EQ(broken(with(make_plan(8, 1, 1, 1), 1, 1, 8), mixtral, h100(), settings(), options(8, false, "torchtitan")),
            "ep=8 must divide dp_shard*cp=1 (torchtitan borrows expert ranks from them)");
  // ep and cp must nest: cp 4 with ep 8 over dp_shard 2 x cp 4 = 8 is fine (cp | ep); on 12 GPUs,
  // dp_shard 3 x cp 4 with ep 2 nests too (ep | cp).
  EXPECT_EQ(broken(with(make_plan(1, 2, 4, 1), 1, 1, 8), mixtral, h100(), settings(), options(8)), "<none>");
  EXPECT_EQ(broken(with(make_plan(1, 3, 4, 1), 1, 1, 2), mixtral, h100(), settings(8184, 384), options(12)), "<none>");
  // cp 3 and ep 2 do not nest (neither divides the other), though ep divides dp_shard*cp = 6.
  EXPECT_EQ(broken(with(make_plan(1, 2, 3, 1), 1, 1, 2), mixtral, h100(), settings(8184, 384), options(6)),
            "etp=1 and ep=2 do not nest with tp, cp, dp_shard and dp_replicate");
  // A dense model has no experts to split.
  EXPECT_EQ(broken(with(make_plan(1, 8, 1, 1), 1, 1, 2), llama8b_facts(), h100(), settings(), options(8)),
            "ep=2 needs a mixture-of-experts model");
}
