// The one-page SVG report of a simulation (docs/simulator.md §5): the step breakdown as a stacked bar
// per program, the legend naming whose time it shows, and memory over time per program with the GPU's
// capacity and both peaks (in use, reserved) drawn and labelled. Plain SVG 1.1 with inline styles, so
// it renders the same in a browser, rsvg-convert and a slide deck. One function per part of the page.
#include "mgt/cost_model/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iterator>
#include <sstream>

namespace mgt::cost {

namespace {

constexpr double kWidth = 1200, kLeft = 150, kRight = 30, kPlotWidth = kWidth - kLeft - kRight;
// Every program gets a bar up to kMaxBars (thinner bars past kThickBars); memory lines stay readable
// only for a few programs. Programs left out are named in a note on the chart, never dropped silently.
constexpr size_t kMaxBars = 128, kThickBars = 32, kMaxLines = 8;
constexpr double kMemHeight = 300;
constexpr size_t kLegendColumns = 3;  // of the memory lines' legend

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A "nice" tick spacing (1, 2 or 5 x 10^k) giving about `target` ticks over [0, max].
double tick_step(double max, int target) {
  if (max <= 0) return 1;
  const double raw = max / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

// One colour per kTimeTerms entry, in its order.
constexpr const char* kTermColours[] = {"#4C72B0", "#8172B2", "#DD8452", "#C44E52", "#55A868", "#2A9D8F",
                                        "#937860", "#DA8BC3", "#D0D0D0", "#7F7F7F", "#E5C453"};
static_assert(std::size(kTermColours) == std::size(kTimeTerms), "one colour per time term");
constexpr const char* kLineColours[] = {"#1F77B4", "#FF7F0E", "#2CA02C", "#D62728",
                                        "#9467BD", "#8C564B", "#E377C2", "#17BECF"};

// Which programs get drawn: all when at most `limit`; else the `must` ones, the first and the last,
// and then the midpoint of the widest gap between those chosen, until there are `limit`.
std::vector<size_t> pick(size_t count, size_t limit, std::vector<size_t> must) {
  std::vector<size_t> out;
  if (count <= limit) {
    for (size_t p = 0; p < count; ++p) out.push_back(p);
    return out;
  }
  out = must;
  out.push_back(0);
  out.push_back(count - 1);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  while (out.size() < limit) {
    size_t widest = 0;
    for (size_t i = 1; i < out.size(); ++i)
      if (out[i] - out[i - 1] > out[widest + 1] - out[widest]) widest = i - 1;
    out.insert(out.begin() + std::ptrdiff_t(widest) + 1, (out[widest] + out[widest + 1]) / 2);
  }
  return out;
}

std::string program_name(const ir::Schedule& s, size_t p) {
  std::string name = p < s.programs.size() ? s.programs[p].name : "program " + std::to_string(p);
  return name.size() > 18 ? name.substr(0, 17) + "~" : name;
}

// "stage0, stage9, ..., stage63": the programs drawn, for the note that says which are left out.
std::string name_list(const ir::Schedule& s, const std::vector<size_t>& programs) {
  std::string out;
  for (size_t i = 0; i < programs.size(); ++i) out += (i ? ", " : "") + program_name(s, programs[i]);
  return out;
}

// Everything the parts of the page share: inputs, units, the programs drawn and where each part sits.
struct Page {
  Page(const ir::Schedule& s, const SimulationResult& r, int64_t capacity_bytes)
      : schedule(s), result(r), gpu_memory_bytes(std::max<int64_t>(0, capacity_bytes)) {}
  const ir::Schedule& schedule;
  const SimulationResult& result;
  int64_t gpu_memory_bytes;
  // Units that keep the tick labels short: s, ms or us; GiB, MiB, KiB or bytes.
  double time_scale = 1;  // seconds -> the time unit
  const char* time_unit = "s";
  double byte_unit = 1;  // bytes per byte-unit
  const char* byte_name = "bytes";
  std::vector<size_t> bars, lines;
  double bar_h = 18, bar_gap = 6, bar_font = 12;
  double bars_top = 0, bars_h = 0, bars_note_h = 0, legend_top = 0, mem_top = 0, lines_top = 0, height = 0;
  double max_total_s = 1;  // the bar chart's x range
  double ymax = 1;         // the memory chart's y range, in byte-units
  double tmax = 1;         // the memory chart's x range, in time units

  double bar_x(double seconds) const { return kLeft + seconds / max_total_s * kPlotWidth; }
  double mem_x(double seconds) const { return kLeft + seconds * time_scale / tmax * kPlotWidth; }
  double mem_y(double bytes) const { return mem_top + kMemHeight - bytes / byte_unit / ymax * kMemHeight; }
};

void choose_units(Page& pg) {
  const SimulationResult& r = pg.result;
  pg.time_scale = r.step_time_s >= 10.0 ? 1.0 : r.step_time_s >= 1e-2 ? 1e3 : 1e6;
  pg.time_unit = pg.time_scale == 1.0 ? "s" : pg.time_scale == 1e3 ? "ms" : "us";
  int64_t most_bytes = pg.gpu_memory_bytes;
  for (const auto& pr : r.programs) most_bytes = std::max(most_bytes, pr.memory.peak_reserved_bytes);
  constexpr double kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  pg.byte_unit = double(most_bytes) >= kGiB ? kGiB : double(most_bytes) >= kMiB ? kMiB : double(most_bytes) >= kKiB ? kKiB : 1;
  pg.byte_name = pg.byte_unit == kGiB ? "GiB" : pg.byte_unit == kMiB ? "MiB" : pg.byte_unit == kKiB ? "KiB" : "bytes";
}

// Ranges of both charts: the bars' longest total; memory up to the largest of the lines drawn, the
// reserved peak and the GPU's capacity, so that every marked level lies on the chart.
void choose_ranges(Page& pg) {
  const SimulationResult& r = pg.result;
  pg.max_total_s = r.step_time_s;
  for (size_t p : pg.bars) {
    double total = 0;
    for (const auto& term : kTimeTerms) total += r.programs[p].breakdown.*term.field;
    pg.max_total_s = std::max(pg.max_total_s, total);
  }
  if (pg.max_total_s <= 0) pg.max_total_s = 1;
  double max_bytes = double(pg.gpu_memory_bytes);
  for (size_t p : pg.lines) max_bytes = std::max(max_bytes, double(r.programs[p].memory.peak_bytes));
  if (r.peak_program < r.programs.size())
    max_bytes = std::max(max_bytes, double(r.programs[r.peak_program].memory.peak_reserved_bytes));
  if (max_bytes <= 0) max_bytes = pg.byte_unit;
  const double ystep = tick_step(max_bytes / pg.byte_unit, 5);
  pg.ymax = std::ceil(max_bytes / pg.byte_unit / ystep) * ystep;
  pg.tmax = std::max(r.makespan_s, 1e-12) * pg.time_scale;
}

void lay_out(Page& pg) {
  const size_t np = pg.result.programs.size();
  pg.bars = pick(np, kMaxBars, {pg.result.critical_program, pg.result.peak_program});
  pg.lines = pick(np, kMaxLines, {pg.result.peak_program, pg.result.critical_program});
  if (pg.bars.size() > kThickBars) pg.bar_h = 10, pg.bar_gap = 3, pg.bar_font = 9;
  pg.bars_top = 70 + 30;
  pg.bars_h = double(pg.bars.size()) * (pg.bar_h + pg.bar_gap);
  pg.bars_note_h = pg.bars.size() < np ? 20 : 0;
  pg.legend_top = pg.bars_top + pg.bars_h + 50 + pg.bars_note_h;
  pg.mem_top = pg.legend_top + 22 + 2 * 22 + 50 + (pg.lines.size() < np ? 20 : 0);
  pg.lines_top = pg.mem_top + kMemHeight + 50;
  pg.height = pg.lines_top + 22 * double((pg.lines.size() + kLegendColumns - 1) / kLegendColumns) + 20;
}

void draw_title(std::ostream& o, const Page& pg) {
  const SimulationResult& r = pg.result;
  const size_t np = r.programs.size();
  o << "<text x=\"20\" y=\"30\" font-size=\"20\" font-weight=\"bold\">" << escape(pg.schedule.model) << " on "
    << pg.schedule.num_gpus << " GPUs: step " << fmt("%.4g", r.step_time_s * pg.time_scale) << " " << pg.time_unit
    << ", peak memory " << fmt("%.2f", double(r.peak_bytes) / pg.byte_unit) << " " << pg.byte_name
    << " reserved per GPU";
  if (r.peak_program < np)
    o << " (" << fmt("%.2f", double(r.programs[r.peak_program].memory.peak_bytes) / pg.byte_unit) << " in use)";
  o << "</text>\n";
  o << "<text x=\"20\" y=\"54\" font-size=\"13\" fill=\"#444\">plan " << escape(ir::to_string(pg.schedule.plan))
    << " · simulated schedule, " << np << " program" << (np == 1 ? "" : "s") << "</text>\n";
}

// One stacked bar per program drawn, critical program starred; then the time axis.
void draw_breakdown_bars(std::ostream& o, const Page& pg) {
  const SimulationResult& r = pg.result;
  o << "<text x=\"20\" y=\"" << pg.bars_top - 12 << "\" font-size=\"15\" font-weight=\"bold\">Step time breakdown "
       "per program (compute stream)</text>\n";
  for (size_t k = 0; k < pg.bars.size(); ++k) {
    const size_t p = pg.bars[k];
    const double y = pg.bars_top + double(k) * (pg.bar_h + pg.bar_gap);
    std::string label = program_name(pg.schedule, p);
    if (p == r.critical_program) label += " *";
    o << "<text class=\"bar-label\" x=\"" << kLeft - 8 << "\" y=\"" << y + pg.bar_h - 3 << "\" font-size=\""
      << pg.bar_font << "\" text-anchor=\"end\">" << escape(label) << "</text>\n";
    double x = kLeft;
    for (size_t t = 0; t < std::size(kTimeTerms); ++t) {
      const double seconds = r.programs[p].breakdown.*kTimeTerms[t].field;
      const double w = pg.bar_x(seconds) - kLeft;
      if (w <= 0) continue;
      o << "<rect x=\"" << fmt("%.2f", x) << "\" y=\"" << y << "\" width=\"" << fmt("%.2f", w) << "\" height=\""
        << pg.bar_h << "\" fill=\"" << kTermColours[t] << "\"><title>" << kTimeTerms[t].label << ": "
        << fmt("%.4g", seconds * pg.time_scale) << " " << pg.time_unit << "</title></rect>\n";
      x += w;
    }
  }
  const double axis_y = pg.bars_top + pg.bars_h, max_units = pg.max_total_s * pg.time_scale;
  const double step = tick_step(max_units, 8);
  o << "<line x1=\"" << kLeft << "\" y1=\"" << axis_y << "\" x2=\"" << kLeft + kPlotWidth << "\" y2=\"" << axis_y
    << "\" stroke=\"#333\"/>\n";
  for (double v = 0; v <= max_units * 1.0001; v += step) {
    const double x = pg.bar_x(v / pg.time_scale);
    o << "<line x1=\"" << x << "\" y1=\"" << axis_y << "\" x2=\"" << x << "\" y2=\"" << axis_y + 5
      << "\" stroke=\"#333\"/><text x=\"" << x << "\" y=\"" << axis_y + 18 << "\" font-size=\"11\" text-anchor=\"middle\">"
      << fmt("%g", v) << "</text>\n";
  }
  o << "<text x=\"" << kLeft + kPlotWidth / 2 << "\" y=\"" << axis_y + 34
    << "\" font-size=\"12\" text-anchor=\"middle\">time per step (" << pg.time_unit
    << "); * = critical program (ends last)</text>\n";
  if (pg.bars.size() < r.programs.size())
    o << "<text class=\"grouping-note\" x=\"20\" y=\"" << axis_y + 54 << "\" font-size=\"12\" fill=\"#A00\">bars for "
      << pg.bars.size() << " of " << r.programs.size()
      << " programs (evenly spaced, with the critical and peak-memory ones); every program is in the Chrome trace "
         "(--trace)</text>\n";
}

// The colours' legend, with the critical program's time per term, captioned with whose time it is.
void draw_breakdown_legend(std::ostream& o, const Page& pg) {
  const SimulationResult& r = pg.result;
  const size_t crit = r.critical_program;
  const int64_t ranks = crit < pg.schedule.programs.size() ? pg.schedule.programs[crit].num_ranks : 1;
  o << "<text id=\"legend-caption\" x=\"20\" y=\"" << pg.legend_top + 10 << "\" font-size=\"12\" font-weight=\"bold\">"
    << "Time per term of " << escape(program_name(pg.schedule, crit)) << " (the critical program, ends last; one GPU of its "
    << ranks << " rank" << (ranks == 1 ? "" : "s") << "), " << pg.time_unit << ":</text>\n";
  for (size_t i = 0; i < std::size(kTimeTerms); ++i) {
    const double x = 20 + double(i % 6) * 195, y = pg.legend_top + 22 + double(i / 6) * 22;
    const double value = r.breakdown.*kTimeTerms[i].field * pg.time_scale;
    o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"14\" height=\"14\" fill=\"" << kTermColours[i]
      << "\"/><text x=\"" << x + 20 << "\" y=\"" << y + 12 << "\" font-size=\"12\">" << kTimeTerms[i].label << " "
      << fmt("%.3g", value) << " " << pg.time_unit << "</text>\n";
  }
}

// The memory chart's frame, y ticks (class mem-ytick, value in the label), time ticks and axis titles.
void draw_memory_axes(std::ostream& o, const Page& pg) {
  o << "<text x=\"20\" y=\"" << pg.mem_top - 14 << "\" font-size=\"15\" font-weight=\"bold\">Memory per GPU over "
       "the step (lines: in use, the schedule's allocations; reserved adds CUDA context, NCCL, fragmentation)</text>\n";
  o << "<rect id=\"memory-plot\" x=\"" << kLeft << "\" y=\"" << pg.mem_top << "\" width=\"" << kPlotWidth
    << "\" height=\"" << kMemHeight << "\" fill=\"none\" stroke=\"#333\"/>\n";
  const double ystep = tick_step(pg.ymax, 5);
  for (double v = 0; v <= pg.ymax * 1.0001; v += ystep) {
    const double y = pg.mem_y(v * pg.byte_unit);
    o << "<line class=\"mem-ytick\" x1=\"" << kLeft - 5 << "\" y1=\"" << y << "\" x2=\"" << kLeft + kPlotWidth
      << "\" y2=\"" << y << "\" stroke=\"#E0E0E0\"/><text class=\"mem-ytick-label\" x=\"" << kLeft - 8 << "\" y=\""
      << y + 4 << "\" font-size=\"11\" text-anchor=\"end\">" << fmt("%g", v) << "</text>\n";
  }
  const double tstep = tick_step(pg.tmax, 8), bottom = pg.mem_top + kMemHeight;
  for (double v = 0; v <= pg.tmax * 1.0001; v += tstep) {
    const double x = kLeft + v / pg.tmax * kPlotWidth;
    o << "<line x1=\"" << x << "\" y1=\"" << bottom << "\" x2=\"" << x << "\" y2=\"" << bottom + 5
      << "\" stroke=\"#333\"/><text x=\"" << x << "\" y=\"" << bottom + 18 << "\" font-size=\"11\" text-anchor=\"middle\">"
      << fmt("%g", v) << "</text>\n";
  }
  o << "<text x=\"" << kLeft + kPlotWidth / 2 << "\" y=\"" << bottom + 36
    << "\" font-size=\"12\" text-anchor=\"middle\">time in step (" << pg.time_unit << ")</text>\n";
  o << "<text transform=\"translate(" << kLeft - 55 << "," << pg.mem_top + kMemHeight / 2
    << ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">memory per GPU (" << pg.byte_name << ")</text>\n";
}

// A step line, one point per pixel column (the column's largest value, so peaks survive).
std::string memory_path(const Page& pg, const std::vector<MemoryPoint>& tl) {
  std::ostringstream path;
  double last_col = -1, col_max = 0, col_last = 0;
  path << "M" << fmt("%.1f", kLeft) << "," << fmt("%.1f", pg.mem_y(0));
  for (size_t i = 0; i <= tl.size(); ++i) {
    const double col = i < tl.size() ? std::floor(pg.mem_x(tl[i].time_s)) : -2;
    if (col != last_col && last_col >= 0) {
      path << "H" << fmt("%.1f", last_col) << "V" << fmt("%.1f", pg.mem_y(col_max));
      if (col_last != col_max) path << "V" << fmt("%.1f", pg.mem_y(col_last));
      col_max = 0;
    }
    if (i == tl.size()) break;
    col_max = std::max(col_max, double(tl[i].bytes));
    col_last = double(tl[i].bytes);
    last_col = col;
  }
  path << "H" << fmt("%.1f", kLeft + kPlotWidth);
  return path.str();
}

// One line per program drawn, its legend entry, and the note naming the programs drawn when not all are.
void draw_memory_lines(std::ostream& o, const Page& pg) {
  const SimulationResult& r = pg.result;
  for (size_t k = 0; k < pg.lines.size(); ++k) {
    const size_t p = pg.lines[k];
    const auto& m = r.programs[p].memory;
    const char* colour = kLineColours[k % std::size(kLineColours)];
    o << "<path d=\"" << memory_path(pg, m.timeline) << "\" fill=\"none\" stroke=\"" << colour << "\" stroke-width=\""
      << (p == r.peak_program ? 2.2 : 1.3) << "\"/>\n";
    const double lx = 20 + double(k % kLegendColumns) * 390, ly = pg.lines_top + double(k / kLegendColumns) * 22;
    o << "<line x1=\"" << lx << "\" y1=\"" << ly + 7 << "\" x2=\"" << lx + 18 << "\" y2=\"" << ly + 7 << "\" stroke=\""
      << colour << "\" stroke-width=\"2.5\"/><text x=\"" << lx + 24 << "\" y=\"" << ly + 11 << "\" font-size=\"12\">"
      << escape(program_name(pg.schedule, p)) << ": peak in use " << fmt("%.2f", double(m.peak_bytes) / pg.byte_unit)
      << ", reserved " << fmt("%.2f", double(m.peak_reserved_bytes) / pg.byte_unit) << " " << pg.byte_name << "</text>\n";
  }
  if (pg.lines.size() < r.programs.size())
    o << "<text class=\"grouping-note\" x=\"20\" y=\"" << pg.mem_top - 34 << "\" font-size=\"12\" fill=\"#A00\">memory "
      << "lines for " << pg.lines.size() << " of " << r.programs.size() << " programs: "
      << escape(name_list(pg.schedule, pg.lines)) << " (peak-memory, critical and evenly spaced ones)</text>\n";
}

// A dashed level across the memory chart with its label at the right end.
void draw_level(std::ostream& o, const Page& pg, const char* id, double bytes, const char* colour, const std::string& label) {
  const double y = pg.mem_y(bytes);
  const double text_y = y - 5 < pg.mem_top + 14 ? y + 15 : y - 5;  // inside the plot, clear of its title
  o << "<line id=\"" << id << "\" x1=\"" << kLeft << "\" y1=\"" << y << "\" x2=\"" << kLeft + kPlotWidth << "\" y2=\""
    << y << "\" stroke=\"" << colour << "\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/><text id=\"" << id
    << "-label\" x=\"" << kLeft + kPlotWidth - 6 << "\" y=\"" << text_y << "\" font-size=\"12\" fill=\"" << colour
    << "\" text-anchor=\"end\">" << escape(label) << "</text>\n";
}

// The GPU's capacity, the reserved peak (the title's number) and the in-use peak, each labelled.
void draw_memory_marks(std::ostream& o, const Page& pg) {
  const SimulationResult& r = pg.result;
  const auto gb = [&](int64_t bytes) { return fmt("%.2f", double(bytes) / pg.byte_unit) + " " + pg.byte_name; };
  if (pg.gpu_memory_bytes > 0)
    draw_level(o, pg, "capacity", double(pg.gpu_memory_bytes), "#C00", "GPU memory capacity " + gb(pg.gpu_memory_bytes));
  if (r.peak_program >= r.programs.size()) return;
  const ProgramMemory& m = r.programs[r.peak_program].memory;
  if (m.peak_reserved_bytes > 0)
    draw_level(o, pg, "peak-reserved", double(m.peak_reserved_bytes), "#555",
               "peak reserved " + gb(m.peak_reserved_bytes) + " (" + program_name(pg.schedule, r.peak_program) +
                   ": in use + context, NCCL, fragmentation)");
  if (m.peak_bytes <= 0) return;
  const double x = pg.mem_x(m.peak_time_s), y = pg.mem_y(double(m.peak_bytes));
  const double text_y = y + 16 <= pg.mem_top + kMemHeight - 4 ? y + 16 : y - 8;  // below the mark, clear of the levels
  const bool text_left = x + 8 + 260 > kLeft + kPlotWidth;  // the label's ~260 px would leave the plot
  o << "<circle id=\"peak-in-use\" cx=\"" << x << "\" cy=\"" << y << "\" r=\"4.5\" fill=\"none\" stroke=\"#C00\" "
    << "stroke-width=\"2\"/><text x=\"" << (text_left ? x - 8 : x + 8) << "\" y=\"" << text_y
    << "\" font-size=\"12\" fill=\"#C00\"" << (text_left ? " text-anchor=\"end\"" : "") << ">peak in use " << gb(m.peak_bytes) << " at "
    << fmt("%.4g", m.peak_time_s * pg.time_scale) << " " << pg.time_unit << "</text>\n";
}

}  // namespace

std::string render_svg(const ir::Schedule& schedule, const SimulationResult& result, int64_t gpu_memory_bytes) {
  Page pg(schedule, result, gpu_memory_bytes);
  choose_units(pg);
  lay_out(pg);
  choose_ranges(pg);
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << pg.height << "\" viewBox=\"0 0 "
    << kWidth << " " << pg.height << "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  draw_title(o, pg);
  draw_breakdown_bars(o, pg);
  draw_breakdown_legend(o, pg);
  draw_memory_axes(o, pg);
  draw_memory_lines(o, pg);
  draw_memory_marks(o, pg);
  o << "</svg>\n";
  return o.str();
}

}  // namespace mgt::cost
