// Chrome trace-event JSON from a simulation (docs/simulator.md §4): Perfetto and chrome://tracing open
// it. Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
// (complete events "X", metadata "M", counters "C"; times in microseconds).
#include "mgt/cost_model/simulator.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace mgt::cost {

namespace {

bool batched(const ir::Instruction& instr) {
  if (const auto* s = std::get_if<ir::Send>(&instr.op)) return s->batch_with_next;
  if (const auto* r = std::get_if<ir::Recv>(&instr.op)) return r->batch_with_next;
  return false;
}

nlohmann::json args_of(const ir::Instruction& instr) {
  nlohmann::json args{{"id", instr.id}};
  if (const auto* c = std::get_if<ir::Compute>(&instr.op)) {
    args["block"] = c->block;
    args["flops"] = c->flops;
    args["bytes"] = c->bytes;
  } else if (const auto* c = std::get_if<ir::Collective>(&instr.op)) {
    args["bytes"] = c->bytes;
    args["group_size"] = c->group_size;
    args["nodes"] = c->nodes;
    args["dtype"] = ir::to_string(c->dtype);
  } else if (const auto* o = std::get_if<ir::OptimizerStep>(&instr.op)) {
    args["bytes"] = o->bytes;
    args["param_elements"] = o->param_elements;
  } else {
    args["bytes"] = ir::moved_bytes(instr);
  }
  return args;
}

}  // namespace

nlohmann::json to_chrome_trace(const ir::Schedule& schedule, const SimulationResult& result) {
  constexpr double kUs = 1e6;
  nlohmann::json events = nlohmann::json::array();
  for (size_t p = 0; p < schedule.programs.size(); ++p) {
    const ir::Program& prog = schedule.programs[p];
    std::string name = prog.name;
    for (const auto& c : prog.coords) name += " " + c.axis + ":" + std::to_string(c.index);
    name += " (" + std::to_string(prog.num_ranks) + (prog.num_ranks == 1 ? " rank)" : " ranks)");
    const int pid = int(p);
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
    for (int s = 0; s < ir::kNumStreams; ++s) {
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", s},
                        {"args", {{"name", ir::to_string(ir::Stream(s))}}}});
      events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", s}, {"args", {{"sort_index", s}}}});
    }
  }

  // Complete events per (program, stream) in start order. Instructions that take no time (alloc,
  // free, wait) are left out; a batch of send/recv that runs as one group is one event.
  std::vector<const TimelineRecord*> records;
  records.reserve(result.timeline.size());
  for (const auto& rec : result.timeline)
    if (rec.end_s > rec.start_s && size_t(rec.program) < schedule.programs.size()) records.push_back(&rec);
  std::stable_sort(records.begin(), records.end(), [](const TimelineRecord* a, const TimelineRecord* b) {
    return std::tie(a->program, a->stream, a->start_s, a->instruction) <
           std::tie(b->program, b->stream, b->start_s, b->instruction);
  });
  for (size_t i = 0; i < records.size();) {
    const TimelineRecord& rec = *records[i];
    const auto& instrs = schedule.programs[size_t(rec.program)].instructions;
    const ir::Instruction& instr = instrs[size_t(rec.instruction)];
    std::string name = instruction_label(instr);
    nlohmann::json args = args_of(instr);
    double end_s = rec.end_s;
    size_t j = i + 1;
    // Merge the rest of a batch: batched send/recv on the same stream that start together.
    bool open = batched(instr);
    while (open && j < records.size() && records[j]->program == rec.program && records[j]->stream == rec.stream &&
           records[j]->start_s == rec.start_s) {
      const ir::Instruction& next = instrs[size_t(records[j]->instruction)];
      name += " + " + instruction_label(next);
      args["bytes"] = args["bytes"].get<int64_t>() + ir::moved_bytes(next);
      end_s = std::max(end_s, records[j]->end_s);
      open = batched(next);
      ++j;
    }
    const double ts = rec.start_s * kUs;
    events.push_back({{"name", name}, {"cat", ir::to_string(rec.stream)}, {"ph", "X"}, {"ts", ts},
                      {"dur", end_s * kUs - ts}, {"pid", int(rec.program)}, {"tid", int(rec.stream)},
                      {"args", std::move(args)}});
    i = j;
  }

  // Memory in use per program, as a counter track.
  for (size_t p = 0; p < result.programs.size() && p < schedule.programs.size(); ++p)
    for (const auto& point : result.programs[p].memory.timeline)
      events.push_back({{"name", "memory"}, {"ph", "C"}, {"ts", point.time_s * kUs}, {"pid", int(p)},
                        {"args", {{"GiB", double(point.bytes) / double(1ll << 30)}}}});

  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"model", schedule.model}, {"plan", ir::to_string(schedule.plan)}, {"num_gpus", schedule.num_gpus},
            {"step_time_s", result.step_time_s}, {"makespan_s", result.makespan_s}, {"peak_bytes", result.peak_bytes}}}};
}

}  // namespace mgt::cost
