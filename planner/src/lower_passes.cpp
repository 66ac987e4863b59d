// The lowering passes (docs/lowering.md "Passes"), each one responsibility, run in order by
// lower.cpp. A pass appends nodes at keys (lower.hpp lowering::Key) and registers the buffers it
// uses; the memory pass turns the registrations into Alloc / Free.
#include "lower_pass_util.hpp"

#include "mgt/cost_model/task_cost.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

namespace mgt::plan::lowering {

namespace {

constexpr int64_t kBucketBytes = 25ll << 20;  // DDP bucket_cap_mb = 25 (estimator_internal.hpp kLastBucketBytes)
constexpr int64_t kOptimizerTrafficBytes = 30;

// Calls visit(task, position, copy, last kernel) for every copy the last micro-batch's backward
// ran a kernel for: where a copy's gradients are final, so gradient syncs hook on after it.
template <class Visit>
void for_each_final_backward_copy(const State& s, const Stage& st, Visit&& visit) {
  for (size_t t = 0; t < st.tasks.size(); ++t) {
    const Task& task = st.tasks[t];
    if (task.fwd || task.micro_batch != s.layout.grad_accum - 1) continue;
    for (size_t p = 0; p < st.unit_nodes[t].size(); ++p) {
      const int64_t last = st.unit_nodes[t][p].last;
      if (last >= 0) visit(t, p, unit_at(st, task, p), last);
    }
  }
}

}  // namespace

// ---- compute: fwd / bwd_data / bwd_weight per (op, copy, micro-batch) in pipeline order ----
void compute_pass(State& s) {
  for (Stage& st : s.stages) {
    st.unit_nodes.resize(st.tasks.size());
    for (size_t t = 0; t < st.tasks.size(); ++t) {
      const Task& task = st.tasks[t];
      const size_t n_units = st.chunks[size_t(task.chunk)].size();
      st.unit_nodes[t].resize(n_units);
      for (size_t i = 0; i < n_units; ++i) {
        const Unit& u = unit_at(st, task, i);
        const ir::Block& block = s.graph->blocks[size_t(u.block)];
        const BlockInfo& info = s.blocks[size_t(u.block)];
        const int32_t n = num_ops(s, u);
        UnitNodes& un = st.unit_nodes[t][i];
        for (auto* list : {&un.fwd, &un.recompute, &un.bwd_data, &un.bwd_weight}) list->assign(size_t(n), -1);
        const std::string act = act_name(s, u, task.micro_batch);
        auto compute = [&](int32_t j, ir::Phase phase, int64_t flops) {
          ir::Compute c;
          c.op = block.ops[size_t(j)].name;
          c.block = block.name;
          c.layer = u.copy;
          c.phase = phase;
          c.micro_batch = task.micro_batch;
          c.dims = info.ops[size_t(j)].dims;
          c.flops = flops;
          c.bytes = info.ops[size_t(j)].bytes;
          c.buffers = {act};
          return c;
        };
        if (task.fwd) {
          for (int32_t j = 0; j < n; ++j)
            un.fwd[size_t(j)] = add(st, key(t, i, fwd_part(j), 0), ir::Stream::compute,
                                    compute(j, ir::Phase::fwd, info.ops[size_t(j)].fwd_flops));
          continue;
        }
        for (int32_t j = n - 1; j >= 0; --j) {
          const OpInfo& op = info.ops[size_t(j)];
          // MFU convention: backward = 2x forward FLOPs, split data / weight for weight GEMMs.
          un.bwd_data[size_t(j)] = add(st, key(t, i, bwd_part(n, j), 0), ir::Stream::compute,
                                       compute(j, ir::Phase::bwd_data, op.has_weight_grad ? op.fwd_flops : 2 * op.fwd_flops));
          if (op.has_weight_grad)
            un.bwd_weight[size_t(j)] = add(st, key(t, i, bwd_part(n, j), 10), ir::Stream::compute,
                                           compute(j, ir::Phase::bwd_weight, op.fwd_flops));
        }
      }
    }
  }
  index_computes(s);
}

// ---- recompute: before a copy's backward, full (every op) or selective (norm / activation) ----
void recompute_pass(State& s) {
  if (s.layout.plan.recompute == ir::Recompute::none) return;
  for (Stage& st : s.stages)
    for (size_t t = 0; t < st.tasks.size(); ++t) {
      const Task& task = st.tasks[t];
      if (task.fwd) continue;
      for (size_t i = 0; i < st.unit_nodes[t].size(); ++i) {
        const Unit& u = unit_at(st, task, i);
        const ir::Block& block = s.graph->blocks[size_t(u.block)];
        const BlockInfo& info = s.blocks[size_t(u.block)];
        UnitNodes& un = st.unit_nodes[t][i];
        for (int32_t j = 0; j < num_ops(s, u); ++j) {
          const OpInfo& op = info.ops[size_t(j)];
          const bool redo = u.full_recompute || (s.layout.plan.recompute == ir::Recompute::selective && op.selective);
          if (!redo) continue;
          ir::Compute c;
          c.op = block.ops[size_t(j)].name;
          c.block = block.name;
          c.layer = u.copy;
          c.phase = ir::Phase::recompute;
          c.micro_batch = task.micro_batch;
          c.dims = op.dims;
          c.flops = op.fwd_flops;
          c.bytes = op.bytes;
          c.buffers = {act_name(s, u, task.micro_batch)};
          un.recompute[size_t(j)] = add(st, key(t, i, fwd_part(j), 0), ir::Stream::compute, std::move(c));
        }
      }
    }
  index_computes(s);
}

namespace {
// TP / CP / EP collectives exactly as cost::op_costs lists them, where the runtime needs them: one
// marked `before` is issued after the previous kernel and the op's kernel waits for it (it reads
// what is gathered); the others are issued after the op's kernel and the next kernel waits for them.
// Each names the tensors it moves (ir::Collective::tensors). Full recompute repeats the forward
// collectives (the CP K/V gather too), as the estimator prices it.
void block_collective_pass(State& s, cost::BlockCollective::Axis axis) {
  using Axis = cost::BlockCollective::Axis;
  const std::vector<std::string>& axes = axis == Axis::tp ? s.tp_axes : axis == Axis::cp ? s.cp_axes : s.ep_axes;
  if (axes.empty()) return;
  const ir::Stream stream = axis == Axis::tp ? ir::Stream::tp : axis == Axis::cp ? ir::Stream::cp : ir::Stream::ep;
  for (Stage& st : s.stages)
    for (size_t t = 0; t < st.tasks.size(); ++t) {
      const Task& task = st.tasks[t];
      for (size_t i = 0; i < st.unit_nodes[t].size(); ++i) {
        const Unit& u = unit_at(st, task, i);
        const BlockInfo& info = s.blocks[size_t(u.block)];
        UnitNodes& un = st.unit_nodes[t][i];
        const std::string ws = ws_name(s, u);
        auto emit = [&](int64_t anchor, const std::vector<cost::BlockCollective>& list, bool loss) {
          if (anchor < 0) return;
          std::vector<int64_t> before, after;
          const int64_t prev = st.prev_compute[size_t(anchor)];
          for (const auto& c : list) {
            if (c.axis != axis) continue;
            ir::Collective ic = s.collective(to_ir(c.kind), axes, c.bytes, loss ? ir::DType::f32 : s.ctx.dtype, ws);
            ic.tensors = c.tensors;
            ic.reduce = c.reduce;
            const Key at = with_slot(st.nodes[size_t(anchor)].key, st.nodes[size_t(anchor)].key.slot + (c.before ? -5 : 5));
            std::vector<int64_t> deps;
            if (!c.before) deps = {anchor};
            else if (prev >= 0) deps = {prev};
            (c.before ? before : after).push_back(add(st, at, stream, std::move(ic), deps));
          }
          if (!before.empty()) {
            auto& d = st.nodes[size_t(anchor)].instr.deps;
            d.insert(d.end(), before.begin(), before.end());
          }
          const int64_t next = st.next_compute[size_t(anchor)];
          if (next >= 0 && !after.empty()) {
            auto& d = st.nodes[size_t(next)].instr.deps;
            d.insert(d.end(), after.begin(), after.end());
          }
          un.collectives.insert(un.collectives.end(), before.begin(), before.end());
          un.collectives.insert(un.collectives.end(), after.begin(), after.end());
        };
        for (size_t j = 0; j < info.ops.size(); ++j) {
          const OpInfo& op = info.ops[j];
          if (task.fwd) {
            emit(un.fwd[j], op.cost.fwd_collectives, op.is_loss);
            continue;
          }
          emit(un.recompute[j], op.cost.fwd_collectives, op.is_loss);
        }
        if (!task.fwd)
          for (size_t j = info.ops.size(); j-- > 0;) emit(un.bwd_data[j], info.ops[j].cost.bwd_collectives, info.ops[j].is_loss);
      }
    }
}
}  // namespace

// With SP the replicated parameters of a copy (norm weights, row-parallel biases) see only their
// sequence shard: their gradients are summed over tp after the copy's last backward (Megatron-LM
// allreduce_layernorm_grads). Without SP every tp rank computes the same full gradient.
void sp_grad_all_reduce(State& s) {
  if (s.tp_axes.empty() || !s.ctx.sequence_parallel) return;
  for (Stage& st : s.stages)
    for_each_final_backward_copy(s, st, [&](size_t t, size_t p, const Unit& u, int64_t last) {
      std::vector<std::string> names;
      int64_t elements = 0;
      for (const ir::TensorDecl& d : s.graph->blocks[size_t(u.block)].tensors) {
        if (!d.is_parameter || std::any_of(d.dims.begin(), d.dims.end(), [](const ir::Dim& x) { return cost::is_tp_dim(x.name); }))
          continue;
        int64_t n = 1;
        for (const ir::Dim& x : d.dims) n *= x.size;
        names.push_back(d.name);
        elements += n;
      }
      if (names.empty()) return;
      ir::Collective c = s.collective(ir::CollectiveKind::all_reduce, s.tp_axes, elements * s.grad_bytes(), s.grad_dtype(), "grads");
      c.tensors = std::move(names);
      // Right after the copy's last kernel: before its activations are freed (the runtime reads
      // the op's context from them) and before FSDP reduce-scatters the gradients.
      add(st, key(t, p, end_part(num_ops(s, u)), 3), ir::Stream::tp, std::move(c), {last});
    });
}

void tp_pass(State& s) {
  block_collective_pass(s, cost::BlockCollective::Axis::tp);
  sp_grad_all_reduce(s);
}
void cp_pass(State& s) { block_collective_pass(s, cost::BlockCollective::Axis::cp); }
void ep_pass(State& s) { block_collective_pass(s, cost::BlockCollective::Axis::ep); }

// ---- FSDP (zero 3 over dp_shard x cp): all-gather bf16 params per copy one copy ahead, reshard
// after forward (the chunk's last copy stays gathered while its micro-batches are in flight),
// again before backward, reduce-scatter fp32 grads after each copy's backward ----
namespace {

// What the FSDP pass carries from one task of a stage to the next.
struct FsdpStageState {
  std::vector<int64_t> in_flight;  // per chunk: micro-batches between forward and backward
  std::vector<int64_t> kept;       // per chunk: buffer index of the chunk's last copy's w, -1 when none
  std::vector<std::vector<int64_t>> rs_done;  // reduce-scatters issued so far, in order
};

// Whether processing position p of the task is the chunk's last copy in forward order.
bool is_chunk_last_copy(const Task& task, size_t p, size_t n) { return (task.fwd ? p : n - 1 - p) == n - 1; }

// Issues the all-gather of processing position p at key `at` once `issue_after` has run; -1 when the
// copy has no parameters.
int64_t fsdp_gather_copy(State& s, Stage& st, FsdpStageState& f, size_t t, size_t p, Key at, int64_t issue_after) {
  const Task& task = st.tasks[t];
  const size_t n = st.unit_nodes[t].size(), c = size_t(task.chunk);
  const Unit& u = unit_at(st, task, p);
  const auto& cost = s.blocks[size_t(u.block)].cost;
  const int64_t pel = cost.param_elements_local;
  if (pel == 0) return -1;
  std::vector<int64_t> deps;
  if (issue_after >= 0) deps = {issue_after};
  const bool is_last = is_chunk_last_copy(task, p, n);
  if (!(is_last && f.kept[c] >= 0)) {
    // Allocated when the all-gather is issued (PyTorch's caching allocator hands out the output
    // then), not when the dp stream reaches it.
    open_buffer(st, w_name(s, u), pel * 2, ir::BufferKind::fsdp_buffer, with_slot(at, at.slot - 1), ir::Stream::compute,
                deps);
    if (is_last) f.kept[c] = int64_t(st.buffers.size()) - 1;
  }
  int64_t h = -1;
  const std::string name = w_name(s, u);
  const FsdpBytes fb = fsdp_bytes(s, cost);
  if (fb.gather_dense > 0 && !s.shard_axes.empty())
    h = add(st, at, ir::Stream::dp,
            s.collective(ir::CollectiveKind::all_gather, s.shard_axes, fb.gather_dense, ir::DType::bf16, name), deps);
  if (fb.gather_expert > 0 && !s.expert_shard_axes.empty())
    h = add(st, at, ir::Stream::dp,
            s.collective(ir::CollectiveKind::all_gather, s.expert_shard_axes, fb.gather_expert, ir::DType::bf16, name), deps);
  return h;
}

// All-gathers of task t, each copy's issued when the copy before it starts (forward also gathers
// its first copy up front); each copy's first kernel waits for its gather.
void fsdp_gather_task(State& s, Stage& st, FsdpStageState& f, size_t t) {
  const Task& task = st.tasks[t];
  auto& uns = st.unit_nodes[t];
  const size_t n = uns.size();
  auto issue_point = [&](size_t p) { return uns[p].first >= 0 ? st.prev_compute[size_t(uns[p].first)] : -1; };
  std::vector<int64_t> ag(n, -1);
  if (task.fwd) {
    ++f.in_flight[size_t(task.chunk)];
    ag[0] = fsdp_gather_copy(s, st, f, t, 0, key(t, 0, 0, -20), issue_point(0));
    for (size_t p = 0; p < n; ++p) {
      if (p + 1 < n) ag[p + 1] = fsdp_gather_copy(s, st, f, t, p + 1, key(t, p, 0, -15), issue_point(p));
      if (ag[p] >= 0 && uns[p].first >= 0) st.nodes[size_t(uns[p].first)].instr.deps.push_back(ag[p]);
    }
    return;
  }
  --f.in_flight[size_t(task.chunk)];
  for (size_t p = 0; p < n; ++p)
    if (p + 1 < n) ag[p + 1] = fsdp_gather_copy(s, st, f, t, p + 1, key(t, p, 0, -15), issue_point(p));
  for (size_t p = 0; p < n; ++p)
    if (ag[p] >= 0 && uns[p].first >= 0) st.nodes[size_t(uns[p].first)].instr.deps.push_back(ag[p]);
}

// Reshards the copy's gathered weights after its last kernel (FSDP2 post_forward / post_backward),
// unless it is the chunk's last copy with micro-batches still in flight.
void fsdp_reshard_copy(State& s, Stage& st, FsdpStageState& f, size_t t, size_t p) {
  const Task& task = st.tasks[t];
  const size_t n = st.unit_nodes[t].size(), c = size_t(task.chunk);
  const Unit& u = unit_at(st, task, p);
  const bool is_last = is_chunk_last_copy(task, p, n);
  const std::string name = w_name(s, u);
  BufferUse* w = nullptr;
  if (is_last) w = f.kept[c] >= 0 ? &st.buffers[size_t(f.kept[c])] : nullptr;
  else
    for (auto it = st.buffers.rbegin(); it != st.buffers.rend(); ++it)
      if (it->name == name && !it->closed) { w = &*it; break; }
  const bool free_w = !is_last || (!task.fwd && f.in_flight[c] == 0);
  if (w && free_w) {
    close_buffer(*w, key(t, p, end_part(num_ops(s, u)), 7), ir::Stream::compute, {st.unit_nodes[t][p].last});
    if (is_last) f.kept[c] = -1;
  }
}

// Backward writes the copy's unsharded gradient in bf16; after its last kernel, FSDP2 waits for the
// previous copy's reduce-scatter (freeing that fp32 input), then copies the gradient into an fp32
// reduce-scatter input and frees the bf16 one. The wait sits on the compute stream, so however far
// the dp stream falls behind, at most one fp32 input is in flight while the next copy's backward runs.
void fsdp_reduce_scatter_copy(State& s, Stage& st, FsdpStageState& f, size_t t, size_t p) {
  const Unit& u = unit_at(st, st.tasks[t], p);
  const auto& cost = s.blocks[size_t(u.block)].cost;
  const int64_t pel = cost.param_elements_local;
  const FsdpBytes fb = fsdp_bytes(s, cost);
  const int64_t last = st.unit_nodes[t][p].last;
  const int32_t end = end_part(num_ops(s, u));
  BufferUse& grad_bf16 = open_buffer(st, g_name(s, u) + ".bf16", pel * 2, ir::BufferKind::fsdp_buffer, key(t, p, 0, -10),
                                     ir::Stream::compute);
  close_buffer(grad_bf16, key(t, p, end, 9), ir::Stream::compute, {last});
  std::vector<int64_t> wait_previous = f.rs_done.empty() ? std::vector<int64_t>{} : f.rs_done.back();
  wait_previous.push_back(last);
  BufferUse& g = open_buffer(st, g_name(s, u), pel * s.grad_bytes(), ir::BufferKind::fsdp_buffer, key(t, p, end, 8), ir::Stream::compute,
                             std::move(wait_previous));
  std::vector<int64_t> rs;
  if (fb.reduce_dense > 0 && !s.shard_axes.empty())
    rs.push_back(add(st, key(t, p, end, 10), ir::Stream::dp,
                     s.collective(ir::CollectiveKind::reduce_scatter, s.shard_axes, fb.reduce_dense, s.grad_dtype(), g.name),
                     {last}));
  if (fb.reduce_expert > 0 && !s.expert_shard_axes.empty())
    rs.push_back(add(st, key(t, p, end, 10), ir::Stream::dp,
                     s.collective(ir::CollectiveKind::reduce_scatter, s.expert_shard_axes, fb.reduce_expert, s.grad_dtype(), g.name),
                     {last}));
  close_buffer(g, key(t, p, end, 11), ir::Stream::dp, rs);
  if (!rs.empty()) f.rs_done.push_back(std::move(rs));
}

}  // namespace

void fsdp_pass(State& s) {
  if (!s.layout.fsdp) return;
  for (Stage& st : s.stages) {
    FsdpStageState f{std::vector<int64_t>(st.chunks.size(), 0), std::vector<int64_t>(st.chunks.size(), -1), {}};
    for (size_t t = 0; t < st.tasks.size(); ++t) {
      if (st.unit_nodes[t].empty()) continue;
      fsdp_gather_task(s, st, f, t);
      for (size_t p = 0; p < st.unit_nodes[t].size(); ++p) {
        const Unit& u = unit_at(st, st.tasks[t], p);
        if (s.blocks[size_t(u.block)].cost.param_elements_local == 0 || st.unit_nodes[t][p].last < 0) continue;
        // The copy's weights are resharded before its gradients are reduced (FSDP2 post_backward).
        fsdp_reshard_copy(s, st, f, t, p);
        if (!st.tasks[t].fwd) fsdp_reduce_scatter_copy(s, st, f, t, p);
      }
    }
  }
}

// ---- data-parallel gradient sync during the last micro-batch's backward: DDP all-reduce in 25 MiB
// buckets (zero 0); HSDP all-reduce of each copy's gradient shard over dp_replicate (zero 3). Routed
// experts that reduce apart (ir::experts_reduce_apart) go over expert_dp (DDP, in buckets of their own:
// Megatron-Core keeps expert params in their own buffers) or expert_replicate (HSDP) ----
namespace {
// One DDP gradient buffer: bytes waiting for a full bucket, all-reduced over `axes`.
struct DdpBuffer {
  const std::vector<std::string>* axes;
  int64_t pending = 0;
  void add_bytes(State& s, Stage& st, Key at, int64_t bytes, int64_t after) {
    if (axes->empty()) return;
    for (pending += bytes; pending >= kBucketBytes; pending -= kBucketBytes)
      lowering::add(st, at, ir::Stream::dp, s.collective(ir::CollectiveKind::all_reduce, *axes, kBucketBytes, s.grad_dtype(), "grads"),
                    {after});
  }
  void flush(State& s, Stage& st, Key at, int64_t after) {
    if (axes->empty() || pending <= 0 || after < 0) return;
    lowering::add(st, at, ir::Stream::dp, s.collective(ir::CollectiveKind::all_reduce, *axes, pending, s.grad_dtype(), "grads"),
                  {after});
  }
};
}  // namespace

void dp_pass(State& s) {
  const bool apart = ir::experts_reduce_apart(s.layout);
  const bool ddp = s.layout.zero_stage == 0 && (!s.dp_axes.empty() || (apart && !s.expert_dp_axes.empty()));
  const bool hsdp = s.layout.zero_stage == 3 && (s.layout.plan.dp_replicate > 1 || (apart && !s.expert_replicate_axes.empty()));
  if (!ddp && !hsdp) return;
  const int64_t shard = s.layout.fsdp ? s.layout.shard_group : 1;
  const int64_t expert_shard = s.layout.fsdp ? s.layout.expert_shard_group : 1;
  for (Stage& st : s.stages) {
    DdpBuffer dense_buffer{&s.dp_axes}, expert_buffer{&s.expert_dp_axes};
    int64_t last_dep = -1;
    Key last_key{};
    for_each_final_backward_copy(s, st, [&](size_t t, size_t p, const Unit& u, int64_t last) {
      const Key at = key(t, p, end_part(num_ops(s, u)), 12);
      const auto& cost = s.blocks[size_t(u.block)].cost;
      const int64_t expert = frozen_base(s) || !apart ? 0 : cost.expert_param_elements_local;
      const int64_t dense = own_params(s, u) - expert;
      if (ddp) {
        dense_buffer.add_bytes(s, st, at, dense * s.grad_bytes(), last);
        expert_buffer.add_bytes(s, st, at, expert * s.grad_bytes(), last);
        last_dep = last;
        last_key = at;
        return;
      }
      const int64_t dense_bytes = (dense + shard - 1) / shard * s.grad_bytes();
      const int64_t expert_bytes = (expert + expert_shard - 1) / expert_shard * s.grad_bytes();
      for (const auto& [axes, bytes] : {std::pair{&s.replicate_axes, dense_bytes}, std::pair{&s.expert_replicate_axes, expert_bytes}})
        if (bytes > 0 && !axes->empty())
          add(st, at, ir::Stream::dp, s.collective(ir::CollectiveKind::all_reduce, *axes, bytes, s.grad_dtype(), "grads"), {last});
    });
    if (!ddp) continue;
    dense_buffer.flush(s, st, last_key, last_dep);
    expert_buffer.flush(s, st, last_key, last_dep);
  }
}

// ---- ZeRO-1 / 2: reduce-scatter grads over dp_shard x cp (once per step / per copy every
// micro-batch), all-reduce the shard over dp_replicate, all-gather updated bf16 params. Routed experts
// that reduce apart (ir::experts_reduce_apart) do the same over expert_shard and expert_replicate ----
namespace {
// Where one kind of state (dense, or routed experts apart) is sharded and replicated.
struct ZeroGroup {
  const std::vector<std::string>* shard_axes;
  const std::vector<std::string>* replicate_axes;
  int64_t elements = 0, shard_elements = 0;  // on the stage, and its local shard
};

// ZeRO-2: each copy's gradients reduce-scattered after its backward, every micro-batch.
void zero2_reduce_scatters(State& s, Stage& st, bool apart) {
  for (size_t t = 0; t < st.tasks.size(); ++t) {
    const Task& task = st.tasks[t];
    if (task.fwd) continue;
    for (size_t p = 0; p < st.unit_nodes[t].size(); ++p) {
      const Unit& u = unit_at(st, task, p);
      const int64_t own = own_params(s, u), lastu = st.unit_nodes[t][p].last;
      const int64_t expert = apart && !frozen_base(s) ? s.blocks[size_t(u.block)].cost.expert_param_elements_local : 0;
      const std::pair<const std::vector<std::string>*, int64_t> parts[] = {{&s.shard_axes, (own - expert) * s.grad_bytes()},
                                                                          {&s.expert_shard_axes, expert * s.grad_bytes()}};
      if (own <= 0 || lastu < 0) continue;
      if (std::none_of(std::begin(parts), std::end(parts), [](const auto& x) { return x.second > 0 && !x.first->empty(); }))
        continue;
      const int32_t end = end_part(num_ops(s, u));
      BufferUse& g = open_buffer(st, g_name(s, u), own * s.grad_bytes(), ir::BufferKind::gradients, key(t, p, 0, -10), ir::Stream::compute);
      std::vector<int64_t> rs;
      for (const auto& [axes, bytes] : parts)
        if (bytes > 0 && !axes->empty())
          rs.push_back(add(st, key(t, p, end, 10), ir::Stream::dp,
                           s.collective(ir::CollectiveKind::reduce_scatter, *axes, bytes, s.grad_dtype(), g.name), {lastu}));
      close_buffer(g, key(t, p, end, 11), ir::Stream::dp, rs);
    }
  }
}
}  // namespace

void zero_pass(State& s) {
  if (s.layout.zero_stage != 1 && s.layout.zero_stage != 2) return;
  const bool apart = ir::experts_reduce_apart(s.layout);
  for (Stage& st : s.stages) {
    const int64_t last = st.compute_order.empty() ? -1 : st.compute_order.back();
    std::vector<int64_t> after_last;
    if (last >= 0) after_last = {last};
    const int64_t expert = apart ? st.expert : 0;
    const int64_t expert_shard = (expert + s.layout.expert_shard_group - 1) / s.layout.expert_shard_group;
    const ZeroGroup groups[] = {{&s.shard_axes, &s.replicate_axes, st.params - expert, st.shard_params - expert_shard},
                                {&s.expert_shard_axes, &s.expert_replicate_axes, expert, expert_shard}};
    if (s.layout.zero_stage == 2) zero2_reduce_scatters(s, st, apart);
    for (const ZeroGroup& g : groups) {
      if (g.elements <= 0) continue;
      if (!g.shard_axes->empty() && s.layout.zero_stage == 1)
        add(st, epilogue(st, -20), ir::Stream::dp,
            s.collective(ir::CollectiveKind::reduce_scatter, *g.shard_axes, g.elements * s.grad_bytes(), s.grad_dtype(), "grads"),
            after_last);
      if (!g.replicate_axes->empty())
        add(st, epilogue(st, -15), ir::Stream::dp,
            s.collective(ir::CollectiveKind::all_reduce, *g.replicate_axes, g.shard_elements * s.grad_bytes(), s.grad_dtype(), "grads"),
            after_last);
      if (!g.shard_axes->empty())
        st.after_optimizer.push_back(add(
            st, epilogue(st, 5), ir::Stream::dp,
            s.collective(ir::CollectiveKind::all_gather, *g.shard_axes, g.elements * 2, ir::DType::bf16, "params")));
    }
  }
}

// ---- optimizer step on the local shard, after every stream has drained ----
void optimizer_pass(State& s) {
  for (Stage& st : s.stages) {
    const Key at = epilogue(st, 0);
    ir::OptimizerStep step;
    step.param_elements = st.shard_params;
    step.bytes = st.shard_params * kOptimizerTrafficBytes;
    step.buffers = {"params", "grads", "optim"};
    const int64_t h = add(st, at, ir::Stream::compute, step, all_tails(st, at, /*with_compute=*/false));
    for (int64_t a : st.after_optimizer) st.nodes[size_t(a)].instr.deps.push_back(h);
  }
}

// ---- memory: Alloc / Free of every buffer (model states, activations, workspaces, logits, and
// what the other passes registered) ----
void memory_pass(State& s) {
  for (Stage& st : s.stages) {
    // 1. model states for the whole step (estimator_memory.cpp memory terms per zero stage)
    const int64_t params = st.params, shard = st.shard_params;
    int64_t param_bytes = 0, grad_bytes = 0, optim_bytes = shard * 8;
    switch (s.layout.zero_stage) {
      case 0: param_bytes = params * 6; grad_bytes = params * s.grad_bytes(); optim_bytes = params * 8; break;
      case 1: param_bytes = params * 2 + shard * 4; grad_bytes = params * s.grad_bytes(); break;
      case 2: param_bytes = params * 2 + shard * 4; grad_bytes = shard * s.grad_bytes(); break;
      default: param_bytes = shard * 4; grad_bytes = shard * s.grad_bytes(); break;
    }
    param_bytes += st.frozen_bytes;
    const Key start{0, 0, 0, 0, 0};
    const Key end = epilogue(st, 30);
    const std::vector<int64_t> tails = all_tails(st, end, /*with_compute=*/true);
    for (auto [name, bytes, kind] : {std::tuple{"params", param_bytes, ir::BufferKind::parameters},
                                     std::tuple{"grads", grad_bytes, ir::BufferKind::gradients},
                                     std::tuple{"optim", optim_bytes, ir::BufferKind::optimizer}}) {
      BufferUse& b = open_buffer(st, name, bytes, kind, start, ir::Stream::compute);
      close_buffer(b, end, ir::Stream::compute, tails);
    }
    // 2. per copy and micro-batch: saved activations, workspaces, logits
    std::map<std::tuple<int32_t, int64_t, size_t>, size_t> saved;  // (chunk, mb, position) -> buffer
    for (size_t t = 0; t < st.tasks.size(); ++t) {
      const Task& task = st.tasks[t];
      const size_t n = st.unit_nodes[t].size();
      for (size_t p = 0; p < n; ++p) {
        const Unit& u = unit_at(st, task, p);
        const ir::Block& block = s.graph->blocks[size_t(u.block)];
        const BlockInfo& info = s.blocks[size_t(u.block)];
        const UnitNodes& un = st.unit_nodes[t][p];
        const int32_t nops = num_ops(s, u), endp = end_part(nops);
        if (un.last < 0) continue;
        std::vector<int64_t> ws_deps{un.last};
        ws_deps.insert(ws_deps.end(), un.collectives.begin(), un.collectives.end());
        const size_t position = task.fwd ? p : n - 1 - p;
        if (task.fwd) {
          int64_t bytes = info.cost.saved_bytes_none;
          if (u.full_recompute) bytes = info.cost.saved_bytes_full;
          else if (block.is_layer && s.layout.plan.recompute == ir::Recompute::selective) bytes = info.cost.saved_bytes_selective;
          open_buffer(st, act_name(s, u, task.micro_batch), bytes, ir::BufferKind::activations, key(t, p, 0, -5),
                      ir::Stream::compute);
          saved[{task.chunk, task.micro_batch, position}] = st.buffers.size() - 1;
          if (info.fwd_ws_bytes > 0) {
            BufferUse& w = open_buffer(st, ws_name(s, u), info.fwd_ws_bytes, ir::BufferKind::workspace, key(t, p, 0, -8),
                                       ir::Stream::compute);
            close_buffer(w, key(t, p, endp, 25), ir::Stream::compute, ws_deps);
          }
        } else {
          auto it = saved.find({task.chunk, task.micro_batch, position});
          if (it == saved.end()) throw std::logic_error("lowering: backward before forward for " + tag(s, u));
          // Freed as autograd consumes them, before FSDP's post-backward (slots 7-11) reshards and
          // reduces the copy.
          close_buffer(st.buffers[it->second], key(t, p, endp, 5), ir::Stream::compute, {un.last});
          saved.erase(it);
          // Backward transients (estimator: the gradients of the two largest tensors, plus one
          // layer's rematerialised activations under full recompute) and the collectives' buffers.
          int64_t bytes = 2 * info.cost.largest_tensor_bytes + (u.full_recompute ? info.cost.saved_bytes_none : 0);
          bytes = std::max(bytes, info.bwd_collective_bytes);
          if (u.full_recompute) bytes = std::max(bytes, info.recompute_collective_bytes);
          // allocated after the loss's backward when the copy's backward starts with it (the logits
          // working set and the backward transients are not live together, as in the estimator)
          int32_t part = 0;
          const bool any_recompute = std::any_of(un.recompute.begin(), un.recompute.end(), [](int64_t h) { return h >= 0; });
          if (!any_recompute)
            for (int32_t j = nops - 1; j >= 0 && info.ops[size_t(j)].is_loss; --j) part = bwd_part(nops, j) + 1;
          if (bytes > 0) {
            BufferUse& w = open_buffer(st, ws_name(s, u), bytes, ir::BufferKind::workspace, key(t, p, part, -8  /* ahead of `before` collectives at -5 */),
                                       ir::Stream::compute);
            close_buffer(w, key(t, p, endp, 4), ir::Stream::compute, ws_deps);
          }
        }
        for (int32_t j = 0; j < nops; ++j) {
          const OpInfo& op = info.ops[size_t(j)];
          if (!op.is_loss || info.cost.logits_bytes == 0) continue;
          const int64_t anchor = task.fwd ? un.fwd[size_t(j)] : un.bwd_data[size_t(j)];
          if (anchor < 0) continue;
          const Key k = st.nodes[size_t(anchor)].key;
          BufferUse& l = open_buffer(st, "logits[" + tag(s, u) + "]", info.cost.logits_bytes, ir::BufferKind::logits,
                                     with_slot(k, -3), ir::Stream::compute);
          close_buffer(l, with_slot(k, 4), ir::Stream::compute, {anchor});
        }
      }
    }
    // 3. emit every registered buffer
    for (const BufferUse& b : st.buffers) {
      if (!b.closed) throw std::logic_error("lowering: buffer '" + b.name + "' is never freed");
      add(st, b.alloc_at, b.alloc_stream, ir::Alloc{b.name, b.bytes, b.kind}, b.alloc_deps);
    }
    for (const BufferUse& b : st.buffers) add(st, b.free_at, b.free_stream, ir::Free{b.name}, b.free_deps);
  }
}

}  // namespace mgt::plan::lowering
