// The kernel variants sharded execution uses, checked against the unsharded kernels (themselves
// checked against PyTorch in kernels_test.cpp): attention for a subset of query positions against
// all keys (context parallelism) and a linear layer on a column slice of a wider weight (row-parallel
// tensor parallelism).
#include "mgt/runtime/cpu/kernels.hpp"

#include "random_floats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace mgt::rt::cpu {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed) { return test::random_floats(n, seed); }

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Rows `positions` of a (B, T, H, D) tensor as a (B, P, H, D) tensor.
std::vector<float> take_rows(const std::vector<float>& x, int64_t B, int64_t T, int64_t HD,
                             const std::vector<int64_t>& positions) {
  const auto P = static_cast<int64_t>(positions.size());
  std::vector<float> out(static_cast<size_t>(B * P * HD));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < P; ++p)
      std::copy_n(x.begin() + (b * T + positions[static_cast<size_t>(p)]) * HD, HD, out.begin() + (b * P + p) * HD);
  return out;
}

class AttentionSubset : public ::testing::TestWithParam<int64_t> {};  // sliding window (0 = none)

TEST_P(AttentionSubset, QueriesAtPositionsEqualThoseRowsOfFullAttention) {
  const int64_t B = 2, T = 8, H = 4, KVH = 2, D = 8;
  const std::vector<int64_t> positions{1, 6, 2, 5};  // the load-balanced split's rank 1 of cp = 2
  const auto P = static_cast<int64_t>(positions.size());
  AttentionConfig full{.B = B, .T = T, .H = H, .KVH = KVH, .D = D, .causal = true, .window = GetParam()};
  const auto q = random_vector(static_cast<size_t>(B * T * H * D), 1);
  const auto k = random_vector(static_cast<size_t>(B * T * KVH * D), 2);
  const auto v = random_vector(static_cast<size_t>(B * T * KVH * D), 3);
  const auto dout_full = random_vector(static_cast<size_t>(B * T * H * D), 4);

  // Full attention; its backward with the output gradient zero outside `positions`, so the key and
  // value gradients hold exactly the selected queries' contributions.
  std::vector<float> out(q.size()), lse(static_cast<size_t>(B * H * T)),
      scratch(static_cast<size_t>(attention_backward_scratch(full)));
  attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), full, scratch.data());
  std::vector<float> dmasked(dout_full.size(), 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p : positions)
      std::copy_n(dout_full.begin() + (b * T + p) * H * D, H * D, dmasked.begin() + (b * T + p) * H * D);
  std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  attention_backward(dq.data(), dk.data(), dv.data(), dmasked.data(), q.data(), k.data(), v.data(), lse.data(),
                     full, scratch.data());

  AttentionConfig sub = full;
  sub.T = P;
  sub.Tk = T;
  sub.q_pos = positions.data();
  const auto q_sub = take_rows(q, B, T, H * D, positions);
  const auto dout_sub = take_rows(dout_full, B, T, H * D, positions);
  std::vector<float> out_sub(q_sub.size()), lse_sub(static_cast<size_t>(B * H * P)),
      scratch_sub(static_cast<size_t>(attention_backward_scratch(sub)));
  attention_forward(out_sub.data(), lse_sub.data(), q_sub.data(), k.data(), v.data(), sub, scratch_sub.data());
  EXPECT_LT(max_abs_diff(out_sub, take_rows(out, B, T, H * D, positions)), 1e-5f);

  std::vector<float> dq_sub(q_sub.size(), 0.0f), dk_sub(k.size(), 0.0f), dv_sub(v.size(), 0.0f);
  attention_backward(dq_sub.data(), dk_sub.data(), dv_sub.data(), dout_sub.data(), q_sub.data(), k.data(), v.data(),
                     lse_sub.data(), sub, scratch_sub.data());
  EXPECT_LT(max_abs_diff(dq_sub, take_rows(dq, B, T, H * D, positions)), 1e-5f);
  EXPECT_LT(max_abs_diff(dk_sub, dk), 1e-5f);
  EXPECT_LT(max_abs_diff(dv_sub, dv), 1e-5f);
  // Keys after a query's position get no gradient from it: position 7 is after every selected query.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < KVH * D; ++i) EXPECT_EQ(dk_sub[static_cast<size_t>((b * T + 7) * KVH * D + i)], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Window, AttentionSubset, ::testing::Values(0, 3));

TEST(LinearStrided, ColumnSliceOfAWiderWeightEqualsTheCopiedSlice) {
  const int64_t N = 5, IC_full = 12, IC = 4, OC = 3, first = 8;  // the third of three input slices
  const auto w_full = random_vector(static_cast<size_t>(OC * IC_full), 5);
  const auto x = random_vector(static_cast<size_t>(N * IC), 6);
  const auto dy = random_vector(static_cast<size_t>(N * OC), 7);
  std::vector<float> w(static_cast<size_t>(OC * IC));
  for (int64_t o = 0; o < OC; ++o) std::copy_n(w_full.begin() + o * IC_full + first, IC, w.begin() + o * IC);

  std::vector<float> y(static_cast<size_t>(N * OC)), y_strided(y.size());
  linear_forward(y.data(), x.data(), w.data(), nullptr, N, IC, OC);
  linear_forward(y_strided.data(), x.data(), w_full.data() + first, nullptr, N, IC, OC, IC_full);
  EXPECT_LT(max_abs_diff(y_strided, y), 1e-6f);

  std::vector<float> dx(x.size(), 0.0f), dw(w.size(), 0.0f), dx_s(x.size(), 0.0f), dw_full(w_full.size(), 0.0f);
  linear_backward(dx.data(), dw.data(), nullptr, dy.data(), x.data(), w.data(), N, IC, OC);
  linear_backward(dx_s.data(), dw_full.data() + first, nullptr, dy.data(), x.data(), w_full.data() + first, N, IC, OC,
                  IC_full);
  EXPECT_LT(max_abs_diff(dx_s, dx), 1e-6f);
  for (int64_t o = 0; o < OC; ++o)
    for (int64_t i = 0; i < IC_full; ++i) {
      const float got = dw_full[static_cast<size_t>(o * IC_full + i)];
      if (i < first) EXPECT_EQ(got, 0.0f) << "outside the slice";
      else EXPECT_NEAR(got, dw[static_cast<size_t>(o * IC + i - first)], 1e-6f);
    }
}

}  // namespace
}  // namespace mgt::rt::cpu
