// Small pure helpers of layer_cost.cpp: an op's einsum split into operands, a tensor's dim by letter,
// a MoE block's routed-expert count. Internal to the cost model.
#pragma once

#include "mgt/ir/graph.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace mgt::cost::einsum_parts {

struct EinsumSpec {
  std::string lhs, rhs, out;
};

// "bsh,hf->bsf" or, with a bias operand, "bsh,hf,f->bsf" (the bias only adds along output dims, so
// it does not change the contraction's shape).
inline EinsumSpec parse_einsum(const std::string& spec) {
  EinsumSpec s;
  const auto arrow = spec.find("->");
  const auto comma = spec.find(',');
  const auto bias_comma = spec.find(',', comma + 1);
  const auto rhs_end = bias_comma < arrow ? bias_comma : arrow;
  s.lhs = spec.substr(0, comma);
  s.rhs = spec.substr(comma + 1, rhs_end - comma - 1);
  s.out = spec.substr(arrow + 2);
  return s;
}

inline const ir::Dim* find_dim(const ir::TensorDecl& t, char name) {
  for (const auto& d : t.dims)
    if (d.name == name) return &d;
  return nullptr;
}

// Routed experts of a MoE block: the largest expert dim 'e' of its parameters (more than top_k of
// them; a shared expert's weights carry none).
inline int64_t routed_experts(const ir::Block& block, int64_t top_k) {
  int64_t experts = 0;
  for (const auto& t : block.tensors)
    if (const ir::Dim* e = find_dim(t, 'e'); t.is_parameter && e && e->size > top_k) experts = std::max(experts, e->size);
  return experts;
}

}  // namespace mgt::cost::einsum_parts
