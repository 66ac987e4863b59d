// Device code of the CUDA kernels (kernels.cu holds the host side: Context, cuBLAS, launches). Kept in
// this header so that it compiles twice: by nvcc through kernels.cu, and by g++ through the CPU emulation
// of CUDA in tests/runtime_cuda/cuda_emulation.hpp, where kernels_emulated_test.cpp runs every kernel here
// against the CPU kernels on a machine without a GPU. Only CUDA features that emulation provides are used:
// blockIdx / threadIdx / blockDim / gridDim (x only), __shared__, __syncthreads(_or), __shfl_xor_sync,
// atomicAdd, the float math functions, __nv_bfloat16.
#pragma once

#include "mgt/runtime/cpu/kernels.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace mgt::rt::cuda::kernels {
namespace {  // internal linkage: the emulation test compiles these same definitions in its own TU

constexpr int kThreads = 256;     // elementwise and row kernels
constexpr int kTile = 128;        // attention: keys per tile = threads per block
constexpr int kMaxHeadDim = 256;  // attention: D <= 256 (two dims per thread)

// ---- block reductions (blockDim.x a multiple of 32, at most 1024) ----

template <class T>
__device__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Every thread gets the block's sum. `shared` holds 32 values; ends with a barrier, so it can be reused.
template <class T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < warps ? shared[lane] : T(0);
  total = warp_sum(total);
  __syncthreads();
  return total;
}
__device__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = lane < warps ? shared[lane] : -INFINITY;
  total = warp_max(total);
  __syncthreads();
  return total;
}

// ---- embedding ----

__global__ void embedding_forward_kernel(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t C) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < N * C; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    out[i] = wte[int64_t(ids[n]) * C + c];
  }
}
__global__ void embedding_backward_kernel(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t C) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < N * C; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    atomicAdd(&dwte[int64_t(ids[n]) * C + c], dout[i]);
  }
}

// ---- norms: one block per row ----

__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* x, const float* w, int64_t C, float eps,
                                       bool unit_offset) {
  __shared__ double shared[32];
  const int64_t n = blockIdx.x;
  const float* xr = x + n * C;
  double sum_sq = 0.0;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) sum_sq += double(xr[i]) * xr[i];
  sum_sq = block_sum(sum_sq, shared);
  const float r = float(1.0 / sqrt(sum_sq / double(C) + eps));
  if (threadIdx.x == 0) rstd[n] = r;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float weight = unit_offset ? 1.0f + w[i] : w[i];
    out[n * C + i] = weight * (xr[i] * r);
  }
}
__global__ void rmsnorm_backward_kernel(float* dx, float* dw, const float* dout, const float* x, const float* w,
                                        const float* rstd, int64_t C, bool unit_offset) {
  __shared__ double shared[32];
  const int64_t n = blockIdx.x;
  const float* xr = x + n * C;
  const float* gr = dout + n * C;
  const float r = rstd[n];
  double dot = 0.0;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float weight = unit_offset ? 1.0f + w[i] : w[i];
    dot += double(weight * gr[i]) * xr[i];
  }
  dot = block_sum(dot, shared);
  const float coef = float(dot / double(C)) * r * r * r;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float weight = unit_offset ? 1.0f + w[i] : w[i];
    dx[n * C + i] += r * weight * gr[i] - coef * xr[i];
    if (dw != nullptr) atomicAdd(&dw[i], gr[i] * xr[i] * r);
  }
}
__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* x, const float* w,
                                         const float* b, int64_t C, float eps) {
  __shared__ double shared[32];
  const int64_t n = blockIdx.x;
  const float* xr = x + n * C;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) sum += xr[i];
  const double mu = block_sum(sum, shared) / double(C);
  double var = 0.0;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) var += (xr[i] - mu) * (xr[i] - mu);
  var = block_sum(var, shared) / double(C);
  const float m = float(mu), r = float(1.0 / sqrt(var + eps));
  if (threadIdx.x == 0) mean[n] = m, rstd[n] = r;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x)
    out[n * C + i] = (xr[i] - m) * r * w[i] + (b != nullptr ? b[i] : 0.0f);
}
__global__ void layernorm_backward_kernel(float* dx, float* dw, float* db, const float* dout, const float* x,
                                          const float* w, const float* mean, const float* rstd, int64_t C) {
  __shared__ double shared[32];
  const int64_t n = blockIdx.x;
  const float* xr = x + n * C;
  const float* gr = dout + n * C;
  const float m = mean[n], r = rstd[n];
  double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float xhat = (xr[i] - m) * r;
    const float dnorm = w[i] * gr[i];
    dnorm_mean += dnorm;
    dnorm_norm_mean += double(dnorm) * xhat;
  }
  const float a = float(block_sum(dnorm_mean, shared) / double(C));
  const float bb = float(block_sum(dnorm_norm_mean, shared) / double(C));
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float xhat = (xr[i] - m) * r;
    const float dnorm = w[i] * gr[i];
    dx[n * C + i] += r * (dnorm - a - xhat * bb);
    if (dw != nullptr) atomicAdd(&dw[i], xhat * gr[i]);
    if (db != nullptr) atomicAdd(&db[i], gr[i]);
  }
}

// ---- linear helpers ----

__global__ void add_bias_kernel(float* y, const float* b, int64_t N, int64_t OC) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < N * OC; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += b[i % OC];
}
// db[o] += sum_n dy[n, o]: one thread per column, rows in order (deterministic).
__global__ void bias_grad_kernel(float* db, const float* dy, int64_t N, int64_t OC) {
  const int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (o >= OC) return;
  float sum = 0.0f;
  for (int64_t n = 0; n < N; ++n) sum += dy[n * OC + o];
  db[o] += sum;
}
// Column-major (rows x cols, leading dimension ld) fp32 -> compact bf16 (ld = rows).
__global__ void to_bf16_kernel(__nv_bfloat16* dst, const float* src, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * cols;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i / rows, r = i % rows;
    dst[i] = __float2bfloat16(src[c * ld + r]);
  }
}

// ---- rope ----

__global__ void rope_kernel(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T,
                            int64_t H, int64_t D, bool backward) {
  const int64_t half = D / 2, total = B * T * H * half;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % half, row = i / half;  // row = (b * T + t) * H + h
    const int64_t t = (row / H) % T;
    const float c = cos[t * half + j], s = sin[t * half + j];
    const int64_t base = row * D;
    const float x1 = x[base + j], x2 = x[base + j + half];
    if (!backward) {
      out[base + j] = x1 * c - x2 * s;
      out[base + j + half] = x2 * c + x1 * s;
    } else {  // transpose of the rotation, accumulated
      out[base + j] += x1 * c + x2 * s;
      out[base + j + half] += x2 * c - x1 * s;
    }
  }
}

// ---- attention: one block of kTile threads per (b, h, t) ----

struct AttentionShape {
  int64_t B, T, H, KVH, D, Tk, window;
  bool causal;
  float scale;
  const int64_t* q_pos;
  int64_t doc;  ///< packed documents (cpu::AttentionConfig::doc); 0 = none
};

__device__ void visible_keys(const AttentionShape& a, int64_t t, int64_t* lo, int64_t* hi) {
  const int64_t pos = a.q_pos != nullptr ? a.q_pos[t] : t;
  *lo = a.window > 0 ? max(int64_t(0), pos - a.window + 1) : 0;
  *hi = a.causal ? min(pos + 1, a.Tk) : a.Tk;
  if (a.doc > 0) {  // the query's own document bounds both ends
    *lo = max(*lo, pos / a.doc * a.doc);
    *hi = min(*hi, (pos / a.doc + 1) * a.doc);
  }
}

__global__ void attention_forward_kernel(float* out, float* lse, const float* q, const float* k, const float* v,
                                         AttentionShape a) {
  __shared__ float q_sh[kMaxHeadDim];
  __shared__ float p_sh[kTile];
  __shared__ float red[32];
  const int64_t t = blockIdx.x % a.T, h = (blockIdx.x / a.T) % a.H, b = blockIdx.x / (a.T * a.H);
  const int64_t g = h / (a.H / a.KVH);
  const int64_t q_off = ((b * a.T + t) * a.H + h) * a.D;
  for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) q_sh[d] = q[q_off + d];
  __syncthreads();
  int64_t lo, hi;
  visible_keys(a, t, &lo, &hi);
  float m = -INFINITY, l = 0.0f, acc[2] = {0.0f, 0.0f};
  for (int64_t start = lo; start < hi; start += kTile) {
    const int64_t s = start + threadIdx.x;
    float score = -INFINITY;
    if (s < hi) {
      const float* kr = k + ((b * a.Tk + s) * a.KVH + g) * a.D;
      float dot = 0.0f;
      for (int64_t d = 0; d < a.D; ++d) dot += q_sh[d] * kr[d];
      score = a.scale * dot;
    }
    const float new_m = fmaxf(m, block_max(score, red));
    const float p = s < hi ? expf(score - new_m) : 0.0f;
    p_sh[threadIdx.x] = p;
    const float tile_sum = block_sum(p, red);  // its barriers also publish p_sh
    const float corr = expf(m - new_m);        // 0 on the first tile (m = -inf)
    l = l * corr + tile_sum;
    const int64_t count = min(int64_t(kTile), hi - start);
    for (int j = 0; j < 2; ++j) {
      const int64_t d = threadIdx.x + j * kTile;
      if (d >= a.D) break;
      float sum = 0.0f;
      for (int64_t i = 0; i < count; ++i) sum += p_sh[i] * v[((b * a.Tk + start + i) * a.KVH + g) * a.D + d];
      acc[j] = acc[j] * corr + sum;
    }
    m = new_m;
    __syncthreads();
  }
  for (int j = 0; j < 2; ++j) {
    const int64_t d = threadIdx.x + j * kTile;
    if (d < a.D) out[q_off + d] = l > 0.0f ? acc[j] / l : 0.0f;
  }
  if (threadIdx.x == 0) lse[(b * a.H + h) * a.T + t] = l > 0.0f ? m + logf(l) : -INFINITY;
}

// Backward, part 1: one block per (b, h, query row t). Pass 1: D_t = sum_s p_s dp_s, saved in row_dot for
// part 2. Pass 2: ds_s = scale p_s (dp_s - D_t); dq_t += sum_s ds_s k_s, in registers (no atomics).
__global__ void attention_backward_query_kernel(float* dq, float* row_dot_out, const float* dout, const float* q,
                                                const float* k, const float* v, const float* lse, AttentionShape a) {
  __shared__ float q_sh[kMaxHeadDim];
  __shared__ float do_sh[kMaxHeadDim];
  __shared__ float ds_sh[kTile];
  __shared__ double red[32];
  const int64_t t = blockIdx.x % a.T, h = (blockIdx.x / a.T) % a.H, b = blockIdx.x / (a.T * a.H);
  const int64_t g = h / (a.H / a.KVH);
  const int64_t q_off = ((b * a.T + t) * a.H + h) * a.D;
  for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) q_sh[d] = q[q_off + d], do_sh[d] = dout[q_off + d];
  __syncthreads();
  const float row_lse = lse[(b * a.H + h) * a.T + t];
  int64_t lo, hi;
  visible_keys(a, t, &lo, &hi);
  // p_s = exp(scale q.k_s - lse), dp_s = dout . v_s
  auto probs = [&](int64_t s, float* p, float* dp) {
    const float* kr = k + ((b * a.Tk + s) * a.KVH + g) * a.D;
    const float* vr = v + ((b * a.Tk + s) * a.KVH + g) * a.D;
    float qk = 0.0f, dv_dot = 0.0f;
    for (int64_t d = 0; d < a.D; ++d) qk += q_sh[d] * kr[d], dv_dot += do_sh[d] * vr[d];
    *p = expf(a.scale * qk - row_lse);
    *dp = dv_dot;
  };
  double local = 0.0;
  for (int64_t s = lo + threadIdx.x; s < hi; s += blockDim.x) {
    float p, dp;
    probs(s, &p, &dp);
    local += double(p) * dp;
  }
  const float row_dot = float(block_sum(local, red));
  if (threadIdx.x == 0) row_dot_out[(b * a.H + h) * a.T + t] = row_dot;
  float dq_acc[2] = {0.0f, 0.0f};
  for (int64_t start = lo; start < hi; start += kTile) {
    const int64_t s = start + threadIdx.x;
    float p = 0.0f, dp = 0.0f;
    if (s < hi) probs(s, &p, &dp);
    ds_sh[threadIdx.x] = a.scale * p * (dp - row_dot);
    __syncthreads();
    const int64_t count = min(int64_t(kTile), hi - start);
    for (int j = 0; j < 2; ++j) {
      const int64_t d = threadIdx.x + j * kTile;
      if (d >= a.D) break;
      for (int64_t i = 0; i < count; ++i) dq_acc[j] += ds_sh[i] * k[((b * a.Tk + start + i) * a.KVH + g) * a.D + d];
    }
    __syncthreads();
  }
  for (int j = 0; j < 2; ++j) {
    const int64_t d = threadIdx.x + j * kTile;
    if (d < a.D) dq[q_off + d] += dq_acc[j];
  }
}

// Backward, part 2: one block per (b, kv head g, key s), the mirror of part 1: for every query head of the
// group and every query t that sees key s, p_ts and ds_ts (with D_t from part 1); dk_s += sum ds_ts q_t and
// dv_s += sum p_ts dout_t in registers. No atomics: each (b, g, s) row has one writer.
__global__ void attention_backward_key_kernel(float* dk, float* dv, const float* dout, const float* q, const float* k,
                                              const float* v, const float* lse, const float* row_dot,
                                              AttentionShape a) {
  __shared__ float k_sh[kMaxHeadDim];
  __shared__ float v_sh[kMaxHeadDim];
  __shared__ float p_sh[kTile];
  __shared__ float ds_sh[kTile];
  const int64_t s = blockIdx.x % a.Tk, g = (blockIdx.x / a.Tk) % a.KVH, b = blockIdx.x / (a.Tk * a.KVH);
  const int64_t group = a.H / a.KVH;
  const int64_t kv_off = ((b * a.Tk + s) * a.KVH + g) * a.D;
  for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) k_sh[d] = k[kv_off + d], v_sh[d] = v[kv_off + d];
  __syncthreads();
  float dk_acc[2] = {0.0f, 0.0f}, dv_acc[2] = {0.0f, 0.0f};
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t start = 0; start < a.T; start += kTile) {
      const int64_t t = start + threadIdx.x;
      float p = 0.0f, ds = 0.0f;
      bool visible = false;
      if (t < a.T) {
        int64_t lo, hi;
        visible_keys(a, t, &lo, &hi);
        visible = lo <= s && s < hi;
      }
      if (visible) {
        const int64_t q_off = ((b * a.T + t) * a.H + h) * a.D;
        float qk = 0.0f, dp = 0.0f;
        for (int64_t d = 0; d < a.D; ++d) qk += q[q_off + d] * k_sh[d], dp += dout[q_off + d] * v_sh[d];
        const int64_t r = (b * a.H + h) * a.T + t;
        p = expf(a.scale * qk - lse[r]);
        ds = a.scale * p * (dp - row_dot[r]);
      }
      p_sh[threadIdx.x] = p;
      ds_sh[threadIdx.x] = ds;
      if (__syncthreads_or(visible)) {  // skip tiles no query of which sees key s (causal: t < s)
        const int64_t count = min(int64_t(kTile), a.T - start);
        for (int j = 0; j < 2; ++j) {
          const int64_t d = threadIdx.x + j * kTile;
          if (d >= a.D) break;
          for (int64_t i = 0; i < count; ++i) {
            const int64_t q_off = ((b * a.T + start + i) * a.H + h) * a.D + d;
            dk_acc[j] += ds_sh[i] * q[q_off];
            dv_acc[j] += p_sh[i] * dout[q_off];
          }
        }
      }
      __syncthreads();
    }
  }
  for (int j = 0; j < 2; ++j) {
    const int64_t d = threadIdx.x + j * kTile;
    if (d < a.D) dk[kv_off + d] += dk_acc[j], dv[kv_off + d] += dv_acc[j];
  }
}

/// The kernels' view of a cpu::AttentionConfig (host side); D <= kMaxHeadDim.
AttentionShape attention_shape(const cpu::AttentionConfig& c) {
  if (c.KVH <= 0 || c.H % c.KVH != 0) throw std::invalid_argument("attention: KVH must divide H");
  if (c.D > kMaxHeadDim) throw std::invalid_argument("attention: the CUDA kernel needs head_dim <= 256");
  return AttentionShape{c.B, c.T, c.H, c.KVH, c.D, cpu::attention_keys(c), c.window, c.causal,
                        c.scale != 0.0f ? c.scale : 1.0f / std::sqrt(float(c.D)), c.q_pos, c.doc};
}

// ---- elementwise ----

constexpr float kGeluBeta = 0.7978845608028654f;
constexpr float kGeluKappa = 0.044715f;
__device__ float gelu(float x) { return 0.5f * x * (1.0f + tanhf(kGeluBeta * (x + kGeluKappa * x * x * x))); }
__device__ float gelu_grad(float x) {
  const float x_sq = x * x;
  const float tanh_inner = tanhf(kGeluBeta * (x + kGeluKappa * x_sq * x));
  return 0.5f * (1.0f + tanh_inner) +
         0.5f * x * (1.0f - tanh_inner * tanh_inner) * kGeluBeta * (1.0f + 3.0f * kGeluKappa * x_sq);
}
__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

enum class Elementwise { gelu_fwd, gelu_bwd, swiglu_fwd, swiglu_bwd, geglu_fwd, geglu_bwd, residual_fwd, residual_bwd,
                         scale };

// out0/out1 written or accumulated as the CPU kernel of `kind`; in0..in2 its inputs.
__global__ void elementwise_kernel(Elementwise kind, float* out0, float* out1, const float* in0, const float* in1,
                                   const float* in2, float scalar, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    switch (kind) {
      case Elementwise::gelu_fwd: out0[i] = gelu(in0[i]); break;                  // x
      case Elementwise::gelu_bwd: out0[i] += in0[i] * gelu_grad(in1[i]); break;   // dout, x
      case Elementwise::swiglu_fwd: {                                             // gate, up
        const float gt = in0[i];
        out0[i] = gt * sigmoid(gt) * in1[i];
        break;
      }
      case Elementwise::swiglu_bwd: {  // dout, gate, up
        const float gt = in1[i], sg = sigmoid(gt), silu = gt * sg;
        out0[i] += in0[i] * in2[i] * (sg * (1.0f + gt * (1.0f - sg)));
        out1[i] += in0[i] * silu;
        break;
      }
      case Elementwise::geglu_fwd: out0[i] = gelu(in0[i]) * in1[i]; break;
      case Elementwise::geglu_bwd:
        out0[i] += in0[i] * in2[i] * gelu_grad(in1[i]);
        out1[i] += in0[i] * gelu(in1[i]);
        break;
      case Elementwise::residual_fwd: out0[i] = in0[i] + in1[i]; break;
      case Elementwise::residual_bwd:
        if (out0 != nullptr) out0[i] += in0[i];
        if (out1 != nullptr) out1[i] += in0[i];
        break;
      case Elementwise::scale: out0[i] *= scalar; break;
    }
  }
}

// ---- loss: one block per row ----

__global__ void cross_entropy_kernel(float* dlogits, const float* logits, const int32_t* targets, int64_t V,
                                     double inv_count, double grad_scale, double* loss_sum) {
  __shared__ float red_f[32];
  __shared__ double red_d[32];
  const int64_t n = blockIdx.x;
  const float* row = logits + n * V;
  float* drow = dlogits != nullptr ? dlogits + n * V : nullptr;
  const int32_t target = targets[n];
  if (target < 0) {
    if (drow != nullptr)
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) drow[i] = 0.0f;
    return;
  }
  const float target_logit = row[target];  // every thread reads it before any write (in place)
  float local_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) local_max = fmaxf(local_max, row[i]);
  const float max_logit = block_max(local_max, red_f);
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) local += exp(double(row[i] - max_logit));
  const double log_sum = log(block_sum(local, red_d));  // its barriers order every read above before the writes
  if (threadIdx.x == 0) atomicAdd(loss_sum, (log_sum - double(target_logit - max_logit)) * inv_count);
  if (drow == nullptr) return;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const double p = exp(double(row[i] - max_logit) - log_sum);
    drow[i] = float((i == target ? p - 1.0 : p) * grad_scale);
  }
}

// ---- optimizer ----

struct AdamWScalars {
  float decay, beta1, beta2, one_minus_beta1, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
};
/// The scalars exactly as cpu::adamw_step computes them (torch's Python doubles, used as floats).
inline AdamWScalars adamw_scalars(const cpu::AdamWConfig& config, int64_t step) {
  AdamWScalars s;
  s.decay = float(1.0 - config.lr * config.weight_decay);
  s.beta1 = float(config.beta1);
  s.beta2 = float(config.beta2);
  s.one_minus_beta1 = float(1.0 - config.beta1);
  s.one_minus_beta2 = float(1.0 - config.beta2);
  s.step_size = float(config.lr / (1.0 - std::pow(config.beta1, double(step))));
  s.bias_correction2_sqrt = float(std::sqrt(1.0 - std::pow(config.beta2, double(step))));
  s.eps = float(config.eps);
  return s;
}

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, int64_t n, AdamWScalars s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    float p = param[i] * s.decay;
    const float mi = m[i] * s.beta1 + g * s.one_minus_beta1;
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denom = sqrtf(vi) / s.bias_correction2_sqrt + s.eps;
    p += -s.step_size * (mi / denom);
    param[i] = p, m[i] = mi, v[i] = vi;
  }
}
__global__ void sum_squares_kernel(const float* x, int64_t n, double* out) {
  __shared__ double red[32];
  double local = 0.0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    local += double(x[i]) * x[i];
  local = block_sum(local, red);
  if (threadIdx.x == 0) atomicAdd(out, local);
}

__host__ __device__ float uniform_bf16(uint64_t seed, int64_t i) {
  uint64_t z = (seed ^ static_cast<uint64_t>(i)) + 0x9E3779B97F4A7C15ull;  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;  // exact: 24-bit grid
  uint32_t bits;
  memcpy(&bits, &u, sizeof bits);
  bits &= 0xFFFF0000u;  // keep sign, exponent and 7 mantissa bits: a bf16 value
  float out;
  memcpy(&out, &bits, sizeof out);
  return out;
}

__global__ void probe_uniform_kernel(float* x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = uniform_bf16(seed, i);
}
__global__ void fill_constant_kernel(float* x, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = value;
}

}  // namespace
}  // namespace mgt::rt::cuda::kernels
