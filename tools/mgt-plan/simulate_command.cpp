// `mgt-plan simulate`: lower, verify, simulate, print (docs/simulator.md §6).
#include "simulate_command.hpp"

#include "mgt/cost_model/breakdown_json.hpp"

#include "mgt/cost_model/simulator.hpp"
#include "mgt/ir/error.hpp"
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

constexpr const char* kKindNames[] = {"parameters", "gradients", "optimizer", "activations",
                                      "fsdp_buffer", "comm_buffer", "workspace", "logits"};
// Buffers listed as live at the peak: enough to see what dominates it.
constexpr size_t kLargestLive = 8;

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", double(bytes) / double(1ll << 30));
  return buf;
}
std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s * 1e3);
  return buf;
}

void write_file(const std::string& path, const std::string& flag, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (out) out << text;
  if (!out)
    throw ir::InputError(flag, "", "cannot write '" + path + "'", "check that the folder exists and is writable");
}

/// mgt.simulation/1 (simulate_command.hpp).
nlohmann::json simulation_json(const ir::Graph& graph, const ir::Schedule& schedule, const cost::SimulationResult& r,
                               const cost::Estimate& analytic, int64_t num_gpus, int64_t instructions) {
  const cost::ProgramMemory& mem = r.programs.at(r.peak_program).memory;
  nlohmann::json by_kind = nlohmann::json::object();
  for (size_t k = 0; k < std::size(kKindNames); ++k) by_kind[kKindNames[k]] = mem.peak_by_kind[k];
  nlohmann::json largest_live = nlohmann::json::array();
  for (size_t i = 0; i < mem.peak_live.size() && i < kLargestLive; ++i)
    largest_live.push_back({{"name", mem.peak_live[i].name},
                            {"bytes", mem.peak_live[i].bytes},
                            {"kind", kKindNames[size_t(mem.peak_live[i].kind)]}});
  nlohmann::json programs = nlohmann::json::array();
  for (size_t p = 0; p < r.programs.size(); ++p) {
    const auto& pr = r.programs[p];
    nlohmann::json busy = nlohmann::json::object();
    for (int s = 0; s < ir::kNumStreams; ++s) busy[ir::to_string(ir::Stream(s))] = pr.busy_s[size_t(s)];
    programs.push_back({{"name", schedule.programs[p].name},
                        {"num_ranks", schedule.programs[p].num_ranks},
                        {"end_s", pr.end_s},
                        {"busy_s", busy},
                        {"breakdown", cost::to_json(pr.breakdown)},
                        {"peak_bytes", pr.memory.peak_reserved_bytes},
                        {"peak_allocated_bytes", pr.memory.peak_bytes},
                        {"peak_time_s", pr.memory.peak_time_s}});
  }
  return nlohmann::json{
      {"format", "mgt.simulation/1"},
      {"model", graph.info.name},
      {"num_gpus", num_gpus},
      {"plan", ir::to_json(schedule.plan)},
      {"step_time_s", r.step_time_s},
      {"peak_bytes", r.peak_bytes},
      {"breakdown", cost::to_json(r.breakdown)},
      {"memory",
       {{"program", schedule.programs[r.peak_program].name},
        {"peak_bytes", mem.peak_reserved_bytes},
        {"peak_allocated_bytes", mem.peak_bytes},
        {"peak_time_s", mem.peak_time_s},
        {"by_kind", by_kind},
        {"largest_live", largest_live},
        {"overhead_bytes", mem.peak_reserved_bytes - mem.peak_bytes}}},
      {"programs", programs},
      {"instructions", instructions},
      {"analytic", {{"step_time_s", analytic.step_time_s}, {"peak_bytes", analytic.memory.peak_bytes}}}};
}

}  // namespace

int run_simulate(const ir::Graph& graph, const ir::ClusterSpec& cluster, const ir::Plan& plan,
                 const cost::TrainingSettings& settings, int64_t num_gpus, const std::string& trace_path,
                 const std::string& svg_path, bool json) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const ir::Schedule schedule = plan::lower_to_schedule(graph, plan, settings, num_gpus, cluster);
  ir::verify_or_throw(schedule, "lowered schedule");
  const auto t1 = clock::now();
  const cost::Simulator simulator(graph, cluster, settings);
  const cost::SimulationResult r = simulator.simulate(schedule);
  const auto t2 = clock::now();
  const cost::Estimator estimator(graph, cluster, num_gpus, settings);
  const cost::Estimate analytic = estimator.estimate(plan);
  // Out of range (a NaN or infinite time from an absurd cluster) is refused, as by estimate.
  if (auto why = plan::estimate_out_of_range(analytic)) throw ir::InputError(cluster.name, "", "analytic " + *why);
  if (!std::isfinite(r.step_time_s) || !(r.step_time_s > 0))
    throw ir::InputError(cluster.name, "", "simulated step time " + std::to_string(r.step_time_s) + " s is out of range",
                         "check the cluster's bandwidths, latencies and peak FLOP/s");

  if (!trace_path.empty()) write_file(trace_path, "--trace", cost::to_chrome_trace(schedule, r).dump());
  if (!svg_path.empty()) write_file(svg_path, "--svg", cost::render_svg(schedule, r));

  const cost::ProgramMemory& mem = r.programs.at(r.peak_program).memory;
  const int64_t hbm = cluster.gpu.hbm_bytes;
  int64_t instructions = 0;
  for (const auto& p : schedule.programs) instructions += int64_t(p.instructions.size());

  if (json) {
    std::cout << simulation_json(graph, schedule, r, analytic, num_gpus, instructions).dump(2) << "\n";
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
    for (size_t k = 0; k < std::size(kKindNames); ++k) {
      if (mem.peak_by_kind[k] == 0) continue;
      char line[96];
      std::snprintf(line, sizeof line, "  %-28s %10s\n", kKindNames[k], gib(mem.peak_by_kind[k]).c_str());
      o << line;
    }
    char line[96];
    std::snprintf(line, sizeof line, "  %-28s %10s\n", "context, NCCL, fragmentation",
                  gib(mem.peak_reserved_bytes - mem.peak_bytes).c_str());
    o << line;
    if (!mem.peak_live.empty()) {
      o << "largest buffers live then, GiB:";
      for (size_t i = 0; i < mem.peak_live.size() && i < kLargestLive; ++i)
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
