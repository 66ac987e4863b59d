// Calibration of the cost model's physical constants against the published measurements in
// examples/validation (docs/cost-model.md §7). Coordinate descent over a few named parameters,
// per GPU generation for kernel efficiencies, shared for everything else; no parameter is keyed on
// a model, a source or a row. Prints the fitted values, which are then written into
// cost_model/src/cost_params.cpp by hand with their justification.
//   ./build/bench/mgt_calibrate examples/validation/*.json
#include "mgt/cost_model/cost_params.hpp"
#include "mgt/planner/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

using mgt::cost::CostParams;
using mgt::ir::GpuArch;

struct Fit {
  std::map<GpuArch, CostParams> per_arch;
};

struct Score {
  double time_median = 0, time_p90 = 0, mem_median = 0, mem_p90 = 0;
  int oom_missed = 0;
  double objective() const {
    return time_median + 0.5 * time_p90 + 0.5 * mem_median + 0.25 * mem_p90 + 0.05 * oom_missed;
  }
};

Score score(const std::vector<mgt::plan::ValidationSource>& sources, const Fit& fit) {
  auto params_for = [&fit](const mgt::ir::GpuSpec& gpu) {
    auto it = fit.per_arch.find(gpu.arch);
    return it != fit.per_arch.end() ? it->second : mgt::cost::default_cost_params(gpu);
  };
  std::vector<double> time_errors, mem_errors;
  Score s;
  for (const auto& source : sources)
    for (const auto& r : mgt::plan::validate_source(source, params_for)) {
      if (r.skipped || !r.error) continue;
      if (r.kind == mgt::plan::MetricKind::throughput) time_errors.push_back(std::abs(*r.error));
      if (r.kind == mgt::plan::MetricKind::memory) mem_errors.push_back(std::abs(*r.error));
      if (r.kind == mgt::plan::MetricKind::oom && *r.error != 0) ++s.oom_missed;
    }
  s.time_median = mgt::plan::percentile(time_errors, 0.5);
  s.time_p90 = mgt::plan::percentile(time_errors, 0.9);
  s.mem_median = mgt::plan::percentile(mem_errors, 0.5);
  s.mem_p90 = mgt::plan::percentile(mem_errors, 0.9);
  return s;
}

// A tunable: a name and how to reach the value in a Fit (one arch, or every arch for shared ones).
struct Knob {
  std::string name;
  std::vector<GpuArch> archs;
  double CostParams::*member;
  double lo, hi;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<mgt::plan::ValidationSource> sources;
  for (int i = 1; i < argc; ++i) {
    auto s = mgt::plan::read_validation_source(argv[i]);
    if (!s.catalog) sources.push_back(std::move(s));
  }
  Fit fit;
  for (GpuArch a : {GpuArch::ampere, GpuArch::hopper}) {
    mgt::ir::GpuSpec gpu;
    gpu.arch = a;
    fit.per_arch[a] = mgt::cost::default_cost_params(gpu);
  }
  const std::vector<GpuArch> all{GpuArch::ampere, GpuArch::hopper};
  const std::vector<Knob> knobs{
      {"ampere.gemm_max_efficiency", {GpuArch::ampere}, &CostParams::gemm_max_efficiency, 0.4, 0.9},
      {"hopper.gemm_max_efficiency", {GpuArch::hopper}, &CostParams::gemm_max_efficiency, 0.3, 0.85},
      {"ampere.attention_fwd_efficiency", {GpuArch::ampere}, &CostParams::attention_fwd_efficiency, 0.2, 0.8},
      {"hopper.attention_fwd_efficiency", {GpuArch::hopper}, &CostParams::attention_fwd_efficiency, 0.15, 0.8},
      {"ampere.attention_bwd_efficiency", {GpuArch::ampere}, &CostParams::attention_bwd_efficiency, 0.2, 0.7},
      {"hopper.attention_bwd_efficiency", {GpuArch::hopper}, &CostParams::attention_bwd_efficiency, 0.2, 0.7},
      {"hopper.fp8_gemm_max_efficiency", {GpuArch::hopper}, &CostParams::fp8_gemm_max_efficiency, 0.2, 0.8},
      {"hbm_efficiency", all, &CostParams::hbm_efficiency, 0.6, 0.92},
      {"gemm_half_efficiency_dim", all, &CostParams::gemm_half_efficiency_dim, 16, 512},
      {"nvlink_efficiency", all, &CostParams::nvlink_efficiency, 0.6, 0.85},
      {"network_efficiency", all, &CostParams::network_efficiency, 0.5, 0.92},
      {"overlap_compute_slowdown", all, &CostParams::overlap_compute_slowdown, 0.0, 0.4},
      {"allocator_fragmentation", all, &CostParams::allocator_fragmentation, 0.0, 0.3},
      {"per_microbatch_overhead_s", all, &CostParams::per_microbatch_overhead_s, 0.0, 0.05},
  };
  Score best = score(sources, fit);
  std::printf("start: time median %.3f p90 %.3f, memory median %.3f p90 %.3f, oom missed %d\n", best.time_median,
              best.time_p90, best.mem_median, best.mem_p90, best.oom_missed);
  // Bounds are physical (docs/cost-model.md §7): a fit may not leave what hardware can do.
  for (int round = 0; round < 8; ++round) {
    bool improved = false;
    for (const auto& knob : knobs) {
      const double current = fit.per_arch[knob.archs.front()].*knob.member;
      for (double factor : {0.8, 0.9, 0.95, 1.05, 1.1, 1.25}) {
        double value = std::clamp(current * factor + (current == 0 ? 0.01 * factor : 0), knob.lo, knob.hi);
        Fit trial = fit;
        for (GpuArch a : knob.archs) trial.per_arch[a].*knob.member = value;
        const Score s = score(sources, trial);
        if (s.objective() < best.objective() - 1e-6) {
          best = s;
          fit = trial;
          improved = true;
        }
      }
    }
    std::printf("round %d: time median %.3f p90 %.3f, memory median %.3f p90 %.3f, oom missed %d\n", round,
                best.time_median, best.time_p90, best.mem_median, best.mem_p90, best.oom_missed);
    if (!improved) break;
  }
  for (const auto& knob : knobs)
    std::printf("%-36s %.4g\n", knob.name.c_str(), fit.per_arch[knob.archs.front()].*knob.member);
  return 0;
}
