// The Schedule (`mgt.schedule/1`): the one artifact the simulator times and the runtime executes
// (DESIGN.md "One artifact, three consumers", STYLE.md 8.3). Format, text grammar, execution
// semantics and verifier rules: docs/schedule.md.
//
//   ir::Schedule s{.model = "tiny", .plan = plan, .num_gpus = 8, .mesh = {{{"dp_shard", 4}, {"tp", 2}}}};
//   ir::Program& p = ir::add_program(s, "all", /*coords=*/{}, /*num_ranks=*/8);
//   ir::InstrId a = ir::emit(p, ir::Stream::compute, ir::Alloc{"grad[l0]", 1 << 20, ir::BufferKind::gradients});
//   ir::emit(p, ir::Stream::dp, ir::Collective{.kind = ir::CollectiveKind::reduce_scatter, .axes = {"dp_shard"},
//            .group_size = 4, .nodes = 1, .bytes = 1 << 20, .buffer = "grad[l0]"}, {a});
#pragma once

#include "mgt/ir/collective.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/plan.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace mgt::ir {

inline constexpr const char* kScheduleFormat = "mgt.schedule/1";

/// Index of an instruction inside its Program; always equal to its position in `instructions`.
using InstrId = int64_t;

/// One mesh axis. Axis names are free text; the planner uses dp_replicate, dp_shard, cp, tp, pp, ep.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
  bool operator==(const MeshAxis&) const = default;
};

/// The device mesh, outermost axis first. Rank r has coordinates given by row-major order over the
/// axes (the last axis varies fastest), so the product of sizes is num_gpus. Expert parallelism is
/// its own axis carved out of dp_shard x cp; the dense FSDP group then names both ("dp_shard,ep").
struct Mesh {
  std::vector<MeshAxis> axes;
  bool operator==(const Mesh&) const = default;
};

/// Streams are in-order queues (CUDA streams): an instruction starts after the previous instruction
/// of its program on the same stream has finished. One stream per kind of traffic so that overlap
/// is explicit and identical in the simulator and the runtime.
enum class Stream { compute, tp, cp, dp, pp, ep };
inline constexpr int kNumStreams = 6;

enum class Phase { fwd, bwd_data, bwd_weight, recompute };
// CollectiveKind and ReduceOp: mgt/ir/collective.hpp (the one collective table).
enum class BufferKind { parameters, gradients, optimizer, activations, fsdp_buffer, comm_buffer, workspace, logits };
enum class InstrKind { compute, collective, send, recv, alloc, free, optimizer_step, wait };

std::string to_string(Stream stream);
std::string to_string(Phase phase);
std::string to_string(BufferKind kind);
std::string to_string(InstrKind kind);
/// Inverse of to_string; nullopt for unknown text (readers turn that into an InputError).
std::optional<Stream> stream_from_string(std::string_view text);
std::optional<Phase> phase_from_string(std::string_view text);
std::optional<BufferKind> buffer_kind_from_string(std::string_view text);

/// A kernel (or fused group of kernels) of the graph on this rank's local shard.
struct Compute {
  std::string op;           ///< ir::Op name, or a fused name ("attn_core")
  std::string block;        ///< ir::Block name the op belongs to ("layers")
  int64_t layer = 0;        ///< which copy of the block's repeat (0-based)
  Phase phase = Phase::fwd;
  int64_t micro_batch = 0;  ///< 0-based micro-batch index within the step
  std::vector<Dim> dims;    ///< local (sharded) dim sizes, e.g. {b,1},{s,4096},{h,4096},{f,1792}
  int64_t flops = 0;        ///< on this rank
  int64_t bytes = 0;        ///< HBM traffic on this rank (reads + writes)
  std::vector<std::string> buffers;  ///< buffers read or written, checked for liveness
  bool operator==(const Compute&) const = default;
};

/// A collective over the mesh axes `axes` (the group of a rank = all ranks that share its
/// coordinates on every other axis). `bytes` is the full per-rank buffer in nccl-tests' sense:
/// the all-reduce buffer, the gathered output of all_gather, the unscattered input of
/// reduce_scatter, the send total of all_to_all, the broadcast buffer (root = group rank 0).
/// Reductions are sums.
struct Collective {
  CollectiveKind kind = CollectiveKind::all_reduce;
  std::vector<std::string> axes;  ///< e.g. {"dp_shard", "cp"}
  int64_t group_size = 1;         ///< product of the axes' sizes
  int64_t nodes = 1;              ///< nodes one group spans (1 = inside NVLink)
  int64_t bytes = 0;
  DType dtype = DType::bf16;      ///< element type, for the reduction and the runtime's kernel
  std::string buffer;             ///< must be live and hold >= bytes
  ReduceOp reduce = ReduceOp::sum;
  /// What the runtime moves when it is not the whole buffer (docs/schedule.md "Tensors"): activations
  /// of the anchoring op's block by name, "grad(<name>)" for their gradients, parameter names for
  /// their gradients (buffer "grads"), "loss(max)" / "loss(sumexp)" / "loss(target)" for the
  /// vocab-parallel cross-entropy's per-token statistics. Empty: the buffer as the kind implies.
  std::vector<std::string> tensors;
  bool operator==(const Collective&) const = default;
};

/// Point-to-point: the peer is this rank moved by `offset` along `axis`, modulo the axis size
/// (pp +1 = next stage; wrapping covers interleaved pipelines and rings). A Send matches the Recv on
/// the peer with the opposite offset, the same tag, in the same order. Both block until matched
/// (rendezvous); `batch_with_next` issues this and the next Send/Recv of the stream together
/// (ncclGroupStart/End, batch_isend_irecv), which exchange patterns need to avoid deadlock.
struct Send {
  std::string axis = "pp";
  int64_t offset = 1;
  int64_t bytes = 0;
  std::string buffer;
  int64_t tag = 0;
  bool batch_with_next = false;
  bool operator==(const Send&) const = default;
};
struct Recv {
  std::string axis = "pp";
  int64_t offset = -1;
  int64_t bytes = 0;
  std::string buffer;
  int64_t tag = 0;
  bool batch_with_next = false;
  bool operator==(const Recv&) const = default;
};

/// Reserves `bytes` under `buffer` (a name unique among live buffers of the program). Parameters and
/// optimizer state are allocated at the start of the program and freed at its end, so the memory
/// timeline covers them.
struct Alloc {
  std::string buffer;
  int64_t bytes = 0;
  BufferKind kind = BufferKind::activations;
  bool operator==(const Alloc&) const = default;
};
struct Free {
  std::string buffer;
  bool operator==(const Free&) const = default;
};

/// The optimizer update of this rank's parameter shard.
struct OptimizerStep {
  int64_t param_elements = 0;  ///< elements of the local shard
  int64_t bytes = 0;           ///< HBM traffic (params, grads, optimizer state)
  std::vector<std::string> buffers;
  bool operator==(const OptimizerStep&) const = default;
};

/// Event record + stream wait: this stream does not proceed until instruction `on` (usually on
/// another stream) has finished. Same effect as a dep; a separate instruction so that the runtime
/// can place cudaStreamWaitEvent exactly here and a reader sees where streams join.
struct Wait {
  InstrId on = 0;
  bool operator==(const Wait&) const = default;
};

/// Order matches InstrKind.
using Payload = std::variant<Compute, Collective, Send, Recv, Alloc, Free, OptimizerStep, Wait>;

struct Instruction {
  InstrId id = 0;
  Stream stream = Stream::compute;
  std::vector<InstrId> deps;  ///< earlier instructions of the same program that must finish first
  Payload op;
  bool operator==(const Instruction&) const = default;
};

/// A pinned coordinate: the class stands for the ranks whose coordinate on `axis` is `index`.
struct AxisCoord {
  std::string axis;
  int64_t index = 0;
  bool operator==(const AxisCoord&) const = default;
};

/// The program of one rank class. Every program pins the same set of axes (typically just "pp");
/// the class is every rank with those coordinates, so num_ranks = product of the unpinned axes.
struct Program {
  std::string name;               ///< e.g. "stage3"
  std::vector<AxisCoord> coords;  ///< e.g. {{"pp", 3}}; empty = every rank runs this program
  int64_t num_ranks = 1;
  std::vector<Instruction> instructions;
  bool operator==(const Program&) const = default;
};

/// One training step for every rank of the mesh.
struct Schedule {
  std::string model;
  Plan plan;
  int64_t num_gpus = 1;
  Mesh mesh;
  std::vector<Program> programs;
  bool operator==(const Schedule&) const = default;
};

// ---- builders (schedule.cpp) ----

/// Appends a program and returns it; the reference is valid until the next add_program.
Program& add_program(Schedule& schedule, std::string name, std::vector<AxisCoord> coords, int64_t num_ranks);
/// Appends `instr` with its id set to the next index; returns that id.
InstrId emit(Program& program, Instruction instr);
InstrId emit(Program& program, Stream stream, Payload op, std::vector<InstrId> deps = {});

// ---- queries shared by the verifier, the simulator and the runtime (schedule.cpp) ----

InstrKind kind(const Instruction& instr);
/// Buffer names the instruction allocates, frees, reads or writes (empty names skipped).
std::vector<std::string> buffers_of(const Instruction& instr);
/// Bytes an instruction moves through its buffer (collective, send, recv), else 0.
int64_t moved_bytes(const Instruction& instr);
/// Position of `axis` in the mesh; nullopt when absent.
std::optional<size_t> axis_index(const Mesh& mesh, std::string_view axis);
/// Product of the sizes of `axes`; unknown axes count as 1.
int64_t group_size(const Mesh& mesh, const std::vector<std::string>& axes);
/// Product of every axis size.
int64_t num_ranks(const Mesh& mesh);
/// Coordinates of `rank`, one per mesh axis (row-major, last axis fastest).
std::vector<int64_t> rank_coords(const Mesh& mesh, int64_t rank);
/// The program whose pinned coordinates match `rank`; nullopt when none does.
std::optional<size_t> program_for_rank(const Schedule& schedule, int64_t rank);
/// Membership rule: the programs that take part in a collective over `axes` issued by `program`:
/// those agreeing with it on every pinned axis not in `axes` (only itself when no pinned axis is in
/// `axes`). Sorted by program index.
std::vector<size_t> participants(const Schedule& schedule, size_t program, const std::vector<std::string>& axes);
/// The program of the peer reached by moving `offset` along `axis` (modulo its size); the program
/// itself when `axis` is not pinned; nullopt when the axis or the peer's program is missing.
std::optional<size_t> peer_program(const Schedule& schedule, size_t program, std::string_view axis, int64_t offset);

// ---- JSON (schedule_json.cpp) ----

/// Every field, always written; `"format": "mgt.schedule/1"`.
nlohmann::json to_json(const Schedule& schedule);
/// Strict reader: unknown keys, missing keys and wrong types are InputErrors whose field is the
/// path, e.g. "programs[2].instructions[17].bytes". Does not run verify().
Schedule schedule_from_json(const nlohmann::json& doc, const std::string& source);

// ---- text (schedule_text.cpp); grammar in docs/schedule.md ----

/// The whole schedule, a header then one line per instruction; schedule_from_text gives it back.
std::string to_text(const Schedule& schedule);
/// One instruction line without newline, e.g.
/// `c0 s:dp #18 reduce_scatter grad[l5] group=dp_shard,cp n=16 nodes=2 dtype=bf16 bytes=4194304 after=#17`.
std::string to_text(const Instruction& instr, size_t program_index);
/// Parses to_text output (blank lines and `//` comments allowed); InputError names `source` and the
/// line number.
Schedule schedule_from_text(std::string_view text, const std::string& source);

// ---- verifier (schedule_verify.cpp); rules in docs/schedule.md ----

/// Every problem found, one line each, starting with the rule name ("deps: ...", "leak: ...");
/// empty when the schedule is valid. Stops after 100 problems.
std::vector<std::string> verify(const Schedule& schedule);
/// Throws InputError naming `source` with the first problems when verify() finds any.
void verify_or_throw(const Schedule& schedule, const std::string& source);

/// Context parallelism's load-balanced causal split (Megatron-LM / torchtitan): the sequence is cut
/// in 2*cp equal chunks and cp rank r holds chunks r and 2*cp-1-r, so every rank gets the same
/// amount of causal attention work. Returns the positions rank `cp_rank` holds, in local order.
/// Throws InputError when seq_len is not a multiple of 2*cp (cp > 1).
std::vector<int64_t> cp_positions(int64_t seq_len, int64_t cp, int64_t cp_rank);

}  // namespace mgt::ir
