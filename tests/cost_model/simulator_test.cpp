// Tests for the discrete-event simulator (simulator.hpp) on tiny hand-built schedules with exact
// start / end times (STYLE.md 8.6: FlexFlow's linear and rhomboid graphs), the Chrome trace's
// structure and the SVG. The model is one block with one residual op on b=1, s=1000, h=1000 bf16
// tensors, so on a 1 TB/s GPU with no kernel floor its forward takes 3 x 2 MB / 1 TB/s = 6 us and
// its backward 2 x 2 MB / 1 TB/s = 4 us (docs/cost-model.md §2); links have no latency, so a
// collective takes bytes x bus factor / bandwidth.
#include "mgt/cost_model/simulator.hpp"

#include "round_hardware.hpp"

#include "mgt/cost_model/collective.hpp"
#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace mgt::cost {
namespace {

constexpr double kFwd = 6e-6, kBwd = 4e-6;  // the residual op, see the header comment

ir::Graph tiny_graph() {
  ir::Block blk;
  blk.name = "blk";
  blk.repeat = 4;
  for (const char* name : {"x", "y", "out"}) blk.tensors.push_back({name, {{'b', 0}, {'s', 0}, {'h', 1000}}, false});
  ir::Op add;
  add.name = "add";
  add.kind = ir::OpKind::residual;
  add.inputs = {"x", "y"};
  add.output = "out";
  blk.ops = {add};
  ir::Graph g;
  g.info.name = "tiny";
  g.info.num_layers = 4;
  g.blocks = {blk};
  return g;
}

// round_hardware.hpp's cluster without link latencies, so a collective takes bytes x bus factor / bandwidth.
ir::ClusterSpec round_cluster() { return round::cluster(/*latencies=*/false); }

// round_hardware.hpp's parameters with small memory overheads (1000 B context, 200 B NCCL buffers, 10 %
// fragmentation) and the given overlap slowdown.
CostParams round_params(double slowdown = 0) {
  CostParams p = round::params();
  p.overlap_compute_slowdown = slowdown;
  p.cuda_context_bytes = 1000;
  p.nccl_buffer_bytes = 200;
  p.allocator_fragmentation = 0.1;
  return p;
}

TrainingSettings settings() {
  TrainingSettings s;
  s.seq_len = 1000;
  s.global_batch_tokens = 8000;
  return s;
}

Simulator make_sim(double slowdown = 0) { return Simulator(tiny_graph(), round_cluster(), settings(), round_params(slowdown)); }

ir::Schedule schedule_on(std::vector<ir::MeshAxis> axes) {
  ir::Schedule s;
  s.model = "tiny";
  s.mesh.axes = std::move(axes);
  s.num_gpus = ir::num_ranks(s.mesh);
  for (const auto& a : s.mesh.axes) {
    if (a.name == "pp") s.plan.pp = a.size;
    if (a.name == "tp") s.plan.tp = a.size;
    if (a.name == "dp_shard") s.plan.dp_shard = a.size;
  }
  s.plan.sequence_parallel = false;  // so the residual op keeps its full 6 us under tp
  return s;
}

ir::Compute fwd(int64_t layer, int64_t mb = 0) {
  ir::Compute c;
  c.op = "add";
  c.block = "blk";
  c.layer = layer;
  c.micro_batch = mb;
  c.phase = ir::Phase::fwd;
  c.flops = 0;
  c.bytes = 6'000'000;
  return c;
}
ir::Compute bwd(int64_t layer, int64_t mb = 0) {
  ir::Compute c = fwd(layer, mb);
  c.phase = ir::Phase::bwd_data;
  return c;
}

ir::Collective all_reduce(std::vector<std::string> axes, int64_t group, int64_t bytes, std::string buffer = "g") {
  return ir::Collective{ir::CollectiveKind::all_reduce, std::move(axes), group, /*nodes=*/1, bytes, ir::DType::bf16,
                        std::move(buffer), ir::ReduceOp::sum, {}};
}

const TimelineRecord& rec(const SimulationResult& r, size_t program, ir::InstrId id) {
  for (const auto& t : r.timeline)
    if (size_t(t.program) == program && t.instruction == id) return t;
  throw std::runtime_error("no record");
}

void expect_times(const SimulationResult& r, size_t program, ir::InstrId id, double start, double end) {
  const TimelineRecord& t = rec(r, program, id);
  EXPECT_NEAR(t.start_s, start, 1e-15) << "program " << program << " #" << id;
  EXPECT_NEAR(t.end_s, end, 1e-15) << "program " << program << " #" << id;
}

double breakdown_sum(const TimeBreakdown& t) {
  return t.compute_s + t.recompute_s + t.exposed_tp_s + t.exposed_cp_s + t.exposed_fsdp_s + t.exposed_dp_s +
         t.exposed_pp_s + t.exposed_ep_s + t.bubble_s + t.optimizer_s + t.overhead_s;
}

void expect_breakdowns_sum_to_step(const SimulationResult& r) {
  for (size_t p = 0; p < r.programs.size(); ++p)
    EXPECT_NEAR(breakdown_sum(r.programs[p].breakdown), r.step_time_s, 1e-12 * r.step_time_s) << "program " << p;
}

TEST(simulate, prices_the_residual_op_by_hand) {
  const std::vector<OpCost> ops = op_costs(tiny_graph().blocks[0], {1, 1000}, round_cluster(), round_params());
  EXPECT_DOUBLE_EQ(ops[0].fwd_s, kFwd);
  EXPECT_DOUBLE_EQ(ops[0].bwd_data_s + ops[0].bwd_weight_s, kBwd);
}

TEST(simulate, linear_chain_on_one_stream) {
  ir::Schedule s = schedule_on({{"dp_shard", 1}});
  ir::Program& p = ir::add_program(s, "all", {}, 1);
  ir::emit(p, ir::Stream::compute, ir::Alloc{"act", 100, ir::BufferKind::activations});
  ir::emit(p, ir::Stream::compute, fwd(0));
  ir::emit(p, ir::Stream::compute, fwd(1));
  ir::emit(p, ir::Stream::compute, bwd(1));
  ir::emit(p, ir::Stream::compute, ir::Free{"act"});
  const SimulationResult r = make_sim().simulate(s);
  expect_times(r, 0, 0, 0, 0);
  expect_times(r, 0, 1, 0, kFwd);
  expect_times(r, 0, 2, kFwd, 2 * kFwd);
  expect_times(r, 0, 3, 2 * kFwd, 2 * kFwd + kBwd);
  expect_times(r, 0, 4, 2 * kFwd + kBwd, 2 * kFwd + kBwd);
  EXPECT_NEAR(r.makespan_s, 2 * kFwd + kBwd, 1e-15);
  EXPECT_EQ(r.step_time_s, r.makespan_s);
  EXPECT_NEAR(r.programs[0].busy_s[size_t(ir::Stream::compute)], 2 * kFwd + kBwd, 1e-15);
  EXPECT_NEAR(r.breakdown.compute_s, 2 * kFwd + kBwd, 1e-15);
  EXPECT_EQ(r.breakdown.bubble_s, 0.0);
  EXPECT_EQ(r.micro_batches, 1);
  EXPECT_EQ(r.timeline.size(), 5u);
}

// The rhomboid on tp = 2: fwd(0) on the compute stream and a 10 MB all-reduce on the tp stream both
// wait for the buffer's Alloc (#0); fwd(1) waits for both; the Free comes last. `a` is fwd(0), `c` the
// all-reduce.
struct Rhomboid {
  ir::Schedule schedule;
  ir::InstrId a, c;
};
Rhomboid rhomboid() {
  Rhomboid r{schedule_on({{"tp", 2}}), 0, 0};
  ir::Program& p = ir::add_program(r.schedule, "all", {}, 2);
  ir::emit(p, ir::Stream::compute, ir::Alloc{"g", 10'000'000, ir::BufferKind::comm_buffer});
  r.a = ir::emit(p, ir::Stream::compute, fwd(0), {0});
  r.c = ir::emit(p, ir::Stream::tp, all_reduce({"tp"}, 2, 10'000'000), {0});
  ir::emit(p, ir::Stream::compute, fwd(1), {r.a, r.c});
  ir::emit(p, ir::Stream::compute, ir::Free{"g"}, {3});
  return r;
}

// Rhomboid: a forward kernel and a TP all-reduce run side by side; the next kernel waits for both.
// tp=2 all-reduce of 10 MB: bus factor 2(n-1)/n = 1, 10 MB / 100 GB/s = 100 us.
TEST(simulate, two_streams_overlap_and_join) {
  const double ar = 100e-6;
  for (double slowdown : {0.0, 0.1}) {
    const auto [s, a, c] = rhomboid();
    const SimulationResult r = make_sim(slowdown).simulate(s);
    // The kernel that overlaps the all-reduce runs `slowdown` slower for its whole 6 us.
    const double a_end = kFwd * (1 + slowdown);
    expect_times(r, 0, a, 0, a_end);
    expect_times(r, 0, c, 0, ar);
    expect_times(r, 0, 3, ar, ar + kFwd);
    EXPECT_NEAR(r.makespan_s, ar + kFwd, 1e-15);
    EXPECT_NEAR(r.programs[0].busy_s[size_t(ir::Stream::tp)], ar, 1e-15);
    // Exposed TP = the compute stream's wait on the all-reduce, plus the slowdown it caused.
    EXPECT_NEAR(r.breakdown.compute_s, 2 * kFwd, 1e-15);
    EXPECT_NEAR(r.breakdown.exposed_tp_s, ar - kFwd, 1e-15);
    EXPECT_NEAR(r.breakdown.bubble_s, 0, 1e-15);
    expect_breakdowns_sum_to_step(r);
  }
}

// Two pipeline stages; an all-reduce over pp involves both, so stage 0's starts when stage 1 arrives.
TEST(simulate, collective_waits_for_its_slowest_participant) {
  ir::Schedule s = schedule_on({{"pp", 2}});
  const double ar = 10'000'000 / 100e9;  // 2 GPUs of one node, bus factor 1
  {
    ir::Program& p0 = ir::add_program(s, "stage0", {{"pp", 0}}, 1);
    ir::emit(p0, ir::Stream::compute, ir::Alloc{"g", 10'000'000, ir::BufferKind::gradients});
    ir::emit(p0, ir::Stream::pp, all_reduce({"pp"}, 2, 10'000'000), {0});
    ir::emit(p0, ir::Stream::compute, fwd(0), {1});
    ir::emit(p0, ir::Stream::compute, ir::Free{"g"}, {2});
  }
  {
    ir::Program& p1 = ir::add_program(s, "stage1", {{"pp", 1}}, 1);
    ir::emit(p1, ir::Stream::compute, ir::Alloc{"g", 10'000'000, ir::BufferKind::gradients});
    ir::emit(p1, ir::Stream::compute, fwd(2));
    ir::emit(p1, ir::Stream::compute, fwd(3));
    ir::emit(p1, ir::Stream::pp, all_reduce({"pp"}, 2, 10'000'000), {2});
    ir::emit(p1, ir::Stream::compute, ir::Free{"g"}, {3});
  }
  const SimulationResult r = make_sim().simulate(s);
  expect_times(r, 0, 1, 2 * kFwd, 2 * kFwd + ar);
  expect_times(r, 1, 3, 2 * kFwd, 2 * kFwd + ar);
  expect_times(r, 0, 2, 2 * kFwd + ar, 3 * kFwd + ar);
  EXPECT_NEAR(r.makespan_s, 3 * kFwd + ar, 1e-15);
  EXPECT_EQ(r.critical_program, 0u);
  // Stage 0 waited 2 kFwd for stage 1 (bubble), then ar for the transfer (exposed over pp).
  const TimeBreakdown& b0 = r.programs[0].breakdown;
  EXPECT_NEAR(b0.bubble_s, 2 * kFwd, 1e-15);
  EXPECT_NEAR(b0.exposed_pp_s, ar, 1e-15);
  EXPECT_NEAR(b0.compute_s, kFwd, 1e-15);
  // Stage 1 ends at 2 kFwd + ar and then idles until the step ends.
  EXPECT_NEAR(r.programs[1].end_s, 2 * kFwd + ar, 1e-15);
  EXPECT_NEAR(r.programs[1].breakdown.exposed_pp_s, ar, 1e-15);
  EXPECT_NEAR(r.programs[1].breakdown.bubble_s, kFwd, 1e-15);
  expect_breakdowns_sum_to_step(r);
}

ir::Send send(int64_t bytes, std::string buffer, int64_t tag, bool batch = false) {
  return ir::Send{"pp", 1, bytes, std::move(buffer), tag, batch};
}
ir::Recv recv(int64_t bytes, std::string buffer, int64_t tag, bool batch = false) {
  return ir::Recv{"pp", -1, bytes, std::move(buffer), tag, batch};
}

// Forward of stage 0 -> send -> stage 1 receives -> forward and backward -> send -> stage 0 receives
// -> backward.
ir::Schedule two_stage_pipeline() {
  ir::Schedule s = schedule_on({{"pp", 2}});
  {
    ir::Program& p = ir::add_program(s, "stage0", {{"pp", 0}}, 1);
    ir::emit(p, ir::Stream::compute, ir::Alloc{"act", 2'000'000, ir::BufferKind::activations});   // 0
    ir::emit(p, ir::Stream::compute, fwd(0), {0});                                                // 1
    ir::emit(p, ir::Stream::pp, send(2'000'000, "act", 0), {1});                                  // 2
    ir::emit(p, ir::Stream::compute, ir::Alloc{"grad", 2'000'000, ir::BufferKind::gradients});    // 3
    ir::emit(p, ir::Stream::pp, recv(2'000'000, "grad", 1), {3});                                 // 4
    ir::emit(p, ir::Stream::compute, bwd(0), {4});                                                // 5
    ir::emit(p, ir::Stream::compute, ir::Free{"grad"}, {5});                                      // 6
    ir::emit(p, ir::Stream::compute, ir::Free{"act"}, {6, 2});                                    // 7
  }
  {
    ir::Program& p = ir::add_program(s, "stage1", {{"pp", 1}}, 1);
    ir::emit(p, ir::Stream::compute, ir::Alloc{"act", 2'000'000, ir::BufferKind::activations});   // 0
    ir::emit(p, ir::Stream::compute, ir::Alloc{"grad", 2'000'000, ir::BufferKind::gradients});    // 1
    ir::emit(p, ir::Stream::pp, recv(2'000'000, "act", 0), {0});                                  // 2
    ir::emit(p, ir::Stream::compute, fwd(1), {2});                                                // 3
    ir::emit(p, ir::Stream::compute, bwd(1), {3});                                                // 4
    ir::emit(p, ir::Stream::pp, send(2'000'000, "grad", 1), {4});                                 // 5
    ir::emit(p, ir::Stream::compute, ir::Free{"grad"}, {5});                                      // 6
    ir::emit(p, ir::Stream::compute, ir::Free{"act"}, {6});                                       // 7
  }
  return s;
}

TEST(simulate, send_and_recv_complete_together_across_stages) {
  const ir::Schedule s = two_stage_pipeline();
  ASSERT_TRUE(ir::verify(s).empty()) << ir::verify(s).front();
  const double hop = 2'000'000 / 100e9;  // 20 us over NVLink
  const SimulationResult r = make_sim().simulate(s);
  // Stage 1's receive is reached at 0 but completes with the send, which stage 0 issues at kFwd.
  expect_times(r, 0, 2, kFwd, kFwd + hop);
  expect_times(r, 1, 2, kFwd, kFwd + hop);
  expect_times(r, 1, 3, kFwd + hop, 2 * kFwd + hop);
  expect_times(r, 1, 4, 2 * kFwd + hop, 2 * kFwd + hop + kBwd);
  // The backward hop: stage 1's send meets stage 0's receive, which was reached at kFwd + hop.
  const double back = 2 * kFwd + hop + kBwd;
  expect_times(r, 1, 5, back, back + hop);
  expect_times(r, 0, 4, back, back + hop);
  expect_times(r, 0, 5, back + hop, back + hop + kBwd);
  EXPECT_NEAR(r.makespan_s, back + hop + kBwd, 1e-15);
  // Stage 1: waited kFwd for stage 0 (bubble) and hop for the transfer (exposed pp), at the end hop
  // for its last send and kBwd for stage 0's backward.
  const TimeBreakdown& b1 = r.programs[1].breakdown;
  EXPECT_NEAR(b1.compute_s, kFwd + kBwd, 1e-15);
  EXPECT_NEAR(b1.exposed_pp_s, 2 * hop, 1e-15);
  EXPECT_NEAR(b1.bubble_s, kFwd + kBwd, 1e-15);
  const TimeBreakdown& b0 = r.programs[0].breakdown;
  EXPECT_NEAR(b0.exposed_pp_s, 2 * hop, 1e-15);
  EXPECT_NEAR(b0.bubble_s, kFwd + kBwd, 1e-15);
  expect_breakdowns_sum_to_step(r);
}

TEST(simulate, batched_exchange_starts_when_every_member_is_reached) {
  // A ring exchange between two stages: each sends to the other and receives, batched, so neither
  // blocks; the group starts when the later stage (after two kernels) issues it.
  ir::Schedule s = schedule_on({{"pp", 2}});
  for (int64_t stage = 0; stage < 2; ++stage) {
    ir::Program& p = ir::add_program(s, "stage" + std::to_string(stage), {{"pp", stage}}, 1);
    // Stage 0 sends 1 MB and receives 3 MB; stage 1 the other way round.
    const int64_t out_bytes = stage == 0 ? 1'000'000 : 3'000'000;
    const int64_t in_bytes = stage == 0 ? 3'000'000 : 1'000'000;
    ir::emit(p, ir::Stream::compute, ir::Alloc{"out", out_bytes, ir::BufferKind::comm_buffer});
    ir::emit(p, ir::Stream::compute, ir::Alloc{"in", in_bytes, ir::BufferKind::comm_buffer});
    ir::InstrId last = ir::emit(p, ir::Stream::compute, fwd(stage), {1});
    if (stage == 1) last = ir::emit(p, ir::Stream::compute, fwd(stage + 2));
    const ir::InstrId x = ir::emit(p, ir::Stream::pp, ir::Send{"pp", 1, out_bytes, "out", stage, true}, {last});
    const ir::InstrId y = ir::emit(p, ir::Stream::pp, ir::Recv{"pp", -1, in_bytes, "in", 1 - stage, false}, {last});
    ir::emit(p, ir::Stream::compute, ir::Free{"in"}, {x, y});
    ir::emit(p, ir::Stream::compute, ir::Free{"out"}, {x, y});
  }
  ASSERT_TRUE(ir::verify(s).empty()) << ir::verify(s).front();
  const SimulationResult r = make_sim().simulate(s);
  const double big = 3'000'000 / 100e9;  // the group ends with its largest transfer
  for (size_t p = 0; p < 2; ++p) {
    const ir::InstrId x = p == 0 ? 3 : 4;
    expect_times(r, p, x, 2 * kFwd, 2 * kFwd + big);
    expect_times(r, p, x + 1, 2 * kFwd, 2 * kFwd + big);
  }
  // The trace shows the batch as one event per stage.
  const nlohmann::json trace = to_chrome_trace(s, r);
  int batches = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["name"].get<std::string>().find(" + ") != std::string::npos) ++batches;
  EXPECT_EQ(batches, 2);
}

TEST(simulate, memory_peak_and_when_it_happens) {
  ir::Schedule s = schedule_on({{"dp_shard", 1}});
  ir::Program& p = ir::add_program(s, "all", {}, 1);
  ir::emit(p, ir::Stream::compute, ir::Alloc{"w", 1000, ir::BufferKind::parameters});    // 0 at 0
  ir::emit(p, ir::Stream::compute, ir::Alloc{"a", 100, ir::BufferKind::activations});    // 1 at 0
  ir::emit(p, ir::Stream::compute, fwd(0));                                              // 2 [0, f]
  ir::emit(p, ir::Stream::compute, ir::Alloc{"b", 50, ir::BufferKind::gradients});       // 3 at f
  ir::emit(p, ir::Stream::compute, bwd(0));                                              // 4 [f, f+b]
  ir::emit(p, ir::Stream::compute, ir::Free{"a"});                                       // 5 at f+b
  ir::emit(p, ir::Stream::compute, ir::Alloc{"c", 30, ir::BufferKind::workspace});       // 6
  ir::emit(p, ir::Stream::compute, ir::Free{"b"});
  ir::emit(p, ir::Stream::compute, ir::Free{"c"});
  ir::emit(p, ir::Stream::compute, ir::Free{"w"});
  ASSERT_TRUE(ir::verify(s).empty()) << ir::verify(s).front();
  const SimulationResult r = make_sim().simulate(s);
  const ProgramMemory& m = r.programs[0].memory;
  EXPECT_EQ(m.peak_bytes, 1150);
  EXPECT_NEAR(m.peak_time_s, kFwd, 1e-15);
  EXPECT_EQ(m.peak_by_kind[size_t(ir::BufferKind::parameters)], 1000);
  EXPECT_EQ(m.peak_by_kind[size_t(ir::BufferKind::activations)], 100);
  EXPECT_EQ(m.peak_by_kind[size_t(ir::BufferKind::gradients)], 50);
  EXPECT_EQ(m.peak_by_kind[size_t(ir::BufferKind::workspace)], 0);
  // Live at the peak, largest first: w, a, b (c comes after a is freed).
  ASSERT_EQ(m.peak_live.size(), 3u);
  EXPECT_EQ(m.peak_live[0].name, "w");
  EXPECT_EQ(m.peak_live[1].name, "a");
  EXPECT_EQ(m.peak_live[2].name, "b");
  EXPECT_EQ(m.peak_live[2].bytes, 50);
  EXPECT_EQ(m.peak_live[2].kind, ir::BufferKind::gradients);
  // + context 1000 + NCCL 200 + fragmentation 10 %
  EXPECT_EQ(m.peak_reserved_bytes, 1150 + 1000 + 200 + 115);
  EXPECT_EQ(r.peak_bytes, m.peak_reserved_bytes);
  // One point per distinct time: 1100 at 0, 1150 at f, then 1080 and 0 at f+b.
  ASSERT_EQ(m.timeline.size(), 3u);
  EXPECT_EQ(m.timeline[0], (MemoryPoint{0, 1100}));
  EXPECT_EQ(m.timeline[1].bytes, 1150);
  EXPECT_EQ(m.timeline[2].bytes, 0);
}

TEST(simulate, adds_fixed_overheads_per_micro_batch_and_step) {
  ir::Schedule s = schedule_on({{"dp_shard", 1}});
  ir::Program& p = ir::add_program(s, "all", {}, 1);
  ir::emit(p, ir::Stream::compute, fwd(0, 0));
  ir::emit(p, ir::Stream::compute, fwd(0, 1));
  CostParams params = round_params();
  params.per_microbatch_overhead_s = 2e-3;
  params.per_step_overhead_s = 10e-3;
  const SimulationResult r = Simulator(tiny_graph(), round_cluster(), settings(), params).simulate(s);
  EXPECT_EQ(r.micro_batches, 2);
  EXPECT_NEAR(r.step_time_s, 2 * kFwd + 14e-3, 1e-15);
  EXPECT_NEAR(r.breakdown.overhead_s, 14e-3, 1e-15);
  expect_breakdowns_sum_to_step(r);
}

// The CPU backend runs a rank's instructions one after another: the rhomboid above becomes a chain,
// fwd(0) 6 us, then the 100 us all-reduce, then fwd(1): 112 us, the all-reduce fully exposed.
TEST(simulate, without_concurrent_streams_a_program_is_one_queue) {
  const auto [s, a, c] = rhomboid();
  CostParams params = round_params();
  params.concurrent_streams = false;
  const SimulationResult r = Simulator(tiny_graph(), round_cluster(), settings(), params).simulate(s);
  const double ar = 100e-6;
  expect_times(r, 0, a, 0, kFwd);
  expect_times(r, 0, c, kFwd, kFwd + ar);
  expect_times(r, 0, 3, kFwd + ar, 2 * kFwd + ar);
  EXPECT_NEAR(r.makespan_s, 2 * kFwd + ar, 1e-15);
  EXPECT_NEAR(r.breakdown.exposed_tp_s, ar, 1e-15);
  expect_breakdowns_sum_to_step(r);
}

// A measured kernel rate replaces the bandwidth model: the residual op over 1e6 elements at
// 5e10 elements/s forward takes 20 us (not 6 us), backward (no row) keeps its 4 us.
TEST(simulate, measured_kernel_rate_prices_the_op) {
  ir::ClusterSpec cluster = round_cluster();
  cluster.kernel_table = {{.op = "residual", .phase = "fwd", .work_per_s = 5e10}};
  const std::vector<OpCost> ops = op_costs(tiny_graph().blocks[0], {1, 1000}, cluster, round_params());
  EXPECT_NEAR(ops[0].fwd_s, 1e6 / 5e10, 1e-18);
  EXPECT_DOUBLE_EQ(ops[0].bwd_data_s + ops[0].bwd_weight_s, kBwd);
}

TEST(simulate, reports_a_stuck_schedule) {
  // Both stages receive before they send, unbatched: each waits for the other forever.
  ir::Schedule s = schedule_on({{"pp", 2}});
  for (int64_t stage = 0; stage < 2; ++stage) {
    ir::Program& p = ir::add_program(s, "stage" + std::to_string(stage), {{"pp", stage}}, 1);
    ir::emit(p, ir::Stream::compute, ir::Alloc{"in", 100, ir::BufferKind::comm_buffer});
    ir::emit(p, ir::Stream::compute, ir::Alloc{"out", 100, ir::BufferKind::comm_buffer});
    ir::emit(p, ir::Stream::pp, ir::Recv{"pp", -1, 100, "in", 0, false}, {0});
    ir::emit(p, ir::Stream::pp, ir::Send{"pp", 1, 100, "out", 0, false}, {1});
    ir::emit(p, ir::Stream::compute, ir::Free{"in"}, {2, 3});
    ir::emit(p, ir::Stream::compute, ir::Free{"out"}, {2, 3});
  }
  try {
    make_sim().simulate(s);
    FAIL() << "expected an InputError";
  } catch (const ir::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stuck"), std::string::npos) << e.what();
  }
}

TEST(simulate, rejects_an_op_the_graph_lacks) {
  ir::Schedule s = schedule_on({{"dp_shard", 1}});
  ir::Program& p = ir::add_program(s, "all", {}, 1);
  ir::Compute c = fwd(0);
  c.op = "nope";
  ir::emit(p, ir::Stream::compute, c);
  EXPECT_THROW(make_sim().simulate(s), ir::InputError);
}

// ---- properties over random schedules ----

// A random valid single-program schedule: kernels on the compute stream, collectives over tp on the
// tp and dp streams, waits, random earlier dependencies.
ir::Schedule random_schedule(std::mt19937& rng, int64_t n) {
  ir::Schedule s = schedule_on({{"tp", 4}});
  ir::Program& p = ir::add_program(s, "all", {}, 4);
  ir::emit(p, ir::Stream::compute, ir::Alloc{"g", 1 << 24, ir::BufferKind::comm_buffer});
  std::uniform_int_distribution<int> kind(0, 5);
  std::uniform_int_distribution<int64_t> bytes(1, 1 << 24);
  for (int64_t i = 1; i < n; ++i) {
    std::vector<ir::InstrId> deps;
    std::uniform_int_distribution<ir::InstrId> earlier(0, i - 1);
    for (int d = std::uniform_int_distribution<int>(0, 2)(rng); d > 0; --d) deps.push_back(earlier(rng));
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    switch (kind(rng)) {
      case 0: case 1: ir::emit(p, ir::Stream::compute, fwd(i % 4), deps); break;
      case 2: ir::emit(p, ir::Stream::compute, bwd(i % 4), deps); break;
      case 3: ir::emit(p, ir::Stream::tp, all_reduce({"tp"}, 4, bytes(rng)), deps); break;
      case 4: ir::emit(p, ir::Stream::dp, all_reduce({"tp"}, 4, bytes(rng)), deps); break;
      default: ir::emit(p, ir::Stream::compute, ir::Wait{earlier(rng)}, deps); break;
    }
  }
  ir::emit(p, ir::Stream::compute, ir::Free{"g"}, {n - 1});
  return s;
}

TEST(simulate, makespan_bounds_busy_time_and_equals_the_critical_path) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const ir::Schedule s = random_schedule(rng, 200);
    ASSERT_TRUE(ir::verify(s).empty()) << ir::verify(s).front();
    const SimulationResult r = make_sim().simulate(s);
    for (double busy : r.programs[0].busy_s) EXPECT_LE(busy, r.makespan_s * (1 + 1e-12));
    // Critical path over deps, waits and stream order with the simulated durations (no slowdown,
    // no partners): an as-soon-as-possible schedule reaches it exactly.
    const auto& instrs = s.programs[0].instructions;
    std::vector<double> finish(instrs.size(), 0);
    std::map<ir::Stream, double> stream_end;
    double longest = 0;
    for (const auto& in : instrs) {
      const TimelineRecord& t = rec(r, 0, in.id);
      double ready = stream_end[in.stream];
      for (auto d : in.deps) ready = std::max(ready, finish[size_t(d)]);
      if (const auto* w = std::get_if<ir::Wait>(&in.op)) ready = std::max(ready, finish[size_t(w->on)]);
      finish[size_t(in.id)] = ready + (t.end_s - t.start_s);
      stream_end[in.stream] = finish[size_t(in.id)];
      longest = std::max(longest, finish[size_t(in.id)]);
    }
    EXPECT_NEAR(r.makespan_s, longest, 1e-12 * longest) << "trial " << trial;
    // With slowdown the makespan only grows, and the breakdown still adds up.
    const SimulationResult slow = make_sim(0.1).simulate(s);
    EXPECT_GE(slow.makespan_s, r.makespan_s * (1 - 1e-12));
    expect_breakdowns_sum_to_step(r);
    expect_breakdowns_sum_to_step(slow);
  }
}

// ---- Chrome trace and SVG ----

void expect_valid_trace(const nlohmann::json& trace, size_t programs) {
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> threads;
  std::map<int, bool> named;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid"));
    if (e["ph"] == "M" && e["name"] == "process_name") named[e["pid"].get<int>()] = true;
    if (e["ph"] != "X") continue;
    for (const char* key : {"name", "ts", "dur", "pid", "tid"}) ASSERT_TRUE(e.contains(key)) << key << " in " << e.dump();
    EXPECT_FALSE(e["name"].get<std::string>().empty());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    threads[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({e["ts"].get<double>(), e["dur"].get<double>()});
  }
  EXPECT_EQ(named.size(), programs);
  for (const auto& [thread, events] : threads) {
    for (size_t i = 1; i < events.size(); ++i) {
      EXPECT_LE(events[i - 1].first, events[i].first) << "thread " << thread.first << "/" << thread.second;
      EXPECT_LE(events[i - 1].first + events[i - 1].second, events[i].first + 1e-6)
          << "overlap on thread " << thread.first << "/" << thread.second << " at event " << i;
    }
  }
}

TEST(to_chrome_trace, complete_events_per_thread_sorted_and_disjoint) {
  const ir::Schedule s = two_stage_pipeline();
  const SimulationResult r = make_sim(0.1).simulate(s);
  const nlohmann::json trace = to_chrome_trace(s, r);
  expect_valid_trace(trace, 2);
  // Names carry op, layer and micro-batch; args the bytes.
  bool found = false;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "fwd add layer1 mb0") {
      found = true;
      EXPECT_EQ(e["pid"], 1);
      EXPECT_EQ(e["tid"], int(ir::Stream::compute));
      EXPECT_NEAR(e["dur"].get<double>(), kFwd * 1e6, 1e-9);
      EXPECT_EQ(e["args"]["bytes"], 6'000'000);
    }
  EXPECT_TRUE(found);
  // Random schedules too (many streams, waits, zero-time instructions).
  std::mt19937 rng(11);
  for (int trial = 0; trial < 5; ++trial) {
    const ir::Schedule rs = random_schedule(rng, 300);
    expect_valid_trace(to_chrome_trace(rs, make_sim(0.1).simulate(rs)), 1);
  }
}

TEST(render_svg, self_contained_with_axes_and_legend) {
  const ir::Schedule s = two_stage_pipeline();
  const SimulationResult r = make_sim().simulate(s);
  const std::string svg = render_svg(s, r);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  for (const char* text : {"time per step (us)", "memory per GPU (MiB)", "pipeline bubble", "exposed PP", "stage1"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  if (const char* dir = std::getenv("MGT_SVG_OUT")) std::ofstream(std::string(dir) + "/simulator_test.svg") << svg;
}

}  // namespace
}  // namespace mgt::cost
