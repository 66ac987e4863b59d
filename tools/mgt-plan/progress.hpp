// Progress on stderr for work that takes more than a couple of seconds (the search on big clusters,
// validate, simulate of large schedules): one line, redrawn in place, only when stderr is a terminal
// and the command does not print JSON, so pipes, logs and --json output stay byte-identical.
//
//   ProgressLine progress = ProgressLine::for_stderr(/*json=*/o.json);
//   options.on_progress = [&](int64_t done, int64_t total) { progress.update("searching plans", done, total); };
//   ...
//   progress.finish();  // erases the line (also on destruction), before the results are printed
//
// One long call with no counter to report (lowering a 4M-instruction schedule) keeps its line alive
// with a ProgressTicker, which redraws the elapsed time from a background thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace mgt::cli {

class ProgressLine {
 public:
  /// Seconds on a monotonic clock (injected in tests).
  using Clock = std::function<double()>;
  /// Nothing is drawn before `delay_s` (kDelayS by default: short work shows nothing) nor more
  /// often than every kIntervalS; the line is kept under 80 columns so that "\r" returns to its start.
  static constexpr double kDelayS = 2.0, kIntervalS = 0.1;

  /// `enabled` false: update, tick and finish write nothing.
  ProgressLine(std::ostream& out, bool enabled, Clock clock, double delay_s = kDelayS);
  /// On std::cerr with the steady clock; enabled when stderr is a terminal (isatty) and !json. The
  /// delay is kDelayS, or the seconds in the environment variable MGT_PROGRESS_AFTER_S when it holds
  /// a number >= 0 (0: from the start, as the end-to-end test uses; other text: the default).
  static ProgressLine for_stderr(bool json);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;  // one owner of the line (for_stderr's result is elided)
  ProgressLine& operator=(const ProgressLine&) = delete;

  /// Sets what is being done and draws "mgt-plan: <what> 1,234 / 5,000 (25 %), 3.1 s" when due
  /// (total 0: no count, only the time); a new `what` is drawn at once, past the delay. Cheap when
  /// throttled: one clock read.
  void update(const std::string& what, int64_t done, int64_t total);
  /// Redraws the last update when due (its time moves on). Thread-safe, as update and finish are.
  void tick();
  /// Erases the line if one was drawn; later updates draw again.
  void finish();

  bool enabled() const { return enabled_; }

 private:
  void draw_if_due();  // with mutex_ held

  std::ostream* out_;
  const bool enabled_;
  Clock clock_;
  const double start_s_;
  const double delay_s_;
  std::mutex mutex_;
  std::string what_;
  int64_t done_ = 0, total_ = 0;
  bool shown_ = false;      ///< a line is on the terminal (finish erases it)
  bool new_phase_ = false;  ///< `what` changed since the last draw
  double last_draw_s_ = 0;  ///< when the line was last drawn
};

/// Calls line.tick() every ProgressLine::kIntervalS from a background thread until stop() or
/// destruction; starts no thread for a disabled line.
class ProgressTicker {
 public:
  explicit ProgressTicker(ProgressLine& line);
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;
  /// Stops and joins the thread; idempotent.
  void stop();

 private:
  ProgressLine& line_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mgt::cli
