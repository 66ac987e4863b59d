// The model graph's small free functions: names of enums, lookups, parameter counting and the
// verifier every frontend runs before handing a Graph on. Conventions: docs/graph_format.md.
#include "mgt/ir/graph.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/input_limits.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <utility>

namespace mgt::ir {

int64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::fp8: return 1;
  }
  return 0;
}

std::string to_string(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::fp8: return "fp8";
  }
  return "?";
}

std::optional<DType> dtype_from_string(std::string_view text) {
  for (DType d : {DType::f32, DType::bf16, DType::f16, DType::fp8})
    if (text == to_string(d)) return d;
  return std::nullopt;
}

namespace {
constexpr std::array<std::pair<OpKind, const char*>, 10> kOpKindNames{{
    {OpKind::contraction, "contraction"},
    {OpKind::embedding, "embedding"},
    {OpKind::norm, "norm"},
    {OpKind::rope, "rope"},
    {OpKind::attention_core, "attention_core"},
    {OpKind::activation, "activation"},
    {OpKind::residual, "residual"},
    {OpKind::router, "router"},
    {OpKind::softmax_cross_entropy, "softmax_cross_entropy"},
    {OpKind::ssm_scan, "ssm_scan"},
}};
}  // namespace

std::string to_string(OpKind kind) {
  for (const auto& [k, name] : kOpKindNames)
    if (k == kind) return name;
  return "?";
}

OpKind op_kind_from_string(const std::string& text, const std::string& source) {
  std::string known;
  for (const auto& [kind, name] : kOpKindNames) {
    if (text == name) return kind;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  throw InputError(source, "kind", "unknown op kind \"" + text + "\"", "use one of: " + known);
}

const TensorDecl* find_tensor(const Block& block, const std::string& name) {
  for (const auto& tensor : block.tensors)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

int64_t num_elements(const TensorDecl& tensor, int64_t batch, int64_t seq) {
  int64_t n = 1;
  for (const auto& dim : tensor.dims) {
    const int64_t size = dim.name == 'b' ? batch : dim.name == 's' ? seq : dim.size;
    n = checked_mul(n, size, tensor.name, "dims");
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Parameter counting

namespace {

int64_t checked_add(int64_t a, int64_t b, const std::string& source) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw InputError(source, "parameters", "parameter count overflows a 64-bit integer", "check the sizes");
  return out;
}

/// The size `letter` has where the FLOP rule reads it: the output first, else the activation operand.
/// Returns 0 when neither has it.
int64_t reference_size(const TensorDecl* output, const TensorDecl* activation, char letter) {
  for (const TensorDecl* t : {output, activation}) {
    if (!t) continue;
    for (const auto& dim : t->dims)
      if (dim.name == letter) return dim.size;
  }
  return 0;
}

/// Elements of `weight` a single token touches through contraction `op`: each weight dim counts with
/// the smaller of its own size and its reference size (routed experts: top_k of num_experts).
int64_t active_elements(const Block& block, const Op& op, const TensorDecl& weight, const std::string& source) {
  const TensorDecl* output = find_tensor(block, op.output);
  const TensorDecl* activation = op.inputs.empty() ? nullptr : find_tensor(block, op.inputs.front());
  int64_t n = 1;
  for (const auto& dim : weight.dims) {
    const int64_t ref = reference_size(output, activation, dim.name);
    const int64_t used = ref > 0 ? std::min(ref, dim.size) : dim.size;
    n = checked_mul(n, used, source, block.name + "." + weight.name);
  }
  return n;
}

/// Active elements of parameter `param`: the first contraction reading it as a weight decides;
/// parameters no contraction reads (norm weights, embeddings) count fully.
int64_t active_param_elements(const Block& block, const TensorDecl& param, const std::string& source) {
  for (const auto& op : block.ops) {
    if (op.kind != OpKind::contraction) continue;
    for (size_t i = 1; i < op.inputs.size(); ++i)
      if (op.inputs[i] == param.name) return active_elements(block, op, param, source);
  }
  return num_elements(param);
}

}  // namespace

ParamCount count_parameters(const Graph& graph) {
  const std::string& source = graph.info.name;
  std::set<std::string> tied_copies;
  for (const auto& [first, second] : graph.tied_parameters) tied_copies.insert(second);

  ParamCount count;
  for (const auto& block : graph.blocks) {
    int64_t total = 0, active = 0;
    for (const auto& tensor : block.tensors) {
      if (!tensor.is_parameter || tied_copies.count(block.name + "." + tensor.name)) continue;
      total = checked_add(total, num_elements(tensor), source);
      active = checked_add(active, active_param_elements(block, tensor, source), source);
    }
    count.total = checked_add(count.total, checked_mul(total, block.repeat, source, block.name + ".repeat"), source);
    count.active =
        checked_add(count.active, checked_mul(active, block.repeat, source, block.name + ".repeat"), source);
  }
  return count;
}

// ---------------------------------------------------------------------------------------------
// Verifier: names resolve, operand counts and dims agree with each op kind, sizes are positive.

namespace {

std::string dims_string(const TensorDecl& t) {
  std::string out;
  for (const auto& d : t.dims) out += d.name;
  return out;
}

std::string describe(const TensorDecl& t) {
  // Appended piecewise: `"=" + std::to_string(n)` trips a GCC 12 -Wrestrict false positive.
  std::string out = "'";
  out += t.name;
  out += "' [";
  for (size_t i = 0; i < t.dims.size(); ++i) {
    if (i) out += ",";
    out += std::string(1, t.dims[i].name);
    if (!is_symbolic_dim(t.dims[i].name)) {
      out += '=';
      out += std::to_string(t.dims[i].size);
    }
  }
  out += ']';
  return out;
}

/// Checks one op of one block; `where` is the field path used in messages ("blocks[2].ops[5]").
class OpChecker {
 public:
  OpChecker(const Block& block, const Op& op, std::string source, std::string where)
      : block_(block), op_(op), source_(std::move(source)), where_(std::move(where)) {}

  void check() {
    resolve_operands();
    switch (op_.kind) {
      case OpKind::contraction: check_contraction(); break;
      case OpKind::embedding: check_embedding(); break;
      case OpKind::norm: check_norm(); break;
      case OpKind::rope: check_unary_same_dims(); break;
      case OpKind::attention_core: check_attention(); break;
      case OpKind::activation: check_activation(); break;
      case OpKind::residual: check_residual(); break;
      case OpKind::router: check_router(); break;
      case OpKind::softmax_cross_entropy: check_loss(); break;
      case OpKind::ssm_scan: check_ssm_scan(); break;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& problem, const std::string& hint = {}) const {
    throw InputError(source_, where_ + field, "op '" + op_.name + "' (" + to_string(op_.kind) + "): " + problem,
                     hint);
  }

  void resolve_operands() {
    for (size_t i = 0; i < op_.inputs.size(); ++i) {
      const TensorDecl* t = find_tensor(block_, op_.inputs[i]);
      if (!t)
        fail(".inputs[" + std::to_string(i) + "]", "unknown tensor '" + op_.inputs[i] + "' in block '" + block_.name + "'",
             "declare it in the block's tensors or fix the name");
      in_.push_back(t);
    }
    if (op_.output.empty()) {
      if (op_.kind != OpKind::softmax_cross_entropy) fail(".output", "missing output tensor", "name the tensor it writes");
      return;
    }
    out_ = find_tensor(block_, op_.output);
    if (!out_)
      fail(".output", "unknown tensor '" + op_.output + "' in block '" + block_.name + "'",
           "declare it in the block's tensors or fix the name");
    if (out_->is_parameter) fail(".output", "writes parameter '" + op_.output + "'", "ops write activations only");
  }

  void require_inputs(size_t lo, size_t hi) const {
    if (in_.size() < lo || in_.size() > hi)
      fail(".inputs", "expects " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
                          " inputs, got " + std::to_string(in_.size()),
           "see the operand convention of this kind in docs/graph_format.md");
  }

  void require_activation(size_t i) const {
    if (in_[i]->is_parameter)
      fail(".inputs[" + std::to_string(i) + "]", "operand " + describe(*in_[i]) + " must be an activation, not a parameter");
  }

  void require_same(const TensorDecl& a, const TensorDecl& b, const std::string& field) const {
    if (a.dims != b.dims)
      fail(field, "dims of " + describe(a) + " and " + describe(b) + " differ", "both must have the same dims");
  }

  void check_contraction() {
    require_inputs(2, 3);
    require_activation(0);
    const auto arrow = op_.einsum.find("->");
    if (arrow == std::string::npos) fail(".einsum", "einsum \"" + op_.einsum + "\" has no '->'", "write e.g. \"bsh,hf->bsf\"");
    std::vector<std::string> operands;
    std::string lhs = op_.einsum.substr(0, arrow);
    for (size_t start = 0;;) {
      const auto comma = lhs.find(',', start);
      operands.push_back(lhs.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    const std::string out_spec = op_.einsum.substr(arrow + 2);
    if (operands.size() != in_.size())
      fail(".einsum", "einsum \"" + op_.einsum + "\" has " + std::to_string(operands.size()) + " operands but the op has " +
                          std::to_string(in_.size()) + " inputs",
           "one einsum operand per input");
    if (!out_) fail(".output", "missing output tensor");
    for (size_t i = 0; i < in_.size(); ++i) check_spec_matches(operands[i], *in_[i], ".inputs[" + std::to_string(i) + "]");
    check_spec_matches(out_spec, *out_, ".output");
    for (char c : out_spec)
      if (operands[0].find(c) == std::string::npos && operands[1].find(c) == std::string::npos)
        fail(".einsum", "output dim '" + std::string(1, c) + "' appears in no operand");
    // Activation and output agree on shared dims; a weight may be larger (routed experts: e = num_experts).
    for (size_t i = 1; i < in_.size(); ++i) {
      for (const auto& dim : in_[i]->dims) {
        const int64_t ref = reference_size(out_, in_[0], dim.name);
        if (ref == 0) continue;
        const bool weight = in_[i]->is_parameter;
        if ((weight && dim.size < ref) || (!weight && dim.size != ref))
          fail(".inputs[" + std::to_string(i) + "]",
               "dim '" + std::string(1, dim.name) + "' of " + describe(*in_[i]) + " does not match size " +
                   std::to_string(ref) + " in the output/activation",
               "fix the tensor sizes");
      }
    }
    for (const auto& dim : out_->dims) {
      for (const auto& adim : in_[0]->dims)
        if (adim.name == dim.name && adim.size != dim.size)
          fail(".output", "dim '" + std::string(1, dim.name) + "' is " + std::to_string(dim.size) + " in the output but " +
                              std::to_string(adim.size) + " in the activation operand");
    }
    if (in_.size() == 3) {
      if (!in_[2]->is_parameter) fail(".inputs[2]", "bias " + describe(*in_[2]) + " must be a parameter");
      std::string expected;
      for (char c : out_spec)
        if (!is_symbolic_dim(c)) expected += c;
      if (operands[2] != expected)
        fail(".einsum", "bias operand \"" + operands[2] + "\" must have the output's non-b/s dims \"" + expected + "\"");
    }
  }

  void check_spec_matches(const std::string& spec, const TensorDecl& t, const std::string& field) const {
    if (spec != dims_string(t))
      fail(field, "einsum \"" + op_.einsum + "\" expects dims \"" + spec + "\" but tensor " + describe(t) + " has \"" +
                      dims_string(t) + "\"",
           "make the einsum operand list the tensor's dims in order");
  }

  void check_embedding() {
    require_inputs(1, 1);
    const TensorDecl& w = *in_[0];
    if (!w.is_parameter || w.dims.size() != 2)
      fail(".inputs[0]", "table " + describe(w) + " must be a 2-d parameter [rows, h]");
    if (!out_ || out_->dims.size() != 3 || out_->dims[0].name != 'b' || out_->dims[1].name != 's' ||
        out_->dims[2] != w.dims[1])
      fail(".output", "output must have dims [b, s, " + std::string(1, w.dims[1].name) + "]");
  }

  /// The operand convention of OpKind::ssm_scan (graph.hpp): dims by position, so that the cost
  /// model can read heads, head dim, groups and state size without names.
  void check_ssm_scan() {
    require_inputs(6, 6);
    for (size_t i = 0; i < 4; ++i) require_activation(i);
    for (size_t i = 4; i < 6; ++i)
      if (!in_[i]->is_parameter) fail(".inputs[" + std::to_string(i) + "]", describe(*in_[i]) + " must be a parameter");
    if (op_.chunk_size < 0) fail(".chunk_size", "must be 0 (Mamba-1) or a positive SSD chunk length");
    const bool ssd = op_.chunk_size > 0;
    const char* want[] = {ssd ? "bsad" : "bsf", ssd ? "bsa" : "bsf", ssd ? "bskn" : "bsn", ssd ? "bskn" : "bsn",
                          ssd ? "a" : "fn", ssd ? "a" : "f"};
    for (size_t i = 0; i < 6; ++i)
      if (dims_string(*in_[i]) != want[i])
        fail(".inputs[" + std::to_string(i) + "]",
             describe(*in_[i]) + " must have dims \"" + want[i] + "\" (" + (ssd ? "Mamba-2 SSD" : "Mamba-1") + ")",
             "see \"State-space layers\" in docs/graph_format.md");
    if (!out_) fail(".output", "missing output tensor");
    require_same(*in_[0], *out_, ".output");
    require_same(*in_[2], *in_[3], ".inputs[3]");
    if (ssd && in_[0]->dims[2].size % in_[2]->dims[2].size != 0)
      fail(".inputs[2]", "groups " + describe(*in_[2]) + " must divide the heads of " + describe(*in_[0]));
  }

  void check_norm() {
    require_inputs(2, 3);
    require_activation(0);
    const TensorDecl& x = *in_[0];
    for (size_t i = 1; i < in_.size(); ++i) {
      const TensorDecl& w = *in_[i];
      if (!w.is_parameter) fail(".inputs[" + std::to_string(i) + "]", describe(w) + " must be a parameter");
      const bool trailing = w.dims.size() <= x.dims.size() &&
                            std::equal(w.dims.begin(), w.dims.end(), x.dims.end() - w.dims.size());
      if (!trailing || w.dims.empty())
        fail(".inputs[" + std::to_string(i) + "]",
             "weight " + describe(w) + " must match the trailing dims of input " + describe(x),
             "norm weights have the dims normalised over");
    }
    if (!out_) fail(".output", "missing output tensor");
    require_same(x, *out_, ".output");
  }

  void check_unary_same_dims() {
    require_inputs(1, 1);
    require_activation(0);
    require_same(*in_[0], *out_, ".output");
  }

  void check_attention() {
    require_inputs(3, 3);
    for (size_t i = 0; i < 3; ++i) {
      require_activation(i);
      const auto& d = in_[i]->dims;
      if (d.size() != 4 || d[0].name != 'b' || d[1].name != 's')
        fail(".inputs[" + std::to_string(i) + "]", describe(*in_[i]) + " must have dims [b, s, heads, head_dim]");
    }
    const auto &q = in_[0]->dims, &k = in_[1]->dims, &v = in_[2]->dims;
    if (k[2] != v[2]) fail(".inputs[2]", "k and v must have the same heads dim");
    if (q[2].size % k[2].size != 0)
      fail(".inputs[1]", "kv heads " + std::to_string(k[2].size) + " do not divide query heads " +
                             std::to_string(q[2].size));
    if (!out_ || out_->dims.size() != 4 || out_->dims[0].name != 'b' || out_->dims[1].name != 's' || out_->dims[2] != q[2] ||
        out_->dims[3] != v[3])
      fail(".output", "output must have dims [b, s, <q heads>, <v head_dim>]");
    if (op_.sliding_window < 0) fail(".sliding_window", "must not be negative");
  }

  void check_activation() {
    const bool gated = op_.activation == ActivationKind::silu_glu || op_.activation == ActivationKind::gelu_glu;
    require_inputs(gated ? 2 : 1, gated ? 2 : 1);
    for (size_t i = 0; i < in_.size(); ++i) require_activation(i);
    if (gated) require_same(*in_[0], *in_[1], ".inputs[1]");
    require_same(*in_[0], *out_, ".output");
    if (!(op_.clamp_limit >= 0)) fail(".clamp_limit", "must be >= 0");
    if (op_.clamp_limit > 0 && !gated) fail(".clamp_limit", "only a gated unit (silu_glu, gelu_glu) clamps its inputs");
  }

  void check_residual() {
    require_inputs(2, 2);
    require_activation(0);
    require_activation(1);
    require_same(*in_[0], *in_[1], ".inputs[1]");
    require_same(*in_[0], *out_, ".output");
  }

  void check_router() {
    require_inputs(1, 1);
    require_activation(0);
    const auto& logits = in_[0]->dims;
    if (logits.empty()) fail(".inputs[0]", "logits must have an experts dim last");
    if (op_.top_k <= 0 || op_.top_k > logits.back().size)
      fail(".top_k", "must be in 1.." + std::to_string(logits.back().size) + ", got " + std::to_string(op_.top_k));
    std::vector<Dim> expected = logits;
    expected.back().size = op_.top_k;
    if (out_->dims != expected)
      fail(".output", "routing weights must have the logits' dims with the last one of size top_k=" +
                          std::to_string(op_.top_k));
  }

  void check_loss() {
    require_inputs(1, 1);
    require_activation(0);
  }

  const Block& block_;
  const Op& op_;
  std::string source_;
  std::string where_;
  std::vector<const TensorDecl*> in_;
  const TensorDecl* out_ = nullptr;
};

void verify_tensor(const TensorDecl& t, const std::string& source, const std::string& where) {
  if (t.name.empty()) throw InputError(source, where + ".name", "tensor name is empty");
  std::set<char> seen;
  for (const auto& dim : t.dims) {
    const std::string dim_field = where + ".dims";
    if (dim.name < 'a' || dim.name > 'z')
      throw InputError(source, dim_field, "tensor '" + t.name + "': dim name '" + std::string(1, dim.name) +
                                              "' is not a lowercase letter");
    if (!seen.insert(dim.name).second)
      throw InputError(source, dim_field, "tensor '" + t.name + "' repeats dim '" + std::string(1, dim.name) + "'");
    if (is_symbolic_dim(dim.name)) {
      if (dim.size != 0)
        throw InputError(source, dim_field, "tensor '" + t.name + "': dim '" + std::string(1, dim.name) +
                                                "' is symbolic and must have size 0");
      if (t.is_parameter)
        throw InputError(source, dim_field, "parameter '" + t.name + "' has the symbolic dim '" +
                                                std::string(1, dim.name) + "'", "parameters have fixed sizes");
    } else if (dim.size <= 0) {
      throw InputError(source, dim_field, "tensor '" + t.name + "': dim '" + std::string(1, dim.name) +
                                              "' must be positive, got " + std::to_string(dim.size));
    }
  }
  int64_t n = 1;
  for (const auto& dim : t.dims)
    if (!is_symbolic_dim(dim.name)) n = checked_mul(n, dim.size, source, where + ".dims");
}

/// Names resolve in program order: an activation is read only after an op wrote it (or it is a
/// block input: "x", or "memory", the encoder output an encoder-decoder's decoder layers attend
/// to), and every tensor is written at most once.
void verify_dataflow(const Block& block, const std::string& source, const std::string& where) {
  std::set<std::string> written{"x", "memory"};
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const Op& op = block.ops[i];
    const std::string op_where = where + ".ops[" + std::to_string(i) + "]";
    for (const auto& name : op.inputs) {
      const TensorDecl* t = find_tensor(block, name);
      if (t && !t->is_parameter && !written.count(name))
        throw InputError(source, op_where + ".inputs", "op '" + op.name + "' reads '" + name +
                                                           "' before any op writes it",
                         "order ops so producers come first; the block input is named \"x\"");
    }
    if (!op.output.empty() && !written.insert(op.output).second)
      throw InputError(source, op_where + ".output", "op '" + op.name + "' writes '" + op.output +
                                                         "', which is already written",
                       "give every op output its own tensor");
  }
}

void verify_block(const Block& block, const std::string& source, const std::string& where) {
  if (block.name.empty()) throw InputError(source, where + ".name", "block name is empty");
  if (block.repeat <= 0)
    throw InputError(source, where + ".repeat", "block '" + block.name + "': must be positive, got " +
                                                    std::to_string(block.repeat));
  std::set<std::string> names;
  for (size_t i = 0; i < block.tensors.size(); ++i) {
    const std::string tw = where + ".tensors[" + std::to_string(i) + "]";
    verify_tensor(block.tensors[i], source, tw);
    if (!names.insert(block.tensors[i].name).second)
      throw InputError(source, tw + ".name", "tensor '" + block.tensors[i].name + "' declared twice in block '" +
                                                 block.name + "'");
  }
  if (block.ops.empty()) throw InputError(source, where + ".ops", "block '" + block.name + "' has no ops");
  for (size_t i = 0; i < block.ops.size(); ++i)
    OpChecker(block, block.ops[i], source, where + ".ops[" + std::to_string(i) + "]").check();
  verify_dataflow(block, source, where);
}

const TensorDecl* find_qualified(const Graph& graph, const std::string& qualified) {
  const auto dot = qualified.find('.');
  if (dot == std::string::npos) return nullptr;
  for (const auto& block : graph.blocks)
    if (block.name == qualified.substr(0, dot)) return find_tensor(block, qualified.substr(dot + 1));
  return nullptr;
}

void verify_ties(const Graph& graph, const std::string& source) {
  for (size_t i = 0; i < graph.tied_parameters.size(); ++i) {
    const auto& [first, second] = graph.tied_parameters[i];
    const std::string field = "tied_parameters[" + std::to_string(i) + "]";
    const TensorDecl* a = find_qualified(graph, first);
    const TensorDecl* b = find_qualified(graph, second);
    for (auto [t, name] : {std::pair{a, first}, std::pair{b, second}})
      if (!t || !t->is_parameter)
        throw InputError(source, field, "'" + name + "' names no parameter", "write \"<block>.<tensor>\"");
    if (a->dims != b->dims)
      throw InputError(source, field, "tied parameters " + describe(*a) + " and " + describe(*b) + " differ in dims",
                       "a tied parameter is one buffer: give both the same dims in the same order");
    if (first == second) throw InputError(source, field, "ties '" + first + "' to itself");
  }
}

// A dimension past kMaxDimSize (hidden_size 2^31) is a typo, not a model: refused here, naming the
// config field it came from, rather than as an overflowing tensor deep in the cost model.
void check_dim_sizes(const Graph& graph, const Block& block, const std::string& source, const std::string& where) {
  for (size_t t = 0; t < block.tensors.size(); ++t)
    for (const Dim& d : block.tensors[t].dims) {
      if (d.size <= kMaxDimSize) continue;
      const auto named = graph.info.dim_sources.find(d.name);
      const std::string field = named != graph.info.dim_sources.end()
                                    ? named->second
                                    : where + ".tensors[" + std::to_string(t) + "].dims." + std::string(1, d.name);
      throw InputError(source, field, "is " + std::to_string(d.size) + ", more than " + std::to_string(kMaxDimSize),
                       "the largest dimension of a trained model is a vocabulary of 262,208; check the value");
    }
}

}  // namespace

void verify(const Graph& graph, const std::string& source) {
  if (graph.blocks.empty()) throw InputError(source, "blocks", "the graph has no blocks", "add at least one block");
  std::set<std::string> block_names;
  int64_t layers = 0;
  for (size_t i = 0; i < graph.blocks.size(); ++i) {
    const Block& block = graph.blocks[i];
    const std::string where = "blocks[" + std::to_string(i) + "]";
    verify_block(block, source, where);
    check_dim_sizes(graph, block, source, where);  // after verify_block's overflow checks
    if (!block_names.insert(block.name).second)
      throw InputError(source, where + ".name", "block name '" + block.name + "' is used twice");
    if (block.is_layer) layers += block.repeat;
    if (layers > kMaxLayers)
      throw InputError(source, where + ".repeat", "the layer blocks repeat more than " + std::to_string(kMaxLayers) + " times",
                       "mgt plans models of at most " + std::to_string(kMaxLayers) + " layers (the deepest trained has 126)");
  }
  verify_ties(graph, source);
  if (graph.info.num_layers != layers)
    throw InputError(source, "num_layers", "is " + std::to_string(graph.info.num_layers) +
                                               " but the layer blocks repeat " + std::to_string(layers) + " times",
                     "make num_layers the sum of the repeats of blocks with is_layer");
  check_model_size(graph, source);  // after the bounds on each dimension and on the layer count
}

}  // namespace mgt::ir
