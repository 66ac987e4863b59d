// Calibration of the framework profiles' fitted software parameters against the published training
// runs in examples/validation (docs/cost-model.md §9). The hardware side is not fitted here: kernel
// efficiencies, HBM and NCCL fractions come from the kernel model, fitted to kernel measurements
// only (docs/cost-model.md §8). Coordinate descent over the few bounded members of kProfileFits, per
// profile, each on the rows that ran under that profile; nothing is keyed on a model, a source or a
// row. Prints per-profile values and medians, which are then written into
// cost_model/src/framework_profile.cpp by hand.
//   ./build/bench/mgt_calibrate examples/validation/*.json
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/planner/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

using mgt::cost::FrameworkProfile;
using Fitted = std::map<std::string, FrameworkProfile>;  // profile name -> its fitted members

struct Score {
  std::map<std::string, std::vector<double>> time_errors, mem_errors;  // per profile
  std::map<std::string, int> oom_missed;
};

Score score(const std::vector<mgt::plan::ValidationSource>& sources, const Fitted& fitted) {
  auto params_for = [&fitted](const mgt::ir::GpuSpec& gpu, const FrameworkProfile& profile) {
    FrameworkProfile p = profile;
    if (auto it = fitted.find(profile.name); it != fitted.end())
      for (const auto& fit : mgt::cost::kProfileFits) p.*fit.member = it->second.*fit.member;
    return mgt::cost::cost_params_for(gpu, p);
  };
  Score s;
  for (const auto& source : sources)
    for (const auto& row : source.rows) {
      std::vector<std::string> ignored;
      const std::string profile = mgt::plan::row_framework(source, row, ignored).name;
      for (const auto& r : mgt::plan::validate_row(source, row, params_for)) {
        if (r.skipped || !r.error) continue;
        if (r.kind == mgt::plan::MetricKind::throughput) s.time_errors[profile].push_back(std::abs(*r.error));
        if (r.kind == mgt::plan::MetricKind::memory) s.mem_errors[profile].push_back(std::abs(*r.error));
        if (r.kind == mgt::plan::MetricKind::oom && *r.error != 0) ++s.oom_missed[profile];
      }
    }
  return s;
}

// One profile's objective: median + p90 / 4 of its throughput errors (a few rows another framework ran,
// e.g. the DeepSpeed ZeRO-3 rows of Narayanan 2021 Table 2 filed under megatron-lm, must not pull it), memory at half weight, a
// missed OOM as 5 points.
double objective(const Score& s, const std::string& profile) {
  auto get = [](const auto& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? std::vector<double>{} : it->second;
  };
  const auto t = get(s.time_errors, profile), m = get(s.mem_errors, profile);
  const auto oom = s.oom_missed.count(profile) ? s.oom_missed.at(profile) : 0;
  return mgt::plan::percentile(t, 0.5) + 0.25 * mgt::plan::percentile(t, 0.9) + 0.5 * mgt::plan::percentile(m, 0.5) +
         0.05 * oom;
}

void print(const Score& s, const Fitted& fitted) {
  std::vector<double> all;
  for (const auto& [profile, errors] : s.time_errors) {
    all.insert(all.end(), errors.begin(), errors.end());
    std::printf("  %-20s n=%3zu median %5.1f %% p90 %5.1f %%", profile.c_str(), errors.size(),
                100 * mgt::plan::percentile(errors, 0.5), 100 * mgt::plan::percentile(errors, 0.9));
    if (auto it = fitted.find(profile); it != fitted.end())
      for (const auto& fit : mgt::cost::kProfileFits) std::printf("  %s %.4g", fit.name, it->second.*fit.member);
    std::printf("\n");
  }
  std::printf("  all throughput n=%zu median %.1f %% p90 %.1f %%\n", all.size(), 100 * mgt::plan::percentile(all, 0.5),
              100 * mgt::plan::percentile(all, 0.9));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<mgt::plan::ValidationSource> sources;
  for (int i = 1; i < argc; ++i) {
    auto s = mgt::plan::read_validation_source(argv[i]);
    if (!s.catalog) sources.push_back(std::move(s));
  }
  Fitted fitted;
  for (const auto& name : mgt::cost::framework_profile_names()) fitted[name] = mgt::cost::framework_profile(name);
  Score best = score(sources, fitted);
  std::printf("start\n");
  print(best, fitted);
  // Profiles fit independently (a row belongs to one), so every profile's knob moves in one pass.
  for (int round = 0; round < 6; ++round) {
    bool improved = false;
    for (const auto& fit : mgt::cost::kProfileFits)
      for (double factor : {0.7, 0.85, 0.95, 1.05, 1.15, 1.4}) {
        Fitted trial = fitted;
        for (auto& [name, p] : trial) {
          const double current = p.*fit.member;
          p.*fit.member = std::clamp(current * factor + (current == 0 ? 1e-3 * factor : 0), fit.lo, fit.hi);
        }
        const Score s = score(sources, trial);
        bool accepted = false;
        for (auto& [name, p] : trial) {
          if (!best.time_errors.count(name)) continue;
          if (objective(s, name) < objective(best, name) - 1e-6) {
            fitted[name].*fit.member = p.*fit.member;
            accepted = improved = true;
          }
        }
        if (accepted) best = score(sources, fitted);
      }
    std::printf("round %d\n", round);
    print(best, fitted);
    if (!improved) break;
  }
  return 0;
}
