// Errors for bad input: every message names the file, the field and the fix (DESIGN.md, "Conventions").
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mgt::ir {

/// Bad user input: a file, flag or value that cannot be used as given. The CLI prints what() on one
/// line and exits with status 2. `what()` reads "<source>: field '<field>': <problem> (hint: <fix>)".
class InputError : public std::runtime_error {
 public:
  InputError(std::string source, std::string field, std::string problem, std::string hint = {});
  const std::string& source() const { return source_; }
  const std::string& field() const { return field_; }

 private:
  std::string source_;
  std::string field_;
};

/// Reads and parses a JSON file; throws InputError naming the file and the parse position.
nlohmann::json read_json_file(const std::string& path);

/// Deepest nesting of arrays and objects parse_json_text accepts.
inline constexpr int64_t kMaxJsonDepth = 256;

/// Parses JSON text; `source` names where it came from in errors (a path, or "--plan"). Malformed
/// JSON, a number beyond the double range and nesting deeper than kMaxJsonDepth are InputErrors.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

/// Typed field access for readers: each throws InputError naming `source` and `field` when the field
/// is missing (require_*), has the wrong type, or is not positive (require_positive_int).
int64_t require_positive_int(const nlohmann::json& obj, const std::string& field, const std::string& source);
int64_t optional_positive_int(const nlohmann::json& obj, const std::string& field, int64_t fallback,
                              const std::string& source);
int64_t optional_nonnegative_int(const nlohmann::json& obj, const std::string& field, int64_t fallback,
                                 const std::string& source);
double require_positive_number(const nlohmann::json& obj, const std::string& field, const std::string& source);
double optional_number(const nlohmann::json& obj, const std::string& field, double fallback,
                       const std::string& source);
std::string require_string(const nlohmann::json& obj, const std::string& field, const std::string& source);
bool optional_bool(const nlohmann::json& obj, const std::string& field, bool fallback, const std::string& source);

/// Checks `"format": "<expected>"`; throws InputError naming the expected value otherwise.
void require_format(const nlohmann::json& doc, const std::string& expected, const std::string& source);

/// Multiplies non-negative counts; throws InputError naming `what` when the product overflows int64.
int64_t checked_mul(int64_t a, int64_t b, const std::string& source, const std::string& what);

}  // namespace mgt::ir
