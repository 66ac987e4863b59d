// The discrete-event simulator: times an ir::Schedule instruction by instruction with the same per-op
// and per-collective prices the analytic estimator sums (docs/simulator.md), and reports the step
// time, its breakdown, per-stream busy time and the memory timeline. Also the Chrome trace and the
// SVG report built from a simulation (trace.cpp, timeline_svg.cpp).
//
//   cost::Simulator sim(graph, cluster, settings);       // default_cost_params(cluster.gpu)
//   cost::SimulationResult r = sim.simulate(schedule);    // throws InputError on a stuck schedule
//   std::ofstream("step.json") << cost::to_chrome_trace(schedule, r).dump();
#pragma once

#include "mgt/cost_model/cost_params.hpp"
#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/schedule.hpp"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mgt::cost {

/// One executed instruction: the record the simulator writes and the runtime will write too
/// (STYLE.md 8.3), so a predicted and a measured step can be laid side by side. It lives here until
/// the runtime needs it; then it moves to ir/ unchanged. Times in seconds from the step's start.
struct TimelineRecord {
  int64_t program = 0;           ///< index into Schedule::programs
  ir::Stream stream = ir::Stream::compute;
  ir::InstrId instruction = 0;
  double start_s = 0;
  double end_s = 0;
  bool operator==(const TimelineRecord&) const = default;
};
using Timeline = std::vector<TimelineRecord>;

inline constexpr int kNumBufferKinds = 8;  ///< ir::BufferKind values

/// Memory in use after a change (an Alloc or Free), per program.
struct MemoryPoint {
  double time_s = 0;
  int64_t bytes = 0;
  bool operator==(const MemoryPoint&) const = default;
};

struct LiveBuffer {
  std::string name;
  int64_t bytes = 0;
  ir::BufferKind kind{};
};

struct ProgramMemory {
  std::vector<MemoryPoint> timeline;  ///< one point per Alloc/Free, in time order
  int64_t peak_bytes = 0;             ///< largest sum of live buffers (Alloc/Free only)
  double peak_time_s = 0;             ///< first time the peak is reached
  std::array<int64_t, kNumBufferKinds> peak_by_kind{};  ///< live bytes per ir::BufferKind at the peak
  /// The buffers live at the peak, largest first (what to shrink to lower it).
  std::vector<LiveBuffer> peak_live;
  /// What the GPU must hold: peak_bytes + cuda_context_bytes + nccl_buffer_bytes +
  /// allocator_fragmentation x peak_bytes (the estimator's runtime overhead, docs/cost-model.md §4.4).
  int64_t peak_reserved_bytes = 0;
};

struct ProgramResult {
  double end_s = 0;                            ///< when its last instruction finishes
  std::array<double, ir::kNumStreams> busy_s{};  ///< per ir::Stream: sum of instruction durations
  /// Where the step time goes on this program's compute stream (sums to the step time, see
  /// docs/simulator.md §3): compute-stream work by kind, idle time by what it waited for.
  TimeBreakdown breakdown;
  ProgramMemory memory;
};

struct SimulationResult {
  double makespan_s = 0;   ///< latest end over all programs
  double step_time_s = 0;  ///< makespan + fixed per-step and per-micro-batch overheads
  int64_t micro_batches = 0;  ///< distinct micro-batch indices seen in Compute instructions
  size_t critical_program = 0;  ///< the program that ends last (lowest index on ties)
  size_t peak_program = 0;      ///< the program with the largest peak_reserved_bytes
  TimeBreakdown breakdown;      ///< of the critical program
  int64_t peak_bytes = 0;       ///< peak_reserved_bytes of peak_program (comparable to Estimate::memory.peak_bytes)
  std::vector<ProgramResult> programs;
  Timeline timeline;            ///< every instruction, by program then instruction id
};

/// Prices and runs schedules for one model, cluster and training setting. simulate() is const and
/// builds its own per-schedule state, so one Simulator can serve several schedules (not concurrently:
/// it memoises op costs).
class Simulator {
 public:
  Simulator(const ir::Graph& graph, const ir::ClusterSpec& cluster, TrainingSettings settings);
  Simulator(const ir::Graph& graph, const ir::ClusterSpec& cluster, TrainingSettings settings, CostParams params);
  ~Simulator();
  Simulator(Simulator&&) noexcept;

  /// Runs `schedule` (which should pass ir::verify). Throws ir::InputError when an instruction
  /// names a block or op the graph lacks, or when the run gets stuck (a deadlock verify would report).
  SimulationResult simulate(const ir::Schedule& schedule) const;

  const CostParams& params() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Chrome trace-event JSON (opens in Perfetto / chrome://tracing): one process per program with a
/// process_name, one thread per stream with a thread_name, a complete ("ph":"X") event per
/// instruction that takes time, ts/dur in microseconds, args with bytes and FLOPs; batched
/// send/recv that run together are one event. A memory counter ("ph":"C") per program.
nlohmann::json to_chrome_trace(const ir::Schedule& schedule, const SimulationResult& result);

/// A self-contained SVG (for a slide): the step breakdown as one stacked bar per program (up to 128;
/// past that a note on the chart says how many are drawn), a legend naming the colours and whose
/// time its values are (the critical program's), and memory in use over time per program (up to 8,
/// with a note naming those drawn when there are more) with both peaks marked and labelled: in use
/// (allocations) and reserved (the title's number). `gpu_memory_bytes` > 0 draws the GPU's capacity
/// as a labelled level, with the y axis extended to include it; 0 draws none.
std::string render_svg(const ir::Schedule& schedule, const SimulationResult& result, int64_t gpu_memory_bytes = 0);

/// Short event name, e.g. "fwd q_proj layer3 mb2", "all_gather w[l3] dp_shard", "send act[mb0] pp+1".
std::string instruction_label(const ir::Instruction& instr);

}  // namespace mgt::cost
