// Fuzz target: the text form of mgt.schedule/1 (ir::schedule_from_text, grammar in docs/schedule.md),
// then the verifier.
#include "fuzz_common.hpp"
#include "mgt/ir/schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const mgt::ir::Schedule s = mgt::ir::schedule_from_text(mgt::fuzz::text_of(data, size), "schedule.txt");
    (void)mgt::ir::verify(s);
  } catch (const mgt::ir::InputError&) {
  }
  return 0;
}
