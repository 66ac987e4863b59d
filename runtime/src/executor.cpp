// The schedule executor on the CPU kernels (executor.hpp; docs/runtime_executor.md).
#include "mgt/runtime/executor.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/runtime/kernel_backend.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory_resource>
#include <new>
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
  KernelBackend* kernels = nullptr;  ///< where Tensors are allocated and zeroed
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
  /// n zeroed floats from the tracker's kernel backend (host memory, or CUDA managed memory).
  Tensor(Tracker* tracker, int64_t n) : tracker_(tracker), n_(n) {
    if (n_ > 0) {
      data_ = allocate(tracker_->kernels->memory(), n_);
      tracker_->kernels->fill_zero(data_, n_);
    }
    tracker_->add(bytes());
  }
  ~Tensor() { release(); }
  Tensor(Tensor&& o) noexcept : tracker_(o.tracker_), data_(o.data_), n_(o.n_) {
    o.tracker_ = nullptr;
    o.data_ = nullptr;
    o.n_ = 0;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      release();
      tracker_ = o.tracker_;
      data_ = o.data_;
      n_ = o.n_;
      o.tracker_ = nullptr;
      o.data_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  int64_t size() const { return n_; }

 private:
  static constexpr size_t kAlignment = 256;  // cuBLAS / vector loads
  int64_t bytes() const { return n_ * static_cast<int64_t>(sizeof(float)); }
  /// Records the request first, so that an out-of-memory report can give its size.
  static float* allocate(std::pmr::memory_resource* memory, int64_t n) {
    if (__builtin_mul_overflow(n, static_cast<int64_t>(sizeof(float)), &last_request_bytes)) {
      last_request_bytes = INT64_MAX;
      throw std::bad_alloc();
    }
    // Fault injection for tests: MGT_FAULT_OOM_AT=<k> fails the k-th allocation of the process.
    static const char* const oom_at = std::getenv("MGT_FAULT_OOM_AT");
    static int64_t allocations = 0;
    if (oom_at && ++allocations == std::atoll(oom_at)) throw std::bad_alloc();
    return static_cast<float*>(memory->allocate(static_cast<size_t>(last_request_bytes), kAlignment));
  }
  void release() {
    if (tracker_) {
      tracker_->sub(bytes());
      if (data_) tracker_->kernels->memory()->deallocate(data_, static_cast<size_t>(bytes()), kAlignment);
    }
    tracker_ = nullptr;
    data_ = nullptr;
    n_ = 0;
  }
  Tracker* tracker_ = nullptr;
  float* data_ = nullptr;
  int64_t n_ = 0;

 public:
  static inline thread_local int64_t last_request_bytes = 0;  ///< bytes of the latest allocation asked for
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

// ---------------------------------------------------------------------------------------------
// A rank's share of the flat parameter layout: the tensor-parallel slices of the parameters it
// holds, as flat ranges in a fixed "packed" order. FSDP shards and DDP buckets are ranges of that
// packed order, so data parallelism composes with tp and pp by offset arithmetic.

struct Segment {
  int64_t begin = 0;           ///< first element in the flat buffers
  int64_t size = 0;
  bool tp_replicated = false;  ///< a parameter every tp rank holds whole (norm weights)
};

struct Layout {
  std::vector<Segment> segments;
  int64_t size = 0;  ///< packed elements
  void add(Segment s) {
    if (s.size <= 0) return;
    segments.push_back(s);
    size += s.size;
  }
  void append(const Layout& other) {
    for (const Segment& s : other.segments) add(s);
  }
};

/// f(segment, flat_begin, count, offset in `range`) for the part of packed `range` in each segment.
template <typename F>
void for_each_in(const Layout& layout, ShardRange range, F&& f) {
  int64_t pos = 0;
  for (const Segment& s : layout.segments) {
    const int64_t b = std::max(range.begin, pos), e = std::min(range.end, pos + s.size);
    if (b < e) f(s, s.begin + (b - pos), e - b, b - range.begin);
    pos += s.size;
    if (pos >= range.end) break;
  }
}
void pack(const Layout& l, ShardRange r, const float* flat, float* out) {
  for_each_in(l, r, [&](const Segment&, int64_t fb, int64_t n, int64_t o) { std::copy_n(flat + fb, n, out + o); });
}
void unpack(const Layout& l, ShardRange r, const float* in, float* flat) {
  for_each_in(l, r, [&](const Segment&, int64_t fb, int64_t n, int64_t o) { std::copy_n(in + o, n, flat + fb); });
}

/// Where a parameter's tp-local slice lies in the flat buffers: rows x cols with row stride `ld`.
struct ParamRef {
  int64_t offset = 0;
  int64_t rows = 1, cols = 0, ld = 0;
  bool contiguous() const { return ld == cols || rows == 1; }
  int64_t elements() const { return rows * cols; }
};

/// A rank's slice of a parameter (ParamEntry::tp_axis: rows for 0, columns for 1; whole otherwise).
ParamRef tp_slice(const ParamEntry& e, int64_t tp, int64_t tp_rank) {
  ParamRef r;
  r.offset = e.offset;
  r.rows = e.shape.size() >= 2 ? e.shape[0] : 1;
  r.cols = e.num_elements / std::max<int64_t>(1, r.rows);
  r.ld = r.cols;
  if (tp == 1 || e.tp_axis < 0) return r;
  if (e.tp_dim_size % tp != 0) {
    throw ir::InputError("plan", "tp", "tp = " + std::to_string(tp) + " does not divide " + std::string(1, e.tp_dim) + " = " +
                                           std::to_string(e.tp_dim_size) + " of " + e.name,
                         "choose tp dividing the head, kv-head, ffn and vocab counts");
  }
  if (e.tp_axis == 0) {
    const int64_t rows = (e.shape.empty() ? e.num_elements : e.shape[0]) / tp;
    const int64_t inner = e.num_elements / (e.shape.empty() ? e.num_elements : e.shape[0]);
    if (e.shape.size() < 2) {
      r.rows = 1;
      r.cols = rows * inner;
    } else {
      r.rows = rows;
    }
    r.ld = r.cols;
    r.offset = e.offset + tp_rank * rows * inner;
    return r;
  }
  if (e.tp_axis != 1 || e.shape.size() != 2) {
    throw ir::InputError("model state", e.name, "tensor parallelism splits axis " + std::to_string(e.tp_axis) +
                                                    " of a " + std::to_string(e.shape.size()) + "-d parameter; the CPU executor slices rows or columns of matrices only");
  }
  r.cols = e.shape[1] / tp;
  r.ld = e.shape[1];
  r.offset = e.offset + tp_rank * r.cols;
  return r;
}

Layout slice_layout(const ParamEntry& e, int64_t tp, int64_t tp_rank) {
  const ParamRef r = tp_slice(e, tp, tp_rank);
  Layout l;
  const bool replicated = tp > 1 && e.tp_axis < 0;
  if (r.contiguous()) {
    l.add({r.offset, r.elements(), replicated});
  } else {
    for (int64_t i = 0; i < r.rows; ++i) l.add({r.offset + i * r.ld, r.cols, replicated});
  }
  return l;
}

}  // namespace

struct Executor::Impl {
  const ir::Schedule& schedule;
  const ir::Graph& graph;
  ModelState& state;
  ExecutorOptions options;
  Communicator* comm;
  KernelBackend& K;  ///< the kernels (options.kernels, or the CPU's) and where buffers live
  size_t program_index = 0;
  const ir::Program* program = nullptr;

  std::map<std::string, size_t> block_index;
  std::vector<BlockInfo> blocks;
  std::set<OpKey> split_weight;  ///< ops with a separate bwd_weight instruction
  std::set<OpKey> recomputed;    ///< ops with a recompute instruction
  std::map<int64_t, int64_t> anchor_of;  ///< collective with tensors -> the Compute it belongs to

  Tracker tracker;
  std::map<std::string, Buffer> live;
  std::map<int64_t, Tensor> fwd_handoff, bwd_handoff;  ///< block boundary tensors, per micro-batch
  std::map<std::pair<int64_t, int64_t>, std::pair<Tensor, Tensor>> rope_tables;  ///< (T, D) -> cos, sin of the local positions

  // geometry of this rank (docs/runtime_executor.md "Several ranks")
  int64_t tp = 1, tp_rank = 0, cp = 1, cp_rank = 0, pp = 1;
  bool sp = false;  ///< sequence parallel: outside tp regions the sequence is split over tp
  int64_t replica = 0, replicas = 1;
  const Axes dp_axes{"dp_replicate", "dp_shard"};  ///< the replicas: data split
  const Axes loss_axes{"pp", "dp_replicate", "dp_shard", "cp"};  ///< every rank's tokens counted once (not tp)
  Axes norm_axes;      ///< where owned gradients differ: tp, pp (+ the FSDP shard group)
  int64_t zero = 0;    ///< ir::zero_stage(plan): 0 (DDP) or 3 (FSDP / HSDP)
  Axes shard_axes;     ///< FSDP shard group (dp_shard x cp)
  int64_t shards = 1, shard_index = 0;
  std::map<std::string, Layout> units;  ///< "block.copy" on this stage -> its tp-local parameters
  Layout stage_layout;                  ///< every unit of the stage, table order

  // per step
  const StepBatch* batch = nullptr;
  int64_t S = 0, T_cp = 0, T_sp = 0;  ///< sequence; its cp-local part; the sp shard of that
  std::vector<int64_t> cp_pos;        ///< positions of the cp-local sequence (ir::cp_positions)
  std::map<std::pair<int64_t, int>, std::vector<int32_t>> token_cache;  ///< (micro-batch, targets?) -> local tokens
  double loss_sum = 0.0, grad_norm = 0.0;
  int64_t ddp_reduced = 0;     ///< packed elements of the stage all-reduced so far this step (buckets)
  std::string last_scattered;  ///< unit of the latest reduce-scatter (HSDP all-reduce follows it)
  std::pmr::vector<float> comm_scratch{K.memory()}, comm_scratch2{K.memory()};  ///< communicator-visible
  std::pmr::vector<float> sum_scratch = std::pmr::vector<float>(2, 0.0f, K.memory());  ///< sum_over's hi + lo
  struct PendingP2P {
    PointToPoint transfer;
    bool to_fwd = true;  ///< a recv lands in fwd_handoff (else bwd_handoff)
    int64_t micro_batch = 0;
    Tensor tensor;
  };
  std::vector<PendingP2P> pending;  ///< Send/Recv with batch_with_next, issued together

  Impl(const ir::Schedule& s, const ir::Graph& g, ModelState& st, ExecutorOptions o, Communicator* c)
      : schedule(s), graph(g), state(st), options(std::move(o)), comm(c),
        K(options.kernels != nullptr ? *options.kernels : cpu_kernel_backend()) {
    tracker.kernels = &K;
  }

  // ---- setup ----

  int64_t coord(const std::string& axis) const {
    for (const auto& a : schedule.mesh.axes)
      if (a.name == axis) return a.size > 1 ? group_rank(schedule.mesh, options.rank, {axis}) : 0;
    return 0;
  }

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
    if (plan.ep > 1) {
      throw ir::InputError("schedule", "plan.ep",
                           "ep = " + std::to_string(plan.ep) + ": the CPU executor has no MoE kernels (router, experts) yet",
                           "use a dense model and ep = 1");
    }
    if (plan.pp > 1 && !graph.tied_parameters.empty()) {
      throw ir::InputError("schedule", "plan.pp",
                           "pp = " + std::to_string(plan.pp) + " with tied parameters (" + graph.tied_parameters.front().first +
                               " = " + graph.tied_parameters.front().second +
                               "): the CPU executor does not synchronise a tie across pipeline stages yet",
                           "use pp = 1, or a model with untied embeddings");
    }
    if (state.padded_elements() != state.table().total_elements) {
      throw ir::InputError("model state", "padded_elements", "the executor needs an unpadded ModelState (every rank holds the full layout)");
    }
    tp = plan.tp;
    cp = plan.cp;
    pp = plan.pp;
    tp_rank = coord("tp");
    cp_rank = coord("cp");
    sp = tp > 1 && ir::sequence_parallel(plan);
    replicas = plan.dp_replicate * plan.dp_shard;
    replica = replicas > 1 ? group_rank(schedule.mesh, options.rank, dp_axes) : 0;
    zero = ir::zero_stage(plan);
    if (zero == 1 || zero == 2) {
      throw ir::InputError("schedule", "plan.zero_stage",
                           "ZeRO-" + std::to_string(zero) + " is not implemented by the CPU executor yet",
                           "use zero_stage 0 (DDP) or 3 (FSDP)");
    }
    norm_axes = {"pp", "tp"};
    if (zero == 3) {
      for (const char* a : {"dp_shard", "cp"})
        if (ir::group_size(schedule.mesh, {a}) > 1) shard_axes.push_back(a);
      shards = plan.dp_shard * plan.cp;
      shard_index = shards > 1 ? group_rank(schedule.mesh, options.rank, shard_axes) : 0;
      norm_axes.insert(norm_axes.end(), shard_axes.begin(), shard_axes.end());
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
    std::set<std::string> on_stage;
    const auto& instrs = program->instructions;
    for (const auto& instr : instrs) {
      const auto* c = std::get_if<ir::Compute>(&instr.op);
      if (!c) continue;
      if (c->phase == ir::Phase::bwd_weight) split_weight.insert({c->block, c->layer, c->micro_batch, c->op});
      if (c->phase == ir::Phase::recompute) recomputed.insert({c->block, c->layer, c->micro_batch, c->op});
      if (!block_index.count(c->block)) {
        throw ir::InputError("schedule", "compute", "block '" + c->block + "' is not in the graph (" +
                                                        ir::to_text(instr, program_index) + ")");
      }
      on_stage.insert(c->block + "." + std::to_string(c->layer));
    }
    // The stage's parameters, unit by unit in table order (a tied second name is not an entry).
    for (const ParamEntry& e : state.table().entries) {
      const std::string key = e.block + "." + std::to_string(e.copy);
      if (!on_stage.count(key)) continue;
      units[key].append(slice_layout(e, tp, tp_rank));
    }
    for (const ParamEntry& e : state.table().entries) {
      const std::string key = e.block + "." + std::to_string(e.copy);
      if (on_stage.count(key) && units.count(key)) stage_layout.append(slice_layout(e, tp, tp_rank));
    }
    // Each collective that names tensors belongs to one Compute of the block copy its workspace
    // names (ws[block.copy]; any block for "grads"): the one it depends on (issued after it) or the
    // first one that depends on it (issued before it). docs/schedule.md "Tensors".
    for (size_t i = 0; i < instrs.size(); ++i) {
      const auto* c = std::get_if<ir::Collective>(&instrs[i].op);
      if (!c || c->tensors.empty() || c->group_size <= 1) continue;
      const bool ws = c->buffer.rfind("ws[", 0) == 0 && c->buffer.back() == ']';
      const std::string copy = ws ? c->buffer.substr(3, c->buffer.size() - 4) : std::string();
      const auto matches = [&](size_t j) {
        const auto* k = std::get_if<ir::Compute>(&instrs[j].op);
        return k && (!ws || k->block + "." + std::to_string(k->layer) == copy);
      };
      int64_t anchor = -1;
      for (ir::InstrId d : instrs[i].deps)
        if (matches(size_t(d))) anchor = d;
      for (size_t j = i + 1; anchor < 0 && j < instrs.size(); ++j) {
        const auto& deps = instrs[j].deps;
        if (matches(j) && std::find(deps.begin(), deps.end(), instrs[i].id) != deps.end()) anchor = int64_t(j);
      }
      if (anchor < 0) {
        throw ir::InputError("schedule", "programs[" + std::to_string(program_index) + "].instructions[" + std::to_string(i) + "]",
                             "a collective naming tensors is neither after a Compute nor before one (" +
                                 ir::to_text(instrs[i], program_index) + ")");
      }
      anchor_of[instrs[i].id] = anchor;
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
    int64_t B = 0, T = 0;  ///< micro-batch sequences; sequence positions this op processes
  };

  [[noreturn]] void fail(const ir::Instruction& instr, const std::string& what) const {
    throw std::runtime_error("instruction #" + std::to_string(instr.id) + " (" + ir::to_text(instr, program_index) +
                             "): " + what);
  }
  [[noreturn]] void fail(const Ctx& x, const std::string& what) const { fail(*x.instr, what); }

  /// 'b' and 's' from the rank's geometry; the other dims from the Compute (tp-local sizes).
  int64_t dim_size(const Ctx& x, char name, const ir::TensorDecl* t) const {
    if (name == 'b') return x.B;
    if (name == 's') return x.T;
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
  /// Elements per (sequence, position) on this rank: the tensor's dims other than b and s, the
  /// tensor-parallel ones divided by tp.
  int64_t features(const Ctx& x, const std::string& name) const {
    const ir::TensorDecl& t = decl(x, name);
    int64_t n = 1;
    for (const auto& d : t.dims) {
      if (ir::is_symbolic_dim(d.name)) continue;
      if (ir::is_tensor_parallel_dim(d.name) && d.size % tp != 0) {
        fail(x, "tp = " + std::to_string(tp) + " does not divide dim " + std::string(1, d.name) + " = " + std::to_string(d.size) + " of '" + name + "'");
      }
      n *= ir::is_tensor_parallel_dim(d.name) ? d.size / tp : d.size;
    }
    return n;
  }
  bool is_param(const Ctx& x, const std::string& name) const { return decl(x, name).is_parameter; }

  /// The tp-local slice of a parameter, checked against the op's (tp-local) dims.
  ParamRef param_ref(const Ctx& x, const std::string& name) const {
    const ParamEntry* e = state.table().find_graph(x.block->name, x.c->layer, name);
    if (!e) fail(x, "parameter '" + name + "' of " + x.block->name + "." + std::to_string(x.c->layer) + " is not in the model state");
    const ParamRef r = tp_slice(*e, tp, tp_rank);
    if (r.elements() != numel(x, name)) {
      fail(x, "parameter '" + name + "' has " + std::to_string(r.elements()) + " elements on this rank (tp " +
                  std::to_string(tp) + "), the op needs " + std::to_string(numel(x, name)));
    }
    return r;
  }
  ParamRef contiguous_param(const Ctx& x, const std::string& name) const {
    const ParamRef r = param_ref(x, name);
    if (!r.contiguous()) fail(x, "parameter '" + name + "' is a strided tensor-parallel slice where the op needs it whole");
    return r;
  }
  float* param(const Ctx& x, const std::string& name) { return state.params().data() + contiguous_param(x, name).offset; }
  float* param_grad(const Ctx& x, const std::string& name) { return state.grads().data() + contiguous_param(x, name).offset; }

  /// An activation saved in the copy's buffer; the block input comes from the boundary hand-off.
  Tensor& act(const Ctx& x, const std::string& name) {
    auto it = x.buf->tensors.find(name);
    if (it != x.buf->tensors.end()) return it->second;
    if (name == "x" && x.info->has_input) {
      auto h = fwd_handoff.find(x.c->micro_batch);
      if (h == fwd_handoff.end()) fail(x, "the block input 'x' of micro-batch " + std::to_string(x.c->micro_batch) + " has not been produced");
      if (h->second.size() != numel(x, "x")) {
        fail(x, "the block input 'x' holds " + std::to_string(h->second.size()) + " elements, the op expects " +
                    std::to_string(numel(x, "x")));
      }
      Tensor& t = x.buf->tensors[name] = std::move(h->second);
      fwd_handoff.erase(h);
      return t;
    }
    fail(x, "activation '" + name + "' is not available (not computed, or freed)");
  }
  const float* in(const Ctx& x, const std::string& name) {
    if (is_param(x, name)) return param(x, name);
    Tensor& t = act(x, name);
    if (t.size() != numel(x, name)) {
      fail(x, "activation '" + name + "' holds " + std::to_string(t.size()) + " elements, the op expects " +
                  std::to_string(numel(x, name)) + " (a sequence gather or scatter missing from the schedule?)");
    }
    return t.data();
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
  /// The gradient of an activation (created zero, `n` elements; default its size at this op) or
  /// of a parameter (the grads buffer).
  float* grad(const Ctx& x, const std::string& name, int64_t n = -1) {
    if (is_param(x, name)) return param_grad(x, name);
    if (n < 0) n = numel(x, name);
    const std::string key = "d:" + name;
    auto it = x.buf->tensors.find(key);
    if (it != x.buf->tensors.end()) {
      if (it->second.size() != n) {
        fail(x, "the gradient of '" + name + "' holds " + std::to_string(it->second.size()) + " elements, the op expects " +
                    std::to_string(n));
      }
      return it->second.data();
    }
    return (x.buf->tensors[key] = Tensor(&tracker, n)).data();
  }
  /// The gradient arriving at an op's output; the block output's comes from the next block copy.
  const float* dout(const Ctx& x, const std::string& name) {
    const std::string key = "d:" + name;
    auto it = x.buf->tensors.find(key);
    Tensor* t = nullptr;
    if (it != x.buf->tensors.end()) {
      t = &it->second;
    } else if (name == x.info->output) {
      auto h = bwd_handoff.find(x.c->micro_batch);
      if (h == bwd_handoff.end()) fail(x, "the gradient of the block output '" + name + "' has not been produced");
      t = &(x.buf->tensors[key] = std::move(h->second));
      bwd_handoff.erase(h);
    } else {
      fail(x, "the gradient of '" + name + "' is not available");
    }
    if (t->size() != numel(x, name)) {
      fail(x, "the gradient of '" + name + "' holds " + std::to_string(t->size()) + " elements, the op expects " +
                  std::to_string(numel(x, name)) + " (a sequence gather or scatter missing from the schedule?)");
    }
    return t->data();
  }
  void drop(const Ctx& x, const std::string& key) { x.buf->tensors.erase(key); }

  /// cos / sin tables (T rows of D/2) for the positions the rank holds: 0..S-1, or its CP positions.
  std::pair<const float*, const float*> rope(int64_t T, int64_t D) {
    auto it = rope_tables.find({T, D});
    if (it == rope_tables.end()) {
      std::vector<float> cos_full(static_cast<size_t>(S * D / 2)), sin_full(cos_full.size());
      cpu::rope_tables(cos_full.data(), sin_full.data(), S, D, /*position_offset=*/0, options.numerics.rope);
      Tensor cos(&tracker, T * D / 2), sin(&tracker, T * D / 2);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t p = cp_pos[static_cast<size_t>(t)];
        std::copy_n(cos_full.begin() + p * D / 2, D / 2, cos.data() + t * D / 2);
        std::copy_n(sin_full.begin() + p * D / 2, D / 2, sin.data() + t * D / 2);
      }
      it = rope_tables.emplace(std::pair{T, D}, std::pair{std::move(cos), std::move(sin)}).first;
    }
    return {it->second.first.data(), it->second.second.data()};
  }

  // ---- the micro-batch's tokens (the cp-local positions of its sequences) ----

  const int32_t* tokens(const Ctx& x, bool targets) {
    if (x.T != T_cp) fail(x, "token lookup at " + std::to_string(x.T) + " positions, the rank holds " + std::to_string(T_cp));
    const int64_t per_replica = batch->sequences / replicas;
    const int64_t first = replica * per_replica + x.c->micro_batch * x.B;
    if (first + x.B > (replica + 1) * per_replica) {
      fail(x, "micro-batch " + std::to_string(x.c->micro_batch) + " of " + std::to_string(x.B) +
                  " sequences lies outside this replica's " + std::to_string(per_replica) + " of the global batch");
    }
    auto [it, fresh] = token_cache.try_emplace({x.c->micro_batch, targets ? 1 : 0});
    if (fresh) {
      const std::vector<int32_t>& rows = targets ? batch->targets : batch->inputs;
      it->second.resize(static_cast<size_t>(x.B * T_cp));
      for (int64_t b = 0; b < x.B; ++b)
        for (int64_t t = 0; t < T_cp; ++t)
          it->second[static_cast<size_t>(b * T_cp + t)] = rows[static_cast<size_t>((first + b) * S + cp_pos[static_cast<size_t>(t)])];
    }
    return it->second.data();
  }

  // ---- contraction layout: y[N, OC] = x[N, IC] W_hf^T ----

  struct Linear {
    int64_t N = 0, IC = 0, OC = 0;
    ParamRef w;
    bool row_parallel = false;  ///< the weight's input features are split over tp: the output is a partial sum
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
    l.w = param_ref(x, op.inputs[1]);
    if (l.w.rows != l.OC || l.w.cols != l.IC) {
      fail(x, "weight '" + op.inputs[1] + "' slice is " + std::to_string(l.w.rows) + " x " + std::to_string(l.w.cols) +
                  ", the op needs " + std::to_string(l.OC) + " x " + std::to_string(l.IC));
    }
    const ParamEntry* e = state.table().find_graph(x.block->name, x.c->layer, op.inputs[1]);
    l.row_parallel = tp > 1 && e->tp_axis == 1;
    if (l.row_parallel && op.inputs.size() > 2) {
      fail(x, "a bias on a row-parallel linear layer under tp > 1 is not implemented (it must be added once, after the reduction)");
    }
    return l;
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
    if (cp > 1) {  // queries at the rank's positions, keys and values gathered over the whole sequence
      ac.Tk = S;
      ac.q_pos = cp_pos.data();
    }
    return ac;
  }
  /// K or V as the attention kernel reads it: gathered to all S positions under cp.
  const float* kv(const Ctx& x, const std::string& name, const cpu::AttentionConfig& ac) {
    Tensor& t = act(x, name);
    const int64_t want = ac.B * cpu::attention_keys(ac) * ac.KVH * ac.D;
    if (t.size() != want) {
      fail(x, "'" + name + "' holds " + std::to_string(t.size()) + " elements, attention expects " + std::to_string(want) +
                  (cp > 1 ? " (the K/V all-gather over cp must come before the attention kernel)" : ""));
    }
    return t.data();
  }

  // ---- forward ----

  void forward(const Ctx& x, bool recompute) {
    const ir::Op& op = *x.op;
    switch (op.kind) {
      case ir::OpKind::embedding: {
        const ir::TensorDecl& wd = decl(x, op.inputs[0]);
        const int64_t V_local = wd.dims.empty() ? 0 : dim_size(x, wd.dims[0].name, &wd);
        const int64_t C = numel(x, op.inputs[0]) / V_local;
        const int64_t V = V_local * (tp > 1 && state.table().find_graph(x.block->name, x.c->layer, op.inputs[0])->tp_axis == 0 ? tp : 1);
        const int32_t* ids = tokens(x, false);
        const int64_t N = x.B * x.T;
        for (int64_t i = 0; i < N; ++i)
          if (ids[i] < 0 || ids[i] >= V) fail(x, "token id " + std::to_string(ids[i]) + " outside the vocabulary of " + std::to_string(V));
        float* y = out(x, op.output);
        const float* w = param(x, op.inputs[0]);
        if (V == V_local) {
          K.embedding_forward(y, ids, w, N, V, C);
        } else {  // vocab-parallel: this rank's rows of the table; the reduction over tp follows
          const int64_t v0 = tp_rank * V_local;
          for (int64_t i = 0; i < N; ++i) {
            const int64_t id = ids[i] - v0;
            if (id >= 0 && id < V_local) std::copy_n(w + id * C, C, y + i * C);
            else std::fill_n(y + i * C, C, 0.0f);
          }
        }
        break;
      }
      case ir::OpKind::norm: {
        const int64_t C = numel(x, op.inputs[1]);
        const int64_t N = numel(x, op.inputs[0]) / C;
        const float* xin = in(x, op.inputs[0]);
        const float* w = in(x, op.inputs[1]);
        float* y = out(x, op.output);
        if (op.norm == ir::NormKind::rms) {
          K.rmsnorm_forward(y, scratch_saved(x, op.name + "#rstd", N), xin, w, N, C, options.numerics.norm_eps,
                            /*unit_offset=*/false);
        } else {
          const float* b = op.inputs.size() > 2 ? in(x, op.inputs[2]) : nullptr;
          float* mean = scratch_saved(x, op.name + "#mean", N);
          K.layernorm_forward(y, mean, scratch_saved(x, op.name + "#rstd", N), xin, w, b, N, C,
                                 options.numerics.norm_eps);
        }
        break;
      }
      case ir::OpKind::contraction: {
        const Linear l = linear_shape(x);
        const float* b = op.inputs.size() > 2 ? in(x, op.inputs[2]) : nullptr;
        const float* a = in(x, op.inputs[0]);
        K.linear_forward(out(x, op.output), a, state.params().data() + l.w.offset, b, l.N, l.IC, l.OC, l.w.ld);
        break;
      }
      case ir::OpKind::rope: {
        const ir::TensorDecl& t = decl(x, op.inputs[0]);
        const int64_t D = dim_size(x, t.dims.back().name, &t);
        const int64_t heads = numel(x, op.inputs[0]) / (x.B * x.T * D);
        const auto [cos, sin] = rope(x.T, D);
        const float* xin = in(x, op.inputs[0]);
        K.rope_forward(out(x, op.output), xin, cos, sin, x.B, x.T, heads, D);
        break;
      }
      case ir::OpKind::attention_core: {
        const cpu::AttentionConfig ac = attention_config(x);
        Tensor scratch(&tracker, K.attention_forward_scratch(ac));
        const float* q = in(x, op.inputs[0]);
        const float* k = kv(x, op.inputs[1], ac);
        const float* v = kv(x, op.inputs[2], ac);
        float* lse = scratch_saved(x, op.name + "#lse", ac.B * ac.H * ac.T);
        K.attention_forward(out(x, op.output), lse, q, k, v, ac, scratch.data());
        break;
      }
      case ir::OpKind::activation: {
        const int64_t n = numel(x, op.output);
        if (op.activation == ir::ActivationKind::silu_glu || op.activation == ir::ActivationKind::gelu_glu) {
          if (op.inputs.size() != 2) fail(x, "a gated activation needs gate and up");
          const float *g = in(x, op.inputs[0]), *u = in(x, op.inputs[1]);
          float* y = out(x, op.output);
          if (op.activation == ir::ActivationKind::silu_glu) K.swiglu_forward(y, g, u, n);
          else K.geglu_forward(y, g, u, n);
        } else if (op.activation == ir::ActivationKind::gelu) {
          const float* a = in(x, op.inputs[0]);
          K.gelu_forward(out(x, op.output), a, n);
        } else {
          fail(x, "activation kind of op '" + op.name + "' has no CPU kernel yet (silu_glu, gelu_glu, gelu are done)");
        }
        break;
      }
      case ir::OpKind::residual: {
        const float *a = in(x, op.inputs[0]), *b = in(x, op.inputs[1]);
        K.residual_forward(out(x, op.output), a, b, numel(x, op.output));
        break;
      }
      case ir::OpKind::softmax_cross_entropy: {
        if (recompute) break;  // the loss is counted once, in the forward
        const ir::TensorDecl& t = decl(x, op.inputs[0]);
        const int64_t V = dim_size(x, t.dims.back().name, &t);
        const int64_t N = numel(x, op.inputs[0]) / V;
        const int32_t* targets = tokens(x, true);
        const int64_t V_full = vocab_parallel(x) ? V * tp : V;
        for (int64_t i = 0; i < N; ++i)
          if (targets[i] < 0 || targets[i] >= V_full) fail(x, "target id " + std::to_string(targets[i]) + " outside the vocabulary of " + std::to_string(V_full));
        const float* logits = in(x, op.inputs[0]);
        if (!vocab_parallel(x)) {
          loss_sum += K.softmax_cross_entropy_forward_backward(nullptr, logits, targets, N, V,
                                                               batch->sequences * batch->seq_len, 1.0f);
          break;
        }
        // Vocab-parallel: the local maximum per token now; the three all-reduces that follow in the
        // schedule (loss(max), loss(sumexp), loss(target)) finish the loss.
        float* m = scratch_saved(x, "loss(max)", N);
        for (int64_t i = 0; i < N; ++i) m[i] = *std::max_element(logits + i * V, logits + (i + 1) * V);
        break;
      }
      default:
        fail(x, "op kind '" + ir::to_string(op.kind) + "' is not implemented by the CPU executor");
    }
  }

  /// The logits are split over tp (the lm_head weight's vocab rows).
  bool vocab_parallel(const Ctx& x) const {
    if (tp == 1) return false;
    const ir::TensorDecl& t = decl(x, x.op->inputs[0]);
    return std::any_of(t.dims.begin(), t.dims.end(), [](const ir::Dim& d) { return d.name == 'v'; });
  }

  // ---- backward: data part (always at bwd_data) and weight part (at bwd_weight when split) ----

  void backward(const Ctx& x, bool data, bool weight) {
    const ir::Op& op = *x.op;
    switch (op.kind) {
      case ir::OpKind::embedding: {
        if (!weight) break;
        const ir::TensorDecl& wd = decl(x, op.inputs[0]);
        const int64_t V_local = dim_size(x, wd.dims[0].name, &wd);
        const int64_t C = numel(x, op.inputs[0]) / V_local;
        const int64_t N = x.B * x.T;
        const int32_t* ids = tokens(x, false);
        const float* dy = dout(x, op.output);
        float* dw = param_grad(x, op.inputs[0]);
        const bool split = tp > 1 && state.table().find_graph(x.block->name, x.c->layer, op.inputs[0])->tp_axis == 0;
        if (!split) {
          K.embedding_backward(dw, dy, ids, N, V_local, C);
        } else {
          const int64_t v0 = tp_rank * V_local;
          for (int64_t i = 0; i < N; ++i) {
            const int64_t id = ids[i] - v0;
            if (id < 0 || id >= V_local) continue;
            float* row = dw + id * C;
            for (int64_t c = 0; c < C; ++c) row[c] += dy[i * C + c];
          }
        }
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
          K.rmsnorm_backward(dx, dw, dy, xin, w, saved(x, op.name + "#rstd"), N, C, /*unit_offset=*/false);
        } else {
          float* db = op.inputs.size() > 2 ? grad(x, op.inputs[2]) : nullptr;
          K.layernorm_backward(dx, dw, db, dy, xin, w, saved(x, op.name + "#mean"), saved(x, op.name + "#rstd"),
                                  N, C);
        }
        break;
      }
      case ir::OpKind::contraction: {
        const Linear l = linear_shape(x);
        const float* dy = dout(x, op.output);
        const float* a = in(x, op.inputs[0]);
        float* dx = data ? grad(x, op.inputs[0]) : nullptr;
        float* dw = weight ? state.grads().data() + l.w.offset : nullptr;
        float* db = weight && op.inputs.size() > 2 ? grad(x, op.inputs[2]) : nullptr;
        K.linear_backward(dx, dw, db, dy, a, state.params().data() + l.w.offset, l.N, l.IC, l.OC, l.w.ld);
        break;
      }
      case ir::OpKind::rope: {
        if (!data) break;
        const ir::TensorDecl& t = decl(x, op.inputs[0]);
        const int64_t D = dim_size(x, t.dims.back().name, &t);
        const int64_t heads = numel(x, op.inputs[0]) / (x.B * x.T * D);
        const auto [cos, sin] = rope(x.T, D);
        const float* dy = dout(x, op.output);
        K.rope_backward(grad(x, op.inputs[0]), dy, cos, sin, x.B, x.T, heads, D);
        break;
      }
      case ir::OpKind::attention_core: {
        if (!data) break;
        const cpu::AttentionConfig ac = attention_config(x);
        Tensor scratch(&tracker, K.attention_backward_scratch(ac));
        const float* dy = dout(x, op.output);
        const float* q = in(x, op.inputs[0]);
        const float* k = kv(x, op.inputs[1], ac);
        const float* v = kv(x, op.inputs[2], ac);
        const int64_t kv_elements = ac.B * cpu::attention_keys(ac) * ac.KVH * ac.D;  // all S positions under cp
        float* dq = grad(x, op.inputs[0]);
        float* dk = grad(x, op.inputs[1], kv_elements);
        float* dv = grad(x, op.inputs[2], kv_elements);
        K.attention_backward(dq, dk, dv, dy, q, k, v, saved(x, op.name + "#lse"), ac, scratch.data());
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
          if (op.activation == ir::ActivationKind::silu_glu) K.swiglu_backward(dg, du, dy, g, u, n);
          else K.geglu_backward(dg, du, dy, g, u, n);
        } else {
          const float* a = in(x, op.inputs[0]);
          K.gelu_backward(grad(x, op.inputs[0]), dy, a, n);
        }
        break;
      }
      case ir::OpKind::residual: {
        if (!data) break;
        const float* dy = dout(x, op.output);
        float* da = grad(x, op.inputs[0]);
        float* db = grad(x, op.inputs[1]);
        K.residual_backward(da, db, dy, numel(x, op.output));
        break;
      }
      case ir::OpKind::softmax_cross_entropy: {
        if (!data) break;
        // dlogits written in place over the saved logits; the tensor becomes d:logits.
        const std::string& name = op.inputs[0];
        const ir::TensorDecl& t = decl(x, name);
        const int64_t V = dim_size(x, t.dims.back().name, &t);
        const int64_t N = numel(x, name) / V;
        in(x, name);  // size check
        Tensor logits = std::move(act(x, name));
        drop(x, name);
        const int32_t* targets = tokens(x, true);
        const int64_t num_targets = batch->sequences * batch->seq_len;
        if (!vocab_parallel(x)) {
          K.softmax_cross_entropy_forward_backward(logits.data(), logits.data(), targets, N, V, num_targets, 1.0f);
        } else {
          // softmax with the global max and sum of exponentials, minus one at the target if this
          // rank holds its vocab row; the mean over all targets.
          const float* m = saved(x, "loss(max)");
          const float* s = saved(x, "loss(sumexp)");
          const int64_t v0 = tp_rank * V;
          const double scale = 1.0 / static_cast<double>(num_targets);
          for (int64_t i = 0; i < N; ++i) {
            float* row = logits.data() + i * V;
            for (int64_t j = 0; j < V; ++j)
              row[j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - m[i]) / s[i] * scale);
            const int64_t tgt = targets[i] - v0;
            if (tgt >= 0 && tgt < V) row[tgt] -= static_cast<float>(scale);
          }
        }
        x.buf->tensors["d:" + name] = std::move(logits);
        break;
      }
      default:
        fail(x, "op kind '" + ir::to_string(op.kind) + "' is not implemented by the CPU executor");
    }
  }

  // ---- instructions ----

  Ctx context_of(const ir::Instruction& instr, const ir::Compute& c) {
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
    x.B = 0;
    for (const auto& d : c.dims)
      if (d.name == 'b') x.B = d.size;
    if (x.B != schedule.plan.micro_batch) fail(instr, "micro-batch size " + std::to_string(x.B) + " differs from the plan's");
    // Norms and residuals run on the residual stream, which sequence parallelism splits over tp;
    // every other op runs on the rank's cp-local sequence (a column-parallel linear reads its
    // gathered input, a row-parallel one writes a partial sum before its reduce-scatter).
    x.T = (x.op->kind == ir::OpKind::norm || x.op->kind == ir::OpKind::residual) ? T_sp : T_cp;
    return x;
  }

  void run_compute(const ir::Instruction& instr, const ir::Compute& c) {
    Ctx x = context_of(instr, c);
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
          if (fwd_handoff.count(c.micro_batch)) fail(instr, "the previous block output of micro-batch " + std::to_string(c.micro_batch) + " was never consumed");
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
            if (bwd_handoff.count(c.micro_batch)) fail(instr, "the previous input gradient of micro-batch " + std::to_string(c.micro_batch) + " was never consumed");
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

  // ---- ownership: what this rank updates (its tp slices; its FSDP shard) ----

  /// This rank's FSDP shard of a unit (packed coordinates): the shard_index-th of `shards` chunks.
  ShardRange owned(const Layout& u) const {
    if (zero != 3 || shards <= 1) return {0, u.size};
    const int64_t chunk = padded_size(u.size, shards) / shards;
    const int64_t b = std::min(u.size, shard_index * chunk);
    return {b, std::min(u.size, b + chunk)};
  }
  int64_t chunk_of(const Layout& u) const { return padded_size(u.size, shards) / shards; }

  void run_optimizer(const ir::Instruction& instr, const ir::OptimizerStep& o) {
    if (zero == 0 && o.param_elements != stage_layout.size) {
      fail(instr, "the step updates " + std::to_string(o.param_elements) + " elements but this rank holds " +
                      std::to_string(stage_layout.size));
    }
    float* g = state.grads().data();
    // Global norm: each element once over the world (replicated tp slices from tp rank 0 only).
    double sq = 0.0;
    for (const auto& [name, u] : units)
      for_each_in(u, owned(u), [&](const Segment& s, int64_t fb, int64_t n, int64_t) {
        if (!s.tp_replicated || tp_rank == 0) sq += K.grad_sum_squares(g + fb, n);
      });
    grad_norm = std::sqrt(sum_over(sq, norm_axes));
    const float coef = cpu::grad_clip_coefficient(grad_norm, options.grad_clip);
    state.step += 1;
    for (const auto& [name, u] : units)
      for_each_in(u, owned(u), [&](const Segment&, int64_t fb, int64_t n, int64_t) {
        if (coef < 1.0f) K.scale_in_place(g + fb, n, coef);
        K.adamw_step(state.params().data() + fb, g + fb, state.adam_m().data() + fb, state.adam_v().data() + fb, n,
                        state.step, options.adamw);
      });
  }

  /// Sum of a double over a group, exactly enough for reporting: sent as two floats (hi + lo).
  double sum_over(double value, const Axes& axes) {
    if (!comm || comm->group_size(axes) <= 1) return value;
    float* v = sum_scratch.data();  // backend memory: NCCL cannot read the host stack
    v[0] = static_cast<float>(value);
    v[1] = static_cast<float>(value - static_cast<double>(v[0]));
    comm->all_reduce(v, v, 2, axes);
    return static_cast<double>(v[0]) + static_cast<double>(v[1]);
  }

  const Layout& unit_of(const ir::Instruction& instr, const std::string& buffer) const {
    // "w[block.copy]" / "g[block.copy]"
    if (buffer.size() < 4 || buffer[1] != '[' || buffer.back() != ']') fail(instr, "buffer '" + buffer + "' names no block copy");
    auto it = units.find(buffer.substr(2, buffer.size() - 3));
    if (it == units.end()) fail(instr, "buffer '" + buffer + "' names a block copy without parameters on this stage");
    return it->second;
  }

  // ---- collectives over named tensors (tp, cp, the loss; docs/schedule.md "Tensors") ----

  /// A sequence axis split over a group: rank r's local row i sits at full row index(r, i).
  struct SeqSplit {
    int64_t local = 0, full = 0, group = 1, rank = 0;
    std::vector<std::vector<int64_t>> index;  ///< [r][i]
  };
  SeqSplit tp_split() const {
    SeqSplit s{T_sp, T_cp, tp, tp_rank, {}};
    for (int64_t r = 0; r < tp; ++r) {
      s.index.emplace_back();
      for (int64_t i = 0; i < T_sp; ++i) s.index.back().push_back(r * T_sp + i);
    }
    return s;
  }
  SeqSplit cp_split() const {
    SeqSplit s{T_cp, S, cp, cp_rank, {}};
    for (int64_t r = 0; r < cp; ++r) s.index.push_back(ir::cp_positions(S, cp, r));
    return s;
  }

  /// Where a named tensor of the anchor's copy lives: its buffer, or the boundary hand-off.
  Tensor& locate(const ir::Instruction& instr, const Ctx& x, const std::string& name) {
    const bool is_grad = name.rfind("grad(", 0) == 0 && name.back() == ')';
    const std::string base = is_grad ? name.substr(5, name.size() - 6) : name;
    const std::string key = is_grad ? "d:" + base : base;
    auto it = x.buf->tensors.find(key);
    if (it != x.buf->tensors.end()) return it->second;
    if (base == x.info->output) {
      auto& handoff = is_grad ? bwd_handoff : fwd_handoff;
      auto h = handoff.find(x.c->micro_batch);
      if (h != handoff.end()) return h->second;
    }
    fail(instr, "tensor '" + name + "' of " + x.block->name + "." + std::to_string(x.c->layer) + " micro-batch " +
                    std::to_string(x.c->micro_batch) + " is not available");
  }

  void gather_seq(const ir::Instruction& instr, const Axes& axes, Tensor& t, int64_t B, int64_t F, const SeqSplit& s) {
    const int64_t local = B * s.local * F, full = B * s.full * F;
    comm_scratch.assign(static_cast<size_t>(local), 0.0f);
    if (t.size() == local) {
      std::copy_n(t.data(), local, comm_scratch.data());
    } else if (t.size() == full) {  // already gathered (kept from the forward): send this rank's rows again
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < s.local; ++i)
          std::copy_n(t.data() + (b * s.full + s.index[size_t(s.rank)][size_t(i)]) * F, F, comm_scratch.data() + (b * s.local + i) * F);
    } else {
      fail(instr, "the tensor holds " + std::to_string(t.size()) + " elements, neither the shard (" + std::to_string(local) +
                      ") nor the gathered size (" + std::to_string(full) + ")");
    }
    comm_scratch2.assign(static_cast<size_t>(local * s.group), 0.0f);
    comm->all_gather(comm_scratch.data(), comm_scratch2.data(), local, axes);
    Tensor g(&tracker, full);
    for (int64_t r = 0; r < s.group; ++r)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < s.local; ++i)
          std::copy_n(comm_scratch2.data() + ((r * B + b) * s.local + i) * F, F,
                      g.data() + (b * s.full + s.index[size_t(r)][size_t(i)]) * F);
    t = std::move(g);
  }

  void reduce_scatter_seq(const ir::Instruction& instr, const Axes& axes, Tensor& t, int64_t B, int64_t F, const SeqSplit& s) {
    const int64_t local = B * s.local * F, full = B * s.full * F;
    if (t.size() != full) fail(instr, "the tensor holds " + std::to_string(t.size()) + " elements, the reduce-scatter expects " + std::to_string(full));
    comm_scratch.assign(static_cast<size_t>(full), 0.0f);
    for (int64_t r = 0; r < s.group; ++r)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < s.local; ++i)
          std::copy_n(t.data() + (b * s.full + s.index[size_t(r)][size_t(i)]) * F, F,
                      comm_scratch.data() + ((r * B + b) * s.local + i) * F);
    Tensor out(&tracker, local);
    comm->reduce_scatter(comm_scratch.data(), out.data(), local, axes);
    t = std::move(out);
  }

  void run_tensor_collective(const ir::Instruction& instr, const ir::Collective& c) {
    const ir::Instruction& anchor = program->instructions[size_t(anchor_of.at(instr.id))];
    const Ctx x = context_of(anchor, std::get<ir::Compute>(anchor.op));
    const int64_t esize = ir::dtype_bytes(c.dtype);
    const int64_t elements = c.bytes / esize;
    const bool over_tp = c.axes == Axes{"tp"};
    const bool over_cp = c.axes == Axes{"cp"};
    if (!over_tp && !over_cp) fail(instr, "tensor collectives over these axes are not implemented (tp and cp are)");
    int64_t expected = 0;

    if (c.buffer == "grads") {  // SP: replicated parameters' gradients summed over tp
      if (!over_tp || c.kind != ir::CollectiveKind::all_reduce) fail(instr, "expected an all-reduce over tp of replicated gradients");
      std::vector<ParamRef> refs;
      for (const auto& name : c.tensors) {
        const ParamRef r = contiguous_param(x, name);
        refs.push_back(r);
        expected += r.elements();
      }
      if (expected != elements) fail(instr, "the parameters hold " + std::to_string(expected) + " elements, the all-reduce " + std::to_string(elements));
      comm_scratch.assign(static_cast<size_t>(expected), 0.0f);
      int64_t o = 0;
      for (const auto& r : refs) o += (std::copy_n(state.grads().data() + r.offset, r.elements(), comm_scratch.data() + o), r.elements());
      comm->all_reduce(comm_scratch.data(), comm_scratch.data(), expected, c.axes);
      o = 0;
      for (const auto& r : refs) o += (std::copy_n(comm_scratch.data() + o, r.elements(), state.grads().data() + r.offset), r.elements());
      return;
    }

    if (c.tensors.front().rfind("loss(", 0) == 0) {  // vocab-parallel cross-entropy statistics
      if (!over_tp || c.kind != ir::CollectiveKind::all_reduce || c.tensors.size() != 1) fail(instr, "expected one all-reduce over tp");
      if (x.op->kind != ir::OpKind::softmax_cross_entropy) fail(instr, "the loss statistics belong to the loss op");
      Ctx lx = x;
      lx.T = T_cp;
      const std::string& stat = c.tensors.front();
      const std::string& logits_name = x.op->inputs[0];
      const int64_t V = features(lx, logits_name);
      const int64_t N = lx.B * T_cp;
      if (elements != N) fail(instr, "expected " + std::to_string(N) + " per-token values, the collective moves " + std::to_string(elements));
      const float* logits = locate(instr, lx, logits_name).data();
      const float* m = locate(instr, lx, "loss(max)").data();
      if (stat == "loss(max)") {
        if (c.reduce != ir::ReduceOp::max) fail(instr, "loss(max) must reduce with max");
        float* mm = locate(instr, lx, "loss(max)").data();
        comm->all_reduce_max(mm, mm, N, c.axes);
      } else if (stat == "loss(sumexp)") {
        float* s = (lx.buf->tensors["loss(sumexp)"] = Tensor(&tracker, N)).data();
        for (int64_t i = 0; i < N; ++i) {
          double acc = 0.0;
          for (int64_t j = 0; j < V; ++j) acc += std::exp(static_cast<double>(logits[i * V + j]) - m[i]);
          s[i] = static_cast<float>(acc);
        }
        comm->all_reduce(s, s, N, c.axes);
      } else if (stat == "loss(target)") {
        const int32_t* targets = tokens(lx, true);
        std::pmr::vector<float> t(static_cast<size_t>(N), 0.0f, K.memory());
        const int64_t v0 = tp_rank * V;
        for (int64_t i = 0; i < N; ++i) {
          const int64_t j = targets[i] - v0;
          if (j >= 0 && j < V) t[size_t(i)] = logits[i * V + j];
        }
        comm->all_reduce(t.data(), t.data(), N, c.axes);
        const float* s = locate(instr, lx, "loss(sumexp)").data();
        double sum = 0.0;
        for (int64_t i = 0; i < N; ++i) sum += std::log(static_cast<double>(s[i])) + m[i] - t[size_t(i)];
        loss_sum += sum / static_cast<double>(batch->sequences * batch->seq_len);
      } else {
        fail(instr, "unknown loss statistic '" + stat + "'");
      }
      return;
    }

    // Activations and their gradients: sequence gathers / scatters, or partial-sum all-reduces.
    if (c.reduce != ir::ReduceOp::sum) fail(instr, "activation collectives reduce with sum");
    const SeqSplit split = over_tp ? tp_split() : cp_split();
    std::vector<std::pair<Tensor*, int64_t>> targets;  // tensor, features
    for (const auto& name : c.tensors) {
      const bool is_grad = name.rfind("grad(", 0) == 0;
      const std::string base = is_grad ? name.substr(5, name.size() - 6) : name;
      Ctx fx = x;
      targets.emplace_back(&locate(instr, x, name), features(fx, base));
    }
    for (auto& [t, F] : targets) {
      switch (c.kind) {
        case ir::CollectiveKind::all_gather: expected += x.B * split.full * F; break;
        case ir::CollectiveKind::reduce_scatter: expected += x.B * split.full * F; break;
        case ir::CollectiveKind::all_reduce: expected += t->size(); break;
        default: fail(instr, "collective kind '" + ir::to_string(c.kind) + "' over named tensors is not implemented");
      }
    }
    if (expected != elements) {
      fail(instr, "the named tensors hold " + std::to_string(expected) + " elements (" + ir::to_string(c.dtype) +
                      "), the collective moves " + std::to_string(elements));
    }
    for (auto& [t, F] : targets) {
      if (c.kind == ir::CollectiveKind::all_gather) gather_seq(instr, c.axes, *t, x.B, F, split);
      else if (c.kind == ir::CollectiveKind::reduce_scatter) reduce_scatter_seq(instr, c.axes, *t, x.B, F, split);
      else comm->all_reduce(t->data(), t->data(), t->size(), c.axes);
    }
  }

  // ---- data-parallel collectives over parameter units ----

  void run_collective(const ir::Instruction& instr, const ir::Collective& c) {
    if (c.group_size <= 1) return;
    if (!comm) fail(instr, "a collective over a group of " + std::to_string(c.group_size) + " ranks needs a communicator");
    if (comm->group_size(c.axes) != c.group_size) {
      fail(instr, "the communicator's group over these axes has " + std::to_string(comm->group_size(c.axes)) + " ranks");
    }
    if (!live.count(c.buffer)) fail(instr, "buffer '" + c.buffer + "' is not allocated");
    if (!c.tensors.empty()) {
      run_tensor_collective(instr, c);
      return;
    }
    const int64_t esize = ir::dtype_bytes(c.dtype);  // the CPU executor moves fp32 whatever the dtype
    if (esize <= 0 || c.bytes % esize != 0) fail(instr, "byte count not a multiple of the element size");
    const int64_t count = c.bytes / esize;
    float* g = state.grads().data();
    float* w = state.params().data();
    switch (c.kind) {
      case ir::CollectiveKind::all_reduce: {
        if (c.buffer != "grads") fail(instr, "all-reduce of buffer '" + c.buffer + "' is not implemented");
        if (zero == 0) {
          // DDP bucket: buckets fill in backward order = the stage's packed layout from its end.
          const int64_t total = stage_layout.size;
          if (ddp_reduced + count > total) fail(instr, "the buckets exceed the stage's " + std::to_string(total) + " gradients");
          const ShardRange r{total - ddp_reduced - count, total - ddp_reduced};
          comm_scratch.assign(static_cast<size_t>(count), 0.0f);
          pack(stage_layout, r, g, comm_scratch.data());
          comm->all_reduce(comm_scratch.data(), comm_scratch.data(), count, c.axes);
          unpack(stage_layout, r, comm_scratch.data(), g);
          ddp_reduced += count;
        } else {
          // HSDP: the shard of the unit just reduce-scattered, over dp_replicate.
          if (last_scattered.empty()) fail(instr, "an HSDP all-reduce before any reduce-scatter");
          const Layout& u = units.at(last_scattered);
          const ShardRange r = owned(u);
          const int64_t chunk = chunk_of(u);
          if (count != chunk) fail(instr, "expected the " + std::to_string(chunk) + "-element shard of " + last_scattered);
          comm_scratch.assign(static_cast<size_t>(chunk), 0.0f);
          pack(u, r, g, comm_scratch.data());
          comm->all_reduce(comm_scratch.data(), comm_scratch.data(), chunk, c.axes);
          unpack(u, r, comm_scratch.data(), g);
        }
        break;
      }
      case ir::CollectiveKind::all_gather: {
        // FSDP: the unit's (tp-local) parameters from every shard into the full-layout buffer.
        const Layout& u = unit_of(instr, c.buffer);
        if (count != u.size) fail(instr, "the unit holds " + std::to_string(u.size) + " parameters here, the gather " + std::to_string(count));
        const int64_t chunk = chunk_of(u);
        const ShardRange r = owned(u);
        comm_scratch.assign(static_cast<size_t>(chunk * (shards + 1)), 0.0f);
        float* send = comm_scratch.data() + chunk * shards;
        pack(u, r, w, send);
        comm->all_gather(send, comm_scratch.data(), chunk, c.axes);
        unpack(u, {0, u.size}, comm_scratch.data(), w);
        break;
      }
      case ir::CollectiveKind::reduce_scatter: {
        // FSDP: the unit's local gradients summed over the shard group into this rank's shard; the
        // rest zeroed, so later micro-batches accumulate on top of the reduced shard exactly.
        const Layout& u = unit_of(instr, c.buffer);
        if (count != u.size) fail(instr, "the unit holds " + std::to_string(u.size) + " gradients here, the reduce-scatter " + std::to_string(count));
        const int64_t chunk = chunk_of(u);
        const ShardRange r = owned(u);
        comm_scratch.assign(static_cast<size_t>(chunk * (shards + 1)), 0.0f);
        pack(u, {0, u.size}, g, comm_scratch.data());
        float* recv = comm_scratch.data() + chunk * shards;
        comm->reduce_scatter(comm_scratch.data(), recv, chunk, c.axes);
        for_each_in(u, {0, u.size}, [&](const Segment&, int64_t fb, int64_t n, int64_t) { K.fill_zero(g + fb, n); });
        unpack(u, r, recv, g);
        last_scattered = c.buffer.substr(2, c.buffer.size() - 3);
        break;
      }
      default:
        fail(instr, "collective kind '" + ir::to_string(c.kind) + "' over '" + c.buffer + "' is not implemented by the CPU executor yet");
    }
  }

  // ---- pipeline transfers: block boundary tensors between stages ----

  /// "y[v]m3" / "dx[v]m3" (send), "x[v]m3" / "dy[v]m3" (recv): forward or backward, micro-batch.
  std::pair<bool, int64_t> boundary_of(const ir::Instruction& instr, const std::string& buffer) const {
    const auto br = buffer.find('[');
    const auto m = buffer.rfind("]m");
    if (br == std::string::npos || m == std::string::npos) fail(instr, "buffer '" + buffer + "' names no boundary tensor");
    const std::string kind = buffer.substr(0, br);
    const bool fwd = kind == "x" || kind == "y";
    if (!fwd && kind != "dx" && kind != "dy") fail(instr, "buffer '" + buffer + "' names no boundary tensor");
    return {fwd, std::stoll(buffer.substr(m + 2))};
  }

  template <typename P>
  void run_p2p(const ir::Instruction& instr, const P& p, bool is_send) {
    if (!comm) fail(instr, "a send/recv needs a communicator");
    const auto [fwd, mb] = boundary_of(instr, p.buffer);
    PendingP2P t;
    t.to_fwd = fwd;
    t.micro_batch = mb;
    t.transfer.kind = is_send ? PointToPoint::Kind::send : PointToPoint::Kind::recv;
    t.transfer.axis = p.axis;
    t.transfer.offset = p.offset;
    t.transfer.tag = p.tag;
    auto& handoff = fwd ? fwd_handoff : bwd_handoff;
    if (is_send) {
      auto h = handoff.find(mb);
      if (h == handoff.end()) fail(instr, "nothing to send: the boundary tensor of micro-batch " + std::to_string(mb) + " is not there");
      t.tensor = std::move(h->second);
      handoff.erase(h);
    } else {
      t.tensor = Tensor(&tracker, schedule.plan.micro_batch * T_sp * graph.info.hidden_size);
    }
    t.transfer.buffer = t.tensor.data();
    t.transfer.count = t.tensor.size();
    pending.push_back(std::move(t));
    if (p.batch_with_next) return;
    std::vector<PointToPoint> transfers;
    for (const auto& q : pending) transfers.push_back(q.transfer);
    if (transfers.size() == 1 && is_send) comm->send(transfers[0].buffer, transfers[0].count, transfers[0].axis, transfers[0].offset, transfers[0].tag);
    else if (transfers.size() == 1) comm->recv(transfers[0].buffer, transfers[0].count, transfers[0].axis, transfers[0].offset, transfers[0].tag);
    else comm->batch(transfers);
    for (auto& q : pending) {
      if (q.transfer.kind != PointToPoint::Kind::recv) continue;
      auto& into = q.to_fwd ? fwd_handoff : bwd_handoff;
      if (into.count(q.micro_batch)) fail(instr, "a boundary tensor of micro-batch " + std::to_string(q.micro_batch) + " arrived twice");
      into[q.micro_batch] = std::move(q.tensor);
    }
    pending.clear();
  }

  /// The schedule's own peak of Alloc'd bytes for this rank's program (the simulator's peak).
  int64_t predicted_peak_bytes() const {
    int64_t current = 0, peak = 0;
    std::map<std::string, int64_t> sizes;
    for (const ir::Instruction& i : program->instructions) {
      if (const auto* a = std::get_if<ir::Alloc>(&i.op)) {
        sizes[a->buffer] = a->bytes;
        peak = std::max(peak, current += a->bytes);
      } else if (const auto* f = std::get_if<ir::Free>(&i.op)) {
        current -= sizes[f->buffer];
      }
    }
    return peak;
  }

  void run(const ir::Instruction& instr) {
    try {
      run_unguarded(instr);
    } catch (const std::bad_alloc&) {
      oom(instr);
    } catch (const std::length_error&) {  // a size beyond what a vector can hold
      oom(instr);
    }
  }

  /// An allocation failed inside `instr`: names its buffers, the request, what was live and the
  /// peak the plan predicted.
  [[noreturn]] void oom(const ir::Instruction& instr) const {
    std::string buffers;
    for (const std::string& b : ir::buffers_of(instr)) buffers += (buffers.empty() ? "" : ", ") + b;
    fail(instr, "out of memory allocating " + std::to_string(Tensor::last_request_bytes) + " bytes for buffer " +
                    (buffers.empty() ? std::string("(scratch)") : buffers) + " with " + std::to_string(tracker.current) +
                    " bytes live; the plan predicted a peak of " + std::to_string(predicted_peak_bytes()) +
                    " bytes for this rank (hint: a plan with more sharding, recompute or a smaller micro-batch)");
  }

  void run_unguarded(const ir::Instruction& instr) {
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
          } else if constexpr (std::is_same_v<T, ir::Send>) {
            run_p2p(instr, p, true);
          } else {
            run_p2p(instr, p, false);
          }
        },
        instr.op);
  }

  void synchronize_state() {
    if (!comm || comm->world_size() <= 1) return;
    // Every element from exactly one owner, zeros elsewhere, summed over the world: exact.
    const int64_t n = state.table().total_elements;
    const bool replica0 = zero == 3 ? coord("dp_replicate") == 0
                                    : group_rank(schedule.mesh, options.rank, {"dp_replicate", "dp_shard", "cp"}) == 0;
    for (std::span<float> buf : {state.params(), state.adam_m(), state.adam_v()}) {
      std::pmr::vector<float> sum(static_cast<size_t>(n), 0.0f, K.memory());
      if (replica0)
        for (const auto& [name, u] : units)
          for_each_in(u, owned(u), [&](const Segment& s, int64_t fb, int64_t count, int64_t) {
            if (!s.tp_replicated || tp_rank == 0) std::copy_n(buf.data() + fb, count, sum.data() + fb);
          });
      comm->all_reduce(sum.data(), sum.data(), n, comm->all_axes());
      std::copy(sum.begin(), sum.end(), buf.begin());
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
    if (S != b.seq_len) {  // the rank's share of the sequence (fixed for the run)
      S = b.seq_len;
      cp_pos = ir::cp_positions(S, cp, cp_rank);
      T_cp = S / cp;
      if (sp && T_cp % tp != 0) {
        throw ir::InputError("--seq-len", "seq_len", "sequence parallelism splits the " + std::to_string(T_cp) +
                                                         " positions of a cp rank over tp = " + std::to_string(tp) + ": not divisible",
                             "choose a sequence length divisible by cp*tp" + std::string(cp > 1 ? "*2" : ""));
      }
      T_sp = sp ? T_cp / tp : T_cp;
      rope_tables.clear();
    }
    batch = &b;
    token_cache.clear();
    loss_sum = 0.0;
    grad_norm = 0.0;
    ddp_reduced = 0;
    last_scattered.clear();
    tracker.step_peak = tracker.current;
    tracker.planned_step_peak = tracker.planned;
    K.fill_zero(state.grads().data(), static_cast<int64_t>(state.grads().size()));
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
    if (!pending.empty()) leftovers += " (an unfinished batch of sends / recvs)";
    live.clear();
    fwd_handoff.clear();
    bwd_handoff.clear();
    pending.clear();
    batch = nullptr;
    if (!leftovers.empty()) throw std::runtime_error("the program left buffers live at its end:" + leftovers);
    const bool ddp = zero == 0 && comm && comm->group_size({"dp_replicate", "dp_shard", "cp"}) > 1;
    if (ddp && ddp_reduced != stage_layout.size) {
      throw std::runtime_error("the schedule's DDP buckets all-reduced " + std::to_string(ddp_reduced) + " of " +
                               std::to_string(stage_layout.size) + " gradients");
    }
    StepStats s;
    // Each rank's loss_sum is its tokens' share of the global mean; the report sums them over the
    // ranks holding different tokens (an all-reduce of the executor's own, not a schedule instruction).
    s.loss = sum_over(loss_sum, loss_axes);
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
