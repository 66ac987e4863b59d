// Kernel-level time model (docs/cost-model.md "Kernel model").
#include "mgt/cost_model/kernel_model.hpp"

#include "mgt/cost_model/task_cost.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mgt::cost {

namespace {

constexpr double kUs = 1e-6;

double bytes_per_element(ir::DType dtype) { return double(ir::dtype_bytes(dtype)); }

}  // namespace

int64_t sm_count(const ir::GpuSpec& gpu) {
  // Datasheet / whitepaper SM counts: A100 108 (GA100 whitepaper), H100 SXM5 132 (H100 whitepaper;
  // H200 is the same die), B200 148 (2 x 74, Blackwell whitepaper), RTX 4090 128 (Ada whitepaper).
  switch (gpu.arch) {
    case ir::GpuArch::ampere: return 108;
    case ir::GpuArch::hopper: return 132;
    case ir::GpuArch::blackwell: return 148;
    case ir::GpuArch::ada: return 128;
    case ir::GpuArch::cpu: return 1;
  }
  return 1;
}

namespace {

// The head dim at which an attention kernel's softmax exponentials take as long as its two GEMMs
// when the two do not overlap: per score the GEMMs do 4·d FLOPs on the tensor cores and the softmax
// one exp2 on the SFU, 16 per clock per SM on Ampere, Hopper and Blackwell (CUDA C Programming Guide,
// arithmetic instruction throughput), so d½ = dense 16-bit tensor FLOP per clock per SM / (4 x 16):
// A100 2048 (312 TFLOP/s / 108 SMs / 1.41 GHz), H100 4096 (989 / 132 / 1.83), B200 8192 (the
// Blackwell SM doubles Hopper's MMA rate). Not fitted; the cuDNN GPT-OSS rows (d = 64, H200) land
// within 4 % with Hopper's 64, where the fitted 32 left them 30-37 % fast.
constexpr double kSfuExp2PerClockPerSm = 16;
constexpr double kExpBalanceFlopsPerExp = 4.0 * kSfuExp2PerClockPerSm;

// wgmma m64nNk16 with N up to 256: CTA tiles 64/128 x 64..256 (CUTLASS 3.x sm90 kernels).
KernelModelParams hopper_kernel_model_params() {
  KernelModelParams p;
  p.gemm_tiles = {{128, 256}, {256, 128}, {128, 128}, {64, 256}, {128, 64}, {64, 128}, {64, 64}};
  p.gemm_tile_half_reuse = 64;
  p.gemm_peak_fraction = 0.86;
  p.gemm_fp8_peak_fraction = 0.80;
  p.hbm_fraction = 0.93;
  p.launch_s = 8 * kUs;
  p.nvlink_fraction = 0.81;
  p.attention_curve.half_head_dim = 4096 / kExpBalanceFlopsPerExp;
  return p;
}

}  // namespace

KernelModelParams kernel_model_params(const ir::GpuSpec& gpu) {
  KernelModelParams p;
  switch (gpu.arch) {
    case ir::GpuArch::ampere:
      // mma.sync m16n8k16 warp tiles; CUTLASS 2.x / cuBLAS threadblock tiles up to 256 x 128.
      p.gemm_tiles = {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};
      p.gemm_peak_fraction = 0.75;
      p.gemm_fp8_peak_fraction = 0.70;  // unused: A100 has no fp8
      p.hbm_fraction = 0.9;
      p.launch_s = 12 * kUs;
      p.nvlink_fraction = 0.78;
      p.attention_curve.half_head_dim = 2048 / kExpBalanceFlopsPerExp;
      break;
    case ir::GpuArch::hopper:
    case ir::GpuArch::ada:
      p = hopper_kernel_model_params();
      break;
    case ir::GpuArch::blackwell:
      // Hopper's launch cost, fp8 fraction and tile-reuse half point, with what differs: tcgen05 MMA,
      // up to 128 x 256 per SM (the 2-CTA 256 x 256 tile is two of these on an SM pair), an exposed
      // epilogue, and its own peak, HBM and NVLink fractions.
      p = hopper_kernel_model_params();
      p.gemm_tiles = {{128, 256}, {256, 128}, {128, 128}, {128, 64}, {64, 128}};
      p.gemm_epilogue_exposed = 0.5;
      p.gemm_peak_fraction = 0.83;
      p.hbm_fraction = 0.9;
      p.nvlink_fraction = 0.82;
      p.attention_curve.half_head_dim = 8192 / kExpBalanceFlopsPerExp;
      break;
    case ir::GpuArch::cpu:
      p.gemm_tiles = {{64, 64}};
      break;
  }
  // A faster SFU (Blackwell Ultra's 32 exponentials per clock per SM) lowers the GPU's own half point;
  // the family fractions stay those measured at the generation's 16.
  if (gpu.sfu_exp2_per_clock_per_sm > 0 && p.attention_curve.half_head_dim > 0) {
    p.attention_curve.reference_half_head_dim = p.attention_curve.half_head_dim;
    p.attention_curve.half_head_dim *= kSfuExp2PerClockPerSm / gpu.sfu_exp2_per_clock_per_sm;
  }
  return p;
}

// ------------------------------------------------------------------------------------------------
// GEMM

int64_t gemm_tile_count(int64_t m, int64_t n, const GemmTile& tile) {
  return ((m + tile.m - 1) / tile.m) * ((n + tile.n - 1) / tile.n);
}

int64_t gemm_waves(int64_t tiles, int64_t sms) { return sms > 0 ? (tiles + sms - 1) / sms : tiles; }

double gemm_tile_efficiency(const GemmTile& tile, const std::vector<GemmTile>& tiles, double half_reuse) {
  // Operand reuse of a tm x tn tile: 2*tm*tn*k FLOPs per (tm + tn)*k elements loaded. The half point
  // is where shared-memory operand traffic and MMA issue take equal time (MMA FLOP per clock over
  // shared-memory bytes per clock: 32 on Ampere, 64 on Hopper); a hardware ratio, not fitted.
  auto rate = [half_reuse](const GemmTile& t) {
    const double reuse = double(t.m) * double(t.n) / double(t.m + t.n);
    return reuse / (reuse + half_reuse);
  };
  double best = 0;
  for (const auto& t : tiles) best = std::max(best, rate(t));
  return best > 0 ? rate(tile) / best : 1.0;
}

GemmTiming gemm_kernel_time(const ir::GpuSpec& gpu, const GemmShape& shape, ir::DType dtype,
                            const KernelModelParams& params, double peak_flops_per_s) {
  GemmTiming best;
  best.time_s = std::numeric_limits<double>::infinity();
  if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0 || shape.batch <= 0) return {};
  const int64_t sms = sm_count(gpu);
  const double element_bytes = bytes_per_element(dtype);
  double fraction = dtype == ir::DType::fp8 ? params.gemm_fp8_peak_fraction : params.gemm_peak_fraction;
  // Rows of K (A) and N (B, C) that are not a multiple of 16 bytes force the slower non-TMA /
  // non-vectorised kernels (cuBLAS needs 16-byte aligned leading dimensions for its fast paths).
  const auto aligned = [&](int64_t dim) { return std::fmod(double(dim) * element_bytes, 16.0) == 0.0; };
  if (!aligned(shape.k) || !aligned(shape.n)) fraction *= params.gemm_misaligned_factor;
  const double peak = peak_flops_per_s > 0 ? peak_flops_per_s : ir::peak_flops_per_s(gpu, dtype);
  const double per_sm_flops = peak / double(sms) * fraction;
  // Memory floor: A, B read once, C written once (bf16 output), at achievable bandwidth.
  const double bytes = double(shape.batch) * ((double(shape.m) * double(shape.k) + double(shape.k) * double(shape.n)) * element_bytes +
                                              double(shape.m) * double(shape.n) * 2.0);
  const double memory_s = bytes / (gpu.hbm_bytes_per_s * params.hbm_fraction);
  const double per_sm_bytes_per_s = gpu.hbm_bytes_per_s * params.hbm_fraction / double(sms);
  for (const auto& tile : params.gemm_tiles) {
    const int64_t output_tiles = gemm_tile_count(shape.m, shape.n, tile) * shape.batch;
    const double tile_rate = per_sm_flops * gemm_tile_efficiency(tile, params.gemm_tiles, params.gemm_tile_half_reuse);
    // Split-K fills idle SMs when there are fewer output tiles than SMs; each split keeps >= 256 of K.
    for (int64_t split = 1; split <= 16; split *= 2) {
      if (split > 1 && (output_tiles * split > sms * 2 || shape.k / split < 256)) break;
      const int64_t tiles = output_tiles * split;
      const int64_t waves = gemm_waves(tiles, sms);
      const double k_per_split = std::ceil(double(shape.k) / double(split));
      // Each wave ends with its epilogue: the tile's bf16 output stored at the SM's share of HBM
      // bandwidth, not overlapped with the main loop (prologue loads are, by the pipeline).
      const double epilogue_s = params.gemm_epilogue_exposed * double(tile.m) * double(tile.n) * 2.0 / per_sm_bytes_per_s;
      const double compute_s = double(waves) * (2.0 * double(tile.m) * double(tile.n) * k_per_split / tile_rate + epilogue_s);
      // Split-K reduces `split` fp32 partial outputs through memory.
      const double reduce_s = split > 1 ? double(shape.batch) * double(shape.m) * double(shape.n) * 4.0 * double(split) /
                                              (gpu.hbm_bytes_per_s * params.hbm_fraction)
                                        : 0.0;
      const double time_s = std::max(compute_s + reduce_s, memory_s) + params.launch_s;
      if (time_s < best.time_s) {
        best.time_s = time_s;
        best.tile = tile;
        best.split_k = split;
        best.tiles = tiles;
        best.waves = waves;
        best.wave_efficiency = double(tiles) / (double(waves) * double(sms));
        best.memory_bound = memory_s > compute_s + reduce_s;
      }
    }
  }
  return best;
}

double linear_gemm_kernel_time_s(const ir::GpuSpec& gpu, const GemmShape& shape, ir::LinearFormat format,
                                 bool delayed_scaling, const KernelModelParams& params) {
  if (format == ir::LinearFormat::none) return gemm_kernel_time(gpu, shape, ir::DType::bf16, params).time_s;
  const LinearFormatCost cost = linear_format_cost(format, delayed_scaling);
  const double peak = linear_gemm_rate_flops_per_s(gpu, format, ir::DType::bf16);
  const double gemm_s = gemm_kernel_time(gpu, shape, ir::DType::fp8, params, peak).time_s;
  const double elements = double(shape.batch) * (double(shape.m) * double(shape.k) + double(shape.k) * double(shape.n));
  const double quantize_s =
      cost.quantize_bytes_per_element * elements / (gpu.hbm_bytes_per_s * params.hbm_copy_fraction) + 2.0 * params.launch_s;
  return gemm_s + quantize_s;
}

// ------------------------------------------------------------------------------------------------
// Attention

std::string to_string(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::flash_attention_2: return "flash_attention_2";
    case AttentionKernel::flash_attention_3: return "flash_attention_3";
    case AttentionKernel::flash_attention_4: return "flash_attention_4";
    case AttentionKernel::cudnn: return "cudnn";
    case AttentionKernel::torch_sdpa: return "torch_sdpa";
    case AttentionKernel::triton: return "triton";
    case AttentionKernel::cutlass: return "cutlass";
  }
  return "unknown";
}

double attention_score_elements(const AttentionShape& shape) {
  const double sq = double(shape.seq_q), skv = double(shape.seq_kv);
  if (shape.window > 0 && shape.window < shape.seq_kv) {
    const double w = double(shape.window);
    return w * (w + 1) / 2 + (skv - w) * w;  // band of width W, diagonal included
  }
  if (!shape.causal) return sq * skv;
  // Causal with the mask aligned to the bottom-right corner (flash-attention >= 2.1; the same as
  // top-left when seq_q == seq_kv): query i sees keys 0 .. i + (seq_kv - seq_q). With more queries
  // than keys, the first seq_q - seq_kv queries see no key.
  if (sq <= skv) return sq * (skv - sq) + sq * (sq + 1) / 2;
  return skv * (skv + 1) / 2;
}

double attention_flops(const AttentionShape& shape, bool backward) {
  const double elems = attention_score_elements(shape) * double(shape.batch) * double(shape.heads_q);
  const double dqk = double(shape.head_dim_qk), dvo = double(shape.head_dim_vo);
  return backward ? 2.0 * elems * (3.0 * dqk + 2.0 * dvo) : 2.0 * elems * (dqk + dvo);
}

double attention_peak_fraction(AttentionKernel kernel, ir::GpuArch arch, bool backward, ir::DType dtype) {
  const bool fp8 = dtype == ir::DType::fp8;
  // {forward, backward} fractions of the dtype's dense peak at long sequences and head dim 128.
  struct Pair {
    double fwd, bwd;
  };
  Pair p{0, 0};
  switch (arch) {
    case ir::GpuArch::ampere:
      if (kernel == AttentionKernel::flash_attention_2) p = {0.62, 0.50};
      break;
    case ir::GpuArch::hopper:
      switch (kernel) {
        case AttentionKernel::cudnn: p = fp8 ? Pair{0.54, 0.37} : Pair{0.73, 0.60}; break;
        case AttentionKernel::flash_attention_3: p = {0.70, 0.58}; break;
        case AttentionKernel::flash_attention_2: p = {0.39, 0.30}; break;
        case AttentionKernel::torch_sdpa: p = {0.37, 0.33}; break;
        case AttentionKernel::triton: p = {0.48, 0.40}; break;
        case AttentionKernel::cutlass: p = {0.43, 0.35}; break;
        default: break;
      }
      break;
    case ir::GpuArch::blackwell:
      switch (kernel) {
        case AttentionKernel::cudnn: p = {0.70, 0.55}; break;
        case AttentionKernel::flash_attention_4: p = {0.70, 0.60}; break;
        default: break;
      }
      break;
    default: break;
  }
  return backward ? p.bwd : p.fwd;
}

// FlashAttention-2 (and SDPA's flash backend, which is FlashAttention-2) issues Ampere's synchronous
// mma.sync on Hopper; FlashAttention-3 (Shah et al. 2024, citing Luo et al.'s Hopper
// microbenchmarks) notes that mma.sync reaches only about 2/3 of Hopper's tensor-core peak, which
// WGMMA (FA3, cuDNN, CUTLASS 3) reaches. Not fitted.
constexpr double kHopperMmaSyncRateFraction = 2.0 / 3.0;

double attention_mma_rate_fraction(AttentionKernel kernel, ir::GpuArch arch) {
  const bool mma_sync = kernel == AttentionKernel::flash_attention_2 || kernel == AttentionKernel::torch_sdpa;
  return mma_sync && arch == ir::GpuArch::hopper ? kHopperMmaSyncRateFraction : 1.0;
}

AttentionMask attention_mask(const AttentionShape& shape) {
  if (shape.window > 0 && shape.window < shape.seq_kv) return AttentionMask::window;
  return shape.causal ? AttentionMask::causal : AttentionMask::none;
}

double attention_kernel_time_s(const ir::GpuSpec& gpu, AttentionKernel kernel, const AttentionShape& shape, bool backward,
                               ir::DType dtype, const KernelModelParams& params) {
  const double fraction = attention_peak_fraction(kernel, gpu.arch, backward, dtype);
  if (fraction <= 0)
    throw ir::InputError("kernel model", "attention", "no efficiency for " + to_string(kernel) + " on " + gpu.name,
                         "the family does not run on " + ir::to_string(gpu.arch) + " in the fitted rows");
  if (shape.seq_q <= 0 || shape.seq_kv <= 0) return 0.0;
  const double mean_kv = attention_score_elements(shape) / double(shape.seq_q);
  const double d = 0.5 * double(shape.head_dim_qk + shape.head_dim_vo);
  const double factor = params.attention_curve.with_mma_rate(attention_mma_rate_fraction(kernel, gpu.arch))
                            .time_factor(mean_kv, attention_mask(shape), d);
  return attention_flops(shape, backward) / (ir::peak_flops_per_s(gpu, dtype) * fraction) * factor + params.launch_s;
}

// ------------------------------------------------------------------------------------------------
// Collectives

std::string to_string(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case CollectiveAlgorithm::automatic: return "automatic";
    case CollectiveAlgorithm::ring: return "ring";
    case CollectiveAlgorithm::tree: return "tree";
    case CollectiveAlgorithm::nvls: return "nvls";
  }
  return "unknown";
}

namespace {

/// Ring busbw: the intra-domain rate, capped across domains by the domain's NICs.
double ring_bus_bytes_per_s(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size, int64_t domains,
                            const KernelModelParams& params) {
  const bool nvlink = cluster.nvlink_domain_gpus > 1 && cluster.nvlink_bytes_per_s > 0;
  const double intra = nvlink ? cluster.nvlink_bytes_per_s * params.nvlink_fraction : cluster.pcie_bytes_per_s * params.nvlink_fraction;
  if (domains <= 1) return intra;
  const int64_t per_domain = std::max<int64_t>(1, group_size / domains);
  const int64_t nodes_per_domain = std::max<int64_t>(1, std::min(per_domain, cluster.nvlink_domain_gpus) / std::max<int64_t>(1, cluster.gpus_per_node));
  const double domain_network = double(cluster.nics_per_node * nodes_per_domain) * cluster.nic_bytes_per_s * params.network_fraction;
  if (kind == CollectiveKind::all_to_all) {
    const double n = double(group_size), g = double(per_domain);
    return (n - 1) / std::max(1.0, n - g) * domain_network / g;
  }
  return std::min(intra, domain_network);
}

}  // namespace

CollectiveTiming collective_kernel_time(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size,
                                        int64_t domains, int64_t bytes, CollectiveAlgorithm algorithm,
                                        const KernelModelParams& params) {
  CollectiveTiming best;
  if (group_size <= 1 || bytes <= 0) return best;
  domains = std::max<int64_t>(1, domains);
  const double factor = bus_factor(kind, group_size);
  const double moved = double(bytes) * factor;
  const int64_t per_domain = std::max<int64_t>(1, group_size / domains);
  const double nvl_lat = params.nvlink_step_latency_s, net_lat = params.network_step_latency_s;
  best.time_s = std::numeric_limits<double>::infinity();
  // NCCL spreads a message over more channels (and switches LL -> LL128 -> Simple) as it grows, so
  // the achieved rate ramps up: busbw x S / (S + half_bytes).
  const double ramp = double(bytes) / (double(bytes) + params.collective_half_bytes);
  auto consider = [&](CollectiveAlgorithm a, double busbw, double steps_latency_s) {
    const double t = params.collective_base_latency_s + steps_latency_s + moved / (busbw * ramp);
    if (t < best.time_s) {
      best.time_s = t;
      best.algorithm = a;
      best.bus_bytes_per_s = moved / t;
    }
  };
  const double ring_bw = ring_bus_bytes_per_s(cluster, kind, group_size, domains, params);
  const bool any = algorithm == CollectiveAlgorithm::automatic;
  if (any || algorithm == CollectiveAlgorithm::ring) {
    // A ring moves in lockstep: every step waits for its slowest hop, so once the ring crosses the
    // network every step pays the network's latency.
    const double steps = double(latency_steps(kind, group_size));
    consider(CollectiveAlgorithm::ring, ring_bw, steps * (domains > 1 ? net_lat : nvl_lat));
  }
  if ((any || algorithm == CollectiveAlgorithm::tree) && kind == CollectiveKind::all_reduce && domains > 1) {
    const double up_down = 2.0 * (double(per_domain - 1) * nvl_lat + std::ceil(std::log2(double(domains))) * net_lat);
    consider(CollectiveAlgorithm::tree, ring_bw, up_down);
  }
  const bool nvswitch = cluster.nvlink_domain_gpus > 2 && cluster.nvlink_bytes_per_s > 0 &&
                        (cluster.gpu.arch == ir::GpuArch::hopper || cluster.gpu.arch == ir::GpuArch::blackwell);
  if ((any || algorithm == CollectiveAlgorithm::nvls) && kind == CollectiveKind::all_reduce && domains == 1 && nvswitch)
    consider(CollectiveAlgorithm::nvls, cluster.nvlink_bytes_per_s * params.nvls_fraction, 2.0 * nvl_lat);
  if (!std::isfinite(best.time_s)) return {};
  return best;
}

// ------------------------------------------------------------------------------------------------
// Memory-bound kernels

double memory_kernel_time_s(const ir::GpuSpec& gpu, double bytes_moved, bool read_only, const KernelModelParams& params) {
  if (bytes_moved <= 0) return 0.0;
  const double fraction = read_only ? params.hbm_fraction : params.hbm_copy_fraction;
  return bytes_moved / (gpu.hbm_bytes_per_s * fraction) + params.launch_s;
}

}  // namespace mgt::cost
