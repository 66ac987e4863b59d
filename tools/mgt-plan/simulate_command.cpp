// `mgt-plan simulate`: lower, verify, simulate, print (docs/simulator.md §6).
#include "simulate_command.hpp"

#include "progress.hpp"

#include "mgt/cost_model/simulation_report.hpp"
#include "mgt/cost_model/simulator.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/ir/format.hpp"
#include "mgt/planner/lower.hpp"
#include "mgt/planner/search.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace mgt::cli {

namespace {

std::string gib(int64_t bytes) { return ir::format_number("%.2f", double(bytes) / double(1ll << 30)); }
std::string ms(double s) { return ir::format_number("%.2f", s * 1e3); }

void write_file(const std::string& path, const std::string& flag, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (out) out << text;
  if (!out)
    throw ir::InputError(flag, "", "cannot write '" + path + "'", "check that the folder exists and is writable");
}

}  // namespace

int run_simulate(const ir::Graph& graph, const ir::ClusterSpec& cluster, const ir::Plan& plan,
                 const cost::TrainingSettings& settings, int64_t num_gpus, const std::string& trace_path,
                 const std::string& svg_path, bool json, const cost::CostParams& params) {
  using clock = std::chrono::steady_clock;
  ProgressLine progress = ProgressLine::for_stderr(json);
  ProgressTicker ticker(progress);  // the phases below are single long calls: keep the time moving
  const auto t0 = clock::now();
  progress.update("lowering the plan to a schedule", 0, 0);
  plan::LowerOptions lower_options;
  lower_options.params = params;  // the transfer order's dry run prices ops as the simulator does
  const ir::Schedule schedule = plan::lower_to_schedule(graph, plan, settings, num_gpus, cluster, lower_options);
  ir::verify_or_throw(schedule, "lowered schedule");
  const auto t1 = clock::now();
  int64_t instructions = 0;
  for (const auto& p : schedule.programs) instructions += int64_t(p.instructions.size());
  progress.update("simulating " + std::to_string(instructions) + " instructions", 0, 0);
  const cost::Simulator simulator(graph, cluster, settings, params);
  const cost::SimulationResult r = simulator.simulate(schedule);
  const auto t2 = clock::now();
  const cost::Estimator estimator(graph, cluster, num_gpus, settings, params);
  const cost::Estimate analytic = estimator.estimate(plan);
  // Out of range (a NaN or infinite time from an absurd cluster) is refused, as by estimate.
  if (auto why = plan::estimate_out_of_range(analytic)) throw ir::InputError(cluster.name, "", "analytic " + *why);
  if (!std::isfinite(r.step_time_s) || !(r.step_time_s > 0))
    throw ir::InputError(cluster.name, "", "simulated step time " + std::to_string(r.step_time_s) + " s is out of range",
                         "check the cluster's bandwidths, latencies and peak FLOP/s");

  progress.update("writing the trace and report", 0, 0);
  if (!trace_path.empty()) write_file(trace_path, "--trace", cost::to_chrome_trace(schedule, r).dump());
  if (!svg_path.empty()) write_file(svg_path, "--svg", cost::render_svg(schedule, r, cluster.gpu.hbm_bytes));
  ticker.stop();
  progress.finish();

  const cost::ProgramMemory& mem = r.programs.at(r.peak_program).memory;
  const int64_t hbm = cluster.gpu.hbm_bytes;

  if (json) {
    std::cout << cost::to_json(cost::make_simulation_report(graph, schedule, r, analytic, num_gpus)).dump(2) << "\n";
  } else {
    std::ostringstream o;
    o << graph.info.name << " on " << num_gpus << " GPUs (" << cluster.name << "), plan " << ir::to_string(schedule.plan)
      << "\n";
    o << "schedule: " << schedule.programs.size() << " programs, " << instructions << " instructions; lowered in "
      << ms(std::chrono::duration<double>(t1 - t0).count()) << " ms, simulated in "
      << ms(std::chrono::duration<double>(t2 - t1).count()) << " ms\n\n";
    o << "step time " << ms(r.step_time_s) << " ms (analytic estimate " << ms(analytic.step_time_s) << " ms)\n";
    o << "breakdown of " << schedule.programs[r.critical_program].name << " (ends last), ms:\n";
    for (const auto& term : cost::kTimeTerms) {
      char line[96];
      std::snprintf(line, sizeof line, "  %-28s %10.2f  %5.1f %%\n", term.label, r.breakdown.*term.field * 1e3,
                    r.step_time_s > 0 ? 100.0 * r.breakdown.*term.field / r.step_time_s : 0.0);
      o << line;
    }
    o << "\npeak memory " << gib(r.peak_bytes) << " GiB per GPU on " << schedule.programs[r.peak_program].name
      << " at " << ms(mem.peak_time_s) << " ms (analytic estimate " << gib(analytic.memory.peak_bytes) << " GiB; GPU holds "
      << gib(hbm) << " GiB), GiB:\n";
    for (size_t k = 0; k < mem.peak_by_kind.size(); ++k) {
      if (mem.peak_by_kind[k] == 0) continue;
      char line[96];
      std::snprintf(line, sizeof line, "  %-28s %10s\n", ir::to_string(ir::BufferKind(k)).c_str(),
                    gib(mem.peak_by_kind[k]).c_str());
      o << line;
    }
    char line[96];
    std::snprintf(line, sizeof line, "  %-28s %10s\n", "context, NCCL, fragmentation",
                  gib(mem.peak_reserved_bytes - mem.peak_bytes).c_str());
    o << line;
    if (!mem.peak_live.empty()) {
      o << "largest buffers live then, GiB:";
      for (size_t i = 0; i < mem.peak_live.size() && i < cost::kLargestLiveBuffers; ++i)
        o << (i ? ", " : " ") << mem.peak_live[i].name << " " << gib(mem.peak_live[i].bytes);
      o << "\n";
    }
    if (!trace_path.empty()) o << "\ntrace: " << trace_path << " (open in https://ui.perfetto.dev)\n";
    if (!svg_path.empty()) o << (trace_path.empty() ? "\n" : "") << "report: " << svg_path << "\n";
    if (r.peak_bytes > hbm) o << "does not fit: needs " << gib(r.peak_bytes) << " GiB > " << gib(hbm) << " GiB\n";
    std::cout << o.str();
  }
  return r.peak_bytes > hbm ? 1 : 0;
}

}  // namespace mgt::cli
