// Hardware blocks shared by the tests that build synthetic validation documents (validate_test.cpp,
// calibrate_test.cpp): the datasheet numbers of an H100 SXM5 80GB node, as a validation file states them.
#pragma once

#include <nlohmann/json.hpp>

namespace mgt::test {

/// A validation file's "hardware" entry for H100 SXM5 80GB nodes (8 GPUs, 8 x 400 Gb/s NICs).
inline nlohmann::json h100_block() {
  return nlohmann::json::parse(R"({
    "gpu": "H100-SXM5-80GB", "peak_dense_tflops": {"bf16": 989, "fp16": 989, "fp8": 1979, "tf32": 495},
    "hbm_gb": 80, "hbm_bw_TBps": 3.35, "nvlink_bw_GBps_per_gpu_bidir": 900, "gpus_per_node": 8,
    "nvlink_domain_gpus": 8, "nics_per_node": 8, "nic_gbps": 400})");
}

}  // namespace mgt::test
