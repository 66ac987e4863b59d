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

/// The field named by the ir::InputError that `read(doc)` throws for the document `good_document` after
/// `edit(doc)`; "<no error>" when it throws none. Each bad-document case of a format test is one edit of
/// the test's hand-written good document.
template <typename Edit, typename Read>
std::string field_of_error_after(const char* good_document, Edit edit, Read read) {
  nlohmann::json doc = nlohmann::json::parse(good_document);
  edit(doc);
  return field_of_error([&] { read(doc); });
}

/// `doc` as the CLI prints it (dump(2)) after reading it with `read(doc, source)` and writing it again.
template <typename Read>
std::string rewritten(const nlohmann::json& doc, Read read) {
  return to_json(read(doc, "test.json")).dump(2);
}

}  // namespace mgt::test
