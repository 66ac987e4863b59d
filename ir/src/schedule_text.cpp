// The text form of a Schedule: the primary debugging interface (STYLE.md 8.3). One line per
// instruction; printing then parsing gives an identical Schedule. Grammar: docs/schedule.md, "Text".
#include "mgt/ir/error.hpp"
#include "mgt/ir/schedule.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>

namespace mgt::ir {

namespace {

bool is_safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '[' || c == ']' || c == '/' || c == '(' || c == ')';
}

// Names print bare when every character is safe, else as a JSON string literal, so any name survives
// the round trip and bare names never collide with the separators , = : + - # and spaces.
std::string name(const std::string& s) {
  bool bare = !s.empty();
  for (char c : s) bare = bare && is_safe_char(c);
  if (bare) return s;
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + name(names[i]);
  return out;
}

std::string ids(const std::vector<InstrId>& list) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ",#" : "#") + std::to_string(list[i]);
  return out;
}

std::string body(const Payload& op) {
  return std::visit(
      [](const auto& o) -> std::string {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, Compute>) {
          std::string dims;
          for (size_t i = 0; i < o.dims.size(); ++i)
            dims += (i ? "," : "") + name(std::string(1, o.dims[i].name)) + ":" + std::to_string(o.dims[i].size);
          std::string s = "compute " + to_string(o.phase) + " " + name(o.op) + " block=" + name(o.block) +
                          " layer=" + std::to_string(o.layer) + " mb=" + std::to_string(o.micro_batch) +
                          " dims=" + dims + " flops=" + std::to_string(o.flops) + " bytes=" + std::to_string(o.bytes);
          return o.buffers.empty() ? s : s + " buffers=" + name_list(o.buffers);
        } else if constexpr (std::is_same_v<T, Collective>) {
          return to_string(o.kind) + " " + name(o.buffer) + " group=" + name_list(o.axes) +
                 " n=" + std::to_string(o.group_size) + " nodes=" + std::to_string(o.nodes) +
                 " dtype=" + to_string(o.dtype) + " bytes=" + std::to_string(o.bytes) +
                 (o.reduce == ReduceOp::sum ? "" : " reduce=" + to_string(o.reduce)) +
                 (o.tensors.empty() ? "" : " tensors=" + name_list(o.tensors));
        } else if constexpr (std::is_same_v<T, Send> || std::is_same_v<T, Recv>) {
          std::string s = std::string(std::is_same_v<T, Send> ? "send " : "recv ") + name(o.buffer) +
                          " peer=" + name(o.axis) + (o.offset < 0 ? "" : "+") + std::to_string(o.offset) +
                          " tag=" + std::to_string(o.tag) + " bytes=" + std::to_string(o.bytes);
          return o.batch_with_next ? s + " batch=1" : s;
        } else if constexpr (std::is_same_v<T, Alloc>) {
          return "alloc " + name(o.buffer) + " kind=" + to_string(o.kind) + " bytes=" + std::to_string(o.bytes);
        } else if constexpr (std::is_same_v<T, Free>) {
          return "free " + name(o.buffer);
        } else if constexpr (std::is_same_v<T, OptimizerStep>) {
          std::string s = "optimizer_step params=" + std::to_string(o.param_elements) + " bytes=" + std::to_string(o.bytes);
          return o.buffers.empty() ? s : s + " buffers=" + name_list(o.buffers);
        } else {
          return "wait #" + std::to_string(o.on);
        }
      },
      op);
}

// ---- parsing ----

// Where a parse is, for error messages: InputError(source, "line N", ...).
struct Cursor {
  const std::string& source;
  int64_t line = 0;
  [[noreturn]] void fail(const std::string& problem, const std::string& hint = {}) const {
    throw InputError(source, "line " + std::to_string(line), problem, hint);
  }
};

// Length of the name at the start of `s`: a JSON string literal or a run of safe characters.
size_t name_length(std::string_view s) {
  if (s.empty() || s[0] != '"') {
    size_t n = 0;
    while (n < s.size() && is_safe_char(s[n])) ++n;
    return n;
  }
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '"') return i + 1;
  }
  return s.size();
}

// Splits on `sep` outside string literals.
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (quoted && s[i] == '\\') ++i;
    else if (s[i] == '"') quoted = !quoted;
    else if (!quoted && s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

std::string parse_name(std::string_view s, const Cursor& at) {
  if (s.empty()) at.fail("expected a name", "quote empty names as \"\"");
  if (name_length(s) != s.size()) at.fail("bad name '" + std::string(s) + "'", "quote names with other characters");
  if (s[0] != '"') return std::string(s);
  try {
    nlohmann::json j = nlohmann::json::parse(s);
    if (j.is_string()) return j.get<std::string>();
  } catch (const nlohmann::json::exception&) {
  }
  at.fail("bad string literal " + std::string(s));
}

int64_t parse_int(std::string_view s, const Cursor& at, const std::string& what) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    at.fail("expected an integer for " + what + ", got '" + std::string(s) + "'");
  return v;
}

std::vector<std::string> parse_names(std::string_view s, const Cursor& at) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  for (auto part : split(s, ',')) out.push_back(parse_name(part, at));
  return out;
}

// "<name><sep><int>" such as "pp:3" or "pp+1" (sep '+' or '-' keeps its sign).
std::pair<std::string, int64_t> parse_name_int(std::string_view s, char sep, const Cursor& at) {
  size_t n = name_length(s);
  if (n >= s.size() || !(s[n] == sep || (sep == '+' && s[n] == '-')))
    at.fail("expected <name>" + std::string(1, sep) + "<integer>, got '" + std::string(s) + "'");
  std::string_view number = s.substr(s[n] == '-' ? n : n + 1);
  return {parse_name(s.substr(0, n), at), parse_int(number, at, std::string(s))};
}

std::vector<InstrId> parse_ids(std::string_view s, const Cursor& at) {
  std::vector<InstrId> out;
  if (s.empty()) return out;
  for (auto part : split(s, ',')) {
    if (part.empty() || part[0] != '#') at.fail("expected #<id>, got '" + std::string(part) + "'");
    out.push_back(parse_int(part.substr(1), at, "an instruction id"));
  }
  return out;
}

// The words of a line: positional words, then key=value pairs; take() consumes keys and finish()
// rejects the ones left, so a misspelt key is an error.
struct Words {
  std::vector<std::string_view> positional;
  std::map<std::string, std::string_view> keys;
  const Cursor& at;
  Words(std::string_view line, const Cursor& cursor) : at(cursor) {
    for (auto word : split(line, ' ')) {
      if (word.empty()) continue;
      size_t eq = name_length(word);
      if (eq < word.size() && word[eq] == '=') {
        std::string key(word.substr(0, eq));
        if (!keys.emplace(key, word.substr(eq + 1)).second) at.fail("key '" + key + "' given twice");
      } else {
        if (!keys.empty()) at.fail("word '" + std::string(word) + "' after key=value pairs");
        positional.push_back(word);
      }
    }
  }
  std::string_view take(const std::string& key, bool required = true) {
    auto it = keys.find(key);
    if (it == keys.end()) {
      if (required) at.fail("missing " + key + "=");
      return {};
    }
    std::string_view v = it->second;
    keys.erase(it);
    return v;
  }
  bool has(const std::string& key) const { return keys.count(key) > 0; }
  int64_t integer(const std::string& key) { return parse_int(take(key), at, key); }
  void finish(size_t num_positional) const {
    if (positional.size() != num_positional)
      at.fail("expected " + std::to_string(num_positional) + " word(s) before the key=value pairs, got " +
              std::to_string(positional.size()));
    if (!keys.empty()) at.fail("unknown key '" + keys.begin()->first + "'");
  }
};

template <typename Enum>
Enum parse_enum(std::string_view text, std::optional<Enum> (*parse)(std::string_view), const Cursor& at,
                const char* what) {
  if (auto e = parse(text)) return *e;
  at.fail("unknown " + std::string(what) + " '" + std::string(text) + "'");
}

template <typename P2P>
P2P parse_p2p(Words& w) {
  P2P p;
  if (w.positional.size() < 2) w.at.fail("missing buffer name");
  p.buffer = parse_name(w.positional[1], w.at);
  std::tie(p.axis, p.offset) = parse_name_int(w.take("peer"), '+', w.at);
  p.tag = w.integer("tag");
  p.bytes = w.integer("bytes");
  p.batch_with_next = w.has("batch") && w.integer("batch") != 0;
  w.finish(2);
  return p;
}

// words = "<kind> ..." with the "cN s:<stream> #<id>" prefix and after= already removed.
Payload parse_body(Words& w) {
  const Cursor& at = w.at;
  if (w.positional.empty()) at.fail("missing instruction kind");
  std::string_view kind = w.positional[0];
  auto arg = [&](size_t i) { return i < w.positional.size() ? w.positional[i] : std::string_view(); };
  if (kind == "compute") {
    Compute c;
    c.phase = parse_enum<Phase>(arg(1), phase_from_string, at, "phase");
    c.op = parse_name(arg(2), at);
    c.block = parse_name(w.take("block"), at);
    c.layer = w.integer("layer");
    c.micro_batch = w.integer("mb");
    std::string_view dims = w.take("dims");
    if (!dims.empty())
      for (auto d : split(dims, ',')) {
        auto [dim, size] = parse_name_int(d, ':', at);
        if (dim.size() != 1) at.fail("dim names are one letter, got '" + dim + "'");
        c.dims.push_back({dim[0], size});
      }
    c.flops = w.integer("flops");
    c.bytes = w.integer("bytes");
    c.buffers = parse_names(w.take("buffers", false), at);
    w.finish(3);
    return c;
  }
  if (auto ck = collective_kind_from_string(kind)) {
    Collective c;
    c.kind = *ck;
    c.buffer = parse_name(arg(1), at);
    c.axes = parse_names(w.take("group"), at);
    c.group_size = w.integer("n");
    c.nodes = w.integer("nodes");
    c.dtype = parse_enum<DType>(w.take("dtype"), dtype_from_string, at, "dtype");
    c.bytes = w.integer("bytes");
    if (w.has("reduce")) c.reduce = parse_enum<ReduceOp>(w.take("reduce"), reduce_op_from_string, at, "reduce op");
    c.tensors = parse_names(w.take("tensors", false), at);
    w.finish(2);
    return c;
  }
  if (kind == "send") return parse_p2p<Send>(w);
  if (kind == "recv") return parse_p2p<Recv>(w);
  if (kind == "alloc") {
    Alloc a;
    a.buffer = parse_name(arg(1), at);
    a.kind = parse_enum<BufferKind>(w.take("kind"), buffer_kind_from_string, at, "buffer kind");
    a.bytes = w.integer("bytes");
    w.finish(2);
    return a;
  }
  if (kind == "free") {
    Free f{parse_name(arg(1), at)};
    w.finish(2);
    return f;
  }
  if (kind == "optimizer_step") {
    OptimizerStep o;
    o.param_elements = w.integer("params");
    o.bytes = w.integer("bytes");
    o.buffers = parse_names(w.take("buffers", false), at);
    w.finish(1);
    return o;
  }
  if (kind == "wait") {
    std::vector<InstrId> on = parse_ids(arg(1), at);
    if (on.size() != 1) at.fail("wait takes one #<id>");
    w.finish(2);
    return Wait{on[0]};
  }
  at.fail("unknown instruction kind '" + std::string(kind) + "'",
          "compute, all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send, recv, alloc, free, "
          "optimizer_step or wait");
}

}  // namespace

std::string to_text(const Instruction& instr, size_t program_index) {
  std::string line = "c" + std::to_string(program_index) + " s:" + to_string(instr.stream) + " #" +
                     std::to_string(instr.id) + " " + body(instr.op);
  return instr.deps.empty() ? line : line + " after=" + ids(instr.deps);
}

std::string to_text(const Schedule& schedule) {
  nlohmann::json plan = to_json(schedule.plan);
  if (!schedule.plan.sequence_parallel) plan.erase("sequence_parallel");  // keep derived defaults unset
  if (!schedule.plan.zero_stage) plan.erase("zero_stage");
  std::string out = std::string("format ") + kScheduleFormat + "\nmodel " + name(schedule.model) +
                    "\nnum_gpus " + std::to_string(schedule.num_gpus) + "\nmesh";
  for (const auto& a : schedule.mesh.axes) out += " " + name(a.name) + "=" + std::to_string(a.size);
  out += "\nplan " + plan.dump() + "\n";
  for (size_t p = 0; p < schedule.programs.size(); ++p) {
    const Program& program = schedule.programs[p];
    out += "program c" + std::to_string(p) + " name=" + name(program.name) + " ranks=" + std::to_string(program.num_ranks);
    for (size_t i = 0; i < program.coords.size(); ++i)
      out += (i ? "," : " coords=") + name(program.coords[i].axis) + ":" + std::to_string(program.coords[i].index);
    out += "\n";
    for (const auto& instr : program.instructions) out += to_text(instr, p) + "\n";
  }
  return out;
}

Schedule schedule_from_text(std::string_view text, const std::string& source) {
  Schedule s;
  Cursor at{source};
  bool have_format = false;
  for (size_t start = 0; start <= text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++at.line;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t first = line.find_first_not_of(' ');
    if (first == std::string_view::npos || line.substr(first, 2) == "//") continue;
    line.remove_prefix(first);
    std::string_view head = line.substr(0, line.find(' '));
    std::string_view rest = head.size() < line.size() ? line.substr(head.size() + 1) : std::string_view();
    if (!have_format && head != "format") at.fail("the first line must be 'format mgt.schedule/1'");
    if (head == "format") {
      if (rest != kScheduleFormat) at.fail("unknown format '" + std::string(rest) + "'", "this reader accepts mgt.schedule/1");
      have_format = true;
    } else if (head == "model") {
      s.model = parse_name(rest, at);
    } else if (head == "num_gpus") {
      s.num_gpus = parse_int(rest, at, "num_gpus");
    } else if (head == "mesh") {
      for (auto word : split(rest, ' ')) {
        if (!word.empty()) {
          auto [axis, size] = parse_name_int(word, '=', at);
          s.mesh.axes.push_back({axis, size});
        }
      }
    } else if (head == "plan") {
      s.plan = plan_from_json(parse_json_text(rest, source + ": line " + std::to_string(at.line)), source + ": plan");
    } else if (head == "program") {
      Words w(rest, at);
      if (w.positional.size() != 1 || w.positional[0] != "c" + std::to_string(s.programs.size()))
        at.fail("expected 'program c" + std::to_string(s.programs.size()) + "', programs are numbered in order");
      Program& p = add_program(s, parse_name(w.take("name"), at), {}, w.integer("ranks"));
      std::string_view coords = w.take("coords", false);
      if (!coords.empty())
        for (auto c : split(coords, ',')) {
          auto [axis, index] = parse_name_int(c, ':', at);
          p.coords.push_back({axis, index});
        }
      w.finish(1);
    } else if (!head.empty() && head[0] == 'c') {
      if (s.programs.empty() || head != "c" + std::to_string(s.programs.size() - 1))
        at.fail("instruction line for '" + std::string(head) + "' outside its program", "put it after 'program " + std::string(head) + " ...'");
      Words w(rest, at);
      if (w.positional.size() < 2 || w.positional[0].substr(0, 2) != "s:" || w.positional[1].substr(0, 1) != "#")
        at.fail("expected 'cN s:<stream> #<id> <kind> ...'");
      Instruction in;
      in.stream = parse_enum<Stream>(w.positional[0].substr(2), stream_from_string, at, "stream");
      in.id = parse_int(w.positional[1].substr(1), at, "the instruction id");
      in.deps = parse_ids(w.take("after", false), at);
      w.positional.erase(w.positional.begin(), w.positional.begin() + 2);
      in.op = parse_body(w);
      s.programs.back().instructions.push_back(std::move(in));
    } else {
      at.fail("unknown line '" + std::string(head) + "'", "lines start with format, model, num_gpus, mesh, plan, program or cN");
    }
  }
  if (!have_format) at.fail("empty schedule text");
  return s;
}

}  // namespace mgt::ir
