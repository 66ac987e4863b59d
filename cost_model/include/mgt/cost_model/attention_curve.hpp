// How an attention kernel's rate depends on its shape (docs/cost-model.md §8 "Attention"): one curve
// that the kernel model (kernel_model.cpp, checked against the kernel rows) and the training-run
// estimator (layer_cost.cpp) both apply, so the two cannot drift apart.
#pragma once

namespace mgt::cost {

/// Which edges of the score matrix a mask cuts through tiles: none (full), the causal diagonal, or
/// a sliding window's two (its diagonal and its trailing edge).
enum class AttentionMask { none, causal, window };

/// Key tiles a flash kernel runs per query row beyond the keys the mask keeps: a tile the mask
/// crosses is computed whole (the masked part is thrown away) and takes the masked code path.
inline int attention_mask_edges(AttentionMask mask) {
  switch (mask) {
    case AttentionMask::none: return 0;
    case AttentionMask::causal: return 1;
    case AttentionMask::window: return 2;
  }
  return 0;
}

/// The shape numbers (KernelModelParams holds the generation's set; CostParams a copy): half_kv
/// fitted to the kernel rows, the head-dim half points and the edge keys hardware ratios.
/// All 0: a flat curve (the family's efficiency at every shape).
struct AttentionCurve {
  /// Executed keys per query row at which a kernel reaches half of its rate (per-row fixed costs:
  /// loading Q, the softmax rescale, writing O), [0, 2048].
  double half_kv = 0;
  /// Head dim at which a kernel reaches half of its rate (the softmax's per-score work does not
  /// shrink with the head dim while the two GEMMs do), [0, 128].
  double half_head_dim = 0;
  /// The half point of the GPU whose kernel rows fixed the family's peak fractions (the generation's
  /// 16 exponentials per clock per SM); 0 = half_head_dim. A GPU with a faster SFU (Blackwell Ultra)
  /// keeps the generation's fractions and gains where its own half point is lower.
  double reference_half_head_dim = 0;
  /// Extra keys per query row for each mask edge (the crossed key tile, about one kv tile of 128:
  /// half of it computed and discarded, the rest the masked path's cost), [0, 256].
  double mask_edge_keys = 0;

  /// The curve of a kernel whose tensor-core instruction reaches `mma_rate_fraction` of the GPU's
  /// dense peak (FlashAttention-2's mma.sync on Hopper: about 2/3, below WGMMA): the same exponent
  /// rate balances proportionally fewer FLOPs, so both half points shrink by the fraction (the
  /// family's d = 128 rate stays the measured one).
  AttentionCurve with_mma_rate(double mma_rate_fraction) const {
    AttentionCurve c = *this;
    if (half_head_dim > 0 && mma_rate_fraction > 0) {
      c.reference_half_head_dim = (reference_half_head_dim > 0 ? reference_half_head_dim : half_head_dim) * mma_rate_fraction;
      c.half_head_dim = half_head_dim * mma_rate_fraction;
    }
    return c;
  }
  /// Time of the kernel over the time of its counted FLOPs (the mask's kept scores only) at the
  /// family's long-sequence, d = 128 rate: the executed keys per row over the counted ones,
  /// divided by the shape efficiency L/(L + half_kv) at the executed L and the head-dim factor
  /// (d'/(d'+h))/(128/(128+h_ref)) with d' = min(d, 128) and h_ref = reference_half_head_dim
  /// (above 128 the kernels shrink their tiles to fit the larger operands in shared memory, so a
  /// larger head dim stops amortising the per-score work: cuDNN's d = 192/128 rows run at the
  /// d = 128 rate forward).
  /// `mean_kept_kv` = counted scores / query rows; `head_dim` = mean of d_qk and d_vo.
  double time_factor(double mean_kept_kv, AttentionMask mask, double head_dim) const {
    double factor = 1.0;
    if (mean_kept_kv > 0) {
      const double executed_kv = mean_kept_kv + mask_edge_keys * attention_mask_edges(mask);
      factor *= executed_kv / mean_kept_kv;
      if (half_kv > 0) factor *= (executed_kv + half_kv) / executed_kv;
    }
    if (half_head_dim > 0 && head_dim > 0) {
      const double d = head_dim < 128.0 ? head_dim : 128.0, h = half_head_dim;
      const double h_ref = reference_half_head_dim > 0 ? reference_half_head_dim : h;
      factor /= (d / (d + h)) / (128.0 / (128.0 + h_ref));
    }
    return factor;
  }
};

}  // namespace mgt::cost
