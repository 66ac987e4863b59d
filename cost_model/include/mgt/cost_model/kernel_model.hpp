// Kernel-level time model from hardware physics (docs/cost-model.md "Kernel model"): a GEMM from its
// tile and wave quantisation over the GPU's SMs, attention from its FLOPs and a per-kernel-family
// efficiency curve, collectives per algorithm (ring / tree / NVLS) as alpha-beta with nccl-tests'
// bus factors, memory-bound kernels at achievable HBM bandwidth. GPU facts (peaks, HBM, links) come
// from ir::ClusterSpec; the few fitted numbers live in KernelModelParams, one set per GPU generation,
// each with bounds and the kernel rows it was fitted on (docs/cost-model.md). Not yet used by the
// training-run estimator (compute.hpp keeps its own constants).
#pragma once

#include "mgt/cost_model/attention_curve.hpp"
#include "mgt/cost_model/collective.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/training_settings.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mgt::cost {

/// Streaming multiprocessors of a GPU, from the vendor's architecture whitepaper / datasheet for the
/// preset GPUs (A100 108, H100/H200 SXM 132, B200 and GB200 148, RTX 4090 128); by generation
/// otherwise. Not a fitted number.
int64_t sm_count(const ir::GpuSpec& gpu);

/// One CTA tile a GEMM library can pick (output rows x columns per thread block).
struct GemmTile {
  int64_t m = 128, n = 128;
};

/// The fitted numbers of one GPU generation (kernel_model_params sets them per generation; the
/// defaults here are only starting points). Bounds and fitted rows: docs/cost-model.md §8.
struct KernelModelParams {
  // --- GEMM ---
  std::vector<GemmTile> gemm_tiles;     ///< candidate tiles, from the generation's MMA shapes
  double gemm_peak_fraction = 0.8;      ///< 16-bit GEMM: achievable / datasheet dense peak, [0.5, 0.95]
  double gemm_fp8_peak_fraction = 0.7;  ///< fp8 GEMM, of the fp8 peak, [0.5, 0.95]
  double gemm_tile_half_reuse = 32;    ///< operand reuse (elements) at which a tile reaches half its rate: MMA FLOP per clock / shared-memory bytes per clock
  double gemm_epilogue_exposed = 1.0;   ///< share of each wave's output store not hidden under the next main loop, [0, 1]
  double gemm_misaligned_factor = 0.7;  ///< rate multiplier when K or N rows are not 16-byte aligned, [0.5, 1]
  double hbm_fraction = 0.9;            ///< achievable / datasheet HBM bandwidth for read-dominated streams (GEMM operands), [0.5, 0.95]
  double hbm_copy_fraction = 0.72;      ///< the same for read + write copies (HBM read/write turnaround), [0.5, 0.95]
  double launch_s = 5e-6;               ///< per-kernel launch + ramp as timed by the benchmarks, [1, 50] us
  // --- attention (one peak fraction per kernel family and pass; the shape curve is shared) ---
  /// executed keys per row at half rate [0, 2048]; head dim at half rate (kernel_model_params sets it
  /// per generation from the exp / MMA balance); keys per mask edge [0, 256]
  AttentionCurve attention_curve{.half_kv = 256, .half_head_dim = 32, .mask_edge_keys = 128};
  // --- collectives ---
  double nvlink_fraction = 0.8;         ///< ring busbw / NVLink per-direction rate, [0.5, 0.95]
  double nvls_fraction = 1.0;           ///< NVLS all-reduce busbw / NVLink per-direction rate, [0.5, 1.2]
  double network_fraction = 0.85;       ///< busbw / NIC rate across nodes, [0.5, 0.95]
  double collective_base_latency_s = 35e-6;  ///< per collective call (launch + proxy + sync), [1, 50] us
  double nvlink_step_latency_s = 1e-6;   ///< per ring step inside an NVLink domain, [0.5, 10] us
  double network_step_latency_s = 10e-6; ///< per ring / tree step across the network, [1, 50] us
  double collective_half_bytes = 4.0 * (1 << 20);  ///< message size at half the asymptotic busbw, [0, 64] MiB
};

/// The fitted set for `gpu`'s generation.
KernelModelParams kernel_model_params(const ir::GpuSpec& gpu);

// ------------------------------------------------------------------------------------------------
// GEMM

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;  ///< independent GEMMs of this shape in one launch (bmm, grouped GEMM)
};

/// How a GEMM was priced: the tile and split-K the model chose and what bounded it.
struct GemmTiming {
  double time_s = 0;
  GemmTile tile;
  int64_t split_k = 1;
  int64_t tiles = 0;        ///< output tiles x batch x split_k
  int64_t waves = 0;        ///< ceil(tiles / SMs)
  double wave_efficiency = 0;  ///< tiles / (waves x SMs): the share of the last wave's SMs busy
  bool memory_bound = false;
};

/// Output tiles of an m x n GEMM with `tile` (ceil in both dimensions).
int64_t gemm_tile_count(int64_t m, int64_t n, const GemmTile& tile);
/// Waves of `tiles` over `sms` SMs: ceil(tiles / sms).
int64_t gemm_waves(int64_t tiles, int64_t sms);
/// A tile's relative rate: its operand reuse I = tm*tn/(tm+tn) against the generation's half point
/// `half_reuse` (MMA FLOP per clock / shared-memory bytes per clock), I/(I+half_reuse), normalised
/// so that the best tile of the generation is 1.
double gemm_tile_efficiency(const GemmTile& tile, const std::vector<GemmTile>& tiles, double half_reuse);

/// The fastest (tile, split-K) choice: per wave, one tile's 2*tm*tn*(K/split) FLOPs at the per-SM
/// share of peak x peak fraction x tile efficiency (x misalignment factor); the memory floor is
/// operands + output bytes at achievable HBM bandwidth; plus one launch.
/// `peak_flops_per_s` > 0 replaces the datasheet peak of `dtype` (block-scaled formats run the fp8
/// kernel model at their own peak).
GemmTiming gemm_kernel_time(const ir::GpuSpec& gpu, const GemmShape& shape, ir::DType dtype,
                            const KernelModelParams& params, double peak_flops_per_s = 0);

/// A linear layer's GEMM under Transformer Engine's autocast in `format` (none: the 16-bit GEMM): the
/// fp8 kernel model at linear_gemm_rate_flops_per_s (task_cost.hpp), plus quantising both
/// operands (quantize_bytes_per_element x (m*k + k*n) x batch at achievable copy bandwidth, one launch
/// each). `delayed_scaling`: fp8's delayed recipe (no amax pass). Throws InputError for a format the
/// GPU has no peak for (task_cost.hpp linear_gemm_peak_flops_per_s).
double linear_gemm_kernel_time_s(const ir::GpuSpec& gpu, const GemmShape& shape, ir::LinearFormat format,
                                 bool delayed_scaling, const KernelModelParams& params);

// ------------------------------------------------------------------------------------------------
// Attention

enum class AttentionKernel { flash_attention_2, flash_attention_3, flash_attention_4, cudnn, torch_sdpa, triton, cutlass };
std::string to_string(AttentionKernel kernel);

struct AttentionShape {
  int64_t batch = 1, seq_q = 0, seq_kv = 0, heads_q = 1, heads_kv = 1, head_dim_qk = 128, head_dim_vo = 128;
  bool causal = false;
  int64_t window = 0;  ///< sliding window (keys per query, diagonal included); 0 = none
};

/// Score-matrix elements a kernel computes per (batch, head): seq_q*seq_kv; causal the lower
/// triangle with the diagonal, s(s+1)/2 for seq_q == seq_kv, aligned to the bottom-right corner
/// when seq_q < seq_kv (flash-attention >= 2.1): sq*(skv-sq) + sq(sq+1)/2; a window W the band
/// W(W+1)/2 + (s-W)W.
double attention_score_elements(const AttentionShape& shape);

/// Executed FLOPs: forward 2 GEMMs = 2*elems*(d_qk + d_vo) per head; backward 5 GEMMs =
/// 2*elems*(3*d_qk + 2*d_vo) per head (2.5x forward at d_qk == d_vo).
double attention_flops(const AttentionShape& shape, bool backward);

/// The family's share of peak for this generation, pass and dtype; 0 when the family does not run
/// on that generation.
double attention_peak_fraction(AttentionKernel kernel, ir::GpuArch arch, bool backward, ir::DType dtype);

/// The share of the GPU's dense tensor peak that the family's MMA instruction can reach, which sets
/// where its exponentials balance its FLOPs (AttentionCurve::with_mma_rate): 2/3 for the Ampere-style
/// mma.sync kernels (FlashAttention-2, PyTorch SDPA's flash backend) on Hopper, 1 elsewhere.
double attention_mma_rate_fraction(AttentionKernel kernel, ir::GpuArch arch);

/// The mask whose edges the kernel's tiles cross: a window narrower than the keys, else causal, else none.
AttentionMask attention_mask(const AttentionShape& shape);

/// time = flops / (peak x fraction) x AttentionCurve::time_factor(L, mask, d) + launch, where L =
/// elems / seq_q (mean kept keys per query row) and d the mean of d_qk and d_vo.
/// Throws InputError when the family has no fraction for the GPU.
double attention_kernel_time_s(const ir::GpuSpec& gpu, AttentionKernel kernel, const AttentionShape& shape, bool backward,
                               ir::DType dtype, const KernelModelParams& params);

// ------------------------------------------------------------------------------------------------
// Collectives

enum class CollectiveAlgorithm { automatic, ring, tree, nvls };
std::string to_string(CollectiveAlgorithm algorithm);

struct CollectiveTiming {
  double time_s = 0;
  double bus_bytes_per_s = 0;  ///< bytes x bus_factor / time (what nccl-tests prints as busbw)
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
};

/// One collective over `group_size` ranks spread over `domains` NVLink domains (nodes on HGX, racks
/// on NVL72), `bytes` as nccl-tests counts them:
///   time = base latency + steps x step latency + bytes x bus_factor / busbw
/// ring: steps 2(n-1) for all-reduce, n-1 otherwise; busbw = NVLink x nvlink_fraction inside a
///   domain, and across domains min(that, NICs per domain x NIC x network_fraction) (each ring
///   channel crosses a node boundary on its own NIC); all-to-all across domains moves
///   (n - g)/n of its buffer over the network, so busbw = (n-1)/(n-g) x NICs x NIC x fraction / g.
/// tree (all-reduce across domains): steps 2(g-1) NVLink + 2 ceil(log2 domains) network, same busbw.
/// nvls (all-reduce inside one NVSwitch domain, Hopper and later): busbw = NVLink x nvls_fraction,
///   steps 2.
/// automatic: the fastest algorithm that applies (NCCL's tuner does the same with its own table).
CollectiveTiming collective_kernel_time(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size,
                                        int64_t domains, int64_t bytes, CollectiveAlgorithm algorithm,
                                        const KernelModelParams& params);

// ------------------------------------------------------------------------------------------------
// Memory-bound kernels

/// A kernel that moves `bytes_moved` bytes of HBM in total (reads + writes): bytes / (HBM x fraction)
/// + launch, with hbm_fraction for a read-only stream and hbm_copy_fraction for a copy.
double memory_kernel_time_s(const ir::GpuSpec& gpu, double bytes_moved, bool read_only, const KernelModelParams& params);

}  // namespace mgt::cost
