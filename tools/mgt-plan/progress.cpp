// The progress line and its ticker (progress.hpp).
#include "progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
  const std::lock_guard<std::mutex> lock(mutex_);
  if (what != what_) new_phase_ = true;  // shown at once, unthrottled: phases change rarely
  what_ = what;
  done_ = done;
  total_ = total;
  draw_if_due();
}

void ProgressLine::tick() {
  if (!enabled_) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!what_.empty()) draw_if_due();
}

void ProgressLine::draw_if_due() {
  const double now = clock_();
  if (now - start_s_ < delay_s_) return;
  if (shown_ && !new_phase_ && now - last_draw_s_ < kIntervalS) return;
  shown_ = true;
  new_phase_ = false;
  last_draw_s_ = now;
  char tail[96];
  if (total_ > 0)
    std::snprintf(tail, sizeof tail, " %s / %s (%d %%), %.1f s", with_commas(done_).c_str(), with_commas(total_).c_str(),
                  int(100.0 * double(done_) / double(total_)), now - start_s_);
  else
    std::snprintf(tail, sizeof tail, ", %.1f s", now - start_s_);
  std::string line = "mgt-plan: " + what_;
  const std::string rest = tail;
  if (line.size() + rest.size() > kMaxColumns) line.resize(kMaxColumns > rest.size() ? kMaxColumns - rest.size() : 0);
  // "\r" back to the line's start, "\x1b[K" erases what a longer previous line left.
  *out_ << '\r' << line << rest << "\x1b[K" << std::flush;
}

void ProgressLine::finish() {
  if (!enabled_) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  what_.clear();
  if (!shown_) return;
  *out_ << "\r\x1b[K" << std::flush;
  shown_ = false;
}

ProgressTicker::ProgressTicker(ProgressLine& line) : line_(line) {
  if (!line_.enabled()) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto interval = std::chrono::duration<double>(ProgressLine::kIntervalS);
    while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      line_.tick();
      lock.lock();
    }
  });
}

ProgressTicker::~ProgressTicker() { stop(); }

void ProgressTicker::stop() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace mgt::cli
