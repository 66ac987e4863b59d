#include "mgt/cost_model/expert_epilogue.hpp"

namespace mgt::cost {

bool eager_expert_epilogue_runs(bool profile_eager, ir::LinearFormat format) {
  return profile_eager && format != ir::LinearFormat::mxfp8 && format != ir::LinearFormat::nvfp4;
}

EpilogueBytes expert_bias_bytes(int64_t out_bytes) {
  // forward: b * p (write 1), t + (b * p) (read 2, write 1), cat (read 1, write 1)
  // backward: grad * p (read 1, write 1) + sum (read 1), grad * b (read 1, write 1) + sum (read 1)
  return {6 * out_bytes, 6 * out_bytes};
}

EpilogueBytes glu_clamp_bytes(int64_t in_bytes) {
  // forward: clamp both halves (read 1, write 1), cat (read 1, write 1)
  // backward: masked gradients (read grad and input, write grad: 3), cat of the halves (read 1, write 1)
  return {4 * in_bytes, 5 * in_bytes};
}

}  // namespace mgt::cost
