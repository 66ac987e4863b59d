// The memory traffic of Megatron-Core's eager routed-expert epilogue (docs/cost-model.md §9,
// "Eager expert epilogue"): GPT-OSS's per-expert fc2 bias and its clamped gated unit run as separate
// PyTorch kernels around the grouped GEMMs unless a fused grouped MLP takes them (block-scaled
// MXFP8 / NVFP4). Bytes per micro-batch, for the estimator and the simulator alike (layer_cost.cpp).
#pragma once

#include "mgt/ir/training_settings.hpp"

#include <cstdint>

namespace mgt::cost {

/// Bytes moved forward and backward, in units of one tensor.
struct EpilogueBytes {
  int64_t fwd = 0;
  int64_t bwd = 0;
};

/// Whether the framework's eager epilogue runs under this linear format: Megatron-Bridge takes TE's
/// CuTe-DSL fused grouped MLP (GEMM + GLU + bias in one kernel chain) only for block-scaled formats.
bool eager_expert_epilogue_runs(bool profile_eager, ir::LinearFormat format);

/// TEGroupedMLP._apply_bias on the fc2 output (`out_bytes` = routed rows x hidden x element size):
/// per local expert `t + b * p` (b * p writes a full [tokens, h] tensor; the add reads two and writes
/// one), then torch.cat (reads and writes it once): 6 x out forward. Backward: autograd's gradient of
/// b (grad * p, then a sum over tokens) and of p (grad * b, then a sum over h), each a product that
/// reads and writes one tensor and a reduction that reads it: 6 x out.
EpilogueBytes expert_bias_bytes(int64_t out_bytes);

/// weighted_bias_quick_geglu_impl's clamp of fc1's output (`in_bytes` = both halves): two clamps
/// (each half read and written) and torch.cat (all read and written) = 4 x in forward; backward the
/// clamps' masked gradients (gradient and input read, gradient written: 3 x in) and chunk's backward
/// concatenating the two half-gradients (2 x in) = 5 x in. Selective recompute repeats the forward.
EpilogueBytes glu_clamp_bytes(int64_t in_bytes);

}  // namespace mgt::cost
