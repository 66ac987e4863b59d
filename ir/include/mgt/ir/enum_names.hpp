// Name tables of enums: one array of names in enumerator order, read by both the enum's to_string and
// its parser, so that printing and parsing cannot disagree (schedule.cpp, plan.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mgt::ir {

/// `names[value]`, or `fallback` for a value past the table.
template <typename Enum, size_t N>
std::string name_of(const std::array<const char*, N>& names, Enum value, const char* fallback = "?") {
  const auto i = static_cast<size_t>(value);
  return i < N ? names[i] : fallback;
}

/// The enumerator whose name is `text`; nullopt when none is.
template <typename Enum, size_t N>
std::optional<Enum> enum_of(const std::array<const char*, N>& names, std::string_view text) {
  for (size_t i = 0; i < N; ++i)
    if (text == names[i]) return static_cast<Enum>(i);
  return std::nullopt;
}

}  // namespace mgt::ir
