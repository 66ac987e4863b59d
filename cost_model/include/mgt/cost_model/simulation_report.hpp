// mgt.simulation/1: what `mgt-plan simulate ... --json` reports of one simulated step (step time and
// its breakdown, peak memory by kind, per-program totals, the analytic estimate beside them), as a
// struct with its writer and reader (docs/formats.md, docs/simulator.md §6). Breakdowns are written
// with cost::to_json(TimeBreakdown): one spelling per term (kTimeTerms).
//
//   const cost::SimulationReport report = cost::make_simulation_report(graph, schedule, result, analytic, gpus);
//   std::cout << cost::to_json(report).dump(2);   // cost::simulation_report_from_json reads it back
#pragma once

#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/simulator.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/ir/schedule.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mgt::cost {

inline constexpr const char* kSimulationFormat = "mgt.simulation/1";
/// Buffers listed as live at the peak: enough to see what dominates it.
inline constexpr size_t kLargestLiveBuffers = 8;

/// One program (a group of identical ranks) of the schedule.
struct SimulatedProgram {
  std::string name;
  int64_t num_ranks = 0;
  double end_s = 0;
  std::array<double, ir::kNumStreams> busy_s{};  ///< per ir::Stream, keyed by its name
  TimeBreakdown breakdown;
  int64_t peak_bytes = 0;            ///< with the runtime's overhead (ProgramMemory::peak_reserved_bytes)
  int64_t peak_allocated_bytes = 0;  ///< the schedule's Alloc/Free peak (ProgramMemory::peak_bytes)
  double peak_time_s = 0;
};

/// The peak memory of the program with the largest peak. Written with "overhead_bytes" =
/// peak_bytes - peak_allocated_bytes (CUDA context, NCCL buffers, fragmentation).
struct SimulatedPeakMemory {
  std::string program;
  int64_t peak_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  double peak_time_s = 0;
  std::array<int64_t, kNumBufferKinds> by_kind_bytes{};  ///< per ir::BufferKind, keyed by its name
  std::vector<LiveBuffer> largest_live;                  ///< at most kLargestLiveBuffers, largest first
};

struct SimulationReport {
  std::string model;  ///< the graph's name
  int64_t num_gpus = 0;
  ir::Plan plan;  ///< as lowered (resolved)
  double step_time_s = 0;
  int64_t peak_bytes = 0;
  TimeBreakdown breakdown;  ///< of the program that ends last
  SimulatedPeakMemory memory;
  std::vector<SimulatedProgram> programs;
  int64_t instructions = 0;  ///< over all programs
  double analytic_step_time_s = 0;  ///< the estimator's, for the same plan ("analytic": {"step_time_s"})
  int64_t analytic_peak_bytes = 0;  ///< ("analytic": {"peak_bytes"})
};

/// The report of `result`, the simulation of `schedule` for `graph`, beside the analytic estimate.
SimulationReport make_simulation_report(const ir::Graph& graph, const ir::Schedule& schedule,
                                        const SimulationResult& result, const Estimate& analytic, int64_t num_gpus);

/// `"format": "mgt.simulation/1"` and every field.
nlohmann::json to_json(const SimulationReport& report);
/// Reads what to_json writes; throws ir::InputError naming `source` (the file and the object's path in
/// it) and the field that is missing, of the wrong type or inconsistent, or another "format".
SimulationReport simulation_report_from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace mgt::cost
