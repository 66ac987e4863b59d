// Which exported plans MLIR 19's mesh-spmdization cannot lower (mlir_interop.hpp, docs/mlir.md
// "Differences"). MLIR-free, so it builds with and without MLIR.
#include "mgt/mlir/mlir_interop.hpp"

#include <map>

namespace mgt::mlirio {

namespace gaps_detail {

// Mesh axes whose placement differs between two shardings (split on another dim, or only in one).
int split_changes(const ir::TensorSharding& from, const ir::TensorSharding& to, int axes) {
  auto dim_of = [](const ir::TensorSharding& s, int a) {
    for (size_t d = 0; d < s.split_axes.size(); ++d)
      for (int x : s.split_axes[d])
        if (x == a) return int(d);
    return -1;
  };
  int changes = 0;
  for (int a = 0; a < axes; ++a) changes += dim_of(from, a) != dim_of(to, a);
  return changes;
}

}  // namespace gaps_detail

std::vector<std::string> upstream_gaps(const ir::Graph& graph, const MeshAnnotations& ann) {
  std::vector<std::string> gaps;
  const int axes = int(ann.mesh.size());
  if (axes < 2 || graph.blocks.size() != 1 || ann.ops.size() != graph.blocks[0].ops.size()) return gaps;
  std::map<std::string, ir::TensorSharding> raw = ann.inputs;  // what each value's result annotation says
  const auto& ops = graph.blocks[0].ops;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpShardings& s = ann.ops[i];
    for (size_t j = 0; j < ops[i].inputs.size() && j < s.operands.size(); ++j) {
      auto it = raw.find(ops[i].inputs[j]);
      if (it != raw.end() && gaps_detail::split_changes(it->second, s.operands[j], axes) > 1)
        gaps.push_back("op '" + ops[i].name + "' reshards '" + ops[i].inputs[j] + "' by more than one mesh axis");
    }
    bool split = false;
    for (const auto& d : s.raw_result.split_axes) split |= !d.empty();
    if (split && !s.raw_result.partial_axes.empty())
      gaps.push_back("op '" + ops[i].name + "' writes a result that is both split and partial");
    raw[ops[i].output] = s.raw_result;
  }
  return gaps;
}

}  // namespace mgt::mlirio
