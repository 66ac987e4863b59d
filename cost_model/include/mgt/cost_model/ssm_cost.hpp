// FLOPs and memory of the state-space scan (ir::OpKind::ssm_scan): Mamba-1's selective scan and
// Mamba-2's chunked SSD. The projections and the causal conv around the scan are contractions and
// are priced as such; this is the scan kernel only. docs/cost-model.md, "State-space layers".
#pragma once

#include <cstdint>

namespace mgt::cost {

/// The sizes of one scan on one GPU (after tensor / context parallel splitting).
struct SsmScanShape {
  int64_t heads = 1;     ///< Mamba-2 heads; Mamba-1: 1
  int64_t head_dim = 1;  ///< Mamba-2 channels per head; Mamba-1: the channels (d_inner)
  int64_t groups = 1;    ///< Mamba-2 B/C groups; Mamba-1: 1
  int64_t state = 0;     ///< N, the state size per channel
  int64_t chunk = 0;     ///< SSD chunk length Q; 0 = Mamba-1 selective scan
  int64_t channels() const { return heads * head_dim; }
};

/// Forward FLOPs of the scan per token.
/// Mamba-1 (Gu & Dao 2023, §3.2, Algorithm 2; the count of state-spaces/mamba issue #110):
///   9 * channels * N (discretise A and B, update the state, read it out with C) + channels (D skip).
/// Mamba-2 SSD (Dao & Gu 2024, §6, the four steps of the block decomposition), chunk Q, per token:
///   intra-chunk C.B^T per group 2*Q*N, its (masked) product with X per head 2*Q*P, the chunk state
///   B^T.X per head 2*N*P, the state read out by C per head 2*N*P, plus P per head for the D skip.
double ssm_scan_fwd_flops_per_token(const SsmScanShape& s);

/// Backward FLOPs per token: twice the forward. Mamba-1's kernel recomputes the states (one forward)
/// and runs the reverse scan (about one more); SSD's backward is two matmuls per forward matmul.
double ssm_scan_bwd_flops_per_token(const SsmScanShape& s);

/// Bytes per token the scan keeps for backward beyond its saved bf16 inputs (x, dt, B, C) and, for
/// SSD, its output: Mamba-1 keeps fp32 (real, imaginary) state checkpoints every 2048 tokens
/// (mamba_ssm selective_scan: 2*N floats per channel per 2048-token chunk); SSD keeps the fp32
/// cumulative decay dA_cumsum, one float per head per token (mamba_chunk_scan_combined).
double ssm_scan_extra_saved_bytes_per_token(const SsmScanShape& s);

/// Bytes per token the scan kernel moves (reads x, dt, B, C and writes y), in `dtype_bytes`; the
/// memory-bound floor of its time.
double ssm_scan_bytes_per_token(const SsmScanShape& s, int64_t dtype_bytes);

}  // namespace mgt::cost
