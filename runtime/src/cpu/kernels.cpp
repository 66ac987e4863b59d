// CPU reference kernels (fp32, Eigen GEMMs, single-threaded). API and conventions in
// mgt/runtime/cpu/kernels.hpp and docs/runtime_kernels.md; every backward accumulates (+=).
#include "mgt/runtime/cpu/kernels.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numbers>

namespace mgt::rt::cpu {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
// A head's (T, D) slice of a (B, T, heads, D) tensor: rows T apart by heads*D floats.
using StridedMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;
using ConstStridedMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstRowVectorMap = Eigen::Map<const Eigen::RowVectorXf>;

constexpr float kGeluBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluKappa = 0.044715f;

float gelu(float x) {
  const float inner = kGeluBeta * (x + kGeluKappa * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(inner));
}

// torch's GeluBackward (approximate="tanh") formula.
float gelu_grad(float x) {
  const float x_sq = x * x;
  const float inner = kGeluBeta * (x + kGeluKappa * x_sq * x);
  const float tanh_inner = std::tanh(inner);
  const float left_derivative = 0.5f * (1.0f + tanh_inner);
  const float right_derivative =
      0.5f * x * (1.0f - tanh_inner * tanh_inner) * kGeluBeta * (1.0f + 3.0f * kGeluKappa * x_sq);
  return left_derivative + right_derivative;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// First key visible from query t (inclusive) and one past the last.
int64_t query_position(const AttentionConfig& c, int64_t t) { return c.q_pos != nullptr ? c.q_pos[t] : t; }
int64_t first_key(const AttentionConfig& c, int64_t t) {
  return c.window > 0 ? std::max<int64_t>(0, query_position(c, t) - c.window + 1) : 0;
}
int64_t end_key(const AttentionConfig& c, int64_t t) {
  return c.causal ? std::min(query_position(c, t) + 1, attention_keys(c)) : attention_keys(c);
}
float attention_scale(const AttentionConfig& c) {
  return c.scale != 0.0f ? c.scale : 1.0f / std::sqrt(static_cast<float>(c.D));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Embedding

void embedding_forward(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t V,
                       int64_t C) {
  (void)V;
  for (int64_t n = 0; n < N; ++n) {
    assert(ids[n] >= 0 && ids[n] < V);
    std::copy_n(wte + static_cast<int64_t>(ids[n]) * C, C, out + n * C);
  }
}

void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t V,
                        int64_t C) {
  (void)V;
  for (int64_t n = 0; n < N; ++n) {
    assert(ids[n] >= 0 && ids[n] < V);
    float* row = dwte + static_cast<int64_t>(ids[n]) * C;
    const float* g = dout + n * C;
    for (int64_t i = 0; i < C; ++i) row[i] += g[i];
  }
}

// ---------------------------------------------------------------------------------------------
// Normalisation

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps, bool unit_offset) {
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    float* yr = out + n * C;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < C; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float r = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(C) + eps));
    rstd[n] = r;
    for (int64_t i = 0; i < C; ++i) {
      const float weight = unit_offset ? 1.0f + w[i] : w[i];
      yr[i] = weight * (xr[i] * r);
    }
  }
}

// y_i = w_i x_i r, r = (mean(x^2) + eps)^(-1/2), dr/dx_j = -r^3 x_j / C:
// dx_j = r w_j dy_j - r^3 x_j / C * sum_i w_i dy_i x_i;  dw_i = sum_n dy_i x_i r.
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, bool unit_offset) {
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    const float* gr = dout + n * C;
    const float r = rstd[n];
    double dot = 0.0;  // sum_i w_i dy_i x_i
    for (int64_t i = 0; i < C; ++i) {
      const float weight = unit_offset ? 1.0f + w[i] : w[i];
      dot += static_cast<double>(weight * gr[i]) * xr[i];
    }
    const float coef = static_cast<float>(dot / static_cast<double>(C)) * r * r * r;
    float* dxr = dx + n * C;
    for (int64_t i = 0; i < C; ++i) {
      const float weight = unit_offset ? 1.0f + w[i] : w[i];
      dxr[i] += r * weight * gr[i] - coef * xr[i];
      if (dw != nullptr) dw[i] += gr[i] * xr[i] * r;
    }
  }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t N, int64_t C, float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    double sum = 0.0;
    for (int64_t i = 0; i < C; ++i) sum += xr[i];
    const double mu = sum / static_cast<double>(C);
    double var = 0.0;
    for (int64_t i = 0; i < C; ++i) var += (xr[i] - mu) * (xr[i] - mu);
    var /= static_cast<double>(C);
    const float m = static_cast<float>(mu);
    const float r = static_cast<float>(1.0 / std::sqrt(var + eps));
    mean[n] = m;
    rstd[n] = r;
    float* yr = out + n * C;
    for (int64_t i = 0; i < C; ++i) {
      yr[i] = (xr[i] - m) * r * w[i] + (b != nullptr ? b[i] : 0.0f);
    }
  }
}

// xhat = (x - mean) r; dxhat = w dy; dx = r (dxhat - mean(dxhat) - xhat mean(dxhat xhat)).
void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t N,
                        int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    const float* gr = dout + n * C;
    const float m = mean[n];
    const float r = rstd[n];
    double dnorm_mean = 0.0;
    double dnorm_norm_mean = 0.0;
    for (int64_t i = 0; i < C; ++i) {
      const float xhat = (xr[i] - m) * r;
      const float dnorm = w[i] * gr[i];
      dnorm_mean += dnorm;
      dnorm_norm_mean += static_cast<double>(dnorm) * xhat;
    }
    const float a = static_cast<float>(dnorm_mean / static_cast<double>(C));
    const float bb = static_cast<float>(dnorm_norm_mean / static_cast<double>(C));
    float* dxr = dx + n * C;
    for (int64_t i = 0; i < C; ++i) {
      const float xhat = (xr[i] - m) * r;
      const float dnorm = w[i] * gr[i];
      dxr[i] += r * (dnorm - a - xhat * bb);
      if (dw != nullptr) dw[i] += xhat * gr[i];
      if (db != nullptr) db[i] += gr[i];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Linear

void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t N, int64_t IC,
                    int64_t OC, int64_t ldw) {
  MatrixMap Y(y, N, OC);
  ConstMatrixMap X(x, N, IC);
  if (ldw == 0 || ldw == IC) {
    Y.noalias() = X * ConstMatrixMap(w, OC, IC).transpose();
  } else {
    Y.noalias() = X * ConstStridedMap(w, OC, IC, Eigen::OuterStride<>(ldw)).transpose();
  }
  if (b != nullptr) Y.rowwise() += ConstRowVectorMap(b, OC);
}

void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                     const float* w, int64_t N, int64_t IC, int64_t OC, int64_t ldw) {
  ConstMatrixMap dY(dy, N, OC);
  const bool dense = ldw == 0 || ldw == IC;
  if (dx != nullptr) {
    if (dense) MatrixMap(dx, N, IC).noalias() += dY * ConstMatrixMap(w, OC, IC);
    else MatrixMap(dx, N, IC).noalias() += dY * ConstStridedMap(w, OC, IC, Eigen::OuterStride<>(ldw));
  }
  if (dw != nullptr) {
    if (dense) MatrixMap(dw, OC, IC).noalias() += dY.transpose() * ConstMatrixMap(x, N, IC);
    else StridedMap(dw, OC, IC, Eigen::OuterStride<>(ldw)).noalias() += dY.transpose() * ConstMatrixMap(x, N, IC);
  }
  if (db != nullptr) {
    for (int64_t n = 0; n < N; ++n) {
      const float* row = dy + n * OC;
      for (int64_t o = 0; o < OC; ++o) db[o] += row[o];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// RoPE

namespace {

// inv_freq[i] exactly as HF computes it in float: default rope, then llama3 scaling when
// factor > 0 (HF _compute_llama3_parameters: float tensors, Python-float scalars).
float rope_inv_freq_at(int64_t i, int64_t D, const RopeConfig& config) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(D);
  const float f = 1.0f / std::pow(static_cast<float>(config.theta), exponent);
  if (config.factor <= 0.0) return f;
  const float factor = static_cast<float>(config.factor);
  const double old_len = static_cast<double>(config.original_max_position_embeddings);
  const float low_freq_wavelen = static_cast<float>(old_len / config.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(old_len / config.high_freq_factor);
  const float wavelen = static_cast<float>(2.0 * std::numbers::pi) / f;
  float scaled = wavelen > low_freq_wavelen ? f / factor : f;
  const bool is_medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
  if (is_medium) {
    const float smooth =
        (static_cast<float>(old_len) / wavelen - static_cast<float>(config.low_freq_factor)) /
        static_cast<float>(config.high_freq_factor - config.low_freq_factor);
    scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
  }
  return scaled;
}

}  // namespace

void rope_inv_freq(float* inv_freq, int64_t D, const RopeConfig& config) {
  assert(D % 2 == 0);
  for (int64_t i = 0; i < D / 2; ++i) inv_freq[i] = rope_inv_freq_at(i, D, config);
}

void rope_tables(float* cos, float* sin, int64_t T, int64_t D, int64_t position_offset,
                 const RopeConfig& config) {
  assert(D % 2 == 0);
  const int64_t half = D / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float inv_freq = rope_inv_freq_at(i, D, config);
    for (int64_t t = 0; t < T; ++t) {
      const float angle = static_cast<float>(position_offset + t) * inv_freq;
      cos[t * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin[t * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

// Pairs (x1, x2) = (x[i], x[i + D/2]): out1 = x1 cos - x2 sin, out2 = x2 cos + x1 sin.
void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B,
                  int64_t T, int64_t H, int64_t D) {
  const int64_t half = D / 2;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const float* c = cos + t * half;
      const float* s = sin + t * half;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = ((b * T + t) * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = x[base + i];
          const float x2 = x[base + i + half];
          out[base + i] = x1 * c[i] - x2 * s[i];
          out[base + i + half] = x2 * c[i] + x1 * s[i];
        }
      }
    }
  }
}

// Transpose of the rotation: dx1 = g1 cos + g2 sin, dx2 = g2 cos - g1 sin.
void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B,
                   int64_t T, int64_t H, int64_t D) {
  const int64_t half = D / 2;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const float* c = cos + t * half;
      const float* s = sin + t * half;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = ((b * T + t) * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const float g1 = dout[base + i];
          const float g2 = dout[base + i + half];
          dx[base + i] += g1 * c[i] + g2 * s[i];
          dx[base + i + half] += g2 * c[i] - g1 * s[i];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Attention
//
// Per (b, h), with g = h / (H / KVH) the kv head:
//  1. S = scale * Q K^T (T, T) in scratch (one GEMM).
//  2. Row t: keys [first_key, end_key) visible; lse_t = log sum exp S_ts; P_ts = exp(S_ts - lse_t),
//     zero elsewhere.
//  3. O = P V (one GEMM).
// Backward recomputes P from lse, then dP = dO V^T, dS = P * (dP - rowsum(P * dP)),
// dQ += scale dS K, dK += scale dS^T Q, dV += P^T dO.

namespace {

// Steps 1-2 for one (b, h): fills P (T, T) with the masked probabilities. When lse_in is nullptr
// the row log-sum-exps are computed and written to lse_out; otherwise they are read.
void attention_probs(MatrixMap& P, const ConstStridedMap& Q, const ConstStridedMap& K,
                     const AttentionConfig& c, float scale, const float* lse_in, float* lse_out) {
  P.noalias() = Q * K.transpose();
  P *= scale;
  const int64_t Tk = attention_keys(c);
  for (int64_t t = 0; t < c.T; ++t) {
    float* row = P.data() + t * Tk;
    const int64_t lo = first_key(c, t);
    const int64_t hi = end_key(c, t);
    float lse = 0.0f;
    if (lse_in != nullptr) {
      lse = lse_in[t];
    } else {
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t s = lo; s < hi; ++s) max_score = std::max(max_score, row[s]);
      double sum = 0.0;
      for (int64_t s = lo; s < hi; ++s) sum += std::exp(static_cast<double>(row[s] - max_score));
      lse = max_score + static_cast<float>(std::log(sum));
      lse_out[t] = lse;
    }
    for (int64_t s = 0; s < lo; ++s) row[s] = 0.0f;
    for (int64_t s = lo; s < hi; ++s) row[s] = std::exp(row[s] - lse);
    for (int64_t s = hi; s < Tk; ++s) row[s] = 0.0f;
  }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionConfig& c, float* scratch) {
  assert(c.KVH > 0 && c.H % c.KVH == 0);
  const int64_t group = c.H / c.KVH;
  const float scale = attention_scale(c);
  const Eigen::OuterStride<> q_stride(c.H * c.D);
  const Eigen::OuterStride<> kv_stride(c.KVH * c.D);
  const int64_t Tk = attention_keys(c);
  MatrixMap P(scratch, c.T, Tk);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t h = 0; h < c.H; ++h) {
      const int64_t g = h / group;
      const ConstStridedMap Q(q + b * c.T * c.H * c.D + h * c.D, c.T, c.D, q_stride);
      const ConstStridedMap K(k + b * Tk * c.KVH * c.D + g * c.D, Tk, c.D, kv_stride);
      const ConstStridedMap V(v + b * Tk * c.KVH * c.D + g * c.D, Tk, c.D, kv_stride);
      attention_probs(P, Q, K, c, scale, nullptr, lse + (b * c.H + h) * c.T);
      StridedMap O(out + b * c.T * c.H * c.D + h * c.D, c.T, c.D, q_stride);
      O.noalias() = P * V;
    }
  }
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, const float* lse,
                        const AttentionConfig& c, float* scratch) {
  assert(c.KVH > 0 && c.H % c.KVH == 0);
  const int64_t group = c.H / c.KVH;
  const float scale = attention_scale(c);
  const Eigen::OuterStride<> q_stride(c.H * c.D);
  const Eigen::OuterStride<> kv_stride(c.KVH * c.D);
  const int64_t Tk = attention_keys(c);
  MatrixMap P(scratch, c.T, Tk);
  MatrixMap dP(scratch + c.T * Tk, c.T, Tk);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t h = 0; h < c.H; ++h) {
      const int64_t g = h / group;
      const int64_t q_off = b * c.T * c.H * c.D + h * c.D;
      const int64_t kv_off = b * Tk * c.KVH * c.D + g * c.D;
      const ConstStridedMap Q(q + q_off, c.T, c.D, q_stride);
      const ConstStridedMap K(k + kv_off, Tk, c.D, kv_stride);
      const ConstStridedMap V(v + kv_off, Tk, c.D, kv_stride);
      const ConstStridedMap dO(dout + q_off, c.T, c.D, q_stride);
      attention_probs(P, Q, K, c, scale, lse + (b * c.H + h) * c.T, nullptr);
      StridedMap(dv + kv_off, Tk, c.D, kv_stride).noalias() += P.transpose() * dO;
      dP.noalias() = dO * V.transpose();
      // dS = P * (dP - rowsum(P * dP)), in place in dP, scaled by `scale` for the Q K^T product.
      for (int64_t t = 0; t < c.T; ++t) {
        const float* p_row = P.data() + t * Tk;
        float* dp_row = dP.data() + t * Tk;
        double dot = 0.0;
        for (int64_t s = 0; s < Tk; ++s) dot += static_cast<double>(p_row[s]) * dp_row[s];
        const float d = static_cast<float>(dot);
        for (int64_t s = 0; s < Tk; ++s) dp_row[s] = scale * p_row[s] * (dp_row[s] - d);
      }
      StridedMap(dq + q_off, c.T, c.D, q_stride).noalias() += dP * K;
      StridedMap(dk + kv_off, Tk, c.D, kv_stride).noalias() += dP.transpose() * Q;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Elementwise

void gelu_forward(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu(x[i]);
}

void gelu_backward(float* dx, const float* dout, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] += dout[i] * gelu_grad(x[i]);
}

void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(gate[i]);
    dgate[i] += dout[i] * up[i] * s * (1.0f + gate[i] * (1.0f - s));
    dup[i] += dout[i] * gate[i] * s;
  }
}

void geglu_forward(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu(gate[i]) * up[i];
}

void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                    const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dgate[i] += dout[i] * up[i] * gelu_grad(gate[i]);
    dup[i] += dout[i] * gelu(gate[i]);
  }
}

void residual_forward(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, int64_t n) {
  if (da != nullptr) VectorMap(da, n) += Eigen::Map<const Eigen::VectorXf>(dout, n);
  if (db != nullptr) VectorMap(db, n) += Eigen::Map<const Eigen::VectorXf>(dout, n);
}

// ---------------------------------------------------------------------------------------------
// Loss

double softmax_cross_entropy_forward_backward(float* dlogits, const float* logits,
                                              const int32_t* targets, int64_t N, int64_t V,
                                              int64_t num_targets, float dloss) {
  double loss_sum = 0.0;
  const double inv_count = 1.0 / static_cast<double>(num_targets);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V;
    const int32_t target = targets[n];
    float* drow = dlogits != nullptr ? dlogits + n * V : nullptr;
    if (target < 0) {
      if (drow != nullptr) std::fill_n(drow, V, 0.0f);
      continue;
    }
    assert(target < V);
    float max_logit = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < V; ++i) max_logit = std::max(max_logit, row[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(row[i] - max_logit));
    const double log_sum = std::log(sum);
    loss_sum += log_sum - static_cast<double>(row[target] - max_logit);
    if (drow != nullptr) {
      const double g = static_cast<double>(dloss) * inv_count;
      const float target_logit = row[target];  // read before an in-place write
      for (int64_t i = 0; i < V; ++i) {
        const double p = std::exp(static_cast<double>(row[i] - max_logit) - log_sum);
        drow[i] = static_cast<float>(p * g);
      }
      drow[target] = static_cast<float>(
          (std::exp(static_cast<double>(target_logit - max_logit) - log_sum) - 1.0) * g);
    }
  }
  return loss_sum * inv_count;
}

// ---------------------------------------------------------------------------------------------
// Optimizer

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                const AdamWConfig& config) {
  // Scalars as torch computes them (Python doubles), each used as a float in the tensor ops.
  const float decay = static_cast<float>(1.0 - config.lr * config.weight_decay);
  const float beta1 = static_cast<float>(config.beta1);
  const float beta2 = static_cast<float>(config.beta2);
  const float one_minus_beta1 = static_cast<float>(1.0 - config.beta1);
  const float one_minus_beta2 = static_cast<float>(1.0 - config.beta2);
  const double bias_correction1 = 1.0 - std::pow(config.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(config.beta2, static_cast<double>(step));
  const float step_size = static_cast<float>(config.lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float eps = static_cast<float>(config.eps);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    param[i] *= decay;
    m[i] = m[i] * beta1 + g * one_minus_beta1;
    v[i] = v[i] * beta2 + one_minus_beta2 * g * g;
    const float denom = std::sqrt(v[i]) / bias_correction2_sqrt + eps;
    param[i] += -step_size * (m[i] / denom);
  }
}

double grad_sum_squares(const float* grad, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(grad[i]) * grad[i];
  return sum;
}

float grad_clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  const double coefficient = max_norm / (norm + 1e-6);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

void scale_in_place(float* x, int64_t n, float coefficient) {
  VectorMap(x, n) *= coefficient;
}

double clip_grad_norm(float* grad, int64_t n, double max_norm) {
  const double norm = std::sqrt(grad_sum_squares(grad, n));
  const float coefficient = grad_clip_coefficient(norm, max_norm);
  if (coefficient < 1.0f) scale_in_place(grad, n, coefficient);
  return norm;
}

}  // namespace mgt::rt::cpu
