// Host-bound blocks (docs/cost-model.md §9, "Host dispatch"). An eager framework launches every
// kernel from Python through ATen, one host call after another; the GPU runs them as they arrive.
// When a block's kernels are shorter than the host's time to launch them (small models, small
// micro-batches, wide tensor parallelism), the block runs at the host's rate instead. This header
// counts the kernels one op launches under a framework's implementation and gives the bound that
// the estimator and the simulator share (layer_cost.cpp applies it per block, per phase).
#pragma once

#include "mgt/ir/graph.hpp"

#include <vector>

namespace mgt::cost {

/// Kernel-launching ATen calls per op, forward and backward, for the op kinds whose count depends on what the
/// framework fuses. The defaults are fused kernels (Transformer Engine, apex, Inductor);
/// eager_launch_counts() gives the ATen chains of a Hugging Face model under bf16 autocast.
struct KernelLaunchCounts {
  int rms_norm_fwd = 1, rms_norm_bwd = 2;      ///< one kernel; backward: dx and the dgamma reduction
  int layer_norm_fwd = 1, layer_norm_bwd = 2;
  int rope_fwd = 1, rope_bwd = 1;              ///< per rotated tensor (q and k are two rope ops)
  int gated_activation_fwd = 1, gated_activation_bwd = 1;
  int loss_fwd = 2, loss_bwd = 1;              ///< vocab-parallel CE: max, then exp-sum and loss
  int attention_fwd = 1, attention_bwd = 3;    ///< flash: FA2's backward is preprocess, main, dq convert
  bool operator==(const KernelLaunchCounts&) const = default;
};

/// The unfused counts (framework_profile.cpp picks them per fused_* flag of the profile): the ATen ops
/// that Hugging Face's eager code dispatches, counted with a TorchDispatchMode
/// (bench/host_dispatch/count_aten_ops.py; views and metadata checks, which launch nothing, left out):
///   RMSNorm (LlamaRMSNorm): to(fp32), pow, mean, add eps, rsqrt, mul, to(bf16), mul weight = 8;
///     backward 16 (the products' gradients and their broadcast sums, pow', div, the casts).
///   LayerNorm under autocast's fp32 policy: the cast and native_layer_norm = 2; backward 2.
///   rope (apply_rotary_pos_emb, one tensor): x·cos, neg, cat, ·sin, add = 5; backward 7 (two
///     slice_backward for the halves of rotate_half).
///   gated activation: silu, mul = 2; backward: two muls and silu_backward = 3.
///   cross entropy: logits.float(), log_softmax, nll_loss = 3; backward 3.
///   materialised attention (Megatron 2021 FusedScaleMaskSoftmax path): baddbmm, fused softmax, bmm
///     and two layout copies = 5; backward: two GEMMs each for the two bmm, softmax' and copies = 7.
KernelLaunchCounts eager_launch_counts();

/// Kernels one op launches.
struct OpLaunches {
  int fwd = 0;
  int bwd = 0;
};

/// How a block's ops are run, as far as the launch count goes.
struct LaunchContext {
  bool low_precision_linears = false;  ///< TE fp8 / mxfp8 / nvfp4: a quantise kernel beside each GEMM
  bool trainable_weights = true;       ///< false under LoRA / QLoRA: no weight-gradient GEMM
  bool materialised_attention = false; ///< eager attention (CostParams::attention_materialised)
  /// Projections that read the same input run as one GEMM (CostParams::fused_projections): q, k, v
  /// as Megatron's linear_qkv, gate and up as its linear_fc1.
  bool fused_projections = false;
};

/// The kernels `op` launches under `counts`. Fixed for every framework: a contraction is one GEMM
/// forward and a data- plus a weight-gradient GEMM backward (+1 for a bias gradient's reduction;
/// a routed-expert contraction is one grouped call, its per-expert GEMMs launched from C++), a
/// residual add one kernel each way (backward: the gradient sum where the residual stream forks), an
/// embedding lookup one each way (embedding_dense_backward is one ATen call), a MoE router 14 forward (softmax,
/// top-k, the probability scatter, the load-balancing loss, the token permutation's sort and
/// index kernels) and 8 backward, a state-space scan one each way plus its own backward pass.
OpLaunches op_launches(const ir::Op& op, const KernelLaunchCounts& counts, const LaunchContext& ctx);

/// The launches of every op of `block`, in op order: op_launches, except that under
/// ctx.fused_projections a contraction reading the same input as the contraction just before it
/// launches nothing (its GEMM is part of that one: q, k, v; gate, up; a routed expert's gate and up).
std::vector<OpLaunches> block_launches(const ir::Block& block, const KernelLaunchCounts& counts, const LaunchContext& ctx);

/// Seconds a block phase waits on the host beyond its kernels' `gpu_s`, when the host spends
/// `host_s` launching them: max(0, host_s - gpu_s). The host runs ahead of the GPU (the launch queue
/// holds ~1000 kernels), so within a block the long kernels give the host the slack the short ones
/// need, and only the block's totals are compared; across blocks nothing is carried, which never
/// predicts less than the host needs.
double host_bound_extra_s(double gpu_s, double host_s);

}  // namespace mgt::cost
