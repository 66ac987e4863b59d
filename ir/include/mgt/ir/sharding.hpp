// How one tensor lies on a device mesh, in the terms of MLIR's `mesh` dialect (docs/mlir.md):
// per tensor dim, the mesh axes that split it (outermost first), plus the axes over which each
// device holds only a partial sum. Shared by the planner's role-less sharding search and the MLIR
// exporter, so neither depends on the other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgt::ir {

struct TensorSharding {
  std::vector<std::vector<int>> split_axes;  ///< one entry per tensor dim; {} = not split
  std::vector<int> partial_axes;             ///< axes holding partial sums (summed by an all-reduce)
  bool operator==(const TensorSharding&) const = default;

  /// True when no axis splits any dim and nothing is partial.
  bool is_replicated() const {
    for (const auto& axes : split_axes)
      if (!axes.empty()) return false;
    return partial_axes.empty();
  }
};

/// "[[0], [], [1]]" or "[[], [0]] partial=sum[1]" (MLIR's split-axes notation), for messages and tests.
inline std::string to_string(const TensorSharding& s) {
  auto list = [](const std::vector<int>& axes) {
    std::string out = "[";
    for (size_t i = 0; i < axes.size(); ++i) out += (i ? ", " : "") + std::to_string(axes[i]);
    return out + "]";
  };
  std::string out = "[";
  for (size_t i = 0; i < s.split_axes.size(); ++i) out += (i ? ", " : "") + list(s.split_axes[i]);
  out += "]";
  if (!s.partial_axes.empty()) out += " partial=sum" + list(s.partial_axes);
  return out;
}

}  // namespace mgt::ir
