// Helpers shared by the CPU probe (probe.cpp) and the CUDA probe (cuda/probe_cuda.cpp), private to the
// runtime libraries: printf-style formatting, the spec's UTC date and the GEMM shape sweep.
#pragma once

#include "mgt/ir/collective.hpp"
#include "mgt/runtime/probe.hpp"

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgt::rt::probe_detail {

std::string format(const char* fmt, auto... args) {
  char buffer[320];
  std::snprintf(buffer, sizeof buffer, fmt, args...);
  return buffer;
}

inline std::string utc_date() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", &tm);
  return buffer;
}

/// The collectives both probes sweep, in the order of the table they print.
inline constexpr ir::CollectiveKind kProbedCollectives[] = {ir::CollectiveKind::all_reduce, ir::CollectiveKind::all_gather,
                                                            ir::CollectiveKind::reduce_scatter,
                                                            ir::CollectiveKind::all_to_all};

struct GemmShape {
  int64_t m, n, k;
};

/// The square GEMM (square x square x square, for the peak) first, then every m x n x k over ms x nks x
/// nks with n k <= max_weight_elements and m n k <= max_mnk, the square one not repeated.
inline std::vector<GemmShape> gemm_shape_sweep(int64_t square, const std::vector<int64_t>& ms,
                                               const std::vector<int64_t>& nks, int64_t max_weight_elements,
                                               int64_t max_mnk) {
  std::vector<GemmShape> shapes = {{square, square, square}};
  for (int64_t m : ms)
    for (int64_t n : nks)
      for (int64_t k : nks) {
        if (n * k > max_weight_elements || m * n * k > max_mnk) continue;
        if (m == square && n == square && k == square) continue;
        shapes.push_back({m, n, k});
      }
  return shapes;
}

/// Logs the collective sweep under `heading` (when `log` is set), then throws naming the first size with a
/// wrong element or no bandwidth: a probe never writes a spec from numbers it could not check.
inline void log_and_check_collectives(const std::vector<CollectiveSample>& rows, const std::string& heading,
                                      std::ostream* log) {
  if (log) {
    *log << heading;
    print_collective_table(*log, rows);
  }
  for (const auto& s : rows)
    if (s.wrong != 0 || !(s.busbw_gbps > 0))
      throw std::runtime_error(format("probe: %s of %lld bytes gave %lld wrong elements",
                                      ir::to_string(s.kind).c_str(), static_cast<long long>(s.bytes),
                                      static_cast<long long>(s.wrong)));
}

}  // namespace mgt::rt::probe_detail
