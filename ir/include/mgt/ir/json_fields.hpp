// Typed field access for the readers of written reports (mgt.plans/1, mgt.inspect/1, mgt.simulation/1,
// mgt.spmd_plans/2; docs/formats.md): every field required. Beside the require_* / optional_*
// accessors of error.hpp; each throws InputError naming `source` and `field` when the field is missing
// (or null), of the wrong type, or out of range. Defined in error.cpp with them.
#pragma once

#include "mgt/ir/error.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

namespace mgt::ir {

int64_t require_nonnegative_int(const nlohmann::json& obj, const std::string& field, const std::string& source);
/// A number that is not NaN or infinite (JSON cannot hold those, but a caller's json value can).
double require_finite_number(const nlohmann::json& obj, const std::string& field, const std::string& source);
bool require_bool(const nlohmann::json& obj, const std::string& field, const std::string& source);
const nlohmann::json& require_object(const nlohmann::json& obj, const std::string& field, const std::string& source);
const nlohmann::json& require_array(const nlohmann::json& obj, const std::string& field, const std::string& source);

}  // namespace mgt::ir
