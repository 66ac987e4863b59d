// Per-block costs from the ops' einsum specs and kinds (docs/cost-model.md §2 time, §4 memory).
//
// Activation memory follows Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
// Transformer Models", §4.1-4.2): every op keeps the inputs its backward needs; tensors outside
// tensor-parallel regions are split along s over tp under sequence parallelism; here additionally s
// splits over cp, GQA shrinks k/v through their own dims, and flash attention keeps q, k, v, the
// output and the log-sum-exp instead of the s^2 softmax (no dropout, as in current LLM training).
#include "mgt/cost_model/layer_cost.hpp"

#include "mgt/cost_model/task_cost.hpp"

#include "mgt/cost_model/compute.hpp"
#include "mgt/cost_model/expert_epilogue.hpp"
#include "einsum_parts.hpp"
#include "layer_walk.hpp"
#include "mgt/cost_model/host_dispatch.hpp"
#include "mgt/cost_model/moe_host_sync.hpp"
#include "mgt/cost_model/ssm_cost.hpp"
#include "mgt/ir/error.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mgt::cost {

namespace {

using einsum_parts::EinsumSpec, einsum_parts::find_dim, einsum_parts::parse_einsum, einsum_parts::routed_experts;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

using layer_walk::Walk, layer_walk::feeds_router, layer_walk::mla_up_proj_policy, layer_walk::op_sac_policy;


// One operand dim per einsum letter; ir::verify guarantees every letter is a dim of its operand,
// looked up output first.
const ir::Dim& einsum_dim(const ir::Op& op, char letter, const ir::TensorDecl& a, const ir::TensorDecl& b,
                          const ir::TensorDecl& o) {
  const ir::Dim* d = find_dim(o, letter);
  if (!d) d = find_dim(a, letter);
  if (!d) d = find_dim(b, letter);
  if (!d) throw std::logic_error("op '" + op.name + "': einsum letter '" + std::string(1, letter) + "' names no operand dim");
  return *d;
}

// A contraction's (batched) GEMM shape: batch dims appear in both operands and the output, M in the
// output and the activation only, N in the output and the second operand only, K nowhere in the
// output. On this rank's sizes, or (global_sizes) the unsharded ones, for model FLOPs.
struct GemmShape {
  int64_t batch = 1, m = 1, n = 1, k = 1;  // n: output features, k: input features of the weight
};

GemmShape gemm_shape(const Walk& w, const ir::Op& op, const EinsumSpec& spec, bool in_tp, bool global_sizes = false) {
  const auto& a = w.tensor(op.inputs[0]);
  const auto& b = w.tensor(op.inputs[1]);
  const auto& o = w.tensor(op.output);
  GemmShape g;
  std::set<char> seen;
  for (char c : spec.lhs + spec.rhs + spec.out) {
    if (!seen.insert(c).second) continue;
    const bool in_l = spec.lhs.find(c) != std::string::npos;
    const bool in_r = spec.rhs.find(c) != std::string::npos;
    const bool in_o = spec.out.find(c) != std::string::npos;
    const ir::Dim& dim = einsum_dim(op, c, a, b, o);
    const int64_t size = !global_sizes               ? local_dim_size(dim, w.ctx, in_tp)
                         : ir::is_symbolic_dim(c) ? (c == 'b' ? w.ctx.micro_batch : w.ctx.seq_len)
                                                  : dim.size;
    if (!in_o) g.k *= size;
    else if (in_l && in_r) g.batch *= size;
    else if (in_l) g.m *= size;
    else g.n *= size;
  }
  return g;
}

// Seconds of one GEMM (batch x mm x nn x kk) in `gemm_dtype` (its efficiency table) at `peak` FLOP/s
// (the linear format's: fp8, MXFP8 or NVFP4 share fp8's table); GEMV-like shapes (a dim under 16) run
// memory-bound (roofline), not on tensor cores.
double gemm_time_s(const Walk& w, ir::DType gemm_dtype, double peak, int64_t batch, int64_t mm, int64_t nn, int64_t kk) {
  const double flops = 2.0 * double(batch) * double(mm) * double(nn) * double(kk);
  if (std::min({mm, nn, kk}) < 16) {
    const int64_t bytes = (batch * (mm * kk + kk * nn + mm * nn)) * ir::dtype_bytes(w.ctx.dtype);
    const double best = gemm_dtype == ir::DType::fp8 ? w.params.fp8_gemm_max_efficiency : w.params.gemm_max_efficiency;
    return std::max(flops / (peak * best), w.memory_time(bytes) - w.params.kernel_floor_s) + w.params.kernel_floor_s;
  }
  const double eff = gemm_efficiency(mm * batch, nn, kk, w.cluster, gemm_dtype, w.params);
  return flops / (peak * eff) + w.params.kernel_floor_s;
}

// Routed experts run as a grouped GEMM (Megatron-Core TEGroupedMLP / GroupedMLP, torchtitan
// grouped_mm): one GEMM per local expert over the tokens routed to it, so each runs at the efficiency
// of its own shape, not of one GEMM over all routed tokens. `expert_groups` = local experts, `rows` =
// token-expert pairs on this rank (balanced routing: the tokens the rank dispatches, times top-k).
struct ExpertGemm {
  int64_t groups = 0;  // 0: not a routed-expert contraction
  int64_t rows_per_group = 0, n = 1, k = 1;
};

ExpertGemm expert_gemm(const Walk& w, const ir::Op& op, const EinsumSpec& spec, const GemmShape& shape) {
  const auto& b = w.tensor(op.inputs[1]);
  const auto& o = w.tensor(op.output);
  const ir::Dim* weight_e = find_dim(b, 'e');
  const ir::Dim* out_e = find_dim(o, 'e');
  if (!b.is_parameter || !weight_e || !out_e || out_e->size >= weight_e->size) return {};
  const int64_t top_k = out_e->size, experts = ceil_div(weight_e->size, std::max<int64_t>(1, w.ctx.ep));
  const bool e_in_batch = spec.lhs.find('e') != std::string::npos;  // "bsef,efh->bseh": e batches the GEMMs
  ExpertGemm g;
  g.groups = experts;
  g.n = e_in_batch ? shape.n : std::max<int64_t>(1, shape.n / top_k);
  g.k = shape.k;
  g.rows_per_group = ceil_div(shape.batch * shape.m * (e_in_batch ? 1 : top_k), experts);
  return g;
}

// One grouped GEMM: every group's (mm x nn x kk) at that shape's efficiency, one kernel floor.
double grouped_gemm_time_s(const Walk& w, ir::DType gemm_dtype, double peak, int64_t groups, int64_t mm, int64_t nn,
                           int64_t kk) {
  return double(groups) * (gemm_time_s(w, gemm_dtype, peak, 1, mm, nn, kk) - w.params.kernel_floor_s) +
         w.params.kernel_floor_s;
}

// Model FLOPs use global sizes: 6 * (active weight elements) * tokens for weights (4 for a frozen
// weight: no weight gradient), 3 x forward for activation-activation contractions.
double contraction_model_flops(const Walk& w, const ir::Op& op, const EinsumSpec& spec, bool frozen) {
  const auto& a = w.tensor(op.inputs[0]);
  const auto& b = w.tensor(op.inputs[1]);
  const auto& o = w.tensor(op.output);
  double global = 2.0;
  std::set<char> seen;
  for (char c : spec.lhs + spec.rhs + spec.out) {
    if (!seen.insert(c).second) continue;
    global *= double(ir::is_symbolic_dim(c) ? (c == 'b' ? w.ctx.micro_batch : w.ctx.seq_len) : einsum_dim(op, c, a, b, o).size);
  }
  return (frozen ? 2.0 : 3.0) * global;
}

// Tensor-parallel communication (Megatron-LM, Shoeybi et al. 2019 §3; with SP, Korthikanti et al.
// 2022 §4.2.2: all-reduce becomes reduce-scatter + all-gather).
void add_contraction_tp_collectives(Walk& w, const ir::Op& op, const EinsumSpec& spec) {
  const auto& a = w.tensor(op.inputs[0]);
  const auto& o = w.tensor(op.output);
  bool partial = false;
  for (char c : spec.lhs + spec.rhs)
    if (spec.out.find(c) == std::string::npos && is_tp_dim(c)) partial = true;
  const bool column = has_tp_dim(o) && !has_tp_dim(a);
  const int64_t out_bytes = w.tp_region_bytes(o);
  // Row-parallel: the output is a partial sum, reduced after the kernel; with SP its gradient
  // arrives sequence-sharded and is gathered before the backward kernel.
  if (partial) {
    w.tp_collective(w.cost.fwd_collectives,
                    w.ctx.sequence_parallel ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, out_bytes,
                    {o.name});
    if (w.ctx.sequence_parallel)
      w.tp_collective(w.cost.bwd_collectives, CollectiveKind::all_gather, out_bytes, {"grad(" + o.name + ")"},
                      /*before=*/true);
  }
  // Column-parallel: the first op reading an input gathers it (SP) before its kernel; in backward
  // that op runs last of the readers, so the input gradient they summed is reduced after it.
  // The last column-parallel reader (the first one in backward) re-gathers the input for the
  // weight gradients (it may have been recomputed as a shard).
  bool last_reader = column, after = false;
  for (const ir::Op& later : w.block.ops) {
    if (after && later.kind == ir::OpKind::contraction && !later.inputs.empty() && later.inputs[0] == a.name) last_reader = false;
    after = after || later.name == op.name;
  }
  if (column && w.ctx.sequence_parallel && last_reader)
    w.tp_collective(w.cost.bwd_collectives, CollectiveKind::all_gather, w.tp_region_bytes(a), {a.name}, /*before=*/true);
  if (column && w.gathered_inputs.insert(a.name).second) {
    const int64_t in_bytes = w.tp_region_bytes(a);
    if (w.ctx.sequence_parallel) {
      w.tp_collective(w.cost.fwd_collectives, CollectiveKind::all_gather, in_bytes, {a.name}, /*before=*/true);
      w.tp_collective(w.cost.bwd_collectives, CollectiveKind::reduce_scatter, in_bytes, {"grad(" + a.name + ")"});
    } else {
      w.tp_collective(w.cost.bwd_collectives, CollectiveKind::all_reduce, in_bytes, {"grad(" + a.name + ")"});
    }
  }
}

// A frozen base weight (LoRA / QLoRA). A targeted contraction also runs its adapter, in the compute dtype:
// forward x A^T (m x r x k) then (x A^T) B^T (m x n x r); backward the data and weight gradients of both
// (Hu et al. 2021). Under QLoRA a linear weight other than the LM head is stored in NF4 and dequantised
// before each GEMM that reads it, forward and input-gradient backward (bitsandbytes keeps the LM head,
// embeddings and norms in bf16): a memory-bound read of 0.5 B and write of 2 B per element and use.
void cost_frozen_weight(Walk& w, const ir::Op& op, const ir::TensorDecl& weight, GemmShape local, GemmShape global) {
  if (is_lora_target(op.name, w.ctx.lora)) {
    const int64_t r = w.ctx.lora.rank;
    const ir::DType dt = w.ctx.dtype;
    const double peak = ir::peak_flops_per_s(w.cluster.gpu, dt);
    const auto [batch, m, n, k] = local;
    // local.batch, not the binding: clang 14 cannot capture structured bindings.
    auto time = [&](int64_t mm, int64_t nn, int64_t kk) { return gemm_time_s(w, dt, peak, local.batch, mm, nn, kk); };
    w.cost.fwd_compute_s += time(m, r, k) + time(m, n, r);
    const double weight_grads = time(k, r, m) + time(r, n, m);
    w.cost.bwd_compute_s += time(m, k, r) + time(m, r, n) + weight_grads;
    w.bwd_weight_s += weight_grads;
    w.fwd_flops += 2.0 * double(batch) * double(m) * double(r) * double(k + n);
    w.cost.adapter_param_elements_local += batch * r * (k + n);
    w.cost.model_flops += 3.0 * 2.0 * double(global.batch) * double(global.m) * double(r) * double(global.k + global.n);
  }
  if (w.ctx.task == ir::Task::qlora && !find_dim(weight, 'v')) {
    w.nf4_weights.insert(weight.name);
    const int64_t elements = local.batch * local.n * local.k;
    const double dequant_s = w.memory_time(int64_t(double(elements) * kDequantBytesPerElement));
    w.cost.fwd_compute_s += dequant_s;
    w.cost.bwd_compute_s += dequant_s;
  }
}

// A contraction runs as one (batched) GEMM forward and two backward (dA = dO.B^T, dB = A^T.dO).
void cost_contraction(Walk& w, const ir::Op& op) {
  const auto& a = w.tensor(op.inputs[0]);
  const auto& b = w.tensor(op.inputs[1]);
  const auto& o = w.tensor(op.output);
  const EinsumSpec spec = parse_einsum(op.einsum);
  const auto all_letters = spec.lhs + spec.rhs;
  const bool in_tp = w.ctx.tp > 1 && std::any_of(all_letters.begin(), all_letters.end(), is_tp_dim);
  const GemmShape shape = gemm_shape(w, op, spec, in_tp);
  const auto [batch, m, n, k] = shape;
  // Low-precision training converts the linear layers only (Transformer Engine, torchtitan float8): weight
  // GEMMs run at that format's peak; activation-activation products and the LM head (the vocab
  // projection: Megatron's output_layer is not a TE module, torchtitan filters "output") stay in the
  // compute dtype.
  const bool low_precision = w.ctx.fp8_linears && b.is_parameter && !find_dim(b, 'v');
  const ir::LinearFormat format =
      low_precision ? (w.ctx.linear_format == ir::LinearFormat::none ? ir::LinearFormat::fp8 : w.ctx.linear_format)
                    : ir::LinearFormat::none;
  const ir::DType gemm_dtype = low_precision ? ir::DType::fp8 : w.ctx.dtype;  // efficiency tables: fp8 for all three
  const double peak = linear_gemm_rate_flops_per_s(w.cluster.gpu, format, w.ctx.dtype);
  // The GEMM as the kernels run it: one (batched) GEMM, or one per local routed expert.
  const ExpertGemm grouped = expert_gemm(w, op, spec, shape);
  const int64_t run_m = grouped.groups ? grouped.rows_per_group : m, run_n = grouped.groups ? grouped.n : n,
                run_k = grouped.groups ? grouped.k : k;
  auto time = [&](int64_t mm, int64_t nn, int64_t kk) {
    return grouped.groups ? grouped_gemm_time_s(w, gemm_dtype, peak, grouped.groups, mm, nn, kk)
                          : gemm_time_s(w, gemm_dtype, peak, shape.batch, mm, nn, kk);  // clang 14: no bindings in lambdas
  };
  w.cost.fwd_compute_s += time(run_m, run_n, run_k);
  w.fwd_flops += 2.0 * double(batch) * double(m) * double(n) * double(k);
  // A frozen base weight (LoRA) gets no gradient: backward computes dA only (Hu et al. 2021 §4).
  const bool frozen = b.is_parameter && (w.ctx.task == ir::Task::lora || w.ctx.task == ir::Task::qlora);
  const double d_b = frozen ? 0.0 : time(run_k, run_n, run_m);  // dB = A^T.dO
  w.cost.bwd_compute_s += time(run_m, run_k, run_n) + d_b;      // dA = dO.B^T
  if (b.is_parameter) w.bwd_weight_s += d_b;
  if (low_precision) {
    // Transformer Engine quantises the activation before the forward GEMM (once per tensor: a fused
    // QKV or gate/up projection reads one quantised x) and the output gradient before the two backward
    // GEMMs, each in both layouts (task_cost.hpp LinearFormatCost). Weights are quantised once per step
    // (fp8 / fp4 parameter gathers, TE's first-micro-batch cache): not here.
    const double rows = grouped.groups ? double(grouped.groups) * double(grouped.rows_per_group) : double(batch) * double(m);
    const double q = linear_format_cost(format).quantize_bytes_per_element;
    if (w.quantized.insert(a.name).second) w.cost.fwd_compute_s += w.memory_time(std::llround(q * rows * double(run_k)));
    w.cost.bwd_compute_s += w.memory_time(std::llround(q * rows * double(run_n)));
  }
  if (grouped.groups && op.inputs.size() > 2 && spec.lhs.find('e') != std::string::npos)  // fc2's bias; fc1's is in TE's GEMM
    w.add_epilogue(expert_bias_bytes(grouped.groups * grouped.rows_per_group * run_n * ir::dtype_bytes(w.ctx.dtype)));
  if (frozen) cost_frozen_weight(w, op, b, shape, gemm_shape(w, op, spec, in_tp, /*global_sizes=*/true));
  w.cost.model_flops += contraction_model_flops(w, op, spec, frozen);
  if (in_tp) add_contraction_tp_collectives(w, op, spec);
  if (b.is_parameter)
    for (const auto& d : b.dims)
      if (const ir::Dim* out_dim = find_dim(o, d.name); d.name == 'e' && out_dim && out_dim->size < d.size)
        w.expert_weights.insert(b.name);
  if (low_precision && w.params.linears_save_quantized_input && !a.is_parameter)
    w.saved_quantized.emplace(a.name, linear_format_cost(format).saved_input_bytes_per_element);
  else if (!a.is_parameter)
    w.saved.insert(a.name);
  if (!b.is_parameter) w.saved.insert(b.name);
}

// One attention op's local sizes: batch x heads, queries, keys (full sequence or window), head dims.
struct AttentionDims {
  double batch_heads, s_q, s_kv, d_qk, d_v;
  AttentionMask mask;
};

// Forward and backward seconds of one attention op without measured rates (docs/cost-model.md §2, §9).
// Flash kernels: `flops` (causal-halved) at the family's efficiency times the kernel model's shape
// curve. Eager (CostParams::attention_materialised): Q.K^T and P.V as batched GEMMs over the full
// s_q x s_kv square (the mask is applied to the scores, nothing is skipped), backward four GEMMs of
// the same sizes (dS.K, dS^T.Q, dO.V^T, P^T.dO); the scores go through HBM: the fused scale-mask-softmax
// reads bf16 scores and writes bf16 probabilities (4 bytes per score), its backward reads the
// probabilities and their gradient and writes the score gradient (6 bytes).
std::pair<double, double> attention_model_times(const Walk& w, const AttentionDims& a, double flops) {
  const CostParams& p = w.params;
  if (p.attention_materialised) {
    const int64_t bh = int64_t(a.batch_heads), sq = int64_t(a.s_q), skv = int64_t(a.s_kv);
    const int64_t dqk = int64_t(a.d_qk), dv = int64_t(a.d_v);
    const double scores = a.batch_heads * a.s_q * a.s_kv;
    const double qk = gemm_time_s(bh * sq, skv, dqk, w.cluster, w.ctx.dtype, p);
    const double pv = gemm_time_s(bh * sq, dv, skv, w.cluster, w.ctx.dtype, p);
    const double softmax_fwd = w.memory_time(int64_t(scores * 4));
    const double softmax_bwd = w.memory_time(int64_t(scores * 6));
    return {qk + pv + softmax_fwd, 2.0 * (qk + pv) + softmax_bwd};
  }
  // Mean kept keys per query row: causal rows see i + 1 of s_kv keys (also on average over a cp
  // rank's load-balanced query blocks); a window, W.
  const double mean_kv = a.mask == AttentionMask::causal ? (a.s_kv + 1) / 2 : a.s_kv;
  const double factor = p.attention_curve.time_factor(mean_kv, a.mask, 0.5 * (a.d_qk + a.d_v));
  return {attention_time_s(flops, p.attention_fwd_efficiency / factor, w.cluster, w.ctx.dtype, p),
          attention_time_s(2.5 * flops, p.attention_bwd_efficiency / factor, w.cluster, w.ctx.dtype, p)};
}

void cost_attention(Walk& w, const ir::Op& op) {
  const auto& q = w.tensor(op.inputs[0]);
  const auto& k = w.tensor(op.inputs[1]);
  const auto& v = w.tensor(op.inputs[2]);
  const auto& o = w.tensor(op.output);
  // Positional layout [b, s, heads, head_dim] on every operand (docs/graph_format.md).
  auto size_at = [&](const ir::TensorDecl& t, size_t i, bool local) {
    return local ? local_dim_size(t.dims[i], w.ctx, true)
                 : (ir::is_symbolic_dim(t.dims[i].name) ? (t.dims[i].name == 'b' ? w.ctx.micro_batch : w.ctx.seq_len)
                                                        : t.dims[i].size);
  };
  // The keys a query can reach: the sequence (gathered over cp: every query block sees all keys), or
  // under packing its own document, so a sequence of s tokens costs what s/d sequences of d cost.
  const int64_t doc = w.ctx.document_tokens;
  const int64_t span = doc > 0 && doc < w.ctx.seq_len ? doc : w.ctx.seq_len;
  const bool windowed = op.sliding_window > 0 && op.sliding_window < span;
  auto fwd_flops = [&](bool local) {
    const double batch = double(size_at(q, 0, local));
    const double s_q = double(size_at(q, 1, local));
    double s_kv = double(span);
    double mask_fraction = op.causal ? 0.5 : 1.0;
    if (windowed) {
      s_kv = double(op.sliding_window);
      mask_fraction = 1.0;
    }
    const double heads = double(size_at(q, 2, local));
    const double d_qk = double(q.dims[3].size);
    const double d_v = double(v.dims[3].size);
    return 2.0 * batch * s_q * s_kv * heads * (d_qk + d_v) * mask_fraction;
  };
  const double local_flops = fwd_flops(true);
  w.fwd_flops += local_flops;
  // FlashAttention-2 (Dao 2023, §3.1): backward does 5 GEMM-like products to forward's 2.
  const double fwd_rate = ir::measured_kernel_rate(w.cluster, "attention_core", "fwd");
  const double bwd_rate = ir::measured_kernel_rate(w.cluster, "attention_core", "bwd");
  const AttentionDims dims{double(size_at(q, 0, true)) * double(size_at(q, 2, true)), double(size_at(q, 1, true)),
                           // an eager (materialised) square covers the whole sequence: a packing mask skips nothing
                           windowed ? double(op.sliding_window)
                                    : double(w.params.attention_materialised ? w.ctx.seq_len : span),
                           double(q.dims[3].size), double(v.dims[3].size),
                           windowed ? AttentionMask::window : (op.causal ? AttentionMask::causal : AttentionMask::none)};
  const auto [fwd_model_s, bwd_model_s] = attention_model_times(w, dims, local_flops);
  const double fwd_s = fwd_rate > 0 ? local_flops / fwd_rate + w.params.kernel_floor_s : fwd_model_s;
  const double bwd_s = bwd_rate > 0 ? local_flops / bwd_rate + w.params.kernel_floor_s : bwd_model_s;
  w.cost.fwd_compute_s += fwd_s;
  w.cost.bwd_compute_s += bwd_s;
  w.cost.attention_fwd_s += fwd_s;
  w.cost.attention_bwd_s += bwd_s;
  w.cost.model_flops += 3.0 * fwd_flops(false);  // MFU convention: fwd + 2x fwd for backward

  // Context parallel: keys and values are all-gathered over cp in forward and again in backward,
  // their gradients reduce-scattered (torchtitan / Megatron CP, load-balanced causal split).
  const int64_t kv_gathered = (w.tp_region_bytes(k) + w.tp_region_bytes(v)) * w.ctx.cp;
  w.cp_collective(w.cost.fwd_collectives, CollectiveKind::all_gather, kv_gathered, {k.name, v.name}, /*before=*/true);
  w.cp_collective(w.cost.bwd_collectives, CollectiveKind::all_gather, kv_gathered, {k.name, v.name}, /*before=*/true);
  w.cp_collective(w.cost.bwd_collectives, CollectiveKind::reduce_scatter, kv_gathered,
                  {"grad(" + k.name + ")", "grad(" + v.name + ")"}, /*before=*/false);

  if (w.params.attention_materialised && fwd_rate <= 0) {
    // Eager attention keeps the bf16 probabilities for backward (Korthikanti et al. 2022 §4.1: 2as^2b
    // per layer, without dropout); selective recompute drops them and recomputes the core (§5).
    w.selective_dropped_bytes += int64_t(dims.batch_heads * dims.s_q * dims.s_kv) * 2;
    w.cost.selective_recompute_s += fwd_s;
  }
  for (const auto* t : {&q, &k, &v, &o}) w.saved.insert(t->name);
  // log-sum-exp per (b, head, query), fp32.
  w.extra_saved_bytes += int64_t(size_at(q, 0, true) * size_at(q, 1, true) * size_at(q, 2, true)) * 4;
}

void cost_elementwise(Walk& w, const ir::Op& op) {
  const auto& x = w.tensor(op.inputs[0]);
  const int64_t bytes = w.act_bytes(x);
  const double elements = double(local_elements(x, w.ctx));
  // Megatron-Core's --recompute-modules layernorm moe_act (SelectiveRecompute::megatron_modules; its
  // mla_up_proj: mla_up_proj_policy):
  // "layernorm" recomputes only a norm that is its own module (transformer_layer.py skips an IdentityOp
  // norm, which a norm fused into TE's LayerNormLinear is), i.e. the one in front of the router;
  // "moe_act" only the experts' activation. Everything else selective would drop is kept.
  const bool megatron_modules = w.params.selective_recompute == SelectiveRecompute::megatron_modules;
  switch (op.kind) {
    case ir::OpKind::norm: {
      const double norm_s = w.add_kernel("norm", elements, 2 * bytes, 3 * bytes);
      w.saved.insert(x.name);
      if (!megatron_modules || feeds_router(w.block, op.output)) {
        w.cost.selective_recompute_s += norm_s;
        w.recomputed.insert(op.output);
      }
      break;
    }
    case ir::OpKind::rope: w.add_kernel("rope", elements, 2 * bytes, 2 * bytes); break;
    case ir::OpKind::activation: {
      const int64_t n_in = int64_t(op.inputs.size());
      const int64_t out_bytes = w.act_bytes(w.tensor(op.output));
      const bool recompute = !megatron_modules || find_dim(x, 'e');
      const double act_s = w.add_kernel("activation", elements, n_in * bytes + out_bytes, 2 * n_in * bytes + out_bytes);
      if (recompute) w.cost.selective_recompute_s += act_s;
      if (op.clamp_limit > 0 && find_dim(x, 'e') && w.epilogue_runs()) {
        // The clamped, concatenated copy is what the fused unit saves for backward (expert_epilogue.hpp).
        w.cost.selective_recompute_s += w.add_epilogue(glu_clamp_bytes(n_in * bytes));
        w.selective_dropped_bytes += n_in * bytes;
      }
      for (const auto& in : op.inputs) w.saved.insert(in);
      if (recompute) w.recomputed.insert(op.output);
      break;
    }
    case ir::OpKind::residual: w.add_kernel("residual", elements, 3 * bytes, 2 * bytes); break;
    case ir::OpKind::router: {
      // Softmax / sigmoid scores and top-k over the router logits, in fp32.
      w.cost.fwd_compute_s += w.memory_time(4 * bytes);
      w.cost.bwd_compute_s += w.memory_time(4 * bytes);
      w.saved.insert(x.name);
      // Expert parallel: each local token goes to top_k experts and comes back (dispatch and
      // combine all-to-alls, each repeated in backward; GShard, Lepikhin et al. 2020 §2.2).
      int64_t hidden = 0;
      for (const auto& t : w.block.tensors)
        if (!t.is_parameter && t.dims.size() == 3 && t.dims[2].name == 'h') hidden = t.dims[2].size;
      const int64_t tokens = w.ctx.micro_batch * local_dim_size({'s', 0}, w.ctx, /*in_tp_region=*/false);
      const int64_t a2a_bytes = tokens * op.top_k * hidden * ir::dtype_bytes(w.ctx.dtype);
      for (int i = 0; i < 2; ++i) {
        w.ep_collective(w.cost.fwd_collectives, CollectiveKind::all_to_all, a2a_bytes);
        w.ep_collective(w.cost.bwd_collectives, CollectiveKind::all_to_all, a2a_bytes);
      }
      // Token permutation (Megatron-Core token_dispatcher.py, MoEAlltoAllTokenDispatcher): the routed
      // token rows are copied into expert order before the dispatch (moe_utils.permute) and, with
      // several local experts behind an all-to-all, sorted by local expert after it and back before
      // the combine (sort_chunks_by_idxs). Each copy reads and writes every routed row, forward and
      // again for the gradients in backward. The weighted unpermute is the graph's combine op.
      const int64_t experts = routed_experts(w.block, op.top_k);
      const int64_t local_experts = ceil_div(std::max<int64_t>(experts, 1), std::max<int64_t>(1, w.ctx.ep));
      const int64_t copies = 1 + (w.ctx.ep > 1 && local_experts > 1 ? 2 : 0);
      const int64_t copy_bytes = copies * 2 * a2a_bytes;
      w.add_kernel("permute", double(copies * tokens * op.top_k * hidden), copy_bytes, copy_bytes);
      break;
    }
    default:
      break;
  }
}

void cost_embedding(Walk& w, const ir::Op& op) {
  const auto& weight = w.tensor(op.inputs[0]);
  const auto& out = w.tensor(op.output);
  const int64_t out_bytes = w.act_bytes(out);
  const double out_elements = double(local_elements(out, w.ctx));
  // backward: scatter-add into an fp32 grad
  w.add_kernel("embedding", out_elements, 2 * out_bytes, out_bytes + 2 * out_bytes);
  // Vocab-parallel embedding: each rank looks up its vocab slice, partial sums are reduced.
  if (w.ctx.tp > 1 && has_tp_dim(weight)) {
    const int64_t full = w.tp_region_bytes(out);
    w.tp_collective(w.cost.fwd_collectives,
                    w.ctx.sequence_parallel ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, full, {out.name});
    if (w.ctx.sequence_parallel)
      w.tp_collective(w.cost.bwd_collectives, CollectiveKind::all_gather, full, {"grad(" + out.name + ")"}, /*before=*/true);
  }
}

// Unfused cross-entropy as PyTorch runs it: bf16 logits, an fp32 upcast for log-softmax, an fp32
// gradient: 10 bytes per local logit at the loss (docs/cost-model.md §4.3).
void cost_loss(Walk& w, const ir::Op& op) {
  const auto& logits = w.tensor(op.inputs[0]);
  const int64_t elements = local_elements(logits, w.ctx);
  w.add_kernel("softmax_cross_entropy", double(elements), elements * (2 + 4 + 4), elements * (4 + 4 + 2));
  w.cost.logits_bytes = std::max(w.cost.logits_bytes, elements * 10);
  // Vocab-parallel cross-entropy: max, sum-exp and target logit all-reduced over tp, fp32 per token.
  if (w.ctx.tp > 1 && has_tp_dim(logits)) {
    const int64_t per_token = w.ctx.micro_batch * ceil_div(w.ctx.seq_len, w.ctx.cp) * 4;
    w.tp_collective(w.cost.fwd_collectives, CollectiveKind::all_reduce, per_token, {"loss(max)"}, false, ir::ReduceOp::max);
    w.tp_collective(w.cost.fwd_collectives, CollectiveKind::all_reduce, per_token, {"loss(sumexp)"});
    w.tp_collective(w.cost.fwd_collectives, CollectiveKind::all_reduce, per_token, {"loss(target)"});
  }
}

// State-space scan (ssm_cost.hpp for the formulas). SSD runs as chunked matmuls on tensor cores and is
// priced like attention; Mamba-1's scan runs on CUDA cores: its fp32 FLOPs or its bytes, whichever is
// slower. Context parallel as Megatron-Core's MambaContextParallel does it: all-to-alls turn sequence
// shards into head shards before the conv and scan (x, dt, B, C and the gate z, z the size of y) and
// back after (y); the same again in backward.
void cost_ssm_scan(Walk& w, const ir::Op& op) {
  const auto& x = w.tensor(op.inputs[0]);
  const auto& dt = w.tensor(op.inputs[1]);
  const auto& b = w.tensor(op.inputs[2]);
  const auto& c = w.tensor(op.inputs[3]);
  const auto& y = w.tensor(op.output);
  const auto shape = [&](bool local) {
    const auto size = [&](const ir::Dim& d) { return local ? local_dim_size(d, w.ctx, true) : d.size; };
    SsmScanShape s;
    s.chunk = op.chunk_size;
    s.state = b.dims.back().size;
    if (s.chunk > 0) {
      s.heads = size(x.dims[2]), s.head_dim = x.dims[3].size, s.groups = size(b.dims[2]);
    } else {
      s.head_dim = size(x.dims[2]);
    }
    return s;
  };
  const SsmScanShape local = shape(true);
  const double tokens = double(w.ctx.micro_batch * local_dim_size(x.dims[1], w.ctx, true));
  const double fwd = ssm_scan_fwd_flops_per_token(local) * tokens;
  const double bwd = ssm_scan_bwd_flops_per_token(local) * tokens;
  const int64_t bytes = int64_t(ssm_scan_bytes_per_token(local, ir::dtype_bytes(w.ctx.dtype)) * tokens);
  if (op.chunk_size > 0) {
    w.cost.fwd_compute_s += attention_time_s(fwd, w.params.attention_fwd_efficiency, w.cluster, w.ctx.dtype, w.params);
    w.cost.bwd_compute_s += attention_time_s(bwd, w.params.attention_bwd_efficiency, w.cluster, w.ctx.dtype, w.params);
  } else {
    const double fp32 = w.cluster.gpu.peak_fp32_flops_per_s;
    const auto time = [&](const char* phase, double flops, int64_t moved) {
      return std::max(w.kernel_time("ssm_scan", phase, flops, moved), fp32 > 0 ? flops / fp32 : 0.0);
    };
    w.cost.fwd_compute_s += time("fwd", fwd, bytes);
    w.cost.bwd_compute_s += time("bwd", bwd, 2 * bytes);
  }
  w.fwd_flops += fwd;
  const double global_tokens = double(w.ctx.micro_batch * w.ctx.seq_len);
  w.cost.model_flops += 3.0 * ssm_scan_fwd_flops_per_token(shape(false)) * global_tokens;
  for (const auto* t : {&x, &dt, &b, &c}) w.saved.insert(t->name);
  if (op.chunk_size > 0) w.saved.insert(y.name);
  w.extra_saved_bytes += int64_t(ssm_scan_extra_saved_bytes_per_token(local) * tokens);
  const int64_t in_bytes = w.tp_region_bytes(x) + w.tp_region_bytes(dt) + w.tp_region_bytes(b) +
                           w.tp_region_bytes(c) + w.tp_region_bytes(y);
  const int64_t out_bytes = w.tp_region_bytes(y);
  w.cp_collective(w.cost.fwd_collectives, CollectiveKind::all_to_all, in_bytes, {x.name, dt.name, b.name, c.name}, true);
  w.cp_collective(w.cost.fwd_collectives, CollectiveKind::all_to_all, out_bytes, {y.name}, false);
  w.cp_collective(w.cost.bwd_collectives, CollectiveKind::all_to_all, out_bytes, {"grad(" + y.name + ")"}, true);
  w.cp_collective(w.cost.bwd_collectives, CollectiveKind::all_to_all, in_bytes,
                  {"grad(" + x.name + ")", "grad(" + dt.name + ")", "grad(" + b.name + ")", "grad(" + c.name + ")"},
                  false);
}

// Walks the ops once, recording each op's share as the difference of the running totals.
Walk walk_ops(const ir::Block& block, const ShardContext& ctx, const ir::ClusterSpec& cluster,
              const CostParams& params, std::vector<OpCost>* per_op) {
  Walk w{block, ctx, cluster, params, {}, {}, {}, {}, {}, {}, {}, {}, {}, 0, {}, 0, 0, 0, 0, {}, {}};
  std::vector<double> op_fwd_s;
  std::optional<size_t> router;
  // Host seconds each op's launches take, forward and backward (host_dispatch.hpp).
  const LaunchContext launch{ctx.fp8_linears, ctx.task != ir::Task::lora && ctx.task != ir::Task::qlora,
                             params.attention_materialised, params.fused_projections};
  std::vector<double> op_host_fwd_s, op_host_bwd_s;
  for (const OpLaunches& l : block_launches(block, params.launches, launch)) {
    op_host_fwd_s.push_back(l.fwd * params.host_launch_s);
    op_host_bwd_s.push_back(l.bwd * params.host_launch_s);
  }
  for (const auto& op : block.ops) {
    if (op.kind == ir::OpKind::router && !router) router = op_fwd_s.size();
    const BlockCost before = w.cost;
    const double weight_before = w.bwd_weight_s, flops_before = w.fwd_flops;
    switch (op.kind) {
      case ir::OpKind::contraction: cost_contraction(w, op); break;
      case ir::OpKind::attention_core: cost_attention(w, op); break;
      case ir::OpKind::embedding: cost_embedding(w, op); break;
      case ir::OpKind::softmax_cross_entropy: cost_loss(w, op); break;
      case ir::OpKind::ssm_scan: cost_ssm_scan(w, op); break;
      default: cost_elementwise(w, op); break;
    }
    if (!op.output.empty()) w.produced.insert(op.output);
    if (params.selective_recompute == SelectiveRecompute::every_second_matmul) op_sac_policy(w, op, before);
    if (params.selective_recompute == SelectiveRecompute::megatron_modules) mla_up_proj_policy(w, op, before);
    op_fwd_s.push_back(w.cost.fwd_compute_s - before.fwd_compute_s);
    if (per_op) {
      OpCost c;
      c.fwd_s = w.cost.fwd_compute_s - before.fwd_compute_s;
      c.bwd_weight_s = w.bwd_weight_s - weight_before;
      c.bwd_data_s = w.cost.bwd_compute_s - before.bwd_compute_s - c.bwd_weight_s;
      c.selective_recompute_s = w.cost.selective_recompute_s - before.selective_recompute_s;
      c.fwd_flops = w.fwd_flops - flops_before;
      c.fwd_collectives.assign(w.cost.fwd_collectives.begin() + ptrdiff_t(before.fwd_collectives.size()),
                               w.cost.fwd_collectives.end());
      c.bwd_collectives.assign(w.cost.bwd_collectives.begin() + ptrdiff_t(before.bwd_collectives.size()),
                               w.cost.bwd_collectives.end());
      per_op->push_back(std::move(c));
    }
  }
  if (router && params.moe_dispatch_host_sync) {
    // The dispatcher's host sync stalls the GPU inside the router's forward, before the dispatch
    // all-to-all: the estimator and the simulator's router instruction both carry it (and a full
    // recompute, which reruns the dispatcher, repeats it).
    // The host issues the kernels after the sync at its launch rate: the framework's host time per
    // launch, never faster than a bare CUDA launch (the kernel floor).
    const double launch_s = std::max(params.host_launch_s, params.kernel_floor_s);
    const double stall_s = host_sync_stall_s(
        launch_s, moe_kernels_after_sync(block, *router, ctx, op_fwd_s, w.expert_weights, params.kernel_floor_s));
    w.cost.fwd_compute_s += stall_s;
    if (per_op) (*per_op)[*router].fwd_s += stall_s;
  }
  // A phase whose kernels finish before the host has launched them runs at the host's rate: the
  // wait is shared over the ops by their launch time, so the simulator's per-op instructions and the
  // estimator's block totals stay one number.
  const auto host_bound = [&](double gpu_s, const std::vector<double>& op_host_s, auto add_to_op) {
    double host_s = 0;
    for (double h : op_host_s) host_s += h;
    const double extra_s = host_bound_extra_s(gpu_s, host_s);
    if (extra_s > 0 && per_op)
      for (size_t i = 0; i < op_host_s.size(); ++i) add_to_op((*per_op)[i], extra_s * op_host_s[i] / host_s);
    return extra_s;
  };
  const double fwd_wait_s = host_bound(w.cost.fwd_compute_s, op_host_fwd_s, [](OpCost& c, double s) { c.fwd_s += s; });
  const double bwd_wait_s = host_bound(w.cost.bwd_compute_s, op_host_bwd_s, [](OpCost& c, double s) { c.bwd_data_s += s; });
  w.cost.fwd_compute_s += fwd_wait_s;
  w.cost.bwd_compute_s += bwd_wait_s;
  w.cost.host_wait_s = fwd_wait_s + bwd_wait_s;
  return w;
}
}  // namespace

TokenRouting token_routing(const ir::Graph& graph) {
  for (const auto& block : graph.blocks)
    for (const auto& op : block.ops) {
      if (op.kind != ir::OpKind::router) continue;
      return {.top_k = op.top_k, .experts = routed_experts(block, op.top_k)};
    }
  return {};
}

std::vector<OpCost> op_costs(const ir::Block& block, const ShardContext& ctx, const ir::ClusterSpec& cluster,
                             const CostParams& params) {
  std::vector<OpCost> out;
  walk_ops(block, ctx, cluster, params, &out);
  return out;
}

BlockCost block_cost(const ir::Block& block, const ShardContext& ctx, const ir::ClusterSpec& cluster,
                     const CostParams& params) {
  Walk w = walk_ops(block, ctx, cluster, params, nullptr);

  for (const auto& name : w.saved) {
    const auto& t = w.tensor(name);
    const int64_t bytes = w.act_bytes(t);
    w.cost.saved_bytes_none += bytes;
    if (!w.recomputed.count(name)) w.cost.saved_bytes_selective += bytes;
  }
  for (const auto& [name, bytes_per_element] : w.saved_quantized) {
    const int64_t bytes = std::llround(double(local_elements(w.tensor(name), w.ctx)) * bytes_per_element);
    w.cost.saved_bytes_none += bytes;
    if (!w.recomputed.count(name)) w.cost.saved_bytes_selective += bytes;
  }
  w.cost.saved_bytes_none += w.extra_saved_bytes + w.selective_dropped_bytes;
  w.cost.saved_bytes_selective += w.extra_saved_bytes;
  // Full recompute keeps only what enters the block (Chen et al. 2016 checkpointing; Megatron
  // "full" granularity keeps each layer's input).
  std::set<std::string> inputs;
  for (const auto& op : block.ops)
    for (const auto& in : op.inputs) {
      const auto& t = w.tensor(in);
      if (!t.is_parameter && !w.produced.count(in)) inputs.insert(in);
    }
  for (const auto& name : inputs) w.cost.saved_bytes_full += w.act_bytes(w.tensor(name));
  if (params.selective_recompute == SelectiveRecompute::every_second_matmul) {
    // Op-level selective AC keeps what enters the block and the outputs its policy saves (with
    // attention's log-sum-exp); everything else is rebuilt in backward.
    w.cost.saved_bytes_selective = w.cost.saved_bytes_full + w.extra_saved_bytes;
    for (const auto& name : w.op_sac_kept) w.cost.saved_bytes_selective += w.act_bytes(w.tensor(name));
  }
  // What crosses a pipeline-stage boundary: the block input (Megatron sends the SP-scattered shard).
  w.cost.boundary_bytes = w.cost.saved_bytes_full;
  // Megatron-LM's scatter/gather: each TP rank sends only its slice when sequence parallel has not
  // split the boundary already. The receivers' all-gather of it runs over NVLink inside the TP group
  // (12x a DGX A100 GPU's NIC bandwidth) and is not priced.
  if (params.pipeline_scatter_gather && ctx.tp > 1 && !ctx.sequence_parallel)
    w.cost.boundary_bytes = ceil_div(w.cost.boundary_bytes, ctx.tp);

  for (const auto& t : block.tensors) {
    if (t.is_parameter) {
      const bool expert = w.expert_weights.count(t.name) > 0;
      int64_t local = 1, total = 1;
      for (const auto& d : t.dims) {
        // Experts under etp: the FFN split over etp ranks; the per-rank FLOPs stay those of the tp
        // split (the etp x ep group sees the same tokens as tp x ep, folded), priced as such.
        if (is_tp_dim(d.name)) local *= ceil_div(d.size, expert && ctx.expert_tp > 0 ? ctx.expert_tp : ctx.tp);
        else if (expert && d.name == 'e') local *= ceil_div(d.size, ctx.ep);
        else local *= d.size;
        total *= d.size;
      }
      w.cost.param_elements_local += local;
      w.cost.param_elements_total += total;
      if (expert) w.cost.expert_param_elements_local += local;
      if (w.nf4_weights.count(t.name)) w.cost.nf4_param_elements_local += local;
      w.cost.largest_param_elements_local = std::max(w.cost.largest_param_elements_local, local);
      // DeepSpeed never partitions a tensor of at most stage3_param_persistence_threshold elements
      // (parameter_offload.py mark_persistent_parameters: ds_numel <= threshold).
      if (params.zero3_submodule_limits && local <= params.zero3_submodule_limits->param_persistence_threshold)
        w.cost.persistent_param_elements_local += local;
      else if (params.zero3_submodule_limits)
        ++w.cost.gathered_param_tensors;
    } else {
      w.cost.largest_tensor_bytes = std::max(w.cost.largest_tensor_bytes, w.act_bytes(t));
    }
  }
  return w.cost;
}

}  // namespace mgt::cost
