// Small readers shared by the validate*.cpp files (internal to the planner library): lower-casing,
// substring tests, number formatting and the tolerant field readers of a validation row.
#pragma once

#include "mgt/planner/validate.hpp"
#include "mgt/ir/format.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace mgt::plan::detail {

using json = nlohmann::json;

inline std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

inline bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

/// A number, or a string holding exactly one finite number ("0", " 2.5 "): sources sometimes quote
/// numbers. nullopt for anything else (booleans, words, "4-8").
inline std::optional<double> number_in(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const std::string text = v.get<std::string>();
  const char* begin = text.c_str();
  char* end = nullptr;
  const double d = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  while (*end != '\0' && std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (*end != '\0' || !std::isfinite(d)) return std::nullopt;
  return d;
}

inline std::string fmt(const char* format, double value) { return ir::format_number(format, value); }

/// An integer field: nullopt when unstated; RowSkipped when it is a string that says something
/// else ("<=16", "96..4608") or a non-integral number.
inline std::optional<int64_t> opt_int(const json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return std::nullopt;
  const json& v = obj[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (const auto d = number_in(v); d && !v.is_number_integer()) {
    if (std::abs(*d) < 9.0e18 && std::floor(*d) == *d) return int64_t(*d);  // range first: the cast is UB beyond int64
  }
  if (v.is_string()) {
    const std::string s = lower(v.get<std::string>());
    if (s.empty() || contains(s, "not stated") || s == "n/a" || s == "null") return std::nullopt;
  }
  throw RowSkipped(where + "." + key + " is not one integer (" + v.dump() + ")");
}

inline std::optional<double> opt_number(const json& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key)) return std::nullopt;
  return number_in(obj[key]);
}

inline std::string opt_string(const json& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return {};
  return obj[key].get<std::string>();
}

inline int64_t require_row_int(const json& obj, const std::string& key, const std::string& where) {
  const auto v = opt_int(obj, key, where);
  if (!v) throw RowSkipped(where + "." + key + " is not stated");
  if (*v <= 0) throw RowSkipped(where + "." + key + " must be positive, got " + std::to_string(*v));
  return *v;
}

}  // namespace mgt::plan::detail
