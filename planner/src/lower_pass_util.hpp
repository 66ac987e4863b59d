// Small helpers shared by the lowering passes (lower_passes.cpp, lower_pipeline.cpp; internal to the
// planner library): node keys, buffer names, buffer registration and stream tails.
#pragma once

#include "mgt/planner/lower.hpp"

#include "mgt/cost_model/task_cost.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace mgt::plan::lowering {

inline int32_t fwd_part(int32_t j) { return 1 + j; }
inline int32_t bwd_part(int32_t n, int32_t j) { return 1 + n + (n - 1 - j); }
inline int32_t end_part(int32_t n) { return 2 * n + 2; }
inline Key key(size_t task, size_t unit, int32_t part, int32_t slot) {
  return Key{int32_t(task) + 1, int32_t(unit) + 1, part, slot, 0};
}
inline Key with_slot(Key k, int32_t slot) {
  k.slot = slot;
  return k;
}
inline Key epilogue(const Stage& st, int32_t slot) { return Key{int32_t(st.tasks.size()) + 1, 0, 0, slot, 0}; }

/// The copy processed at position i of task t (backward walks the chunk in reverse).
inline const Unit& unit_at(const Stage& st, const Task& t, size_t i) {
  const auto& units = st.chunks[size_t(t.chunk)];
  return t.fwd ? units[i] : units[units.size() - 1 - i];
}
inline int32_t num_ops(const State& s, const Unit& u) { return int32_t(s.blocks[size_t(u.block)].ops.size()); }
inline std::string tag(const State& s, const Unit& u) {
  return s.graph->blocks[size_t(u.block)].name + "." + std::to_string(u.copy);
}
inline std::string act_name(const State& s, const Unit& u, int64_t mb) { return "act[" + tag(s, u) + "]m" + std::to_string(mb); }
inline std::string ws_name(const State& s, const Unit& u) { return "ws[" + tag(s, u) + "]"; }
inline std::string w_name(const State& s, const Unit& u) { return "w[" + tag(s, u) + "]"; }
inline std::string g_name(const State& s, const Unit& u) { return "g[" + tag(s, u) + "]"; }

// A block collective as a Collective instruction, which never carries send_recv (a Send + Recv).
inline ir::CollectiveKind to_ir(ir::CollectiveKind kind) {
  if (kind == ir::CollectiveKind::send_recv)
    throw std::logic_error("lowering: a block collective cannot be a send_recv");
  return kind;
}

inline BufferUse& open_buffer(Stage& st, std::string name, int64_t bytes, ir::BufferKind kind, Key at, ir::Stream stream,
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
inline void close_buffer(BufferUse& b, Key at, ir::Stream stream, std::vector<int64_t> deps) {
  b.free_at = at;
  b.free_stream = stream;
  b.free_deps = std::move(deps);
  b.closed = true;
}

inline bool frozen_base(const State& s) { return s.ctx.task == ir::Task::lora || s.ctx.task == ir::Task::qlora; }

/// Elements of a copy's trained parameters counted once on the stage (the tied second copy excluded);
/// under LoRA the adapters alone.
inline int64_t own_params(const State& s, const Unit& u) {
  const auto& cost = s.blocks[size_t(u.block)].cost;
  return frozen_base(s) ? cost.adapter_param_elements_local : cost.param_elements_local - u.tied_elements;
}

/// FSDP traffic of one copy: bytes all-gathered (dense, expert) and gradient bytes reduce-scattered
/// (dense, expert). LoRA gathers the frozen base as stored with the bf16 adapters and reduces the
/// adapters' gradients only (the estimator's rule, estimator.cpp stage_time).
struct FsdpBytes {
  int64_t gather_dense = 0, gather_expert = 0, reduce_dense = 0, reduce_expert = 0;
};
inline FsdpBytes fsdp_bytes(const State& s, const cost::BlockCost& cost) {
  const int64_t pel = cost.param_elements_local, expert = cost.expert_param_elements_local;
  const int64_t g = s.grad_bytes();
  if (!frozen_base(s)) return {(pel - expert) * 2, expert * 2, (pel - expert) * g, expert * g};
  const int64_t adapters = cost.adapter_param_elements_local;
  return {adapters * 2 + int64_t(cost::frozen_base_bytes(pel, cost.nf4_param_elements_local)), 0, adapters * g, 0};
}

/// Last node (by key) on `stream` whose key is below `limit`; -1 when none.
inline int64_t stream_tail(const Stage& st, ir::Stream stream, const Key& limit) {
  int64_t best = -1;
  for (size_t h = 0; h < st.nodes.size(); ++h) {
    const Node& n = st.nodes[h];
    if (n.instr.stream != stream || !(n.key < limit)) continue;
    if (best < 0 || st.nodes[size_t(best)].key < n.key || st.nodes[size_t(best)].key == n.key) best = int64_t(h);
  }
  return best;
}
inline std::vector<int64_t> all_tails(const Stage& st, const Key& limit, bool with_compute) {
  std::vector<int64_t> out;
  for (int k = 0; k < ir::kNumStreams; ++k) {
    if (!with_compute && ir::Stream(k) == ir::Stream::compute) continue;
    const int64_t h = stream_tail(st, ir::Stream(k), limit);
    if (h >= 0) out.push_back(h);
  }
  return out;
}

inline int64_t task_first(const Stage& st, size_t t) {
  for (const UnitNodes& u : st.unit_nodes[t])
    if (u.first >= 0) return u.first;
  return -1;
}
inline int64_t task_last(const Stage& st, size_t t) {
  for (auto it = st.unit_nodes[t].rbegin(); it != st.unit_nodes[t].rend(); ++it)
    if (it->last >= 0) return it->last;
  return -1;
}

}  // namespace mgt::plan::lowering
