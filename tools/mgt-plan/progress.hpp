// Progress on stderr for work that takes more than a couple of seconds (the search on big clusters,
// validate, simulate of large schedules): one line, redrawn in place, only when stderr is a terminal
// and the command does not print JSON, so pipes, logs and --json output stay byte-identical.
//
//   ProgressLine progress = ProgressLine::for_stderr(/*json=*/o.json);
//   options.on_progress = [&](int64_t done, int64_t total) { progress.update("searching plans", done, total); };
//   ...
//   progress.finish();  // erases the line (also on destruction), before the results are printed
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace mgt::cli {

class ProgressLine {
 public:
  /// Seconds on a monotonic clock (injected in tests).
  using Clock = std::function<double()>;
  /// Nothing is drawn before `delay_s` (kDelayS by default: short work shows nothing) nor more
  /// often than every kIntervalS; the line is kept under 80 columns so that "\r" returns to its start.
  static constexpr double kDelayS = 2.0, kIntervalS = 0.1;

  /// `enabled` false: update and finish write nothing.
  ProgressLine(std::ostream& out, bool enabled, Clock clock, double delay_s = kDelayS);
  /// On std::cerr with the steady clock; enabled when stderr is a terminal (isatty) and !json. The
  /// delay is kDelayS, or the seconds in the environment variable MGT_PROGRESS_AFTER_S when it holds
  /// a number >= 0 (0: from the start, as the end-to-end test uses; other text: the default).
  static ProgressLine for_stderr(bool json);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;  // one owner of the line (for_stderr's result is elided)
  ProgressLine& operator=(const ProgressLine&) = delete;

  /// "mgt-plan: <what> 1,234 / 5,000 (25 %), 3.1 s" (total 0: no count, only the time). Cheap when
  /// throttled: one clock read.
  void update(const std::string& what, int64_t done, int64_t total);
  /// Erases the line if one was drawn; later updates draw again.
  void finish();

  bool enabled() const { return enabled_; }

 private:
  std::ostream* out_;
  bool enabled_;
  Clock clock_;
  double start_s_;
  double delay_s_;
  double last_draw_s_ = -1;  ///< when the line was last drawn; < 0: not shown
};

}  // namespace mgt::cli
