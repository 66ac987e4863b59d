// The NCCL communicator on one process: the no-device error (runs everywhere) and, on a GPU, a world
// of one rank (MPI singleton): collectives over a group of one are copies, a self exchange in a batch
// is a copy, argument errors are the interface's. Multi-rank NCCL runs in scripts/gpu-check.
#include "mgt/runtime/cuda/device.hpp"
#include "mgt/runtime/cuda/nccl_communicator.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace mgt::rt {
namespace {

TEST(NcclCommunicator, WithoutADeviceFailsBeforeStartingMpi) {
  const cuda::DeviceCount n = cuda::device_count();
  if (n.count > 0) GTEST_SKIP() << n.count << " CUDA device(s) present: the no-device path is not reachable";
  try {
    NcclCommunicator comm(ir::Mesh{{{"dp", 1}}});
    ADD_FAILURE() << "constructed without a device";
  } catch (const cuda::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

TEST(NcclCommunicator, WorldOfOneRank) {
  const cuda::DeviceCount n = cuda::device_count();
  if (n.count == 0) GTEST_SKIP() << "no CUDA device: " << n.reason;
  NcclCommunicator comm(ir::Mesh{{{"dp", 1}, {"tp", 1}}}, {.timeout_s = 60});
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 1);
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  cuda::DeviceArray<float> send(a), recv(6), other(6);
  recv.zero();
  comm.all_reduce(send.data(), recv.data(), 6, {"dp", "tp"});
  EXPECT_EQ(recv.download(), a);
  recv.zero();
  comm.all_gather(send.data(), recv.data(), 6, {"tp"});
  EXPECT_EQ(recv.download(), a);
  recv.zero();
  comm.reduce_scatter(send.data(), recv.data(), 6, {"dp"});
  EXPECT_EQ(recv.download(), a);
  comm.all_to_all(send.data(), send.data(), 6, {"dp"});  // in place over one rank: unchanged
  EXPECT_EQ(send.download(), a);
  comm.broadcast(send.data(), 6, {});
  comm.barrier(comm.all_axes());
  // A ring exchange with itself (offset 1 along an axis of size 1) inside a batch is a device copy.
  other.zero();
  const PointToPoint transfers[] = {{PointToPoint::Kind::send, send.data(), 6, "dp", +1, 7},
                                    {PointToPoint::Kind::recv, other.data(), 6, "dp", -1, 7}};
  comm.batch(transfers);
  EXPECT_EQ(other.download(), a);
  EXPECT_THROW(comm.send(send.data(), 6, "dp", 1, 0), std::invalid_argument);  // blocking self send
  EXPECT_THROW(comm.all_reduce(send.data(), send.data() + 1, 4, {"dp"}), std::invalid_argument);
  EXPECT_THROW(comm.all_reduce(send.data(), recv.data(), 6, {"pp"}), std::invalid_argument);
}

}  // namespace
}  // namespace mgt::rt
