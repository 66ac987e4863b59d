// mgt.simulation/1 <-> SimulationReport (simulation_report.hpp; docs/formats.md).
#include "mgt/cost_model/simulation_report.hpp"

#include "mgt/cost_model/breakdown_json.hpp"
#include "mgt/ir/json_fields.hpp"

namespace mgt::cost {

using json = nlohmann::json;

SimulationReport make_simulation_report(const ir::Graph& graph, const ir::Schedule& schedule,
                                        const SimulationResult& r, const Estimate& analytic, int64_t num_gpus) {
  SimulationReport report;
  report.model = graph.info.name;
  report.num_gpus = num_gpus;
  report.plan = schedule.plan;
  report.step_time_s = r.step_time_s;
  report.peak_bytes = r.peak_bytes;
  report.breakdown = r.breakdown;
  const ProgramMemory& mem = r.programs.at(r.peak_program).memory;
  report.memory = {schedule.programs.at(r.peak_program).name, mem.peak_reserved_bytes, mem.peak_bytes,
                   mem.peak_time_s, mem.peak_by_kind, {}};
  for (size_t i = 0; i < mem.peak_live.size() && i < kLargestLiveBuffers; ++i)
    report.memory.largest_live.push_back(mem.peak_live[i]);
  for (size_t p = 0; p < r.programs.size(); ++p) {
    const ProgramResult& pr = r.programs[p];
    report.programs.push_back({schedule.programs[p].name, schedule.programs[p].num_ranks, pr.end_s, pr.busy_s,
                               pr.breakdown, pr.memory.peak_reserved_bytes, pr.memory.peak_bytes,
                               pr.memory.peak_time_s});
  }
  for (const auto& p : schedule.programs) report.instructions += int64_t(p.instructions.size());
  report.analytic_step_time_s = analytic.step_time_s;
  report.analytic_peak_bytes = analytic.memory.peak_bytes;
  return report;
}

namespace {

json to_json(const SimulatedProgram& p) {
  json busy = json::object();
  for (int s = 0; s < ir::kNumStreams; ++s) busy[ir::to_string(ir::Stream(s))] = p.busy_s[size_t(s)];
  return {{"name", p.name},
          {"num_ranks", p.num_ranks},
          {"end_s", p.end_s},
          {"busy_s", std::move(busy)},
          {"breakdown", to_json(p.breakdown)},
          {"peak_bytes", p.peak_bytes},
          {"peak_allocated_bytes", p.peak_allocated_bytes},
          {"peak_time_s", p.peak_time_s}};
}

json to_json(const SimulatedPeakMemory& m) {
  json by_kind = json::object();
  for (int k = 0; k < kNumBufferKinds; ++k) by_kind[ir::to_string(ir::BufferKind(k))] = m.by_kind_bytes[size_t(k)];
  json largest_live = json::array();
  for (const LiveBuffer& b : m.largest_live)
    largest_live.push_back({{"name", b.name}, {"bytes", b.bytes}, {"kind", ir::to_string(b.kind)}});
  return {{"program", m.program},
          {"peak_bytes", m.peak_bytes},
          {"peak_allocated_bytes", m.peak_allocated_bytes},
          {"peak_time_s", m.peak_time_s},
          {"by_kind", std::move(by_kind)},
          {"largest_live", std::move(largest_live)},
          {"overhead_bytes", m.peak_bytes - m.peak_allocated_bytes}};
}

SimulatedProgram program_from_json(const json& doc, const std::string& source) {
  SimulatedProgram p;
  p.name = ir::require_string(doc, "name", source);
  p.num_ranks = ir::require_positive_int(doc, "num_ranks", source);
  p.end_s = ir::require_finite_number(doc, "end_s", source);
  const json& busy = ir::require_object(doc, "busy_s", source);
  for (int s = 0; s < ir::kNumStreams; ++s)
    p.busy_s[size_t(s)] = ir::require_finite_number(busy, ir::to_string(ir::Stream(s)), source + ": busy_s");
  p.breakdown = time_breakdown_from_json(ir::require_object(doc, "breakdown", source), source + ": breakdown");
  p.peak_bytes = ir::require_nonnegative_int(doc, "peak_bytes", source);
  p.peak_allocated_bytes = ir::require_nonnegative_int(doc, "peak_allocated_bytes", source);
  p.peak_time_s = ir::require_finite_number(doc, "peak_time_s", source);
  return p;
}

SimulatedPeakMemory peak_memory_from_json(const json& doc, const std::string& source) {
  SimulatedPeakMemory m;
  m.program = ir::require_string(doc, "program", source);
  m.peak_bytes = ir::require_nonnegative_int(doc, "peak_bytes", source);
  m.peak_allocated_bytes = ir::require_nonnegative_int(doc, "peak_allocated_bytes", source);
  m.peak_time_s = ir::require_finite_number(doc, "peak_time_s", source);
  const json& by_kind = ir::require_object(doc, "by_kind", source);
  for (int k = 0; k < kNumBufferKinds; ++k)
    m.by_kind_bytes[size_t(k)] =
        ir::require_nonnegative_int(by_kind, ir::to_string(ir::BufferKind(k)), source + ": by_kind");
  const json& live = ir::require_array(doc, "largest_live", source);
  for (size_t i = 0; i < live.size(); ++i) {
    const std::string where = source + ": largest_live[" + std::to_string(i) + "]";
    LiveBuffer b{ir::require_string(live[i], "name", where), ir::require_nonnegative_int(live[i], "bytes", where), {}};
    const std::string kind = ir::require_string(live[i], "kind", where);
    const auto parsed = ir::buffer_kind_from_string(kind);
    if (!parsed) throw ir::InputError(where, "kind", "unknown buffer kind \"" + kind + "\"", "e.g. activations");
    b.kind = *parsed;
    m.largest_live.push_back(std::move(b));
  }
  const int64_t overhead = ir::require_nonnegative_int(doc, "overhead_bytes", source);
  if (overhead != m.peak_bytes - m.peak_allocated_bytes)
    throw ir::InputError(source, "overhead_bytes",
                         std::to_string(overhead) + " is not peak_bytes - peak_allocated_bytes = " +
                             std::to_string(m.peak_bytes - m.peak_allocated_bytes));
  return m;
}

}  // namespace

json to_json(const SimulationReport& r) {
  json programs = json::array();
  for (const SimulatedProgram& p : r.programs) programs.push_back(to_json(p));
  return {{"format", kSimulationFormat},
          {"model", r.model},
          {"num_gpus", r.num_gpus},
          {"plan", ir::to_json(r.plan)},
          {"step_time_s", r.step_time_s},
          {"peak_bytes", r.peak_bytes},
          {"breakdown", to_json(r.breakdown)},
          {"memory", to_json(r.memory)},
          {"programs", std::move(programs)},
          {"instructions", r.instructions},
          {"analytic", {{"step_time_s", r.analytic_step_time_s}, {"peak_bytes", r.analytic_peak_bytes}}}};
}

SimulationReport simulation_report_from_json(const json& doc, const std::string& source) {
  ir::require_format(doc, kSimulationFormat, source);
  SimulationReport r;
  r.model = ir::require_string(doc, "model", source);
  r.num_gpus = ir::require_positive_int(doc, "num_gpus", source);
  r.plan = ir::plan_from_json(ir::require_object(doc, "plan", source), source + ": plan");
  r.step_time_s = ir::require_finite_number(doc, "step_time_s", source);
  r.peak_bytes = ir::require_nonnegative_int(doc, "peak_bytes", source);
  r.breakdown = time_breakdown_from_json(ir::require_object(doc, "breakdown", source), source + ": breakdown");
  r.memory = peak_memory_from_json(ir::require_object(doc, "memory", source), source + ": memory");
  const json& programs = ir::require_array(doc, "programs", source);
  for (size_t i = 0; i < programs.size(); ++i)
    r.programs.push_back(program_from_json(programs[i], source + ": programs[" + std::to_string(i) + "]"));
  r.instructions = ir::require_nonnegative_int(doc, "instructions", source);
  const json& analytic = ir::require_object(doc, "analytic", source);
  r.analytic_step_time_s = ir::require_finite_number(analytic, "step_time_s", source + ": analytic");
  r.analytic_peak_bytes = ir::require_nonnegative_int(analytic, "peak_bytes", source + ": analytic");
  return r;
}

}  // namespace mgt::cost
