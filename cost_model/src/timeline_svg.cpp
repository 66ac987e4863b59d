// The one-page SVG report of a simulation (docs/simulator.md §5): the step breakdown as a stacked bar
// per program and memory in use over time per program, with units on the axes and a legend. Plain
// SVG 1.1 with inline styles, so it renders the same in a browser, rsvg-convert and a slide deck.
#include "mgt/cost_model/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>

namespace mgt::cost {

namespace {

constexpr double kWidth = 1200, kLeft = 150, kRight = 30, kPlotWidth = kWidth - kLeft - kRight;
constexpr size_t kMaxBars = 32, kMaxLines = 8;

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

// Which programs get drawn: all when few; else evenly spaced ones plus the critical and peak programs.
std::vector<size_t> pick(size_t count, size_t limit, std::vector<size_t> must) {
  std::vector<size_t> out = must;
  if (count <= limit) {
    out.clear();
    for (size_t p = 0; p < count; ++p) out.push_back(p);
    return out;
  }
  for (size_t k = 0; out.size() < limit && k < limit; ++k) out.push_back(k * (count - 1) / (limit - 1));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string program_name(const ir::Schedule& s, size_t p) {
  std::string name = p < s.programs.size() ? s.programs[p].name : "program " + std::to_string(p);
  return name.size() > 18 ? name.substr(0, 17) + "~" : name;
}

}  // namespace

std::string render_svg(const ir::Schedule& schedule, const SimulationResult& result) {
  const size_t np = result.programs.size();
  // Units that keep the tick labels short: s, ms or us; GiB, MiB, KiB or bytes.
  const double unit = result.step_time_s >= 10.0 ? 1.0 : result.step_time_s >= 1e-2 ? 1e3 : 1e6;
  const char* unit_name = unit == 1.0 ? "s" : unit == 1e3 ? "ms" : "us";
  int64_t most_bytes = 0;
  for (const auto& pr : result.programs) most_bytes = std::max(most_bytes, pr.memory.peak_reserved_bytes);
  const double gib = most_bytes >= (1ll << 30) ? double(1ll << 30) : most_bytes >= (1ll << 20) ? double(1ll << 20)
                     : most_bytes >= (1ll << 10) ? 1024.0 : 1.0;
  const char* bytes_name = gib == double(1ll << 30) ? "GiB" : gib == double(1ll << 20) ? "MiB" : gib == 1024.0 ? "KiB" : "bytes";

  const std::vector<size_t> bars = pick(np, kMaxBars, {result.critical_program, result.peak_program});
  const std::vector<size_t> lines = pick(np, kMaxLines, {result.peak_program, result.critical_program});

  // ---- layout ----
  const double bar_h = 18, bar_gap = 6;
  const double title_h = 70;
  const double bars_top = title_h + 30;
  const double bars_h = double(bars.size()) * (bar_h + bar_gap);
  const double legend_top = bars_top + bars_h + 50;
  const double legend_h = 2 * 22;
  const double mem_top = legend_top + legend_h + 50;
  const double mem_h = 300;
  const double lines_legend_top = mem_top + mem_h + 50;
  const double height = lines_legend_top + 22 * double((lines.size() + 3) / 4) + 20;

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << kWidth << " " << height << "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";

  // ---- title ----
  int64_t peak_alloc = 0;
  double peak_time = 0;
  if (result.peak_program < np) {
    peak_alloc = result.programs[result.peak_program].memory.peak_bytes;
    peak_time = result.programs[result.peak_program].memory.peak_time_s;
  }
  o << "<text x=\"20\" y=\"30\" font-size=\"20\" font-weight=\"bold\">" << escape(schedule.model) << " on "
    << schedule.num_gpus << " GPUs: step " << fmt("%.4g", result.step_time_s * unit) << " " << unit_name
    << ", peak memory " << fmt("%.2f", double(result.peak_bytes) / gib) << " " << bytes_name << " per GPU</text>\n";
  o << "<text x=\"20\" y=\"54\" font-size=\"13\" fill=\"#444\">plan " << escape(ir::to_string(schedule.plan))
    << " · simulated schedule, " << np << " program" << (np == 1 ? "" : "s") << "</text>\n";

  // ---- step breakdown: one stacked bar per program ----
  double max_total = result.step_time_s;
  for (size_t p : bars) {
    double total = 0;
    for (const auto& term : kTimeTerms) total += result.programs[p].breakdown.*term.field;
    max_total = std::max(max_total, total);
  }
  if (max_total <= 0) max_total = 1;
  const double xscale = kPlotWidth / (max_total * unit);
  o << "<text x=\"20\" y=\"" << bars_top - 12 << "\" font-size=\"15\" font-weight=\"bold\">Step time breakdown per "
       "program (compute stream)</text>\n";
  for (size_t k = 0; k < bars.size(); ++k) {
    const size_t p = bars[k];
    const double y = bars_top + double(k) * (bar_h + bar_gap);
    std::string label = program_name(schedule, p);
    if (p == result.critical_program) label += " *";
    o << "<text x=\"" << kLeft - 8 << "\" y=\"" << y + bar_h - 4 << "\" font-size=\"12\" text-anchor=\"end\">"
      << escape(label) << "</text>\n";
    double x = kLeft;
    for (size_t k = 0; k < std::size(kTimeTerms); ++k) {
      const auto& term = kTimeTerms[k];
      const double w = result.programs[p].breakdown.*term.field * unit * xscale;
      if (w <= 0) continue;
      o << "<rect x=\"" << fmt("%.2f", x) << "\" y=\"" << y << "\" width=\"" << fmt("%.2f", w) << "\" height=\""
        << bar_h << "\" fill=\"" << kTermColours[k] << "\"><title>" << term.label << ": "
        << fmt("%.4g", result.programs[p].breakdown.*term.field * unit) << " " << unit_name << "</title></rect>\n";
      x += w;
    }
  }
  // x axis
  const double axis_y = bars_top + bars_h;
  const double step = tick_step(max_total * unit, 8);
  o << "<line x1=\"" << kLeft << "\" y1=\"" << axis_y << "\" x2=\"" << kLeft + kPlotWidth << "\" y2=\"" << axis_y
    << "\" stroke=\"#333\"/>\n";
  for (double v = 0; v <= max_total * unit * 1.0001; v += step) {
    const double x = kLeft + v * xscale;
    o << "<line x1=\"" << x << "\" y1=\"" << axis_y << "\" x2=\"" << x << "\" y2=\"" << axis_y + 5
      << "\" stroke=\"#333\"/><text x=\"" << x << "\" y=\"" << axis_y + 18
      << "\" font-size=\"11\" text-anchor=\"middle\">" << fmt("%g", v) << "</text>\n";
  }
  o << "<text x=\"" << kLeft + kPlotWidth / 2 << "\" y=\"" << axis_y + 34
    << "\" font-size=\"12\" text-anchor=\"middle\">time per step (" << unit_name
    << "); * = critical program (ends last)</text>\n";
  // legend
  for (size_t i = 0; i < std::size(kTimeTerms); ++i) {
    const double x = 20 + double(i % 6) * 195, y = legend_top + double(i / 6) * 22;
    const double value = result.breakdown.*kTimeTerms[i].field * unit;
    o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"14\" height=\"14\" fill=\"" << kTermColours[i]
      << "\"/><text x=\"" << x + 20 << "\" y=\"" << y + 12 << "\" font-size=\"12\">" << kTimeTerms[i].label << " "
      << fmt("%.3g", value) << " " << unit_name << "</text>\n";
  }

  // ---- memory over time ----
  double max_bytes = 0;
  for (size_t p : lines) max_bytes = std::max(max_bytes, double(result.programs[p].memory.peak_bytes));
  if (max_bytes <= 0) max_bytes = gib;
  const double ystep = tick_step(max_bytes / gib, 5);
  const double ymax = std::ceil(max_bytes / gib / ystep) * ystep;
  const double tmax = std::max(result.makespan_s, 1e-12) * unit;
  auto mx = [&](double t_s) { return kLeft + t_s * unit / tmax * kPlotWidth; };
  auto my = [&](double bytes) { return mem_top + mem_h - bytes / gib / ymax * mem_h; };
  o << "<text x=\"20\" y=\"" << mem_top - 14 << "\" font-size=\"15\" font-weight=\"bold\">Memory in use per GPU "
       "(allocations of the schedule; reserved adds CUDA context, NCCL buffers, fragmentation)</text>\n";
  o << "<rect x=\"" << kLeft << "\" y=\"" << mem_top << "\" width=\"" << kPlotWidth << "\" height=\"" << mem_h
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (double v = 0; v <= ymax * 1.0001; v += ystep) {
    const double y = my(v * gib);
    o << "<line x1=\"" << kLeft - 5 << "\" y1=\"" << y << "\" x2=\"" << kLeft + kPlotWidth << "\" y2=\"" << y
      << "\" stroke=\"#E0E0E0\"/><text x=\"" << kLeft - 8 << "\" y=\"" << y + 4
      << "\" font-size=\"11\" text-anchor=\"end\">" << fmt("%g", v) << "</text>\n";
  }
  const double tstep = tick_step(tmax, 8);
  for (double v = 0; v <= tmax * 1.0001; v += tstep) {
    const double x = kLeft + v / tmax * kPlotWidth;
    o << "<line x1=\"" << x << "\" y1=\"" << mem_top + mem_h << "\" x2=\"" << x << "\" y2=\"" << mem_top + mem_h + 5
      << "\" stroke=\"#333\"/><text x=\"" << x << "\" y=\"" << mem_top + mem_h + 18
      << "\" font-size=\"11\" text-anchor=\"middle\">" << fmt("%g", v) << "</text>\n";
  }
  o << "<text x=\"" << kLeft + kPlotWidth / 2 << "\" y=\"" << mem_top + mem_h + 36
    << "\" font-size=\"12\" text-anchor=\"middle\">time in step (" << unit_name << ")</text>\n";
  o << "<text transform=\"translate(" << kLeft - 55 << "," << mem_top + mem_h / 2
    << ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">memory in use (" << bytes_name << ")</text>\n";
  for (size_t k = 0; k < lines.size(); ++k) {
    const size_t p = lines[k];
    const auto& tl = result.programs[p].memory.timeline;
    // A step line, one point per pixel column (the column's largest value, so peaks survive).
    std::ostringstream path;
    double last_col = -1, col_max = 0, col_last = 0;
    path << "M" << fmt("%.1f", kLeft) << "," << fmt("%.1f", my(0));
    for (size_t i = 0; i <= tl.size(); ++i) {
      const double col = i < tl.size() ? std::floor(mx(tl[i].time_s)) : -2;
      if (col != last_col && last_col >= 0) {
        path << "H" << fmt("%.1f", last_col) << "V" << fmt("%.1f", my(col_max));
        if (col_last != col_max) path << "V" << fmt("%.1f", my(col_last));
        col_max = 0;
      }
      if (i == tl.size()) break;
      col_max = std::max(col_max, double(tl[i].bytes));
      col_last = double(tl[i].bytes);
      last_col = col;
    }
    path << "H" << fmt("%.1f", kLeft + kPlotWidth);
    o << "<path d=\"" << path.str() << "\" fill=\"none\" stroke=\"" << kLineColours[k % std::size(kLineColours)]
      << "\" stroke-width=\"" << (p == result.peak_program ? 2.2 : 1.3) << "\"/>\n";
    const double lx = 20 + double(k % 4) * 290, ly = lines_legend_top + double(k / 4) * 22;
    const auto& m = result.programs[p].memory;
    o << "<line x1=\"" << lx << "\" y1=\"" << ly + 7 << "\" x2=\"" << lx + 18 << "\" y2=\"" << ly + 7
      << "\" stroke=\"" << kLineColours[k % std::size(kLineColours)] << "\" stroke-width=\"2.5\"/><text x=\""
      << lx + 24 << "\" y=\"" << ly + 11 << "\" font-size=\"12\">" << escape(program_name(schedule, p)) << ": peak "
      << fmt("%.2f", double(m.peak_bytes) / gib) << " " << bytes_name << " (reserved "
      << fmt("%.2f", double(m.peak_reserved_bytes) / gib) << ")</text>\n";
  }
  if (result.peak_program < np && peak_alloc > 0) {
    const double x = mx(peak_time), y = my(double(peak_alloc));
    o << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"4.5\" fill=\"none\" stroke=\"#C00\" stroke-width=\"2\"/>"
      << "<text x=\"" << std::min(x + 8, kLeft + kPlotWidth - 230) << "\" y=\"" << std::max(y - 8, mem_top + 14)
      << "\" font-size=\"12\" fill=\"#C00\">peak " << fmt("%.2f", double(peak_alloc) / gib) << " " << bytes_name << " at "
      << fmt("%.4g", peak_time * unit) << " " << unit_name << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace mgt::cost
