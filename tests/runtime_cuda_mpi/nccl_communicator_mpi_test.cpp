// NcclCommunicator under mpirun, one GPU per rank (scripts/gpu-check runs it over every GPU; ctest runs it
// with 2 ranks, where it exits 77 = skipped when there is no CUDA device). For every subset of the mesh
// axes: each collective, out of place and in place, on CUDA managed buffers; a ring batch along every
// axis; then the timeout path: rank 0 enters an all_reduce rank 1 never joins and must get an NcclError
// naming its rank and the collective within the timeout. Expected values are small integers derived
// from (rank, index), computed from the mesh coordinates alone, and compared exactly.
#include "mgt/runtime/cuda/device.hpp"
#include "mgt/runtime/cuda/kernel_backend.hpp"
#include "mgt/runtime/cuda/nccl_communicator.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <memory_resource>
#include <string>
#include <thread>
#include <vector>

namespace {

using mgt::rt::Axes;
using mgt::rt::NcclCommunicator;
using Vec = std::pmr::vector<float>;

mgt::ir::Mesh mesh_for(int world) {
  if (world == 4) return {{{"dp", 2}, {"tp", 2}}};
  if (world == 8) return {{{"dp_shard", 2}, {"cp", 2}, {"tp", 2}}};
  return {{{"dp", world}}};
}

// Ranks of `rank`'s group over the axes in `mask`, ordered by global rank (= group rank order).
std::vector<int64_t> members(const mgt::ir::Mesh& mesh, int64_t rank, uint32_t mask) {
  std::vector<int64_t> out;
  const auto mine = mgt::ir::rank_coords(mesh, rank);
  for (int64_t r = 0; r < mgt::ir::num_ranks(mesh); ++r) {
    const auto c = mgt::ir::rank_coords(mesh, r);
    bool same = true;
    for (size_t i = 0; i < c.size(); ++i)
      if (!(mask & (1u << i)) && c[i] != mine[i]) same = false;
    if (same) out.push_back(r);
  }
  return out;
}

float value(int64_t rank, int64_t i) { return static_cast<float>(rank * 1000 + i % 997); }

struct Checker {
  int64_t wrong = 0, checks = 0;
  void expect(const std::string& what, const Vec& got, const std::vector<float>& want) {
    ++checks;
    for (size_t i = 0; i < want.size(); ++i)
      if (got[i] != want[i]) {
        if (wrong < 5) std::fprintf(stderr, "%s: [%zu] got %g want %g\n", what.c_str(), i, got[i], want[i]);
        ++wrong;
      }
  }
};

void check_group(NcclCommunicator& comm, std::pmr::memory_resource* mem, Checker& check, uint32_t mask) {
  const auto& mesh = comm.mesh();
  Axes axes;
  for (size_t i = mesh.axes.size(); i-- > 0;)  // innermost first: order must not matter
    if (mask & (1u << i)) axes.push_back(mesh.axes[i].name);
  const std::vector<int64_t> group = members(mesh, comm.rank(), mask);
  const int64_t n = static_cast<int64_t>(group.size()), g = comm.group_rank(axes);
  const int64_t count = 1000;
  const std::string name = "axes mask " + std::to_string(mask);
  Vec send(mem), recv(mem);
  std::vector<float> want;
  auto fill = [&](Vec& v, int64_t size, int64_t rank) {
    v.assign(static_cast<size_t>(size), 0.0f);
    for (int64_t i = 0; i < size; ++i) v[size_t(i)] = value(rank, i);
  };
  // all_reduce (sum), out of place and in place; all_reduce_max
  fill(send, count, comm.rank());
  recv.assign(size_t(count), -1.0f);
  want.assign(size_t(count), 0.0f);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t r : group) want[size_t(i)] += value(r, i);
  comm.all_reduce(send.data(), recv.data(), count, axes);
  check.expect(name + " all_reduce", recv, want);
  comm.all_reduce(send.data(), send.data(), count, axes);
  check.expect(name + " all_reduce in place", send, want);
  fill(send, count, comm.rank());
  for (int64_t i = 0; i < count; ++i) want[size_t(i)] = value(group.back(), i);
  comm.all_reduce_max(send.data(), recv.data(), count, axes);
  check.expect(name + " all_reduce_max", recv, want);
  // all_gather: chunk j from group rank j; in place at recv + g * count
  recv.assign(size_t(n * count), -1.0f);
  want.assign(size_t(n * count), 0.0f);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < count; ++i) want[size_t(j * count + i)] = value(group[size_t(j)], i);
  comm.all_gather(send.data(), recv.data(), count, axes);
  check.expect(name + " all_gather", recv, want);
  fill(recv, n * count, -1);
  for (int64_t i = 0; i < count; ++i) recv[size_t(g * count + i)] = value(comm.rank(), i);
  comm.all_gather(recv.data() + g * count, recv.data(), count, axes);
  check.expect(name + " all_gather in place", recv, want);
  // reduce_scatter: my chunk g of the sum of every member's n*count input
  fill(send, n * count, comm.rank());
  recv.assign(size_t(count), -1.0f);
  want.assign(size_t(count), 0.0f);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t r : group) want[size_t(i)] += value(r, g * count + i);
  comm.reduce_scatter(send.data(), recv.data(), count, axes);
  check.expect(name + " reduce_scatter", recv, want);
  // all_to_all: chunk j of my send goes to group rank j; my recv chunk j comes from group rank j
  fill(send, n * count, comm.rank());
  recv.assign(size_t(n * count), -1.0f);
  want.assign(size_t(n * count), 0.0f);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < count; ++i) want[size_t(j * count + i)] = value(group[size_t(j)], g * count + i);
  comm.all_to_all(send.data(), recv.data(), count, axes);
  check.expect(name + " all_to_all", recv, want);
  comm.all_to_all(send.data(), send.data(), count, axes);
  check.expect(name + " all_to_all in place", send, want);
  // broadcast from group rank 0
  fill(send, count, comm.rank());
  for (int64_t i = 0; i < count; ++i) want[size_t(i)] = value(group.front(), i);
  want.resize(size_t(count));
  comm.broadcast(send.data(), count, axes);
  check.expect(name + " broadcast", send, want);
}

void check_rings(NcclCommunicator& comm, std::pmr::memory_resource* mem, Checker& check) {
  const int64_t count = 300;
  for (const auto& a : comm.mesh().axes) {
    Vec send(mem), from_prev(mem), from_next(mem);
    send.assign(size_t(count), 0.0f);
    for (int64_t i = 0; i < count; ++i) send[size_t(i)] = value(comm.rank(), i);
    from_prev.assign(size_t(count), -1.0f);
    from_next.assign(size_t(count), -1.0f);
    using K = mgt::rt::PointToPoint::Kind;
    const mgt::rt::PointToPoint t[] = {{K::send, send.data(), count, a.name, +1, 1},
                                       {K::send, send.data(), count, a.name, -1, 2},
                                       {K::recv, from_prev.data(), count, a.name, -1, 1},
                                       {K::recv, from_next.data(), count, a.name, +1, 2}};
    comm.batch(t);
    std::vector<float> want_prev(static_cast<size_t>(count)), want_next(static_cast<size_t>(count));
    const int64_t prev = mgt::rt::peer_rank(comm.mesh(), comm.rank(), a.name, -1);
    const int64_t next = mgt::rt::peer_rank(comm.mesh(), comm.rank(), a.name, +1);
    for (int64_t i = 0; i < count; ++i) want_prev[size_t(i)] = value(prev, i), want_next[size_t(i)] = value(next, i);
    check.expect("ring " + a.name + " from prev", from_prev, want_prev);
    check.expect("ring " + a.name + " from next", from_next, want_next);
  }
}

}  // namespace

int main() {
  if (mgt::rt::cuda::device_count().count == 0) {
    std::printf("nccl_communicator_mpi_test: no CUDA device, skipped\n");
    return 77;  // ctest SKIP_RETURN_CODE
  }
  MPI_Init(nullptr, nullptr);
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Checker check;
  {
    NcclCommunicator comm(mesh_for(world), {.timeout_s = 60});
    auto kernels = mgt::rt::cuda::make_kernel_backend(mgt::rt::cuda::Precision::fp32, comm.device());
    std::pmr::memory_resource* mem = kernels->memory();  // CUDA managed memory: host fills, NCCL reads
    for (uint32_t mask = 0; mask < (1u << comm.mesh().axes.size()); ++mask) check_group(comm, mem, check, mask);
    check_rings(comm, mem, check);
  }
  if (world >= 2) {  // the timeout path: rank 0 waits in an all_reduce that rank 1 never joins
    NcclCommunicator comm(mesh_for(world), {.timeout_s = 3});
    auto kernels = mgt::rt::cuda::make_kernel_backend(mgt::rt::cuda::Precision::fp32, comm.device());
    Vec v(16, 1.0f, kernels->memory());
    if (rank == 0) {
      const auto start = std::chrono::steady_clock::now();
      try {
        comm.all_reduce(v.data(), v.data(), 16, comm.all_axes());
        std::fprintf(stderr, "timeout: the all_reduce completed without rank 1\n");
        ++check.wrong;
      } catch (const mgt::rt::NcclError& e) {
        const std::string what = e.what();
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("timeout after %.1f s: %s\n", waited, what.c_str());
        if (what.find("nccl rank 0") == std::string::npos || what.find("all_reduce") == std::string::npos) ++check.wrong;
      }
      ++check.checks;
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(5));  // never joins
    }
  }
  int64_t totals[2] = {check.wrong, check.checks};
  MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("nccl_communicator_mpi_test: %d ranks, %lld checks, %lld wrong\n", world,
                static_cast<long long>(totals[1]), static_cast<long long>(totals[0]));
  MPI_Finalize();
  return totals[0] == 0 ? 0 : 1;
}
