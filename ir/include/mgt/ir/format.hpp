// Number formatting shared by the libraries and the CLI: one printf-style conversion of one value, for
// the fixed-precision figures (GiB, ms, ratios) that reports and error messages print.
#pragma once

#include <cstdio>
#include <string>

namespace mgt::ir {

/// `value` formatted by the printf conversion `printf_format` (e.g. "%.2f", "%.3g"); the result is
/// cut at 95 characters.
inline std::string format_number(const char* printf_format, double value) {
  char buf[96];
  std::snprintf(buf, sizeof buf, printf_format, value);
  return buf;
}

}  // namespace mgt::ir
