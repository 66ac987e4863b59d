// Fuzz target: an mgt.cluster/1 document (ir::cluster_from_json); a cluster that loads is written and
// read back.
#include "fuzz_common.hpp"
#include "mgt/ir/cluster_spec.hpp"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mgt::ir::ClusterSpec cluster;
  try {
    cluster = mgt::ir::cluster_from_json(mgt::ir::parse_json_text(mgt::fuzz::text_of(data, size), "cluster.json"),
                                         "cluster.json");
  } catch (const mgt::ir::InputError&) {
    return 0;
  }
  // A cluster that loads is written and read back unchanged.
  if (!(mgt::ir::cluster_from_json(mgt::ir::to_json(cluster), "round trip") == cluster)) __builtin_trap();
  return 0;
}
