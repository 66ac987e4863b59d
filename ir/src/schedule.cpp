// Schedule helpers: enum names, builders, and the membership rules the verifier, the simulator and
// the runtime share (docs/schedule.md, "Which programs take part").
#include "mgt/ir/schedule.hpp"
#include "mgt/ir/enum_names.hpp"
#include "mgt/ir/error.hpp"

#include <algorithm>
#include <array>
#include <type_traits>

namespace mgt::ir {

namespace {
// Name tables, in enumerator order; to_string and *_from_string both read them.
constexpr std::array<const char*, kNumStreams> kStreamNames{"compute", "tp", "cp", "dp", "pp", "ep"};
constexpr std::array<const char*, 4> kPhaseNames{"fwd", "bwd_data", "bwd_weight", "recompute"};
constexpr std::array<const char*, 8> kBufferKindNames{"parameters",  "gradients",   "optimizer", "activations",
                                                      "fsdp_buffer", "comm_buffer", "workspace", "logits"};
constexpr std::array<const char*, 8> kInstrKindNames{"compute", "collective", "send",           "recv",
                                                     "alloc",   "free",       "optimizer_step", "wait"};
}  // namespace

std::string to_string(Stream stream) { return name_of(kStreamNames, stream); }
std::string to_string(Phase phase) { return name_of(kPhaseNames, phase); }
std::string to_string(BufferKind kind) { return name_of(kBufferKindNames, kind); }
std::string to_string(InstrKind kind) { return name_of(kInstrKindNames, kind); }

std::optional<Stream> stream_from_string(std::string_view text) { return enum_of<Stream>(kStreamNames, text); }
std::optional<Phase> phase_from_string(std::string_view text) { return enum_of<Phase>(kPhaseNames, text); }
std::optional<BufferKind> buffer_kind_from_string(std::string_view text) {
  return enum_of<BufferKind>(kBufferKindNames, text);
}
Program& add_program(Schedule& schedule, std::string name, std::vector<AxisCoord> coords, int64_t num_ranks) {
  Program program;
  program.name = std::move(name);
  program.coords = std::move(coords);
  program.num_ranks = num_ranks;
  schedule.programs.push_back(std::move(program));
  return schedule.programs.back();
}

InstrId emit(Program& program, Instruction instr) {
  instr.id = static_cast<InstrId>(program.instructions.size());
  program.instructions.push_back(std::move(instr));
  return program.instructions.back().id;
}

InstrId emit(Program& program, Stream stream, Payload op, std::vector<InstrId> deps) {
  Instruction instr;
  instr.stream = stream;
  instr.deps = std::move(deps);
  instr.op = std::move(op);
  return emit(program, std::move(instr));
}

InstrKind kind(const Instruction& instr) { return static_cast<InstrKind>(instr.op.index()); }

std::vector<std::string> buffers_of(const Instruction& instr) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& name) {
    if (!name.empty()) out.push_back(name);
  };
  std::visit(
      [&](const auto& op) {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, Compute> || std::is_same_v<T, OptimizerStep>) {
          for (const auto& b : op.buffers) add(b);
        } else if constexpr (!std::is_same_v<T, Wait>) {
          add(op.buffer);
        }
      },
      instr.op);
  return out;
}

int64_t moved_bytes(const Instruction& instr) {
  if (const auto* c = std::get_if<Collective>(&instr.op)) return c->bytes;
  if (const auto* s = std::get_if<Send>(&instr.op)) return s->bytes;
  if (const auto* r = std::get_if<Recv>(&instr.op)) return r->bytes;
  return 0;
}

std::optional<size_t> axis_index(const Mesh& mesh, std::string_view axis) {
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    if (mesh.axes[i].name == axis) return i;
  return std::nullopt;
}

int64_t group_size(const Mesh& mesh, const std::vector<std::string>& axes) {
  int64_t n = 1;
  for (const auto& a : axes)
    if (auto i = axis_index(mesh, a)) n *= mesh.axes[*i].size;
  return n;
}

int64_t num_ranks(const Mesh& mesh) {
  int64_t n = 1;
  for (const auto& a : mesh.axes) n *= a.size;
  return n;
}

std::vector<int64_t> rank_coords(const Mesh& mesh, int64_t rank) {
  std::vector<int64_t> coords(mesh.axes.size(), 0);
  for (size_t i = mesh.axes.size(); i-- > 0;) {
    int64_t size = std::max<int64_t>(mesh.axes[i].size, 1);
    coords[i] = rank % size;
    rank /= size;
  }
  return coords;
}

std::optional<size_t> program_for_rank(const Schedule& schedule, int64_t rank) {
  std::vector<int64_t> coords = rank_coords(schedule.mesh, rank);
  for (size_t p = 0; p < schedule.programs.size(); ++p) {
    bool match = true;
    for (const auto& c : schedule.programs[p].coords) {
      auto i = axis_index(schedule.mesh, c.axis);
      match = match && i && coords[*i] == c.index;
    }
    if (match) return p;
  }
  return std::nullopt;
}

namespace {
const AxisCoord* find_coord(const Program& program, std::string_view axis) {
  for (const auto& c : program.coords)
    if (c.axis == axis) return &c;
  return nullptr;
}
}  // namespace

std::vector<size_t> participants(const Schedule& schedule, size_t program, const std::vector<std::string>& axes) {
  const Program& self = schedule.programs.at(program);
  auto in_group = [&axes](const std::string& axis) { return std::find(axes.begin(), axes.end(), axis) != axes.end(); };
  std::vector<size_t> out;
  for (size_t p = 0; p < schedule.programs.size(); ++p) {
    bool agrees = true;
    for (const auto& c : self.coords) {
      if (in_group(c.axis)) continue;
      const AxisCoord* other = find_coord(schedule.programs[p], c.axis);
      agrees = agrees && other && other->index == c.index;
    }
    if (agrees) out.push_back(p);
  }
  return out;
}

std::optional<size_t> peer_program(const Schedule& schedule, size_t program, std::string_view axis, int64_t offset) {
  const Program& self = schedule.programs.at(program);
  auto i = axis_index(schedule.mesh, axis);
  if (!i) return std::nullopt;
  const AxisCoord* pinned = find_coord(self, axis);
  if (!pinned) return program;  // the peer does the same work, so it runs this program
  int64_t size = std::max<int64_t>(schedule.mesh.axes[*i].size, 1);
  int64_t target = ((pinned->index + offset) % size + size) % size;
  for (size_t p = 0; p < schedule.programs.size(); ++p) {
    const Program& other = schedule.programs[p];
    if (other.coords.size() != self.coords.size()) continue;
    bool match = true;
    for (const auto& c : self.coords) {
      const AxisCoord* o = find_coord(other, c.axis);
      match = match && o && o->index == (c.axis == axis ? target : c.index);
    }
    if (match) return p;
  }
  return std::nullopt;
}

std::vector<int64_t> cp_positions(int64_t seq_len, int64_t cp, int64_t cp_rank) {
  if (cp < 1 || cp_rank < 0 || cp_rank >= cp)
    throw InputError("plan", "cp", "cp rank " + std::to_string(cp_rank) + " outside 0.." + std::to_string(cp - 1));
  std::vector<int64_t> positions;
  if (cp == 1) {
    for (int64_t t = 0; t < seq_len; ++t) positions.push_back(t);
    return positions;
  }
  if (seq_len % (2 * cp) != 0)
    throw InputError("plan", "cp", "sequence length " + std::to_string(seq_len) + " is not a multiple of 2*cp = " +
                                       std::to_string(2 * cp) + " (the load-balanced causal split)",
                     "choose a sequence length divisible by " + std::to_string(2 * cp));
  const int64_t chunk = seq_len / (2 * cp);
  for (int64_t c : {cp_rank, 2 * cp - 1 - cp_rank})
    for (int64_t t = 0; t < chunk; ++t) positions.push_back(c * chunk + t);
  return positions;
}

}  // namespace mgt::ir
