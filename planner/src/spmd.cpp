// Role-less sharding plans: propagation through einsum letters, mgt's lowering to per-device shapes
// and collectives, costing and search (spmd.hpp; rules and cost in docs/mlir.md).
#include "mgt/planner/spmd.hpp"

#include "mgt/cost_model/collective.hpp"
#include "mgt/cost_model/compute.hpp"
#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>

namespace mgt::plan {

std::string to_string(const SpmdPlan& plan) {
  std::string out = "mesh=";
  for (size_t i = 0; i < plan.mesh.size(); ++i) out += (i ? "x" : "") + std::to_string(plan.mesh[i]);
  for (size_t i = 0; i < plan.splits.size(); ++i)
    out += " " + plan.splits[i].tensor + "[" + std::to_string(plan.splits[i].dim) + "]@" + std::to_string(i);
  return out;
}

std::string to_string(const SpmdStepKind& kind) { return kind ? ir::to_string(*kind) : "all_slice"; }

SpmdPlan spmd_plan_from_json(const nlohmann::json& doc, const std::string& source) {
  ir::require_format(doc, "mgt.spmd_plan/1", source);
  for (const auto& [key, value] : doc.items())
    if (key != "format" && key != "mesh" && key != "splits" && key.rfind('_', 0) != 0)
      throw ir::InputError(source, key, "unknown key", "mgt.spmd_plan/1 has only format, mesh and splits");
  const std::string hint = "write e.g. {\"format\": \"mgt.spmd_plan/1\", \"mesh\": [2, 4], \"splits\": "
                           "[{\"tensor\": \"x\", \"dim\": 0}, {\"tensor\": \"w1\", \"dim\": 1}]}";
  if (!doc.contains("mesh") || !doc["mesh"].is_array() || doc["mesh"].empty())
    throw ir::InputError(source, "mesh", "must be a non-empty array of axis sizes", hint);
  if (!doc.contains("splits") || !doc["splits"].is_array() || doc["splits"].size() != doc["mesh"].size())
    throw ir::InputError(source, "splits", "must be an array with one entry per mesh axis", hint);
  SpmdPlan plan;
  for (size_t i = 0; i < doc["mesh"].size(); ++i) {
    const auto& v = doc["mesh"][i];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      throw ir::InputError(source, "mesh[" + std::to_string(i) + "]", "must be a positive integer", hint);
    plan.mesh.push_back(v.get<int64_t>());
  }
  for (size_t i = 0; i < doc["splits"].size(); ++i) {
    const auto& s = doc["splits"][i];
    const std::string field = "splits[" + std::to_string(i) + "]";
    if (!s.is_object()) throw ir::InputError(source, field, "must be an object {\"tensor\", \"dim\"}", hint);
    AxisSplit split;
    split.tensor = ir::require_string(s, "tensor", source + ": " + field);
    if (!s.contains("dim") || !s["dim"].is_number_integer() || s["dim"].get<int64_t>() < 0)
      throw ir::InputError(source, field + ".dim", "must be a non-negative integer (0-based dim)", hint);
    split.dim = s["dim"].get<int64_t>();
    plan.splits.push_back(split);
  }
  return plan;
}

nlohmann::json to_json(const SpmdPlan& plan) {
  nlohmann::json splits = nlohmann::json::array();
  for (const auto& s : plan.splits) splits.push_back({{"tensor", s.tensor}, {"dim", s.dim}});
  return {{"format", "mgt.spmd_plan/1"}, {"mesh", plan.mesh}, {"splits", splits}};
}

namespace {

// Block inputs: the activation "x", an encoder-decoder's "memory" (the encoder output) and the
// parameters (docs/graph_format.md, "Block interface").
bool is_block_input(const ir::TensorDecl& t) { return t.is_parameter || t.name == "x" || t.name == "memory"; }

int64_t axes_size(const std::vector<int64_t>& mesh, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int a : axes) n *= mesh[size_t(a)];
  return n;
}

std::vector<int64_t> local_shape(const ir::TensorDecl& t, const ir::TensorSharding& s, const std::vector<int64_t>& mesh) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < t.dims.size(); ++d) out.push_back(t.dims[d].size / axes_size(mesh, s.split_axes[d]));
  return out;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

// Finds axis `a` among a sharding's split dims; -1 when it splits none.
int dim_of_axis(const ir::TensorSharding& s, int a) {
  for (size_t d = 0; d < s.split_axes.size(); ++d)
    if (std::find(s.split_axes[d].begin(), s.split_axes[d].end(), a) != s.split_axes[d].end()) return int(d);
  return -1;
}

// Reshards `from` into `to` one axis at a time (MLIR's convention): slices first (they shrink what the
// later steps move), then all_to_all moves, then all_gathers. Appends steps with per-device shapes.
void reshard(const ir::TensorDecl& t, const ir::TensorSharding& from, const ir::TensorSharding& to,
             const std::vector<int64_t>& mesh, const std::string& op, std::vector<SpmdCollective>& out) {
  ir::TensorSharding cur = from;
  auto step = [&](SpmdStepKind kind, int a, int remove_dim, int add_dim) {
    SpmdCollective c{kind, {a}, t.name, op, local_shape(t, cur, mesh), {}};
    if (remove_dim >= 0) {
      auto& v = cur.split_axes[size_t(remove_dim)];
      v.erase(std::find(v.begin(), v.end(), a));
    }
    if (add_dim >= 0) cur.split_axes[size_t(add_dim)].push_back(a);
    c.output_shape = local_shape(t, cur, mesh);
    out.push_back(std::move(c));
  };
  const int axes = int(mesh.size());
  for (int a = 0; a < axes; ++a)
    if (dim_of_axis(cur, a) < 0 && dim_of_axis(to, a) >= 0) step(kAllSlice, a, -1, dim_of_axis(to, a));
  for (int a = 0; a < axes; ++a) {
    const int f = dim_of_axis(cur, a), g = dim_of_axis(to, a);
    if (f >= 0 && g >= 0 && f != g) step(ir::CollectiveKind::all_to_all, a, f, g);
  }
  for (int a = 0; a < axes; ++a)
    if (dim_of_axis(cur, a) >= 0 && dim_of_axis(to, a) < 0) step(ir::CollectiveKind::all_gather, a, dim_of_axis(cur, a), -1);
}

const ir::Block& single_block(const ir::Graph& graph, const std::string& source) {
  if (graph.blocks.size() != 1)
    throw ir::InputError(source, "blocks", "role-less sharding plans need a graph of one block, got " +
                                               std::to_string(graph.blocks.size()),
                         "import the model from MLIR (mgt-plan import), which writes one block");
  return graph.blocks[0];
}

const char* const kSplitsHint = "name a block input (\"x\" or a parameter) and a dim its axis size divides";

// The block inputs as the plan splits them, each split checked to name an input dim its axes divide.
std::map<std::string, ir::TensorSharding> input_shardings(const ir::Block& block, const SpmdPlan& plan,
                                                          const std::string& source) {
  const std::string hint = kSplitsHint;
  if (plan.mesh.empty() || plan.splits.size() != plan.mesh.size())
    throw ir::InputError(source, "splits", "needs one split per mesh axis (" + std::to_string(plan.mesh.size()) + ")", hint);
  std::map<std::string, ir::TensorSharding> inputs;
  for (const auto& t : block.tensors)
    if (is_block_input(t)) inputs[t.name] = {std::vector<std::vector<int>>(t.dims.size()), {}};
  for (size_t i = 0; i < plan.splits.size(); ++i) {
    const AxisSplit& s = plan.splits[i];
    const std::string field = "splits[" + std::to_string(i) + "]";
    const ir::TensorDecl* t = ir::find_tensor(block, s.tensor);
    if (!t || !is_block_input(*t))
      throw ir::InputError(source, field + ".tensor", "'" + s.tensor + "' is not a block input of the graph", hint);
    if (s.dim < 0 || s.dim >= int64_t(t->dims.size()))
      throw ir::InputError(source, field + ".dim", "tensor '" + s.tensor + "' has " + std::to_string(t->dims.size()) +
                                                       " dims, got dim " + std::to_string(s.dim), hint);
    inputs[s.tensor].split_axes[size_t(s.dim)].push_back(int(i));
  }
  for (const auto& [name, sharding] : inputs) {
    const ir::TensorDecl& t = *ir::find_tensor(block, name);
    for (size_t d = 0; d < t.dims.size(); ++d)
      if (t.dims[d].size <= 0 || t.dims[d].size % axes_size(plan.mesh, sharding.split_axes[d]) != 0)
        throw ir::InputError(source, "splits", "dim " + std::to_string(d) + " of '" + name + "' (size " +
                                                   std::to_string(t.dims[d].size) + ") is not divisible by its mesh axes (" +
                                                   std::to_string(axes_size(plan.mesh, sharding.split_axes[d])) + " devices)",
                             hint);
  }
  return inputs;
}

// Rule 1: einsum letters -> mesh axes, first come first served over the operands.
std::map<char, std::vector<int>> letter_axes_of(const std::vector<const ir::TensorDecl*>& in,
                                                const std::map<std::string, ir::TensorSharding>& current) {
  std::map<char, std::vector<int>> letter_axes;
  std::set<int> used;
  for (size_t i = 0; i < in.size(); ++i) {
    const ir::TensorSharding& s = current.at(in[i]->name);
    for (size_t d = 0; d < in[i]->dims.size(); ++d) {
      const auto& axes = s.split_axes[d];
      const char letter = in[i]->dims[d].name;
      if (axes.empty() || letter_axes.count(letter)) continue;
      if (std::any_of(axes.begin(), axes.end(), [&](int a) { return used.count(a) > 0; })) continue;
      letter_axes[letter] = axes;
      used.insert(axes.begin(), axes.end());
    }
  }
  return letter_axes;
}

// Lowers one op given the shardings of the tensors written so far: its operands resharded as its
// letters want them (steps appended to `collectives`), its result, per-device shapes and FLOPs.
SpmdOpLowering lower_spmd_op(const ir::Block& block, const ir::Op& op, const SpmdPlan& plan,
                             const std::map<std::string, ir::TensorSharding>& current,
                             std::vector<SpmdCollective>& collectives, const std::string& source) {
  const std::string hint = kSplitsHint;
  if (op.kind != ir::OpKind::contraction && op.kind != ir::OpKind::activation && op.kind != ir::OpKind::residual)
    throw ir::InputError(source, "ops", "op '" + op.name + "' (" + ir::to_string(op.kind) +
                                            ") has no role-less sharding rule",
                         "role-less plans cover contraction, activation and residual ops");
  std::vector<const ir::TensorDecl*> in;
  for (const auto& name : op.inputs) in.push_back(ir::find_tensor(block, name));
  const ir::TensorDecl& out = *ir::find_tensor(block, op.output);
  const std::map<char, std::vector<int>> letter_axes = letter_axes_of(in, current);
  // 2. Operands as the op reads them.
  SpmdOpLowering ol;
  ol.op = op.name;
  for (const ir::TensorDecl* t : in) {
    ir::TensorSharding want{std::vector<std::vector<int>>(t->dims.size()), {}};
    for (size_t d = 0; d < t->dims.size(); ++d) {
      auto it = letter_axes.find(t->dims[d].name);
      if (it != letter_axes.end()) want.split_axes[d] = it->second;
      if (t->dims[d].size % axes_size(plan.mesh, want.split_axes[d]) != 0)
        throw ir::InputError(source, "splits", "op '" + op.name + "' splits dim " + std::to_string(d) + " of '" +
                                                   t->name + "' (size " + std::to_string(t->dims[d].size) +
                                                   ") over " + std::to_string(axes_size(plan.mesh, want.split_axes[d])) +
                                                   " devices, which does not divide it", hint);
    }
    reshard(*t, current.at(t->name), want, plan.mesh, op.name, collectives);
    ol.operand_shapes.push_back(local_shape(*t, want, plan.mesh));
    ol.operands.push_back(std::move(want));
  }
  // 3. Result: output letters keep their axes; split contracted letters leave partial sums.
  ol.raw_result.split_axes.resize(out.dims.size());
  std::set<char> out_letters;
  for (size_t d = 0; d < out.dims.size(); ++d) {
    out_letters.insert(out.dims[d].name);
    auto it = letter_axes.find(out.dims[d].name);
    if (it != letter_axes.end()) ol.raw_result.split_axes[d] = it->second;
    if (out.dims[d].size % axes_size(plan.mesh, ol.raw_result.split_axes[d]) != 0)
      throw ir::InputError(source, "splits", "op '" + op.name + "' result '" + out.name + "' dim " + std::to_string(d) +
                                                 " (size " + std::to_string(out.dims[d].size) + ") is not divisible by " +
                                                 std::to_string(axes_size(plan.mesh, ol.raw_result.split_axes[d])) + " devices",
                           hint);
  }
  double flops = 2;
  std::set<char> seen;
  for (const ir::TensorDecl* t : in)
    for (const auto& dim : t->dims)
      if (seen.insert(dim.name).second) {
        auto it = letter_axes.find(dim.name);
        flops *= double(dim.size) / double(it == letter_axes.end() ? 1 : axes_size(plan.mesh, it->second));
        if (!out_letters.count(dim.name) && it != letter_axes.end())
          ol.raw_result.partial_axes.insert(ol.raw_result.partial_axes.end(), it->second.begin(), it->second.end());
      }
  std::sort(ol.raw_result.partial_axes.begin(), ol.raw_result.partial_axes.end());
  ol.result_shape = local_shape(out, ol.raw_result, plan.mesh);
  ol.local_flops = op.kind == ir::OpKind::contraction ? flops : double(product(ol.result_shape));
  ol.result = ol.raw_result;
  ol.result.partial_axes.clear();
  if (!ol.raw_result.partial_axes.empty())
    collectives.push_back({ir::CollectiveKind::all_reduce, ol.raw_result.partial_axes, out.name, op.name, ol.result_shape,
                           ol.result_shape});
  return ol;
}

}  // namespace

SpmdLowering lower_spmd(const ir::Graph& graph, const SpmdPlan& plan, const std::string& source) {
  const ir::Block& block = single_block(graph, source);
  SpmdLowering low;
  low.inputs = input_shardings(block, plan, source);
  low.mesh = plan.mesh;
  std::map<std::string, ir::TensorSharding> current = low.inputs;
  for (const ir::Op& op : block.ops) {
    SpmdOpLowering ol = lower_spmd_op(block, op, plan, current, low.collectives, source);
    current[op.output] = ol.result;
    low.ops.push_back(std::move(ol));
  }
  return low;
}

namespace {

// GEMM shape of a contraction on local sizes: m = output letters from operand 0 (with batch letters),
// n = output letters only in operand 1, k = contracted letters.
std::tuple<int64_t, int64_t, int64_t> gemm_shape(const ir::Op& op, const ir::Block& block, const SpmdOpLowering& ol) {
  const ir::TensorDecl& a = *ir::find_tensor(block, op.inputs[0]);
  const ir::TensorDecl& out = *ir::find_tensor(block, op.output);
  int64_t m = 1, n = 1, k = 1;
  std::map<char, int64_t> local;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const ir::TensorDecl& t = *ir::find_tensor(block, op.inputs[i]);
    for (size_t d = 0; d < t.dims.size(); ++d) local.emplace(t.dims[d].name, ol.operand_shapes[i][d]);
  }
  std::set<char> out_letters, a_letters;
  for (const auto& d : out.dims) out_letters.insert(d.name);
  for (const auto& d : a.dims) a_letters.insert(d.name);
  for (const auto& [letter, size] : local) {
    if (!out_letters.count(letter)) k *= size;
    else if (a_letters.count(letter)) m *= size;
    else n *= size;
  }
  return {m, n, k};
}

cost::GroupPlacement placement(const std::vector<int64_t>& mesh, const std::vector<int>& axes) {
  cost::GroupPlacement g;
  for (int a : axes) {
    int64_t stride = 1;
    for (size_t j = size_t(a) + 1; j < mesh.size(); ++j) stride *= mesh[j];
    g.axes.push_back({mesh[size_t(a)], stride});
  }
  return g;
}

SpmdEstimate estimate_on(const ir::Graph& graph, const SpmdPlan& plan, const ir::ClusterSpec& cluster,
                         const cost::Topology& topology, ir::DType dtype) {
  const ir::Block& block = graph.blocks.at(0);
  const SpmdLowering low = lower_spmd(graph, plan, "plan");
  const cost::CostParams params;
  const int64_t bytes_per = ir::dtype_bytes(dtype);
  SpmdEstimate e;
  e.plan = plan;
  auto comm = [&](ir::CollectiveKind kind, const std::vector<int>& axes, int64_t bytes) {
    if (bytes <= 0 || axes_size(plan.mesh, axes) <= 1) return;
    const cost::GroupPlacement g = placement(plan.mesh, axes);
    e.comm_s += cost::collective_time_s(cluster, kind, g.size(), bytes, topology.link_for_group(g));
    ++e.collectives;
  };
  int64_t activation_bytes = 0;
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const ir::Op& op = block.ops[i];
    const SpmdOpLowering& ol = low.ops[i];
    const int64_t out_elems = product(ol.result_shape);
    activation_bytes += out_elems * bytes_per;
    if (op.kind == ir::OpKind::contraction) {
      const auto [m, n, k] = gemm_shape(op, block, ol);
      e.compute_s += 3 * cost::gemm_time_s(m, n, k, cluster, dtype, params);  // fwd + dX + dW
    } else {
      int64_t bytes = out_elems * bytes_per;
      for (const auto& s : ol.operand_shapes) bytes += product(s) * bytes_per;
      e.compute_s += 3 * cost::memory_bound_time_s(bytes, cluster, params);
    }
    // Backward: each operand's gradient sums over the axes of the op's split letters it lacks.
    std::set<int> op_axes;
    for (const auto& s : ol.operands)
      for (const auto& axes : s.split_axes) op_axes.insert(axes.begin(), axes.end());
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      if (op.inputs[j] == "x") continue;  // the input batch needs no gradient
      std::set<int> own;
      for (const auto& axes : ol.operands[j].split_axes) own.insert(axes.begin(), axes.end());
      std::vector<int> lacking;
      for (int a : op_axes)
        if (!own.count(a)) lacking.push_back(a);
      comm(ir::CollectiveKind::all_reduce, lacking, product(ol.operand_shapes[j]) * bytes_per);
    }
  }
  for (const SpmdCollective& c : low.collectives) {
    const int64_t in_bytes = product(c.input_shape) * bytes_per, out_bytes = product(c.output_shape) * bytes_per;
    if (c.kind == kAllSlice) {
      comm(ir::CollectiveKind::all_gather, c.axes, in_bytes);  // bwd
      continue;
    }
    switch (*c.kind) {
      case ir::CollectiveKind::all_reduce: comm(ir::CollectiveKind::all_reduce, c.axes, out_bytes); break;
      case ir::CollectiveKind::all_gather:  // fwd gather, bwd reduce-scatter of the same buffer
        comm(ir::CollectiveKind::all_gather, c.axes, out_bytes);
        comm(ir::CollectiveKind::reduce_scatter, c.axes, out_bytes);
        break;
      case ir::CollectiveKind::all_to_all:
        comm(ir::CollectiveKind::all_to_all, c.axes, in_bytes);
        comm(ir::CollectiveKind::all_to_all, c.axes, out_bytes);
        break;
      case ir::CollectiveKind::reduce_scatter:
      case ir::CollectiveKind::broadcast:
      case ir::CollectiveKind::send_recv:
        throw std::logic_error("estimate_spmd: the lowering emitted a " + ir::to_string(*c.kind) +
                               " (it reshards with all_reduce, all_gather, all_to_all and all_slice only)");
    }
  }
  for (const auto& [name, s] : low.inputs) {
    const ir::TensorDecl& t = *ir::find_tensor(block, name);
    if (t.is_parameter) e.param_bytes += product(local_shape(t, s, plan.mesh)) * 16;  // fp32 w, grad, 2 AdamW moments
  }
  e.step_s = e.compute_s + e.comm_s;
  e.peak_bytes = e.param_bytes + activation_bytes;
  return e;
}

bool better(const SpmdEstimate& a, const SpmdEstimate& b) {
  if (a.step_s != b.step_s) return a.step_s < b.step_s;
  if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
  return to_string(a.plan) < to_string(b.plan);
}

}  // namespace

SpmdEstimate estimate_spmd(const ir::Graph& graph, const SpmdPlan& plan, const ir::ClusterSpec& cluster,
                           int64_t num_gpus, ir::DType dtype) {
  single_block(graph, "graph");
  const cost::Topology topology(cluster, num_gpus);
  return estimate_on(graph, plan, cluster, topology, dtype);
}

SpmdSearchResult search_spmd(const ir::Graph& graph, const ir::ClusterSpec& cluster, int64_t num_gpus,
                             ir::DType dtype, int64_t top) {
  const ir::Block& block = single_block(graph, "graph");
  const cost::Topology topology(cluster, num_gpus);
  std::vector<std::vector<int64_t>> meshes{{num_gpus}};
  for (int64_t p = 2; p < num_gpus; ++p)
    if (num_gpus % p == 0) meshes.push_back({p, num_gpus / p});
  std::vector<AxisSplit> inputs;
  for (const auto& t : block.tensors)
    if (is_block_input(t))
      for (size_t d = 0; d < t.dims.size(); ++d) inputs.push_back({t.name, int64_t(d)});
  SpmdSearchResult result;
  auto consider = [&](const SpmdPlan& plan) {
    ++result.evaluated;
    SpmdEstimate e;
    try {
      e = estimate_on(graph, plan, cluster, topology, dtype);
    } catch (const ir::InputError&) {
      ++result.rejected["a split does not divide a dim it reaches"];
      return;
    }
    if (e.peak_bytes > cluster.gpu.hbm_bytes) {
      ++result.rejected["does not fit in GPU memory"];
      return;
    }
    ++result.feasible;
    result.plans.push_back(std::move(e));
  };
  for (const auto& mesh : meshes) {
    std::vector<size_t> pick(mesh.size(), 0);
    while (true) {
      SpmdPlan plan{mesh, {}};
      for (size_t i : pick) plan.splits.push_back(inputs[i]);
      consider(plan);
      size_t axis = 0;
      while (axis < pick.size() && ++pick[axis] == inputs.size()) pick[axis++] = 0;
      if (axis == pick.size()) break;
    }
    if (num_gpus == 1) break;  // every split of a 1-device mesh is the same plan
  }
  std::sort(result.plans.begin(), result.plans.end(), better);
  if (int64_t(result.plans.size()) > top) result.plans.resize(size_t(top));
  return result;
}

}  // namespace mgt::plan
