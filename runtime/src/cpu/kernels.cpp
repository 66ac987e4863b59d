// CPU reference kernels (fp32, single-threaded). GEMMs call OpenBLAS where the build found it
// (MGT_HAVE_OPENBLAS, runtime/CMakeLists.txt), else Eigen's GEMM; exp, sqrt and the row reductions
// are vectorised (Eigen packet math, loops GCC vectorises). API and conventions in
// mgt/runtime/cpu/kernels.hpp and docs/runtime_kernels.md; every backward accumulates (+=).
#include "mgt/runtime/cpu/kernels.hpp"

#include <Eigen/Core>

#if MGT_HAVE_OPENBLAS
#include <cblas.h>
// OpenBLAS's own (also in its cblas.h; declared here so that another cblas.h on the path still builds).
extern "C" void openblas_set_num_threads(int num_threads);
#endif

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
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

// c (m, n) = alpha op(a) op(b) + beta c, row-major, leading dimensions in floats: op(a) is (m, k),
// stored (m, k) with row stride lda, or (k, m) when trans_a; op(b) is (k, n), stored (k, n) with
// stride ldb, or (n, k) when trans_b. beta 0 overwrites c (its old values are never read).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
#if MGT_HAVE_OPENBLAS
  // One thread: ranks run one per core (OpenBLAS's pthread build would otherwise start one per core
  // in every rank). Set once, on the first GEMM, whatever OPENBLAS_NUM_THREADS says.
  static const bool single_threaded = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded;
  constexpr int64_t kMaxDim = std::numeric_limits<int>::max();  // cblas takes int sizes
  assert(m <= kMaxDim && n <= kMaxDim && k <= kMaxDim && lda <= kMaxDim && ldb <= kMaxDim && ldc <= kMaxDim);
  (void)kMaxDim;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
#else
  StridedMap C(c, m, n, Eigen::OuterStride<>(ldc));
  if (beta == 0.0f) C.setZero();
  else if (beta != 1.0f) C *= beta;
  if (k <= 0) return;
  const ConstStridedMap A(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  const ConstStridedMap B(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  if (trans_a && trans_b) C.noalias() += alpha * (A.transpose() * B.transpose());
  else if (trans_a) C.noalias() += alpha * (A.transpose() * B);
  else if (trans_b) C.noalias() += alpha * (A * B.transpose());
  else C.noalias() += alpha * (A * B);
#endif
}

// Sums in double of n terms (squares, products, floats), eight partial sums so that the loop vectorises
// (a single running double sum is a serial chain GCC must keep in order). term(i): the i-th term.
template <class Term>
double sum8_double(int64_t n, Term term) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += term(i + j);
  double sum = 0.0;
  for (; i < n; ++i) sum += term(i);
  for (double a : acc) sum += a;
  return sum;
}

double sum_squares_double(const float* x, int64_t n) {
  return sum8_double(n, [x](int64_t i) { return static_cast<double>(x[i]) * x[i]; });
}

double dot_double(const float* x, const float* y, int64_t n) {
  return sum8_double(n, [x, y](int64_t i) { return static_cast<double>(x[i]) * y[i]; });
}

double sum_double(const float* x, int64_t n) {
  return sum8_double(n, [x](int64_t i) { return static_cast<double>(x[i]); });
}

// Vectorised exp (Eigen's pexp, within 2 ulp of exp) in chunks of 256 through an aligned stack
// buffer: Eigen evaluates the elements before the first 32-byte-aligned address with the scalar exp,
// so exps computed in place would round differently with the buffer's address, and runs that differ
// only in where malloc put a buffer (a resumed run) would not be bit-identical. For each chunk
// [i, i + len): e = exp(sign * x[i..] - shift), then consume(i, e, len).
template <class Consume>
void exp_chunks(const float* x, int64_t n, float sign, float shift, Consume&& consume) {
  constexpr int64_t kChunk = 256;
  alignas(64) float e[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    ArrayMap(e, len) = (sign * ConstArrayMap(x + i, len) - shift).exp();
    consume(i, static_cast<const float*>(e), len);
  }
}

// sum_i exp(x_i - shift) in double (each chunk's exps summed by sum_double), with each exp written to
// out[i] unless out is nullptr; the sum is the same bits with or without out. out may alias x.
double exp_shifted_sum(float* out, const float* x, int64_t n, float shift) {
  double sum = 0.0;
  exp_chunks(x, n, 1.0f, shift, [&](int64_t i, const float* e, int64_t len) {
    if (out != nullptr) std::copy_n(e, len, out + i);
    sum += sum_double(e, len);
  });
  return sum;
}

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

// First key visible from query t (inclusive) and one past the last.
int64_t query_position(const AttentionConfig& c, int64_t t) { return c.q_pos != nullptr ? c.q_pos[t] : t; }
// Packed documents: the query's document [start, start + doc) bounds both ends.
int64_t first_key(const AttentionConfig& c, int64_t t) {
  const int64_t pos = query_position(c, t);
  const int64_t window_first = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
  return c.doc > 0 ? std::max(window_first, pos / c.doc * c.doc) : window_first;
}
int64_t end_key(const AttentionConfig& c, int64_t t) {
  const int64_t pos = query_position(c, t);
  const int64_t end = c.causal ? std::min(pos + 1, attention_keys(c)) : attention_keys(c);
  return c.doc > 0 ? std::min(end, (pos / c.doc + 1) * c.doc) : end;
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
    const double sum_sq = sum_squares_double(xr, C);
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
namespace {

// sum_i (w_i dy_i) x_i in double (w_i = 1 + w[i] with UnitOffset), eight partial sums (vectorised).
template <bool UnitOffset>
double weighted_dot_double(const float* w, const float* dy, const float* x, int64_t C) {
  return sum8_double(C, [&](int64_t i) {
    const float weight = UnitOffset ? 1.0f + w[i] : w[i];
    return static_cast<double>(weight * dy[i]) * x[i];
  });
}

}  // namespace

void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, bool unit_offset) {
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    const float* gr = dout + n * C;
    const float r = rstd[n];
    const double dot = unit_offset ? weighted_dot_double<true>(w, gr, xr, C)  // sum_i w_i dy_i x_i
                                   : weighted_dot_double<false>(w, gr, xr, C);
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
  const int64_t ld = ldw == 0 ? IC : ldw;
  if (b != nullptr) {
    // The bias first, then the product accumulated onto it (beta 1): one pass over y fewer.
    for (int64_t n = 0; n < N; ++n) std::copy_n(b, OC, y + n * OC);
  }
  gemm(false, true, N, OC, IC, 1.0f, x, IC, w, ld, b != nullptr ? 1.0f : 0.0f, y, OC);
}

void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                     const float* w, int64_t N, int64_t IC, int64_t OC, int64_t ldw) {
  const int64_t ld = ldw == 0 ? IC : ldw;
  if (dx != nullptr) gemm(false, false, N, IC, OC, 1.0f, dy, OC, w, ld, 1.0f, dx, IC);
  if (dw != nullptr) gemm(true, false, OC, IC, N, 1.0f, dy, OC, x, IC, 1.0f, dw, ld);
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

namespace {

// Visits every rotated pair of a (B, T, H, D) tensor: rotate(base + i, base + i + D/2, cos, sin) for
// i < D/2, with the cos and sin of the pair's position t.
template <class Rotate>
void rope_pairs(const float* cos, const float* sin, int64_t B, int64_t T, int64_t H, int64_t D, Rotate rotate) {
  const int64_t half = D / 2;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const float* c = cos + t * half;
      const float* s = sin + t * half;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = ((b * T + t) * H + h) * D;
        for (int64_t i = 0; i < half; ++i) rotate(base + i, base + i + half, c[i], s[i]);
      }
    }
  }
}

}  // namespace

// Pairs (x1, x2) = (x[i], x[i + D/2]): out1 = x1 cos - x2 sin, out2 = x2 cos + x1 sin.
void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B,
                  int64_t T, int64_t H, int64_t D) {
  rope_pairs(cos, sin, B, T, H, D, [&](int64_t i1, int64_t i2, float c, float s) {
    const float x1 = x[i1];
    const float x2 = x[i2];
    out[i1] = x1 * c - x2 * s;
    out[i2] = x2 * c + x1 * s;
  });
}

// Transpose of the rotation: dx1 = g1 cos + g2 sin, dx2 = g2 cos - g1 sin.
void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B,
                   int64_t T, int64_t H, int64_t D) {
  rope_pairs(cos, sin, B, T, H, D, [&](int64_t i1, int64_t i2, float c, float s) {
    const float g1 = dout[i1];
    const float g2 = dout[i2];
    dx[i1] += g1 * c + g2 * s;
    dx[i2] += g2 * c - g1 * s;
  });
}

// ---------------------------------------------------------------------------------------------
// Attention
//
// Per (b, h), with g = h / (H / KVH) the kv head, in blocks of query rows [t0, t1) that see the keys
// [lo, hi) between them (the causal mask leaves the rest of the score matrix zero, so no GEMM
// computes it: about half of the T x Tk scores under a causal mask, which PyTorch's eager
// attention computes in full and masks):
//  1. S = scale * Q K^T (t1 - t0, hi - lo) into scratch (one GEMM).
//  2. Row t: keys [first_key, end_key) visible; lse_t = log sum exp S_ts; P_ts = exp(S_ts - lse_t),
//     zero elsewhere.
//  3. O = P V (one GEMM).
// Backward recomputes P from lse, then dP = dO V^T, dS = P * (dP - rowsum(P * dP)),
// dQ += scale dS K, dK += scale dS^T Q, dV += P^T dO.

namespace {

// Query rows per block under a mask: 64 keeps each GEMM large enough for BLAS's blocking while
// skipping (1 - 1/blocks) / 2 of the masked scores (T = 256: 37.5 %; T = 4096: 49 %).
constexpr int64_t kQueryBlock = 64;

struct KeyRange {
  int64_t lo = 0, hi = 0;  // keys [lo, hi)
};

// The keys that any query row of [t0, t1) sees (positions need not be monotonic: context-parallel
// shards pass their own).
KeyRange block_keys(const AttentionConfig& c, int64_t t0, int64_t t1) {
  KeyRange r{attention_keys(c), 0};
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t lo = first_key(c, t), hi = end_key(c, t);
    if (lo >= hi) continue;
    r.lo = std::min(r.lo, lo);
    r.hi = std::max(r.hi, hi);
  }
  if (r.lo >= r.hi) r = {0, 0};
  return r;
}

int64_t query_block(const AttentionConfig& c) { return c.causal || c.window > 0 || c.doc > 0 ? kQueryBlock : c.T; }

// Offsets of head h's (T, D) slice of q / out / dq and of its kv head's (Tk, D) slice of k / v.
struct HeadOffsets {
  int64_t q, kv;
};
HeadOffsets head_offsets(const AttentionConfig& c, int64_t b, int64_t h) {
  const int64_t g = h / (c.H / c.KVH);
  return {b * c.T * c.H * c.D + h * c.D, b * attention_keys(c) * c.KVH * c.D + g * c.D};
}

// Steps 1-2 for query rows [t0, t1) of one (b, h): fills P rows t0..t1-1, columns [keys.lo, keys.hi)
// (row stride Tk) with the masked probabilities. When lse_in is nullptr the row log-sum-exps are
// computed and written to lse_out; otherwise they are read. q, k point at the head's first row.
void attention_probs(float* P, const float* q, const float* k, const AttentionConfig& c, int64_t t0, int64_t t1,
                     const KeyRange& keys, float scale, const float* lse_in, float* lse_out) {
  const int64_t Tk = attention_keys(c);
  const int64_t q_ld = c.H * c.D, kv_ld = c.KVH * c.D;
  gemm(false, true, t1 - t0, keys.hi - keys.lo, c.D, scale, q + t0 * q_ld, q_ld, k + keys.lo * kv_ld, kv_ld, 0.0f,
       P + t0 * Tk + keys.lo, Tk);
  for (int64_t t = t0; t < t1; ++t) {
    float* row = P + t * Tk;
    const int64_t lo = std::clamp(first_key(c, t), keys.lo, keys.hi);
    const int64_t hi = std::clamp(end_key(c, t), lo, keys.hi);
    float lse = 0.0f;
    if (lse_in != nullptr) {
      lse = lse_in[t];
    } else {
      const float max_score = hi > lo ? ConstArrayMap(row + lo, hi - lo).maxCoeff()
                                      : -std::numeric_limits<float>::infinity();
      lse = max_score + static_cast<float>(std::log(exp_shifted_sum(nullptr, row + lo, hi - lo, max_score)));
      lse_out[t] = lse;
    }
    std::fill(row + keys.lo, row + lo, 0.0f);
    exp_shifted_sum(row + lo, row + lo, hi - lo, lse);
    std::fill(row + hi, row + keys.hi, 0.0f);
  }
}

// Calls visit(b, h, head offsets, t0, t1, keys) for every block of query rows [t0, t1) of every
// (batch, head) in order, with the range of keys the block's rows see.
template <class Visit>
void for_each_query_block(const AttentionConfig& c, Visit&& visit) {
  const int64_t block = query_block(c);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h) {
      const HeadOffsets off = head_offsets(c, b, h);
      for (int64_t t0 = 0; t0 < c.T; t0 += block) {
        const int64_t t1 = std::min(c.T, t0 + block);
        visit(b, h, off, t0, t1, block_keys(c, t0, t1));
      }
    }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionConfig& c, float* scratch) {
  assert(c.KVH > 0 && c.H % c.KVH == 0);
  const float scale = attention_scale(c);
  const int64_t Tk = attention_keys(c);
  const int64_t q_ld = c.H * c.D, kv_ld = c.KVH * c.D;
  for_each_query_block(c, [&](int64_t b, int64_t h, const HeadOffsets& off, int64_t t0, int64_t t1,
                              const KeyRange& keys) {
    float* o = out + off.q + t0 * q_ld;
    // A block no row of which sees a key (only with q_pos) gets lse -inf and zero output.
    attention_probs(scratch, q + off.q, k + off.kv, c, t0, t1, keys, scale, nullptr, lse + (b * c.H + h) * c.T);
    gemm(false, false, t1 - t0, c.D, keys.hi - keys.lo, 1.0f, scratch + t0 * Tk + keys.lo, Tk,
         v + off.kv + keys.lo * kv_ld, kv_ld, 0.0f, o, q_ld);
  });
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, const float* lse,
                        const AttentionConfig& c, float* scratch) {
  assert(c.KVH > 0 && c.H % c.KVH == 0);
  const float scale = attention_scale(c);
  const int64_t Tk = attention_keys(c);
  const int64_t q_ld = c.H * c.D, kv_ld = c.KVH * c.D;
  float* P = scratch;
  float* dP = scratch + c.T * Tk;
  for_each_query_block(c, [&](int64_t b, int64_t h, const HeadOffsets& off, int64_t t0, int64_t t1,
                              const KeyRange& keys) {
    const int64_t rows = t1 - t0, cols = keys.hi - keys.lo;
    if (cols == 0) return;
    float* p = P + t0 * Tk + keys.lo;
    float* dp = dP + t0 * Tk + keys.lo;
    const float* dout_block = dout + off.q + t0 * q_ld;
    const float* q_block = q + off.q + t0 * q_ld;
    attention_probs(P, q + off.q, k + off.kv, c, t0, t1, keys, scale, lse + (b * c.H + h) * c.T, nullptr);
    // dV[lo:hi] += P^T dO;  dP = dO V[lo:hi]^T
    gemm(true, false, cols, c.D, rows, 1.0f, p, Tk, dout_block, q_ld, 1.0f, dv + off.kv + keys.lo * kv_ld, kv_ld);
    gemm(false, true, rows, cols, c.D, 1.0f, dout_block, q_ld, v + off.kv + keys.lo * kv_ld, kv_ld, 0.0f, dp, Tk);
    // dS = P * (dP - rowsum(P * dP)), in place in dP, scaled by `scale` for the Q K^T product.
    for (int64_t t = 0; t < rows; ++t) {
      const float* p_row = p + t * Tk;
      float* dp_row = dp + t * Tk;
      const float d = static_cast<float>(dot_double(p_row, dp_row, cols));
      for (int64_t s = 0; s < cols; ++s) dp_row[s] = scale * p_row[s] * (dp_row[s] - d);
    }
    // dQ += dS K[lo:hi];  dK[lo:hi] += dS^T Q
    gemm(false, false, rows, c.D, cols, 1.0f, dp, Tk, k + off.kv + keys.lo * kv_ld, kv_ld, 1.0f,
         dq + off.q + t0 * q_ld, q_ld);
    gemm(true, false, cols, c.D, rows, 1.0f, dp, Tk, q_block, q_ld, 1.0f, dk + off.kv + keys.lo * kv_ld, kv_ld);
  });
}

// ---------------------------------------------------------------------------------------------
// Elementwise

void gelu_forward(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu(x[i]);
}

void gelu_backward(float* dx, const float* dout, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] += dout[i] * gelu_grad(x[i]);
}

// sigmoid(x) = 1 / (1 + exp(-x)) with the vectorised exp (exp_chunks).
void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
  exp_chunks(gate, n, -1.0f, 0.0f, [&](int64_t i, const float* e, int64_t len) {
    for (int64_t j = 0; j < len; ++j) out[i + j] = gate[i + j] * (1.0f / (1.0f + e[j])) * up[i + j];
  });
}

// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, int64_t n) {
  exp_chunks(gate, n, -1.0f, 0.0f, [&](int64_t i, const float* e, int64_t len) {
    for (int64_t j = 0; j < len; ++j) {
      const float x = gate[i + j], s = 1.0f / (1.0f + e[j]), d = dout[i + j];
      dgate[i + j] += d * up[i + j] * s * (1.0f + x * (1.0f - s));
      dup[i + j] += d * x * s;
    }
  });
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

// Per row: the max, one vectorised pass of exp(x - max) (written to dlogits when there is one) summed
// in double, then the row scaled by dloss / (num_targets * sum): exp is evaluated once per logit.
double softmax_cross_entropy_forward_backward(float* dlogits, const float* logits,
                                              const int32_t* targets, int64_t N, int64_t V,
                                              int64_t num_targets, float dloss) {
  double loss_sum = 0.0;
  const double inv_count = 1.0 / static_cast<double>(num_targets);
  const double g = static_cast<double>(dloss) * inv_count;
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V;
    const int32_t target = targets[n];
    float* drow = dlogits != nullptr ? dlogits + n * V : nullptr;
    if (target < 0) {
      if (drow != nullptr) std::fill_n(drow, V, 0.0f);
      continue;
    }
    assert(target < V);
    const float max_logit = ConstArrayMap(row, V).maxCoeff();
    const float target_logit = row[target];  // read before an in-place write
    const double sum = exp_shifted_sum(drow, row, V, max_logit);
    const double log_sum = std::log(sum);
    loss_sum += log_sum - static_cast<double>(target_logit - max_logit);
    if (drow != nullptr) {
      ArrayMap(drow, V) *= static_cast<float>(g / sum);
      drow[target] = static_cast<float>(
          (std::exp(static_cast<double>(target_logit - max_logit) - log_sum) - 1.0) * g);
    }
  }
  return loss_sum * inv_count;
}

void vocab_parallel_sum_exp(float* sumexp, const float* logits, const float* max, int64_t N, int64_t V) {
  for (int64_t i = 0; i < N; ++i) sumexp[i] = static_cast<float>(exp_shifted_sum(nullptr, logits + i * V, V, max[i]));
}

void vocab_parallel_softmax_backward(float* logits, const float* max, const float* sumexp,
                                     const int32_t* targets, int64_t v0, int64_t N, int64_t V, double scale) {
  for (int64_t i = 0; i < N; ++i) {
    float* row = logits + i * V;
    exp_shifted_sum(row, row, V, max[i]);
    ArrayMap(row, V) *= static_cast<float>(scale / static_cast<double>(sumexp[i]));
    const int64_t target = targets[i] - v0;
    if (target >= 0 && target < V) row[target] -= static_cast<float>(scale);
  }
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

double grad_sum_squares(const float* grad, int64_t n) { return sum_squares_double(grad, n); }

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
