// The forward kernels (impl.hpp): one op of one block copy and micro-batch, from its named inputs
// to its named output, on the rank's tp-local slices and cp-local sequence.
#include "impl.hpp"

#include <algorithm>

namespace mgt::rt {

// ---- contraction layout: y[N, OC] = x[N, IC] W_hf^T ----

Executor::Impl::Linear Executor::Impl::linear_shape(const Ctx& x) const {
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

cpu::AttentionConfig Executor::Impl::attention_config(const Ctx& x) const {
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
  ac.doc = options.document_tokens;
  if (cp > 1) {  // queries at the rank's positions, keys and values gathered over the whole sequence
    ac.Tk = S;
    ac.q_pos = cp_pos.data();
  }
  return ac;
}

/// K or V as the attention kernel reads it: gathered to all S positions under cp.
const float* Executor::Impl::kv(const Ctx& x, const std::string& name, const cpu::AttentionConfig& ac) {
  Tensor& t = act(x, name);
  const int64_t want = ac.B * cpu::attention_keys(ac) * ac.KVH * ac.D;
  if (t.size() != want) {
    fail(x, "'" + name + "' holds " + std::to_string(t.size()) + " elements, attention expects " + std::to_string(want) +
                (cp > 1 ? " (the K/V all-gather over cp must come before the attention kernel)" : ""));
  }
  return t.data();
}

/// The logits are split over tp (the lm_head weight's vocab rows).
bool Executor::Impl::vocab_parallel(const Ctx& x) const {
  if (tp == 1) return false;
  const ir::TensorDecl& t = decl(x, x.op->inputs[0]);
  return std::any_of(t.dims.begin(), t.dims.end(), [](const ir::Dim& d) { return d.name == 'v'; });
}

void Executor::Impl::forward(const Ctx& x, bool recompute) {
  const ir::Op& op = *x.op;
  switch (op.kind) {
    case ir::OpKind::embedding:
      forward_embedding(x);
      break;
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
        if (op.clamp_limit > 0)
          fail(x, "op '" + op.name + "' clamps its inputs (clamp_limit " + std::to_string(op.clamp_limit) +
                      ", GPT-OSS's swiglu_limit); the CPU kernels have no clamped gated unit yet");
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
    case ir::OpKind::softmax_cross_entropy:
      if (!recompute) forward_loss(x);  // the loss is counted once, in the forward
      break;
    default:
      fail(x, "op kind '" + ir::to_string(op.kind) + "' is not implemented by the CPU executor");
  }
}

void Executor::Impl::forward_embedding(const Ctx& x) {
  const ir::Op& op = *x.op;
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
}

void Executor::Impl::forward_loss(const Ctx& x) {
  const ir::Op& op = *x.op;
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
    return;
  }
  // Vocab-parallel: the local maximum per token now; the three all-reduces that follow in the
  // schedule (loss(max), loss(sumexp), loss(target)) finish the loss.
  float* m = scratch_saved(x, "loss(max)", N);
  for (int64_t i = 0; i < N; ++i) m[i] = *std::max_element(logits + i * V, logits + (i + 1) * V);
}

}  // namespace mgt::rt
