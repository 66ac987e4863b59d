// Host-side pieces of `probe --backend cuda` that run without a GPU: the NVLink reading of
// `nvidia-smi topo -m` and the bf16-exact probe inputs the host recomputes to check GEMM outputs.
#include "mgt/runtime/cuda/kernels.hpp"
#include "mgt/runtime/cuda/probe.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

namespace mgt::rt::cuda {
namespace {

// Shaped like nvidia-smi 5xx output on an 4-GPU NVLink node (tabs between cells, legend after).
constexpr const char* kNvlinkTopo =
    "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tNV18\tNV18\tPXB\t0-55\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tNV18\tNV18\tPXB\t0-55\t0\t\tN/A\n"
    "GPU2\tNV18\tNV18\t X \tNV18\tSYS\t56-111\t1\t\tN/A\n"
    "GPU3\tNV18\tNV18\tNV18\t X \tSYS\t56-111\t1\t\tN/A\n"
    "NIC0\tPXB\tPXB\tSYS\tSYS\t X \n\n"
    "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n";

TEST(ProbeTopology, NvlinkBetweenEveryPair) {
  EXPECT_TRUE(topo_shows_nvlink_between_all(kNvlinkTopo, 4));
  EXPECT_FALSE(topo_shows_nvlink_between_all(kNvlinkTopo, 5)) << "a GPU row is missing";
  EXPECT_FALSE(topo_shows_nvlink_between_all(kNvlinkTopo, 1)) << "one GPU has no NVLink domain";
  EXPECT_FALSE(topo_shows_nvlink_between_all("", 4)) << "nvidia-smi missing";
}

TEST(ProbeTopology, OnePcieOrHostPairIsNotAnNvlinkDomain) {
  const char* pcie =
      "\tGPU0\tGPU1\tCPU Affinity\n"
      "GPU0\t X \tPIX\t0-15\n"
      "GPU1\tPIX\t X \t0-15\n";
  EXPECT_FALSE(topo_shows_nvlink_between_all(pcie, 2));
  const char* mixed =
      "\tGPU0\tGPU1\tGPU2\n"
      "GPU0\t X \tNV4\tSYS\n"
      "GPU1\tNV4\t X \tNV4\n"
      "GPU2\tSYS\tNV4\t X \n";
  EXPECT_FALSE(topo_shows_nvlink_between_all(mixed, 3));
}

TEST(ProbeInputs, Bf16ExactUniformAndDeterministic) {
  std::set<float> distinct;
  for (int64_t i = 0; i < 4096; ++i) {
    const float v = probe_uniform_bf16_value(7, i);
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    EXPECT_EQ(bits & 0xFFFFu, 0u) << "not a bf16 value: " << v;
    EXPECT_EQ(v, probe_uniform_bf16_value(7, i));
    distinct.insert(v);
  }
  EXPECT_GT(distinct.size(), 200u);  // 2^8 mantissa steps per binade: spread, not constant
  EXPECT_NE(probe_uniform_bf16_value(7, 0), probe_uniform_bf16_value(8, 0));
}

}  // namespace
}  // namespace mgt::rt::cuda
