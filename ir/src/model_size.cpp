// Model-wide sizes whose byte counts would overflow (input_limits.hpp; docs/hardening.md "Inputs"):
// every dimension can be within kMaxDimSize and the layer count within kMaxLayers while their product
// (hidden 2^20 x intermediate 2^21 x 65,536 layers: 7e17 parameters) makes the memory terms wrap
// around int64 to 0 or a negative number. Refused once, at load, naming the config fields.
#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/input_limits.hpp"

#include <cstdint>
#include <limits>
#include <set>
#include <string>

namespace mgt::ir {

namespace {

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

// Saturating: a total past int64 reads as int64's maximum, which is over every bound.
int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}
int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}

/// Elements of `t` for one token: the symbolic dims (b, s) count 1.
int64_t elements_per_token(const TensorDecl& t) {
  int64_t n = 1;
  for (const Dim& d : t.dims)
    if (!is_symbolic_dim(d.name)) n = saturating_mul(n, d.size);
  return n;
}

/// A model-wide total of parameter elements (or activation elements per token) and the tensor that
/// contributes the most to it, for the message.
struct Total {
  int64_t elements = 0;
  int64_t largest = -1;
  size_t block = 0, tensor = 0;
};

Total total_of(const Graph& graph, bool parameters) {
  std::set<std::string> tied_copies;
  for (const auto& [first, second] : graph.tied_parameters) tied_copies.insert(second);
  Total total;
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    const Block& block = graph.blocks[b];
    for (size_t t = 0; t < block.tensors.size(); ++t) {
      const TensorDecl& tensor = block.tensors[t];
      if (tensor.is_parameter != parameters || tied_copies.count(block.name + "." + tensor.name)) continue;
      const int64_t contribution = saturating_mul(elements_per_token(tensor), block.repeat);
      total.elements = saturating_add(total.elements, contribution);
      if (contribution > total.largest) total = {total.elements, contribution, b, t};
    }
  }
  return total;
}

/// The config fields of the largest tensor's dims ("hidden_size, intermediate_size"), or, for a graph
/// file, the path of its dims.
std::string fields_of(const Graph& graph, const Total& total) {
  const TensorDecl& tensor = graph.blocks[total.block].tensors[total.tensor];
  std::string fields;
  std::set<std::string> seen;
  for (const Dim& d : tensor.dims) {
    if (is_symbolic_dim(d.name)) continue;
    const auto named = graph.info.dim_sources.find(d.name);
    const std::string field = named != graph.info.dim_sources.end()
                                  ? named->second
                                  : "blocks[" + std::to_string(total.block) + "].tensors[" + std::to_string(total.tensor) +
                                        "].dims." + std::string(1, d.name);
    if (seen.insert(field).second) fields += (fields.empty() ? "" : ", ") + field;
  }
  return fields;
}

/// "its largest tensor, layer.w_up [h 1048576, f 2097152], in a block repeated 65536 times".
std::string largest_text(const Graph& graph, const Total& total) {
  const Block& block = graph.blocks[total.block];
  const TensorDecl& tensor = block.tensors[total.tensor];
  std::string dims;
  for (const Dim& d : tensor.dims)
    if (!is_symbolic_dim(d.name)) dims += (dims.empty() ? "" : ", ") + std::string(1, d.name) + " " + std::to_string(d.size);
  return "its largest tensor, " + block.name + "." + tensor.name + " [" + dims + "], in a block repeated " +
         std::to_string(block.repeat) + " time" + (block.repeat == 1 ? "" : "s");
}

std::string total_text(int64_t n) { return n == kSaturated ? "more than 2^63" : std::to_string(n); }

}  // namespace

void check_model_size(const Graph& graph, const std::string& source) {
  const Total parameters = total_of(graph, true);
  if (parameters.elements > kMaxParameters)
    throw InputError(source, fields_of(graph, parameters),
                     "the model has " + total_text(parameters.elements) + " parameters, more than 2^50 = " +
                         std::to_string(kMaxParameters) + " (" + largest_text(graph, parameters) + ")",
                     "at up to " + std::to_string(kMaxStateBytesPerParameter) +
                         " bytes of training state a parameter, mgt's 64-bit byte counts hold 2^50 parameters, 500 "
                         "times the largest trained model (about 2e12); check these fields");
  const Total activations = total_of(graph, false);
  const int64_t bytes_per_token = saturating_mul(activations.elements, kMaxActivationBytesPerElement);
  if (bytes_per_token > kMaxActivationBytesPerToken)
    throw InputError(source, fields_of(graph, activations),
                     "the activations of one token take " + total_text(bytes_per_token) + " bytes over all blocks, more than 2^40 = " +
                         std::to_string(kMaxActivationBytesPerToken) + " (" + largest_text(graph, activations) + ")",
                     "mgt's 64-bit byte counts multiply this by the tokens of a micro-batch; the largest trained model "
                     "(Llama 3.1 405B) keeps 2^27.3 bytes a token; check these fields");
}

}  // namespace mgt::ir
