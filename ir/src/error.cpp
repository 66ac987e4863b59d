// Error helpers shared by every reader in mgt_ir.
#include "mgt/ir/error.hpp"
#include "mgt/ir/json_fields.hpp"

#include "mgt/ir/input_limits.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

namespace mgt::ir {

namespace {
std::string compose(const std::string& source, const std::string& field, const std::string& problem,
                    const std::string& hint) {
  std::string out = source;
  if (!field.empty()) out += ": field '" + field + "'";
  out += ": " + problem;
  if (!hint.empty()) out += " (hint: " + hint + ")";
  return out;
}

std::string type_name(const nlohmann::json& v) { return v.type_name(); }
}  // namespace

InputError::InputError(std::string source, std::string field, std::string problem, std::string hint)
    : std::runtime_error(compose(source, field, problem, hint)), source_(std::move(source)),
      field_(std::move(field)) {}

nlohmann::json read_json_file(const std::string& path) { return parse_json_text(read_input_file(path), path); }

namespace {
/// "line L, column C" of the 0-based byte offset `at` in `text`.
std::string position_of(std::string_view text, size_t at) {
  int64_t line = 1, column = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') { ++line; column = 1; } else { ++column; }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

/// Offset of the first bracket nested deeper than kMaxJsonDepth, or npos. Printing, copying or
/// comparing a JSON value recurses once per level, so a hostile document of a million '[' would
/// overflow the stack long after parsing succeeded; no mgt format nests deeper than a handful.
size_t too_deep_at(std::string_view text) {
  int64_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}
}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  if (const size_t at = too_deep_at(text); at != std::string_view::npos)
    throw InputError(source, "", "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at " +
                                     position_of(text, at),
                     "mgt documents nest a few levels; the file is corrupt or not an mgt input");
  // JSON allows a key twice in one object and nlohmann keeps the last; a config with two
  // "hidden_size" is a mistake whichever one was meant, so it is refused naming the key.
  std::vector<std::set<std::string>> open_objects;
  const auto no_duplicate_keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) open_objects.emplace_back();
    else if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    else if (event == Event::key && !open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second)
      throw InputError(source, parsed.get<std::string>(), "the key appears twice in one object",
                       "keep one; JSON readers disagree on which one wins");
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), no_duplicate_keys);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset of the failure; give line and column, which editors understand.
    throw InputError(source, "", "malformed JSON at " + position_of(text, e.byte == 0 ? 0 : e.byte - 1),
                     "fix the JSON syntax; the parser said: " + std::string(e.what()));
  } catch (const nlohmann::json::exception& e) {
    // A number beyond the double range (1e999: JSON has no inf or NaN) is out_of_range.406.
    throw InputError(source, "", "unusable JSON value: " + std::string(e.what()),
                     "numbers must be finite and within +-1.8e308");
  }
}

static const nlohmann::json& require_field(const nlohmann::json& obj, const std::string& field,
                                           const std::string& source) {
  if (!obj.is_object()) throw InputError(source, field, "expected a JSON object around this field");
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) throw InputError(source, field, "missing", "add the field");
  return *it;
}

static int64_t as_int(const nlohmann::json& v, const std::string& field, const std::string& source) {
  if (v.is_number_integer() || v.is_number_unsigned()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      throw InputError(source, field, "value does not fit in a signed 64-bit integer");
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    // Range first: converting a double beyond int64 is undefined behaviour (found by hf_config_fuzz).
    if (std::abs(d) < 9.0e18 && d == std::trunc(d)) return int64_t(d);
  }
  throw InputError(source, field, "expected an integer, got " + type_name(v) + " " + v.dump());
}

int64_t require_positive_int(const nlohmann::json& obj, const std::string& field, const std::string& source) {
  int64_t v = as_int(require_field(obj, field, source), field, source);
  if (v <= 0) throw InputError(source, field, "must be positive, got " + std::to_string(v));
  return v;
}

int64_t optional_positive_int(const nlohmann::json& obj, const std::string& field, int64_t fallback,
                              const std::string& source) {
  if (!obj.contains(field) || obj.at(field).is_null()) return fallback;
  return require_positive_int(obj, field, source);
}

int64_t optional_nonnegative_int(const nlohmann::json& obj, const std::string& field, int64_t fallback,
                                 const std::string& source) {
  if (!obj.contains(field) || obj.at(field).is_null()) return fallback;
  int64_t v = as_int(obj.at(field), field, source);
  if (v < 0) throw InputError(source, field, "must not be negative, got " + std::to_string(v));
  return v;
}

double require_positive_number(const nlohmann::json& obj, const std::string& field, const std::string& source) {
  const auto& v = require_field(obj, field, source);
  if (!v.is_number()) throw InputError(source, field, "expected a number, got " + type_name(v));
  double d = v.get<double>();
  if (!(d > 0.0) || !std::isfinite(d))
    throw InputError(source, field, "must be a positive finite number, got " + v.dump());
  return d;
}

double optional_number(const nlohmann::json& obj, const std::string& field, double fallback,
                       const std::string& source) {
  if (!obj.contains(field) || obj.at(field).is_null()) return fallback;
  const auto& v = obj.at(field);
  if (!v.is_number()) throw InputError(source, field, "expected a number, got " + type_name(v));
  return v.get<double>();
}

std::string require_string(const nlohmann::json& obj, const std::string& field, const std::string& source) {
  const auto& v = require_field(obj, field, source);
  if (!v.is_string()) throw InputError(source, field, "expected a string, got " + type_name(v));
  return v.get<std::string>();
}

bool optional_bool(const nlohmann::json& obj, const std::string& field, bool fallback, const std::string& source) {
  if (!obj.contains(field) || obj.at(field).is_null()) return fallback;
  const auto& v = obj.at(field);
  if (!v.is_boolean()) throw InputError(source, field, "expected true or false, got " + v.dump());
  return v.get<bool>();
}

int64_t require_nonnegative_int(const nlohmann::json& obj, const std::string& field, const std::string& source) {
  const int64_t v = as_int(require_field(obj, field, source), field, source);
  if (v < 0) throw InputError(source, field, "must not be negative, got " + std::to_string(v));
  return v;
}

double require_finite_number(const nlohmann::json& obj, const std::string& field, const std::string& source) {
  const auto& v = require_field(obj, field, source);
  if (!v.is_number()) throw InputError(source, field, "expected a number, got " + type_name(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) throw InputError(source, field, "must be finite, got " + v.dump());
  return d;
}

bool require_bool(const nlohmann::json& obj, const std::string& field, const std::string& source) {
  const auto& v = require_field(obj, field, source);
  if (!v.is_boolean()) throw InputError(source, field, "expected true or false, got " + v.dump());
  return v.get<bool>();
}

const nlohmann::json& require_object(const nlohmann::json& obj, const std::string& field, const std::string& source) {
  const auto& v = require_field(obj, field, source);
  if (!v.is_object()) throw InputError(source, field, "expected an object, got " + type_name(v));
  return v;
}

const nlohmann::json& require_array(const nlohmann::json& obj, const std::string& field, const std::string& source) {
  const auto& v = require_field(obj, field, source);
  if (!v.is_array()) throw InputError(source, field, "expected an array, got " + type_name(v));
  return v;
}

std::map<std::string, int64_t> require_counts(const nlohmann::json& obj, const std::string& field,
                                              const std::string& source) {
  const nlohmann::json& counts = require_object(obj, field, source);
  std::map<std::string, int64_t> out;
  for (const auto& item : counts.items())
    out[item.key()] = require_nonnegative_int(counts, item.key(), source + ": " + field);
  return out;
}

void read_field(const nlohmann::json& obj, const std::string& key, IntRange /*range*/, const std::string& source,
                std::string& out) {
  out = require_string(obj, key, source);
}

void read_field(const nlohmann::json& obj, const std::string& key, IntRange range, const std::string& source,
                int64_t& out) {
  out = range == IntRange::positive ? require_positive_int(obj, key, source)
                                    : require_nonnegative_int(obj, key, source);
}

void read_field(const nlohmann::json& obj, const std::string& key, IntRange /*range*/, const std::string& source,
                double& out) {
  out = require_finite_number(obj, key, source);
}

void read_field(const nlohmann::json& obj, const std::string& key, IntRange /*range*/, const std::string& source,
                bool& out) {
  out = require_bool(obj, key, source);
}

void require_format(const nlohmann::json& doc, const std::string& expected, const std::string& source) {
  if (!doc.is_object()) throw InputError(source, "", "expected a JSON object at the top level");
  auto it = doc.find("format");
  if (it == doc.end() || !it->is_string())
    throw InputError(source, "format", "missing", "add \"format\": \"" + expected + "\"");
  if (it->get<std::string>() != expected)
    throw InputError(source, "format", "unknown format \"" + it->get<std::string>() + "\"",
                     "this reader accepts \"" + expected + "\"");
}

int64_t checked_mul(int64_t a, int64_t b, const std::string& source, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw InputError(source, what, "size overflows a 64-bit integer (" + std::to_string(a) + " x " +
                                       std::to_string(b) + ")",
                     "check the sizes");
  return out;
}

}  // namespace mgt::ir
