// Tests for the lowering (planner/src/lower.cpp, lower_passes.cpp; docs/lowering.md): every pass
// verifies on a sweep of valid plans, counts by hand on a tiny case, the 1F1B order, round trips,
// FLOPs and memory relations to the estimator, the 405B / 16k-GPU lowering time.
#include "mgt/planner/lower.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/planner/rules.hpp"
#include "mgt/planner/search.hpp"
#include "planner_fixtures.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using mgt::cost::TrainingSettings;
using mgt::ir::Plan, mgt::ir::Recompute, mgt::ir::Schedule;
using mgt::plan::LowerOptions, mgt::plan::lower_to_schedule;
using mgt::test::h100, mgt::test::model, mgt::test::settings;

LowerOptions checked() {
  LowerOptions o;
  o.verify_each_pass = true;
  return o;
}
std::string key(const Plan& p) {
  return "pp" + std::to_string(p.pp) + " vpp" + std::to_string(p.vpp) + " ep" + std::to_string(p.ep) + " dpr" +
         std::to_string(p.dp_replicate) + " dps" + std::to_string(p.dp_shard) + " cp" + std::to_string(p.cp) + " tp" +
         std::to_string(p.tp) + " mbs" + std::to_string(p.micro_batch) + " " + mgt::ir::to_string(p.recompute) +
         " zero" + (p.zero_stage ? std::to_string(*p.zero_stage) : "-") +
         (p.sequence_parallel ? (*p.sequence_parallel ? " sp" : " nosp") : "");
}

struct Counts {
  std::map<std::string, int64_t> compute;     // phase -> count
  std::map<std::string, int64_t> collective;  // "kind@axes" -> count
  int64_t sends = 0, recvs = 0, allocs = 0, frees = 0, optimizer = 0;
};
Counts count(const mgt::ir::Program& p) {
  Counts c;
  for (const auto& in : p.instructions) {
    if (const auto* x = std::get_if<mgt::ir::Compute>(&in.op)) ++c.compute[mgt::ir::to_string(x->phase)];
    if (const auto* x = std::get_if<mgt::ir::Collective>(&in.op)) {
      std::string axes;
      for (const auto& a : x->axes) axes += (axes.empty() ? "" : ",") + a;
      ++c.collective[mgt::ir::to_string(x->kind) + "@" + axes];
    }
    c.sends += std::holds_alternative<mgt::ir::Send>(in.op);
    c.recvs += std::holds_alternative<mgt::ir::Recv>(in.op);
    c.allocs += std::holds_alternative<mgt::ir::Alloc>(in.op);
    c.frees += std::holds_alternative<mgt::ir::Free>(in.op);
    c.optimizer += std::holds_alternative<mgt::ir::OptimizerStep>(in.op);
  }
  return c;
}

int64_t op_copies(const mgt::ir::Graph& g) {
  int64_t n = 0;
  for (const auto& b : g.blocks) n += b.repeat * int64_t(b.ops.size());
  return n;
}

// ---- hand-counted tiny case ----------------------------------------------------------------------

TEST(LowerToSchedule, Gpt2TwoGpusFsdpCountsByHand) {
  const auto& g = model("GPT-2");
  Plan plan;
  plan.dp_shard = 2;  // zero 3 (FSDP) by default; 4 sequences / 2 replicas = grad_accum 2
  const Schedule s = lower_to_schedule(g, plan, settings(128, 4), 2, h100(), checked());
  ASSERT_TRUE(mgt::ir::verify(s).empty());
  ASSERT_EQ(s.programs.size(), 1u);
  EXPECT_EQ(s.plan.grad_accum, 2);
  EXPECT_EQ(s.plan.zero_stage, 3);
  const Counts c = count(s.programs[0]);
  const int64_t ga = 2, n_ops = op_copies(g);
  // One Compute per (op, copy, phase, micro-batch).
  EXPECT_EQ(c.compute.at("fwd"), ga * n_ops);
  EXPECT_EQ(c.compute.at("bwd_data"), ga * n_ops);
  EXPECT_EQ(c.compute.count("recompute"), 0u);
  int64_t weight_ops = 0, copies = 0;
  for (const auto& b : g.blocks) {
    copies += b.repeat;
    for (const auto& op : b.ops)
      if (op.kind == mgt::ir::OpKind::contraction) weight_ops += b.repeat;
  }
  EXPECT_EQ(c.compute.at("bwd_weight"), ga * weight_ops);
  // FSDP: per micro-batch, one all-gather per block copy before forward, one per copy but the last
  // before backward, one reduce-scatter per copy; no other collective (tp = cp = 1, zero 3).
  EXPECT_EQ(c.collective.at("all_gather@dp_shard"), ga * (2 * copies - 1));
  EXPECT_EQ(c.collective.at("reduce_scatter@dp_shard"), ga * copies);
  EXPECT_EQ(c.collective.size(), 2u);
  EXPECT_EQ(c.sends + c.recvs, 0);
  EXPECT_EQ(c.optimizer, 1);
  EXPECT_EQ(c.allocs, c.frees);
}

TEST(LowerToSchedule, DdpAllReducesGradientsInBucketsOnce) {
  const auto& g = model("GPT-2");
  Plan plan;
  plan.dp_replicate = 2;  // zero 0: DDP
  const Schedule s = lower_to_schedule(g, plan, settings(128, 4), 2, h100(), checked());
  const Counts c = count(s.programs[0]);
  int64_t bytes = 0;
  for (const auto& in : s.programs[0].instructions)
    if (const auto* x = std::get_if<mgt::ir::Collective>(&in.op)) {
      EXPECT_EQ(x->kind, mgt::ir::CollectiveKind::all_reduce);
      EXPECT_LE(x->bytes, 25ll << 20);
      bytes += x->bytes;
    }
  const int64_t params = mgt::ir::count_parameters(g).total;
  EXPECT_EQ(bytes, params * 4);  // every fp32 gradient once per step (tied embedding once)
  EXPECT_EQ(c.collective.at("all_reduce@dp_replicate"), (params * 4 + (25ll << 20) - 1) / (25ll << 20));
}

// Megatron-Core reduces expert gradients over the expert-data-parallel group only (expert buffers on
// intra_expt_dp_group, distributed_data_parallel.py; size world / (etp ep pp), parallel_state.py).
// Mixtral-8x7B, DDP over dp_replicate 8 with ep 4 carved from it: mesh [dp_replicate 2, ep 4]; dense
// gradients all-reduce over both axes, each rank's 2 experts per layer over dp_replicate (2 ranks).
TEST(LowerToSchedule, DdpReducesExpertGradientsOverExpertDataParallelGroup) {
  const auto& g = model("Mixtral-8x7B");
  Plan plan;
  plan.dp_replicate = 8, plan.ep = 4;
  const Schedule s = lower_to_schedule(g, plan, settings(128, 16), 8, h100(), checked());
  ASSERT_TRUE(mgt::ir::verify(s).empty());
  std::map<std::string, int64_t> bytes;  // axes -> all-reduced bytes
  for (const auto& in : s.programs[0].instructions)
    if (const auto* x = std::get_if<mgt::ir::Collective>(&in.op); x && x->kind == mgt::ir::CollectiveKind::all_reduce) {
      std::string axes;
      for (const auto& a : x->axes) axes += (axes.empty() ? "" : ",") + a;
      EXPECT_LE(x->bytes, 25ll << 20);
      bytes[axes] += x->bytes;
    }
  // config.json: 32 layers, 8 experts of gate/up/down 4096 x 14336.
  const int64_t all_experts = 32ll * 8 * 3 * 4096 * 14336;  // 45,097,156,608
  const int64_t dense = mgt::ir::count_parameters(g).total - all_experts;
  const int64_t local_experts = 32ll * (8 / 4) * 3 * 4096 * 14336;  // 11,274,289,152
  EXPECT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes["dp_replicate,ep"], dense * 4);
  EXPECT_EQ(bytes["dp_replicate"], local_experts * 4);
}

// ---- pipeline order ----------------------------------------------------------------------------------

/// Per program: the (fwd?, micro-batch) of each task, from the first op of every chunk's compute run.
std::vector<std::pair<bool, int64_t>> task_sequence(const mgt::ir::Program& p) {
  std::vector<std::pair<bool, int64_t>> out;
  for (const auto& in : p.instructions) {
    const auto* x = std::get_if<mgt::ir::Compute>(&in.op);
    if (!x || x->phase == mgt::ir::Phase::bwd_weight || x->phase == mgt::ir::Phase::recompute) continue;
    const std::pair<bool, int64_t> t{x->phase == mgt::ir::Phase::fwd, x->micro_batch};
    if (out.empty() || out.back() != t) out.push_back(t);
  }
  return out;
}

TEST(LowerToSchedule, OneFOneBStageKStartsWithPpMinusKForwards) {
  const auto& g = model("Llama-3.1-8B");
  Plan plan;
  plan.pp = 4;
  plan.dp_shard = 2;
  const Schedule s = lower_to_schedule(g, plan, settings(256, 16), 8, h100(), checked());
  ASSERT_EQ(s.programs.size(), 4u);
  for (int64_t k = 0; k < 4; ++k) {
    const auto seq = task_sequence(s.programs[size_t(k)]);
    ASSERT_EQ(seq.size(), 16u) << "stage " << k;  // 8 forwards and 8 backwards
    for (int64_t i = 0; i < 4 - k; ++i) EXPECT_EQ(seq[size_t(i)], (std::pair<bool, int64_t>{true, i})) << "stage " << k;
    EXPECT_EQ(seq[size_t(4 - k)], (std::pair<bool, int64_t>{false, 0})) << "stage " << k;
    EXPECT_EQ(seq.back(), (std::pair<bool, int64_t>{false, 7}));
    const Counts c = count(s.programs[size_t(k)]);
    EXPECT_EQ(c.sends, (k > 0 ? 8 : 0) + (k < 3 ? 8 : 0));  // activations forward, gradients backward
    EXPECT_EQ(c.recvs, c.sends);
  }
}

// examples/models/GPT-2 with its layer block repeated `layers` times.
mgt::ir::Graph gpt2_with_layers(int64_t layers) {
  mgt::ir::Graph g = model("GPT-2");
  for (auto& b : g.blocks)
    if (b.is_layer) b.repeat = layers;
  g.info.num_layers = layers;
  return g;
}

TEST(LowerToSchedule, InterleavedAndUnevenSplitVerify) {
  // A 14-layer GPT-2: 14 + 2 = 16 = pp 4 x vpp 1: first and last chunk one layer lighter.
  const mgt::ir::Graph g = gpt2_with_layers(14);
  Plan plan;
  plan.pp = 4;
  plan.dp_shard = 2;
  const Schedule s = lower_to_schedule(g, plan, settings(128, 16), 8, h100(), checked());
  std::vector<int64_t> layers;
  for (const auto& p : s.programs) {
    std::set<int64_t> copies;
    for (const auto& in : p.instructions)
      if (const auto* x = std::get_if<mgt::ir::Compute>(&in.op); x && x->block != "embed" && x->block != "head")
        copies.insert(x->layer);
    layers.push_back(int64_t(copies.size()));
  }
  EXPECT_EQ(layers, (std::vector<int64_t>{3, 4, 4, 3}));
  // Interleaved: 12 layers on pp 2 x vpp 3, 8 micro-batches.
  Plan inter;
  inter.pp = 2;
  inter.vpp = 3;
  inter.dp_shard = 4;
  const Schedule si = lower_to_schedule(model("GPT-2"), inter, settings(128, 32), 8, h100(), checked());
  EXPECT_TRUE(mgt::ir::verify(si).empty());
  // Interleaved 6 layers as pp 2 x vpp 4 (6 + 2 = 8): some chunks hold no layer at all.
  const mgt::ir::Graph g6 = gpt2_with_layers(6);
  Plan sparse;
  sparse.pp = 2;
  sparse.vpp = 4;
  sparse.dp_replicate = 2;
  const Schedule ss = lower_to_schedule(g6, sparse, settings(128, 8), 4, h100(), checked());
  EXPECT_TRUE(mgt::ir::verify(ss).empty());
}

// ---- the sweep: every pass verified on plans drawn from the search space ----------------------------

struct SweepCase {
  std::string model;
  int64_t gpus, seq, seqs;
};

TEST(LowerToSchedule, SweepOfValidPlansVerifiesAfterEveryPass) {
  const std::vector<SweepCase> cases = {{"GPT-2", 4, 128, 16},        {"GPT-2", 8, 128, 32},
                                        {"Llama-3.1-8B", 8, 256, 16}, {"Mixtral-8x7B", 8, 128, 16},
                                        {"Llama-3.1-8B", 16, 256, 16}};
  std::set<std::string> features;
  int64_t lowered = 0;
  for (const SweepCase& sc : cases) {
    const auto& g = model(sc.model);
    const auto facts = mgt::plan::model_facts(g);
    mgt::plan::SearchOptions o;
    o.rules.num_gpus = sc.gpus;
    o.num_layers = facts.num_layers;
    o.num_experts = facts.num_experts;
    o.micro_batches = {1, 2};
    o.max_vpp = 4;
    const TrainingSettings st = settings(sc.seq, sc.seqs);
    std::vector<Plan> valid;
    for (const Plan& p : mgt::plan::enumerate_candidates(sc.gpus, o))
      if (!mgt::plan::first_broken_rule(p, facts, h100(), st, o.rules)) valid.push_back(p);
    ASSERT_FALSE(valid.empty()) << sc.model;
    // A deterministic spread of ~12 plans per case, plus zero-stage and sp variants.
    const size_t stride = std::max<size_t>(1, valid.size() / 12);
    for (size_t i = 0; i < valid.size(); i += stride) {
      std::vector<Plan> variants{valid[i]};
      Plan z = valid[i];
      z.zero_stage = int64_t(i / stride) % 4;
      variants.push_back(z);
      if (valid[i].tp > 1) {
        Plan nosp = valid[i];
        nosp.sequence_parallel = false;
        variants.push_back(nosp);
      }
      if (valid[i].recompute == Recompute::full && valid[i].pp == 1) {
        Plan some = valid[i];
        some.recompute_layers = 1;
        variants.push_back(some);
      }
      for (const Plan& p : variants) {
        SCOPED_TRACE(sc.model + " " + key(p));
        Schedule s;
        ASSERT_NO_THROW(s = lower_to_schedule(g, p, st, sc.gpus, h100(), checked()));
        const auto problems = mgt::ir::verify(s);
        ASSERT_TRUE(problems.empty()) << problems.front();
        ++lowered;
        const Plan& r = s.plan;
        if (r.pp > 1) features.insert(r.vpp > 1 ? "interleaved" : "1f1b");
        if (r.tp > 1) features.insert(*r.sequence_parallel ? "tp+sp" : "tp");
        if (r.cp > 1) features.insert("cp");
        if (r.ep > 1) features.insert("ep");
        if (r.dp_replicate > 1 && r.dp_shard > 1) features.insert("hsdp");
        features.insert("zero" + std::to_string(*r.zero_stage));
        features.insert(mgt::ir::to_string(r.recompute));
      }
    }
  }
  std::printf("lowered %lld plans\n", static_cast<long long>(lowered));
  EXPECT_GE(lowered, 50);
  for (const char* f : {"1f1b", "interleaved", "tp", "tp+sp", "cp", "ep", "hsdp", "zero0", "zero1", "zero2", "zero3",
                        "none", "selective", "full"})
    EXPECT_TRUE(features.count(f)) << "no plan in the sweep exercises " << f;
}

// ---- round trips ------------------------------------------------------------------------------------

TEST(LowerToSchedule, TextAndJsonRoundTrip) {
  Plan plan;
  plan.pp = 2;
  plan.tp = 2;
  plan.cp = 2;
  plan.recompute = Recompute::selective;
  const Schedule s = lower_to_schedule(model("Llama-3.1-8B"), plan, settings(256, 4), 8, h100(), checked());
  EXPECT_EQ(mgt::ir::schedule_from_text(mgt::ir::to_text(s), "text"), s);
  EXPECT_EQ(mgt::ir::schedule_from_json(nlohmann::json::parse(mgt::ir::to_json(s).dump()), "json"), s);
}

// ---- relations to the estimator ---------------------------------------------------------------------

double step_flops(const Schedule& s, bool recompute_only) {
  double total = 0;
  for (const auto& p : s.programs)
    for (const auto& in : p.instructions)
      if (const auto* x = std::get_if<mgt::ir::Compute>(&in.op))
        if ((x->phase == mgt::ir::Phase::recompute) == recompute_only) total += double(p.num_ranks) * double(x->flops);
  return total;
}

TEST(LowerToSchedule, ComputeFlopsEqualModelFlopsPlusRecompute) {
  const auto& g = model("Llama-3.1-8B");
  const TrainingSettings st = settings(256, 16);
  auto is_layer = [&](const std::string& block) {
    for (const auto& b : g.blocks)
      if (b.name == block) return b.is_layer;
    return false;
  };
  for (Recompute mode : {Recompute::none, Recompute::full}) {
    Plan plan;
    plan.pp = 2;
    plan.cp = 2;
    plan.dp_shard = 2;
    plan.recompute = mode;
    const Schedule s = lower_to_schedule(g, plan, st, 8, h100(), checked());
    const mgt::cost::Estimator est(g, h100(), 8, st);
    const double model_flops = est.estimate(plan).model_flops_per_step;
    // fwd + bwd_data + bwd_weight over every rank = 3x forward = the estimator's model FLOPs.
    EXPECT_NEAR(step_flops(s, false) / model_flops, 1.0, 1e-6) << mgt::ir::to_string(mode);
    // Full recompute redoes every layer's forward once: a third of the layers' model FLOPs.
    double layer_fwd = 0;
    for (const auto& p : s.programs)
      for (const auto& in : p.instructions)
        if (const auto* x = std::get_if<mgt::ir::Compute>(&in.op); x && x->phase == mgt::ir::Phase::fwd && is_layer(x->block))
          layer_fwd += double(p.num_ranks) * double(x->flops);
    ASSERT_GT(layer_fwd, 0);
    EXPECT_NEAR(step_flops(s, true), mode == Recompute::full ? layer_fwd : 0.0, 1e-6 * layer_fwd);
  }
}

TEST(LowerToSchedule, ModelStateBuffersMatchEstimatorMemory) {
  const auto& g = model("Llama-3.1-8B");
  const TrainingSettings st = settings(256, 16);
  // fp32 gradients, and bf16 ones (cost::CostParams::gradient_bytes, the bf16-grad-reduce feature of
  // the nemo and megatron-bridge profiles): half the gradient buffer and half the bytes reduced.
  for (int64_t grad_bytes : {4, 2}) {
    mgt::cost::CostParams params = mgt::cost::default_cost_params(h100().gpu);
    params.gradient_bytes = grad_bytes;
    LowerOptions options = checked();
    options.params = params;
    for (int64_t zero : {0, 1, 2, 3}) {
      Plan plan;
      plan.dp_shard = 4;
      plan.tp = 2;
      plan.zero_stage = zero;
      const Schedule s = lower_to_schedule(g, plan, st, 8, h100(), options);
      const auto e = mgt::cost::Estimator(g, h100(), 8, st, params).estimate(plan);
      std::map<mgt::ir::BufferKind, int64_t> bytes;
      int64_t grads_reduced = 0;
      for (const auto& in : s.programs[0].instructions) {
        if (const auto* a = std::get_if<mgt::ir::Alloc>(&in.op); a && (a->buffer == "params" || a->buffer == "grads" || a->buffer == "optim"))
          bytes[a->kind] += a->bytes;
        if (const auto* c = std::get_if<mgt::ir::Collective>(&in.op); c && c->buffer == "grads" && zero == 1) {
          EXPECT_EQ(c->dtype, grad_bytes == 2 ? mgt::ir::DType::bf16 : mgt::ir::DType::f32);
          if (c->kind == mgt::ir::CollectiveKind::reduce_scatter) grads_reduced += c->bytes;
        }
      }
      EXPECT_EQ(bytes[mgt::ir::BufferKind::parameters], e.memory.parameters_bytes) << zero;
      EXPECT_EQ(bytes[mgt::ir::BufferKind::gradients], e.memory.gradients_bytes) << zero;
      EXPECT_EQ(bytes[mgt::ir::BufferKind::optimizer], e.memory.optimizer_bytes) << zero;
      // ZeRO-1: every local gradient element held and reduce-scattered once, grad_bytes each.
      if (zero == 1) {
        EXPECT_EQ(e.memory.gradients_bytes % grad_bytes, 0);
        EXPECT_EQ(grads_reduced, e.memory.gradients_bytes) << grad_bytes;
      }
    }
  }
}

// torchtitan runs FSDP under a pipeline as ZeRO-1 over the same shard group
// (TrainingSettings::fsdp_gathers_once_under_pipeline): the schedule it lowers to must be the ZeRO-1
// plan's, collective for collective and buffer for buffer, and its model state what the estimator
// prices; without the claim, every micro-batch gathers. The schedule keeps the plan as written.
TEST(LowerToSchedule, PipelinedFsdpThatGathersOnceLowersAsZero1) {
  const auto& g = model("Llama-3.1-8B");
  TrainingSettings once = settings(128, 8);
  once.fsdp_gathers_once_under_pipeline = true;
  Plan fsdp;
  fsdp.dp_shard = 2;
  fsdp.pp = 2;
  fsdp.zero_stage = 3;  // 8 sequences / 2 replicas: 4 micro-batches per stage
  Plan zero1 = fsdp;
  zero1.zero_stage = 1;
  const Schedule a = lower_to_schedule(g, fsdp, once, 4, h100(), checked());
  const Schedule b = lower_to_schedule(g, zero1, once, 4, h100(), checked());
  const Schedule each = lower_to_schedule(g, fsdp, settings(128, 8), 4, h100(), checked());
  ASSERT_TRUE(mgt::ir::verify(a).empty());
  EXPECT_EQ(a.plan.zero_stage, 3);
  ASSERT_EQ(a.programs.size(), 2u);
  const auto e = mgt::cost::Estimator(g, h100(), 4, once).estimate(fsdp);
  for (size_t k = 0; k < a.programs.size(); ++k) {
    const Counts ca = count(a.programs[k]), cb = count(b.programs[k]), ce = count(each.programs[k]);
    EXPECT_EQ(ca.collective, cb.collective) << "stage " << k;
    EXPECT_EQ(ca.allocs, cb.allocs) << "stage " << k;
    EXPECT_GT(ce.collective.at("all_gather@dp_shard"), 4 * ca.collective.at("all_gather@dp_shard")) << "stage " << k;
  }
  // Model state on the stage the estimator reports, its peak: the first, whose 1F1B holds the most
  // micro-batches in flight (the last stage holds the same layers and head, plus the final norm).
  std::map<mgt::ir::BufferKind, int64_t> bytes;
  for (const auto& in : a.programs.front().instructions)
    if (const auto* x = std::get_if<mgt::ir::Alloc>(&in.op); x && (x->buffer == "params" || x->buffer == "grads" || x->buffer == "optim"))
      bytes[x->kind] += x->bytes;
  EXPECT_EQ(bytes[mgt::ir::BufferKind::parameters], e.memory.parameters_bytes);
  EXPECT_EQ(bytes[mgt::ir::BufferKind::gradients], e.memory.gradients_bytes);
  EXPECT_EQ(bytes[mgt::ir::BufferKind::optimizer], e.memory.optimizer_bytes);
}

// ---- errors -----------------------------------------------------------------------------------------

TEST(LowerToSchedule, RejectsPlansItCannotExpress) {
  Plan plan;
  plan.dp_shard = 4;
  EXPECT_THROW(lower_to_schedule(model("GPT-2"), plan, settings(128, 4), 8, h100()), mgt::ir::InputError);
  Plan inter;
  inter.pp = 2;
  inter.vpp = 2;
  inter.dp_shard = 2;  // 6 sequences / 2 replicas = 3 micro-batches, not a multiple of pp
  EXPECT_THROW(lower_to_schedule(model("GPT-2"), inter, settings(128, 6), 4, h100()), mgt::ir::InputError);
}

// ---- scale ------------------------------------------------------------------------------------------

// The lowering time itself is a benchmark (bench/simulate_bench.cpp); here: the 16,384-GPU schedule
// has one program per pipeline stage and passes the verifier.
TEST(LowerToSchedule, Llama405bOn16kGpusHasOneProgramPerStageAndVerifies) {
  Plan plan;
  plan.tp = 8;
  plan.pp = 16;
  plan.dp_shard = 128;
  TrainingSettings st;
  st.seq_len = 8192;
  st.global_batch_tokens = 16ll << 20;
  LowerOptions fast;
  fast.verify_each_pass = false;
  const Schedule s = lower_to_schedule(model("Llama-3.1-405B"), plan, st, 16384, h100(), fast);
  EXPECT_EQ(s.programs.size(), 16u);
  const auto problems = mgt::ir::verify(s);
  EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems.front());
}

}  // namespace

namespace {

// Memory in program order (Alloc adds, Free removes): the schedule's peak for one stage.
int64_t program_order_peak(const mgt::ir::Program& p) {
  std::map<std::string, int64_t> live;
  int64_t now = 0, peak = 0;
  for (const auto& in : p.instructions) {
    if (const auto* a = std::get_if<mgt::ir::Alloc>(&in.op)) {
      live[a->buffer] = a->bytes;
      now += a->bytes;
    }
    if (const auto* f = std::get_if<mgt::ir::Free>(&in.op)) now -= live[f->buffer];
    peak = std::max(peak, now);
  }
  return peak;
}

TEST(LowerToSchedule, ProgramOrderPeakIsCloseToEstimatorPeak) {
  const auto& g = model("Llama-3.1-8B");
  const TrainingSettings st = settings(1024, 32);
  std::vector<Plan> plans(4);
  plans[0].dp_shard = 8;
  plans[1].dp_shard = 4, plans[1].tp = 2, plans[1].recompute = Recompute::selective;
  plans[2].pp = 2, plans[2].dp_shard = 2, plans[2].tp = 2, plans[2].recompute = Recompute::full;
  plans[3].dp_replicate = 2, plans[3].dp_shard = 2, plans[3].cp = 2;
  for (const Plan& plan : plans) {
    const Schedule s = lower_to_schedule(g, plan, st, 8, h100(), checked());
    const auto e = mgt::cost::Estimator(g, h100(), 8, st).estimate(plan);
    int64_t peak = 0;
    for (const auto& p : s.programs) peak = std::max(peak, program_order_peak(p));
    const double expected = double(e.memory.peak_bytes - e.memory.overhead_bytes);
    std::printf("%s: schedule %.3f GB, estimator (without overheads) %.3f GB\n", key(plan).c_str(), double(peak) / 1e9,
                expected / 1e9);
    EXPECT_NEAR(double(peak) / expected, 1.0, 0.05) << key(plan);
  }
}

}  // namespace
