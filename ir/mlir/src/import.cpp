// MLIR -> ir::Graph (docs/mlir.md, "Import"). Steps:
//  1. parse with MLIR's own parser and verifier, diagnostics turned into InputError at file:line:col;
//  2. walk the first func.func: every op becomes a graph op, a destination (tensor.empty, linalg.fill,
//     outs-only arguments), an alias (mesh.shard), or an "unsupported" entry (all listed at once);
//  3. name dims: the iteration dims of each op's indexing maps tie operand dims together; each
//     connected class of dims becomes one einsum letter (b and s are kept for the symbolic dims).
#include "mgt/mlir/mlir_interop.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/input_limits.hpp"
#include "mlir_private.hpp"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/Extensions/MeshShardingExtensions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/AllInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <filesystem>
#include <numeric>
#include <set>

namespace mgt::mlirio {

bool built_in() { return true; }

namespace import_detail {

// The dialects a model on tensors uses, plus what the mesh passes need (shared/STACK.md §2.2).
mlir::DialectRegistry make_registry() {
  mlir::DialectRegistry r;
  r.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect, mlir::linalg::LinalgDialect,
           mlir::tensor::TensorDialect, mlir::tosa::TosaDialect, mlir::mesh::MeshDialect, mlir::scf::SCFDialect,
           mlir::math::MathDialect>();
  // All linalg interface models, not only the sharding ones: spmdizing a sharded reduction needs the
  // partial-reduction model, and segfaults without it (STACK.md §2.2).
  mlir::linalg::registerAllDialectInterfaceImplementations(r);
  mlir::tosa::registerShardingInterfaceExternalModels(r);
  mlir::func::registerShardingInterfaceExternalModels(r);
  return r;
}

std::string where(mlir::Location loc) {
  if (auto fl = mlir::dyn_cast<mlir::FileLineColLoc>(loc))
    return fl.getFilename().str() + ":" + std::to_string(fl.getLine()) + ":" + std::to_string(fl.getColumn());
  if (auto nl = mlir::dyn_cast<mlir::NameLoc>(loc)) return where(nl.getChildLoc());
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    if (!fused.getLocations().empty()) return where(fused.getLocations().front());
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return os.str();
}

}  // namespace import_detail

// Parses `buffer_text` (named `name` in diagnostics) in `ctx`; throws InputError at MLIR's first
// error with its location. Shared by import and the exporter's self-check.
mlir::OwningOpRef<mlir::ModuleOp> parse_module(mlir::MLIRContext& ctx, std::unique_ptr<llvm::MemoryBuffer> buffer,
                                               const std::string& name) {
  std::vector<std::pair<std::string, std::string>> errors;  // (location, message)
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error) errors.emplace_back(import_detail::where(d.getLocation()), d.str());
    return mlir::success();
  });
  guard_upstream_parser_bugs(std::string_view(buffer->getBufferStart(), buffer->getBufferSize()), name);
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> mod = mlir::parseSourceFile<mlir::ModuleOp>(sm, &ctx);
  if (!mod) {
    if (errors.empty()) errors.emplace_back(name, "MLIR could not parse the file");
    std::string more = errors.size() > 1 ? " (and " + std::to_string(errors.size() - 1) + " more errors)" : "";
    throw ir::InputError(errors[0].first, "", "error: " + errors[0].second + more,
                         "fix the MLIR; mlir-opt-19 " + name + " prints the same diagnostic");
  }
  return mod;
}

void check_module_text(const std::string& text, const std::string& name) {
  parse_module(shared_context(), llvm::MemoryBuffer::getMemBufferCopy(text, name), name);
}

mlir::MLIRContext& shared_context() {
  // Single-threaded: the modules are small, and a context without a thread pool can be used in a
  // forked child (the cross-check test isolates MLIR 19's crashes that way).
  static mlir::MLIRContext ctx(import_detail::make_registry(), mlir::MLIRContext::Threading::DISABLED);
  static const bool loaded = (ctx.loadAllAvailableDialects(), true);
  (void)loaded;
  return ctx;
}

namespace import_detail {

// Union-find over dim nodes: (value, dim) pairs and per-op iteration dims.
struct Dims {
  std::vector<int> parent;
  std::vector<int64_t> size;
  int add(int64_t s) {
    parent.push_back(int(parent.size()));
    size.push_back(s);
    return parent.back();
  }
  int find(int a) { return parent[size_t(a)] == a ? a : parent[size_t(a)] = find(parent[size_t(a)]); }
  void unite(int a, int b) { parent[size_t(find(a))] = find(b); }
};

struct ValueInfo {
  std::string name;
  std::vector<int> dims;  // dim nodes
  bool is_parameter = false;
  bool is_arg = false;
  bool used_as_input = false;
  mlir::Location loc;
};

class Importer {
 public:
  Importer(const std::string& path, const ImportOptions& options) : path_(path), options_(options) {}

  ir::Graph run(mlir::func::FuncOp func) {
    declare_arguments(func);
    for (const std::string& bad : bad_args_)
      throw ir::InputError(path_, "@" + func.getName().str(), "argument " + bad + " is not a static float tensor",
                           "give every argument a static shape and float type, e.g. tensor<8x16xf32>");
    for (mlir::Operation& op : func.getBody().front()) visit(op);
    if (!unsupported_.empty()) {
      std::string list;
      for (size_t i = 0; i < unsupported_.size(); ++i) list += (i ? "; " : "") + unsupported_[i];
      throw ir::InputError(path_, "", std::to_string(unsupported_.size()) + " unsupported op(s): " + list,
                           "mgt imports linalg contractions and elementwise relu/gelu/silu/add, tosa.matmul/add/clamp "
                           "on static f32/bf16/f16 tensors (docs/mlir.md)");
    }
    return build_graph(func);
  }

 private:
  int64_t key(mlir::Value v) const { return int64_t(reinterpret_cast<intptr_t>(v.getAsOpaquePointer())); }

  // Reports `op` once; its results are poisoned so the ops reading them are not reported as well.
  void unsupported(mlir::Operation& op, const std::string& why) {
    for (mlir::Value r : op.getResults()) poisoned_.insert(key(r));
    unsupported_.push_back("'" + op.getName().getStringRef().str() + "' at " + where(op.getLoc()) +
                           (why.empty() ? "" : " (" + why + ")"));
  }

  std::optional<std::vector<int64_t>> static_shape(mlir::Type t) {
    auto rt = mlir::dyn_cast<mlir::RankedTensorType>(t);
    if (!rt || !rt.hasStaticShape() || !mlir::isa<mlir::FloatType>(rt.getElementType())) return std::nullopt;
    return std::vector<int64_t>(rt.getShape().begin(), rt.getShape().end());
  }

  ValueInfo& declare(mlir::Value v, const std::string& name, const std::vector<int64_t>& shape, mlir::Location loc) {
    ValueInfo info{name, {}, false, false, false, loc};
    for (int64_t s : shape) info.dims.push_back(dims_.add(s));
    order_.push_back(key(v));
    return values_.emplace(key(v), std::move(info)).first->second;
  }

  void declare_arguments(mlir::func::FuncOp func) {
    std::set<std::string> params(options_.params.begin(), options_.params.end());
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      mlir::BlockArgument arg = func.getArgument(i);
      std::string name = "arg" + std::to_string(i);
      if (auto n = func.getArgAttrOfType<mlir::StringAttr>(i, "mgt.name")) name = n.getValue().str();
      const auto shape = static_shape(arg.getType());
      if (!shape) {
        bad_args_.push_back(name);
        continue;
      }
      ValueInfo& info = declare(arg, name, *shape, arg.getLoc());
      info.is_arg = true;
      info.is_parameter = func.getArgAttr(i, "mgt.param") != nullptr || params.count(name) > 0 ||
                          params.count("arg" + std::to_string(i)) > 0;
      params.erase(name);
      params.erase("arg" + std::to_string(i));
    }
    if (!params.empty())
      throw ir::InputError("--params", "", "names no argument of @" + func.getName().str() + ": " + *params.begin(),
                           "use the mgt.name attribute of an argument or arg<i> (0-based)");
  }

  // Resolves an operand: looks through mesh.shard aliases; nullptr for destinations/constants.
  ValueInfo* lookup(mlir::Value v) {
    auto alias = aliases_.find(key(v));
    if (alias != aliases_.end()) v = alias->second;
    auto it = values_.find(key(v));
    return it == values_.end() ? nullptr : &it->second;
  }

  bool is_destination(mlir::Value v) {
    auto alias = aliases_.find(key(v));
    if (alias != aliases_.end()) v = alias->second;
    if (destinations_.count(key(v))) return true;
    // An argument is a destination unless something reads it as an input (decided at the end).
    auto it = values_.find(key(v));
    return it != values_.end() && it->second.is_arg;
  }

  void visit(mlir::Operation& op) {
    if (auto shard = mlir::dyn_cast<mlir::mesh::ShardOp>(op)) {
      auto alias = aliases_.find(key(shard.getSrc()));
      aliases_[key(shard.getResult())] = alias != aliases_.end() ? alias->second : shard.getSrc();
      return;
    }
    if (mlir::isa<mlir::mesh::MeshOp, mlir::func::ReturnOp>(op)) {
      if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op))
        for (mlir::Value v : ret.getOperands())
          if (ValueInfo* info = lookup(v)) info->used_as_input = true;
      return;
    }
    if (mlir::isa<mlir::tensor::EmptyOp>(op)) {
      destinations_.insert(key(op.getResult(0)));
      return;
    }
    if (auto c = mlir::dyn_cast<mlir::arith::ConstantOp>(op)) {
      constants_.insert(key(c.getResult()));
      return;
    }
    if (auto fill = mlir::dyn_cast<mlir::linalg::FillOp>(op)) {
      // A zero fill is a fresh destination; any other value would be added to a contraction's result.
      if (!is_float_constant(fill.getInputs()[0], 0.0)) return unsupported(op, "fills with a value other than 0.0");
      destinations_.insert(key(fill.getResult(0)));
      return;
    }
    if (auto lop = mlir::dyn_cast<mlir::linalg::LinalgOp>(op)) return visit_linalg(op, lop);
    if (auto mm = mlir::dyn_cast<mlir::tosa::MatMulOp>(op)) {
      // [n, h, c] x [n, c, w] -> [n, h, w]
      return add_op(op, "contraction", {mm.getA(), mm.getB()}, {{0, 1, 2}, {0, 2, 3}}, {0, 1, 3}, 4);
    }
    if (auto add = mlir::dyn_cast<mlir::tosa::AddOp>(op)) {
      if (add.getInput1().getType() != add.getOutput().getType() || add.getInput2().getType() != add.getOutput().getType())
        return unsupported(op, "broadcasting add");
      return add_op(op, "residual", {add.getInput1(), add.getInput2()}, {}, {}, -1);
    }
    if (auto clamp = mlir::dyn_cast<mlir::tosa::ClampOp>(op)) {
      if (clamp.getMinFp().convertToDouble() != 0.0 || clamp.getMaxFp().convertToDouble() < 3.0e38)
        return unsupported(op, "only clamp(min 0, max >= 3e38), i.e. relu");
      relu_ops_.insert(&op);
      return add_op(op, "activation", {clamp.getInput()}, {}, {}, -1);
    }
    unsupported(op, "");
  }

  // True when `v` is an arith.constant float equal to `value`.
  static bool is_float_constant(mlir::Value v, double value) {
    auto c = v.getDefiningOp<mlir::arith::ConstantOp>();
    auto f = c ? mlir::dyn_cast<mlir::FloatAttr>(c.getValue()) : mlir::FloatAttr();
    return f && f.getValueAsDouble() == value;
  }

  // Body classification of an all-parallel linalg op. Structural, not by op names alone, so that
  // look-alikes are reported rather than mislabelled: relu yields max(x, 0); silu and gelu yield a
  // product or quotient that reads x itself besides exp (silu) or erf/tanh (gelu), so sigmoid and
  // plain tanh are not taken for them; add yields x0 + x1.
  std::string elementwise_kind(mlir::linalg::LinalgOp lop) {
    mlir::Block& body = lop->getRegion(0).front();
    for (mlir::BlockArgument a : body.getArguments().drop_front(lop.getNumDpsInputs()))
      if (!a.use_empty()) return "";  // reads the destination: an accumulation
    auto* yield = body.getTerminator();
    if (yield->getNumOperands() != 1) return "";
    mlir::Operation* last = yield->getOperand(0).getDefiningOp();
    if (!last) return "";
    std::set<std::string> names;
    for (mlir::Operation& o : body.without_terminator())
      if (!mlir::isa<mlir::arith::ConstantOp>(o)) names.insert(o.getName().getStringRef().str());
    const size_t inputs = size_t(lop.getNumDpsInputs());
    if (inputs == 2) {
      const bool adds_args = mlir::isa<mlir::arith::AddFOp>(last) && names.size() == 1 &&
                             last->getOperand(0) != last->getOperand(1) &&
                             mlir::isa<mlir::BlockArgument>(last->getOperand(0)) &&
                             mlir::isa<mlir::BlockArgument>(last->getOperand(1));
      return adds_args ? "residual" : "";
    }
    if (inputs != 1) return "";
    mlir::Value x = body.getArgument(0);
    if (mlir::isa<mlir::arith::MaximumFOp, mlir::arith::MaxNumFOp>(last) && names.size() == 1) {
      const mlir::Value a = last->getOperand(0), b = last->getOperand(1);
      return (a == x && is_float_constant(b, 0.0)) || (b == x && is_float_constant(a, 0.0)) ? "relu" : "";
    }
    if (!mlir::isa<mlir::arith::MulFOp, mlir::arith::DivFOp>(last)) return "";
    int uses = 0;
    for (auto& use : x.getUses()) uses += use.getOwner() != nullptr;
    if (uses < 2) return "";  // x must be read directly besides inside the nonlinearity
    if (names.count("math.erf") || names.count("math.tanh")) return "gelu";
    if (names.count("math.exp")) return "silu";
    return "";
  }

  // Follows single-operand side-effect-free ops up the use-def chain, as MLIR 19's contraction
  // matcher does (LinalgInterfaces.cpp, getSourceSkipUnary).
  static mlir::Value skip_unary(mlir::Value v) {
    mlir::Operation* def = v.getDefiningOp();
    while (def && def->getNumOperands() == 1) {
      auto effects = mlir::dyn_cast<mlir::MemoryEffectOpInterface>(def);
      if (!effects || !effects.hasNoEffect()) break;
      v = def->getOperand(0);
      def = v.getDefiningOp();
    }
    return v;
  }

  // MLIR 19's isContractionBody dereferences the op that defines the yielded value, and the op that
  // defines the value added to the accumulator, without checking that they exist: a body that yields
  // a block argument, or adds the accumulator to an input element, segfaults it (a libFuzzer
  // finding, docs/hardening.md). Such bodies are not multiply-adds; this replays the matcher's steps
  // up to those two lookups and says whether asking MLIR is safe.
  static bool contraction_match_is_safe(mlir::linalg::LinalgOp lop) {
    mlir::Block* body = lop.getBlock();
    if (!body || body->empty() || !body->back().mightHaveTrait<mlir::OpTrait::IsTerminator>()) return true;
    if (body->getNumArguments() != 3) return true;
    mlir::Operation* yield = body->getTerminator();
    if (yield->getNumOperands() != 1) return true;
    mlir::Operation* reduction = skip_unary(yield->getOperand(0)).getDefiningOp();
    if (!reduction) return false;
    if (reduction->getNumResults() != 1 || reduction->getNumOperands() != 2) return true;
    const mlir::Value lhs = skip_unary(reduction->getOperand(0)), rhs = skip_unary(reduction->getOperand(1));
    if (lhs != body->getArgument(2) && rhs != body->getArgument(2)) return true;
    const mlir::Value contributed = skip_unary(mlir::isa<mlir::BlockArgument>(lhs) ? rhs : lhs);
    return contributed.getDefiningOp() != nullptr;
  }

  void visit_linalg(mlir::Operation& op, mlir::linalg::LinalgOp lop) {
    if (!lop.hasPureTensorSemantics() || op.getNumResults() != 1) return unsupported(op, "not a one-result op on tensors");
    std::vector<mlir::Value> inputs;
    for (mlir::OpOperand* o : lop.getDpsInputOperands()) inputs.push_back(o->get());
    const auto maps = lop.getIndexingMapsArray();
    for (const auto& m : maps)
      if (!m.isProjectedPermutation()) return unsupported(op, "indexing map is not a projected permutation");
    std::vector<std::vector<int>> operand_loops;
    for (size_t i = 0; i < maps.size(); ++i) {
      std::vector<int> loops;
      for (mlir::AffineExpr e : maps[i].getResults()) loops.push_back(int(mlir::cast<mlir::AffineDimExpr>(e).getPosition()));
      operand_loops.push_back(loops);
    }
    const std::vector<int> out_loops = operand_loops.back();
    operand_loops.pop_back();
    if (!is_destination(lop.getDpsInits()[0]))
      return unsupported(op, "its outs operand is a computed tensor (accumulation); pass tensor.empty/linalg.fill");
    if (inputs.size() == 2 && contraction_match_is_safe(lop) && mlir::linalg::isaContractionOpInterface(lop))
      return add_op(op, "contraction", inputs, operand_loops, out_loops, int(lop.getNumLoops()));
    if (lop.getNumParallelLoops() != lop.getNumLoops()) return unsupported(op, "a reduction that is not a multiply-add contraction");
    for (const auto& m : maps)
      if (!m.isIdentity()) return unsupported(op, "elementwise op with broadcast or transposed operands");
    const std::string kind = elementwise_kind(lop);
    if (kind.empty()) return unsupported(op, "elementwise body is not relu, gelu, silu or a two-operand add");
    if (kind == "residual") return add_op(op, "residual", inputs, {}, {}, -1);
    (kind == "relu" ? relu_ops_ : kind == "gelu" ? gelu_ops_ : silu_ops_).insert(&op);
    add_op(op, "activation", inputs, {}, {}, -1);
  }

  // Records a graph op. For contractions, operand_loops/out_loops give each dim's loop; for
  // elementwise ops (num_loops < 0) dims tie positionally.
  void add_op(mlir::Operation& op, const std::string& kind, const std::vector<mlir::Value>& inputs,
              const std::vector<std::vector<int>>& operand_loops, const std::vector<int>& out_loops, int num_loops) {
    std::vector<ValueInfo*> in;
    for (mlir::Value v : inputs) {
      auto alias = aliases_.find(key(v));
      if (poisoned_.count(key(alias != aliases_.end() ? alias->second : v))) {
        for (mlir::Value r : op.getResults()) poisoned_.insert(key(r));
        return;
      }
      ValueInfo* info = lookup(v);
      if (!info) {
        const bool constant = constants_.count(key(v)) > 0;
        return unsupported(op, constant ? "reads a constant tensor" : "reads a value mgt did not import");
      }
      in.push_back(info);
    }
    const auto shape = static_shape(op.getResult(0).getType());
    if (!shape) return unsupported(op, "result is not a static float tensor");
    for (ValueInfo* i : in) i->used_as_input = true;
    ValueInfo& out = declare(op.getResult(0), "t" + std::to_string(ops_.size()), *shape, op.getLoc());
    if (num_loops >= 0) {
      std::vector<int> loops;
      for (int l = 0; l < num_loops; ++l) loops.push_back(dims_.add(0));
      for (size_t i = 0; i < in.size(); ++i)
        for (size_t d = 0; d < operand_loops[i].size(); ++d) dims_.unite(in[i]->dims[d], loops[size_t(operand_loops[i][d])]);
      for (size_t d = 0; d < out_loops.size(); ++d) dims_.unite(out.dims[d], loops[size_t(out_loops[d])]);
    } else {
      for (ValueInfo* i : in)
        for (size_t d = 0; d < out.dims.size(); ++d) dims_.unite(i->dims[d], out.dims[d]);
    }
    ops_.push_back({&op, kind, {}, key(op.getResult(0))});
    for (ValueInfo* i : in) ops_.back().inputs.push_back(i);
  }

  ir::Graph build_graph(mlir::func::FuncOp func) {
    // Activation arguments: exactly one is the block input "x".
    std::vector<ValueInfo*> activations;
    for (int64_t k : order_) {
      ValueInfo& v = values_.at(k);
      if (v.is_arg && !v.is_parameter && v.used_as_input) activations.push_back(&v);
    }
    if (activations.size() != 1) {
      std::string names;
      for (ValueInfo* v : activations) names += (names.empty() ? "" : ", ") + v->name;
      throw ir::InputError(path_, "@" + func.getName().str(),
                           "needs exactly one activation argument (the block input), found " +
                               std::to_string(activations.size()) + (names.empty() ? "" : ": " + names),
                           "mark weights with the argument attribute {mgt.param} or list them in --params");
    }
    activations[0]->name = "x";
    // Letters per dim class, in order of first appearance; b and s are reserved for symbolic dims.
    const std::string pool = "ijklmnopqrtuvwxyzacdefgh";
    std::map<int, char> letter;
    ir::Block block;
    block.name = "main";
    block.is_layer = false;
    for (int64_t k : order_) {
      ValueInfo& v = values_.at(k);
      if (v.is_arg && !v.used_as_input) continue;  // destination buffer
      ir::TensorDecl t{v.name, {}, v.is_parameter};
      std::set<char> seen;
      for (size_t d = 0; d < v.dims.size(); ++d) {
        const int cls = dims_.find(v.dims[d]);
        if (!letter.count(cls)) {
          if (letter.size() == pool.size())
            throw ir::InputError(path_, "", "the function has more than " + std::to_string(pool.size()) +
                                                " distinct dims; mgt.graph/1 names dims with single letters",
                                 "split the function");
          letter[cls] = pool[letter.size()];
        }
        if (!seen.insert(letter[cls]).second)
          throw ir::InputError(where(v.loc), "", "dims of '" + v.name + "' are tied to each other through the ops (as in "
                               "self-attention scores q.k^T over one sequence); mgt.graph/1 names each dim of a tensor once",
                               "write the attention so each tensor's dims stay distinct (docs/mlir.md, \"Limits\")");
        t.dims.push_back({letter[cls], dims_.size[size_t(v.dims[d])]});
      }
      block.tensors.push_back(std::move(t));
    }
    for (size_t i = 0; i < ops_.size(); ++i) {
      const PendingOp& p = ops_[i];
      ir::Op op;
      op.name = p.op->getName().stripDialect().str() + std::to_string(i);
      op.output = values_.at(p.result).name;
      std::vector<ValueInfo*> in = p.inputs;
      if (p.kind == "contraction") {
        op.kind = ir::OpKind::contraction;
        // The graph wants the activation first: a weight . activation product is written commuted.
        if (in[0]->is_parameter && !in[1]->is_parameter) std::swap(in[0], in[1]);
        if (in[0]->is_parameter)
          throw ir::InputError(where(p.op->getLoc()), "", "'" + p.op->getName().getStringRef().str() +
                                                              "' multiplies two parameters", "mgt.graph/1 contractions read an activation");
        auto spec = [&](const ValueInfo& v) {
          std::string s;
          for (int d : v.dims) s += letter.at(dims_.find(d));
          return s;
        };
        op.einsum = spec(*in[0]) + "," + spec(*in[1]) + "->" + spec(values_.at(p.result));
      } else if (p.kind == "residual") {
        op.kind = ir::OpKind::residual;
      } else {
        op.kind = ir::OpKind::activation;
        op.activation = relu_ops_.count(p.op) ? ir::ActivationKind::relu
                        : gelu_ops_.count(p.op) ? ir::ActivationKind::gelu
                                                : ir::ActivationKind::silu;
      }
      for (ValueInfo* v : in) op.inputs.push_back(v->name);
      block.ops.push_back(std::move(op));
    }
    if (block.ops.empty()) throw ir::InputError(path_, "", "@" + func.getName().str() + " has no ops to plan");
    ir::Graph g;
    g.info.name = std::filesystem::path(path_).stem().string();
    g.info.architecture = "mlir";
    g.blocks.push_back(std::move(block));
    ir::verify(g, path_);
    return g;
  }

  struct PendingOp {
    mlir::Operation* op;
    std::string kind;
    std::vector<ValueInfo*> inputs;
    int64_t result;
  };

  std::string path_;
  ImportOptions options_;
  Dims dims_;
  std::map<int64_t, ValueInfo> values_;
  std::vector<int64_t> order_;  // declaration order: arguments, then op results
  std::map<int64_t, mlir::Value> aliases_;
  std::set<int64_t> destinations_, constants_, poisoned_;
  std::set<mlir::Operation*> relu_ops_, gelu_ops_, silu_ops_;
  std::vector<PendingOp> ops_;
  std::vector<std::string> unsupported_;
  std::vector<std::string> bad_args_;
};

}  // namespace import_detail

ir::Graph import_mlir(const std::string& path, const ImportOptions& options) {
  // Bounded like every input (a device, FIFO or huge file is refused, not read until memory runs out).
  const std::string text = ir::read_input_file(path);
  mlir::MLIRContext& ctx = shared_context();
  mlir::OwningOpRef<mlir::ModuleOp> mod = parse_module(ctx, llvm::MemoryBuffer::getMemBufferCopy(text, path), path);
  mlir::func::FuncOp func;
  for (auto f : mod->getOps<mlir::func::FuncOp>())
    if (!f.isDeclaration()) {
      func = f;
      break;
    }
  if (!func) throw ir::InputError(path, "", "has no func.func with a body", "import a module with one function");
  return import_detail::Importer(path, options).run(func);
}

}  // namespace mgt::mlirio
