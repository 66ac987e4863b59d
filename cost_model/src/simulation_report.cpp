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

// The scalar fields of mgt.simulation/1 and its objects, for the writers and the readers below.
constexpr ir::JsonField<SimulationReport> kReportFields[] = {
    {"model", &SimulationReport::model},       {"num_gpus", &SimulationReport::num_gpus, ir::kPositive},
    {"step_time_s", &SimulationReport::step_time_s}, {"peak_bytes", &SimulationReport::peak_bytes},
    {"instructions", &SimulationReport::instructions}};

constexpr ir::JsonField<SimulationReport> kAnalyticFields[] = {
    {"step_time_s", &SimulationReport::analytic_step_time_s},
    {"peak_bytes", &SimulationReport::analytic_peak_bytes}};

constexpr ir::JsonField<SimulatedProgram> kProgramFields[] = {
    {"name", &SimulatedProgram::name}, {"num_ranks", &SimulatedProgram::num_ranks, ir::kPositive},
    {"end_s", &SimulatedProgram::end_s}, {"peak_bytes", &SimulatedProgram::peak_bytes},
    {"peak_allocated_bytes", &SimulatedProgram::peak_allocated_bytes},
    {"peak_time_s", &SimulatedProgram::peak_time_s}};

constexpr ir::JsonField<SimulatedPeakMemory> kPeakMemoryFields[] = {
    {"program", &SimulatedPeakMemory::program}, {"peak_bytes", &SimulatedPeakMemory::peak_bytes},
    {"peak_allocated_bytes", &SimulatedPeakMemory::peak_allocated_bytes},
    {"peak_time_s", &SimulatedPeakMemory::peak_time_s}};

constexpr ir::JsonField<LiveBuffer> kLiveBufferFields[] = {{"name", &LiveBuffer::name},
                                                           {"bytes", &LiveBuffer::bytes}};

// An array indexed by the enum `E` (ir::Stream, ir::BufferKind) as an object keyed by the enum's names.
template <typename E, typename V, size_t N>
json enum_keyed_to_json(const std::array<V, N>& values) {
  json out = json::object();
  for (size_t i = 0; i < N; ++i) out[ir::to_string(E(i))] = values[i];
  return out;
}

template <typename E, typename V, size_t N>
void enum_keyed_from_json(const json& doc, const std::string& field, const std::string& source,
                          std::array<V, N>& values) {
  const json& obj = ir::require_object(doc, field, source);
  for (size_t i = 0; i < N; ++i)
    ir::read_field(obj, ir::to_string(E(i)), ir::IntRange::nonnegative, source + ": " + field, values[i]);
}

json to_json(const SimulatedProgram& p) {
  json j = {{"busy_s", enum_keyed_to_json<ir::Stream>(p.busy_s)}, {"breakdown", to_json(p.breakdown)}};
  ir::write_fields(p, kProgramFields, j);
  return j;
}

json to_json(const SimulatedPeakMemory& m) {
  json largest_live = json::array();
  for (const LiveBuffer& b : m.largest_live) {
    json buffer = json::object();
    buffer["kind"] = ir::to_string(b.kind);
    ir::write_fields(b, kLiveBufferFields, buffer);
    largest_live.push_back(std::move(buffer));
  }
  json j = {{"by_kind", enum_keyed_to_json<ir::BufferKind>(m.by_kind_bytes)},
            {"largest_live", std::move(largest_live)},
            {"overhead_bytes", m.peak_bytes - m.peak_allocated_bytes}};
  ir::write_fields(m, kPeakMemoryFields, j);
  return j;
}

SimulatedProgram program_from_json(const json& doc, const std::string& source) {
  SimulatedProgram p;
  ir::read_fields(doc, kProgramFields, source, p);
  enum_keyed_from_json<ir::Stream>(doc, "busy_s", source, p.busy_s);
  p.breakdown = time_breakdown_from_json(ir::require_object(doc, "breakdown", source), source + ": breakdown");
  return p;
}

LiveBuffer live_buffer_from_json(const json& doc, const std::string& source) {
  LiveBuffer b;
  ir::read_fields(doc, kLiveBufferFields, source, b);
  const std::string kind = ir::require_string(doc, "kind", source);
  const auto parsed = ir::buffer_kind_from_string(kind);
  if (!parsed) throw ir::InputError(source, "kind", "unknown buffer kind \"" + kind + "\"", "e.g. activations");
  b.kind = *parsed;
  return b;
}

SimulatedPeakMemory peak_memory_from_json(const json& doc, const std::string& source) {
  SimulatedPeakMemory m;
  ir::read_fields(doc, kPeakMemoryFields, source, m);
  enum_keyed_from_json<ir::BufferKind>(doc, "by_kind", source, m.by_kind_bytes);
  const json& live = ir::require_array(doc, "largest_live", source);
  for (size_t i = 0; i < live.size(); ++i)
    m.largest_live.push_back(live_buffer_from_json(live[i], source + ": largest_live[" + std::to_string(i) + "]"));
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
  json analytic = json::object();
  ir::write_fields(r, kAnalyticFields, analytic);
  json doc = {{"format", kSimulationFormat},
              {"plan", ir::to_json(r.plan)},
              {"breakdown", to_json(r.breakdown)},
              {"memory", to_json(r.memory)},
              {"programs", std::move(programs)},
              {"analytic", std::move(analytic)}};
  ir::write_fields(r, kReportFields, doc);
  return doc;
}

SimulationReport simulation_report_from_json(const json& doc, const std::string& source) {
  ir::require_format(doc, kSimulationFormat, source);
  SimulationReport r;
  ir::read_fields(doc, kReportFields, source, r);
  r.plan = ir::plan_from_json(ir::require_object(doc, "plan", source), source + ": plan");
  r.breakdown = time_breakdown_from_json(ir::require_object(doc, "breakdown", source), source + ": breakdown");
  r.memory = peak_memory_from_json(ir::require_object(doc, "memory", source), source + ": memory");
  const json& programs = ir::require_array(doc, "programs", source);
  for (size_t i = 0; i < programs.size(); ++i)
    r.programs.push_back(program_from_json(programs[i], source + ": programs[" + std::to_string(i) + "]"));
  ir::read_fields(ir::require_object(doc, "analytic", source), kAnalyticFields, source + ": analytic", r);
  return r;
}

}  // namespace mgt::cost
