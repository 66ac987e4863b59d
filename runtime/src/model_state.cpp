// Flat-buffer model state: parameter table from a Graph (HF names and layouts), sharding arithmetic,
// tensor-parallel slices, plan-independent initialisation, HF weights and checkpoints.
// Layout and conventions: docs/runtime_state.md.
#include "mgt/runtime/model_state.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/runtime/safetensors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <numbers>
#include <set>
#include <unistd.h>

namespace mgt::rt {

namespace {

using ir::InputError;
namespace fs = std::filesystem;

const char* const kSupportedNaming =
    "the runtime names parameters for the dense rotary families: llama, mistral, qwen2, qwen3, phi3, olmo2, gemma2";

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Product of v[from], ..., v[to - 1] (to clamped to v.size()).
int64_t product(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX) {
  const auto first = v.begin() + static_cast<std::ptrdiff_t>(std::min(from, v.size()));
  const auto last = v.begin() + static_cast<std::ptrdiff_t>(std::min(to, v.size()));
  return std::accumulate(first, last, int64_t{1}, std::multiplies<>());
}

/// The HF name of a layer tensor (after "model.layers.<i>."); "" when unknown. The norm names
/// depend on where the family puts its norms: Llama pre-norms (input_layernorm,
/// post_attention_layernorm), OLMo-2 post-norms (post_attention_layernorm,
/// post_feedforward_layernorm), Gemma-2 both (input, post_attention, pre_feedforward, post_feedforward).
std::string hf_layer_suffix(const ir::Block& block, const std::string& t) {
  static const std::map<std::string, std::string> fixed{
      {"wq", "self_attn.q_proj.weight"},     {"bq", "self_attn.q_proj.bias"},
      {"wk", "self_attn.k_proj.weight"},     {"bk", "self_attn.k_proj.bias"},
      {"wv", "self_attn.v_proj.weight"},     {"bv", "self_attn.v_proj.bias"},
      {"wo", "self_attn.o_proj.weight"},     {"bo", "self_attn.o_proj.bias"},
      {"q_norm_w", "self_attn.q_norm.weight"}, {"k_norm_w", "self_attn.k_norm.weight"},
      {"w_gate", "mlp.gate_proj.weight"},    {"b_gate", "mlp.gate_proj.bias"},
      {"w_up", "mlp.up_proj.weight"},        {"b_up", "mlp.up_proj.bias"},
      {"w_down", "mlp.down_proj.weight"},    {"b_down", "mlp.down_proj.bias"},
      {"attn_norm_w", "input_layernorm.weight"}, {"attn_norm_b", "input_layernorm.bias"},
      {"attn_post_norm_w", "post_attention_layernorm.weight"},
      {"mlp_post_norm_w", "post_feedforward_layernorm.weight"}};
  if (const auto it = fixed.find(t); it != fixed.end()) return it->second;
  if (t == "mlp_norm_w" || t == "mlp_norm_b") {
    const bool gemma_style = ir::find_tensor(block, "mlp_post_norm_w") != nullptr;
    return std::string(gemma_style ? "pre_feedforward_layernorm." : "post_attention_layernorm.") +
           (t == "mlp_norm_w" ? "weight" : "bias");
  }
  return "";
}

std::string hf_name(const ir::Block& block, int64_t layer_index, const std::string& t) {
  if (block.name == "embed" && t == "wte") return "model.embed_tokens.weight";
  if (block.name == "head") {
    if (t == "wte") return "model.embed_tokens.weight";
    if (t == "final_norm_w") return "model.norm.weight";
    if (t == "final_norm_b") return "model.norm.bias";
    if (t == "w_lm_head") return "lm_head.weight";
  }
  if (block.name == "layer" && block.is_layer) {
    const std::string suffix = hf_layer_suffix(block, t);
    if (!suffix.empty()) return "model.layers." + std::to_string(layer_index) + "." + suffix;
  }
  return "";
}

/// HF shape and the graph letters on each HF axis for a parameter, from the first op that reads it.
/// Contraction weight: [prod(out dims), prod(in dims)] where in = dims shared with the activation.
/// Embedding table: the graph dims as they are. Norm weights and biases: one flat axis.
void hf_layout(const ir::Block& block, const ir::TensorDecl& t, std::vector<int64_t>& shape,
               std::vector<std::string>& axis_letters, ParamInitKind& init, bool norm_offset) {
  std::string all;
  for (const auto& d : t.dims) all += d.name;
  const auto size_of = [&](char c) {
    for (const auto& d : t.dims)
      if (d.name == c) return d.size;
    return int64_t{1};
  };
  for (const ir::Op& op : block.ops) {
    const auto it = std::find(op.inputs.begin(), op.inputs.end(), t.name);
    if (it == op.inputs.end()) continue;
    const size_t operand = static_cast<size_t>(it - op.inputs.begin());
    if (op.kind == ir::OpKind::contraction && operand == 1) {
      const std::string act = op.einsum.substr(0, op.einsum.find(','));
      std::string in, out;
      for (char c : all) (act.find(c) != std::string::npos ? in : out) += c;
      if (!in.empty() && !out.empty()) {
        axis_letters = {out, in};
        shape = {1, 1};
        for (char c : out) shape[0] *= size_of(c);
        for (char c : in) shape[1] *= size_of(c);
        init = ParamInitKind::normal;
        return;
      }
    }
    if (op.kind == ir::OpKind::embedding) {
      for (const auto& d : t.dims) {
        shape.push_back(d.size);
        axis_letters.push_back(std::string(1, d.name));
      }
      init = ParamInitKind::normal;
      return;
    }
    if (op.kind == ir::OpKind::norm && operand == 1) init = norm_offset ? ParamInitKind::zeros : ParamInitKind::ones;
    else if (operand >= 2) init = ParamInitKind::zeros;  // norm or contraction bias
    else init = ParamInitKind::normal;
    break;
  }
  shape = {1};
  for (const auto& d : t.dims) shape[0] *= d.size;
  axis_letters = {all};
}

void set_tp_split(ParamEntry& e, const std::vector<std::string>& axis_letters) {
  for (const auto& d : e.graph_dims) {
    if (std::string("akfv").find(d.name) == std::string::npos) continue;
    for (size_t axis = 0; axis < axis_letters.size(); ++axis) {
      // Split only when the dim is the major factor of its HF axis, so its blocks are contiguous.
      if (!axis_letters[axis].empty() && axis_letters[axis][0] == d.name) {
        e.tp_axis = static_cast<int>(axis);
        e.tp_dim = d.name;
        e.tp_dim_size = d.size;
      }
    }
    return;
  }
}

// Counter-based generator: splitmix64's finaliser over (seed, name hash, counter).
uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void check_tp(const ParamEntry& e, int64_t tp, int64_t tp_rank) {
  if (tp < 1 || tp_rank < 0 || tp_rank >= tp)
    throw InputError(e.name, "tp", "tp rank " + std::to_string(tp_rank) + " outside [0, " + std::to_string(tp) + ")");
  if (e.tp_axis >= 0 && e.tp_dim_size % tp != 0)
    throw InputError(e.name, "tp", "tp degree " + std::to_string(tp) + " does not divide dim '" +
                                        std::string(1, e.tp_dim) + "' of size " + std::to_string(e.tp_dim_size),
                     "choose a tp that divides the heads, kv heads, ffn and vocab sizes");
}

/// Copies the tp slice between `full` and `local` in the direction `to_local`.
void copy_tp_slice(const ParamEntry& e, int64_t tp, int64_t tp_rank, const float* src, float* dst, bool to_local) {
  if (e.tp_axis < 0) {
    std::copy(src, src + e.num_elements, dst);
    return;
  }
  const auto axis = static_cast<size_t>(e.tp_axis);
  const int64_t outer = product(e.shape, 0, axis);
  const int64_t len = e.shape[axis];
  const int64_t inner = product(e.shape, axis + 1);
  const int64_t local_len = len / tp;
  const int64_t chunk = local_len * inner;  // contiguous elements per outer index
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t full_at = o * len * inner + tp_rank * chunk;
    const int64_t local_at = o * chunk;
    if (to_local) std::copy(src + full_at, src + full_at + chunk, dst + local_at);
    else std::copy(src + local_at, src + local_at + chunk, dst + full_at);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parameter table.

ParamTable ParamTable::from_graph(const ir::Graph& graph) {
  ParamTable table;
  std::set<std::string> tied_second;
  for (const auto& [first, second] : graph.tied_parameters) tied_second.insert(second);
  // Gemma-2 (the only family with norms both before and after each sublayer) stores its RMSNorm
  // weights as w and applies 1 + w, so they start at 0.
  const bool norm_offset = std::any_of(graph.blocks.begin(), graph.blocks.end(), [](const ir::Block& b) {
    return ir::find_tensor(b, "attn_norm_w") && ir::find_tensor(b, "attn_post_norm_w");
  });
  int64_t layer_base = 0;
  for (const ir::Block& block : graph.blocks) {
    for (int64_t copy = 0; copy < block.repeat; ++copy) {
      for (const ir::TensorDecl& t : block.tensors) {
        if (!t.is_parameter || tied_second.count(block.name + "." + t.name)) continue;
        ParamEntry e;
        e.name = hf_name(block, layer_base + copy, t.name);
        if (e.name.empty())
          throw InputError("graph", block.name + "." + t.name, "no Hugging Face name for this parameter", kSupportedNaming);
        e.block = block.name;
        e.copy = copy;
        e.tensor = t.name;
        e.graph_dims = t.dims;
        std::vector<std::string> axis_letters;
        hf_layout(block, t, e.shape, axis_letters, e.init, norm_offset);
        e.num_elements = product(e.shape);
        set_tp_split(e, axis_letters);
        e.offset = table.total_elements;
        table.total_elements += e.num_elements;
        if (!table.by_name_.emplace(e.name, table.entries.size()).second)
          throw InputError("graph", block.name + "." + t.name, "Hugging Face name " + e.name + " given twice");
        table.by_graph_[block.name + "/" + std::to_string(copy) + "/" + t.name] = table.entries.size();
        table.entries.push_back(std::move(e));
      }
    }
    if (block.is_layer) layer_base += block.repeat;
  }
  // The second name of a tied pair resolves to the first's entry.
  for (const auto& [first, second] : graph.tied_parameters) {
    const auto dot1 = first.find('.'), dot2 = second.find('.');
    const auto it = table.by_graph_.find(first.substr(0, dot1) + "/0/" + first.substr(dot1 + 1));
    if (it != table.by_graph_.end())
      table.by_graph_[second.substr(0, dot2) + "/0/" + second.substr(dot2 + 1)] = it->second;
  }
  return table;
}

const ParamEntry* ParamTable::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries[it->second];
}

const ParamEntry* ParamTable::find_graph(const std::string& block, int64_t copy, const std::string& tensor) const {
  const auto it = by_graph_.find(block + "/" + std::to_string(copy) + "/" + tensor);
  return it == by_graph_.end() ? nullptr : &entries[it->second];
}

const ParamEntry& ParamTable::at(const std::string& name) const {
  if (const ParamEntry* e = find(name)) return *e;
  throw InputError("model state", name, "no such parameter", "parameters use Hugging Face names");
}

// ---------------------------------------------------------------------------------------------
// Model state.

ModelState::ModelState(const ir::Graph& graph, int64_t pad_multiple, std::pmr::memory_resource* memory)
    : graph_(graph), table_(ParamTable::from_graph(graph)), params_(memory), grads_(memory), adam_m_(memory),
      adam_v_(memory) {
  const auto n = static_cast<size_t>(padded_size(table_.total_elements, pad_multiple));
  params_.assign(n, 0.0f);
  grads_.assign(n, 0.0f);
  adam_m_.assign(n, 0.0f);
  adam_v_.assign(n, 0.0f);
}

TensorView ModelState::view(std::pmr::vector<float>& buffer, const std::string& name) {
  const ParamEntry& e = table_.at(name);
  return {buffer.data() + e.offset, e.shape, e.num_elements};
}

// ---------------------------------------------------------------------------------------------
// Sharding.

int64_t padded_size(int64_t num_elements, int64_t num_shards) {
  if (num_shards < 1) throw InputError("sharding", "num_shards", "must be >= 1, got " + std::to_string(num_shards));
  return (num_elements + num_shards - 1) / num_shards * num_shards;
}

ShardRange shard_range(int64_t num_elements, int64_t num_shards, int64_t index) {
  const int64_t per = padded_size(num_elements, num_shards) / num_shards;
  if (index < 0 || index >= num_shards)
    throw InputError("sharding", "index", std::to_string(index) + " outside [0, " + std::to_string(num_shards) + ")");
  return {index * per, (index + 1) * per};
}

ShardRange overlap(const ParamEntry& entry, ShardRange range) {
  const int64_t begin = std::max(range.begin, entry.offset) - entry.offset;
  const int64_t end = std::min(range.end, entry.offset + entry.num_elements) - entry.offset;
  return begin < end ? ShardRange{begin, end} : ShardRange{0, 0};
}

// ---------------------------------------------------------------------------------------------
// Tensor-parallel slices.

std::vector<int64_t> tp_local_shape(const ParamEntry& entry, int64_t tp) {
  check_tp(entry, tp, 0);
  std::vector<int64_t> shape = entry.shape;
  if (entry.tp_axis >= 0) shape[static_cast<size_t>(entry.tp_axis)] /= tp;
  return shape;
}

namespace {

/// Throws unless the full and local buffers of a tp slice copy hold the entry's full and tp-local sizes.
void check_tp_buffers(const ParamEntry& entry, int64_t tp, int64_t tp_rank, size_t full_size, size_t local_size) {
  check_tp(entry, tp, tp_rank);
  const int64_t local_n = product(tp_local_shape(entry, tp));
  if (static_cast<int64_t>(full_size) != entry.num_elements || static_cast<int64_t>(local_size) != local_n)
    throw InputError(entry.name, "tp", "buffer sizes " + std::to_string(full_size) + " / " + std::to_string(local_size) +
                                           " differ from " + std::to_string(entry.num_elements) + " / " + std::to_string(local_n));
}

}  // namespace

void gather_tp_slice(const ParamEntry& entry, int64_t tp, int64_t tp_rank, std::span<const float> full,
                     std::span<float> local) {
  check_tp_buffers(entry, tp, tp_rank, full.size(), local.size());
  copy_tp_slice(entry, tp, tp_rank, full.data(), local.data(), /*to_local=*/true);
}

void scatter_tp_slice(const ParamEntry& entry, int64_t tp, int64_t tp_rank, std::span<const float> local,
                      std::span<float> full) {
  check_tp_buffers(entry, tp, tp_rank, full.size(), local.size());
  copy_tp_slice(entry, tp, tp_rank, local.data(), full.data(), /*to_local=*/false);
}

// ---------------------------------------------------------------------------------------------
// Initialisation.

float initial_value(const ParamEntry& entry, int64_t i, const InitOptions& options) {
  if (entry.init == ParamInitKind::ones) return 1.0f;
  if (entry.init == ParamInitKind::zeros) return 0.0f;
  // Box-Muller over two uniforms drawn at counters 2i and 2i+1 of the stream keyed by (seed, name).
  const uint64_t key = mix64(options.seed ^ mix64(fnv1a(entry.name)));
  const uint64_t r1 = mix64(key ^ mix64(2 * static_cast<uint64_t>(i)));
  const uint64_t r2 = mix64(key ^ mix64(2 * static_cast<uint64_t>(i) + 1));
  const double u1 = (static_cast<double>(r1 >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(r2 >> 11) * 0x1.0p-53;          // [0, 1)
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  return static_cast<float>(options.std * z);
}

void init_parameters(const ParamTable& table, const InitOptions& options, ShardRange range, std::span<float> out) {
  if (range.begin < 0 || range.end < range.begin || static_cast<int64_t>(out.size()) != range.size())
    throw InputError("init", "range", "range [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                                          ") does not match an output of " + std::to_string(out.size()) + " elements");
  std::fill(out.begin(), out.end(), 0.0f);
  for (const ParamEntry& e : table.entries) {
    const ShardRange part = overlap(e, range);
    for (int64_t i = part.begin; i < part.end; ++i)
      out[static_cast<size_t>(e.offset + i - range.begin)] = initial_value(e, i, options);
  }
}

void init_parameters(ModelState& state, const InitOptions& options) {
  init_parameters(state.table(), options, {0, state.padded_elements()}, state.params());
  for (auto buffer : {state.grads(), state.adam_m(), state.adam_v()}) std::fill(buffer.begin(), buffer.end(), 0.0f);
  state.step = 0;
}

// ---------------------------------------------------------------------------------------------
// Weights and checkpoints.

namespace {

/// Phi-3 stores q/k/v as one self_attn.qkv_proj.weight [(a + 2k) * d, h] (rows q, then k, then v)
/// and gate/up as one mlp.gate_up_proj.weight [2f, h] (rows gate, then up). For a parameter absent
/// under its own name, finds the fused tensor and the first row of its part; false when none.
bool find_fused_part(const ParamTable& table, const ParamEntry& e, std::string& fused, int64_t& first_row) {
  const auto ends_with = [&](const std::string& s) { return e.name.ends_with(s); };
  const std::string layer = e.name.substr(0, e.name.rfind('.', e.name.rfind('.') - 1) + 1);  // "...N.self_attn."
  const auto rows = [&](const std::string& suffix) {
    const ParamEntry* p = table.find(layer + suffix);
    return p ? p->shape[0] : int64_t{0};
  };
  if (ends_with("self_attn.q_proj.weight") || ends_with("self_attn.k_proj.weight") || ends_with("self_attn.v_proj.weight")) {
    fused = layer + "qkv_proj.weight";
    first_row = ends_with("q_proj.weight") ? 0 : ends_with("k_proj.weight") ? rows("q_proj.weight")
                                                                             : rows("q_proj.weight") + rows("k_proj.weight");
    return true;
  }
  if (ends_with("mlp.gate_proj.weight") || ends_with("mlp.up_proj.weight")) {
    fused = layer + "gate_up_proj.weight";
    first_row = ends_with("gate_proj.weight") ? 0 : rows("gate_proj.weight");
    return true;
  }
  return false;
}

}  // namespace

namespace {

/// Runs `load`, which writes into `state`; if it throws, puts back the parameters, optimizer moments
/// and step it found, so a refused checkpoint leaves nothing half-loaded.
template <typename Load>
auto all_or_nothing(ModelState& state, Load load) {
  const std::vector<float> params(state.params().begin(), state.params().end());
  const std::vector<float> m(state.adam_m().begin(), state.adam_m().end());
  const std::vector<float> v(state.adam_v().begin(), state.adam_v().end());
  const int64_t step = state.step;
  try {
    return load();
  } catch (...) {
    std::copy(params.begin(), params.end(), state.params().begin());
    std::copy(m.begin(), m.end(), state.adam_m().begin());
    std::copy(v.begin(), v.end(), state.adam_v().begin());
    state.step = step;
    throw;
  }
}

/// NaN or infinite weights (a checkpoint saved from a diverged run, a corrupt file) would train on
/// as NaN without a word: refused, naming the file, the tensor and the first bad element.
void check_finite(std::span<const float> values, const std::string& file, const std::string& tensor) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    throw InputError(file, tensor,
                     "element " + std::to_string(i) + " is " + (std::isnan(values[i]) ? "nan" : values[i] > 0 ? "inf" : "-inf") +
                         ": the weights are not finite",
                     "the file comes from a diverged run or is corrupt; load an earlier checkpoint");
  }
}

LoadReport load_hf_weights_into(ModelState& state, const std::string& path) {
  const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(path);
  std::set<std::string> used;
  for (const ParamEntry& e : state.table().entries) {
    const SafetensorsTensor* t = ckpt.find(e.name);
    std::string fused;
    int64_t first_row = 0;
    if (!t && find_fused_part(state.table(), e, fused, first_row) && ckpt.find(fused)) {
      const SafetensorsTensor* f = ckpt.find(fused);
      if (f->shape.size() != 2 || e.shape.size() != 2 || f->shape[1] != e.shape[1] || f->shape[0] < first_row + e.shape[0])
        throw InputError(ckpt.file_of(fused)->path(), fused, "fused shape " + shape_string(f->shape) +
                                                                 " cannot hold " + e.name + " " + shape_string(e.shape) +
                                                                 " at row " + std::to_string(first_row),
                         "the checkpoint does not match config.json");
      std::vector<float> all(static_cast<size_t>(f->num_elements()));
      ckpt.read_f32(fused, all);
      const auto begin = all.begin() + first_row * e.shape[1];
      check_finite({&*begin, static_cast<size_t>(e.num_elements)}, ckpt.file_of(fused)->path(), fused);
      std::copy(begin, begin + e.num_elements, state.param(e.name).data);
      used.insert(fused);
      continue;
    }
    if (!t)
      throw InputError(ckpt.source(), e.name, "missing tensor: the model needs it with shape " + shape_string(e.shape),
                       "the checkpoint must match config.json (Hugging Face parameter names)");
    if (t->shape != e.shape)
      throw InputError(ckpt.file_of(e.name)->path(), e.name,
                       "shape " + shape_string(t->shape) + " differs from the model's " + shape_string(e.shape),
                       "the checkpoint does not match config.json");
    ckpt.read_f32(e.name, state.param(e.name).span());
    check_finite(state.param(e.name).span(), ckpt.file_of(e.name)->path(), e.name);
    used.insert(e.name);
  }
  LoadReport report;
  for (const std::string& name : ckpt.names())
    if (!used.count(name)) report.unused.push_back(name);
  return report;
}

}  // namespace

LoadReport load_hf_weights(ModelState& state, const std::string& path) {
  return all_or_nothing(state, [&] { return load_hf_weights_into(state, path); });
}

void save_checkpoint(const ModelState& state, const std::string& dir, const SaveOptions& options) {
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  const fs::path tmp = target.string() + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) || ec)
    throw InputError(dir, "", "cannot create " + tmp.string() + ": " + ec.message(), "check the parent folder is writable");

  // Group parameters into files of at most max_shard_bytes (a larger tensor gets a file of its own).
  const int64_t elem_bytes = ir::dtype_bytes(options.dtype);
  std::vector<std::vector<const ParamEntry*>> groups(1);
  int64_t group_bytes = 0, total_bytes = 0;
  for (const ParamEntry& e : state.table().entries) {
    const int64_t bytes = e.num_elements * elem_bytes;
    if (!groups.back().empty() && group_bytes + bytes > options.max_shard_bytes) {
      groups.emplace_back();
      group_bytes = 0;
    }
    groups.back().push_back(&e);
    group_bytes += bytes;
    total_bytes += bytes;
  }
  const auto params = state.params();
  const auto span_of = [](std::span<const float> buffer, const ParamEntry& e) {
    return buffer.subspan(static_cast<size_t>(e.offset), static_cast<size_t>(e.num_elements));
  };
  std::map<std::string, std::string> weight_map;
  for (size_t g = 0; g < groups.size(); ++g) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", g + 1, groups.size());
    const std::string file = groups.size() == 1 ? "model.safetensors" : name;
    std::vector<SafetensorsWriteTensor> tensors;
    for (const ParamEntry* e : groups[g]) {
      tensors.push_back({e->name, e->shape, span_of(params, *e)});
      weight_map[e->name] = file;
    }
    write_safetensors((tmp / file).string(), tensors, options.dtype, {{"format", "pt"}});
    fault_point("checkpoint-file");
  }
  if (groups.size() > 1) write_safetensors_index((tmp / "model.safetensors.index.json").string(), weight_map, total_bytes);
  if (options.include_optimizer) {
    std::vector<SafetensorsWriteTensor> tensors;
    for (const ParamEntry& e : state.table().entries) {
      tensors.push_back({"exp_avg." + e.name, e.shape, span_of(state.adam_m(), e)});
      tensors.push_back({"exp_avg_sq." + e.name, e.shape, span_of(state.adam_v(), e)});
    }
    write_safetensors((tmp / "optimizer.safetensors").string(), tensors, ir::DType::f32,
                      {{"format", "mgt.adamw/1"}, {"step", std::to_string(state.step)}});
    fault_point("checkpoint-file");
  }
  // Every file is fsynced; the folder trades names with the previous checkpoint in one step.
  replace_folder_durably(tmp.string(), target.string());
}

namespace {

void load_checkpoint_into(ModelState& state, const std::string& dir) {
  load_hf_weights_into(state, dir);
  std::fill(state.grads().begin(), state.grads().end(), 0.0f);
  const fs::path opt = fs::path(dir) / "optimizer.safetensors";
  std::error_code ec;
  if (!fs::exists(opt, ec)) {
    std::fill(state.adam_m().begin(), state.adam_m().end(), 0.0f);
    std::fill(state.adam_v().begin(), state.adam_v().end(), 0.0f);
    state.step = 0;
    return;
  }
  const SafetensorsFile f = SafetensorsFile::open(opt.string());
  for (const ParamEntry& e : state.table().entries) {
    for (const auto& [prefix, view] : {std::pair{"exp_avg.", state.m(e.name)}, std::pair{"exp_avg_sq.", state.v(e.name)}}) {
      const std::string name = prefix + e.name;
      const SafetensorsTensor* t = f.find(name);
      if (!t) throw InputError(f.path(), name, "missing tensor", "the optimizer state does not match the model");
      if (t->shape != e.shape)
        throw InputError(f.path(), name, "shape " + shape_string(t->shape) + " differs from the model's " + shape_string(e.shape));
      f.read_f32(name, view.span());
      check_finite(view.span(), f.path(), name);
    }
  }
  const auto it = f.metadata().find("step");
  if (it == f.metadata().end()) throw InputError(f.path(), "__metadata__.step", "missing", "save_checkpoint writes it");
  try {
    size_t used = 0;
    state.step = std::stoll(it->second, &used);
    if (used != it->second.size() || state.step < 0) throw std::invalid_argument("step");
  } catch (const std::exception&) {
    throw InputError(f.path(), "__metadata__.step", "expected a non-negative integer, got \"" + it->second + "\"");
  }
}

}  // namespace

void load_checkpoint(ModelState& state, const std::string& dir) {
  all_or_nothing(state, [&] { load_checkpoint_into(state, dir); });
}

}  // namespace mgt::rt
