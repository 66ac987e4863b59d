// Checks shared by the tests of the JSON formats (docs/formats.md): which field a reader's error names,
// and the write -> read -> write round trip at the byte level.
#pragma once

#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace mgt::test {

/// The field named by the ir::InputError that `read()` throws; "<no error>" when it throws none.
template <typename Read>
std::string field_of_error(Read read) {
  try {
    read();
  } catch (const ir::InputError& e) {
    return e.field();
  }
  return "<no error>";
}

/// The message of the ir::InputError that `read()` throws; "<no error>" when it throws none.
template <typename Read>
std::string message_of_error(Read read) {
  try {
    read();
  } catch (const ir::InputError& e) {
    return e.what();
  }
  return "<no error>";
}

/// `doc` as the CLI prints it (dump(2)) after reading it with `read(doc, source)` and writing it again.
template <typename Read>
std::string rewritten(const nlohmann::json& doc, Read read) {
  return to_json(read(doc, "test.json")).dump(2);
}

}  // namespace mgt::test
