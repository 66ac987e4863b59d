// The lowering passes (docs/lowering.md "Passes"), each one responsibility, run in order by
// lower.cpp. A pass appends nodes at keys (lower.hpp lowering::Key) and registers the buffers it
// uses; the memory pass turns the registrations into Alloc / Free.
#include "mgt/planner/lower.hpp"

#include "mgt/cost_model/task_cost.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

namespace mgt::plan::lowering {

namespace {

constexpr int64_t kBucketBytes = 25ll << 20;  // DDP bucket_cap_mb = 25 (estimator.cpp kLastBucketBytes)
constexpr int64_t kOptimizerTrafficBytes = 30;

int32_t fwd_part(int32_t j) { return 1 + j; }
int32_t bwd_part(int32_t n, int32_t j) { return 1 + n + (n - 1 - j); }
int32_t end_part(int32_t n) { return 2 * n + 2; }
Key key(size_t task, size_t unit, int32_t part, int32_t slot) {
  return Key{int32_t(task) + 1, int32_t(unit) + 1, part, slot, 0};
}
Key with_slot(Key k, int32_t slot) {
  k.slot = slot;
  return k;
}
Key epilogue(const Stage& st, int32_t slot) { return Key{int32_t(st.tasks.size()) + 1, 0, 0, slot, 0}; }

/// The copy processed at position i of task t (backward walks the chunk in reverse).
const Unit& unit_at(const Stage& st, const Task& t, size_t i) {
  const auto& units = st.chunks[size_t(t.chunk)];
  return t.fwd ? units[i] : units[units.size() - 1 - i];
}
int32_t num_ops(const State& s, const Unit& u) { return int32_t(s.blocks[size_t(u.block)].ops.size()); }
std::string tag(const State& s, const Unit& u) {
  return s.graph->blocks[size_t(u.block)].name + "." + std::to_string(u.copy);
}
std::string act_name(const State& s, const Unit& u, int64_t mb) { return "act[" + tag(s, u) + "]m" + std::to_string(mb); }
std::string ws_name(const State& s, const Unit& u) { return "ws[" + tag(s, u) + "]"; }
std::string w_name(const State& s, const Unit& u) { return "w[" + tag(s, u) + "]"; }
std::string g_name(const State& s, const Unit& u) { return "g[" + tag(s, u) + "]"; }

// A block collective as a Collective instruction, which never carries send_recv (a Send + Recv).
ir::CollectiveKind to_ir(ir::CollectiveKind kind) {
  if (kind == ir::CollectiveKind::send_recv)
    throw std::logic_error("lowering: a block collective cannot be a send_recv");
  return kind;
}

BufferUse& open_buffer(Stage& st, std::string name, int64_t bytes, ir::BufferKind kind, Key at, ir::Stream stream,
                       std::vector<int64_t> alloc_deps = {}) {
  BufferUse b;
  b.name = std::move(name);
  b.bytes = bytes;
  b.kind = kind;
  b.alloc_at = at;
  b.alloc_stream = stream;
  b.alloc_deps = std::move(alloc_deps);
  st.buffers.push_back(std::move(b));
  return st.buffers.back();
}
void close_buffer(BufferUse& b, Key at, ir::Stream stream, std::vector<int64_t> deps) {
  b.free_at = at;
  b.free_stream = stream;
  b.free_deps = std::move(deps);
  b.closed = true;
}

bool frozen_base(const State& s) { return s.ctx.task == ir::Task::lora || s.ctx.task == ir::Task::qlora; }

/// Elements of a copy's trained parameters counted once on the stage (the tied second copy excluded);
/// under LoRA the adapters alone.
int64_t own_params(const State& s, const Unit& u) {
  const auto& cost = s.blocks[size_t(u.block)].cost;
  return frozen_base(s) ? cost.adapter_param_elements_local : cost.param_elements_local - u.tied_elements;
}

/// FSDP traffic of one copy: bytes all-gathered (dense, expert) and fp32 gradient bytes reduce-scattered
/// (dense, expert). LoRA gathers the frozen base as stored with the bf16 adapters and reduces the
/// adapters' gradients only (the estimator's rule, estimator.cpp stage_time).
struct FsdpBytes {
  int64_t gather_dense = 0, gather_expert = 0, reduce_dense = 0, reduce_expert = 0;
};
FsdpBytes fsdp_bytes(const State& s, const cost::BlockCost& cost) {
  const int64_t pel = cost.param_elements_local, expert = cost.expert_param_elements_local;
  if (!frozen_base(s)) return {(pel - expert) * 2, expert * 2, (pel - expert) * 4, expert * 4};
  const int64_t adapters = cost.adapter_param_elements_local;
  return {adapters * 2 + int64_t(cost::frozen_base_bytes(pel, cost.nf4_param_elements_local)), 0, adapters * 4, 0};
}

/// Last node (by key) on `stream` whose key is below `limit`; -1 when none.
int64_t stream_tail(const Stage& st, ir::Stream stream, const Key& limit) {
  int64_t best = -1;
  for (size_t h = 0; h < st.nodes.size(); ++h) {
    const Node& n = st.nodes[h];
    if (n.instr.stream != stream || !(n.key < limit)) continue;
    if (best < 0 || st.nodes[size_t(best)].key < n.key || st.nodes[size_t(best)].key == n.key) best = int64_t(h);
  }
  return best;
}
std::vector<int64_t> all_tails(const Stage& st, const Key& limit, bool with_compute) {
  std::vector<int64_t> out;
  for (int k = 0; k < ir::kNumStreams; ++k) {
    if (!with_compute && ir::Stream(k) == ir::Stream::compute) continue;
    const int64_t h = stream_tail(st, ir::Stream(k), limit);
    if (h >= 0) out.push_back(h);
  }
  return out;
}

int64_t task_first(const Stage& st, size_t t) {
  for (const UnitNodes& u : st.unit_nodes[t])
    if (u.first >= 0) return u.first;
  return -1;
}
int64_t task_last(const Stage& st, size_t t) {
  for (auto it = st.unit_nodes[t].rbegin(); it != st.unit_nodes[t].rend(); ++it)
    if (it->last >= 0) return it->last;
  return -1;
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
  if (s.plan.recompute == ir::Recompute::none) return;
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
          const bool redo = u.full_recompute || (s.plan.recompute == ir::Recompute::selective && op.selective);
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
    for (size_t t = 0; t < st.tasks.size(); ++t) {
      const Task& task = st.tasks[t];
      if (task.fwd || task.micro_batch != s.grad_accum - 1) continue;
      for (size_t p = 0; p < st.unit_nodes[t].size(); ++p) {
        const Unit& u = unit_at(st, task, p);
        const int64_t last = st.unit_nodes[t][p].last;
        if (last < 0) continue;
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
        if (names.empty()) continue;
        ir::Collective c = s.collective(ir::CollectiveKind::all_reduce, s.tp_axes, elements * 4, ir::DType::f32, "grads");
        c.tensors = std::move(names);
        // Right after the copy's last kernel: before its activations are freed (the runtime reads
        // the op's context from them) and before FSDP reduce-scatters the gradients.
        add(st, key(t, p, end_part(num_ops(s, u)), 3), ir::Stream::tp, std::move(c), {last});
      }
    }
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
void fsdp_pass(State& s) {
  if (!s.fsdp) return;
  for (Stage& st : s.stages) {
    std::vector<int64_t> in_flight(st.chunks.size(), 0);
    std::vector<int64_t> kept(st.chunks.size(), -1);  // buffer index of the chunk's last copy's w
    std::vector<std::vector<int64_t>> rs_done;  // reduce-scatters issued so far, in order
    for (size_t t = 0; t < st.tasks.size(); ++t) {
      const Task& task = st.tasks[t];
      auto& uns = st.unit_nodes[t];
      const size_t n = uns.size();
      if (n == 0) continue;
      const size_t c = size_t(task.chunk);
      // Issues the all-gather of processing position p at key `at` once `issue_after` has run.
      auto gather = [&](size_t p, Key at, int64_t issue_after) -> int64_t {
        const Unit& u = unit_at(st, task, p);
        const auto& cost = s.blocks[size_t(u.block)].cost;
        const int64_t pel = cost.param_elements_local;
        if (pel == 0) return -1;
        std::vector<int64_t> deps;
        if (issue_after >= 0) deps = {issue_after};
        const bool is_last = (task.fwd ? p : n - 1 - p) == n - 1;
        if (!(is_last && kept[c] >= 0)) {
          // Allocated when the all-gather is issued (PyTorch's caching allocator hands out the output
          // then), not when the dp stream reaches it.
          BufferUse& b = open_buffer(st, w_name(s, u), pel * 2, ir::BufferKind::fsdp_buffer, with_slot(at, at.slot - 1),
                                     ir::Stream::compute, deps);
          if (is_last) kept[c] = int64_t(st.buffers.size()) - 1;
          (void)b;
        }
        int64_t h = -1;
        const std::string name = w_name(s, u);
        const FsdpBytes fb = fsdp_bytes(s, cost);
        if (fb.gather_dense > 0 && !s.shard_axes.empty())
          h = add(st, at, ir::Stream::dp,
                  s.collective(ir::CollectiveKind::all_gather, s.shard_axes, fb.gather_dense, ir::DType::bf16, name), deps);
        if (fb.gather_expert > 0 && !s.expert_shard_axes.empty())
          h = add(st, at, ir::Stream::dp,
                  s.collective(ir::CollectiveKind::all_gather, s.expert_shard_axes, fb.gather_expert, ir::DType::bf16, name),
                  deps);
        return h;
      };
      auto issue_point = [&](size_t p) { return uns[p].first >= 0 ? st.prev_compute[size_t(uns[p].first)] : -1; };
      std::vector<int64_t> ag(n, -1);
      if (task.fwd) {
        ++in_flight[c];
        ag[0] = gather(0, key(t, 0, 0, -20), issue_point(0));
        for (size_t p = 0; p < n; ++p) {
          if (p + 1 < n) ag[p + 1] = gather(p + 1, key(t, p, 0, -15), issue_point(p));
          if (ag[p] >= 0 && uns[p].first >= 0) st.nodes[size_t(uns[p].first)].instr.deps.push_back(ag[p]);
        }
      } else {
        --in_flight[c];
        for (size_t p = 0; p < n; ++p)
          if (p + 1 < n) ag[p + 1] = gather(p + 1, key(t, p, 0, -15), issue_point(p));
        for (size_t p = 0; p < n; ++p)
          if (ag[p] >= 0 && uns[p].first >= 0) st.nodes[size_t(uns[p].first)].instr.deps.push_back(ag[p]);
      }
      // Buffers opened in this task by name, to close them after the copy's last kernel.
      for (size_t p = 0; p < n; ++p) {
        const Unit& u = unit_at(st, task, p);
        const auto& cost = s.blocks[size_t(u.block)].cost;
        const int64_t pel = cost.param_elements_local;
        if (pel == 0 || uns[p].last < 0) continue;
        const int32_t end = end_part(num_ops(s, u));
        const bool is_last = (task.fwd ? p : n - 1 - p) == n - 1;
        const std::string name = w_name(s, u);
        // find the open buffer for this copy's w
        BufferUse* w = nullptr;
        if (is_last) w = kept[c] >= 0 ? &st.buffers[size_t(kept[c])] : nullptr;
        else
          for (auto it = st.buffers.rbegin(); it != st.buffers.rend(); ++it)
            if (it->name == name && !it->closed) { w = &*it; break; }
        const bool free_w = !is_last || (!task.fwd && in_flight[c] == 0);
        // The copy's weights are resharded before its gradients are reduced (FSDP2 post_backward).
        if (w && free_w) {
          close_buffer(*w, key(t, p, end, 7), ir::Stream::compute, {uns[p].last});
          if (is_last) kept[c] = -1;
        }
        if (task.fwd) continue;
        // Backward writes the copy's unsharded gradient in bf16; after its last kernel, FSDP2 waits
        // for the previous copy's reduce-scatter (freeing that fp32 input), then copies the gradient
        // into an fp32 reduce-scatter input and frees the bf16 one. The wait sits on the compute
        // stream, so however far the dp stream falls behind, at most one fp32 input is in flight
        // while the next copy's backward runs.
        BufferUse& grad_bf16 = open_buffer(st, g_name(s, u) + ".bf16", pel * 2, ir::BufferKind::fsdp_buffer,
                                           key(t, p, 0, -10), ir::Stream::compute);
        close_buffer(grad_bf16, key(t, p, end, 9), ir::Stream::compute, {uns[p].last});
        std::vector<int64_t> wait_previous = rs_done.empty() ? std::vector<int64_t>{} : rs_done.back();
        wait_previous.push_back(uns[p].last);
        BufferUse& g = open_buffer(st, g_name(s, u), pel * 4, ir::BufferKind::fsdp_buffer, key(t, p, end, 8),
                                   ir::Stream::compute, std::move(wait_previous));
        std::vector<int64_t> rs;
        const FsdpBytes fb = fsdp_bytes(s, cost);
        if (fb.reduce_dense > 0 && !s.shard_axes.empty())
          rs.push_back(add(st, key(t, p, end, 10), ir::Stream::dp,
                           s.collective(ir::CollectiveKind::reduce_scatter, s.shard_axes, fb.reduce_dense,
                                        ir::DType::f32, g.name),
                           {uns[p].last}));
        if (fb.reduce_expert > 0 && !s.expert_shard_axes.empty())
          rs.push_back(add(st, key(t, p, end, 10), ir::Stream::dp,
                           s.collective(ir::CollectiveKind::reduce_scatter, s.expert_shard_axes, fb.reduce_expert,
                                        ir::DType::f32, g.name),
                           {uns[p].last}));
        close_buffer(g, key(t, p, end, 11), ir::Stream::dp, rs);
        if (!rs.empty()) rs_done.push_back(std::move(rs));
      }
    }
  }
}

// ---- data-parallel gradient sync during the last micro-batch's backward: DDP all-reduce in 25 MiB
// buckets (zero 0); HSDP all-reduce of each copy's gradient shard over dp_replicate (zero 3) ----
void dp_pass(State& s) {
  const bool ddp = s.zero == 0 && !s.dp_axes.empty();
  const bool hsdp = s.zero == 3 && s.plan.dp_replicate > 1;
  if (!ddp && !hsdp) return;
  const int64_t shard = s.fsdp ? s.shard_group : 1, expert_shard = s.fsdp ? s.expert_shard_group : 1;
  for (Stage& st : s.stages) {
    int64_t acc = 0, last_dep = -1;
    Key last_key{};
    for (size_t t = 0; t < st.tasks.size(); ++t) {
      const Task& task = st.tasks[t];
      if (task.fwd || task.micro_batch != s.grad_accum - 1) continue;
      for (size_t p = 0; p < st.unit_nodes[t].size(); ++p) {
        const Unit& u = unit_at(st, task, p);
        const int64_t last = st.unit_nodes[t][p].last;
        if (last < 0) continue;
        const Key at = key(t, p, end_part(num_ops(s, u)), 12);
        if (ddp) {
          acc += own_params(s, u) * 4;
          for (; acc >= kBucketBytes; acc -= kBucketBytes)
            add(st, at, ir::Stream::dp,
                s.collective(ir::CollectiveKind::all_reduce, s.dp_axes, kBucketBytes, ir::DType::f32, "grads"), {last});
          last_dep = last;
          last_key = at;
          continue;
        }
        const auto& cost = s.blocks[size_t(u.block)].cost;
        const int64_t expert = frozen_base(s) ? 0 : cost.expert_param_elements_local;
        const int64_t dense = own_params(s, u) - expert;
        const int64_t bytes = ((dense + shard - 1) / shard + (expert + expert_shard - 1) / expert_shard) * 4;
        if (bytes > 0)
          add(st, at, ir::Stream::dp,
              s.collective(ir::CollectiveKind::all_reduce, s.replicate_axes, bytes, ir::DType::f32, "grads"), {last});
      }
    }
    if (ddp && acc > 0 && last_dep >= 0)
      add(st, last_key, ir::Stream::dp, s.collective(ir::CollectiveKind::all_reduce, s.dp_axes, acc, ir::DType::f32, "grads"),
          {last_dep});
  }
}

// ---- ZeRO-1 / 2: reduce-scatter grads over dp_shard x cp (once per step / per copy every
// micro-batch), all-reduce the shard over dp_replicate, all-gather updated bf16 params ----
void zero_pass(State& s) {
  if (s.zero != 1 && s.zero != 2) return;
  for (Stage& st : s.stages) {
    const int64_t last = st.compute_order.empty() ? -1 : st.compute_order.back();
    std::vector<int64_t> after_last;
    if (last >= 0) after_last = {last};
    if (!s.shard_axes.empty() && s.zero == 2)
      for (size_t t = 0; t < st.tasks.size(); ++t) {
        const Task& task = st.tasks[t];
        if (task.fwd) continue;
        for (size_t p = 0; p < st.unit_nodes[t].size(); ++p) {
          const Unit& u = unit_at(st, task, p);
          const int64_t bytes = own_params(s, u) * 4, lastu = st.unit_nodes[t][p].last;
          if (bytes <= 0 || lastu < 0) continue;
          const int32_t end = end_part(num_ops(s, u));
          BufferUse& g = open_buffer(st, g_name(s, u), bytes, ir::BufferKind::gradients, key(t, p, 0, -10), ir::Stream::compute);
          const int64_t rs = add(st, key(t, p, end, 10), ir::Stream::dp,
                                 s.collective(ir::CollectiveKind::reduce_scatter, s.shard_axes, bytes, ir::DType::f32, g.name),
                                 {lastu});
          close_buffer(g, key(t, p, end, 11), ir::Stream::dp, {rs});
        }
      }
    if (!s.shard_axes.empty() && s.zero == 1)
      add(st, epilogue(st, -20), ir::Stream::dp,
          s.collective(ir::CollectiveKind::reduce_scatter, s.shard_axes, st.params * 4, ir::DType::f32, "grads"), after_last);
    if (s.plan.dp_replicate > 1)
      add(st, epilogue(st, -15), ir::Stream::dp,
          s.collective(ir::CollectiveKind::all_reduce, s.replicate_axes, st.shard_params * 4, ir::DType::f32, "grads"),
          after_last);
    if (!s.shard_axes.empty())
      st.after_optimizer.push_back(add(
          st, epilogue(st, 5), ir::Stream::dp,
          s.collective(ir::CollectiveKind::all_gather, s.shard_axes, st.params * 2, ir::DType::bf16, "params")));
  }
}

// ---- pipeline send / recv (docs/lowering.md "Pipeline"): the compute order per stage is 1F1B or
// Megatron's interleaved order; the pp stream issues its transfers in one global order taken from
// a dry run of that compute order with the per-op times, so every stage agrees and no rendezvous
// waits for a later one ----
void pp_pass(State& s) {
  const int64_t pp = s.plan.pp, vpp = s.plan.vpp, ga = s.grad_accum, V = pp * vpp;
  if (pp == 1) return;
  // 1. task durations per (stage, chunk)
  std::vector<std::vector<double>> fwd_s(static_cast<size_t>(pp)), bwd_s(static_cast<size_t>(pp));
  for (Stage& st : s.stages)
    for (const auto& chunk : st.chunks) {
      double f = 1e-9, b = 1e-9;
      for (const Unit& u : chunk)
        for (const OpInfo& op : s.blocks[size_t(u.block)].ops) {
          f += op.cost.fwd_s;
          b += op.cost.bwd_data_s + op.cost.bwd_weight_s;
          if (u.full_recompute) b += op.cost.fwd_s;
          else if (s.plan.recompute == ir::Recompute::selective && op.selective) b += op.cost.selective_recompute_s;
        }
      fwd_s[size_t(st.index)].push_back(f);
      bwd_s[size_t(st.index)].push_back(b);
    }
  // 2. dry run of the compute order
  std::vector<double> fin_f(size_t(V * ga), -1), fin_b(size_t(V * ga), -1);
  auto at = [&](int64_t v, int64_t m) { return size_t(v * ga + m); };
  std::vector<size_t> next(static_cast<size_t>(pp), 0);
  std::vector<double> clock(static_cast<size_t>(pp), 0);
  size_t done = 0, total = 0;
  for (const Stage& st : s.stages) total += st.tasks.size();
  while (done < total) {
    bool progress = false;
    for (Stage& st : s.stages) {
      const int64_t k = st.index;
      for (size_t& i = next[size_t(k)]; i < st.tasks.size(); ++i) {
        const Task& task = st.tasks[i];
        const int64_t v = task.chunk * pp + k, m = task.micro_batch;
        double ready = 0;
        if (task.fwd) {
          if (v > 0 && fin_f[at(v - 1, m)] < 0) break;
          if (v > 0) ready = fin_f[at(v - 1, m)];
        } else {
          const double r = v == V - 1 ? fin_f[at(v, m)] : fin_b[at(v + 1, m)];
          if (r < 0) break;
          ready = r;
        }
        const double end = std::max(clock[size_t(k)], ready) +
                           (task.fwd ? fwd_s : bwd_s)[size_t(k)][size_t(task.chunk)];
        clock[size_t(k)] = end;
        (task.fwd ? fin_f : fin_b)[at(v, m)] = end;
        ++done;
        progress = true;
      }
    }
    if (!progress) throw std::logic_error("lowering: the pipeline order cannot run (no stage can proceed)");
  }
  // 3. transfers in one global order
  struct Transfer {
    double time;
    int dir;  // 0 activation forward, 1 gradient backward
    int64_t v, m;
  };
  std::vector<Transfer> transfers;
  for (int64_t v = 0; v < V; ++v)
    for (int64_t m = 0; m < ga; ++m) {
      if (v + 1 < V) transfers.push_back({fin_f[at(v, m)], 0, v, m});
      if (v > 0) transfers.push_back({fin_b[at(v, m)], 1, v, m});
    }
  std::sort(transfers.begin(), transfers.end(), [](const Transfer& a, const Transfer& b) {
    return std::tie(a.time, a.dir, a.v, a.m) < std::tie(b.time, b.dir, b.v, b.m);
  });
  // task index per (stage, fwd, chunk, mb)
  std::vector<std::vector<std::vector<int64_t>>> index(static_cast<size_t>(pp));
  for (Stage& st : s.stages) {
    auto& idx = index[size_t(st.index)];
    idx.assign(2, std::vector<int64_t>(size_t(vpp * ga), -1));
    for (size_t t = 0; t < st.tasks.size(); ++t)
      idx[st.tasks[t].fwd ? 0 : 1][size_t(st.tasks[t].chunk * ga + st.tasks[t].micro_batch)] = int64_t(t);
  }
  auto lookup = [&](int64_t stage, bool fwd, int64_t chunk, int64_t m) {
    return size_t(index[size_t(stage)][fwd ? 0 : 1][size_t(chunk * ga + m)]);
  };
  struct Op {
    bool send;
    size_t transfer;
    size_t task;  // the producing task (send) or the consuming task (recv)
  };
  std::vector<std::vector<Op>> ops(static_cast<size_t>(pp));
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& tr = transfers[i];
    const int64_t to_v = tr.dir == 0 ? tr.v + 1 : tr.v - 1;
    const int64_t from = tr.v % pp, to = to_v % pp;
    ops[size_t(from)].push_back({true, i, lookup(from, tr.dir == 0, tr.v / pp, tr.m)});
    ops[size_t(to)].push_back({false, i, lookup(to, tr.dir == 0, to_v / pp, tr.m)});
  }
  // 4. keys: sends right after their producer, recvs as late as their consumer allows, monotone
  const Key inf{std::numeric_limits<int32_t>::max(), 0, 0, 0, 0};
  for (Stage& st : s.stages) {
    const auto& list = ops[size_t(st.index)];
    std::vector<Key> keys(list.size());
    Key suffix = inf;
    for (size_t i = list.size(); i-- > 0;) {
      if (!list[i].send) suffix = std::min(suffix, Key{int32_t(list[i].task) + 1, 0, 0, -30, 0});
      keys[i] = suffix;
    }
    Key running{};
    for (size_t i = 0; i < list.size(); ++i) {
      const Task& task = st.tasks[list[i].task];
      const int32_t units = int32_t(st.chunks[size_t(task.chunk)].size());
      const Key own = list[i].send ? Key{int32_t(list[i].task) + 1, units + 1, 0, 30, 0} : keys[i];
      running = std::max(running, own);
      keys[i] = running;
      keys[i].seq = int32_t(2 * i + 1);
    }
    // 5. emit
    std::vector<int64_t> recv_of(st.tasks.size(), -1);
    for (size_t i = 0; i < list.size(); ++i) {
      const Transfer& tr = transfers[list[i].transfer];
      const bool fwd = tr.dir == 0;
      const size_t t = list[i].task;
      Key alloc_key = keys[i];
      alloc_key.seq -= 1;
      if (!list[i].send) {
        const int64_t v = fwd ? tr.v + 1 : tr.v - 1;
        const std::string name = std::string(fwd ? "x[" : "dy[") + std::to_string(v) + "]m" + std::to_string(tr.m);
        ir::Recv r;
        r.axis = "pp";
        r.offset = fwd ? -1 : 1;
        r.bytes = s.boundary_bytes;
        r.buffer = name;
        r.tag = tr.dir;
        const int64_t h = add(st, keys[i], ir::Stream::pp, r);
        recv_of[t] = h;
        const int64_t first = task_first(st, t);
        BufferUse& b = open_buffer(st, name, s.boundary_bytes, ir::BufferKind::comm_buffer, alloc_key, ir::Stream::pp);
        if (first >= 0) {
          st.nodes[size_t(first)].instr.deps.push_back(h);
          close_buffer(b, with_slot(st.nodes[size_t(first)].key, 25), ir::Stream::compute, {first});
        } else {  // a chunk without block copies: consumed on arrival, its send forwards a copy
          close_buffer(b, keys[i], ir::Stream::pp, {h});
        }
        continue;
      }
      ir::Send snd;
      snd.axis = "pp";
      snd.offset = fwd ? 1 : -1;
      snd.bytes = s.boundary_bytes;
      snd.tag = tr.dir;
      const int64_t last = task_last(st, t);
      std::vector<int64_t> deps;
      if (last >= 0) deps = {last};
      else if (recv_of[t] >= 0) deps = {recv_of[t]};  // an empty chunk forwards what it received
      snd.buffer = std::string(fwd ? "y[" : "dx[") + std::to_string(tr.v) + "]m" + std::to_string(tr.m);
      const int64_t h = add(st, keys[i], ir::Stream::pp, snd, deps);
      BufferUse& b = open_buffer(st, snd.buffer, s.boundary_bytes, ir::BufferKind::comm_buffer, alloc_key, ir::Stream::pp);
      close_buffer(b, keys[i], ir::Stream::pp, {h});
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
    // 1. model states for the whole step (estimator.cpp memory terms per zero stage)
    const int64_t params = st.params, shard = st.shard_params;
    int64_t param_bytes = 0, grad_bytes = 0, optim_bytes = shard * 8;
    switch (s.zero) {
      case 0: param_bytes = params * 6; grad_bytes = params * 4; optim_bytes = params * 8; break;
      case 1: param_bytes = params * 2 + shard * 4; grad_bytes = params * 4; break;
      case 2: param_bytes = params * 2 + shard * 4; grad_bytes = shard * 4; break;
      default: param_bytes = shard * 4; grad_bytes = shard * 4; break;
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
          else if (block.is_layer && s.plan.recompute == ir::Recompute::selective) bytes = info.cost.saved_bytes_selective;
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
