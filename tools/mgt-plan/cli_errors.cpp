// How mgt-plan ends: dispatch to the chosen subcommand, and every exception turned into one stderr
// line and an exit status (0 help / version, 1 not built in, 2 bad input, 3 internal error), with a
// "did you mean" for a mistyped flag or subcommand.
#include "subcommand.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/mlir/mlir_interop.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include <unistd.h>

namespace mgt::cli {

namespace {

/// A first argument that is no subcommand but close to one (`inspec`).
class MistypedSubcommand : public CLI::ParseError {
 public:
  explicit MistypedSubcommand(std::string message)
      : CLI::ParseError("MistypedSubcommand", std::move(message), CLI::ExitCodes::ExtrasError) {}
};

// Close enough to suggest: one edit for names of up to 3 letters ("gpu" -> "gpus"), else two.
bool close_enough(const std::string& typed, size_t distance) {
  return distance > 0 && distance <= (typed.size() <= 3 ? 1u : 2u);
}

/// The candidate nearest `typed`, when close enough.
std::optional<std::string> nearest(const std::string& typed, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(typed, c);
    if (close_enough(typed, d) && (!best || d < best_distance)) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

/// The subcommand the parser got to (the App itself when none).
const CLI::App& active_app(const CLI::App& app) {
  const CLI::App* active = &app;
  while (!active->get_subcommands().empty()) active = active->get_subcommands().front();
  return *active;
}

/// "unknown flag --gpu; did you mean --gpus?" for the first flag in `args` that `app` does not know
/// and that is close to one it does; nothing when every flag is known or none is close.
std::optional<std::string> flag_suggestion(const CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> known;
  for (const CLI::Option* opt : app.get_options())
    for (const auto& name : opt->get_lnames()) known.push_back(name);
  for (const auto& arg : args) {
    if (arg == "--") break;  // positional arguments only after it
    if (arg.size() <= 2 || arg.rfind("--", 0) != 0) continue;
    const std::string name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    if (const auto guess = nearest(name, known)) return "unknown flag --" + name + "; did you mean --" + *guess + "?";
  }
  return std::nullopt;
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: insertions, deletions, substitutions and adjacent transpositions
  // ("plna" -> "plan" is one edit), over three rolling rows.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        current[j] = std::min(current[j], before[j - 2] + 1);
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[b.size()];
}

void check_subcommand_spelling(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].empty() || args[0][0] == '-') return;
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), args[0]) != names.end()) return;
  std::error_code ec;
  if (std::filesystem::exists(args[0], ec)) return;  // a model file, as the default command takes
  if (const auto guess = nearest(args[0], names))
    throw MistypedSubcommand("unknown subcommand " + args[0] + "; did you mean " + *guess + "?");
}

int dispatch(const std::vector<Subcommand>& subcommands, const Subcommand& fallback) {
  for (const auto& s : subcommands)
    if (s.app->parsed()) return s.run();
  return fallback.run();
}

int report_exception(const CLI::App& app, const std::vector<std::string>& args) {
  try {
    throw;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const MistypedSubcommand& e) {
    std::cerr << "mgt-plan: " << e.what() << " (hint: mgt-plan --help)\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    const CLI::App& active = active_app(app);
    if (const auto suggestion = flag_suggestion(active, args)) {
      const std::string command = &active == &app ? "mgt-plan" : "mgt-plan " + active.get_name();
      std::cerr << "mgt-plan: " << *suggestion << " (hint: " << command << " --help)\n";
    } else {
      std::cerr << "mgt-plan: " << e.what() << " (hint: mgt-plan --help)\n";
    }
    return 2;
  } catch (const mgt::mlirio::NotBuiltIn& e) {
    std::cerr << "mgt-plan: " << e.what() << "\n";
    return 1;
  } catch (const mgt::ir::InputError& e) {
    std::cerr << "mgt-plan: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "mgt-plan: internal error: " << e.what() << "\n";
    return 3;
  }
}

int finish_standard_output(int status) {
  // std::cout writes through C's stdout (synchronised with stdio, the default), so one fflush
  // reaches everything both wrote; the error flags also remember a failed write from earlier (the
  // trainer flushes each step line), whose errno is gone by now.
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  int err = flushed ? 0 : errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return status;
  // A write failed earlier and its errno is gone: one more byte says why (the output is already cut
  // short, so a stray newline costs nothing).
  if (err == 0 && ::write(STDOUT_FILENO, "\n", 1) < 0) err = errno;
  std::cerr << "mgt-plan: cannot write to standard output: "
            << (err != 0 ? std::strerror(err) : "a write failed (full disk, closed pipe or descriptor?)") << "\n";
  return status != 0 ? status : 2;
}

}  // namespace mgt::cli
