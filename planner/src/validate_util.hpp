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
#include <regex>
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

/// A yes / no field as sources write it: a boolean, 1 / 0, or the words "yes", "on", "true",
/// "enabled" (also "sp", what a sequence-parallel column writes) and "no", "off", "false", "none",
/// "disabled". nullopt for anything else ("not stated", null): the field is unstated.
inline std::optional<bool> switch_in(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1)) return v.get<int64_t>() == 1;
  if (!v.is_string()) return std::nullopt;
  const std::string w = lower(v.get<std::string>());
  for (const char* yes : {"yes", "on", "true", "enabled", "sp", "1"})
    if (w == yes) return true;
  for (const char* no : {"no", "off", "false", "none", "disabled", "0"})
    if (w == no) return false;
  return std::nullopt;
}

/// A count written in a row's words ("8 layers", "V=4", "every 2"): the digits as a number, or
/// RowSkipped naming `what` when there are more than 9 of them (no layer, stage or block count is).
inline int64_t count_in_words(const std::string& digits, const std::string& what) {
  if (digits.empty() || digits.size() > 9) throw RowSkipped(what + ": the count " + digits.substr(0, 24) + " is not a plausible count");
  return std::stoll(digits);
}

inline std::string fmt(const char* format, double value) { return ir::format_number(format, value); }

/// An integer written with its annotation, as sources write them: "1,024" (thousands separators),
/// "8k" / "4M" for a token count (powers of two: 8k tokens = 8192, as the CLI reads K/M), "64 (8
/// nodes)" (a parenthesis after the number), "64 GPUs" / "512 sequences" / "4096 tokens" (the field's
/// own unit). nullopt for anything else: "<=16", "96..4608", "4-8", "8 nodes" for a GPU count.
inline std::optional<int64_t> annotated_int(const std::string& key, const std::string& text) {
  static const std::regex re(R"(^\s*(\d{1,3}(?:,\d{3})+|\d+)\s*([km](?![a-z]))?\s*(.*?)\s*$)");
  const std::string t = lower(text);
  std::smatch m;
  if (!std::regex_match(t, m, re)) return std::nullopt;
  std::string digits = m[1].str();
  std::erase(digits, ',');
  if (digits.size() > 15) return std::nullopt;
  int64_t value = std::stoll(digits);
  const bool token_count = key == "seq_length" || contains(key, "tokens");
  if (m[2].matched) {
    if (!token_count) return std::nullopt;
    value *= m[2].str() == "k" ? (int64_t(1) << 10) : (int64_t(1) << 20);
  }
  const std::string rest = m[3].str();
  if (rest.empty() || rest.front() == '(') return value;
  const auto unit_is = [&rest](std::initializer_list<const char*> units) {
    for (const char* u : units)
      if (rest == u) return true;
    return false;
  };
  if (key == "num_gpus" && unit_is({"gpu", "gpus"})) return value;
  if (token_count && unit_is({"token", "tokens"})) return value;
  if ((contains(key, "seqs") || contains(key, "batch_size")) && unit_is({"sequence", "sequences", "seqs", "samples"}))
    return value;
  return std::nullopt;
}

/// An integer field: nullopt when unstated; RowSkipped when it is a string that says something
/// else ("<=16", "96..4608") or a non-integral number. Annotated integers: annotated_int.
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
    if (const auto annotated = annotated_int(key, s)) return annotated;
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
