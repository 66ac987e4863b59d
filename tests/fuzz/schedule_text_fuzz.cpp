// Fuzz target: the text form of mgt.schedule/1 (ir::schedule_from_text, grammar in docs/schedule.md),
// then the verifier.
#include "fuzz_common.hpp"
#include "mgt/ir/schedule.hpp"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const mgt::ir::Schedule s = mgt::ir::schedule_from_text(mgt::fuzz::text_of(data, size), "schedule.txt");
    (void)mgt::ir::verify(s);
    // What the text form loads is what the JSON form holds: both readers build the same schedule.
    const nlohmann::json out = mgt::ir::to_json(s);
    if (mgt::ir::to_json(mgt::ir::schedule_from_json(out, "round trip")) != out) __builtin_trap();
  } catch (const mgt::ir::InputError&) {
  }
  return 0;
}
