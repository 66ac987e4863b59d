// Checks shared by the tests of the JSON formats (docs/formats.md): which field a reader's error names,
// and the write -> read -> write round trip at the byte level.
#pragma once

#include "mgt/ir/error.hpp"
#include "mgt/ir/plan.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

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

/// One bad-document case of a format test: the field the reader's ir::InputError must name after
/// `edit` changes the test's hand-written good document.
struct BadDocument {
  std::string field;
  std::function<void(nlohmann::json&)> edit;
};

/// The table-driven bad-document test of a format: for each case, reads `good_document` after the
/// case's edit with `read(doc, "bad.json")` and expects the InputError it throws to name the case's
/// field ("<no error>" when it throws none). Every format's cases begin with the two that every reader
/// must refuse, naming "format": another format, and none.
template <typename Read>
void expect_each_error_names_the_field(const char* good_document, Read read, std::vector<BadDocument> cases) {
  cases.insert(cases.begin(), {{"format", [](nlohmann::json& doc) { doc["format"] = "mgt.another_format/1"; }},
                               {"format", [](nlohmann::json& doc) { doc.erase("format"); }}});
  for (size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json doc = nlohmann::json::parse(good_document);
    cases[i].edit(doc);
    EXPECT_EQ(field_of_error([&] { (void)read(doc, "bad.json"); }), cases[i].field) << "bad-document case " << i;
  }
}

/// Expects `to_json(record)` to be the hand-written document it was read from, key for key, but for its
/// "plan", which reads with its defaults filled in and is written whole (ir::to_json(record.plan)).
template <typename Record>
void expect_written_back_with_plan_resolved(const char* hand_written, const Record& record) {
  nlohmann::json want = nlohmann::json::parse(hand_written);
  want["plan"] = ir::to_json(record.plan);
  EXPECT_EQ(to_json(record), want);
}

/// `doc` as the CLI prints it (dump(2)) after reading it with `read(doc, source)` and writing it again.
template <typename Read>
std::string rewritten(const nlohmann::json& doc, Read read) {
  return to_json(read(doc, "test.json")).dump(2);
}

}  // namespace mgt::test
