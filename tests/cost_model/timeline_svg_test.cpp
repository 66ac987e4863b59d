// Tests for the SVG report (timeline_svg.cpp) on hand-built simulation results: the SVG text is parsed
// and each element checked against numbers computed here: the capacity line lies where the chart's own
// y-axis ticks put the capacity; both peaks are drawn and labelled; every program gets a bar or a note
// says how many are drawn; the legend says whose time it shows.
#include "mgt/cost_model/simulator.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace mgt::cost {
namespace {

constexpr double kGiB = double(1ll << 30);

// `count` programs "stage0".. with memory timelines peaking at `peak_in_use` on the last program (the
// peak program) and the critical program `critical`, whose compute time is `critical_compute_s`.
struct Fixture {
  ir::Schedule schedule;
  SimulationResult result;
};

Fixture make_fixture(size_t count, int64_t peak_in_use, int64_t peak_reserved, size_t critical = 0,
                     double critical_compute_s = 0.0123) {
  Fixture f;
  f.schedule.model = "toy";
  f.schedule.num_gpus = int64_t(count) * 4;
  f.result.makespan_s = 0.02;
  f.result.step_time_s = 0.021;  // ms on the axes
  for (size_t p = 0; p < count; ++p) {
    ir::Program program;
    program.name = "stage" + std::to_string(p);
    program.num_ranks = 4;
    f.schedule.programs.push_back(program);
    ProgramResult pr;
    pr.end_s = p == critical ? 0.02 : 0.019;
    pr.breakdown.compute_s = p == critical ? critical_compute_s : 0.01;
    pr.breakdown.bubble_s = 0.005;
    const bool peak = p + 1 == count;
    const int64_t top = peak ? peak_in_use : peak_in_use / 2;
    pr.memory.timeline = {{0.001, top / 4}, {0.008, top}, {0.015, top / 4}, {0.019, 0}};
    pr.memory.peak_bytes = top;
    pr.memory.peak_time_s = 0.008;
    pr.memory.peak_reserved_bytes = peak ? peak_reserved : top + (peak_reserved - peak_in_use);
    f.result.programs.push_back(pr);
  }
  f.result.critical_program = critical;
  f.result.peak_program = count - 1;
  f.result.breakdown = f.result.programs[critical].breakdown;
  f.result.peak_bytes = peak_reserved;
  return f;
}

// Every element `<tag ...>` of the SVG whose attributes contain `marker` (e.g. class="mem-ytick").
std::vector<std::string> elements(const std::string& svg, const std::string& tag, const std::string& marker) {
  std::vector<std::string> out;
  for (size_t at = svg.find("<" + tag + " "); at != std::string::npos; at = svg.find("<" + tag + " ", at + 1)) {
    const std::string element = svg.substr(at, svg.find('>', at) - at + 1);
    if (element.find(marker) != std::string::npos) out.push_back(element);
  }
  return out;
}

double attribute(const std::string& element, const std::string& name) {
  std::smatch m;
  const std::regex re(" " + name + "=\"([-0-9.e+]+)\"");
  if (!std::regex_search(element, m, re)) {
    ADD_FAILURE() << "no " << name << " in " << element;
    return 0;
  }
  return std::stod(m[1]);
}

// The text content of the first `<text ...marker...>...</text>`.
std::string text_of(const std::string& svg, const std::string& marker) {
  const size_t at = svg.find(marker);
  if (at == std::string::npos) return "";
  const size_t open = svg.find('>', at) + 1;
  return svg.substr(open, svg.find("</text>", open) - open);
}

// The memory axis as the reader sees it: (label value, y) for each tick, in the axis title's unit.
std::vector<std::pair<double, double>> memory_ticks(const std::string& svg) {
  std::vector<std::pair<double, double>> ticks;
  const std::regex re(R"re(<line class="mem-ytick"[^>]* y1="([-0-9.e+]+)"[^>]*/><text class="mem-ytick-label"[^>]*>([-0-9.e+]+)</text>)re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it)
    ticks.emplace_back(std::stod((*it)[2]), std::stod((*it)[1]));
  return ticks;
}

// y of `value` (axis units) by linear interpolation between the first and last ticks.
double axis_y(const std::vector<std::pair<double, double>>& ticks, double value) {
  const auto [v0, y0] = ticks.front();
  const auto [v1, y1] = ticks.back();
  return y0 + (value - v0) * (y1 - y0) / (v1 - v0);
}

TEST(render_svg, capacity_line_lies_where_the_axis_puts_the_capacity) {
  // In use 1.5 GiB, reserved 3 GiB, capacity 2.5 GiB (this plan does not fit): the y axis reads GiB.
  const Fixture f = make_fixture(2, int64_t(1.5 * kGiB), int64_t(3 * kGiB));
  const int64_t capacity = int64_t(2.5 * kGiB);
  const std::string svg = render_svg(f.schedule, f.result, capacity);
  ASSERT_NE(svg.find("memory per GPU (GiB)"), std::string::npos);
  const auto ticks = memory_ticks(svg);
  ASSERT_GE(ticks.size(), 2u) << svg;
  EXPECT_EQ(ticks.front().first, 0.0);

  const auto lines = elements(svg, "line", "id=\"capacity\"");
  ASSERT_EQ(lines.size(), 1u) << svg;
  EXPECT_NEAR(attribute(lines[0], "y1"), axis_y(ticks, 2.5), 0.01);
  EXPECT_NEAR(attribute(lines[0], "y2"), axis_y(ticks, 2.5), 0.01);
  // Across the whole plot.
  const auto plot = elements(svg, "rect", "id=\"memory-plot\"");
  ASSERT_EQ(plot.size(), 1u);
  EXPECT_DOUBLE_EQ(attribute(lines[0], "x1"), attribute(plot[0], "x"));
  EXPECT_DOUBLE_EQ(attribute(lines[0], "x2"), attribute(plot[0], "x") + attribute(plot[0], "width"));
  EXPECT_EQ(text_of(svg, "id=\"capacity-label\""), "GPU memory capacity 2.50 GiB");

  // A capacity above every peak widens the axis to include it: 80 GiB on this 3 GiB plan.
  const std::string wide = render_svg(f.schedule, f.result, int64_t(80 * kGiB));
  const auto wide_ticks = memory_ticks(wide);
  ASSERT_GE(wide_ticks.size(), 2u);
  EXPECT_GE(wide_ticks.back().first, 80.0);
  const auto wide_line = elements(wide, "line", "id=\"capacity\"");
  ASSERT_EQ(wide_line.size(), 1u);
  EXPECT_NEAR(attribute(wide_line[0], "y1"), axis_y(wide_ticks, 80), 0.01);

  // No capacity given: no line.
  EXPECT_TRUE(elements(render_svg(f.schedule, f.result), "line", "id=\"capacity\"").empty());
}

TEST(render_svg, both_peaks_are_drawn_and_labelled) {
  const Fixture f = make_fixture(2, int64_t(1.5 * kGiB), int64_t(3 * kGiB));
  const std::string svg = render_svg(f.schedule, f.result, int64_t(4 * kGiB));
  const auto ticks = memory_ticks(svg);
  ASSERT_GE(ticks.size(), 2u);
  // The title's number is the reserved peak, and says so; the in-use peak is next to it.
  EXPECT_NE(svg.find("peak memory 3.00 GiB reserved per GPU (1.50 in use)"), std::string::npos) << svg;
  const auto reserved = elements(svg, "line", "id=\"peak-reserved\"");
  ASSERT_EQ(reserved.size(), 1u);
  EXPECT_NEAR(attribute(reserved[0], "y1"), axis_y(ticks, 3.0), 0.01);
  EXPECT_EQ(text_of(svg, "id=\"peak-reserved-label\"").rfind("peak reserved 3.00 GiB (stage1: ", 0), 0u);
  const auto in_use = elements(svg, "circle", "id=\"peak-in-use\"");
  ASSERT_EQ(in_use.size(), 1u);
  EXPECT_NEAR(attribute(in_use[0], "cy"), axis_y(ticks, 1.5), 0.01);
  EXPECT_NE(svg.find("peak in use 1.50 GiB at 8 ms"), std::string::npos) << svg;
}

TEST(render_svg, every_stage_gets_a_bar_and_the_memory_lines_drawn_are_named) {
  // pp 64: all 64 bars; memory lines for 8 of them, named in a note.
  const Fixture f = make_fixture(64, int64_t(kGiB), int64_t(2 * kGiB), /*critical=*/5);
  const std::string svg = render_svg(f.schedule, f.result, int64_t(80 * kGiB));
  const auto bars = elements(svg, "text", "class=\"bar-label\"");
  EXPECT_EQ(bars.size(), 64u);
  for (size_t p = 0; p < 64; ++p)
    EXPECT_NE(svg.find(">stage" + std::to_string(p) + (p == 5 ? " *" : "") + "</text>"), std::string::npos) << p;
  EXPECT_EQ(svg.find("bars for "), std::string::npos) << "no bar note when every program has a bar";
  const std::string note = text_of(svg, "class=\"grouping-note\"");
  ASSERT_EQ(note.rfind("memory lines for 8 of 64 programs: ", 0), 0u) << note;
  // The peak-memory (stage63) and critical (stage5) programs are among those named, and the note names
  // as many programs as there are lines.
  EXPECT_NE(note.find("stage63"), std::string::npos) << note;
  EXPECT_NE(note.find("stage5,"), std::string::npos) << note;
  size_t named = 1;
  for (char c : note.substr(0, note.find(" ("))) named += c == ',';
  EXPECT_EQ(named, 8u) << note;
  EXPECT_EQ(elements(svg, "path", "d=\"M").size(), 8u);

  // Past 128 programs the bars are a subset too, and the note says how many.
  const Fixture many = make_fixture(200, int64_t(kGiB), int64_t(2 * kGiB));
  const std::string big = render_svg(many.schedule, many.result);
  const size_t drawn = elements(big, "text", "class=\"bar-label\"").size();
  EXPECT_EQ(drawn, 128u);
  EXPECT_NE(big.find("bars for " + std::to_string(drawn) + " of 200 programs"), std::string::npos);

  // Few programs: no note at all.
  const Fixture few = make_fixture(4, int64_t(kGiB), int64_t(2 * kGiB));
  EXPECT_EQ(render_svg(few.schedule, few.result).find("grouping-note"), std::string::npos);
}

TEST(render_svg, legend_says_whose_time_it_shows) {
  // The critical program (stage3 of 8, 4 ranks) computes 12.3 ms; the others 10 ms.
  const Fixture f = make_fixture(8, int64_t(kGiB), int64_t(2 * kGiB), /*critical=*/3, 0.0123);
  const std::string svg = render_svg(f.schedule, f.result);
  EXPECT_EQ(text_of(svg, "id=\"legend-caption\""),
            "Time per term of stage3 (the critical program, ends last; one GPU of its 4 ranks), ms:");
  EXPECT_NE(svg.find(">compute 12.3 ms</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">pipeline bubble 5 ms</text>"), std::string::npos) << svg;
}

}  // namespace
}  // namespace mgt::cost
