// The executor's state and its rooms (executor.hpp; docs/runtime_executor.md). One struct holds what
// a rank keeps; its member functions live in one file per concern, read in this order:
//   setup.cpp        process groups from the schedule's mesh and collectives; block and program indexes
//   views.cpp        named views of one instruction: activations, gradients, parameter slices, tokens
//   forward.cpp      the forward kernels, op by op
//   backward.cpp     the backward kernels (data part and weight part)
//   collectives.cpp  data-parallel collectives over parameter units; tensor collectives (tp, cp, loss)
//   transfers.cpp    pipeline send / recv of block boundary tensors
//   optimizer.cpp    global norm, clipping, AdamW on the owned elements; state synchronisation
//   executor.cpp     the step: instructions in program order (compute phases, alloc, free)
// Private to the runtime.
#pragma once

#include "storage.hpp"

#include "mgt/runtime/executor.hpp"

#include <cstdint>
#include <map>
#include <memory_resource>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mgt::rt {

using exec::BlockInfo;
using exec::Buffer;
using exec::OpKey;
using exec::Layout;
using exec::ParamRef;
using exec::Segment;
using exec::Tensor;
using exec::for_each_in;
using exec::pack;
using exec::slice_layout;
using exec::tp_slice;
using exec::unpack;

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
  std::vector<exec::BlockInfo> blocks;
  std::set<exec::OpKey> split_weight;  ///< ops with a separate bwd_weight instruction
  std::set<exec::OpKey> recomputed;    ///< ops with a recompute instruction
  std::map<int64_t, int64_t> anchor_of;  ///< collective with tensors -> the Compute it belongs to

  exec::Tracker tracker;
  std::map<std::string, Buffer> live;
  std::map<int64_t, Tensor> fwd_handoff, bwd_handoff;  ///< block boundary tensors, per micro-batch
  std::map<std::pair<int64_t, int64_t>, std::pair<Tensor, Tensor>> rope_tables;  ///< (T, D) -> cos, sin of the local positions

  // Process groups of this rank, read from the schedule (setup.cpp; docs/runtime_executor.md "Several ranks").
  int64_t tp = 1, tp_rank = 0, cp = 1, cp_rank = 0, pp = 1;
  bool sp = false;  ///< sequence parallel: outside tp regions the sequence is split over tp
  int64_t replica = 0, replicas = 1;
  Axes dp_axes;        ///< the replicas: data split (the mesh's dp_* axes)
  Axes loss_axes;      ///< every rank's tokens counted once: every mesh axis but tp
  Axes norm_axes;      ///< where owned gradients differ: tp, pp (+ the FSDP shard group)
  int64_t zero = 0;    ///< 0 (DDP) or 3 (FSDP / HSDP): whether the schedule gathers parameter units
  Axes shard_axes;     ///< FSDP shard group: the axes the unit all-gathers name
  Axes copy_axes;      ///< ranks that hold the same owned elements (loss_axes less pp and shard_axes)
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

  // ---- setup (setup.cpp) ----
  int64_t coord(const std::string& axis) const;
  void setup();
  void setup_groups();
  void check_supported() const;
  void index_blocks();
  void index_program();
  void anchor_collectives();

  // ---- per-instruction context and named views (views.cpp) ----
  struct Ctx {
    const ir::Instruction* instr = nullptr;
    const ir::Compute* c = nullptr;
    const ir::Block* block = nullptr;
    const exec::BlockInfo* info = nullptr;
    const ir::Op* op = nullptr;
    size_t op_index = 0;
    Buffer* buf = nullptr;
    int64_t B = 0, T = 0;  ///< micro-batch sequences; sequence positions this op processes
  };
  [[noreturn]] void fail(const ir::Instruction& instr, const std::string& what) const;
  [[noreturn]] void fail(const Ctx& x, const std::string& what) const { fail(*x.instr, what); }
  Ctx context_of(const ir::Instruction& instr, const ir::Compute& c);
  int64_t dim_size(const Ctx& x, char name, const ir::TensorDecl* t) const;
  const ir::TensorDecl& decl(const Ctx& x, const std::string& name) const;
  int64_t numel(const Ctx& x, const std::string& name) const;
  int64_t features(const Ctx& x, const std::string& name) const;
  bool is_param(const Ctx& x, const std::string& name) const { return decl(x, name).is_parameter; }
  ParamRef param_ref(const Ctx& x, const std::string& name) const;
  ParamRef contiguous_param(const Ctx& x, const std::string& name) const;
  float* param(const Ctx& x, const std::string& name) { return state.params().data() + contiguous_param(x, name).offset; }
  float* param_grad(const Ctx& x, const std::string& name) { return state.grads().data() + contiguous_param(x, name).offset; }
  Tensor& act(const Ctx& x, const std::string& name);
  const float* in(const Ctx& x, const std::string& name);
  float* out(const Ctx& x, const std::string& name, const std::string& key = {});
  float* scratch_saved(const Ctx& x, const std::string& key, int64_t n);
  const float* saved(const Ctx& x, const std::string& key);
  float* grad(const Ctx& x, const std::string& name, int64_t n = -1);
  const float* dout(const Ctx& x, const std::string& name);
  void drop(const Ctx& x, const std::string& key) { x.buf->tensors.erase(key); }
  std::pair<const float*, const float*> rope(int64_t T, int64_t D);
  const int32_t* tokens(const Ctx& x, bool targets);

  // ---- forward kernels (forward.cpp) ----
  struct Linear {
    int64_t N = 0, IC = 0, OC = 0;
    ParamRef w;
    bool row_parallel = false;  ///< the weight's input features are split over tp: the output is a partial sum
  };
  Linear linear_shape(const Ctx& x) const;
  cpu::AttentionConfig attention_config(const Ctx& x) const;
  const float* kv(const Ctx& x, const std::string& name, const cpu::AttentionConfig& ac);
  bool vocab_parallel(const Ctx& x) const;
  void forward(const Ctx& x, bool recompute);
  void forward_embedding(const Ctx& x);
  void forward_loss(const Ctx& x);

  // ---- backward kernels (backward.cpp) ----
  void backward(const Ctx& x, bool data, bool weight);
  void backward_embedding(const Ctx& x);
  void backward_attention(const Ctx& x);
  void backward_loss(const Ctx& x);

  // ---- collectives (collectives.cpp) ----
  /// A sequence axis split over a group: rank r's local row i sits at full row index(r, i).
  struct SeqSplit {
    int64_t local = 0, full = 0, group = 1, rank = 0;
    std::vector<std::vector<int64_t>> index;  ///< [r][i]
  };
  ShardRange owned(const Layout& u) const;
  int64_t chunk_of(const Layout& u) const;
  const Layout& unit_of(const ir::Instruction& instr, const std::string& buffer) const;
  void run_collective(const ir::Instruction& instr, const ir::Collective& c);
  void all_reduce_bucket(ShardRange r, float* g, int64_t count, const Axes& axes);
  SeqSplit tp_split() const;
  SeqSplit cp_split() const;
  Tensor& locate(const ir::Instruction& instr, const Ctx& x, const std::string& name);
  void gather_seq(const ir::Instruction& instr, const Axes& axes, Tensor& t, int64_t B, int64_t F, const SeqSplit& s);
  void reduce_scatter_seq(const ir::Instruction& instr, const Axes& axes, Tensor& t, int64_t B, int64_t F, const SeqSplit& s);
  void run_tensor_collective(const ir::Instruction& instr, const ir::Collective& c);
  void all_reduce_replicated_grads(const ir::Instruction& instr, const ir::Collective& c, const Ctx& x, int64_t elements);
  void run_loss_statistic(const ir::Instruction& instr, const ir::Collective& c, const Ctx& x, int64_t elements);
  void run_activation_collective(const ir::Instruction& instr, const ir::Collective& c, const Ctx& x, int64_t elements);
  double sum_over(double value, const Axes& axes);

  // ---- pipeline transfers (transfers.cpp) ----
  std::pair<bool, int64_t> boundary_of(const ir::Instruction& instr, const std::string& buffer) const;
  template <typename P>
  void run_p2p(const ir::Instruction& instr, const P& p, bool is_send);

  // ---- optimizer (optimizer.cpp) ----
  void run_optimizer(const ir::Instruction& instr, const ir::OptimizerStep& o);
  void synchronize_state();

  // ---- the step (executor.cpp) ----
  void run_compute(const ir::Instruction& instr, const ir::Compute& c);
  void run_alloc(const ir::Instruction& instr, const ir::Alloc& a);
  void run_free(const ir::Instruction& instr, const ir::Free& f);
  int64_t predicted_peak_bytes() const;
  void run(const ir::Instruction& instr);
  [[noreturn]] void oom(const ir::Instruction& instr) const;
  void run_unguarded(const ir::Instruction& instr);
  void begin_step(const StepBatch& b);
  void end_step();
  StepStats step(const StepBatch& b);
};

}  // namespace mgt::rt
