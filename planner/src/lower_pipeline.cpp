// The pipeline pass of the lowering (docs/lowering.md "Pipeline"), run by lower.cpp after the
// data-parallel passes: the send / recv of every pipeline boundary crossing.
#include "lower_pass_util.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace mgt::plan::lowering {

// ---- pipeline send / recv (docs/lowering.md "Pipeline"): the compute order per stage is 1F1B or
// Megatron's interleaved order; the pp stream issues its transfers in one global order taken from
// a dry run of that compute order with the per-op times, so every stage agrees and no rendezvous
// waits for a later one ----
namespace {

// Modelled seconds of each (stage, local chunk)'s forward and backward task, recompute included.
struct ChunkTaskSeconds {
  std::vector<std::vector<double>> fwd_s, bwd_s;  // [stage][chunk]
};

// One boundary crossing of micro-batch m out of virtual stage v.
struct PipelineTransfer {
  double time;  // when the dry run finishes the producing task, seconds
  int dir;      // 0 activation forward, 1 gradient backward
  int64_t v, m;
};

// A stage's side of a transfer.
struct PipelineTransferOp {
  bool send;
  size_t transfer;  // index into the global transfer order
  size_t task;      // the producing task (send) or the consuming task (recv)
};

ChunkTaskSeconds chunk_task_seconds(const State& s) {
  const size_t stages = size_t(s.layout.plan.pp);
  ChunkTaskSeconds out{std::vector<std::vector<double>>(stages), std::vector<std::vector<double>>(stages)};
  for (const Stage& st : s.stages)
    for (const auto& chunk : st.chunks) {
      double f = 1e-9, b = 1e-9;
      for (const Unit& u : chunk)
        for (const OpInfo& op : s.blocks[size_t(u.block)].ops) {
          f += op.cost.fwd_s;
          b += op.cost.bwd_data_s + op.cost.bwd_weight_s;
          if (u.full_recompute) b += op.cost.fwd_s;
          else if (s.layout.plan.recompute == ir::Recompute::selective && op.selective) b += op.cost.selective_recompute_s;
        }
      out.fwd_s[size_t(st.index)].push_back(f);
      out.bwd_s[size_t(st.index)].push_back(b);
    }
  return out;
}

// Dry run of every stage's compute order: the finish time of each (virtual stage, micro-batch)'s
// forward and backward, indexed v * grad_accum + m. Throws when the orders deadlock.
std::pair<std::vector<double>, std::vector<double>> dry_run_finish_times_s(const State& s, const ChunkTaskSeconds& secs) {
  const int64_t pp = s.layout.plan.pp, ga = s.layout.grad_accum, V = pp * s.layout.plan.vpp;
  std::vector<double> fin_f(size_t(V * ga), -1), fin_b(size_t(V * ga), -1);
  auto at = [&](int64_t v, int64_t m) { return size_t(v * ga + m); };
  std::vector<size_t> next(static_cast<size_t>(pp), 0);
  std::vector<double> clock(static_cast<size_t>(pp), 0);
  size_t done = 0, total = 0;
  for (const Stage& st : s.stages) total += st.tasks.size();
  while (done < total) {
    bool progress = false;
    for (const Stage& st : s.stages) {
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
                           (task.fwd ? secs.fwd_s : secs.bwd_s)[size_t(k)][size_t(task.chunk)];
        clock[size_t(k)] = end;
        (task.fwd ? fin_f : fin_b)[at(v, m)] = end;
        ++done;
        progress = true;
      }
    }
    if (!progress) throw std::logic_error("lowering: the pipeline order cannot run (no stage can proceed)");
  }
  return {std::move(fin_f), std::move(fin_b)};
}

// Every boundary crossing, in the one order all stages issue them: by dry-run finish time.
std::vector<PipelineTransfer> global_transfer_order(const State& s, const std::vector<double>& fin_f,
                                                    const std::vector<double>& fin_b) {
  const int64_t ga = s.layout.grad_accum, V = s.layout.plan.pp * s.layout.plan.vpp;
  std::vector<PipelineTransfer> transfers;
  for (int64_t v = 0; v < V; ++v)
    for (int64_t m = 0; m < ga; ++m) {
      if (v + 1 < V) transfers.push_back({fin_f[size_t(v * ga + m)], 0, v, m});
      if (v > 0) transfers.push_back({fin_b[size_t(v * ga + m)], 1, v, m});
    }
  std::sort(transfers.begin(), transfers.end(), [](const PipelineTransfer& a, const PipelineTransfer& b) {
    return std::tie(a.time, a.dir, a.v, a.m) < std::tie(b.time, b.dir, b.v, b.m);
  });
  return transfers;
}

// Per stage, its sends and recvs in the global order, each with the task that produces or consumes it.
std::vector<std::vector<PipelineTransferOp>> transfer_ops_per_stage(const State& s,
                                                                    const std::vector<PipelineTransfer>& transfers) {
  const int64_t pp = s.layout.plan.pp, ga = s.layout.grad_accum;
  // task index per (stage, fwd, chunk, mb)
  std::vector<std::vector<std::vector<int64_t>>> index(static_cast<size_t>(pp));
  for (const Stage& st : s.stages) {
    auto& idx = index[size_t(st.index)];
    idx.assign(2, std::vector<int64_t>(size_t(s.layout.plan.vpp * ga), -1));
    for (size_t t = 0; t < st.tasks.size(); ++t)
      idx[st.tasks[t].fwd ? 0 : 1][size_t(st.tasks[t].chunk * ga + st.tasks[t].micro_batch)] = int64_t(t);
  }
  auto lookup = [&](int64_t stage, bool fwd, int64_t chunk, int64_t m) {
    return size_t(index[size_t(stage)][fwd ? 0 : 1][size_t(chunk * ga + m)]);
  };
  std::vector<std::vector<PipelineTransferOp>> ops(static_cast<size_t>(pp));
  for (size_t i = 0; i < transfers.size(); ++i) {
    const PipelineTransfer& tr = transfers[i];
    const int64_t to_v = tr.dir == 0 ? tr.v + 1 : tr.v - 1;
    const int64_t from = tr.v % pp, to = to_v % pp;
    ops[size_t(from)].push_back({true, i, lookup(from, tr.dir == 0, tr.v / pp, tr.m)});
    ops[size_t(to)].push_back({false, i, lookup(to, tr.dir == 0, to_v / pp, tr.m)});
  }
  return ops;
}

// Keys of a stage's transfers: sends right after their producer, recvs as late as their consumer
// allows, monotone in the global order.
std::vector<Key> transfer_keys(const Stage& st, const std::vector<PipelineTransferOp>& list) {
  const Key inf{std::numeric_limits<int32_t>::max(), 0, 0, 0, 0};
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
  return keys;
}

// The recv of a transfer into its consuming task's buffer; the task's first kernel waits for it.
int64_t emit_pipeline_recv(State& s, Stage& st, const PipelineTransfer& tr, size_t t, Key at) {
  const bool fwd = tr.dir == 0;
  Key alloc_key = at;
  alloc_key.seq -= 1;
  const int64_t v = fwd ? tr.v + 1 : tr.v - 1;
  const std::string name = std::string(fwd ? "x[" : "dy[") + std::to_string(v) + "]m" + std::to_string(tr.m);
  ir::Recv r;
  r.axis = "pp";
  r.offset = fwd ? -1 : 1;
  r.bytes = s.boundary_bytes;
  r.buffer = name;
  r.tag = tr.dir;
  const int64_t h = add(st, at, ir::Stream::pp, r);
  const int64_t first = task_first(st, t);
  BufferUse& b = open_buffer(st, name, s.boundary_bytes, ir::BufferKind::comm_buffer, alloc_key, ir::Stream::pp);
  if (first >= 0) {
    st.nodes[size_t(first)].instr.deps.push_back(h);
    close_buffer(b, with_slot(st.nodes[size_t(first)].key, 25), ir::Stream::compute, {first});
  } else {  // a chunk without block copies: consumed on arrival, its send forwards a copy
    close_buffer(b, at, ir::Stream::pp, {h});
  }
  return h;
}

// The send of a transfer after its producing task's last kernel (or, for a chunk without block
// copies, after the recv it forwards: `received`, -1 when none).
void emit_pipeline_send(State& s, Stage& st, const PipelineTransfer& tr, size_t t, Key at, int64_t received) {
  const bool fwd = tr.dir == 0;
  Key alloc_key = at;
  alloc_key.seq -= 1;
  ir::Send snd;
  snd.axis = "pp";
  snd.offset = fwd ? 1 : -1;
  snd.bytes = s.boundary_bytes;
  snd.tag = tr.dir;
  const int64_t last = task_last(st, t);
  std::vector<int64_t> deps;
  if (last >= 0) deps = {last};
  else if (received >= 0) deps = {received};  // an empty chunk forwards what it received
  snd.buffer = std::string(fwd ? "y[" : "dx[") + std::to_string(tr.v) + "]m" + std::to_string(tr.m);
  const int64_t h = add(st, at, ir::Stream::pp, snd, deps);
  BufferUse& b = open_buffer(st, snd.buffer, s.boundary_bytes, ir::BufferKind::comm_buffer, alloc_key, ir::Stream::pp);
  close_buffer(b, at, ir::Stream::pp, {h});
}

}  // namespace

void pp_pass(State& s) {
  if (s.layout.plan.pp == 1) return;
  // 1. task durations per (stage, chunk); 2. dry run of the compute order
  const auto [fin_f, fin_b] = dry_run_finish_times_s(s, chunk_task_seconds(s));
  // 3. transfers in one global order
  const std::vector<PipelineTransfer> transfers = global_transfer_order(s, fin_f, fin_b);
  const std::vector<std::vector<PipelineTransferOp>> ops = transfer_ops_per_stage(s, transfers);
  for (Stage& st : s.stages) {
    const auto& list = ops[size_t(st.index)];
    // 4. keys; 5. emit
    const std::vector<Key> keys = transfer_keys(st, list);
    std::vector<int64_t> recv_of(st.tasks.size(), -1);
    for (size_t i = 0; i < list.size(); ++i) {
      const PipelineTransfer& tr = transfers[list[i].transfer];
      if (list[i].send) emit_pipeline_send(s, st, tr, list[i].task, keys[i], recv_of[list[i].task]);
      else recv_of[list[i].task] = emit_pipeline_recv(s, st, tr, list[i].task, keys[i]);
    }
  }
}

}  // namespace mgt::plan::lowering
