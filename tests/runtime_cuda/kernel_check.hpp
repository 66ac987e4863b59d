// Inputs and the element-wise comparison shared by the CUDA kernel tests (kernels_cuda_test.cpp on a
// device, kernels_emulated_test.cpp through cuda_emulation.hpp), both against the CPU kernels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace mgt::rt::test {

using Vec = std::vector<float>;

/// n floats uniform in [-scale, scale], the same for a given seed.
inline Vec random_vec(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  Vec v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

/// expect_close(result, correct, rtol, atol, what): |result - correct| <= atol + rtol * |correct| for every
/// element; reports the first failures, naming `backend` (what computed `result`) against the cpu.
struct CloseCheck {
  const char* backend;
  void operator()(const Vec& result, const Vec& correct, float rtol, float atol, const char* what) const {
    ASSERT_EQ(result.size(), correct.size()) << what;
    int failures = 0;
    for (size_t i = 0; i < correct.size() && failures < 5; ++i) {
      const float tol = atol + rtol * std::fabs(correct[i]);
      if (!(std::fabs(result[i] - correct[i]) <= tol)) {
        ADD_FAILURE() << what << "[" << i << "]: " << backend << " " << result[i] << ", cpu " << correct[i]
                      << " (tol " << tol << ")";
        ++failures;
      }
    }
  }
};

}  // namespace mgt::rt::test
