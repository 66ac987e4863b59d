// mgt.schedule/1: builders, membership rules, JSON and text round trips, and one test per verifier
// rule with a schedule that breaks exactly that rule.
#include "mgt/ir/error.hpp"
#include "mgt/ir/schedule.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace mgt::ir;

namespace {

// A two-stage pipeline on 8 GPUs (pp 2 x dp_shard 2 x tp 2), one micro-batch, one program per stage.
Schedule pipeline() {
  Schedule s;
  s.model = "tiny";
  s.plan.pp = 2;
  s.plan.dp_shard = 2;
  s.plan.tp = 2;
  s.num_gpus = 8;
  s.mesh = {{{"pp", 2}, {"dp_shard", 2}, {"tp", 2}}};
  for (int64_t stage = 0; stage < 2; ++stage) {
    Program& p = add_program(s, "stage" + std::to_string(stage), {{"pp", stage}}, 4);
    InstrId w = emit(p, Stream::compute, Alloc{"w", 4096, BufferKind::parameters});
    InstrId act = emit(p, Stream::compute, Alloc{"act", 1024, BufferKind::activations});
    InstrId in = w;
    if (stage == 1) in = emit(p, Stream::pp, Recv{"pp", -1, 1024, "act", /*tag=*/0, false}, {act});
    InstrId fwd = emit(p, Stream::compute,
                       Compute{"mlp", "layers", stage, Phase::fwd, 0, {{'b', 1}, {'s', 128}, {'h', 64}}, 1000, 2000, {"w", "act"}},
                       {act, in});
    InstrId ar = emit(p, Stream::tp, Collective{CollectiveKind::all_reduce, {"tp"}, 2, 1, 1024, DType::bf16, "act", ReduceOp::sum, {}}, {fwd});
    InstrId last = ar;
    if (stage == 0) last = emit(p, Stream::pp, Send{"pp", 1, 1024, "act", /*tag=*/0, false}, {ar});
    InstrId bwd = emit(p, Stream::compute, Compute{"mlp", "layers", stage, Phase::bwd_weight, 0, {}, 2000, 4000, {"w"}}, {last});
    InstrId g = emit(p, Stream::compute, Alloc{"grad", 4096, BufferKind::gradients});
    InstrId tied = emit(p, Stream::pp, Collective{CollectiveKind::all_reduce, {"pp"}, 2, 1, 512, DType::f32, "grad", ReduceOp::sum, {}}, {g, bwd});
    InstrId rs = emit(p, Stream::dp,
                      Collective{CollectiveKind::reduce_scatter, {"dp_shard"}, 2, 1, 4096, DType::bf16, "grad", ReduceOp::sum, {}}, {tied});
    InstrId wt = emit(p, Stream::compute, Wait{rs});
    InstrId opt = emit(p, Stream::compute, OptimizerStep{1024, 12288, {"w", "grad"}}, {wt});
    emit(p, Stream::compute, Free{"grad"}, {opt});
    emit(p, Stream::compute, Free{"act"}, {opt});
    emit(p, Stream::compute, Free{"w"}, {opt});
  }
  return s;
}

// True when some problem starts with `rule` and contains `detail`.
bool has_problem(const std::vector<std::string>& problems, const std::string& rule, const std::string& detail = {}) {
  for (const auto& p : problems)
    if (p.rfind(rule + ":", 0) == 0 && p.find(detail) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const auto& p : problems) out += p + "\n";
  return out;
}

Instruction& instr(Schedule& s, size_t p, size_t i) { return s.programs[p].instructions[i]; }

}  // namespace

TEST(ScheduleBuild, EmitNumbersInstructionsInOrder) {
  Schedule s = pipeline();
  const Program& p = s.programs[1];
  for (size_t i = 0; i < p.instructions.size(); ++i) EXPECT_EQ(p.instructions[i].id, InstrId(i));
  EXPECT_EQ(kind(p.instructions[2]), InstrKind::recv);
  EXPECT_EQ(to_string(kind(p.instructions[2])), "recv");
}

TEST(ScheduleVerify, ValidPipelineHasNoProblems) {
  std::vector<std::string> problems = verify(pipeline());
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(ScheduleMembership, ParticipantsPeersAndRanks) {
  Schedule s = pipeline();
  EXPECT_EQ(participants(s, 0, {"dp_shard"}), (std::vector<size_t>{0}));  // non-pp axes: the class itself
  EXPECT_EQ(participants(s, 1, {"pp", "tp"}), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(peer_program(s, 0, "pp", 1), std::optional<size_t>(1));
  EXPECT_EQ(peer_program(s, 1, "pp", 1), std::optional<size_t>(0));  // wraps around
  EXPECT_EQ(peer_program(s, 0, "tp", 1), std::optional<size_t>(0));  // unpinned axis: same program
  EXPECT_EQ(rank_coords(s.mesh, 5), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(program_for_rank(s, 3), std::optional<size_t>(0));
  EXPECT_EQ(program_for_rank(s, 4), std::optional<size_t>(1));
  EXPECT_EQ(group_size(s.mesh, {"dp_shard", "tp"}), 4);
}

TEST(ScheduleEnums, NamesRoundTrip) {
  for (int i = 0; i < kNumStreams; ++i) EXPECT_EQ(stream_from_string(to_string(Stream(i))), Stream(i));
  EXPECT_EQ(collective_kind_from_string("reduce_scatter"), CollectiveKind::reduce_scatter);
  EXPECT_EQ(buffer_kind_from_string("fsdp_buffer"), BufferKind::fsdp_buffer);
  EXPECT_EQ(phase_from_string("bwd_data"), Phase::bwd_data);
  EXPECT_EQ(dtype_from_string("f32"), DType::f32);
  EXPECT_FALSE(stream_from_string("nvlink").has_value());
}

TEST(ScheduleJson, RoundTripIsIdentical) {
  Schedule s = pipeline();
  s.plan.grad_accum = 4;
  nlohmann::json doc = to_json(s);
  EXPECT_EQ(doc.at("format"), "mgt.schedule/1");
  EXPECT_EQ(schedule_from_json(doc, "s.json"), s);
  EXPECT_EQ(schedule_from_json(nlohmann::json::parse(doc.dump()), "s.json"), s);
}

// The field named by the InputError schedule_from_json throws on `doc`; "<accepted>" when none.
std::string error_field(const nlohmann::json& doc) {
  try {
    (void)schedule_from_json(doc, "s.json");
  } catch (const InputError& e) {
    return e.field();
  }
  return "<accepted>";
}

TEST(ScheduleJson, ErrorsNameTheFieldPath) {
  nlohmann::json doc = to_json(pipeline());
  doc["programs"][1]["instructions"][3]["bytes"] = "many";
  EXPECT_EQ(error_field(doc), "programs[1].instructions[3].bytes");
  nlohmann::json typo = to_json(pipeline());
  typo["programs"][0]["instructions"][0]["byte"] = 1;
  EXPECT_THROW((void)schedule_from_json(typo, "s.json"), InputError);
  nlohmann::json kind = to_json(pipeline());
  kind["programs"][0]["instructions"][4]["collective"] = "all_scatter";
  EXPECT_EQ(error_field(kind), "programs[0].instructions[4].collective");
  nlohmann::json format = to_json(pipeline());
  format["format"] = "mgt.schedule/2";
  EXPECT_THROW((void)schedule_from_json(format, "s.json"), InputError);
}

TEST(ScheduleText, PrintsOneReadableLinePerInstruction) {
  std::string text = to_text(pipeline());
  EXPECT_NE(text.find("format mgt.schedule/1\n"), std::string::npos);
  EXPECT_NE(text.find("mesh pp=2 dp_shard=2 tp=2\n"), std::string::npos);
  EXPECT_NE(text.find("program c1 name=stage1 ranks=4 coords=pp:1\n"), std::string::npos);
  EXPECT_NE(text.find("c0 s:dp #8 reduce_scatter grad group=dp_shard n=2 nodes=1 dtype=bf16 bytes=4096 after=#7\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("c1 s:pp #2 recv act peer=pp-1 tag=0 bytes=1024 after=#1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("c0 s:compute #2 compute fwd mlp block=layers layer=0 mb=0 dims=b:1,s:128,h:64 flops=1000 "
                      "bytes=2000 buffers=w,act after=#1,#0\n"),
            std::string::npos)
      << text;
}

TEST(ScheduleText, PrintParseRoundTripIsIdentical) {
  Schedule s = pipeline();
  EXPECT_EQ(schedule_from_text(to_text(s), "s.txt"), s);
}

TEST(ScheduleText, RoundTripKeepsAwkwardNamesAndFlags) {
  Schedule s = pipeline();
  s.model = "my model \"v2\", final";
  s.plan.recompute = Recompute::full;
  s.plan.sequence_parallel = false;
  Program& p = s.programs[0];
  p.name = "";
  emit(p, Stream::cp, Send{"pp", -3, 7, "kv[l0,mb 1]", 9, true});
  emit(p, Stream::cp, Compute{"", "blk=1", 0, Phase::recompute, 3, {{'?', 2}}, 0, 0, {"a,b", "#c"}});
  emit(p, Stream::ep, Collective{CollectiveKind::all_to_all, {"dp_shard", "tp"}, 4, 2, 0, DType::fp8, "x:y+z", ReduceOp::sum, {}});
  Schedule back = schedule_from_text(to_text(s), "s.txt");
  EXPECT_EQ(back, s) << to_text(s);
}

TEST(ScheduleText, ParseErrorsNameTheLine) {
  std::string text = to_text(pipeline());
  std::string bad = text;
  bad.replace(bad.find("nodes=1"), 7, "nodez=1");
  try {
    (void)schedule_from_text(bad, "s.txt");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field().rfind("line ", 0), 0u) << e.what();
  }
  EXPECT_THROW((void)schedule_from_text("model x\n", "s.txt"), InputError);
  EXPECT_THROW((void)schedule_from_text(text + "c0 s:compute #99 free w\n", "s.txt"), InputError);  // outside c0
  EXPECT_THROW((void)schedule_from_text(text + "c1 s:gpu #99 free w\n", "s.txt"), InputError);
  EXPECT_NO_THROW((void)schedule_from_text("// a comment\n\n" + text, "s.txt"));
}

// ---- verifier: one broken rule each ----

TEST(ScheduleVerify, DepOnLaterInstructionIsCaught) {
  Schedule s = pipeline();
  instr(s, 0, 2).deps.push_back(5);
  EXPECT_TRUE(has_problem(verify(s), "deps", "programs[0].instructions[2] depends on #5"));
}

TEST(ScheduleVerify, WaitOnLaterInstructionIsCaught) {
  Schedule s = pipeline();
  std::get<Wait>(instr(s, 0, 9).op).on = 12;
  EXPECT_TRUE(has_problem(verify(s), "deps", "instructions[9]"));
}

TEST(ScheduleVerify, IdNotEqualToPositionIsCaught) {
  Schedule s = pipeline();
  instr(s, 1, 3).id = 7;
  EXPECT_TRUE(has_problem(verify(s), "ids", "programs[1].instructions[3]"));
}

namespace {

// Appends to both stages of the pipeline: a 64-byte buffer x, `first` then `second` on `stream`
// (stage 1 issues them in the opposite order), and the free of x.
void emit_swapped_on_stage1(Schedule& s, Stream stream, const Collective& first, const Collective& second) {
  for (size_t p = 0; p < 2; ++p) {
    Program& prog = s.programs[p];
    InstrId a = emit(prog, Stream::compute, Alloc{"x", 64, BufferKind::comm_buffer});
    emit(prog, stream, p == 0 ? first : second, {a});
    InstrId last = emit(prog, stream, p == 0 ? second : first, {a});
    emit(prog, Stream::compute, Free{"x"}, {last});
  }
}

}  // namespace

TEST(ScheduleVerify, CollectivesInDifferentOrderOverOneGroupAreCaught) {
  Schedule s = pipeline();
  // Stage 1 issues two collectives over pp in the opposite order of stage 0.
  Collective small{CollectiveKind::all_reduce, {"pp"}, 2, 1, 32, DType::bf16, "x", ReduceOp::sum, {}};
  Collective big{CollectiveKind::all_gather, {"pp"}, 2, 1, 64, DType::bf16, "x", ReduceOp::sum, {}};
  emit_swapped_on_stage1(s, Stream::pp, small, big);
  std::vector<std::string> problems = verify(s);
  EXPECT_TRUE(has_problem(problems, "collective-order", "over group pp")) << joined(problems);
}

TEST(ScheduleVerify, PlantedDeadlockAcrossTwoGroupsIsCaught) {
  Schedule s = pipeline();
  // Each group sees the same single collective on both stages, but stage 0 issues group pp first
  // and stage 1 issues group dp_shard,pp first on the same stream: neither can complete.
  Collective g1{CollectiveKind::all_reduce, {"pp"}, 2, 1, 64, DType::bf16, "x", ReduceOp::sum, {}};
  Collective g2{CollectiveKind::all_reduce, {"pp", "dp_shard"}, 4, 1, 64, DType::bf16, "x", ReduceOp::sum, {}};
  emit_swapped_on_stage1(s, Stream::dp, g1, g2);
  std::vector<std::string> problems = verify(s);
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_TRUE(has_problem(problems, "deadlock", "programs[0].instructions[")) << problems[0];
  EXPECT_NE(problems[0].find("programs[1]"), std::string::npos) << problems[0];
}

TEST(ScheduleVerify, UnmatchedSendIsCaught) {
  Schedule s = pipeline();
  std::get<Send>(instr(s, 0, 4).op).tag = 5;  // stage 1 receives tag 0
  std::vector<std::string> problems = verify(s);
  EXPECT_TRUE(has_problem(problems, "unmatched-send", "programs[0].instructions[4]")) << joined(problems);
  EXPECT_TRUE(has_problem(problems, "unmatched-recv", "programs[1].instructions[2]")) << joined(problems);
}

TEST(ScheduleVerify, SendRecvByteMismatchIsCaught) {
  Schedule s = pipeline();
  std::get<Recv>(instr(s, 1, 2).op).bytes = 512;
  EXPECT_TRUE(has_problem(verify(s), "p2p-bytes", "programs[0].instructions[4]"));
}

TEST(ScheduleVerify, RecvBeforeSendOnBothStagesDeadlocks) {
  Schedule s = pipeline();
  for (size_t p = 0; p < 2; ++p) {
    Program& prog = s.programs[p];
    InstrId a = emit(prog, Stream::compute, Alloc{"y", 8, BufferKind::comm_buffer});
    InstrId r = emit(prog, Stream::pp, Recv{"pp", 1, 8, "y", 3, false}, {a});
    InstrId snd = emit(prog, Stream::pp, Send{"pp", 1, 8, "y", 3, false}, {r});
    emit(prog, Stream::compute, Free{"y"}, {snd});
  }
  EXPECT_TRUE(has_problem(verify(s), "deadlock", "recv 'y'")) << joined(verify(s));
}

TEST(ScheduleVerify, RingExchangeNeedsABatch) {
  Schedule s;
  s.plan.cp = 4;
  s.num_gpus = 4;
  s.mesh = {{{"cp", 4}}};
  Program& p = add_program(s, "all", {}, 4);
  InstrId a = emit(p, Stream::compute, Alloc{"kv", 100, BufferKind::comm_buffer});
  InstrId snd = emit(p, Stream::cp, Send{"cp", 1, 100, "kv", 0, false}, {a});
  InstrId rcv = emit(p, Stream::cp, Recv{"cp", -1, 100, "kv", 0, false}, {a});
  emit(p, Stream::compute, Free{"kv"}, {snd, rcv});
  EXPECT_TRUE(has_problem(verify(s), "deadlock"));  // every rank sends first: nobody receives
  std::get<Send>(s.programs[0].instructions[1].op).batch_with_next = true;
  EXPECT_TRUE(verify(s).empty()) << joined(verify(s));
}

TEST(ScheduleVerify, LeakedBufferIsCaught) {
  Schedule s = pipeline();
  s.programs[1].instructions.pop_back();  // drop "free w"
  EXPECT_TRUE(has_problem(verify(s), "leak", "programs[1] never frees 'w'"));
}

TEST(ScheduleVerify, DoubleFreeIsCaught) {
  Schedule s = pipeline();
  emit(s.programs[0], Stream::compute, Free{"act"});
  EXPECT_TRUE(has_problem(verify(s), "double-free", "'act'"));
}

TEST(ScheduleVerify, UseAfterFreeIsCaught) {
  Schedule s = pipeline();
  emit(s.programs[0], Stream::compute, Compute{"mlp", "layers", 0, Phase::fwd, 1, {}, 1, 1, {"act"}});
  EXPECT_TRUE(has_problem(verify(s), "use-after-free", "'act'"));
}

TEST(ScheduleVerify, UseBeforeAllocIsCaught) {
  Schedule s = pipeline();
  std::get<Collective>(instr(s, 0, 3).op).buffer = "nowhere";
  EXPECT_TRUE(has_problem(verify(s), "use-before-alloc", "'nowhere'"));
}

TEST(ScheduleVerify, CollectiveLargerThanItsBufferIsCaught) {
  Schedule s = pipeline();
  std::get<Collective>(instr(s, 0, 3).op).bytes = 2048;  // "act" holds 1024
  EXPECT_TRUE(has_problem(verify(s), "buffer-size", "2048 bytes through 'act'"));
}

TEST(ScheduleVerify, WrongGroupSizeIsCaught) {
  Schedule s = pipeline();
  std::get<Collective>(instr(s, 0, 3).op).group_size = 8;
  EXPECT_TRUE(has_problem(verify(s), "group", "n=8"));
  std::get<Collective>(instr(s, 0, 3).op).axes = {"dp"};
  EXPECT_TRUE(has_problem(verify(s), "group", "unknown"));
}

TEST(ScheduleVerify, ClassesMustCoverTheMeshOnce) {
  Schedule s = pipeline();
  s.programs[1].num_ranks = 3;
  EXPECT_TRUE(has_problem(verify(s), "classes", "num_ranks 3"));
  s = pipeline();
  s.programs[1].coords[0].index = 0;
  EXPECT_TRUE(has_problem(verify(s), "classes", "same coordinates"));
  s = pipeline();
  s.programs.pop_back();
  EXPECT_TRUE(has_problem(verify(s), "classes", "1 programs"));
}

TEST(ScheduleVerify, MeshMustMatchNumGpus) {
  Schedule s = pipeline();
  s.num_gpus = 16;
  EXPECT_TRUE(has_problem(verify(s), "mesh", "num_gpus is 16"));
}

TEST(ScheduleVerify, ThrowingWrapperNamesTheSource) {
  Schedule s = pipeline();
  s.programs[1].instructions.pop_back();
  try {
    verify_or_throw(s, "step.schedule.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("step.schedule.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("leak"), std::string::npos);
  }
  EXPECT_NO_THROW(verify_or_throw(pipeline(), "ok"));
}

namespace mgt::ir {
namespace {
TEST(CpPositions, LoadBalancedChunksCoverTheSequenceOnce) {
  // seq 16, cp 2: chunks of 4; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2.
  EXPECT_EQ(cp_positions(16, 2, 0), (std::vector<int64_t>{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(cp_positions(16, 2, 1), (std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(cp_positions(4, 1, 0), (std::vector<int64_t>{0, 1, 2, 3}));
  std::vector<int> seen(24, 0);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t p : cp_positions(24, 3, r)) ++seen[static_cast<size_t>(p)];
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 24);
  EXPECT_THROW(cp_positions(18, 2, 0), InputError);  // 18 is not a multiple of 4
  EXPECT_THROW(cp_positions(16, 2, 2), InputError);
}
}  // namespace
}  // namespace mgt::ir
