// The progress line (progress.hpp).
#include "progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <iostream>

namespace mgt::cli {

namespace {

constexpr size_t kMaxColumns = 79;  // under the narrowest usual terminal, so the line never wraps

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

ProgressLine::ProgressLine(std::ostream& out, bool enabled, Clock clock, double delay_s)
    : out_(&out), enabled_(enabled), clock_(std::move(clock)), start_s_(enabled_ ? clock_() : 0), delay_s_(delay_s) {}

ProgressLine ProgressLine::for_stderr(bool json) {
  double delay_s = kDelayS;
  if (const char* text = std::getenv("MGT_PROGRESS_AFTER_S")) {
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    if (end != text && *end == '\0' && std::isfinite(value) && value >= 0) delay_s = value;
  }
  return ProgressLine(std::cerr, !json && ::isatty(STDERR_FILENO) == 1, steady_seconds, delay_s);
}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(const std::string& what, int64_t done, int64_t total) {
  if (!enabled_) return;
  const double now = clock_();
  if (now - start_s_ < delay_s_) return;
  if (last_draw_s_ >= 0 && now - last_draw_s_ < kIntervalS) return;
  last_draw_s_ = now;
  char tail[96];
  if (total > 0)
    std::snprintf(tail, sizeof tail, " %s / %s (%d %%), %.1f s", with_commas(done).c_str(), with_commas(total).c_str(),
                  int(100.0 * double(done) / double(total)), now - start_s_);
  else
    std::snprintf(tail, sizeof tail, ", %.1f s", now - start_s_);
  std::string line = "mgt-plan: " + what;
  const std::string rest = tail;
  if (line.size() + rest.size() > kMaxColumns) line.resize(kMaxColumns > rest.size() ? kMaxColumns - rest.size() : 0);
  // "\r" back to the line's start, "\x1b[K" erases what a longer previous line left.
  *out_ << '\r' << line << rest << "\x1b[K" << std::flush;
}

void ProgressLine::finish() {
  if (!enabled_ || last_draw_s_ < 0) return;
  *out_ << "\r\x1b[K" << std::flush;
  last_draw_s_ = -1;
}

}  // namespace mgt::cli
