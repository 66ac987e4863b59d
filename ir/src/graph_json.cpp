// mgt.graph/1: the hand-writable JSON form of a Graph (reader and writer). The format is specified
// in docs/graph_format.md; readers reject unknown keys so that typos are errors, not silent defaults.
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace mgt::ir {

namespace {

using json = nlohmann::json;
constexpr const char* kFormat = "mgt.graph/1";

// ---------------------------------------------------------------------------------------------
// Typed access with full field paths ("blocks[1].ops[3].einsum") in messages.

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& problem, const std::string& hint = {}) const {
    throw InputError(source_, path, problem, hint);
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  void require_object(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "expected an object, got " + std::string(v.type_name()));
  }

  /// Rejects keys outside `allowed` (keys starting with '_' are comments and always allowed).
  void only_keys(const json& obj, const std::string& path, std::initializer_list<const char*> allowed) const {
    for (const auto& item : obj.items()) {
      const std::string& key = item.key();  // not a structured binding: clang 14 cannot capture those
      if (!key.empty() && key[0] == '_') continue;
      if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) != allowed.end())
        continue;
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(join(path, key), "unknown key", "allowed keys here: " + list);
    }
  }

  const json* find(const json& obj, const std::string& key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  const json& required(const json& obj, const std::string& key, const std::string& path) const {
    const json* v = find(obj, key);
    if (!v) fail(join(path, key), "missing", "add the field (see docs/graph_format.md)");
    return *v;
  }

  std::string string(const json& obj, const std::string& key, const std::string& path,
                     const std::string* fallback = nullptr) const {
    const json* v = find(obj, key);
    if (!v && fallback) return *fallback;
    if (!v) required(obj, key, path);
    if (!v->is_string()) fail(join(path, key), "expected a string, got " + std::string(v->type_name()) + " " + v->dump());
    return v->get<std::string>();
  }

  int64_t integer(const json& obj, const std::string& key, const std::string& path, int64_t fallback,
                  int64_t min) const {
    const json* v = find(obj, key);
    if (!v) return fallback;
    return integer_value(*v, join(path, key), min);
  }

  int64_t integer_value(const json& v, const std::string& field, int64_t min) const {
    int64_t out = 0;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(field, "value does not fit in a signed 64-bit integer");
      out = v.get<int64_t>();
    } else {
      fail(field, "expected an integer, got " + std::string(v.type_name()) + " " + v.dump());
    }
    if (out < min) fail(field, "must be at least " + std::to_string(min) + ", got " + std::to_string(out));
    return out;
  }

  /// A finite number >= 0 (JSON integer or float); `fallback` when absent.
  double nonnegative_number(const json& obj, const std::string& key, const std::string& path, double fallback) const {
    const json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_number()) fail(join(path, key), "expected a number, got " + std::string(v->type_name()) + " " + v->dump());
    const double out = v->get<double>();
    if (!std::isfinite(out) || out < 0) fail(join(path, key), "must be a finite number >= 0, got " + v->dump());
    return out;
  }

  bool boolean(const json& obj, const std::string& key, const std::string& path, bool fallback) const {
    const json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(join(path, key), "expected true or false, got " + v->dump());
    return v->get<bool>();
  }

  const json& array(const json& obj, const std::string& key, const std::string& path, bool is_required) const {
    static const json empty = json::array();
    const json* v = find(obj, key);
    if (!v && !is_required) return empty;
    if (!v) required(obj, key, path);
    if (!v->is_array()) fail(join(path, key), "expected an array, got " + std::string(v->type_name()));
    return *v;
  }

  char dim_letter(const std::string& key, const std::string& field) const {
    if (key.size() != 1 || key[0] < 'a' || key[0] > 'z')
      fail(field, "dim name \"" + key + "\" is not a single lowercase letter");
    return key[0];
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

/// Dim sizes keyed by letter, from the top-level "dims" or a tensor's "sizes".
std::map<char, int64_t> read_sizes(const Reader& r, const json& obj, const std::string& field) {
  std::map<char, int64_t> out;
  r.require_object(obj, field);
  for (const auto& [key, value] : obj.items()) {
    const std::string f = field + "." + key;
    const char c = r.dim_letter(key, f);
    if (is_symbolic_dim(c)) r.fail(f, "'b' and 's' are symbolic and take no size", "remove it; the plan sets it");
    out[c] = r.integer_value(value, f, 1);
  }
  return out;
}

TensorDecl read_tensor(const Reader& r, const json& t, const std::string& path, const std::map<char, int64_t>& table) {
  r.require_object(t, path);
  r.only_keys(t, path, {"name", "dims", "parameter", "sizes"});
  TensorDecl out;
  out.name = r.string(t, "name", path);
  out.is_parameter = r.boolean(t, "parameter", path, false);
  const std::map<char, int64_t> overrides =
      r.find(t, "sizes") ? read_sizes(r, t["sizes"], path + ".sizes") : std::map<char, int64_t>{};
  const std::string dims = r.string(t, "dims", path);
  for (char c : dims) {
    r.dim_letter(std::string(1, c), path + ".dims");
    if (is_symbolic_dim(c)) {
      out.dims.push_back({c, 0});
      continue;
    }
    const auto own = overrides.find(c);
    const auto shared = table.find(c);
    if (own == overrides.end() && shared == table.end())
      r.fail(path + ".dims", "tensor '" + out.name + "': dim '" + std::string(1, c) + "' has no size",
             "add it to the top-level \"dims\" or to the tensor's \"sizes\"");
    out.dims.push_back({c, own != overrides.end() ? own->second : shared->second});
  }
  for (const auto& [c, size] : overrides)
    if (dims.find(c) == std::string::npos)
      r.fail(path + ".sizes", "tensor '" + out.name + "' has no dim '" + std::string(1, c) + "'");
  return out;
}

NormKind norm_from_string(const Reader& r, const std::string& text, const std::string& field) {
  if (text == "rms") return NormKind::rms;
  if (text == "layer") return NormKind::layer;
  r.fail(field, "unknown norm \"" + text + "\"", "use \"rms\" or \"layer\"");
}

const std::map<ActivationKind, std::string>& activation_names() {
  static const std::map<ActivationKind, std::string> names{{ActivationKind::silu, "silu"},
                                                           {ActivationKind::gelu, "gelu"},
                                                           {ActivationKind::relu, "relu"},
                                                           {ActivationKind::silu_glu, "silu_glu"},
                                                           {ActivationKind::gelu_glu, "gelu_glu"}};
  return names;
}

ActivationKind activation_from_string(const Reader& r, const std::string& text, const std::string& field) {
  for (const auto& [kind, name] : activation_names())
    if (name == text) return kind;
  r.fail(field, "unknown activation \"" + text + "\"", "use one of: silu, gelu, relu, silu_glu, gelu_glu");
}

Op read_op(const Reader& r, const json& o, const std::string& path) {
  r.require_object(o, path);
  Op op;
  op.name = r.string(o, "name", path);
  op.kind = op_kind_from_string(r.string(o, "kind", path), r.source() + ": " + path);
  switch (op.kind) {  // each kind accepts only the keys it uses
    case OpKind::contraction: r.only_keys(o, path, {"name", "kind", "inputs", "output", "einsum"}); break;
    case OpKind::norm: r.only_keys(o, path, {"name", "kind", "inputs", "output", "norm"}); break;
    case OpKind::activation:
      r.only_keys(o, path, {"name", "kind", "inputs", "output", "activation", "clamp_limit"});
      break;
    case OpKind::attention_core:
      r.only_keys(o, path, {"name", "kind", "inputs", "output", "causal", "sliding_window"});
      break;
    case OpKind::router: r.only_keys(o, path, {"name", "kind", "inputs", "output", "top_k"}); break;
    case OpKind::ssm_scan: r.only_keys(o, path, {"name", "kind", "inputs", "output", "chunk_size"}); break;
    default: r.only_keys(o, path, {"name", "kind", "inputs", "output"}); break;
  }
  const json& inputs = r.array(o, "inputs", path, /*is_required=*/true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_string()) r.fail(path + ".inputs[" + std::to_string(i) + "]", "expected a tensor name (string)");
    op.inputs.push_back(inputs[i].get<std::string>());
  }
  const std::string no_output;
  op.output = r.string(o, "output", path, &no_output);
  if (op.kind == OpKind::contraction) op.einsum = r.string(o, "einsum", path);
  if (op.kind == OpKind::norm) {
    const std::string rms = "rms";
    op.norm = norm_from_string(r, r.string(o, "norm", path, &rms), path + ".norm");
  }
  if (op.kind == OpKind::activation)
    op.activation = activation_from_string(r, r.string(o, "activation", path), path + ".activation");
  if (op.kind == OpKind::activation) op.clamp_limit = r.nonnegative_number(o, "clamp_limit", path, 0.0);
  if (op.kind == OpKind::attention_core) {
    op.causal = r.boolean(o, "causal", path, true);
    op.sliding_window = r.integer(o, "sliding_window", path, 0, 0);
  }
  if (op.kind == OpKind::router) op.top_k = r.integer(o, "top_k", path, 0, 1);
  if (op.kind == OpKind::router && op.top_k == 0) r.required(o, "top_k", path);
  if (op.kind == OpKind::ssm_scan) op.chunk_size = r.integer(o, "chunk_size", path, 0, 0);
  return op;
}

Block read_block(const Reader& r, const json& b, const std::string& path, const std::map<char, int64_t>& table) {
  r.require_object(b, path);
  r.only_keys(b, path, {"name", "repeat", "is_layer", "tensors", "ops"});
  Block out;
  out.name = r.string(b, "name", path);
  out.repeat = r.integer(b, "repeat", path, 1, 1);
  out.is_layer = r.boolean(b, "is_layer", path, true);
  const json& tensors = r.array(b, "tensors", path, /*is_required=*/true);
  for (size_t i = 0; i < tensors.size(); ++i)
    out.tensors.push_back(read_tensor(r, tensors[i], path + ".tensors[" + std::to_string(i) + "]", table));
  const json& ops = r.array(b, "ops", path, /*is_required=*/true);
  for (size_t i = 0; i < ops.size(); ++i) out.ops.push_back(read_op(r, ops[i], path + ".ops[" + std::to_string(i) + "]"));
  return out;
}

/// ModelInfo from the optional "model" object; absent fields are derived from the graph.
ModelInfo read_model_info(const Reader& r, const json& doc, const Graph& g, const std::map<char, int64_t>& table) {
  const auto dim = [&](char c, int64_t fallback) {
    const auto it = table.find(c);
    return it == table.end() ? fallback : it->second;
  };
  int64_t layers = 0, top_k = 0;
  for (const auto& block : g.blocks) {
    if (block.is_layer) layers += block.repeat;
    for (const auto& op : block.ops) top_k = std::max(top_k, op.top_k);
  }
  const json* m = r.find(doc, "model");
  static const json empty = json::object();
  if (!m) m = &empty;
  const std::string path = "model";
  r.require_object(*m, path);
  r.only_keys(*m, path, {"architecture", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                         "vocab_size", "max_seq_len", "num_experts", "experts_per_token", "has_mla", "dim_sources"});
  ModelInfo info;
  const std::string no_name, default_arch = "mgt.graph";
  info.name = r.string(doc, "name", "", &no_name);
  info.architecture = r.string(*m, "architecture", path, &default_arch);
  info.num_layers = r.integer(*m, "num_layers", path, layers, 0);
  info.hidden_size = r.integer(*m, "hidden_size", path, dim('h', 0), 0);
  info.num_attention_heads = r.integer(*m, "num_attention_heads", path, dim('a', 0), 0);
  info.num_kv_heads = r.integer(*m, "num_kv_heads", path, dim('k', info.num_attention_heads), 0);
  info.vocab_size = r.integer(*m, "vocab_size", path, dim('v', 0), 0);
  info.max_seq_len = r.integer(*m, "max_seq_len", path, 0, 0);
  info.num_experts = r.integer(*m, "num_experts", path, dim('e', 0), 0);
  info.experts_per_token = r.integer(*m, "experts_per_token", path, top_k, 0);
  info.has_mla = r.boolean(*m, "has_mla", path, false);
  if (const json* sources = r.find(*m, "dim_sources")) {
    r.require_object(*sources, path + ".dim_sources");
    for (const auto& [key, value] : sources->items()) {
      const std::string f = path + ".dim_sources." + key;
      if (!value.is_string()) r.fail(f, "expected a string naming where the dim's size comes from");
      info.dim_sources[r.dim_letter(key, f)] = value.get<std::string>();
    }
  } else {
    for (const auto& [c, size] : table) info.dim_sources[c] = std::string("dims.") + c;
  }
  return info;
}

std::vector<std::pair<std::string, std::string>> read_ties(const Reader& r, const json& doc) {
  std::vector<std::pair<std::string, std::string>> out;
  const json& ties = r.array(doc, "tied_parameters", "", /*is_required=*/false);
  for (size_t i = 0; i < ties.size(); ++i) {
    const json& pair = ties[i];
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
      r.fail("tied_parameters[" + std::to_string(i) + "]", "expected a pair of strings",
             "write [\"embed.wte\", \"head.wte\"]");
    out.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writer

/// The size each letter has at its first occurrence; tensors that differ get "sizes" overrides.
std::map<char, int64_t> size_table(const Graph& g) {
  std::map<char, int64_t> table;
  for (const auto& block : g.blocks)
    for (const auto& t : block.tensors)
      for (const auto& d : t.dims)
        if (!is_symbolic_dim(d.name)) table.insert({d.name, d.size});
  return table;
}

json tensor_to_json(const TensorDecl& t, const std::map<char, int64_t>& table) {
  json out = json::object();
  out["name"] = t.name;
  std::string dims;
  json sizes = json::object();
  for (const auto& d : t.dims) {
    dims += d.name;
    if (!is_symbolic_dim(d.name) && table.at(d.name) != d.size) sizes[std::string(1, d.name)] = d.size;
  }
  out["dims"] = dims;
  if (t.is_parameter) out["parameter"] = true;
  if (!sizes.empty()) out["sizes"] = sizes;
  return out;
}

json op_to_json(const Op& op) {
  json out = json::object();
  out["name"] = op.name;
  out["kind"] = to_string(op.kind);
  out["inputs"] = op.inputs;
  if (!op.output.empty()) out["output"] = op.output;
  switch (op.kind) {
    case OpKind::contraction: out["einsum"] = op.einsum; break;
    case OpKind::norm: out["norm"] = op.norm == NormKind::rms ? "rms" : "layer"; break;
    case OpKind::activation:
      out["activation"] = activation_names().at(op.activation);
      if (op.clamp_limit > 0) out["clamp_limit"] = op.clamp_limit;
      break;
    case OpKind::attention_core:
      out["causal"] = op.causal;
      out["sliding_window"] = op.sliding_window;
      break;
    case OpKind::router: out["top_k"] = op.top_k; break;
    case OpKind::ssm_scan: out["chunk_size"] = op.chunk_size; break;
    default: break;
  }
  return out;
}

json model_info_to_json(const ModelInfo& info) {
  json sources = json::object();
  for (const auto& [c, text] : info.dim_sources) sources[std::string(1, c)] = text;
  return json{{"architecture", info.architecture},
              {"num_layers", info.num_layers},
              {"hidden_size", info.hidden_size},
              {"num_attention_heads", info.num_attention_heads},
              {"num_kv_heads", info.num_kv_heads},
              {"vocab_size", info.vocab_size},
              {"max_seq_len", info.max_seq_len},
              {"num_experts", info.num_experts},
              {"experts_per_token", info.experts_per_token},
              {"has_mla", info.has_mla},
              {"dim_sources", sources}};
}

}  // namespace

Graph graph_from_json(const nlohmann::json& doc, const std::string& source) {
  require_format(doc, kFormat, source);
  const Reader r(source);
  r.only_keys(doc, "", {"format", "name", "model", "dims", "blocks", "tied_parameters"});
  const json* dims = r.find(doc, "dims");
  const std::map<char, int64_t> table = dims ? read_sizes(r, *dims, "dims") : std::map<char, int64_t>{};
  Graph g;
  const json& blocks = r.array(doc, "blocks", "", /*is_required=*/true);
  for (size_t i = 0; i < blocks.size(); ++i)
    g.blocks.push_back(read_block(r, blocks[i], "blocks[" + std::to_string(i) + "]", table));
  g.info = read_model_info(r, doc, g, table);
  g.tied_parameters = read_ties(r, doc);
  return g;
}

nlohmann::json to_json(const Graph& graph) {
  const std::map<char, int64_t> table = size_table(graph);
  json dims = json::object();
  for (const auto& [c, size] : table) dims[std::string(1, c)] = size;
  json blocks = json::array();
  for (const auto& block : graph.blocks) {
    json tensors = json::array(), ops = json::array();
    for (const auto& t : block.tensors) tensors.push_back(tensor_to_json(t, table));
    for (const auto& op : block.ops) ops.push_back(op_to_json(op));
    blocks.push_back(json{{"name", block.name},
                          {"repeat", block.repeat},
                          {"is_layer", block.is_layer},
                          {"tensors", tensors},
                          {"ops", ops}});
  }
  json out{{"format", kFormat}, {"name", graph.info.name}, {"model", model_info_to_json(graph.info)},
           {"dims", dims},      {"blocks", blocks}};
  if (!graph.tied_parameters.empty()) {
    json ties = json::array();
    for (const auto& [a, b] : graph.tied_parameters) ties.push_back(json::array({a, b}));
    out["tied_parameters"] = ties;
  }
  return out;
}

}  // namespace mgt::ir
