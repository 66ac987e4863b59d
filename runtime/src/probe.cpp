// `probe --backend cpu`: GEMM sweep, host memory bandwidth and MPI collective sweep, each result
// checked, turned into an `mgt.cluster/1` spec. Steps, formulas and the choices made for fields a
// CPU does not have: docs/probe.md.
#include "mgt/runtime/probe.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/runtime/cpu/kernels.hpp"
#include "mgt/runtime/mpi_communicator.hpp"
#include "probe_util.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace mgt::rt {

namespace {

using probe_detail::format;
using probe_detail::gemm_shape_sweep;
using probe_detail::GemmShape;
using probe_detail::utc_date;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// Deterministic pseudo-random floats in [-1, 1] (xorshift64*), so every rank and every run sees
/// the same inputs.
void fill_uniform(std::vector<float>& v, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    uint64_t r = s * 0x2545F4914F6CDD1Dull;
    x = static_cast<float>(static_cast<double>(r >> 40) / static_cast<double>(1ull << 24) * 2.0 - 1.0);
  }
}

/// Sums `values` over the world in place (floats: counts exact below 2^24, times to ~1e-7).
void sum_over_world(Communicator& comm, std::vector<float>& values) {
  if (comm.world_size() > 1)
    comm.all_reduce(values.data(), values.data(), static_cast<int64_t>(values.size()), comm.all_axes());
}

std::string host_name() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0 || buffer[0] == '\0') return "localhost";
  return buffer;
}

/// "model name" of /proc/cpuinfo (x86), else "CPU".
std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    if (!name.empty()) return name;
  }
  return "CPU";
}

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{1} << 30;
}

/// Ranks sharing this rank's host, and the number of hosts, from a hash of the host name
/// (all-gathered as three exact 16-bit floats per rank).
std::pair<int64_t, int64_t> ranks_on_this_host(Communicator& comm, const std::string& host) {
  const int64_t world = comm.world_size();
  if (world == 1) return {1, 1};
  uint64_t h = std::hash<std::string>{}(host);
  std::vector<float> mine = {static_cast<float>(h & 0xFFFF), static_cast<float>((h >> 16) & 0xFFFF),
                             static_cast<float>((h >> 32) & 0xFFFF)};
  std::vector<float> all(static_cast<size_t>(3 * world));
  comm.all_gather(mine.data(), all.data(), 3, comm.all_axes());
  int64_t same = 0, hosts = 0;
  for (int64_t r = 0; r < world; ++r) {
    bool match = std::equal(mine.begin(), mine.end(), all.begin() + 3 * r);
    same += match;
    bool first_of_host = true;
    for (int64_t q = 0; q < r && first_of_host; ++q)
      first_of_host = !std::equal(all.begin() + 3 * q, all.begin() + 3 * q + 3, all.begin() + 3 * r);
    hosts += first_of_host;
  }
  return {same, hosts};
}

// ---- the sweeps ----

/// The square GEMM for the peak first, then m (tokens per rank) x n (output features) x k (input
/// features) over the sizes the planner's linears take, scaled down, with m n k <= 2^32 (~1/8 s on
/// one core) so the default run stays short.
std::vector<GemmShape> gemm_shapes(bool quick) {
  const int64_t square = quick ? 256 : 1024;
  const std::vector<int64_t> ms = quick ? std::vector<int64_t>{64, 256} : std::vector<int64_t>{64, 256, 1024};
  const std::vector<int64_t> nks =
      quick ? std::vector<int64_t>{64, 256} : std::vector<int64_t>{64, 256, 1024, 4096};
  return gemm_shape_sweep(square, ms, nks, std::numeric_limits<int64_t>::max(), int64_t{1} << 32);
}

/// Per-rank buffer sizes of the collective sweep: 4 KiB x 4^i up to 16 MiB (quick: 1 MiB).
std::vector<int64_t> collective_sizes(bool quick) {
  std::vector<int64_t> sizes;
  for (int64_t b = 4096; b <= (quick ? (int64_t{1} << 20) : (int64_t{16} << 20)); b *= 4) sizes.push_back(b);
  return sizes;
}

void print_gemm_table(std::ostream& out, const std::vector<GemmSample>& rows, double peak) {
  out << "#     m      n      k   time(us)  GFLOP/s  efficiency  #checked  #wrong\n";
  for (const auto& g : rows)
    out << format("%7lld%7lld%7lld %10.1f %8.2f %11.3f %9lld %7lld\n", static_cast<long long>(g.m),
                  static_cast<long long>(g.n), static_cast<long long>(g.k), g.time_s * 1e6, g.flops_per_s / 1e9,
                  g.flops_per_s / peak, static_cast<long long>(g.checked), static_cast<long long>(g.wrong));
}

}  // namespace

int64_t count_gemm_mismatches(const float* y, const float* x, const float* w, int64_t m, int64_t n, int64_t k,
                              int64_t samples) {
  const int64_t outputs = m * n;
  if (outputs <= 0) return 0;
  // gamma_k bound for a dot product of length k in any summation order (Higham, Accuracy and
  // Stability of Numerical Algorithms, 2nd ed., §3.1): |fl(x.w) - x.w| <= k u sum |x_l w_l|, u = 2^-24.
  const double gamma = static_cast<double>(k + 2) * std::ldexp(1.0, -24);
  auto wrong_at = [&](int64_t i, int64_t j) {
    double dot = 0, magnitude = 0;
    for (int64_t l = 0; l < k; ++l) {
      double p = static_cast<double>(x[i * k + l]) * static_cast<double>(w[j * k + l]);
      dot += p;
      magnitude += std::abs(p);
    }
    double got = y[i * n + j];
    return !(std::abs(got - dot) <= gamma * magnitude + 1e-30);  // NaN counts as wrong
  };
  int64_t wrong = 0;
  if (samples >= outputs) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) wrong += wrong_at(i, j);
    return wrong;
  }
  // The four corners, then a stride through the outputs co-prime with n so rows and columns vary.
  wrong += wrong_at(0, 0) + wrong_at(0, n - 1) + wrong_at(m - 1, 0) + wrong_at(m - 1, n - 1);
  int64_t stride = outputs / std::max<int64_t>(samples - 4, 1) + 1;
  while (std::gcd(stride, n) != 1) ++stride;
  int64_t at = 1;
  for (int64_t s = 4; s < samples; ++s, at = (at + stride) % outputs) wrong += wrong_at(at / n, at % n);
  return wrong;
}

// The median of the timed calls, not the best: the cost model predicts a step's typical time, and on
// a machine shared with other work the best call is one no step sees (a 4-layer hidden-512 Llama on
// the 2-core VM measured 1.25x the prediction with best-of times, docs/probe.md §5).
double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 == 1 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

GemmSample time_gemm(int64_t m, int64_t n, int64_t k, int repetitions, int64_t samples) {
  std::vector<float> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k)), y(static_cast<size_t>(m * n));
  fill_uniform(x, static_cast<uint64_t>(m * 1000003 + k));
  fill_uniform(w, static_cast<uint64_t>(n * 1000033 + k + 7));
  cpu::linear_forward(y.data(), x.data(), w.data(), nullptr, m, k, n);  // warm-up: caches, page faults
  std::vector<double> times;
  for (int r = 0; r < std::max(repetitions, 1); ++r) {
    auto start = Clock::now();
    cpu::linear_forward(y.data(), x.data(), w.data(), nullptr, m, k, n);
    times.push_back(seconds_since(start));
  }
  const double best = median(times);
  GemmSample s{.m = m, .n = n, .k = k, .time_s = best};
  s.flops_per_s = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / best;
  s.checked = std::min(samples, m * n);
  s.wrong = count_gemm_mismatches(y.data(), x.data(), w.data(), m, n, k, samples);
  return s;
}

MemorySample time_memory(int64_t array_bytes, int repetitions) {
  const int64_t count = array_bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> a(static_cast<size_t>(count), 0.0f), b(static_cast<size_t>(count)), c(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    b[i] = static_cast<float>(i % 1024);
    c[i] = static_cast<float>(i % 7);
  }
  const float scalar = 3.0f;
  float* __restrict pa = a.data();
  const float* __restrict pb = b.data();
  const float* __restrict pc = c.data();
  double copy = std::numeric_limits<double>::infinity(), triad = copy;
  for (int r = 0; r < std::max(repetitions, 1); ++r) {
    auto start = Clock::now();
    for (int64_t i = 0; i < count; ++i) pa[i] = pb[i];
    copy = std::min(copy, seconds_since(start));
    start = Clock::now();
    for (int64_t i = 0; i < count; ++i) pa[i] = pb[i] + scalar * pc[i];
    triad = std::min(triad, seconds_since(start));
  }
  MemorySample s{.array_bytes = count * static_cast<int64_t>(sizeof(float))};
  s.copy_bytes_per_s = 2.0 * static_cast<double>(s.array_bytes) / copy;
  s.triad_bytes_per_s = 3.0 * static_cast<double>(s.array_bytes) / triad;
  // Check the last triad on a sample (values are small integers: exact).
  const int64_t step = std::max<int64_t>(count / 4096, 1);
  for (int64_t i = 0; i < count; i += step) {
    ++s.checked;
    s.wrong += a[i] != static_cast<float>(i % 1024) + scalar * static_cast<float>(i % 7);
  }
  return s;
}

void print_collective_table(std::ostream& out, const std::vector<CollectiveSample>& rows) {
  out << "#             op        size       count   type   time(us)  algbw(GB/s)  busbw(GB/s)  #wrong\n";
  for (const auto& c : rows)
    out << format("%16s %11lld %11lld %6s %10.2f %12.3f %12.3f %7lld\n", ir::to_string(c.kind).c_str(),
                  static_cast<long long>(c.bytes), static_cast<long long>(c.bytes / 4), "float", c.time_s * 1e6,
                  c.algbw_gbps, c.busbw_gbps, static_cast<long long>(c.wrong));
}

ir::ClusterSpec build_probe_cluster(const std::string& host, const std::string& cpu_model, const std::string& date,
                                    const ProbeOptions& options, double peak_flops_per_s,
                                    const std::vector<GemmSample>& gemms, const MemorySample& memory,
                                    int64_t memory_bytes_per_rank, int64_t ranks_per_node,
                                    const std::vector<CollectiveSample>& collectives,
                                    const std::vector<KernelSample>& kernels) {
  ir::ClusterSpec c;
  c.name = "cpu-" + host;
  c.source = "measured by " + options.command + " on " + date + " (" + std::to_string(ranks_per_node) +
             (ranks_per_node == 1 ? " rank" : " ranks") + (options.quick ? ", quick" : "") + ")";
  c.gpu.name = cpu_model;
  // The CPU backend: the cost model drops the GPU runtime's fixed costs and serialises the streams
  // (cost::default_cost_params); fp8 is unsupported (peak 0).
  c.gpu.arch = ir::GpuArch::cpu;
  // The CPU backend computes every dtype in fp32, so the measured fp32 peak is every peak.
  c.gpu.peak_bf16_flops_per_s = peak_flops_per_s;
  c.gpu.peak_fp16_flops_per_s = peak_flops_per_s;
  c.gpu.peak_fp8_flops_per_s = 0;
  c.gpu.peak_fp32_flops_per_s = peak_flops_per_s;
  c.gpu.hbm_bytes = memory_bytes_per_rank;
  c.gpu.hbm_bytes_per_s = memory.triad_bytes_per_s;
  c.gpus_per_node = ranks_per_node;
  c.nvlink_domain_gpus = 1;
  c.nvlink_bytes_per_s = 0;
  c.nvlink_latency_s = 0;
  c.nics_per_node = 1;

  // Links: the largest all_reduce's busbw is the rate of one ring step, its smallest's time over
  // the 2(n-1) ring steps the latency of one. One host: the "network" is the same shared memory.
  const CollectiveSample* small = nullptr;
  const CollectiveSample* large = nullptr;
  for (const auto& s : collectives) {
    if (s.kind != ir::CollectiveKind::all_reduce) continue;
    if (!small || s.bytes < small->bytes) small = &s;
    if (!large || s.bytes > large->bytes) large = &s;
  }
  if (large) {
    c.pcie_bytes_per_s = large->busbw_gbps * 1e9;
    c.pcie_latency_s = small->time_s / static_cast<double>(2 * (small->group_size - 1));
  } else {
    // One rank: nothing to measure; a copy through shared memory moves at most the memory copy rate.
    c.pcie_bytes_per_s = memory.copy_bytes_per_s / 2;
    c.pcie_latency_s = 0;
  }
  c.nic_bytes_per_s = c.pcie_bytes_per_s;
  c.network_latency_s = c.pcie_latency_s;

  // Efficiencies against the peak; the same rows under every dtype the CPU backend runs in fp32.
  for (ir::DType dtype : {ir::DType::f32, ir::DType::bf16, ir::DType::f16})
    for (const auto& g : gemms)
      c.gemm_table.push_back({.m = g.m, .n = g.n, .k = g.k, .dtype = dtype,
                              .efficiency = std::min(1.0, g.flops_per_s / peak_flops_per_s)});
  for (const auto& k : kernels) c.kernel_table.push_back({.op = k.op, .phase = k.phase, .work_per_s = k.work_per_s});
  for (const auto& s : collectives)
    c.collective_table.push_back({.op = ir::to_string(s.kind), .group_size = s.group_size, .nodes_spanned = 1,
                                  .message_bytes = s.bytes, .bus_bytes_per_s = s.busbw_gbps * 1e9});
  return c;
}

namespace {

/// One kernel's sample: a warm-up call (page faults, caches), `before_each` (a barrier under MPI, so
/// ranks time each kernel together, as they run in training), then the median of `repetitions` timed
/// calls; non-finite values in (a sample of) `result` count as wrong.
KernelSample time_kernel(const char* op, const char* phase, const std::string& shape, double work, int repetitions,
                         const std::function<void()>& call, const std::vector<float>& result,
                         const std::function<void()>& before_each) {
  call();
  if (before_each) before_each();
  std::vector<double> times;
  for (int r = 0; r < std::max(repetitions, 1); ++r) {
    auto start = Clock::now();
    call();
    times.push_back(seconds_since(start));
  }
  const double best = median(times);
  KernelSample k{.op = op, .phase = phase, .shape = shape, .work = work, .time_s = best};
  k.work_per_s = work / best;
  for (size_t i = 0; i < result.size(); i += 1 + result.size() / 4096) k.wrong += !std::isfinite(result[i]);
  return k;
}

}  // namespace

std::vector<KernelSample> time_kernels(bool quick, int repetitions, const std::function<void()>& before_each) {
  // Activations of 1024 tokens x 1024 features (4 MiB per tensor: beyond L2, as in a training step)
  // quick: 256 x 256; attention B 1, T 512, 8 heads (4 KV heads) of 64; logits 256 x 8192.
  const int64_t N = quick ? 256 : 1024, C = quick ? 256 : 1024, V = quick ? 1024 : 8192;
  const int64_t T = quick ? 128 : 512, H = 8, KVH = 4, D = 64, NL = quick ? 64 : 256;
  const int64_t n = N * C;
  auto buffer = [](int64_t count, uint64_t seed) {
    std::vector<float> v(static_cast<size_t>(count));
    fill_uniform(v, seed);
    return v;
  };
  std::vector<float> x = buffer(n, 1), y = buffer(n, 2), dy = buffer(n, 3), dx(static_cast<size_t>(n)),
                     dx2(static_cast<size_t>(n)), w = buffer(C, 4), dw(static_cast<size_t>(C)),
                     rstd(static_cast<size_t>(N));
  std::vector<KernelSample> out;
  auto timed = [&](const char* op, const char* phase, const std::string& shape, double work,
                   const std::function<void()>& call, const std::vector<float>& result) {
    out.push_back(time_kernel(op, phase, shape, work, repetitions, call, result, before_each));
  };
  const std::string nc = std::to_string(N) + "x" + std::to_string(C);
  const double elements = static_cast<double>(n);
  timed("norm", "fwd", nc, elements, [&] { cpu::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f); }, y);
  timed("norm", "bwd", nc, elements, [&] {
    cpu::rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C);
  }, dx);
  // RoPE over (1, N, C/D heads, D) with the Llama-3 tables.
  const int64_t heads = C / D;
  std::vector<float> cos(static_cast<size_t>(N * D / 2)), sin(static_cast<size_t>(N * D / 2));
  cpu::rope_tables(cos.data(), sin.data(), N, D, 0, cpu::RopeConfig{.theta = 500000.0, .factor = 8.0});
  timed("rope", "fwd", nc, elements, [&] { cpu::rope_forward(y.data(), x.data(), cos.data(), sin.data(), 1, N, heads, D); }, y);
  std::fill(dx.begin(), dx.end(), 0.0f);
  timed("rope", "bwd", nc, elements, [&] { cpu::rope_backward(dx.data(), dy.data(), cos.data(), sin.data(), 1, N, heads, D); }, dx);
  timed("activation", "fwd", nc + " (swiglu)", elements, [&] { cpu::swiglu_forward(y.data(), x.data(), dy.data(), n); }, y);
  std::fill(dx.begin(), dx.end(), 0.0f);
  std::fill(dx2.begin(), dx2.end(), 0.0f);
  timed("activation", "bwd", nc + " (swiglu)", elements, [&] {
    cpu::swiglu_backward(dx.data(), dx2.data(), dy.data(), x.data(), y.data(), n);
  }, dx);
  timed("residual", "fwd", nc, elements, [&] { cpu::residual_forward(y.data(), x.data(), dy.data(), n); }, y);
  timed("residual", "bwd", nc, elements, [&] { cpu::residual_backward(dx.data(), dx2.data(), dy.data(), n); }, dx);
  {
    std::vector<int32_t> ids(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % V);
    std::vector<float> wte = buffer(V * C, 5), dwte(static_cast<size_t>(V * C));
    timed("embedding", "fwd", nc + " of " + std::to_string(V), elements,
          [&] { cpu::embedding_forward(y.data(), ids.data(), wte.data(), N, V, C); }, y);
    timed("embedding", "bwd", nc + " of " + std::to_string(V), elements,
          [&] { cpu::embedding_backward(dwte.data(), dy.data(), ids.data(), N, V, C); }, dwte);
  }
  {
    cpu::AttentionConfig ac{.B = 1, .T = T, .H = H, .KVH = KVH, .D = D};
    std::vector<float> q = buffer(T * H * D, 6), k = buffer(T * KVH * D, 7), v = buffer(T * KVH * D, 8);
    std::vector<float> o(q.size()), lse(static_cast<size_t>(H * T)), dout = buffer(T * H * D, 9);
    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
    std::vector<float> scratch(static_cast<size_t>(cpu::attention_backward_scratch(ac)));
    // Forward FLOPs as the cost model counts them: QK^T and PV, causal half (layer_cost.cpp).
    const double flops = 2.0 * double(T) * double(T) * double(H) * double(2 * D) * 0.5;
    const std::string shape = "T " + std::to_string(T) + ", " + std::to_string(H) + "/" + std::to_string(KVH) +
                              " heads of " + std::to_string(D);
    timed("attention_core", "fwd", shape, flops,
          [&] { cpu::attention_forward(o.data(), lse.data(), q.data(), k.data(), v.data(), ac, scratch.data()); }, o);
    timed("attention_core", "bwd", shape, flops, [&] {
      cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), lse.data(),
                              ac, scratch.data());
    }, dq);
  }
  {
    std::vector<float> logits = buffer(NL * V, 10), dlogits(logits.size());
    std::vector<int32_t> targets(static_cast<size_t>(NL));
    for (int64_t i = 0; i < NL; ++i) targets[static_cast<size_t>(i)] = static_cast<int32_t>((i * 31) % V);
    const std::string shape = std::to_string(NL) + "x" + std::to_string(V);
    const double logit_count = static_cast<double>(NL * V);
    std::vector<float> loss(1);
    timed("softmax_cross_entropy", "fwd", shape, logit_count, [&] {
      loss[0] = static_cast<float>(cpu::softmax_cross_entropy_forward_backward(nullptr, logits.data(), targets.data(),
                                                                                NL, V, NL));
    }, loss);
    // Backward as the executor runs it: the gradient written over the logits (in place).
    std::copy(logits.begin(), logits.end(), dlogits.begin());
    timed("softmax_cross_entropy", "bwd", shape, logit_count, [&] {
      cpu::softmax_cross_entropy_forward_backward(dlogits.data(), dlogits.data(), targets.data(), NL, V, NL);
    }, dlogits);
  }
  {
    // The optimizer step as the executor runs it: the gradients' global-norm pass, then AdamW; 8 Mi
    // parameters (128 MiB of parameters, gradients and moments per rank: far beyond the caches, as a
    // model's are). The clipping pass (grad *= coefficient, only when the norm exceeds --grad-clip)
    // is left out: whether it runs depends on the data.
    const int64_t params = quick ? (int64_t{1} << 18) : (int64_t{1} << 23);
    std::vector<float> p = buffer(params, 11), g = buffer(params, 12), m(static_cast<size_t>(params)),
                       v2(static_cast<size_t>(params));
    int64_t step = 0;
    std::vector<float> norm(1);
    timed("optimizer", "fwd", std::to_string(params) + " parameters (norm, AdamW)", static_cast<double>(params), [&] {
      norm[0] = static_cast<float>(cpu::grad_sum_squares(g.data(), params));
      cpu::adamw_step(p.data(), g.data(), m.data(), v2.data(), params, ++step, cpu::AdamWConfig{});
    }, p);
  }
  return out;
}

namespace {

/// 1. GEMM sweep, every rank at once. The square first gives the rate that sizes the repetitions.
void probe_gemms(Communicator& comm, const ProbeOptions& options, std::ostream* log, ProbeReport& report) {
  const int64_t world = comm.world_size();
  const Axes all = comm.all_axes();
  const std::vector<GemmShape> shapes = gemm_shapes(options.quick);
  const double target_s = options.quick ? 0.004 : 0.06;  // timed seconds per shape
  double rate_guess = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [m, n, k] = shapes[i];
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const int reps = i == 0 ? (options.quick ? 3 : 5)
                            : static_cast<int>(std::clamp(target_s * rate_guess / flops, 3.0, 200.0));
    comm.barrier(all);
    GemmSample s = time_gemm(m, n, k, reps);
    std::vector<float> totals = {static_cast<float>(s.time_s), static_cast<float>(s.checked),
                                 static_cast<float>(s.wrong)};
    sum_over_world(comm, totals);
    s.time_s = static_cast<double>(totals[0]) / static_cast<double>(world);
    s.flops_per_s = flops / s.time_s;
    s.checked = static_cast<int64_t>(totals[1]);
    s.wrong = static_cast<int64_t>(totals[2]);
    if (i == 0) rate_guess = s.flops_per_s;
    report.gemms.push_back(s);
  }
  report.peak_square_dim = shapes[0].m;
  for (const auto& g : report.gemms) report.peak_flops_per_s = std::max(report.peak_flops_per_s, g.flops_per_s);
  if (log) {
    *log << "# GEMM y = x w^T (rt::linear_forward, fp32, OpenBLAS or Eigen), median of the timed calls, mean over ranks;"
         << " peak = best rate measured = " << format("%.2f", report.peak_flops_per_s / 1e9) << " GFLOP/s per rank\n";
    print_gemm_table(*log, report.gemms, report.peak_flops_per_s);
  }
  for (const auto& g : report.gemms)
    if (g.wrong != 0)
      throw std::runtime_error(format("probe: GEMM %lldx%lldx%lld gave %lld wrong outputs of %lld checked",
                                      static_cast<long long>(g.m), static_cast<long long>(g.n),
                                      static_cast<long long>(g.k), static_cast<long long>(g.wrong),
                                      static_cast<long long>(g.checked)));
}

/// 2. Host memory bandwidth, every rank at once: arrays the size of the last-level cache (three
///    arrays: the working set is 3x the cache), within 64 MiB .. 256 MiB and RAM / 16.
void probe_memory(Communicator& comm, const ProbeOptions& options, std::ostream* log, int64_t ram, int64_t local,
                  ProbeReport& report) {
  const int64_t world = comm.world_size();
  const Axes all = comm.all_axes();
  int64_t array_bytes = int64_t{16} << 20;
  if (!options.quick) {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    array_bytes = std::clamp<int64_t>(l3 > 0 ? l3 : 0, int64_t{64} << 20, int64_t{256} << 20);
    array_bytes = std::min<int64_t>(array_bytes, ram / (16 * 3 * local));
  }
  comm.barrier(all);
  report.memory = time_memory(array_bytes, options.quick ? 2 : 5);
  {
    std::vector<float> totals = {static_cast<float>(report.memory.copy_bytes_per_s / 1e9),
                                 static_cast<float>(report.memory.triad_bytes_per_s / 1e9),
                                 static_cast<float>(report.memory.checked), static_cast<float>(report.memory.wrong)};
    sum_over_world(comm, totals);
    report.memory.copy_bytes_per_s = static_cast<double>(totals[0]) * 1e9 / static_cast<double>(world);
    report.memory.triad_bytes_per_s = static_cast<double>(totals[1]) * 1e9 / static_cast<double>(world);
    report.memory.checked = static_cast<int64_t>(totals[2]);
    report.memory.wrong = static_cast<int64_t>(totals[3]);
  }
  if (log)
    *log << format("# host memory, 3 x %lld MiB float arrays per rank, all ranks at once, mean per rank: "
                   "copy %.2f GB/s, triad %.2f GB/s, %lld checked, %lld wrong\n",
                   static_cast<long long>(report.memory.array_bytes >> 20), report.memory.copy_bytes_per_s / 1e9,
                   report.memory.triad_bytes_per_s / 1e9, static_cast<long long>(report.memory.checked),
                   static_cast<long long>(report.memory.wrong));
  if (report.memory.wrong != 0)
    throw std::runtime_error("probe: memory triad gave " + std::to_string(report.memory.wrong) + " wrong values of " +
                             std::to_string(report.memory.checked) + " checked");
}

/// 2b. The non-GEMM kernels, every rank at once (they share the memory system as in training).
void probe_kernels(Communicator& comm, const ProbeOptions& options, std::ostream* log, ProbeReport& report) {
  const int64_t world = comm.world_size();
  const Axes all = comm.all_axes();
  comm.barrier(all);
  report.kernels = time_kernels(options.quick, options.quick ? 2 : 5, [&] { comm.barrier(all); });
  for (auto& k : report.kernels) {
    std::vector<float> totals = {static_cast<float>(k.time_s), static_cast<float>(k.wrong)};
    sum_over_world(comm, totals);
    k.time_s = static_cast<double>(totals[0]) / static_cast<double>(world);
    k.work_per_s = k.work / k.time_s;
    k.wrong = static_cast<int64_t>(totals[1]);
  }
  if (log) {
    *log << "# non-GEMM kernels (the executor's), median of the timed calls, mean over ranks; work: elements of the "
            "first input, attention forward FLOPs (causal half), parameters for AdamW\n";
    for (const auto& k : report.kernels)
      *log << format("%22s %3s  %-32s %12.1f us  %10.3f Gwork/s\n", k.op.c_str(), k.phase.c_str(), k.shape.c_str(),
                     k.time_s * 1e6, k.work_per_s / 1e9);
  }
  for (const auto& k : report.kernels)
    if (k.wrong != 0)
      throw std::runtime_error("probe: kernel " + k.op + " " + k.phase + " gave " + std::to_string(k.wrong) +
                               " non-finite outputs");
}

}  // namespace

ProbeReport probe_cpu(Communicator& comm, const ProbeOptions& options, std::ostream* log) {
  const int64_t world = comm.world_size();
  const Axes all = comm.all_axes();
  const auto total_start = Clock::now();
  ProbeReport report;

  const std::string host = host_name();
  const auto [local, hosts] = ranks_on_this_host(comm, host);
  if (hosts != 1)
    throw ir::InputError("probe", "",
                         "the " + std::to_string(world) + " ranks span " + std::to_string(hosts) + " hosts",
                         "run probe with every rank on one host; multi-host probing is not supported");
  report.ranks_per_node = local;
  if (log)
    *log << "# mgt probe --backend cpu on " << host << " (" << cpu_model_name() << "), " << world
         << (world == 1 ? " rank" : " ranks") << (options.quick ? ", quick" : "") << "\n";

  probe_gemms(comm, options, log, report);
  const int64_t ram = physical_memory_bytes();
  probe_memory(comm, options, log, ram, local, report);
  probe_kernels(comm, options, log, report);

  // 3. Collectives over the world.
  if (world > 1) {
    const int64_t bytes_budget = options.quick ? (int64_t{4} << 20) : (int64_t{256} << 20);
    for (ir::CollectiveKind kind : probe_detail::kProbedCollectives) {
      for (int64_t bytes : collective_sizes(options.quick)) {
        // Multiple of 4 x world for the chunked collectives (nccl-tests rounds the same way).
        const int64_t unit = 4 * world;
        const int64_t rounded = std::max(unit, bytes / unit * unit);
        const int iterations =
            static_cast<int>(std::clamp<int64_t>(bytes_budget / rounded, 5, options.quick ? 20 : 100));
        // Best of a few trials, each the mean of `iterations` calls and each checked: ranks share
        // cores with anything else running, and one descheduled rank stalls the whole collective.
        CollectiveSample s{.kind = kind, .group_size = world, .bytes = rounded,
                           .time_s = std::numeric_limits<double>::infinity()};
        for (int trial = 0; trial < (options.quick ? 2 : 3); ++trial) {
          CollectiveTiming t = time_collective(comm, kind, all, rounded, iterations, /*warmup=*/trial == 0 ? 2 : 0);
          s.time_s = std::min(s.time_s, t.time_s);
          s.wrong += t.wrong;
        }
        s.algbw_gbps = algbw_gbps(rounded, s.time_s);
        s.busbw_gbps = busbw_gbps(kind, world, rounded, s.time_s);
        report.collectives.push_back(s);
      }
    }
    probe_detail::log_and_check_collectives(
        report.collectives,
        "# collectives over the world (" + std::to_string(world) + " ranks, MPI), out of place, every element checked\n",
        log);
  } else if (log) {
    *log << "# one rank: no collectives measured (run under mpirun -np N to measure them)\n";
  }

  // 4. The spec.
  report.cluster = build_probe_cluster(host, cpu_model_name(), utc_date(), options, report.peak_flops_per_s,
                                       report.gemms, report.memory, ram / local, local, report.collectives,
                                       report.kernels);
  if (log) *log << format("# probe took %.1f s\n", seconds_since(total_start));
  return report;
}

}  // namespace mgt::rt
