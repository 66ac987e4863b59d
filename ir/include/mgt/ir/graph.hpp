// The model graph: tensors with named dimensions, ops (einsum contractions plus a small closed set of
// other kinds), grouped into blocks whose repeated copies are stored once. See docs/graph_format.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace mgt::ir {

enum class DType { f32, bf16, f16, fp8 };
int64_t dtype_bytes(DType dtype);
std::string to_string(DType dtype);
/// Parses the names to_string writes ("f32", "bf16", "f16", "fp8"); nullopt otherwise.
std::optional<DType> dtype_from_string(std::string_view text);

/// Dimension names shared by frontends, the estimator and the planner (DESIGN.md, "The IR"):
///   b batch, s sequence, h hidden, a attention heads, k kv heads, d head dim, f ffn,
///   v vocab, e experts. Any other lowercase letter is a model-specific dim that no mesh axis splits.
/// `b` and `s` are symbolic in a Graph (size 0): the plan sets them (micro-batch, sequence length).
struct Dim {
  char name = '?';
  int64_t size = 0;  ///< 0 only for the symbolic `b` and `s`
  bool operator==(const Dim&) const = default;
};

/// Returns true for the dims whose size the plan decides (`b`, `s`).
inline bool is_symbolic_dim(char name) { return name == 'b' || name == 's'; }
/// Dims tensor parallelism splits (Megatron-LM): attention heads, kv heads, ffn, vocabulary.
inline bool is_tensor_parallel_dim(char name) { return name == 'a' || name == 'k' || name == 'f' || name == 'v'; }

struct TensorDecl {
  std::string name;
  std::vector<Dim> dims;  ///< in layout order, e.g. {b,0},{s,0},{h,4096}
  bool is_parameter = false;
  bool operator==(const TensorDecl&) const = default;
};

/// The closed set of op kinds. Contraction carries an einsum spec; the rest have fixed formulas in
/// cost_model (FLOPs, bytes, backward rule) and a fixed operand convention, documented per kind.
enum class OpKind {
  contraction,            ///< inputs {activation, weight[, bias]}; einsum "bsh,hf->bsf"
  embedding,              ///< inputs {ids-free: weight "vh"}; output "bsh" (lookup, no FLOPs)
  norm,                   ///< inputs {x, weight[, bias]}; rms or layer norm over the non-b/s dims of weight
  rope,                   ///< inputs {x}; rotary embedding applied in place semantics (output same dims)
  attention_core,         ///< inputs {q "bsad", k "bskd", v "bske"}; output "bsae"; softmax(qk^T)v
  activation,             ///< inputs {x} or {gate, up} for gated units; elementwise
  residual,               ///< inputs {x, y}; x + y
  router,                 ///< inputs {logits "bse"}; top-k selection and token dispatch bookkeeping
  softmax_cross_entropy,  ///< inputs {logits "bsv"}; output scalar loss; fused softmax + NLL
  /// State-space scan, inputs {x, dt, B, C, A (param), D (param)}, output with x's dims.
  /// Mamba-1 selective scan (chunk_size 0): x, dt "bsf", B, C "bsn", A "fn", D "f".
  /// Mamba-2 SSD (chunk_size > 0): x "bsad" (a heads, d head dim), dt "bsa", B, C "bskn" (k groups),
  /// A "a", D "a". docs/graph_format.md, "State-space layers".
  ssm_scan,
};
std::string to_string(OpKind kind);
OpKind op_kind_from_string(const std::string& text, const std::string& source);

enum class NormKind { rms, layer };
enum class ActivationKind { silu, gelu, relu, silu_glu, gelu_glu };  ///< *_glu: act(gate) * up

struct Op {
  std::string name;
  OpKind kind = OpKind::contraction;
  std::vector<std::string> inputs;  ///< tensor names, in the kind's operand order
  std::string output;               ///< tensor name ("" for the loss)
  std::string einsum;               ///< contraction only: "bsh,hf->bsf" (operands: activation, weight)
  NormKind norm = NormKind::rms;                    ///< norm only
  ActivationKind activation = ActivationKind::silu; ///< activation only
  /// activation only, gated units: the inputs are clamped to this magnitude before the unit (GPT-OSS's
  /// swiglu_limit: gate <= limit, -limit <= up <= limit); 0 = no clamp. Same FLOPs, more passes when a
  /// framework runs the clamp outside its fused kernel (docs/cost-model.md §9).
  double clamp_limit = 0;
  bool causal = true;                               ///< attention_core only
  int64_t sliding_window = 0;                       ///< attention_core only; 0 = full attention
  int64_t top_k = 0;                                ///< router only: experts per token
  int64_t chunk_size = 0;                           ///< ssm_scan only: 0 = Mamba-1, else the SSD chunk
  bool operator==(const Op&) const = default;
};

/// A run of identical layers stored once: cost work is done per Block, never per copy.
/// Tensor names are local to the block; a parameter named in two blocks is two parameters unless
/// listed in Graph::tied_parameters.
struct Block {
  std::string name;
  int64_t repeat = 1;
  std::vector<TensorDecl> tensors;
  std::vector<Op> ops;
  bool is_layer = true;  ///< transformer layer (counts toward num_layers; pipelined and recomputed)
  bool operator==(const Block&) const = default;
};

/// Facts about the model that planning rules quote ("tp=16 must divide num_key_value_heads=8").
struct ModelInfo {
  std::string name;          ///< e.g. "Llama-3.1-8B" (file stem) or the graph's "name"
  std::string architecture;  ///< e.g. "LlamaForCausalLM", or "mgt.graph" for graph JSON
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;  ///< 0 for models without attention
  int64_t num_kv_heads = 0;
  int64_t vocab_size = 0;
  int64_t max_seq_len = 0;          ///< max_position_embeddings; 0 = unbounded
  int64_t num_experts = 0;          ///< 0 for dense models
  int64_t experts_per_token = 0;
  bool has_mla = false;             ///< DeepSeek multi-head latent attention
  /// The config field each named dim comes from, for messages: {'k', "num_key_value_heads"}.
  std::map<char, std::string> dim_sources;
  bool operator==(const ModelInfo&) const = default;
};

struct Graph {
  ModelInfo info;
  std::vector<Block> blocks;  ///< in forward execution order
  /// Pairs {"block.tensor", "block.tensor"} naming one parameter stored twice (tied embeddings);
  /// the second is not counted again.
  std::vector<std::pair<std::string, std::string>> tied_parameters;
  bool operator==(const Graph&) const = default;
};

/// Looks up a tensor by name in a block; nullptr when absent.
const TensorDecl* find_tensor(const Block& block, const std::string& name);

/// Number of elements, with symbolic dims taking `batch` and `seq`.
int64_t num_elements(const TensorDecl& tensor, int64_t batch = 1, int64_t seq = 1);

struct ParamCount {
  int64_t total = 0;   ///< every parameter once (tied ones once)
  int64_t active = 0;  ///< parameters a token touches: routed experts counted top_k of num_experts
};

/// Counts parameters over all blocks times their repeat.
ParamCount count_parameters(const Graph& graph);

/// Checks names resolve, einsum specs agree with operand dims, and dims are positive; throws
/// InputError naming `source` and the offending block/op.
void verify(const Graph& graph, const std::string& source);

}  // namespace mgt::ir
