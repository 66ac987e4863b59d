// The schedule executor on the CPU kernels (executor.hpp; docs/runtime_executor.md).
#include "mgt/runtime/executor.hpp"

#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

namespace mgt::rt {

// ---------------------------------------------------------------------------------------------
// Model numerics from the config file

ModelNumerics read_model_numerics(const std::string& model_path) {
  const nlohmann::json doc = ir::read_json_file(model_path);
  ModelNumerics n;
  if (!doc.is_object() || doc.contains("format")) return n;  // mgt.graph/1: defaults
  const auto number = [&](const nlohmann::json& obj, const char* key, double fallback, const std::string& field) {
    if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
    if (!obj.at(key).is_number()) throw ir::InputError(model_path, field, "expected a number");
    return obj.at(key).get<double>();
  };
  for (const char* key : {"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon"}) {
    if (doc.contains(key) && !doc.at(key).is_null()) {
      n.norm_eps = static_cast<float>(number(doc, key, 1e-5, key));
      break;
    }
  }
  n.rope.theta = number(doc, "rope_theta", 10000.0, "rope_theta");
  if (doc.contains("rope_scaling") && !doc.at("rope_scaling").is_null()) {
    const auto& rs = doc.at("rope_scaling");
    if (!rs.is_object()) throw ir::InputError(model_path, "rope_scaling", "expected an object or null");
    std::string type = "default";
    if (rs.contains("rope_type") && rs.at("rope_type").is_string()) type = rs.at("rope_type").get<std::string>();
    else if (rs.contains("type") && rs.at("type").is_string()) type = rs.at("type").get<std::string>();
    if (type == "llama3") {
      n.rope.factor = number(rs, "factor", 0.0, "rope_scaling.factor");
      n.rope.low_freq_factor = number(rs, "low_freq_factor", 1.0, "rope_scaling.low_freq_factor");
      n.rope.high_freq_factor = number(rs, "high_freq_factor", 4.0, "rope_scaling.high_freq_factor");
      n.rope.original_max_position_embeddings = static_cast<int64_t>(
          number(rs, "original_max_position_embeddings", 8192, "rope_scaling.original_max_position_embeddings"));
      if (n.rope.factor <= 0) throw ir::InputError(model_path, "rope_scaling.factor", "llama3 scaling needs factor > 0");
    } else if (type != "default") {
      throw ir::InputError(model_path, "rope_scaling.rope_type", "rope type '" + type + "' is not implemented by the CPU kernels",
                           "supported: default, llama3");
    }
  }
  return n;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Memory accounting: every float the executor allocates goes through a Tensor bound to a Tracker.

struct Tracker {
  int64_t current = 0, peak = 0, step_peak = 0;
  int64_t planned = 0, planned_peak = 0, planned_step_peak = 0;
  void add(int64_t bytes) {
    current += bytes;
    peak = std::max(peak, current);
    step_peak = std::max(step_peak, current);
  }
  void sub(int64_t bytes) { current -= bytes; }
  void add_planned(int64_t bytes) {
    planned += bytes;
    planned_peak = std::max(planned_peak, planned);
    planned_step_peak = std::max(planned_step_peak, planned);
  }
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(Tracker* tracker, int64_t n) : tracker_(tracker), data_(static_cast<size_t>(n), 0.0f) {
    tracker_->add(bytes());
  }
  ~Tensor() { release(); }
  Tensor(Tensor&& o) noexcept : tracker_(o.tracker_), data_(std::move(o.data_)) {
    o.tracker_ = nullptr;
    o.data_ = {};
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      release();
      tracker_ = o.tracker_;
      data_ = std::move(o.data_);
      o.tracker_ = nullptr;
      o.data_ = {};
    }
    return *this;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  int64_t size() const { return static_cast<int64_t>(data_.size()); }

 private:
  int64_t bytes() const { return size() * static_cast<int64_t>(sizeof(float)); }
  void release() {
    if (tracker_) tracker_->sub(bytes());
    tracker_ = nullptr;
    data_ = {};
  }
  Tracker* tracker_ = nullptr;
  std::vector<float> data_;
};

/// A live buffer of the schedule: what the executor really stores under its name.
struct Buffer {
  ir::BufferKind kind = ir::BufferKind::activations;
  int64_t planned_bytes = 0;
  int64_t state_bytes = 0;  ///< model-state buffers (params, grads, optim) counted while live
  std::map<std::string, Tensor> tensors;
};

/// Per graph block: what the interpreter needs to know about its ops, computed once.
struct BlockInfo {
  std::map<std::string, size_t> op_index;
  std::map<std::string, size_t> producer;      ///< activation tensor -> op writing it
  std::map<std::string, size_t> last_reader;   ///< activation tensor -> last op reading it (forward)
  std::set<std::string> needed_by_backward;    ///< activations some op's backward reads
  bool has_input = false;                      ///< declares "x" (the block input)
  std::string output;                          ///< the last op's output ("" for a head)
  size_t first_input_reader = 0;               ///< lowest op index reading "x"
};

using OpKey = std::tuple<std::string, int64_t, int64_t, std::string>;  // block, copy, micro-batch, op


}  // namespace

struct Executor::Impl {
  const ir::Schedule& schedule;
  const ir::Graph& graph;
  ModelState& state;
  ExecutorOptions options;
  Communicator* comm;
  size_t program_index = 0;
  const ir::Program* program = nullptr;

  std::map<std::string, size_t> block_index;
  std::vector<BlockInfo> blocks;
  std::set<OpKey> split_weight;  ///< ops with a separate bwd_weight instruction
  std::set<OpKey> recomputed;    ///< ops with a recompute instruction

  Tracker tracker;
  std::map<std::string, Buffer> live;
  std::map<int64_t, Tensor> fwd_handoff, bwd_handoff;  ///< block boundary tensors, per micro-batch
  std::map<std::pair<int64_t, int64_t>, std::pair<Tensor, Tensor>> rope_tables;  ///< (T, D) -> cos, sin

  // per step
  const StepBatch* batch = nullptr;
  int64_t replica = 0, replicas = 1;
  double loss_sum = 0.0, grad_norm = 0.0;

  // data parallelism (docs/runtime_executor.md "Several ranks")
  int64_t zero = 0;                  ///< ir::zero_stage(plan): 0 (DDP) or 3 (FSDP / HSDP)
  Axes dp_axes{"dp_replicate", "dp_shard"};  ///< the replicas: data split, loss reported over them
  Axes shard_axes;                   ///< FSDP shard group (dp_shard; cp would join it)
  int64_t shards = 1, shard_index = 0;
  std::map<std::string, ShardRange> units;  ///< "block.copy" -> its contiguous range of the flat buffers
  int64_t ddp_reduced = 0;           ///< elements of `grads` all-reduced so far this step (buckets)
  std::string last_scattered;        ///< unit of the latest reduce-scatter (HSDP all-reduce follows it)
  std::vector<float> comm_scratch;

  Impl(const ir::Schedule& s, const ir::Graph& g, ModelState& st, ExecutorOptions o, Communicator* c)
      : schedule(s), graph(g), state(st), options(std::move(o)), comm(c) {}

  // ---- setup ----

  void setup() {
    ir::verify_or_throw(schedule, "schedule");
    if (comm) options.rank = comm->rank();
    const auto p = ir::program_for_rank(schedule, options.rank);
    if (!p) {
      throw ir::InputError("schedule", "programs",
                           "no program for rank " + std::to_string(options.rank) + " of " +
                               std::to_string(schedule.num_gpus));
    }
    program_index = *p;
    program = &schedule.programs[program_index];
    const ir::Plan& plan = schedule.plan;
    if (schedule.num_gpus > 1 && !comm) {
      throw ir::InputError("schedule", "num_gpus",
                           "the schedule has " + std::to_string(schedule.num_gpus) + " ranks but no communicator was given",
                           "run one process per rank under mpirun");
    }
    for (const auto& [name, value] : {std::pair{"tp", plan.tp}, {"cp", plan.cp}, {"ep", plan.ep}}) {
      if (value > 1) {
        throw ir::InputError("schedule", std::string("plan.") + name,
                             std::string(name) + " = " + std::to_string(value) +
                                 ": the CPU executor does not slice tensors for it yet",
                             "use a plan with tp, cp and ep = 1");
      }
    }
    if (plan.pp > 1) {
      throw ir::InputError("schedule", "plan.pp",
                           "pp = " + std::to_string(plan.pp) + ": the CPU executor does not run pipeline stages (send/recv) yet",
                           "use a plan with pp = 1");
    }
    if (state.padded_elements() != state.table().total_elements) {
      throw ir::InputError("model state", "padded_elements", "the executor needs an unpadded ModelState (every rank holds the full layout)");
    }
    replicas = plan.dp_replicate * plan.dp_shard;
    replica = replicas > 1 ? group_rank(schedule.mesh, options.rank, dp_axes) : 0;
    zero = ir::zero_stage(plan);
    if (zero == 1 || zero == 2) {
      throw ir::InputError("schedule", "plan.zero_stage",
                           "ZeRO-" + std::to_string(zero) + " is not implemented by the CPU executor yet",
                           "use zero_stage 0 (DDP) or 3 (FSDP)");
    }
    if (zero == 3) {
      shard_axes = {"dp_shard"};
      shards = plan.dp_shard;
      shard_index = group_rank(schedule.mesh, options.rank, shard_axes);
    }
    for (const ParamEntry& e : state.table().entries) {
      const std::string key = e.block + "." + std::to_string(e.copy);
      auto [it, fresh] = units.try_emplace(key, ShardRange{e.offset, e.offset + e.num_elements});
      if (!fresh) {
        if (e.offset != it->second.end) {
          throw ir::InputError("model state", "layout", "the parameters of " + key + " are not contiguous");
        }
        it->second.end = e.offset + e.num_elements;
      }
    }

    for (size_t b = 0; b < graph.blocks.size(); ++b) {
      const ir::Block& block = graph.blocks[b];
      block_index[block.name] = b;
      BlockInfo info;
      info.has_input = ir::find_tensor(block, "x") != nullptr;
      info.first_input_reader = block.ops.size();
      for (size_t i = 0; i < block.ops.size(); ++i) {
        const ir::Op& op = block.ops[i];
        info.op_index[op.name] = i;
        if (!op.output.empty()) info.producer[op.output] = i;
        for (size_t k = 0; k < op.inputs.size(); ++k) {
          const std::string& in = op.inputs[k];
          const ir::TensorDecl* t = ir::find_tensor(block, in);
          if (!t || t->is_parameter) continue;
          info.last_reader[in] = i;
          if (in == "x") info.first_input_reader = std::min(info.first_input_reader, i);
          bool needed = false;
          switch (op.kind) {
            case ir::OpKind::contraction: needed = (k == 0); break;  // dW needs the activation
            case ir::OpKind::norm: needed = (k == 0); break;
            case ir::OpKind::attention_core: needed = true; break;
            case ir::OpKind::activation: needed = true; break;
            case ir::OpKind::softmax_cross_entropy: needed = true; break;
            default: break;
          }
          if (needed) info.needed_by_backward.insert(in);
        }
      }
      if (!block.ops.empty()) info.output = block.ops.back().output;
      blocks.push_back(std::move(info));
    }
    for (const auto& instr : program->instructions) {
      const auto* c = std::get_if<ir::Compute>(&instr.op);
      if (!c) continue;
      if (c->phase == ir::Phase::bwd_weight) split_weight.insert({c->block, c->layer, c->micro_batch, c->op});
      if (c->phase == ir::Phase::recompute) recomputed.insert({c->block, c->layer, c->micro_batch, c->op});
      if (!block_index.count(c->block)) {
        throw ir::InputError("schedule", "compute", "block '" + c->block + "' is not in the graph (" +
                                                        ir::to_text(instr, program_index) + ")");
      }
    }
  }

  // ---- per-instruction context ----

  struct Ctx {
    const ir::Instruction* instr = nullptr;
    const ir::Compute* c = nullptr;
    const ir::Block* block = nullptr;
    const BlockInfo* info = nullptr;
    const ir::Op* op = nullptr;
    size_t op_index = 0;
    Buffer* buf = nullptr;
    int64_t B = 0, T = 0;
  };

  [[noreturn]] void fail(const ir::Instruction& instr, const std::string& what) const {
    throw std::runtime_error("instruction #" + std::to_string(instr.id) + " (" + ir::to_text(instr, program_index) +
                             "): " + what);
  }
  [[noreturn]] void fail(const Ctx& x, const std::string& what) const { fail(*x.instr, what); }

  int64_t dim_size(const Ctx& x, char name, const ir::TensorDecl* t) const {
    for (const auto& d : x.c->dims)
      if (d.name == name) return d.size;
    if (t)
      for (const auto& d : t->dims)
        if (d.name == name && d.size > 0) return d.size;
    fail(x, std::string("no size for dim '") + name + "'");
  }

  const ir::TensorDecl& decl(const Ctx& x, const std::string& name) const {
    const ir::TensorDecl* t = ir::find_tensor(*x.block, name);
    if (!t) fail(x, "tensor '" + name + "' is not declared in block '" + x.block->name + "'");
    return *t;
  }
  int64_t numel(const Ctx& x, const std::string& name) const {
    const ir::TensorDecl& t = decl(x, name);
    int64_t n = 1;
    for (const auto& d : t.dims) n *= dim_size(x, d.name, &t);
    return n;
  }
  bool is_param(const Ctx& x, const std::string& name) const { return decl(x, name).is_parameter; }

  const ParamEntry& param_entry(const Ctx& x, const std::string& name) const {
    const ParamEntry* e = state.table().find_graph(x.block->name, x.c->layer, name);
    if (!e) fail(x, "parameter '" + name + "' of " + x.block->name + "." + std::to_string(x.c->layer) + " is not in the model state");
    if (e->num_elements != numel(x, name)) {
      fail(x, "parameter '" + name + "' holds " + std::to_string(e->num_elements) + " elements, the op needs " +
                  std::to_string(numel(x, name)));
    }
    return *e;
  }
  float* param(const Ctx& x, const std::string& name) { return state.params().data() + param_entry(x, name).offset; }
  float* param_grad(const Ctx& x, const std::string& name) { return state.grads().data() + param_entry(x, name).offset; }

  /// An activation saved in the copy's buffer; the block input comes from the boundary hand-off.
  Tensor& act(const Ctx& x, const std::string& name) {
    auto it = x.buf->tensors.find(name);
    if (it != x.buf->tensors.end()) return it->second;
    if (name == "x" && x.info->has_input) {
      auto h = fwd_handoff.find(x.c->micro_batch);
      if (h == fwd_handoff.end()) fail(x, "the block input 'x' of micro-batch " + std::to_string(x.c->micro_batch) + " has not been produced");
      if (h->second.size() != numel(x, "x")) fail(x, "the block input 'x' has the wrong size");
      Tensor& t = x.buf->tensors[name] = std::move(h->second);
      fwd_handoff.erase(h);
      return t;
    }
    fail(x, "activation '" + name + "' is not available (not computed, or freed)");
  }
  const float* in(const Ctx& x, const std::string& name) {
    return is_param(x, name) ? param(x, name) : act(x, name).data();
  }
  float* out(const Ctx& x, const std::string& name, const std::string& key = {}) {
    Tensor& t = x.buf->tensors[key.empty() ? name : key] = Tensor(&tracker, numel(x, name));
    return t.data();
  }
  float* scratch_saved(const Ctx& x, const std::string& key, int64_t n) {
    Tensor& t = x.buf->tensors[key] = Tensor(&tracker, n);
    return t.data();
  }
  const float* saved(const Ctx& x, const std::string& key) {
    auto it = x.buf->tensors.find(key);
    if (it == x.buf->tensors.end()) fail(x, "saved tensor '" + key + "' is not available");
    return it->second.data();
  }
  /// The gradient of an activation (created zero) or of a parameter (the grads buffer).
  float* grad(const Ctx& x, const std::string& name) {
    if (is_param(x, name)) return param_grad(x, name);
    const std::string key = "d:" + name;
    auto it = x.buf->tensors.find(key);
    if (it != x.buf->tensors.end()) return it->second.data();
    return (x.buf->tensors[key] = Tensor(&tracker, numel(x, name))).data();
  }
  /// The gradient arriving at an op's output; the block output's comes from the next block copy.
  const float* dout(const Ctx& x, const std::string& name) {
    const std::string key = "d:" + name;
    auto it = x.buf->tensors.find(key);
    if (it != x.buf->tensors.end()) return it->second.data();
    if (name == x.info->output) {
      auto h = bwd_handoff.find(x.c->micro_batch);
      if (h == bwd_handoff.end()) fail(x, "the gradient of the block output '" + name + "' has not been produced");
      Tensor& t = x.buf->tensors[key] = std::move(h->second);
      bwd_handoff.erase(h);
      return t.data();
    }
    fail(x, "the gradient of '" + name + "' is not available");
  }
  void drop(const Ctx& x, const std::string& key) { x.buf->tensors.erase(key); }

  std::pair<const float*, const float*> rope(int64_t T, int64_t D) {
    auto it = rope_tables.find({T, D});
    if (it == rope_tables.end()) {
      Tensor cos(&tracker, T * D / 2), sin(&tracker, T * D / 2);
      cpu::rope_tables(cos.data(), sin.data(), T, D, /*position_offset=*/0, options.numerics.rope);
      it = rope_tables.emplace(std::pair{T, D}, std::pair{std::move(cos), std::move(sin)}).first;
    }
    return {it->second.first.data(), it->second.second.data()};
  }

  // ---- the micro-batch's tokens ----

  const int32_t* tokens(const Ctx& x, const std::vector<int32_t>& rows) const {
    if (x.T != batch->seq_len) {
      fail(x, "the schedule's sequence length " + std::to_string(x.T) + " differs from the batch's " +
                  std::to_string(batch->seq_len));
    }
    const int64_t per_replica = batch->sequences / replicas;
    const int64_t first = replica * per_replica + x.c->micro_batch * x.B;
    if (first + x.B > (replica + 1) * per_replica) {
      fail(x, "micro-batch " + std::to_string(x.c->micro_batch) + " of " + std::to_string(x.B) +
                  " sequences lies outside this replica's " + std::to_string(per_replica) + " of the global batch");
    }
    return rows.data() + first * batch->seq_len;
  }

  // ---- contraction layout: y[N, OC] = x[N, IC] W_hf^T ----

  struct Linear {
    int64_t N = 0, IC = 0, OC = 0;
  };
  Linear linear_shape(const Ctx& x) const {
    const ir::Op& op = *x.op;
    const std::string& spec = op.einsum;
    const auto comma = spec.find(',');
    const auto arrow = spec.find("->");
    std::string a = spec.substr(0, comma);
    std::string rest = spec.substr(comma + 1, arrow - comma - 1);
    const std::string w = rest.substr(0, rest.find(','));
    const std::string o = spec.substr(arrow + 2);
    const auto strip = [](const std::string& s) {
      std::string r;
      for (char ch : s)
        if (!ir::is_symbolic_dim(ch)) r += ch;
      return r;
    };
    std::string w_in, w_out;
    for (char ch : w) (a.find(ch) != std::string::npos ? w_in : w_out) += ch;
    if (a.rfind("bs", 0) != 0 || o.rfind("bs", 0) != 0 || strip(a) != w_in || strip(o) != w_out) {
      fail(x, "contraction '" + spec + "' is not a linear layer in HF layout (activation dims = weight in-dims in order, "
              "output dims = weight out-dims); not implemented");
    }
    if (!is_param(x, op.inputs[1])) fail(x, "contraction of two activations ('" + spec + "') is not implemented");
    const ir::TensorDecl& wd = decl(x, op.inputs[1]);
    Linear l;
    l.N = x.B * x.T;
    l.IC = l.OC = 1;
    for (char ch : w_in) l.IC *= dim_size(x, ch, &wd);
    for (char ch : w_out) l.OC *= dim_size(x, ch, &wd);
    return l;
  }

  // ---- forward ----

  void forward(const Ctx& x, bool recompute) {
    const ir::Op& op = *x.op;
    switch (op.kind) {
      case ir::OpKind::embedding: {
        const ir::TensorDecl& wd = decl(x, op.inputs[0]);
        const int64_t V = wd.dims.empty() ? 0 : dim_size(x, wd.dims[0].name, &wd);
        const int64_t C = numel(x, op.inputs[0]) / V;
        const int32_t* ids = tokens(x, batch->inputs);
        for (int64_t i = 0; i < x.B * x.T; ++i)
          if (ids[i] < 0 || ids[i] >= V) fail(x, "token id " + std::to_string(ids[i]) + " outside the vocabulary of " + std::to_string(V));
        cpu::embedding_forward(out(x, op.output), ids, param(x, op.inputs[0]), x.B * x.T, V, C);
        break;
      }
      case ir::OpKind::norm: {
        const int64_t C = numel(x, op.inputs[1]);
        const int64_t N = numel(x, op.inputs[0]) / C;
        const float* xin = in(x, op.inputs[0]);
        const float* w = in(x, op.inputs[1]);
        float* y = out(x, op.output);
        if (op.norm == ir::NormKind::rms) {
          cpu::rmsnorm_forward(y, scratch_saved(x, op.name + "#rstd", N), xin, w, N, C, options.numerics.norm_eps);
        } else {
          const float* b = op.inputs.size() > 2 ? in(x, op.inputs[2]) : nullptr;
          float* mean = scratch_saved(x, op.name + "#mean", N);
          cpu::layernorm_forward(y, mean, scratch_saved(x, op.name + "#rstd", N), xin, w, b, N, C,
                                 options.numerics.norm_eps);
        }
        break;
      }
      case ir::OpKind::contraction: {
        const Linear l = linear_shape(x);
        const float* b = op.inputs.size() > 2 ? in(x, op.inputs[2]) : nullptr;
        const float* a = in(x, op.inputs[0]);
        const float* w = in(x, op.inputs[1]);
        cpu::linear_forward(out(x, op.output), a, w, b, l.N, l.IC, l.OC);
        break;
      }
      case ir::OpKind::rope: {
        const ir::TensorDecl& t = decl(x, op.inputs[0]);
        const int64_t D = dim_size(x, t.dims.back().name, &t);
        const int64_t heads = numel(x, op.inputs[0]) / (x.B * x.T * D);
        const auto [cos, sin] = rope(x.T, D);
        const float* xin = in(x, op.inputs[0]);
        cpu::rope_forward(out(x, op.output), xin, cos, sin, x.B, x.T, heads, D);
        break;
      }
      case ir::OpKind::attention_core: {
        const cpu::AttentionConfig ac = attention_config(x);
        Tensor scratch(&tracker, cpu::attention_forward_scratch(ac));
        const float *q = in(x, op.inputs[0]), *k = in(x, op.inputs[1]), *v = in(x, op.inputs[2]);
        float* lse = scratch_saved(x, op.name + "#lse", ac.B * ac.H * ac.T);
        cpu::attention_forward(out(x, op.output), lse, q, k, v, ac, scratch.data());
        break;
      }
      case ir::OpKind::activation: {
        const int64_t n = numel(x, op.output);
        if (op.activation == ir::ActivationKind::silu_glu || op.activation == ir::ActivationKind::gelu_glu) {
          if (op.inputs.size() != 2) fail(x, "a gated activation needs gate and up");
          const float *g = in(x, op.inputs[0]), *u = in(x, op.inputs[1]);
          float* y = out(x, op.output);
          if (op.activation == ir::ActivationKind::silu_glu) cpu::swiglu_forward(y, g, u, n);
          else cpu::geglu_forward(y, g, u, n);
        } else if (op.activation == ir::ActivationKind::gelu) {
          const float* a = in(x, op.inputs[0]);
          cpu::gelu_forward(out(x, op.output), a, n);
        } else {
          fail(x, "activation kind of op '" + op.name + "' has no CPU kernel yet (silu_glu, gelu_glu, gelu are done)");
        }
        break;
      }
      case ir::OpKind::residual: {
        const float *a = in(x, op.inputs[0]), *b = in(x, op.inputs[1]);
        cpu::residual_forward(out(x, op.output), a, b, numel(x, op.output));
        break;
      }
      case ir::OpKind::softmax_cross_entropy: {
        if (recompute) break;  // the loss is counted once, in the forward
        const ir::TensorDecl& t = decl(x, op.inputs[0]);
        const int64_t V = dim_size(x, t.dims.back().name, &t);
        const int64_t N = numel(x, op.inputs[0]) / V;
        const int32_t* targets = tokens(x, batch->targets);
        for (int64_t i = 0; i < N; ++i)
          if (targets[i] >= V) fail(x, "target id " + std::to_string(targets[i]) + " outside the vocabulary of " + std::to_string(V));
        loss_sum += cpu::softmax_cross_entropy_forward_backward(nullptr, in(x, op.inputs[0]), targets, N, V,
                                                                batch->sequences * batch->seq_len);
        break;
      }
      default:
        fail(x, "op kind '" + ir::to_string(op.kind) + "' is not implemented by the CPU executor");
    }
  }

  cpu::AttentionConfig attention_config(const Ctx& x) const {
    const ir::Op& op = *x.op;
    const ir::TensorDecl& q = decl(x, op.inputs[0]);
    const ir::TensorDecl& k = decl(x, op.inputs[1]);
    const ir::TensorDecl& v = decl(x, op.inputs[2]);
    if (q.dims.size() != 4 || k.dims.size() != 4 || v.dims.size() != 4) fail(x, "attention expects [b,s,heads,d] operands");
    cpu::AttentionConfig ac;
    ac.B = x.B;
    ac.T = x.T;
    ac.H = dim_size(x, q.dims[2].name, &q);
    ac.KVH = dim_size(x, k.dims[2].name, &k);
    ac.D = dim_size(x, q.dims[3].name, &q);
    if (dim_size(x, k.dims[3].name, &k) != ac.D || dim_size(x, v.dims[3].name, &v) != ac.D) {
      fail(x, "attention with different q/k/v head dims (MLA) is not implemented");
    }
    ac.causal = op.causal;
    ac.window = op.sliding_window;
    return ac;
  }

  // ---- backward: data part (always at bwd_data) and weight part (at bwd_weight when split) ----

  void backward(const Ctx& x, bool data, bool weight) {
    const ir::Op& op = *x.op;
    switch (op.kind) {
      case ir::OpKind::embedding: {
        if (!weight) break;
        const ir::TensorDecl& wd = decl(x, op.inputs[0]);
        const int64_t V = dim_size(x, wd.dims[0].name, &wd);
        const int64_t C = numel(x, op.inputs[0]) / V;
        cpu::embedding_backward(param_grad(x, op.inputs[0]), dout(x, op.output), tokens(x, batch->inputs), x.B * x.T,
                                V, C);
        break;
      }
      case ir::OpKind::norm: {
        // One kernel computes dx and dw together: all of it at bwd_data (a bwd_weight is a no-op).
        if (!data) break;
        const int64_t C = numel(x, op.inputs[1]);
        const int64_t N = numel(x, op.inputs[0]) / C;
        const float* dy = dout(x, op.output);
        const float* xin = in(x, op.inputs[0]);
        const float* w = in(x, op.inputs[1]);
        float* dx = grad(x, op.inputs[0]);
        float* dw = grad(x, op.inputs[1]);
        if (op.norm == ir::NormKind::rms) {
          cpu::rmsnorm_backward(dx, dw, dy, xin, w, saved(x, op.name + "#rstd"), N, C);
        } else {
          float* db = op.inputs.size() > 2 ? grad(x, op.inputs[2]) : nullptr;
          cpu::layernorm_backward(dx, dw, db, dy, xin, w, saved(x, op.name + "#mean"), saved(x, op.name + "#rstd"),
                                  N, C);
        }
        break;
      }
      case ir::OpKind::contraction: {
        const Linear l = linear_shape(x);
        const float* dy = dout(x, op.output);
        const float* a = in(x, op.inputs[0]);
        const float* w = in(x, op.inputs[1]);
        float* dx = data ? grad(x, op.inputs[0]) : nullptr;
        float* dw = weight ? grad(x, op.inputs[1]) : nullptr;
        float* db = weight && op.inputs.size() > 2 ? grad(x, op.inputs[2]) : nullptr;
        cpu::linear_backward(dx, dw, db, dy, a, w, l.N, l.IC, l.OC);
        break;
      }
      case ir::OpKind::rope: {
        if (!data) break;
        const ir::TensorDecl& t = decl(x, op.inputs[0]);
        const int64_t D = dim_size(x, t.dims.back().name, &t);
        const int64_t heads = numel(x, op.inputs[0]) / (x.B * x.T * D);
        const auto [cos, sin] = rope(x.T, D);
        const float* dy = dout(x, op.output);
        cpu::rope_backward(grad(x, op.inputs[0]), dy, cos, sin, x.B, x.T, heads, D);
        break;
      }
      case ir::OpKind::attention_core: {
        if (!data) break;
        const cpu::AttentionConfig ac = attention_config(x);
        Tensor scratch(&tracker, cpu::attention_backward_scratch(ac));
        const float* dy = dout(x, op.output);
        const float *q = in(x, op.inputs[0]), *k = in(x, op.inputs[1]), *v = in(x, op.inputs[2]);
        float* dq = grad(x, op.inputs[0]);
        float* dk = grad(x, op.inputs[1]);
        float* dv = grad(x, op.inputs[2]);
        cpu::attention_backward(dq, dk, dv, dy, q, k, v, saved(x, op.name + "#lse"), ac, scratch.data());
        break;
      }
      case ir::OpKind::activation: {
        if (!data) break;
        const int64_t n = numel(x, op.output);
        const float* dy = dout(x, op.output);
        if (op.activation == ir::ActivationKind::silu_glu || op.activation == ir::ActivationKind::gelu_glu) {
          const float *g = in(x, op.inputs[0]), *u = in(x, op.inputs[1]);
          float* dg = grad(x, op.inputs[0]);
          float* du = grad(x, op.inputs[1]);
          if (op.activation == ir::ActivationKind::silu_glu) cpu::swiglu_backward(dg, du, dy, g, u, n);
          else cpu::geglu_backward(dg, du, dy, g, u, n);
        } else {
          const float* a = in(x, op.inputs[0]);
          cpu::gelu_backward(grad(x, op.inputs[0]), dy, a, n);
        }
        break;
      }
      case ir::OpKind::residual: {
        if (!data) break;
        const float* dy = dout(x, op.output);
        float* da = grad(x, op.inputs[0]);
        float* db = grad(x, op.inputs[1]);
        cpu::residual_backward(da, db, dy, numel(x, op.output));
        break;
      }
      case ir::OpKind::softmax_cross_entropy: {
        if (!data) break;
        // dlogits written in place over the saved logits (the kernel allows it); the tensor becomes d:logits.
        const std::string& name = op.inputs[0];
        const ir::TensorDecl& t = decl(x, name);
        const int64_t V = dim_size(x, t.dims.back().name, &t);
        const int64_t N = numel(x, name) / V;
        Tensor logits = std::move(act(x, name));
        drop(x, name);
        cpu::softmax_cross_entropy_forward_backward(logits.data(), logits.data(), tokens(x, batch->targets), N, V,
                                                    batch->sequences * batch->seq_len);
        x.buf->tensors["d:" + name] = std::move(logits);
        break;
      }
      default:
        fail(x, "op kind '" + ir::to_string(op.kind) + "' is not implemented by the CPU executor");
    }
  }

  // ---- instructions ----

  void run_compute(const ir::Instruction& instr, const ir::Compute& c) {
    Ctx x;
    x.instr = &instr;
    x.c = &c;
    const size_t b = block_index.at(c.block);
    x.block = &graph.blocks[b];
    x.info = &blocks[b];
    auto oi = x.info->op_index.find(c.op);
    if (oi == x.info->op_index.end()) fail(instr, "op '" + c.op + "' is not in block '" + c.block + "'");
    x.op_index = oi->second;
    x.op = &x.block->ops[x.op_index];
    if (c.layer < 0 || c.layer >= x.block->repeat) fail(instr, "copy " + std::to_string(c.layer) + " out of range");
    if (c.buffers.empty()) fail(instr, "a compute instruction needs its activation buffer");
    auto bi = live.find(c.buffers.front());
    if (bi == live.end()) fail(instr, "buffer '" + c.buffers.front() + "' is not allocated");
    x.buf = &bi->second;
    x.B = dim_size(x, 'b', nullptr);
    x.T = dim_size(x, 's', nullptr);
    const OpKey key{c.block, c.layer, c.micro_batch, c.op};
    const ir::Op& op = *x.op;

    switch (c.phase) {
      case ir::Phase::fwd: {
        forward(x, /*recompute=*/false);
        // Drop what neither a later forward op nor a backward needs (unless recomputed later).
        for (const auto& name : op.inputs) {
          auto lr = x.info->last_reader.find(name);
          if (lr == x.info->last_reader.end() || lr->second != x.op_index) continue;
          bool keep = x.info->needed_by_backward.count(name) > 0;
          auto pr = x.info->producer.find(name);
          if (keep && pr != x.info->producer.end() &&
              recomputed.count({c.block, c.layer, c.micro_batch, x.block->ops[pr->second].name})) {
            keep = false;
          }
          if (!keep) drop(x, name);
        }
        if (!op.output.empty() && op.output == x.info->output) {  // block output: hand to the next copy
          auto it = x.buf->tensors.find(op.output);
          fwd_handoff[c.micro_batch] = std::move(it->second);
          x.buf->tensors.erase(it);
        }
        break;
      }
      case ir::Phase::recompute: {
        forward(x, /*recompute=*/true);
        if (!op.output.empty() && op.output == x.info->output) drop(x, op.output);
        break;
      }
      case ir::Phase::bwd_data:
      case ir::Phase::bwd_weight: {
        const bool split = split_weight.count(key) > 0;
        const bool data = c.phase == ir::Phase::bwd_data;
        const bool weight = c.phase == ir::Phase::bwd_weight || !split;
        backward(x, data, weight);
        if (weight && !op.output.empty()) drop(x, "d:" + op.output);  // consumed
        if (data && x.info->has_input && x.op_index == x.info->first_input_reader) {
          auto it = x.buf->tensors.find("d:x");
          if (it != x.buf->tensors.end()) {  // the block input's gradient is complete: hand it back
            bwd_handoff[c.micro_batch] = std::move(it->second);
            x.buf->tensors.erase(it);
          }
        }
        break;
      }
    }
  }

  void run_alloc(const ir::Instruction& instr, const ir::Alloc& a) {
    if (live.count(a.buffer)) fail(instr, "buffer '" + a.buffer + "' is already allocated");
    Buffer& b = live[a.buffer];
    b.kind = a.kind;
    b.planned_bytes = a.bytes;
    tracker.add_planned(a.bytes);
    const auto n = static_cast<int64_t>(sizeof(float)) * state.padded_elements();
    if (a.kind == ir::BufferKind::parameters) b.state_bytes = n;
    if (a.kind == ir::BufferKind::gradients && a.buffer == "grads") b.state_bytes = n;
    if (a.kind == ir::BufferKind::optimizer) b.state_bytes = 2 * n;
    tracker.add(b.state_bytes);
  }

  void run_free(const ir::Instruction& instr, const ir::Free& f) {
    auto it = live.find(f.buffer);
    if (it == live.end()) fail(instr, "buffer '" + f.buffer + "' is not allocated");
    tracker.sub(it->second.state_bytes);
    tracker.planned -= it->second.planned_bytes;
    live.erase(it);
  }

  void run_optimizer(const ir::Instruction& instr, const ir::OptimizerStep& o) {
    const int64_t n = state.table().total_elements;
    float* g = state.grads().data();
    if (zero == 0) {
      if (o.param_elements != n) {
        fail(instr, "the step updates " + std::to_string(o.param_elements) + " elements but this rank holds all " +
                        std::to_string(n));
      }
      grad_norm = std::sqrt(cpu::grad_sum_squares(g, n));
      const float coef = cpu::grad_clip_coefficient(grad_norm, options.grad_clip);
      if (coef < 1.0f) cpu::scale_in_place(g, n, coef);
      state.step += 1;
      cpu::adamw_step(state.params().data(), g, state.adam_m().data(), state.adam_v().data(), n, state.step,
                      options.adamw);
      return;
    }
    // FSDP: this rank owns its shard of every unit; the norm is summed over the shard group.
    double sq = 0.0;
    for (const auto& [name, u] : units) {
      const ShardRange r = owned(u);
      if (r.size() > 0) sq += cpu::grad_sum_squares(g + r.begin, r.size());
    }
    grad_norm = std::sqrt(sum_over(sq, shard_axes));
    const float coef = cpu::grad_clip_coefficient(grad_norm, options.grad_clip);
    state.step += 1;
    for (const auto& [name, u] : units) {
      const ShardRange r = owned(u);
      if (r.size() <= 0) continue;
      if (coef < 1.0f) cpu::scale_in_place(g + r.begin, r.size(), coef);
      cpu::adamw_step(state.params().data() + r.begin, g + r.begin, state.adam_m().data() + r.begin,
                      state.adam_v().data() + r.begin, r.size(), state.step, options.adamw);
    }
  }

  // ---- data parallelism ----

  /// This rank's FSDP shard of a unit: the shard_index-th of `shards` equal chunks (the last clipped).
  ShardRange owned(const ShardRange& u) const {
    const int64_t chunk = padded_size(u.size(), shards) / shards;
    const int64_t b = std::min(u.end, u.begin + shard_index * chunk);
    return {b, std::min(u.end, b + chunk)};
  }

  /// Sum of a double over a group, exactly enough for reporting: sent as two floats (hi + lo).
  double sum_over(double value, const Axes& axes) {
    if (!comm || comm->group_size(axes) <= 1) return value;
    float v[2];
    v[0] = static_cast<float>(value);
    v[1] = static_cast<float>(value - static_cast<double>(v[0]));
    comm->all_reduce(v, v, 2, axes);
    return static_cast<double>(v[0]) + static_cast<double>(v[1]);
  }

  const ShardRange& unit_of(const ir::Instruction& instr, const std::string& buffer) const {
    // "w[block.copy]" / "g[block.copy]"
    if (buffer.size() < 4 || buffer[1] != '[' || buffer.back() != ']') fail(instr, "buffer '" + buffer + "' names no block copy");
    auto it = units.find(buffer.substr(2, buffer.size() - 3));
    if (it == units.end()) fail(instr, "buffer '" + buffer + "' names a block copy without parameters");
    return it->second;
  }

  void run_collective(const ir::Instruction& instr, const ir::Collective& c) {
    if (c.group_size <= 1) return;
    if (!comm) fail(instr, "a collective over a group of " + std::to_string(c.group_size) + " ranks needs a communicator");
    if (comm->group_size(c.axes) != c.group_size) {
      fail(instr, "the communicator's group over these axes has " + std::to_string(comm->group_size(c.axes)) + " ranks");
    }
    if (!live.count(c.buffer)) fail(instr, "buffer '" + c.buffer + "' is not allocated");
    const int64_t esize = ir::dtype_bytes(c.dtype);  // the CPU executor moves fp32 whatever the dtype
    if (esize <= 0 || c.bytes % esize != 0) fail(instr, "byte count not a multiple of the element size");
    const int64_t count = c.bytes / esize;
    float* g = state.grads().data();
    float* w = state.params().data();
    const int64_t total = state.table().total_elements;
    switch (c.kind) {
      case ir::CollectiveKind::all_reduce: {
        if (c.buffer != "grads") fail(instr, "all-reduce of buffer '" + c.buffer + "' is not implemented");
        if (zero == 0) {
          // DDP bucket: buckets fill in backward order = the flat layout from its end.
          if (ddp_reduced + count > total) fail(instr, "the buckets exceed the " + std::to_string(total) + " gradients");
          float* p = g + (total - ddp_reduced - count);
          comm->all_reduce(p, p, count, c.axes);
          ddp_reduced += count;
        } else {
          // HSDP: the shard of the unit just reduce-scattered, over dp_replicate.
          if (last_scattered.empty()) fail(instr, "an HSDP all-reduce before any reduce-scatter");
          const ShardRange r = owned(units.at(last_scattered));
          const int64_t chunk = padded_size(units.at(last_scattered).size(), shards) / shards;
          if (count != chunk) fail(instr, "expected the " + std::to_string(chunk) + "-element shard of " + last_scattered);
          comm_scratch.assign(static_cast<size_t>(chunk), 0.0f);
          std::copy(g + r.begin, g + r.end, comm_scratch.begin());
          comm->all_reduce(comm_scratch.data(), comm_scratch.data(), chunk, c.axes);
          std::copy(comm_scratch.begin(), comm_scratch.begin() + r.size(), g + r.begin);
        }
        break;
      }
      case ir::CollectiveKind::all_gather: {
        // FSDP: the unit's parameters from every shard into the (full-layout) parameter buffer.
        const ShardRange& u = unit_of(instr, c.buffer);
        if (count != u.size()) fail(instr, "the unit holds " + std::to_string(u.size()) + " parameters, the gather " + std::to_string(count));
        const int64_t chunk = padded_size(u.size(), shards) / shards;
        const ShardRange r = owned(u);
        comm_scratch.assign(static_cast<size_t>(chunk * (shards + 1)), 0.0f);
        float* send = comm_scratch.data() + chunk * shards;
        std::copy(w + r.begin, w + r.end, send);
        comm->all_gather(send, comm_scratch.data(), chunk, c.axes);
        std::copy(comm_scratch.begin(), comm_scratch.begin() + u.size(), w + u.begin);
        break;
      }
      case ir::CollectiveKind::reduce_scatter: {
        // FSDP: the unit's local gradients summed over the shard group into this rank's shard; the
        // rest zeroed, so later micro-batches accumulate on top of the reduced shard exactly.
        const ShardRange& u = unit_of(instr, c.buffer);
        if (count != u.size()) fail(instr, "the unit holds " + std::to_string(u.size()) + " gradients, the reduce-scatter " + std::to_string(count));
        const int64_t chunk = padded_size(u.size(), shards) / shards;
        const ShardRange r = owned(u);
        comm_scratch.assign(static_cast<size_t>(chunk * (shards + 1)), 0.0f);
        std::copy(g + u.begin, g + u.end, comm_scratch.begin());
        float* recv = comm_scratch.data() + chunk * shards;
        comm->reduce_scatter(comm_scratch.data(), recv, chunk, c.axes);
        std::fill(g + u.begin, g + u.end, 0.0f);
        std::copy(recv, recv + r.size(), g + r.begin);
        last_scattered = c.buffer.substr(2, c.buffer.size() - 3);
        break;
      }
      default:
        fail(instr, "collective kind '" + ir::to_string(c.kind) + "' is not implemented by the CPU executor yet (tp, cp, ep)");
    }
  }

  void run(const ir::Instruction& instr) {
    std::visit(
        [&](const auto& p) {
          using T = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<T, ir::Compute>) {
            run_compute(instr, p);
          } else if constexpr (std::is_same_v<T, ir::Alloc>) {
            run_alloc(instr, p);
          } else if constexpr (std::is_same_v<T, ir::Free>) {
            run_free(instr, p);
          } else if constexpr (std::is_same_v<T, ir::OptimizerStep>) {
            run_optimizer(instr, p);
          } else if constexpr (std::is_same_v<T, ir::Wait>) {
            // Single-threaded in program order: instruction `on` has already finished.
          } else if constexpr (std::is_same_v<T, ir::Collective>) {
            run_collective(instr, p);
          } else {  // Send, Recv
            fail(instr, comm ? "point-to-point transfers (pp) are not implemented by the CPU executor yet"
                             : "a send/recv needs a communicator");
          }
        },
        instr.op);
  }

  void synchronize_state() {
    if (zero != 3 || shards <= 1) return;
    // FSDP: every unit's owned shard of params, m and v gathered over the shard group.
    for (const auto& [name, u] : units) {
      const int64_t chunk = padded_size(u.size(), shards) / shards;
      const ShardRange r = owned(u);
      for (std::span<float> buf : {state.params(), state.adam_m(), state.adam_v()}) {
        comm_scratch.assign(static_cast<size_t>(chunk * (shards + 1)), 0.0f);
        float* send = comm_scratch.data() + chunk * shards;
        std::copy(buf.data() + r.begin, buf.data() + r.end, send);
        comm->all_gather(send, comm_scratch.data(), chunk, shard_axes);
        std::copy(comm_scratch.begin(), comm_scratch.begin() + u.size(), buf.data() + u.begin);
      }
    }
  }

  StepStats step(const StepBatch& b) {
    const auto start = std::chrono::steady_clock::now();
    if (b.sequences % replicas != 0) {
      throw std::runtime_error("global batch of " + std::to_string(b.sequences) + " sequences does not split over " +
                               std::to_string(replicas) + " data-parallel replicas");
    }
    const int64_t per_replica = b.sequences / replicas;
    const int64_t expected = schedule.plan.micro_batch * schedule.plan.grad_accum.value_or(1);
    if (per_replica != expected) {
      throw std::runtime_error("the schedule runs " + std::to_string(schedule.plan.grad_accum.value_or(1)) +
                               " micro-batches of " + std::to_string(schedule.plan.micro_batch) +
                               " sequences per replica, but the batch gives each replica " + std::to_string(per_replica) +
                               " (hint: lower with the same global batch)");
    }
    batch = &b;
    loss_sum = 0.0;
    grad_norm = 0.0;
    ddp_reduced = 0;
    last_scattered.clear();
    tracker.step_peak = tracker.current;
    tracker.planned_step_peak = tracker.planned;
    std::fill(state.grads().begin(), state.grads().end(), 0.0f);
    std::vector<InstructionTiming> timeline;
    if (options.record_timeline) timeline.reserve(program->instructions.size());
    for (const auto& instr : program->instructions) {
      if (!options.record_timeline) {
        run(instr);
        continue;
      }
      const double t0 = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      run(instr);
      const double t1 = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      timeline.push_back({instr.id, t0, t1});
    }
    std::string leftovers;
    for (const auto& [name, buf] : live) leftovers += " " + name;
    if (!fwd_handoff.empty() || !bwd_handoff.empty()) leftovers += " (block boundary tensors)";
    live.clear();
    fwd_handoff.clear();
    bwd_handoff.clear();
    batch = nullptr;
    if (!leftovers.empty()) throw std::runtime_error("the program left buffers live at its end:" + leftovers);
    if (zero == 0 && replicas > 1 && ddp_reduced != state.table().total_elements) {
      throw std::runtime_error("the schedule's DDP buckets all-reduced " + std::to_string(ddp_reduced) + " of " +
                               std::to_string(state.table().total_elements) + " gradients");
    }
    StepStats s;
    // Each rank's loss_sum is its tokens' share of the global mean; the report sums them over the
    // replicas (an all-reduce of the executor's own, not a schedule instruction).
    s.loss = sum_over(loss_sum, dp_axes);
    s.grad_norm = grad_norm;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    s.tokens = b.sequences * b.seq_len;
    s.peak_bytes = tracker.step_peak;
    s.planned_peak_bytes = tracker.planned_step_peak;
    s.instructions = static_cast<int64_t>(program->instructions.size());
    s.timeline = std::move(timeline);
    return s;
  }
};

Executor::Executor(const ir::Schedule& schedule, const ir::Graph& graph, ModelState& state, ExecutorOptions options,
                   Communicator* comm)
    : impl_(std::make_unique<Impl>(schedule, graph, state, std::move(options), comm)) {
  impl_->setup();
}

Executor::~Executor() = default;

void Executor::synchronize_state() { impl_->synchronize_state(); }

StepStats Executor::step(const StepBatch& batch) { return impl_->step(batch); }

MemoryStats Executor::memory() const {
  return {impl_->tracker.current, impl_->tracker.peak, impl_->tracker.planned, impl_->tracker.planned_peak};
}

const ir::Program& Executor::program() const { return *impl_->program; }

}  // namespace mgt::rt
