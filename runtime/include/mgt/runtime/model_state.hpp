// Model state as flat fp32 buffers with named views (llm.c style): parameters, gradients and the
// AdamW moments each live in one buffer of the same layout, so ZeRO/FSDP sharding is offset
// arithmetic. Layout, naming, initialisation and checkpoint files: docs/runtime_state.md.
//
//   ModelState state(ir::load_model("config.json"));
//   init_parameters(state, {.seed = 1});
//   TensorView wq = state.param("model.layers.0.self_attn.q_proj.weight");  // [a*d, h], HF layout
//   ShardRange mine = shard_range(state.table().total_elements, /*num_shards=*/4, /*index=*/rank);
#pragma once

#include "mgt/ir/graph.hpp"

#include <cstdint>
#include <map>
#include <memory_resource>
#include <span>
#include <string>
#include <vector>

namespace mgt::rt {

enum class ParamInitKind { normal, ones, zeros };

/// One parameter of the flat layout. `shape` is the Hugging Face layout, row-major: a linear weight
/// is [out, in] with the graph's out dims flattened in graph order (q_proj: graph "had" -> [a*d, h]).
struct ParamEntry {
  std::string name;            ///< Hugging Face name, e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  ///< HF layout
  int64_t offset = 0;          ///< first element in the flat buffer
  int64_t num_elements = 0;
  std::string block;           ///< graph origin: block name, copy index, local tensor name
  int64_t copy = 0;
  std::string tensor;
  std::vector<ir::Dim> graph_dims;  ///< the graph TensorDecl's dims
  int tp_axis = -1;            ///< axis of `shape` that tensor parallelism splits; -1 = replicated
  char tp_dim = 0;             ///< the graph dim on tp_axis: 'a', 'k', 'f' or 'v' (its major factor)
  int64_t tp_dim_size = 0;     ///< size of tp_dim (tp must divide it)
  ParamInitKind init = ParamInitKind::normal;
};

/// Every parameter of a graph once (tied ones once), in the fixed order: blocks in graph order,
/// copies 0..repeat-1, tensors in declaration order.
struct ParamTable {
  std::vector<ParamEntry> entries;
  int64_t total_elements = 0;

  /// Builds the table; throws InputError naming the block and tensor when a parameter has no
  /// Hugging Face name (supported: the dense rotary families llama, mistral, qwen2, qwen3, phi3,
  /// olmo2, gemma2; not GPT-2, MoE or MLA).
  static ParamTable from_graph(const ir::Graph& graph);
  /// The entry for an HF name; nullptr when absent.
  const ParamEntry* find(const std::string& name) const;
  /// The entry for graph tensor `tensor` of copy `copy` of `block` (a tied second name resolves to
  /// the first); nullptr when it is not a parameter.
  const ParamEntry* find_graph(const std::string& block, int64_t copy, const std::string& tensor) const;
  /// Like find, but throws InputError naming the parameter.
  const ParamEntry& at(const std::string& name) const;

 private:
  std::map<std::string, size_t> by_name_;
  std::map<std::string, size_t> by_graph_;  ///< "block/copy/tensor"
};

/// A named view into one of the flat buffers.
struct TensorView {
  float* data = nullptr;
  std::vector<int64_t> shape;
  int64_t num_elements = 0;
  std::span<float> span() const { return {data, static_cast<size_t>(num_elements)}; }
};

/// Parameters, gradients and AdamW first/second moments, each one flat fp32 buffer of
/// `padded_elements` (total_elements rounded up to `pad_multiple`, the tail zero), same layout.
class ModelState {
 public:
  /// `memory`: where the four buffers live (KernelBackend::memory(): host, or CUDA managed memory).
  explicit ModelState(const ir::Graph& graph, int64_t pad_multiple = 1,
                      std::pmr::memory_resource* memory = std::pmr::get_default_resource());

  const ParamTable& table() const { return table_; }
  const ir::Graph& graph() const { return graph_; }
  int64_t padded_elements() const { return static_cast<int64_t>(params_.size()); }

  std::span<float> params() { return params_; }
  std::span<float> grads() { return grads_; }
  std::span<float> adam_m() { return adam_m_; }
  std::span<float> adam_v() { return adam_v_; }
  std::span<const float> params() const { return params_; }
  std::span<const float> grads() const { return grads_; }
  std::span<const float> adam_m() const { return adam_m_; }
  std::span<const float> adam_v() const { return adam_v_; }

  /// Views by HF name; throw InputError for an unknown name.
  TensorView param(const std::string& name) { return view(params_, name); }
  TensorView grad(const std::string& name) { return view(grads_, name); }
  TensorView m(const std::string& name) { return view(adam_m_, name); }
  TensorView v(const std::string& name) { return view(adam_v_, name); }

  int64_t step = 0;  ///< AdamW steps taken (saved with the optimizer state)

 private:
  TensorView view(std::pmr::vector<float>& buffer, const std::string& name);
  ir::Graph graph_;
  ParamTable table_;
  std::pmr::vector<float> params_, grads_, adam_m_, adam_v_;
};

// ---------------------------------------------------------------------------------------------
// Sharding as offset arithmetic.

/// [begin, end) elements of a flat buffer.
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const ShardRange&) const = default;
};

/// `num_elements` rounded up to a multiple of `num_shards`.
int64_t padded_size(int64_t num_elements, int64_t num_shards);

/// The contiguous 1/num_shards slice that shard `index` owns (ZeRO/FSDP): every shard has
/// padded_size / num_shards elements; the last ones may reach into the padding (end > num_elements).
/// Throws InputError when num_shards < 1 or index is outside [0, num_shards).
ShardRange shard_range(int64_t num_elements, int64_t num_shards, int64_t index);

/// The part of parameter `entry` inside `range`, as [begin, end) offsets within the parameter; an
/// empty range (begin == end) when they do not overlap.
ShardRange overlap(const ParamEntry& entry, ShardRange range);

// ---------------------------------------------------------------------------------------------
// Tensor-parallel slices.

/// Shape of the local slice of `entry` under tensor parallelism of degree `tp` (tp_axis divided).
/// Throws InputError when tp does not divide the size of the split graph dim.
std::vector<int64_t> tp_local_shape(const ParamEntry& entry, int64_t tp);

/// Copies rank `tp_rank`'s slice of `full` (a whole parameter in HF layout) into `local`
/// (tp_local_shape elements): contiguous blocks of tp_axis, the rank-th of tp. Replicated
/// parameters are copied whole. `scatter_tp_slice` is the inverse (writes `local` into `full`).
void gather_tp_slice(const ParamEntry& entry, int64_t tp, int64_t tp_rank, std::span<const float> full,
                     std::span<float> local);
void scatter_tp_slice(const ParamEntry& entry, int64_t tp, int64_t tp_rank, std::span<const float> local,
                      std::span<float> full);

// ---------------------------------------------------------------------------------------------
// Initialisation independent of the plan.

struct InitOptions {
  uint64_t seed = 0;
  double std = 0.02;  ///< HF initializer_range
};

/// The initial value of element `i` of parameter `entry`: normal(0, std) from a counter-based
/// generator keyed by (seed, hash of the HF name, i), or 1 / 0 for norm weights / biases.
float initial_value(const ParamEntry& entry, int64_t i, const InitOptions& options);

/// Writes elements [range.begin, range.end) of the initial flat parameter buffer into `out`
/// (range.size() elements; padding beyond total_elements is 0). Any rank can produce any shard.
void init_parameters(const ParamTable& table, const InitOptions& options, ShardRange range, std::span<float> out);

/// Initialises the whole parameter buffer and zeroes grads, moments and step.
void init_parameters(ModelState& state, const InitOptions& options);

// ---------------------------------------------------------------------------------------------
// Hugging Face weights and checkpoints.

struct LoadReport {
  std::vector<std::string> unused;  ///< tensors in the checkpoint that name no parameter
};

/// Loads every parameter by HF name from a safetensors file, index or folder (F32/BF16/F16 as fp32).
/// Throws InputError naming the checkpoint and parameter when one is missing or its shape differs.
/// For tied embeddings a stored lm_head.weight is ignored (reported as unused). Phi-3's fused
/// self_attn.qkv_proj.weight and mlp.gate_up_proj.weight are split into the separate projections.
LoadReport load_hf_weights(ModelState& state, const std::string& path);

struct SaveOptions {
  ir::DType dtype = ir::DType::f32;       ///< parameters: f32 (bit-exact) or bf16
  int64_t max_shard_bytes = 2'000'000'000;  ///< split model files above this size
  bool include_optimizer = true;            ///< optimizer.safetensors with the AdamW moments and step
};

/// Writes a checkpoint folder atomically (built in "<dir>.tmp-<pid>", then renamed over `dir`):
/// model.safetensors, or model-0000i-of-0000n.safetensors plus model.safetensors.index.json, and
/// optimizer.safetensors ("exp_avg.<name>", "exp_avg_sq.<name>", F32, metadata "step").
void save_checkpoint(const ModelState& state, const std::string& dir, const SaveOptions& options = {});

/// Reads a folder save_checkpoint wrote: parameters, and the optimizer state and step when present.
void load_checkpoint(ModelState& state, const std::string& dir);

}  // namespace mgt::rt
