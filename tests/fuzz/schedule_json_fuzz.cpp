// Fuzz target: an mgt.schedule/1 JSON document (ir::schedule_from_json), then the verifier, which
// must report problems of any schedule the reader accepts rather than crash on them.
#include "fuzz_common.hpp"
#include "mgt/ir/schedule.hpp"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const mgt::ir::Schedule s =
        mgt::ir::schedule_from_json(mgt::ir::parse_json_text(mgt::fuzz::text_of(data, size), "schedule.json"),
                                    "schedule.json");
    (void)mgt::ir::verify(s);
    (void)mgt::ir::to_text(s);
    // A schedule that loads is written and read back unchanged.
    const nlohmann::json out = mgt::ir::to_json(s);
    if (mgt::ir::to_json(mgt::ir::schedule_from_json(out, "round trip")) != out) __builtin_trap();
  } catch (const mgt::ir::InputError&) {
  }
  return 0;
}
