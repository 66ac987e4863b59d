// The progress line (tools/mgt-plan/progress.hpp) with an injected terminal flag and clock: nothing
// before 2 s, at most one redraw per 0.1 s, one line redrawn in place and erased at the end, nothing
// at all when disabled (stderr not a terminal, or --json). End to end, with the delay set to 0
// (MGT_PROGRESS_AFTER_S): stderr on a file gets no progress, on a terminal (a pty) the search shows it.
#include "cli_util.hpp"

#include "progress.hpp"

#include <pty.h>

#include <atomic>
#include <chrono>
#include <thread>


namespace mgt_cli_test {
namespace {

using mgt::cli::ProgressLine;
using mgt::cli::ProgressTicker;

struct FakeClock {
  double now_s = 100;
  ProgressLine::Clock fn() {
    return [this] { return now_s; };
  }
};

TEST(ProgressLine, SilentBeforeTwoSecondsThenThrottled) {
  FakeClock clock;
  std::ostringstream out;
  ProgressLine p(out, /*enabled=*/true, clock.fn());
  clock.now_s += 1.9;
  p.update("searching plans", 10, 1000);
  EXPECT_EQ(out.str(), "") << "work under 2 s shows nothing";
  clock.now_s += 0.2;  // 2.1 s
  p.update("searching plans", 250, 1000);
  EXPECT_EQ(out.str(), "\rmgt-plan: searching plans 250 / 1,000 (25 %), 2.1 s\x1b[K");
  clock.now_s += 0.05;  // within 0.1 s of the last draw: nothing
  p.update("searching plans", 260, 1000);
  EXPECT_EQ(out.str().size(), std::string("\rmgt-plan: searching plans 250 / 1,000 (25 %), 2.1 s\x1b[K").size());
  clock.now_s += 0.1;
  p.update("searching plans", 1000, 1000);
  EXPECT_TRUE(out.str().ends_with("\rmgt-plan: searching plans 1,000 / 1,000 (100 %), 2.2 s\x1b[K")) << out.str();
  // One line: no newline anywhere; finish erases it, once.
  EXPECT_EQ(out.str().find('\n'), std::string::npos);
  p.finish();
  EXPECT_TRUE(out.str().ends_with("2.2 s\x1b[K\r\x1b[K"));
  const size_t size = out.str().size();
  p.finish();
  EXPECT_EQ(out.str().size(), size);
}

TEST(ProgressLine, NoCountShowsTheTimeAndLongTextStaysUnder80Columns) {
  FakeClock clock;
  std::ostringstream out;
  {
    ProgressLine p(out, true, clock.fn());
    clock.now_s += 3;
    p.update("simulating", 0, 0);
    EXPECT_EQ(out.str(), "\rmgt-plan: simulating, 3.0 s\x1b[K");
    clock.now_s += 1;
    const std::string long_text(200, 'x');
    p.update(long_text, 5, 10);
    const std::string last = out.str().substr(out.str().rfind('\r') + 1);
    EXPECT_LT(last.size() - std::string("\x1b[K").size(), 80u) << last;
    EXPECT_TRUE(last.ends_with(" 5 / 10 (50 %), 4.0 s\x1b[K")) << last;
  }
  EXPECT_TRUE(out.str().ends_with("\r\x1b[K")) << "the destructor erases the line";
}

TEST(ProgressLine, DisabledWritesNothing) {
  FakeClock clock;
  std::ostringstream out;
  {
    ProgressLine p(out, /*enabled=*/false, clock.fn());
    for (int i = 0; i < 100; ++i) {
      clock.now_s += 1;
      p.update("searching plans", i, 100);
    }
    p.finish();
  }
  EXPECT_EQ(out.str(), "");
}

TEST(ProgressLine, TickRedrawsTheLastUpdateAsTimeMovesOn) {
  FakeClock clock;
  std::ostringstream out;
  ProgressLine p(out, true, clock.fn());
  p.tick();  // nothing to show yet
  p.update("lowering the plan to a schedule", 0, 0);
  EXPECT_EQ(out.str(), "");
  clock.now_s += 2.5;
  p.tick();
  EXPECT_EQ(out.str(), "\rmgt-plan: lowering the plan to a schedule, 2.5 s\x1b[K");
  clock.now_s += 0.05;
  p.tick();  // throttled
  clock.now_s += 0.5;
  p.tick();
  EXPECT_TRUE(out.str().ends_with("\x1b[K\rmgt-plan: lowering the plan to a schedule, 3.0 s\x1b[K")) << out.str();
  clock.now_s += 0.01;  // a new phase is drawn at once, within the throttle interval
  p.update("simulating 1,000 instructions", 0, 0);
  EXPECT_TRUE(out.str().ends_with("\rmgt-plan: simulating 1,000 instructions, 3.1 s\x1b[K")) << out.str();
  p.finish();
  const std::string done = out.str();
  clock.now_s += 1;
  p.tick();  // finished: the ticker's late call draws nothing
  EXPECT_EQ(out.str(), done);
}

TEST(ProgressTicker, RedrawsFromItsThreadUntilStopped) {
  // Every clock read advances 1 s, so every tick is due; the ticker must call tick on its own.
  std::atomic<int> reads{0};
  std::ostringstream out;
  ProgressLine p(out, true, [&reads] { return double(reads++); }, /*delay_s=*/0);
  ProgressTicker ticker(p);
  p.update("simulating", 0, 0);
  const int after_update = reads.load();
  for (int i = 0; i < 200 && reads.load() < after_update + 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ticker.stop();
  EXPECT_GE(reads.load(), after_update + 3) << "the ticker redraws without updates";
  const std::string text = out.str();
  size_t draws = 0;
  for (size_t at = text.find("\rmgt-plan: simulating, "); at != std::string::npos;
       at = text.find("\rmgt-plan: simulating, ", at + 1))
    ++draws;
  EXPECT_GE(draws, 3u) << text;
  // A disabled line starts no thread and draws nothing.
  std::ostringstream quiet;
  ProgressLine off(quiet, false, [] { return 100.0; });
  { ProgressTicker idle(off); }
  EXPECT_EQ(quiet.str(), "");
}

// Runs mgt-plan with stdout to /dev/null and stderr on a pseudo-terminal, with progress due from the
// start (MGT_PROGRESS_AFTER_S=0); returns what it wrote on the terminal.
std::string stderr_on_a_terminal(const std::vector<std::string>& args) {
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    // Child: stdin and stderr stay on the pty; stdout to /dev/null so only stderr is read back.
    if (::chdir(MGT_SOURCE_DIR) != 0) ::_exit(127);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) ::_exit(127);
    ::setenv("MGT_PROGRESS_AFTER_S", "0", 1);
    std::vector<char*> argv = {const_cast<char*>(MGT_CLI_PATH)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(MGT_CLI_PATH, argv.data());
    ::_exit(127);
  }
  std::string text;
  if (pid < 0) {
    ADD_FAILURE() << "forkpty failed";
    return text;
  }
  char buf[4096];
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));  // EIO once the child exits
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(master);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  return text;
}

const std::vector<std::string> kSearch = {kLlama8B, "--gpus", "64", "--top", "1"};
const std::vector<std::string> kSimulate = {"simulate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8})"};

TEST(CliProgress, SilentWhenStderrIsNotATerminal) {
  // Progress due from the start, yet stderr is a file: nothing but the answer.
  const Result r = run_cli(kSearch, {"env", "MGT_PROGRESS_AFTER_S=0"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "") << describe(r);
  const Result v = run_cli({"validate", "examples/validation/megatron2021_narayanan.json"}, {"env", "MGT_PROGRESS_AFTER_S=0"});
  EXPECT_EQ(v.err, "") << describe(v);
  const Result sim = run_cli(kSimulate, {"env", "MGT_PROGRESS_AFTER_S=0"});
  EXPECT_EQ(sim.exit_code, 0) << describe(sim);
  EXPECT_EQ(sim.err, "") << describe(sim);
}

TEST(CliProgress, ShownOnATerminalButNotWithJson) {
  const std::string tty = stderr_on_a_terminal(kSearch);
  EXPECT_TRUE(contains(tty, "\rmgt-plan: searching plans 0 / ")) << tty;
  EXPECT_TRUE(contains(tty, "\r\x1b[K")) << "the line is erased before the results\n" << tty;
  EXPECT_FALSE(contains(tty, "\n")) << "one line, redrawn in place\n" << tty;
  std::vector<std::string> json = kSearch;
  json.push_back("--json");
  EXPECT_EQ(stderr_on_a_terminal(json), "");
  // simulate: each phase named, the time kept moving by the ticker.
  const std::string sim = stderr_on_a_terminal(kSimulate);
  EXPECT_TRUE(contains(sim, "\rmgt-plan: lowering the plan to a schedule, ")) << sim;
  EXPECT_TRUE(contains(sim, "\rmgt-plan: simulating ")) << sim;
  EXPECT_TRUE(sim.ends_with("\r\x1b[K")) << sim;
  std::vector<std::string> sim_json = kSimulate;
  sim_json.push_back("--json");
  EXPECT_EQ(stderr_on_a_terminal(sim_json), "");
}

}  // namespace
}  // namespace mgt_cli_test
