// Deterministic standard-normal test inputs shared by the runtime's kernel tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace mgt::rt::test {

/// n floats drawn from N(0, 1) by a Mersenne twister seeded with `seed`.
inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

}  // namespace mgt::rt::test
