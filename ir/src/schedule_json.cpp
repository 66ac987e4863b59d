// mgt.schedule/1 as JSON: a writer that writes every field and a strict reader whose errors name the
// field path ("programs[2].instructions[17].bytes"). Layout: docs/schedule.md, "JSON".
#include "mgt/ir/error.hpp"
#include "mgt/ir/schedule.hpp"

#include <nlohmann/json.hpp>

#include <limits>
#include <set>

namespace mgt::ir {

namespace {

// The plan as set: derived defaults stay unset, so that reading it back gives an equal Plan.
nlohmann::json plan_as_set(const Plan& plan) {
  nlohmann::json out = to_json(plan);
  if (!plan.sequence_parallel) out.erase("sequence_parallel");
  if (!plan.zero_stage) out.erase("zero_stage");
  return out;
}

nlohmann::json payload_json(const Payload& op) {
  nlohmann::json j = nlohmann::json::object();
  std::visit(
      [&j](const auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, Compute>) {
          nlohmann::json dims = nlohmann::json::array();
          for (const Dim& d : o.dims) dims.push_back({std::string(1, d.name), d.size});
          j = {{"op", o.op},       {"block", o.block},     {"layer", o.layer}, {"phase", to_string(o.phase)},
               {"micro_batch", o.micro_batch}, {"dims", dims}, {"flops", o.flops}, {"bytes", o.bytes},
               {"buffers", o.buffers}};
        } else if constexpr (std::is_same_v<T, Collective>) {
          j = {{"collective", to_string(o.kind)}, {"axes", o.axes}, {"group_size", o.group_size},
               {"nodes", o.nodes}, {"bytes", o.bytes}, {"dtype", to_string(o.dtype)}, {"buffer", o.buffer},
               {"reduce", to_string(o.reduce)}, {"tensors", o.tensors}};
        } else if constexpr (std::is_same_v<T, Send> || std::is_same_v<T, Recv>) {
          j = {{"axis", o.axis}, {"offset", o.offset}, {"bytes", o.bytes}, {"buffer", o.buffer},
               {"tag", o.tag}, {"batch_with_next", o.batch_with_next}};
        } else if constexpr (std::is_same_v<T, Alloc>) {
          j = {{"buffer", o.buffer}, {"bytes", o.bytes}, {"buffer_kind", to_string(o.kind)}};
        } else if constexpr (std::is_same_v<T, Free>) {
          j = {{"buffer", o.buffer}};
        } else if constexpr (std::is_same_v<T, OptimizerStep>) {
          j = {{"param_elements", o.param_elements}, {"bytes", o.bytes}, {"buffers", o.buffers}};
        } else {
          j = {{"on", o.on}};
        }
      },
      op);
  return j;
}

// Reads one JSON object; every accessor names "<path>.<key>" in errors, and finish() rejects keys
// nobody asked for, so a typo is an error instead of a silent default.
class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& obj, std::string path, const std::string& source)
      : obj_(obj), path_(std::move(path)), source_(source) {
    if (!obj_.is_object()) throw InputError(source_, path_, "expected a JSON object, got " + std::string(obj_.type_name()));
  }
  std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const nlohmann::json& at(const std::string& key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end()) throw InputError(source_, field(key), "missing", "every field is required in mgt.schedule/1");
    return *it;
  }
  int64_t integer(const std::string& key, int64_t min = std::numeric_limits<int64_t>::min()) {
    const auto& v = at(key);
    if (!v.is_number_integer()) throw InputError(source_, field(key), "expected an integer, got " + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      throw InputError(source_, field(key), "does not fit in a signed 64-bit integer");
    int64_t x = v.get<int64_t>();
    if (x < min) throw InputError(source_, field(key), "must be at least " + std::to_string(min) + ", got " + std::to_string(x));
    return x;
  }
  bool has(const std::string& key) const { return obj_.contains(key); }
  std::string string(const std::string& key) {
    const auto& v = at(key);
    if (!v.is_string()) throw InputError(source_, field(key), "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
  bool boolean(const std::string& key) {
    const auto& v = at(key);
    if (!v.is_boolean()) throw InputError(source_, field(key), "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  const nlohmann::json& array(const std::string& key) {
    const auto& v = at(key);
    if (!v.is_array()) throw InputError(source_, field(key), "expected an array, got " + std::string(v.type_name()));
    return v;
  }
  std::vector<std::string> strings(const std::string& key) {
    std::vector<std::string> out;
    const auto& v = array(key);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string())
        throw InputError(source_, field(key) + "[" + std::to_string(i) + "]", "expected a string, got " + v[i].dump());
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }
  template <typename Enum>
  Enum named(const std::string& key, std::optional<Enum> (*parse)(std::string_view), const char* choices) {
    std::string text = string(key);
    if (auto e = parse(text)) return *e;
    throw InputError(source_, field(key), "unknown value \"" + text + "\"", std::string("one of ") + choices);
  }
  void finish() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!seen_.count(it.key())) throw InputError(source_, field(it.key()), "unknown key", "remove it or check the spelling");
  }

 private:
  const nlohmann::json& obj_;
  std::string path_;
  const std::string& source_;
  std::set<std::string> seen_;
};

std::vector<Dim> read_dims(const nlohmann::json& v, const std::string& path, const std::string& source) {
  std::vector<Dim> dims;
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& d = v[i];
    if (!d.is_array() || d.size() != 2 || !d[0].is_string() || d[0].get<std::string>().size() != 1 ||
        !d[1].is_number_integer())
      throw InputError(source, path + "[" + std::to_string(i) + "]", "expected [\"<dim letter>\", <size>], got " + d.dump());
    dims.push_back({d[0].get<std::string>()[0], d[1].get<int64_t>()});
  }
  return dims;
}

template <typename P2P>
P2P read_p2p(ObjectReader& r) {
  P2P p;
  p.axis = r.string("axis");
  p.offset = r.integer("offset");
  p.bytes = r.integer("bytes", 0);
  p.buffer = r.string("buffer");
  p.tag = r.integer("tag", 0);
  p.batch_with_next = r.boolean("batch_with_next");
  return p;
}

Instruction read_instruction(const nlohmann::json& j, const std::string& path, const std::string& source) {
  ObjectReader r(j, path, source);
  Instruction in;
  in.id = r.integer("id", 0);
  in.stream = r.named<Stream>("stream", stream_from_string, "compute, tp, cp, dp, pp, ep");
  const auto& deps = r.array("deps");
  for (size_t i = 0; i < deps.size(); ++i) {
    if (!deps[i].is_number_integer())
      throw InputError(source, r.field("deps") + "[" + std::to_string(i) + "]", "expected an instruction id, got " + deps[i].dump());
    in.deps.push_back(deps[i].get<int64_t>());
  }
  std::string kind = r.string("kind");
  if (kind == "compute") {
    Compute c;
    c.op = r.string("op");
    c.block = r.string("block");
    c.layer = r.integer("layer", 0);
    c.phase = r.named<Phase>("phase", phase_from_string, "fwd, bwd_data, bwd_weight, recompute");
    c.micro_batch = r.integer("micro_batch", 0);
    c.dims = read_dims(r.array("dims"), r.field("dims"), source);
    c.flops = r.integer("flops", 0);
    c.bytes = r.integer("bytes", 0);
    c.buffers = r.strings("buffers");
    in.op = std::move(c);
  } else if (kind == "collective") {
    Collective c;
    c.kind = r.named<CollectiveKind>("collective", collective_kind_from_string,
                                     "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast");
    c.axes = r.strings("axes");
    c.group_size = r.integer("group_size", 1);
    c.nodes = r.integer("nodes", 1);
    c.bytes = r.integer("bytes", 0);
    c.dtype = r.named<DType>("dtype", dtype_from_string, "f32, bf16, f16, fp8");
    c.buffer = r.string("buffer");
    // Added within mgt.schedule/1: files written before them read as sum / whole buffer.
    if (r.has("reduce")) c.reduce = r.named<ReduceOp>("reduce", reduce_op_from_string, "sum, max");
    if (r.has("tensors")) c.tensors = r.strings("tensors");
    in.op = std::move(c);
  } else if (kind == "send") {
    in.op = read_p2p<Send>(r);
  } else if (kind == "recv") {
    in.op = read_p2p<Recv>(r);
  } else if (kind == "alloc") {
    Alloc a;
    a.buffer = r.string("buffer");
    a.bytes = r.integer("bytes", 0);
    a.kind = r.named<BufferKind>("buffer_kind", buffer_kind_from_string,
                                 "parameters, gradients, optimizer, activations, fsdp_buffer, comm_buffer, workspace, logits");
    in.op = std::move(a);
  } else if (kind == "free") {
    in.op = Free{r.string("buffer")};
  } else if (kind == "optimizer_step") {
    OptimizerStep o;
    o.param_elements = r.integer("param_elements", 0);
    o.bytes = r.integer("bytes", 0);
    o.buffers = r.strings("buffers");
    in.op = std::move(o);
  } else if (kind == "wait") {
    in.op = Wait{r.integer("on", 0)};
  } else {
    throw InputError(source, r.field("kind"), "unknown instruction kind \"" + kind + "\"",
                     "one of compute, collective, send, recv, alloc, free, optimizer_step, wait");
  }
  r.finish();
  return in;
}

Program read_program(const nlohmann::json& j, const std::string& path, const std::string& source) {
  ObjectReader r(j, path, source);
  Program p;
  p.name = r.string("name");
  const auto& coords = r.array("coords");
  for (size_t i = 0; i < coords.size(); ++i) {
    ObjectReader c(coords[i], r.field("coords") + "[" + std::to_string(i) + "]", source);
    p.coords.push_back({c.string("axis"), c.integer("index", 0)});
    c.finish();
  }
  p.num_ranks = r.integer("num_ranks", 1);
  const auto& instrs = r.array("instructions");
  p.instructions.reserve(instrs.size());
  for (size_t i = 0; i < instrs.size(); ++i)
    p.instructions.push_back(read_instruction(instrs[i], r.field("instructions") + "[" + std::to_string(i) + "]", source));
  r.finish();
  return p;
}

}  // namespace

nlohmann::json to_json(const Schedule& schedule) {
  nlohmann::json mesh = nlohmann::json::array();
  for (const auto& a : schedule.mesh.axes) mesh.push_back({{"axis", a.name}, {"size", a.size}});
  nlohmann::json programs = nlohmann::json::array();
  for (const auto& p : schedule.programs) {
    nlohmann::json coords = nlohmann::json::array();
    for (const auto& c : p.coords) coords.push_back({{"axis", c.axis}, {"index", c.index}});
    nlohmann::json instrs = nlohmann::json::array();
    for (const auto& in : p.instructions) {
      nlohmann::json j = payload_json(in.op);
      j["id"] = in.id;
      j["stream"] = to_string(in.stream);
      j["deps"] = in.deps;
      j["kind"] = to_string(kind(in));
      instrs.push_back(std::move(j));
    }
    programs.push_back({{"name", p.name}, {"coords", coords}, {"num_ranks", p.num_ranks}, {"instructions", instrs}});
  }
  return {{"format", kScheduleFormat}, {"model", schedule.model}, {"plan", plan_as_set(schedule.plan)},
          {"num_gpus", schedule.num_gpus}, {"mesh", mesh}, {"programs", programs}};
}

Schedule schedule_from_json(const nlohmann::json& doc, const std::string& source) {
  require_format(doc, kScheduleFormat, source);
  ObjectReader r(doc, "", source);
  r.string("format");
  Schedule s;
  s.model = r.string("model");
  s.plan = plan_from_json(r.at("plan"), source + ": plan");
  s.num_gpus = r.integer("num_gpus", 1);
  const auto& mesh = r.array("mesh");
  for (size_t i = 0; i < mesh.size(); ++i) {
    ObjectReader a(mesh[i], "mesh[" + std::to_string(i) + "]", source);
    s.mesh.axes.push_back({a.string("axis"), a.integer("size", 1)});
    a.finish();
  }
  const auto& programs = r.array("programs");
  for (size_t i = 0; i < programs.size(); ++i)
    s.programs.push_back(read_program(programs[i], "programs[" + std::to_string(i) + "]", source));
  r.finish();
  return s;
}

}  // namespace mgt::ir
