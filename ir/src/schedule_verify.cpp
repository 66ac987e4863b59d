// verify(Schedule): the MLIR-style verifier run after every planner pass and on load in the runtime
// (STYLE.md 8.3). Each message starts with its rule; the rules are listed in docs/schedule.md.
#include "mgt/ir/error.hpp"
#include "mgt/ir/schedule.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace mgt::ir {

namespace {

constexpr size_t kMaxProblems = 100;

struct Report {
  std::vector<std::string> problems;
  void add(std::string problem) {
    if (problems.size() < kMaxProblems) problems.push_back(std::move(problem));
  }
};

std::string where(size_t p, InstrId i) {
  return "programs[" + std::to_string(p) + "].instructions[" + std::to_string(i) + "]";
}

// "all_gather over dp_shard 'w[l3]'" / "send 'act[l7]'": enough to find the line in the text dump.
std::string what(const Instruction& in) {
  std::vector<std::string> buffers = buffers_of(in);
  std::string out = to_string(kind(in));
  if (const auto* c = std::get_if<Collective>(&in.op)) {
    out = to_string(c->kind);
    for (size_t i = 0; i < c->axes.size(); ++i) out += (i ? "," : " over ") + c->axes[i];
  }
  return out + (buffers.empty() ? "" : " '" + buffers[0] + "'");
}

// The group's axes in mesh order joined by ",", so {"cp","dp_shard"} and {"dp_shard","cp"} name one
// communicator; empty when an axis is unknown (reported by check_fields).
std::string group_key(const Mesh& mesh, const std::vector<std::string>& axes) {
  std::vector<size_t> idx;
  for (const auto& a : axes) {
    auto i = axis_index(mesh, a);
    if (!i) return {};
    idx.push_back(*i);
  }
  std::sort(idx.begin(), idx.end());
  std::string key;
  for (size_t i : idx) key += (key.empty() ? "" : ",") + mesh.axes[i].name;
  return key;
}

void check_mesh_and_classes(const Schedule& s, Report& r) {
  std::set<std::string> names;
  for (const auto& a : s.mesh.axes) {
    if (a.name.empty() || !names.insert(a.name).second) r.add("mesh: axis name '" + a.name + "' is empty or repeated");
    if (a.size < 1) r.add("mesh: axis '" + a.name + "' has size " + std::to_string(a.size) + ", must be >= 1");
  }
  if (num_ranks(s.mesh) != s.num_gpus)
    r.add("mesh: the axes multiply to " + std::to_string(num_ranks(s.mesh)) + " ranks but num_gpus is " + std::to_string(s.num_gpus));
  if (world_size(s.plan) != s.num_gpus)
    r.add("mesh: the plan's world size is " + std::to_string(world_size(s.plan)) + " but num_gpus is " + std::to_string(s.num_gpus));
  if (s.programs.empty()) r.add("classes: the schedule has no programs");
  std::set<std::string> pinned0;
  std::set<std::vector<int64_t>> seen;
  int64_t expected_programs = 1;
  for (size_t p = 0; p < s.programs.size(); ++p) {
    const Program& prog = s.programs[p];
    std::string at = "classes: programs[" + std::to_string(p) + "]";
    std::set<std::string> pinned;
    std::vector<int64_t> key(s.mesh.axes.size(), -1);
    int64_t ranks = num_ranks(s.mesh);
    for (const auto& c : prog.coords) {
      auto i = axis_index(s.mesh, c.axis);
      if (!i) { r.add(at + " pins unknown axis '" + c.axis + "'"); continue; }
      if (!pinned.insert(c.axis).second) r.add(at + " pins axis '" + c.axis + "' twice");
      if (c.index < 0 || c.index >= s.mesh.axes[*i].size)
        r.add(at + " pins " + c.axis + "=" + std::to_string(c.index) + ", outside 0.." + std::to_string(s.mesh.axes[*i].size - 1));
      key[*i] = c.index;
      ranks /= std::max<int64_t>(s.mesh.axes[*i].size, 1);
      if (p == 0) expected_programs *= s.mesh.axes[*i].size;
    }
    if (p == 0) pinned0 = pinned;
    else if (pinned != pinned0) r.add(at + " pins other axes than programs[0] (hint: every program pins the same axes)");
    if (!seen.insert(key).second) r.add(at + " has the same coordinates as an earlier program");
    if (prog.num_ranks != ranks)
      r.add(at + " says num_ranks " + std::to_string(prog.num_ranks) + " but its coordinates cover " + std::to_string(ranks) + " ranks");
  }
  if (!s.programs.empty() && int64_t(s.programs.size()) != expected_programs)
    r.add("classes: " + std::to_string(s.programs.size()) + " programs but the pinned axes have " +
          std::to_string(expected_programs) + " coordinates (hint: one program per coordinate)");
}

void check_fields(const Schedule& s, Report& r) {
  for (size_t p = 0; p < s.programs.size(); ++p) {
    const auto& instrs = s.programs[p].instructions;
    for (size_t i = 0; i < instrs.size(); ++i) {
      const Instruction& in = instrs[i];
      std::string at = where(p, InstrId(i));
      if (in.id != InstrId(i)) r.add("ids: " + at + " has id #" + std::to_string(in.id) + " (hint: ids equal the position)");
      std::vector<InstrId> deps = in.deps;
      if (const auto* w = std::get_if<Wait>(&in.op)) deps.push_back(w->on);
      for (InstrId d : deps)
        if (d < 0 || d >= InstrId(i))
          r.add("deps: " + at + " depends on #" + std::to_string(d) +
                ", which is not an earlier instruction (deps point backwards, which keeps them acyclic)");
      if (moved_bytes(in) < 0) r.add("fields: " + at + " moves negative bytes");
      if (const auto* c = std::get_if<Compute>(&in.op); c && (c->flops < 0 || c->bytes < 0 || c->micro_batch < 0))
        r.add("fields: " + at + " has negative flops, bytes or micro-batch");
      if (const auto* a = std::get_if<Alloc>(&in.op); a && a->bytes < 0) r.add("fields: " + at + " allocates negative bytes");
      if (kind(in) == InstrKind::collective || kind(in) == InstrKind::send || kind(in) == InstrKind::recv)
        if (buffers_of(in).empty()) r.add("buffers: " + at + " (" + what(in) + ") names no buffer");
      if (const auto* c = std::get_if<Collective>(&in.op)) {
        std::set<std::string> unique(c->axes.begin(), c->axes.end());
        if (c->axes.empty() || group_key(s.mesh, c->axes).empty() || unique.size() != c->axes.size())
          r.add("group: " + at + " runs over unknown, repeated or no mesh axes");
        else if (group_size(s.mesh, c->axes) != c->group_size)
          r.add("group: " + at + " says n=" + std::to_string(c->group_size) + " but its axes have " +
                std::to_string(group_size(s.mesh, c->axes)) + " ranks");
        if (c->nodes < 1 || c->nodes > c->group_size) r.add("group: " + at + " spans " + std::to_string(c->nodes) + " nodes, outside 1..n");
      }
      auto check_peer = [&](const std::string& axis, int64_t offset) {
        auto a = axis_index(s.mesh, axis);
        if (!a) r.add("p2p: " + at + " names unknown axis '" + axis + "'");
        else if (offset % std::max<int64_t>(s.mesh.axes[*a].size, 1) == 0) r.add("p2p: " + at + " (" + what(in) + ") has itself as peer");
      };
      if (const auto* x = std::get_if<Send>(&in.op)) check_peer(x->axis, x->offset);
      if (const auto* x = std::get_if<Recv>(&in.op)) check_peer(x->axis, x->offset);
    }
  }
}

// Walks each program in order, tracking which buffers are live.
void check_buffers(const Schedule& s, Report& r) {
  struct State { bool live = false; int64_t bytes = 0; InstrId alloc_at = -1; InstrId freed_at = -1; };
  for (size_t p = 0; p < s.programs.size(); ++p) {
    std::map<std::string, State> state;
    for (const Instruction& in : s.programs[p].instructions) {
      std::string at = where(p, in.id);
      if (const auto* a = std::get_if<Alloc>(&in.op)) {
        State& b = state[a->buffer];
        if (b.live) r.add("double-alloc: " + at + " allocates '" + a->buffer + "' again, live since #" + std::to_string(b.alloc_at));
        b = {true, a->bytes, in.id, -1};
      } else if (const auto* f = std::get_if<Free>(&in.op)) {
        State& b = state[f->buffer];
        if (b.live) { b.live = false; b.freed_at = in.id; }
        else if (b.freed_at >= 0) r.add("double-free: " + at + " frees '" + f->buffer + "' again, already freed at #" + std::to_string(b.freed_at));
        else r.add("use-before-alloc: " + at + " frees '" + f->buffer + "', which was never allocated");
      } else {
        for (const auto& name : buffers_of(in)) {
          auto it = state.find(name);
          if (it == state.end() || (!it->second.live && it->second.freed_at < 0))
            r.add("use-before-alloc: " + at + " (" + what(in) + ") uses '" + name + "' before any alloc");
          else if (!it->second.live)
            r.add("use-after-free: " + at + " (" + what(in) + ") uses '" + name + "', freed at #" + std::to_string(it->second.freed_at));
          else if (moved_bytes(in) > it->second.bytes)
            r.add("buffer-size: " + at + " moves " + std::to_string(moved_bytes(in)) + " bytes through '" + name +
                  "', allocated with " + std::to_string(it->second.bytes) + " bytes at #" + std::to_string(it->second.alloc_at));
        }
      }
    }
    for (const auto& [name, b] : state)
      if (b.live)
        r.add("leak: programs[" + std::to_string(p) + "] never frees '" + name + "', allocated at #" + std::to_string(b.alloc_at) +
              " (hint: free every buffer before the program ends)");
  }
}

// Cross-program matching, computed once and shared by the order checks and the dry run.
struct Matching {
  // (program, group key) -> the program's collectives over that group, in program order.
  std::map<std::pair<size_t, std::string>, std::vector<InstrId>> collectives;
  // (program, instruction) -> the instructions it completes with: the same-ordinal collective of each
  // participant, or the matched send/recv.
  std::map<std::pair<size_t, InstrId>, std::vector<std::pair<size_t, InstrId>>> partners;
};

void match_collectives(const Schedule& s, Matching& m, Report& r) {
  std::map<std::pair<size_t, std::string>, const std::vector<std::string>*> axes_of;
  for (size_t p = 0; p < s.programs.size(); ++p)
    for (const Instruction& in : s.programs[p].instructions)
      if (const auto* c = std::get_if<Collective>(&in.op)) {
        std::string key = group_key(s.mesh, c->axes);
        if (key.empty()) continue;
        m.collectives[{p, key}].push_back(in.id);
        axes_of[{p, key}] = &c->axes;
      }
  for (const auto& [pk, seq] : m.collectives) {
    const auto& [p, key] = pk;
    std::vector<size_t> members = participants(s, p, *axes_of[pk]);
    for (size_t q : members) {
      auto it = m.collectives.find({q, key});
      const std::vector<InstrId> empty;
      const std::vector<InstrId>& other = it == m.collectives.end() ? empty : it->second;
      for (size_t k = 0; k < seq.size() && k < other.size(); ++k) m.partners[{p, seq[k]}].push_back({q, other[k]});
      if (q <= p) continue;  // report each pair once
      std::string pair = "programs[" + std::to_string(p) + "] and programs[" + std::to_string(q) + "]";
      if (seq.size() != other.size()) {
        r.add("collective-order: " + pair + " issue " + std::to_string(seq.size()) + " and " + std::to_string(other.size()) +
              " collectives over group " + key + " (hint: every member issues every collective of its group)");
        continue;
      }
      for (size_t k = 0; k < seq.size(); ++k) {
        const auto& a = std::get<Collective>(s.programs[p].instructions[size_t(seq[k])].op);
        const auto& b = std::get<Collective>(s.programs[q].instructions[size_t(other[k])].op);
        if (a.kind != b.kind || a.bytes != b.bytes || a.dtype != b.dtype || a.buffer != b.buffer) {
          r.add("collective-order: " + pair + " disagree on collective " + std::to_string(k) + " over group " + key + ": " +
                where(p, seq[k]) + " is " + to_string(a.kind) + " '" + a.buffer + "' " + std::to_string(a.bytes) + " bytes, " +
                where(q, other[k]) + " is " + to_string(b.kind) + " '" + b.buffer + "' " + std::to_string(b.bytes) +
                " bytes (hint: members issue a group's collectives in the same order with the same sizes)");
          break;
        }
      }
    }
  }
}

void match_p2p(const Schedule& s, Matching& m, Report& r) {
  // Channel: (from, to, axis, offset from->to modulo the axis size, tag).
  using Channel = std::tuple<size_t, size_t, std::string, int64_t, int64_t>;
  std::map<Channel, std::vector<InstrId>> sends, recvs;
  for (size_t p = 0; p < s.programs.size(); ++p)
    for (const Instruction& in : s.programs[p].instructions) {
      const Send* sd = std::get_if<Send>(&in.op);
      const Recv* rv = std::get_if<Recv>(&in.op);
      if (!sd && !rv) continue;
      const std::string& axis = sd ? sd->axis : rv->axis;
      int64_t offset = sd ? sd->offset : rv->offset;
      auto a = axis_index(s.mesh, axis);
      auto peer = peer_program(s, p, axis, offset);
      if (!a || !peer) { if (a) r.add("p2p: " + where(p, in.id) + " has no program at its peer"); continue; }
      int64_t size = s.mesh.axes[*a].size;
      int64_t forward = (((sd ? offset : -offset) % size) + size) % size;
      Channel ch = sd ? Channel{p, *peer, axis, forward, sd->tag} : Channel{*peer, p, axis, forward, rv->tag};
      (sd ? sends : recvs)[ch].push_back(in.id);
    }
  auto describe = [](const Channel& ch) {
    return "from programs[" + std::to_string(std::get<0>(ch)) + "] to programs[" + std::to_string(std::get<1>(ch)) + "] along " +
           std::get<2>(ch) + " tag " + std::to_string(std::get<4>(ch));
  };
  for (const auto& [ch, list] : sends) {
    auto it = recvs.find(ch);
    size_t matched = it == recvs.end() ? 0 : std::min(list.size(), it->second.size());
    for (size_t k = 0; k < matched; ++k) {
      size_t from = std::get<0>(ch), to = std::get<1>(ch);
      InstrId si = list[k], ri = it->second[k];
      m.partners[{from, si}] = {{to, ri}};
      m.partners[{to, ri}] = {{from, si}};
      if (moved_bytes(s.programs[from].instructions[size_t(si)]) != moved_bytes(s.programs[to].instructions[size_t(ri)]))
        r.add("p2p-bytes: " + where(from, si) + " sends a different number of bytes than " + where(to, ri) + " receives");
    }
    for (size_t k = matched; k < list.size(); ++k)
      r.add("unmatched-send: " + where(std::get<0>(ch), list[k]) + " sends " + describe(ch) +
            " but no recv matches it (hint: the peer needs a recv with the opposite offset and the same tag)");
  }
  for (const auto& [ch, list] : recvs) {
    auto it = sends.find(ch);
    size_t matched = it == sends.end() ? 0 : std::min(list.size(), it->second.size());
    for (size_t k = matched; k < list.size(); ++k)
      r.add("unmatched-recv: " + where(std::get<1>(ch), list[k]) + " receives " + describe(ch) + " but no send matches it");
  }
}

// Dry run (PyTorch _simulate_comms_compute): streams run in order, collectives and send/recv block
// until every partner has arrived. Reports a wait-for cycle when the run gets stuck.
void dry_run(const Schedule& s, const Matching& m, Report& r) {
  size_t P = s.programs.size();
  std::vector<std::vector<char>> done(P), arrived(P);
  std::vector<std::vector<std::vector<InstrId>>> order(P, std::vector<std::vector<InstrId>>(kNumStreams));
  std::vector<std::vector<size_t>> pos(P, std::vector<size_t>(kNumStreams, 0));
  for (size_t p = 0; p < P; ++p) {
    done[p].assign(s.programs[p].instructions.size(), 0);
    arrived[p] = done[p];
    for (const auto& in : s.programs[p].instructions) order[p][size_t(in.stream)].push_back(in.id);
  }
  auto deps_done = [&](size_t p, InstrId i) {
    const Instruction& in = s.programs[p].instructions[size_t(i)];
    const auto* w = std::get_if<Wait>(&in.op);
    return std::all_of(in.deps.begin(), in.deps.end(), [&](InstrId d) { return done[p][size_t(d)]; }) &&
           (!w || done[p][size_t(w->on)]);
  };
  auto is_p2p = [&](size_t p, InstrId i) {
    InstrKind k = kind(s.programs[p].instructions[size_t(i)]);
    return k == InstrKind::send || k == InstrKind::recv;
  };
  auto partners_of = [&](size_t p, InstrId i) {
    auto it = m.partners.find({p, i});
    return it == m.partners.end() ? std::vector<std::pair<size_t, InstrId>>{} : it->second;
  };
  // Marks (p,i) arrived and completes it with its partners when all have arrived.
  auto arrive = [&](size_t p, InstrId i) {
    if (arrived[p][size_t(i)] || !deps_done(p, i)) return false;
    arrived[p][size_t(i)] = 1;
    InstrKind k = kind(s.programs[p].instructions[size_t(i)]);
    if (k != InstrKind::collective && k != InstrKind::send && k != InstrKind::recv) { done[p][size_t(i)] = 1; return true; }
    auto parts = partners_of(p, i);
    if (parts.empty() && k != InstrKind::collective) return true;  // unmatched: stays blocked
    if (std::all_of(parts.begin(), parts.end(), [&](auto q) { return arrived[q.first][size_t(q.second)] != 0; })) {
      done[p][size_t(i)] = 1;
      for (auto q : parts) done[q.first][size_t(q.second)] = 1;
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t p = 0; p < P; ++p)
      for (int st = 0; st < kNumStreams; ++st) {
        auto& ord = order[p][size_t(st)];
        size_t& at = pos[p][size_t(st)];
        while (at < ord.size()) {
          changed |= arrive(p, ord[at]);
          // A batch (ncclGroupStart/End) arrives together: look past the head while batched.
          for (size_t j = at; j + 1 < ord.size() && is_p2p(p, ord[j]) && arrived[p][size_t(ord[j])] &&
                              is_p2p(p, ord[j + 1]) &&
                              std::visit([](const auto& o) {
                                if constexpr (requires { o.batch_with_next; }) return o.batch_with_next;
                                else return false;
                              }, s.programs[p].instructions[size_t(ord[j])].op);
               ++j)
            changed |= arrive(p, ord[j + 1]);
          if (!done[p][size_t(ord[at])]) break;
          ++at;
          changed = true;
        }
      }
  }
  // Stuck: follow "waits for" edges from the first blocked head until one repeats.
  std::optional<std::pair<size_t, InstrId>> start;
  for (size_t p = 0; p < P && !start; ++p)
    for (int st = 0; st < kNumStreams && !start; ++st)
      if (pos[p][size_t(st)] < order[p][size_t(st)].size()) start = {{p, order[p][size_t(st)][pos[p][size_t(st)]]}};
  if (!start) return;
  auto blocker = [&](std::pair<size_t, InstrId> x) -> std::optional<std::pair<size_t, InstrId>> {
    auto [p, i] = x;
    const Instruction& in = s.programs[p].instructions[size_t(i)];
    const auto& ord = order[p][size_t(in.stream)];
    InstrId head = ord[pos[p][size_t(in.stream)]];
    if (!arrived[p][size_t(i)] && head != i && !arrived[p][size_t(head)]) return std::pair{p, head};
    std::vector<InstrId> deps = in.deps;
    if (const auto* w = std::get_if<Wait>(&in.op)) deps.push_back(w->on);
    for (InstrId d : deps)
      if (!done[p][size_t(d)]) return std::pair{p, d};
    if (!arrived[p][size_t(i)]) return std::pair{p, head};
    for (auto q : partners_of(p, i))
      if (!arrived[q.first][size_t(q.second)]) return q;
    return std::nullopt;
  };
  std::vector<std::pair<size_t, InstrId>> path{*start};
  for (auto next = blocker(*start); next; next = blocker(path.back())) {
    auto seen = std::find(path.begin(), path.end(), *next);
    if (seen != path.end()) { path.erase(path.begin(), seen); path.push_back(*next); break; }
    path.push_back(*next);
  }
  std::string cycle;
  for (size_t k = 0; k < path.size() && k < 9; ++k)
    cycle += (k ? " waits for " : "") + where(path[k].first, path[k].second) + " (" +
             what(s.programs[path[k].first].instructions[size_t(path[k].second)]) + ")";
  r.add("deadlock: the dry run stops: " + cycle + " (hint: issue collectives and send/recv in one order on every member)");
}

}  // namespace

std::vector<std::string> verify(const Schedule& schedule) {
  Report r;
  check_mesh_and_classes(schedule, r);
  check_fields(schedule, r);
  if (!r.problems.empty()) return r.problems;  // the checks below index by ids and axes checked above
  check_buffers(schedule, r);
  Matching m;
  match_collectives(schedule, m, r);
  match_p2p(schedule, m, r);
  if (r.problems.empty()) dry_run(schedule, m, r);
  return r.problems;
}

void verify_or_throw(const Schedule& schedule, const std::string& source) {
  std::vector<std::string> problems = verify(schedule);
  if (problems.empty()) return;
  std::string text = std::to_string(problems.size()) + " problem(s): " + problems[0];
  for (size_t i = 1; i < problems.size() && i < 3; ++i) text += "; " + problems[i];
  throw InputError(source, "", "invalid schedule: " + text);
}

}  // namespace mgt::ir
