// CPU reference kernels, fp32, forward and backward, for dense decoder models (Llama family,
// GPT-2, Gemma). llm.c style: raw row-major float buffers plus sizes, single-threaded, no
// allocation inside a kernel (scratch buffers are arguments). Tested against PyTorch
// (tests/runtime/kernels_test.cpp); design and conventions in docs/runtime_kernels.md. Eigen is an
// implementation detail of kernels.cpp.
//
// Shape letters (llm.c): B batch, T sequence, C channels (hidden), V vocab, N = B*T rows,
// H query heads, KVH key/value heads, D head dim, F ffn width.
//
// Allocation: the kernels allocate nothing themselves; the GEMMs (linear_*, attention_*: OpenBLAS's
// sgemm when the build found it, else Eigen's) pack their operands into their own blocking buffers
// (OpenBLAS's pool; Eigen: the stack when small, its heap above EIGEN_STACK_ALLOCATION_LIMIT).
//
// Gradient convention, every *_backward: gradients are ACCUMULATED (+=) into every d* output
// buffer, activations and weights alike (llm.c). The caller zeroes gradient buffers once per step;
// shared weights (tied embedding / LM head) and GQA key/value heads accumulate naturally. A d*
// pointer that is nullptr is skipped where the function says so. Output buffers never alias
// inputs unless the function says so.
#pragma once

#include <cstdint>

namespace mgt::rt::cpu {

// ---------------------------------------------------------------------------------------------
// Embedding

/// out[n, :] = wte[ids[n], :].  out (N, C), ids (N) in [0, V), wte (V, C).
/// Ids out of range are a programming error (checked with assert only).
void embedding_forward(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t V,
                       int64_t C);
/// Scatter-add: dwte[ids[n], :] += dout[n, :].  dwte (V, C), dout (N, C).
void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t V,
                        int64_t C);

// ---------------------------------------------------------------------------------------------
// Normalisation over the last dim C of x (N, C)

/// HF LlamaRMSNorm: out = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps).
/// unit_offset (Gemma): out = x * rstd * (1 + w).
/// out (N, C), rstd (N) saved for backward, x (N, C), w (C). Also q/k norms: per head (N = B*T*H,
/// C = D; Qwen3) or full width (C = H*D; OLMo-2). Sum of squares is accumulated in double.
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps, bool unit_offset = false);
/// dx (N, C) +=, dw (C) += (nullptr: skipped), dout (N, C), x (N, C), w (C), rstd (N) from forward.
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, bool unit_offset = false);

/// torch.nn.LayerNorm: out = (x - mean) * rstd * w + b, biased variance, rstd = 1/sqrt(var + eps).
/// out (N, C), mean (N), rstd (N) saved for backward, x (N, C), w (C), b (C, nullptr = no bias).
void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t N, int64_t C, float eps);
/// dx (N, C) +=, dw (C) +=, db (C) += (nullptr: skipped), dout (N, C), x, w, mean, rstd as forward.
void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t N, int64_t C);

// ---------------------------------------------------------------------------------------------
// Linear (HF nn.Linear layout): y = x W^T + b

/// y (N, OC) = x (N, IC) * w^T with w (OC, IC) as HF stores it; + b (OC) unless b is nullptr.
/// One GEMM on the raw pointers. A tied LM head is linear_forward with w = wte (V, C).
/// `ldw` is the row stride of w in floats (0 = IC): a tensor-parallel slice of the input features of
/// a wider weight (row-parallel linear) is used in place.
void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t N, int64_t IC,
                    int64_t OC, int64_t ldw = 0);
/// dx (N, IC) += dy w;  dw (OC, IC) += dy^T x;  db (OC) += column sums of dy.
/// Any of dx, dw, db may be nullptr (skipped). dy (N, OC), x (N, IC), w (OC, IC).
/// `ldw` is the row stride of w and dw (0 = IC).
void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                     const float* w, int64_t N, int64_t IC, int64_t OC, int64_t ldw = 0);

// ---------------------------------------------------------------------------------------------
// Rotary position embedding, rotate-half convention (HF `rotate_half`: pairs (i, i + D/2))

/// HF rope_scaling. factor == 0: default rope. factor > 0: rope_type "llama3" frequency scaling
/// (HF `_compute_llama3_parameters`; attention factor 1).
struct RopeConfig {
  double theta = 10000.0;  ///< rope_theta
  double factor = 0.0;     ///< rope_scaling.factor; 0 = no scaling
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

/// inv_freq (D/2), computed in float exactly as HF does (D even).
void rope_inv_freq(float* inv_freq, int64_t D, const RopeConfig& config);
/// Tables for positions position_offset .. position_offset + T - 1 (a context-parallel shard passes
/// the global index of its first token): cos, sin (T, D/2); angle = float(pos) * inv_freq[i] in
/// float, as HF's matmul of position ids and inv_freq.
void rope_tables(float* cos, float* sin, int64_t T, int64_t D, int64_t position_offset,
                 const RopeConfig& config);
/// out = x * cos + rotate_half(x) * sin for each head. out, x (B, T, H, D); cos, sin (T, D/2)
/// from rope_tables. out may alias x (in place).
void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B,
                  int64_t T, int64_t H, int64_t D);
/// dx (B, T, H, D) += R^T dout (the inverse rotation); dx must not alias dout.
void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B,
                   int64_t T, int64_t H, int64_t D);

// ---------------------------------------------------------------------------------------------
// Causal self-attention with GQA (HF eager attention: softmax(q k^T * scale + mask) v)

struct AttentionConfig {
  int64_t B = 0, T = 0;
  int64_t H = 0;    ///< query heads (num_attention_heads)
  int64_t KVH = 0;  ///< key/value heads (num_key_value_heads); must divide H; query head h reads
                    ///< kv head h / (H / KVH) (HF repeat_kv)
  int64_t D = 0;    ///< head_dim (q, k and v)
  bool causal = true;
  int64_t window = 0;  ///< sliding window (Mistral): key s visible from query t iff t - s < window;
                       ///< 0 = full attention
  float scale = 0.0f;  ///< softmax scale; 0 = 1/sqrt(D)
  /// Context parallelism: the queries are a subset of the sequence and the keys all of it. Tk keys at
  /// positions 0..Tk-1 (0 = T, self-attention); query t sits at position q_pos[t] (nullptr = t). The
  /// causal mask and the window compare positions.
  int64_t Tk = 0;
  const int64_t* q_pos = nullptr;
  /// Packed documents of `doc` tokens (ir::TrainingSettings::document_tokens): key s is visible from
  /// query t only when both positions lie in the same document (position / doc equal); 0 = none.
  int64_t doc = 0;
};
inline int64_t attention_keys(const AttentionConfig& c) { return c.Tk > 0 ? c.Tk : c.T; }

/// Scratch floats attention_forward needs: T*Tk.
inline int64_t attention_forward_scratch(const AttentionConfig& c) { return c.T * attention_keys(c); }
/// Scratch floats attention_backward needs: 2*T*Tk.
inline int64_t attention_backward_scratch(const AttentionConfig& c) { return 2 * c.T * attention_keys(c); }

/// out (B, T, H, D); lse (B, H, T) the log-sum-exp of each scaled score row, saved for backward;
/// q (B, T, H, D); k, v (B, Tk, KVH, D); scratch (T, Tk). Per (b, h) and block of 64 query rows (all
/// rows without a mask): one GEMM for the scores of the keys the block sees and one for P v; O(T*Tk)
/// memory in scratch only.
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionConfig& config, float* scratch);
/// dq (B, T, H, D) +=, dk, dv (B, Tk, KVH, D) += (the group's query heads sum into their kv head);
/// dout (B, T, H, D); q, k, v, lse as forward; scratch (2, T, T). Recomputes P from lse.
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, const float* lse,
                        const AttentionConfig& config, float* scratch);

// ---------------------------------------------------------------------------------------------
// Elementwise: activations and residual (n elements)

/// GELU, tanh approximation (torch gelu(approximate="tanh"), HF gelu_new / gelu_pytorch_tanh).
void gelu_forward(float* out, const float* x, int64_t n);
/// dx += dout * gelu'(x).
void gelu_backward(float* dx, const float* dout, const float* x, int64_t n);

/// SwiGLU: out = silu(gate) * up (HF LlamaMLP act_fn(gate_proj(x)) * up_proj(x)).
void swiglu_forward(float* out, const float* gate, const float* up, int64_t n);
/// dgate += dout * up * silu'(gate);  dup += dout * silu(gate).
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, int64_t n);

/// GeGLU (Gemma-2): out = gelu_tanh(gate) * up.
void geglu_forward(float* out, const float* gate, const float* up, int64_t n);
/// dgate += dout * up * gelu'(gate);  dup += dout * gelu(gate).
void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                    const float* up, int64_t n);

/// out = a + b. out may alias a or b.
void residual_forward(float* out, const float* a, const float* b, int64_t n);
/// da += dout;  db += dout (either may be nullptr).
void residual_backward(float* da, float* db, const float* dout, int64_t n);

// ---------------------------------------------------------------------------------------------
// Loss

/// Fused softmax cross-entropy over the vocab. logits (N, V); targets (N), a negative target is
/// ignored (HF ignore_index -100). Returns sum over rows of -log softmax(logits)[target], divided
/// by num_targets (the number of target tokens the mean runs over: all of them, also those other
/// ranks hold). When dlogits (N, V) is not nullptr it is WRITTEN (=, not +=) with
/// dloss * (softmax - onehot(target)) / num_targets (zero rows for ignored targets); dlogits may
/// alias logits (in place). Row sums in double.
double softmax_cross_entropy_forward_backward(float* dlogits, const float* logits,
                                              const int32_t* targets, int64_t N, int64_t V,
                                              int64_t num_targets, float dloss = 1.0f);

/// Vocab-parallel cross-entropy (the logits' vocab split over tp; the executor all-reduces the
/// per-token statistics between these calls). sumexp[i] = sum_j exp(logits[i, j] - max[i]) over this
/// rank's V columns, with the vectorised exp, summed in double: one pass as in the fused kernel.
void vocab_parallel_sum_exp(float* sumexp, const float* logits, const float* max, int64_t N, int64_t V);
/// dlogits (N, V), WRITTEN in place over the logits: exp(logits - max) / sumexp * scale (the global
/// max and sum of exponentials), minus scale at the target where this rank holds its column
/// (targets[i] - v0 in [0, V)).
void vocab_parallel_softmax_backward(float* logits, const float* max, const float* sumexp,
                                     const int32_t* targets, int64_t v0, int64_t N, int64_t V, double scale);

// ---------------------------------------------------------------------------------------------
// Optimizer

/// torch.optim.AdamW (amsgrad off, maximize off), hyper-parameters as Python floats (double).
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  ///< decoupled, applied to every parameter
};

/// One AdamW step on n parameters, in torch's order: p *= 1 - lr*wd; m = beta1*m + (1-beta1)*g;
/// v = beta2*v + (1-beta2)*g^2; p -= lr/(1-beta1^step) * m / (sqrt(v)/sqrt(1-beta2^step) + eps).
/// step is 1-based (1 on the first update). param, m, v updated in place; grad read only.
/// m, v start zeroed. Works on any contiguous shard (ZeRO: each rank its slice).
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                const AdamWConfig& config);

/// Sum of squares of n gradients, accumulated in double (for a global norm across buffers/ranks:
/// sum the partial sums, then sqrt).
double grad_sum_squares(const float* grad, int64_t n);
/// torch.nn.utils.clip_grad_norm_ coefficient: min(1, max_norm / (norm + 1e-6)); 1 when
/// max_norm <= 0 (clipping off).
float grad_clip_coefficient(double norm, double max_norm);
/// grad[i] *= coefficient.
void scale_in_place(float* x, int64_t n, float coefficient);
/// One-buffer helper: returns the global L2 norm of grad (n) and scales grad by
/// grad_clip_coefficient(norm, max_norm) when that is < 1; max_norm 0 = off (norm still returned).
double clip_grad_norm(float* grad, int64_t n, double max_norm);

}  // namespace mgt::rt::cpu
