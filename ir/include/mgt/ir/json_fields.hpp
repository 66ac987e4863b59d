// Typed field access for the readers of written reports (mgt.plans/1, mgt.inspect/1, mgt.simulation/1,
// mgt.spmd_plans/2, mgt.run/1; docs/formats.md): every field required. Beside the require_* /
// optional_* accessors of error.hpp; each throws InputError naming `source` and `field` when the field
// is missing (or null), of the wrong type, or out of range. Defined in error.cpp with them.
// JsonField tables list a report struct's scalar fields once, for its writer and its reader both.
#pragma once

#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <variant>

namespace mgt::ir {

int64_t require_nonnegative_int(const nlohmann::json& obj, const std::string& field, const std::string& source);
/// A number that is not NaN or infinite (JSON cannot hold those, but a caller's json value can).
double require_finite_number(const nlohmann::json& obj, const std::string& field, const std::string& source);
bool require_bool(const nlohmann::json& obj, const std::string& field, const std::string& source);
const nlohmann::json& require_object(const nlohmann::json& obj, const std::string& field, const std::string& source);
const nlohmann::json& require_array(const nlohmann::json& obj, const std::string& field, const std::string& source);
/// An object of non-negative integer counts ({"reason": candidates, ...}); the source of a bad count's
/// error is "<source>: <field>".
std::map<std::string, int64_t> require_counts(const nlohmann::json& obj, const std::string& field,
                                              const std::string& source);

/// The range a report's integer field is read back in (what its writer guarantees).
enum class IntRange { nonnegative, positive };
inline constexpr IntRange kPositive = IntRange::positive;

/// One scalar field of the report struct `T`: its JSON key, the member that holds it and, for an
/// integer, its range. A table of these is the one list of a struct's scalar fields that both its writer
/// (write_fields) and its reader (read_fields) walk, as kTimeTerms is for the time breakdown.
template <typename T>
struct JsonField {
  const char* key;
  std::variant<std::string T::*, int64_t T::*, double T::*, bool T::*> member;
  IntRange range = IntRange::nonnegative;  ///< integer members only
};

/// require_string / require_bool / require_finite_number, or require_positive_int or
/// require_nonnegative_int by `range`, into `out`: the reading of one JsonField.
void read_field(const nlohmann::json& obj, const std::string& key, IntRange range, const std::string& source,
                std::string& out);
void read_field(const nlohmann::json& obj, const std::string& key, IntRange range, const std::string& source,
                int64_t& out);
void read_field(const nlohmann::json& obj, const std::string& key, IntRange range, const std::string& source,
                double& out);
void read_field(const nlohmann::json& obj, const std::string& key, IntRange range, const std::string& source,
                bool& out);

/// Sets `out[key]` to each field of `value` in `fields`.
template <typename T, size_t N>
void write_fields(const T& value, const JsonField<T> (&fields)[N], nlohmann::json& out) {
  for (const JsonField<T>& f : fields) std::visit([&](auto member) { out[f.key] = value.*member; }, f.member);
}

/// Reads each field of `fields` from `obj` into `value`, in the table's order (so the first bad field is
/// the one named); throws InputError naming `source` and the key.
template <typename T, size_t N>
void read_fields(const nlohmann::json& obj, const JsonField<T> (&fields)[N], const std::string& source, T& value) {
  for (const JsonField<T>& f : fields)
    std::visit([&](auto member) { read_field(obj, f.key, f.range, source, value.*member); }, f.member);
}

}  // namespace mgt::ir
