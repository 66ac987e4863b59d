// ir::Graph + shardings -> linalg-on-tensors + mesh dialect text (docs/mlir.md, "Export"). Written as
// text (no MLIR builders: the format is small and the output reads like hand-written IR), then parsed
// and verified by MLIR before it is returned.
#include "mgt/mlir/mlir_interop.hpp"

#include "mgt/ir/error.hpp"
#include "mlir_private.hpp"

#include <map>
#include <set>
#include <sstream>

namespace mgt::mlirio {

namespace export_detail {

std::string tensor_type(const ir::TensorDecl& t) {
  std::string s = "tensor<";
  for (const auto& d : t.dims) s += std::to_string(d.size) + "x";
  return s + "f32>";
}

// SSA names: MLIR allows [A-Za-z0-9_$.-] after the first character; anything else becomes '_'.
std::string ssa(const std::string& name) {
  std::string out = "%";
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') ? c : '_';
  return out;
}

std::string axes_list(const std::vector<int>& axes) {
  std::string s = "[";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + std::to_string(axes[i]);
  return s + "]";
}

// MLIR 19 syntax: <@mesh, [[0], []], partial = sum[1]> (STACK.md §2.3).
std::string sharding_attr(const ir::TensorSharding& s) {
  std::string out = "<@mesh, [";
  for (size_t d = 0; d < s.split_axes.size(); ++d) out += (d ? ", " : "") + axes_list(s.split_axes[d]);
  out += "]";
  if (!s.partial_axes.empty()) out += ", partial = sum" + axes_list(s.partial_axes);
  return out + ">";
}

std::string affine_map(const std::string& letters, const std::string& loops) {
  std::string s = "affine_map<(";
  for (size_t i = 0; i < loops.size(); ++i) s += (i ? ", " : "") + std::string("d") + std::to_string(i);
  s += ") -> (";
  for (size_t i = 0; i < letters.size(); ++i)
    s += (i ? ", " : "") + std::string("d") + std::to_string(loops.find(letters[i]));
  return s + ")>";
}

std::string letters(const ir::TensorDecl& t) {
  std::string s;
  for (const auto& d : t.dims) s += d.name;
  return s;
}

// The scalar body of an op, from block arguments %__a0.. (inputs) and %__acc (the destination);
// region names start with "__" so they never shadow the function's values.
std::string body(const ir::Op& op, size_t inputs) {
  std::ostringstream b;
  b << "    ^bb0(";
  for (size_t i = 0; i < inputs; ++i) b << "%__a" << i << ": f32, ";
  b << "%__acc: f32):\n";
  auto act = [&](const std::string& in, const std::string& out, ir::ActivationKind kind) {
    const bool is_relu = kind == ir::ActivationKind::relu;
    // The gated kinds apply their base activation to the gate (first operand).
    const bool is_gelu = kind == ir::ActivationKind::gelu || kind == ir::ActivationKind::gelu_glu;
    if (is_relu) {
      b << "      %__zero = arith.constant 0.0 : f32\n      " << out << " = arith.maximumf " << in << ", %__zero : f32\n";
    } else if (is_gelu) {  // 0.5 x (1 + erf(x / sqrt 2))
      b << "      %__c_half = arith.constant 0.5 : f32\n      %__c_one = arith.constant 1.0 : f32\n"
        << "      %__c_rsqrt2 = arith.constant 0.70710678 : f32\n      %__g0 = arith.mulf " << in << ", %__c_rsqrt2 : f32\n"
        << "      %__g1 = math.erf %__g0 : f32\n      %__g2 = arith.addf %__g1, %__c_one : f32\n"
        << "      %__g3 = arith.mulf " << in << ", %__c_half : f32\n      " << out << " = arith.mulf %__g3, %__g2 : f32\n";
    } else {  // silu: x / (1 + exp(-x))
      b << "      %__c_one = arith.constant 1.0 : f32\n      %__s0 = arith.negf " << in << " : f32\n"
        << "      %__s1 = math.exp %__s0 : f32\n      %__s2 = arith.addf %__s1, %__c_one : f32\n      " << out
        << " = arith.divf " << in << ", %__s2 : f32\n";
    }
  };
  switch (op.kind) {
    case ir::OpKind::contraction:
      b << "      %__p = arith.mulf %__a0, %__a1 : f32\n      %__r = arith.addf %__acc, %__p : f32\n";
      break;
    case ir::OpKind::residual: b << "      %__r = arith.addf %__a0, %__a1 : f32\n"; break;
    case ir::OpKind::activation:
      if (inputs == 2) {
        act("%__a0", "%__g", op.activation);
        b << "      %__r = arith.mulf %__g, %__a1 : f32\n";
      } else {
        act("%__a0", "%__r", op.activation);
      }
      break;
    default: break;
  }
  b << "      linalg.yield %__r : f32\n";
  return b.str();
}

// Refuses, with the field and a hint, what export-mlir has no linalg form for.
void check_exportable(const ir::Graph& graph, const MeshAnnotations& ann) {
  if (graph.blocks.size() != 1)
    throw ir::InputError(graph.info.name, "blocks", "export-mlir writes graphs of one block, got " +
                                                        std::to_string(graph.blocks.size()),
                         "export a graph imported from MLIR (mgt-plan import)");
  const ir::Block& block = graph.blocks[0];
  if (!ann.mesh.empty() && ann.ops.size() != block.ops.size())
    throw std::logic_error("export_mlir: " + std::to_string(ann.ops.size()) + " op shardings for " +
                           std::to_string(block.ops.size()) + " ops");
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const ir::Op& op = block.ops[i];
    if (op.kind != ir::OpKind::contraction && op.kind != ir::OpKind::activation && op.kind != ir::OpKind::residual)
      throw ir::InputError(graph.info.name, "blocks[0].ops[" + std::to_string(i) + "]",
                           "op '" + op.name + "' (" + ir::to_string(op.kind) + ") has no linalg form in export-mlir",
                           "export-mlir writes contraction, activation and residual ops");
    if (op.kind == ir::OpKind::activation && op.clamp_limit > 0)
      throw ir::InputError(graph.info.name, "blocks[0].ops[" + std::to_string(i) + "].clamp_limit",
                           "op '" + op.name + "' clamps its inputs; export-mlir's linalg bodies have no clamp",
                           "export the graph without clamp_limit");
    if (op.kind == ir::OpKind::contraction && op.inputs.size() != 2)
      throw ir::InputError(graph.info.name, "blocks[0].ops[" + std::to_string(i) + "]",
                           "op '" + op.name + "' has a bias operand", "export-mlir writes contractions of two operands");
  }
  for (const auto& t : block.tensors)
    for (const auto& d : t.dims)
      if (ir::is_symbolic_dim(d.name))
        throw ir::InputError(graph.info.name, "tensor '" + t.name + "'",
                             "dim '" + std::string(1, d.name) + "' is symbolic (batch/sequence)",
                             "export-mlir needs concrete sizes, as in graphs imported from MLIR");
}

// The function being written: its signature, its body, and the SSA value consumers read per tensor.
struct FunctionText {
  const ir::Block& block;
  const MeshAnnotations& ann;
  bool sharded;
  std::ostringstream sig, body_text;
  std::map<std::string, std::string> value;  // tensor name -> SSA value consumers read
  // One annotate_for_users shard per (value, sharding), shared by consumers that read it alike, so
  // MLIR reshards (e.g. all-reduces a partial result) once, as mgt's lowering does.
  std::map<std::pair<std::string, std::string>, std::string> user_shards;
};

// Block inputs (tensors no op writes) become function arguments, sharded to their input sharding.
void write_arguments(FunctionText& f) {
  std::set<std::string> written;
  for (const auto& op : f.block.ops) written.insert(op.output);
  for (const auto& t : f.block.tensors) {
    if (written.count(t.name)) continue;
    f.sig << (f.sig.tellp() > 0 ? ",\n    " : "") << ssa(t.name) << ": " << tensor_type(t) << " {"
          << (t.is_parameter ? "mgt.param, " : "") << "mgt.name = \"" << t.name << "\"}";
    f.value[t.name] = ssa(t.name);
    if (f.sharded) {
      const std::string v = ssa(t.name + ".sharded");
      f.body_text << "  " << v << " = mesh.shard " << ssa(t.name) << " to " << sharding_attr(f.ann.inputs.at(t.name))
                  << " : " << tensor_type(t) << "\n";
      f.value[t.name] = v;
    }
  }
}

// The SSA values op i reads, each resharded (annotate_for_users) as the op's sharding wants it.
std::vector<std::string> operand_values(FunctionText& f, size_t i) {
  const ir::Op& op = f.block.ops[i];
  std::vector<std::string> operands;
  for (size_t j = 0; j < op.inputs.size(); ++j) {
    const ir::TensorDecl& in = *ir::find_tensor(f.block, op.inputs[j]);
    std::string v = f.value.at(in.name);
    if (f.sharded) {
      const std::string attr = sharding_attr(f.ann.ops[i].operands[j]);
      auto [it, fresh] = f.user_shards.try_emplace({v, attr}, ssa(op.name + ".in" + std::to_string(j)));
      if (fresh)
        f.body_text << "  " << it->second << " = mesh.shard " << v << " to " << attr << " annotate_for_users : "
                    << tensor_type(in) << "\n";
      v = it->second;
    }
    operands.push_back(v);
  }
  return operands;
}

// Op i as a linalg.generic writing into a destination argument, its result sharded as annotated.
void write_op(FunctionText& f, size_t i) {
  const ir::Op& op = f.block.ops[i];
  const ir::TensorDecl& out = *ir::find_tensor(f.block, op.output);
  const std::string dest = ssa(op.output + ".init");
  f.sig << ",\n    " << dest << ": " << tensor_type(out);
  const std::vector<std::string> operands = operand_values(f, i);
  // Loops: the output's letters (parallel), then contracted letters in operand order (reduction).
  std::string loops = letters(out), iterators;
  for (const auto& name : op.inputs)
    for (char c : letters(*ir::find_tensor(f.block, name)))
      if (loops.find(c) == std::string::npos) loops += c;
  for (size_t l = 0; l < loops.size(); ++l)
    iterators += std::string(l ? ", " : "") + (l < out.dims.size() ? "\"parallel\"" : "\"reduction\"");
  std::string maps, types;
  for (const auto& name : op.inputs) {
    const ir::TensorDecl& in = *ir::find_tensor(f.block, name);
    maps += affine_map(letters(in), loops) + ", ";
    types += (types.empty() ? "" : ", ") + tensor_type(in);
  }
  maps += affine_map(letters(out), loops);
  std::string ins;
  for (size_t j = 0; j < operands.size(); ++j) ins += (j ? ", " : "") + operands[j];
  const std::string result = ssa(op.output);
  f.body_text << "  // " << op.name << ": " << (op.kind == ir::OpKind::contraction ? op.einsum : ir::to_string(op.kind))
              << "\n  " << result << " = linalg.generic {indexing_maps = [" << maps << "], iterator_types = ["
              << iterators << "]}\n      ins(" << ins << " : " << types << ") outs(" << dest << " : "
              << tensor_type(out) << ") {\n"
              << body(op, op.inputs.size()) << "  } -> " << tensor_type(out) << "\n";
  f.value[op.output] = result;
  if (f.sharded) {
    const std::string v = ssa(op.output + ".sharded");
    f.body_text << "  " << v << " = mesh.shard " << result << " to " << sharding_attr(f.ann.ops[i].raw_result) << " : "
                << tensor_type(out) << "\n";
    f.value[op.output] = v;
  }
}

}  // namespace export_detail

std::string export_mlir(const ir::Graph& graph, const MeshAnnotations& ann) {
  using namespace export_detail;
  check_exportable(graph, ann);
  FunctionText f{graph.blocks[0], ann, !ann.mesh.empty(), {}, {}, {}, {}};
  write_arguments(f);
  for (size_t i = 0; i < f.block.ops.size(); ++i) write_op(f, i);
  const ir::TensorDecl& last = *ir::find_tensor(f.block, f.block.ops.back().output);
  std::string ret = f.value.at(last.name);
  if (f.sharded) {
    f.body_text << "  %mgt.ret = mesh.shard " << ret << " to " << sharding_attr(ann.ops.back().result)
                << " annotate_for_users : " << tensor_type(last) << "\n";
    ret = "%mgt.ret";
  }
  std::ostringstream text;
  text << "// " << graph.info.name << ": written by mgt-plan export-mlir (docs/mlir.md)\n";
  text << "module {\n";
  if (f.sharded) {
    text << "mesh.mesh @mesh(shape = ";
    for (size_t i = 0; i < ann.mesh.size(); ++i) text << (i ? "x" : "") << ann.mesh[i];
    text << ")\n";
  }
  text << "func.func @main(" << f.sig.str() << ") -> " << tensor_type(last) << " {\n"
       << f.body_text.str() << "  return " << ret << " : " << tensor_type(last) << "\n}\n}\n";
  check_module_text(text.str(), graph.info.name + ".mlir (exported)");
  return text.str();
}

}  // namespace mgt::mlirio
