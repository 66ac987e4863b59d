// The named views of one instruction (impl.hpp): the activations, gradients and parameter slices an
// op reads and writes, looked up by the names the graph gives them, with their sizes checked against
// the rank's geometry; the micro-batch's tokens; the rotary tables.
#include "impl.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <stdexcept>

namespace mgt::rt {

void Executor::Impl::fail(const ir::Instruction& instr, const std::string& what) const {
  throw std::runtime_error("instruction #" + std::to_string(instr.id) + " (" + ir::to_text(instr, program_index) +
                           "): " + what);
}

Executor::Impl::Ctx Executor::Impl::context_of(const ir::Instruction& instr, const ir::Compute& c) {
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

/// 'b' and 's' from the rank's geometry; the other dims from the Compute (tp-local sizes).
int64_t Executor::Impl::dim_size(const Ctx& x, char name, const ir::TensorDecl* t) const {
  if (name == 'b') return x.B;
  if (name == 's') return x.T;
  for (const auto& d : x.c->dims)
    if (d.name == name) return d.size;
  if (t)
    for (const auto& d : t->dims)
      if (d.name == name && d.size > 0) return d.size;
  fail(x, std::string("no size for dim '") + name + "'");
}

const ir::TensorDecl& Executor::Impl::decl(const Ctx& x, const std::string& name) const {
  const ir::TensorDecl* t = ir::find_tensor(*x.block, name);
  if (!t) fail(x, "tensor '" + name + "' is not declared in block '" + x.block->name + "'");
  return *t;
}

int64_t Executor::Impl::numel(const Ctx& x, const std::string& name) const {
  const ir::TensorDecl& t = decl(x, name);
  int64_t n = 1;
  for (const auto& d : t.dims) n *= dim_size(x, d.name, &t);
  return n;
}

/// Elements per (sequence, position) on this rank: the tensor's dims other than b and s, the
/// tensor-parallel ones divided by tp.
int64_t Executor::Impl::features(const Ctx& x, const std::string& name) const {
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

/// The tp-local slice of a parameter, checked against the op's (tp-local) dims.
ParamRef Executor::Impl::param_ref(const Ctx& x, const std::string& name) const {
  const ParamEntry* e = state.table().find_graph(x.block->name, x.c->layer, name);
  if (!e) fail(x, "parameter '" + name + "' of " + x.block->name + "." + std::to_string(x.c->layer) + " is not in the model state");
  const ParamRef r = tp_slice(*e, tp, tp_rank);
  if (r.elements() != numel(x, name)) {
    fail(x, "parameter '" + name + "' has " + std::to_string(r.elements()) + " elements on this rank (tp " +
                std::to_string(tp) + "), the op needs " + std::to_string(numel(x, name)));
  }
  return r;
}

ParamRef Executor::Impl::contiguous_param(const Ctx& x, const std::string& name) const {
  const ParamRef r = param_ref(x, name);
  if (!r.contiguous()) fail(x, "parameter '" + name + "' is a strided tensor-parallel slice where the op needs it whole");
  return r;
}

/// An activation saved in the copy's buffer; the block input comes from the boundary hand-off.
Tensor& Executor::Impl::act(const Ctx& x, const std::string& name) {
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

const float* Executor::Impl::in(const Ctx& x, const std::string& name) {
  if (is_param(x, name)) return param(x, name);
  Tensor& t = act(x, name);
  if (t.size() != numel(x, name)) {
    fail(x, "activation '" + name + "' holds " + std::to_string(t.size()) + " elements, the op expects " +
                std::to_string(numel(x, name)) + " (a sequence gather or scatter missing from the schedule?)");
  }
  return t.data();
}

float* Executor::Impl::out(const Ctx& x, const std::string& name, const std::string& key) {
  Tensor& t = x.buf->tensors[key.empty() ? name : key] = Tensor(&tracker, numel(x, name));
  return t.data();
}

float* Executor::Impl::scratch_saved(const Ctx& x, const std::string& key, int64_t n) {
  Tensor& t = x.buf->tensors[key] = Tensor(&tracker, n);
  return t.data();
}

const float* Executor::Impl::saved(const Ctx& x, const std::string& key) {
  auto it = x.buf->tensors.find(key);
  if (it == x.buf->tensors.end()) fail(x, "saved tensor '" + key + "' is not available");
  return it->second.data();
}

/// The gradient of an activation (created zero, `n` elements; default its size at this op) or
/// of a parameter (the grads buffer).
float* Executor::Impl::grad(const Ctx& x, const std::string& name, int64_t n) {
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
const float* Executor::Impl::dout(const Ctx& x, const std::string& name) {
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

/// cos / sin tables (T rows of D/2) for the positions the rank holds: 0..S-1, or its CP positions.
std::pair<const float*, const float*> Executor::Impl::rope(int64_t T, int64_t D) {
  auto it = rope_tables.find({T, D});
  if (it == rope_tables.end()) {
    std::vector<float> cos_full(static_cast<size_t>(S * D / 2)), sin_full(cos_full.size());
    cpu::rope_tables(cos_full.data(), sin_full.data(), S, D, /*position_offset=*/0, options.numerics.rope);
    Tensor cos(&tracker, T * D / 2), sin(&tracker, T * D / 2);
    for (int64_t t = 0; t < T; ++t) {
      // Packed documents restart their positions (ExecutorOptions::document_tokens).
      const int64_t global = cp_pos[static_cast<size_t>(t)];
      const int64_t p = options.document_tokens > 0 ? global % options.document_tokens : global;
      std::copy_n(cos_full.begin() + p * D / 2, D / 2, cos.data() + t * D / 2);
      std::copy_n(sin_full.begin() + p * D / 2, D / 2, sin.data() + t * D / 2);
    }
    it = rope_tables.emplace(std::pair{T, D}, std::pair{std::move(cos), std::move(sin)}).first;
  }
  return {it->second.first.data(), it->second.second.data()};
}

const int32_t* Executor::Impl::tokens(const Ctx& x, bool targets) {
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

}  // namespace mgt::rt
