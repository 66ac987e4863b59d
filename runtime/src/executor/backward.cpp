// The backward kernels (impl.hpp): the data part of an op's backward (always at bwd_data) and its
// weight part (at bwd_weight when the schedule splits it, else with the data part).
#include "impl.hpp"

#include <cmath>

namespace mgt::rt {

void Executor::Impl::backward(const Ctx& x, bool data, bool weight) {
  const ir::Op& op = *x.op;
  switch (op.kind) {
    case ir::OpKind::embedding:
      if (weight) backward_embedding(x);
      break;
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
    case ir::OpKind::attention_core:
      if (data) backward_attention(x);
      break;
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
    case ir::OpKind::softmax_cross_entropy:
      if (data) backward_loss(x);
      break;
    default:
      fail(x, "op kind '" + ir::to_string(op.kind) + "' is not implemented by the CPU executor");
  }
}

void Executor::Impl::backward_embedding(const Ctx& x) {
  const ir::Op& op = *x.op;
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
}

void Executor::Impl::backward_attention(const Ctx& x) {
  const ir::Op& op = *x.op;
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
}

void Executor::Impl::backward_loss(const Ctx& x) {
  const ir::Op& op = *x.op;
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
    cpu::vocab_parallel_softmax_backward(logits.data(), m, s, targets, v0, N, V, 1.0 / static_cast<double>(num_targets));
  }
  x.buf->tensors["d:" + name] = std::move(logits);
}

}  // namespace mgt::rt
