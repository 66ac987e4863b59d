// Fuzz target: an mgt.plan/1 document as --plan takes it (ir::parse_plan_argument's inline form); a
// plan that loads survives to_json and back unchanged.
#include "fuzz_common.hpp"
#include "mgt/ir/plan.hpp"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mgt::ir::Plan plan;
  try {
    plan = mgt::ir::plan_from_json(mgt::ir::parse_json_text(mgt::fuzz::text_of(data, size), "--plan"), "--plan");
  } catch (const mgt::ir::InputError&) {
    return 0;
  }
  const nlohmann::json out = mgt::ir::to_json(plan);
  const mgt::ir::Plan again = mgt::ir::plan_from_json(out, "round trip");
  if (mgt::ir::to_json(again) != out) __builtin_trap();
  (void)mgt::ir::to_string(plan);
  return 0;
}
