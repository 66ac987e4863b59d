// Calibration of the framework profiles' fitted in-step members (one value for every profile) against
// the published runs in examples/validation (docs/calibration.md): the library's coordinate descent
// (planner/calibrate.hpp) over its parameter table, from the shipped constants, on every source.
// Prints the fitted values, which are then written into FrameworkProfile's member initialisers
// (cost_model/include/mgt/cost_model/framework_profile.hpp) by hand (docs/cost-model.md §9).
//   ./build/bench/mgt_calibrate examples/validation/*.json
#include "mgt/planner/calibrate.hpp"
#include "mgt/planner/validate.hpp"

#include <cstdio>
#include <numeric>
#include <vector>

int main(int argc, char** argv) {
  std::vector<mgt::plan::ValidationSource> sources;
  for (int i = 1; i < argc; ++i) sources.push_back(mgt::plan::read_validation_source(argv[i]));
  const mgt::plan::CalibrationSet set(sources, mgt::plan::calibrated_parameters());
  std::vector<size_t> all(set.source_count());
  std::iota(all.begin(), all.end(), size_t{0});
  auto print = [](const char* label, const mgt::plan::CalibrationScore& s) {
    std::printf("%s: objective %.5f (loss %.5f + prior penalty %.5f); time median %.3f p90 %.3f, memory median %.3f p90 %.3f, oom missed %d\n",
                label, s.objective(), s.loss, s.prior_penalty, s.time_median, s.time_p90, s.memory_median, s.memory_p90, s.oom_missed);
  };
  const std::vector<double> start = mgt::plan::shipped_values(set.parameters());
  mgt::plan::FitOptions options;
  print("start", set.score(all, start, options.objective));
  options.on_round = [&print](int round, const mgt::plan::CalibrationScore& best) {
    print(("round " + std::to_string(round)).c_str(), best);
  };
  const mgt::plan::FitResult fitted = mgt::plan::fit(set, all, start, options);
  for (size_t i = 0; i < set.parameters().size(); ++i)
    std::printf("%-36s %.4g\n", set.parameters()[i].name.c_str(), fitted.values[i]);
  return 0;
}
