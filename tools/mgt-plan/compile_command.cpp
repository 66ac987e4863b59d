// `mgt-plan compile`: plan -> ir::Schedule, verified, written as JSON or text (compile_command.hpp).
#include "compile_command.hpp"

#include "progress.hpp"
#include "report.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/schedule.hpp"
#include "mgt/planner/lower.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>

namespace mgt::cli {

int run_compile(const ir::Graph& graph, const ir::ClusterSpec& cluster, const ir::Plan& plan,
                const cost::TrainingSettings& settings, int64_t num_gpus, const std::string& out_path, bool text,
                const cost::CostParams& params) {
  const auto start = std::chrono::steady_clock::now();
  ProgressLine progress = ProgressLine::for_stderr(/*json=*/false);
  ProgressTicker ticker(progress);
  progress.update("lowering the plan to a schedule", 0, 0);
  plan::LowerOptions lower_options;
  lower_options.params = params;  // the transfer order as `simulate` orders it under the same framework
  const ir::Schedule schedule = plan::lower_to_schedule(graph, plan, settings, num_gpus, cluster, lower_options);
  ticker.stop();
  progress.finish();
  const double lower_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<std::string> problems = ir::verify(schedule);
  if (!problems.empty()) {
    std::cerr << "error: the lowered schedule fails verification (" << problems.size() << " problem(s)): " << problems[0]
              << " (hint: this is a bug in the lowering; please report the model and plan)\n";
    return 2;
  }
  const std::string body = text ? ir::to_text(schedule) : ir::to_json(schedule).dump(1) + "\n";
  if (!write_output(out_path, body)) {
    std::cerr << "error: " << out_path << ": cannot write the schedule (hint: check the directory exists and is writable)\n";
    return 2;
  }
  size_t instructions = 0;
  for (const auto& p : schedule.programs) instructions += p.instructions.size();
  std::fprintf(stderr, "schedule: %zu programs, %zu instructions, verify OK, lowered in %.3f s\n",
               schedule.programs.size(), instructions, lower_s);
  return 0;
}

}  // namespace mgt::cli
