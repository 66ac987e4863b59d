// Upstream MLIR's own SPMD lowering of an exported module, read back for the cross-check
// (docs/mlir.md, "Cross-check"): sharding-propagation then mesh-spmdization, nested under func.func
// as both are FunctionOpInterface passes (shared/STACK.md §2.2).
#include "mgt/mlir/mlir_interop.hpp"

#include "mlir_private.hpp"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/Dialect/Mesh/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

namespace mgt::mlirio {

namespace upstream_detail {

std::vector<int64_t> shape_of(mlir::Type t) {
  auto rt = mlir::dyn_cast_if_present<mlir::RankedTensorType>(t);
  if (!rt) return {};
  return {rt.getShape().begin(), rt.getShape().end()};
}

template <typename CollectiveOp>
bool record(mlir::Operation& op, const char* kind, std::vector<UpstreamCollective>& out) {
  auto c = mlir::dyn_cast<CollectiveOp>(op);
  if (!c) return false;
  UpstreamCollective u{kind, {}, shape_of(op.getOperand(0).getType()), shape_of(op.getResult(0).getType())};
  for (int16_t a : c.getMeshAxes()) u.axes.push_back(int(a));
  out.push_back(std::move(u));
  return true;
}

}  // namespace upstream_detail

UpstreamResult run_upstream_spmdization(const std::string& module_text) {
  using namespace upstream_detail;
  mlir::MLIRContext& ctx = shared_context();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error) diagnostics += d.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> mod = mlir::parseSourceString<mlir::ModuleOp>(module_text, &ctx);
  if (!mod) throw std::runtime_error("upstream spmdization: the module does not parse: " + diagnostics);
  mlir::PassManager pm(&ctx);
  auto& f = pm.nest<mlir::func::FuncOp>();
  f.addPass(mlir::mesh::createShardingPropagation());
  f.addPass(mlir::mesh::createSpmdization());
  if (mlir::failed(pm.run(*mod))) throw std::runtime_error("upstream spmdization failed: " + diagnostics);
  UpstreamResult result;
  mod->walk([&](mlir::Operation* op) {
    // Only the exported ops: spmdization adds linalg.fill for the neutral init of partial reductions.
    if (mlir::isa<mlir::linalg::GenericOp>(op)) {
      result.op_result_shapes.push_back(shape_of(op->getResult(0).getType()));
      return;
    }
    auto& c = result.collectives;
    record<mlir::mesh::AllReduceOp>(*op, "all_reduce", c) || record<mlir::mesh::AllGatherOp>(*op, "all_gather", c) ||
        record<mlir::mesh::AllSliceOp>(*op, "all_slice", c) || record<mlir::mesh::AllToAllOp>(*op, "all_to_all", c) ||
        record<mlir::mesh::ReduceScatterOp>(*op, "reduce_scatter", c);
  });
  std::string text;
  llvm::raw_string_ostream os(text);
  mod->print(os);
  result.module_text = os.str();
  return result;
}

}  // namespace mgt::mlirio
