// The executor's collectives (impl.hpp): data-parallel collectives over parameter units (DDP bucket
// all-reduces, FSDP all-gathers and reduce-scatters, HSDP shard all-reduces) and collectives over
// named tensors (tp partial sums, sequence gathers / scatters over tp and cp, the vocab-parallel loss;
// docs/schedule.md "Tensors").
#include "impl.hpp"

#include <algorithm>
#include <cmath>
#include <variant>

namespace mgt::rt {

// ---- ownership: what this rank updates (its tp slices; its FSDP shard) ----

/// This rank's FSDP shard of a unit (packed coordinates): the shard_index-th of `shards` chunks.
ShardRange Executor::Impl::owned(const Layout& u) const {
  if (zero != 3 || shards <= 1) return {0, u.size};
  const int64_t chunk = padded_size(u.size, shards) / shards;
  const int64_t b = std::min(u.size, shard_index * chunk);
  return {b, std::min(u.size, b + chunk)};
}

int64_t Executor::Impl::chunk_of(const Layout& u) const { return padded_size(u.size, shards) / shards; }

const Layout& Executor::Impl::unit_of(const ir::Instruction& instr, const std::string& buffer) const {
  // "w[block.copy]" / "g[block.copy]"
  if (buffer.size() < 4 || buffer[1] != '[' || buffer.back() != ']') fail(instr, "buffer '" + buffer + "' names no block copy");
  auto it = units.find(buffer.substr(2, buffer.size() - 3));
  if (it == units.end()) fail(instr, "buffer '" + buffer + "' names a block copy without parameters on this stage");
  return it->second;
}

// ---- data-parallel collectives over parameter units ----

void Executor::Impl::run_collective(const ir::Instruction& instr, const ir::Collective& c) {
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
  // FSDP: the unit of the buffer, which must hold `count` elements, its chunk and this rank's shard;
  // comm_scratch zeroed for every shard's chunk plus this rank's own.
  struct FsdpUnit {
    const Layout& u;
    int64_t chunk;
    ShardRange r;
  };
  auto fsdp_unit = [&](const char* elements, const char* call) {
    const Layout& u = unit_of(instr, c.buffer);
    if (count != u.size)
      fail(instr, "the unit holds " + std::to_string(u.size) + " " + elements + " here, the " + call + " " + std::to_string(count));
    const int64_t chunk = chunk_of(u);
    comm_scratch.assign(static_cast<size_t>(chunk * (shards + 1)), 0.0f);
    return FsdpUnit{u, chunk, owned(u)};
  };
  switch (c.kind) {
    case ir::CollectiveKind::all_reduce: {
      if (c.buffer != "grads") fail(instr, "all-reduce of buffer '" + c.buffer + "' is not implemented");
      if (zero == 0) {
        // DDP bucket: buckets fill in backward order = the stage's packed layout from its end.
        const int64_t total = stage_layout.size;
        if (ddp_reduced + count > total) fail(instr, "the buckets exceed the stage's " + std::to_string(total) + " gradients");
        const ShardRange r{total - ddp_reduced - count, total - ddp_reduced};
        all_reduce_bucket(r, g, count, c.axes);
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
      const auto [u, chunk, r] = fsdp_unit("parameters", "gather");
      float* send = comm_scratch.data() + chunk * shards;
      pack(u, r, w, send);
      comm->all_gather(send, comm_scratch.data(), chunk, c.axes);
      unpack(u, {0, u.size}, comm_scratch.data(), w);
      break;
    }
    case ir::CollectiveKind::reduce_scatter: {
      // FSDP: the unit's local gradients summed over the shard group into this rank's shard; the
      // rest zeroed, so later micro-batches accumulate on top of the reduced shard exactly.
      const auto [u, chunk, r] = fsdp_unit("gradients", "reduce-scatter");
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

/// A DDP bucket: packed range `r` of the stage's layout. Whole tensors (tp = 1) lie in a few
/// contiguous runs of the flat gradient buffer, which are all-reduced where they lie: no scratch, no
/// copies (26 MB bucket: 6.5 ms of zero-fill, pack and unpack saved beside 14 ms of MPI). tp slices of
/// rows or columns make many short runs: those are packed into scratch, reduced and unpacked.
/// cost::ddp_bucket_copies prices the same choice.
void Executor::Impl::all_reduce_bucket(ShardRange r, float* g, int64_t count, const Axes& axes) {
  constexpr size_t kMaxInPlaceRuns = 8;  // tied embeddings on a pp stage: 2 runs; tp slices: hundreds
  std::vector<std::pair<int64_t, int64_t>> runs;  // flat begin, elements
  for_each_in(stage_layout, r, [&](const Segment&, int64_t fb, int64_t n, int64_t) {
    if (!runs.empty() && runs.back().first + runs.back().second == fb) runs.back().second += n;
    else runs.emplace_back(fb, n);
  });
  if (tp == 1 && runs.size() <= kMaxInPlaceRuns) {
    for (const auto& [begin, n] : runs) comm->all_reduce(g + begin, g + begin, n, axes);
    return;
  }
  comm_scratch.assign(static_cast<size_t>(count), 0.0f);
  pack(stage_layout, r, g, comm_scratch.data());
  comm->all_reduce(comm_scratch.data(), comm_scratch.data(), count, axes);
  unpack(stage_layout, r, comm_scratch.data(), g);
}

// ---- collectives over named tensors (tp, cp, the loss; docs/schedule.md "Tensors") ----

Executor::Impl::SeqSplit Executor::Impl::tp_split() const {
  SeqSplit s{T_sp, T_cp, tp, tp_rank, {}};
  for (int64_t r = 0; r < tp; ++r) {
    s.index.emplace_back();
    for (int64_t i = 0; i < T_sp; ++i) s.index.back().push_back(r * T_sp + i);
  }
  return s;
}

Executor::Impl::SeqSplit Executor::Impl::cp_split() const {
  SeqSplit s{T_cp, S, cp, cp_rank, {}};
  for (int64_t r = 0; r < cp; ++r) s.index.push_back(ir::cp_positions(S, cp, r));
  return s;
}

/// Where a named tensor of the anchor's copy lives: its buffer, or the boundary hand-off.
Tensor& Executor::Impl::locate(const ir::Instruction& instr, const Ctx& x, const std::string& name) {
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

void Executor::Impl::gather_seq(const ir::Instruction& instr, const Axes& axes, Tensor& t, int64_t B, int64_t F, const SeqSplit& s) {
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

void Executor::Impl::reduce_scatter_seq(const ir::Instruction& instr, const Axes& axes, Tensor& t, int64_t B, int64_t F, const SeqSplit& s) {
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

void Executor::Impl::run_tensor_collective(const ir::Instruction& instr, const ir::Collective& c) {
  const ir::Instruction& anchor = program->instructions[size_t(anchor_of.at(instr.id))];
  const Ctx x = context_of(anchor, std::get<ir::Compute>(anchor.op));
  const int64_t esize = ir::dtype_bytes(c.dtype);
  const int64_t elements = c.bytes / esize;
  if (c.axes != Axes{"tp"} && c.axes != Axes{"cp"}) fail(instr, "tensor collectives over these axes are not implemented (tp and cp are)");
  if (c.buffer == "grads") all_reduce_replicated_grads(instr, c, x, elements);
  else if (c.tensors.front().rfind("loss(", 0) == 0) run_loss_statistic(instr, c, x, elements);
  else run_activation_collective(instr, c, x, elements);
}

/// SP: replicated parameters' gradients summed over tp.
void Executor::Impl::all_reduce_replicated_grads(const ir::Instruction& instr, const ir::Collective& c, const Ctx& x, int64_t elements) {
  const bool over_tp = c.axes == Axes{"tp"};
  int64_t expected = 0;
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
}

/// Vocab-parallel cross-entropy statistics over tp: the per-token max, sum of exponentials, target logit.
void Executor::Impl::run_loss_statistic(const ir::Instruction& instr, const ir::Collective& c, const Ctx& x, int64_t elements) {
  const bool over_tp = c.axes == Axes{"tp"};
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
    cpu::vocab_parallel_sum_exp(s, logits, m, N, V);
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
}

/// Activations and their gradients: sequence gathers / scatters, or partial-sum all-reduces.
void Executor::Impl::run_activation_collective(const ir::Instruction& instr, const ir::Collective& c, const Ctx& x, int64_t elements) {
  const bool over_tp = c.axes == Axes{"tp"};
  int64_t expected = 0;
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

/// Sum of a double over a group, exactly enough for reporting: sent as two floats (hi + lo).
double Executor::Impl::sum_over(double value, const Axes& axes) {
  if (!comm || comm->group_size(axes) <= 1) return value;
  float* v = sum_scratch.data();  // backend memory: NCCL cannot read the host stack
  v[0] = static_cast<float>(value);
  v[1] = static_cast<float>(value - static_cast<double>(v[0]));
  comm->all_reduce(v, v, 2, axes);
  return static_cast<double>(v[0]) + static_cast<double>(v[1]);
}

}  // namespace mgt::rt
