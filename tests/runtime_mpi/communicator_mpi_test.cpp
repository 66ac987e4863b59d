// MpiCommunicator under mpirun (ctest runs it with 2, 4 and 8 ranks; a plain run is one rank): every
// collective over every subset of the mesh axes, in and out of place, point-to-point rings along each
// axis, the timing helper and the error paths. Inputs are small integers derived from (rank, index,
// call), so each rank computes the exact expected result from the mesh alone; every element is
// checked. One summary line per collective; exit status 1 on any mismatch, so ctest fails.
#include "mgt/ir/collective.hpp"
#include "mgt/ir/error.hpp"
#include "mgt/runtime/mpi_communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

namespace {

using mgt::ir::CollectiveKind;
using mgt::ir::Mesh;
using mgt::rt::Axes;
using mgt::rt::MpiCommunicator;

/// Ranks in the MPI world, asked of the launcher before the communicator exists.
Mesh mesh_for(int64_t world) {
  if (world == 2) return Mesh{{{"dp", 2}}};
  if (world == 4) return Mesh{{{"dp", 2}, {"tp", 2}}};
  if (world == 8) return Mesh{{{"dp_shard", 2}, {"cp", 2}, {"tp", 2}}};
  return Mesh{{{"dp", world}}};
}

/// What rank `r` sends at index `i` in call number `call`: integers 0..16, so sums are exact.
float input(int64_t r, int64_t i, int64_t call) { return static_cast<float>((r * 7 + i * 3 + call * 5) % 17); }

/// Coordinates of a rank, computed here rather than with ir::rank_coords (row-major, last axis fastest).
std::vector<int64_t> coords_of(const Mesh& mesh, int64_t rank) {
  std::vector<int64_t> c(mesh.axes.size());
  for (size_t i = mesh.axes.size(); i-- > 0;) {
    c[i] = rank % mesh.axes[i].size;
    rank /= mesh.axes[i].size;
  }
  return c;
}

/// The members of `rank`'s group over the axes in `mask`, in group order (ascending global rank).
std::vector<int64_t> members(const Mesh& mesh, int64_t rank, uint32_t mask) {
  std::vector<int64_t> mine = coords_of(mesh, rank), out;
  for (int64_t r = 0; r < mgt::ir::num_ranks(mesh); ++r) {
    std::vector<int64_t> other = coords_of(mesh, r);
    bool same = true;
    for (size_t i = 0; i < mesh.axes.size(); ++i) same = same && ((mask >> i & 1u) || other[i] == mine[i]);
    if (same) out.push_back(r);
  }
  return out;
}

struct Tally {
  int64_t calls = 0, elements = 0, wrong = 0;
};

struct Checker {
  int64_t rank = 0;
  std::map<std::string, Tally> tallies;  // by collective name
  int printed = 0;

  void expect(const std::string& what, const std::string& context, const std::vector<float>& got,
              const std::vector<float>& expected) {
    Tally& t = tallies[what];
    ++t.calls;
    for (size_t i = 0; i < expected.size(); ++i) {
      ++t.elements;
      float g = i < got.size() ? got[i] : -1e30f;
      if (g == expected[i]) continue;
      ++t.wrong;
      if (printed++ < 10)
        std::fprintf(stderr, "rank %lld: %s %s: element %zu is %g, expected %g\n", static_cast<long long>(rank),
                     what.c_str(), context.c_str(), i, static_cast<double>(g), static_cast<double>(expected[i]));
    }
  }
};

std::string axes_text(const Axes& axes) {
  std::string s;
  for (const auto& a : axes) s += (s.empty() ? "" : ",") + a;
  return s.empty() ? "{}" : s;
}

/// Every collective, out of place and in the in-place forms, over the group `axes`, at `count`.
void check_collectives(MpiCommunicator& comm, Checker& check, const Axes& axes, uint32_t mask, int64_t count,
                       int64_t& call) {
  const Mesh& mesh = comm.mesh();
  const int64_t rank = comm.rank();
  std::vector<int64_t> group = members(mesh, rank, mask);
  const int64_t n = static_cast<int64_t>(group.size());
  int64_t g = 0;
  while (group[static_cast<size_t>(g)] != rank) ++g;
  std::string context = "group=" + axes_text(axes) + " count=" + std::to_string(count);
  if (comm.group_size(axes) != n || comm.group_rank(axes) != g)
    check.expect("group_rank", context, {static_cast<float>(comm.group_rank(axes))}, {static_cast<float>(g)});

  auto fill = [&](int64_t size, int64_t c) {
    std::vector<float> v(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) v[static_cast<size_t>(i)] = input(rank, i, c);
    return v;
  };
  for (int in_place = 0; in_place < 2; ++in_place) {
    std::string ctx = context + (in_place ? " in-place" : " out-of-place");

    // all_reduce / all_reduce_max: recv[i] = sum / max over members of input(m, i), from `start`.
    std::vector<float> send, recv, want;
    auto check_reduce = [&](const char* name, float start, auto combine, auto reduce) {
      const int64_t c = call++;
      send = fill(count, c);
      recv.assign(static_cast<size_t>(count), -1);
      want.assign(static_cast<size_t>(count), start);
      for (int64_t m : group)
        for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] = combine(want[static_cast<size_t>(i)], input(m, i, c));
      if (in_place) {
        reduce(send.data(), send.data());
        recv = send;
      } else {
        reduce(send.data(), recv.data());
      }
      check.expect(name, ctx, recv, want);
    };
    check_reduce("all_reduce", 0.0f, [](float a, float b) { return a + b; },
                 [&](const float* s, float* r) { comm.all_reduce(s, r, count, axes); });
    check_reduce("all_reduce_max", -1e30f, [](float a, float b) { return std::max(a, b); },
                 [&](const float* s, float* r) { comm.all_reduce_max(s, r, count, axes); });
    int64_t c = 0;

    // all_gather: recv[k*count + i] = input(member k, i).
    c = call++;
    want.assign(static_cast<size_t>(n * count), 0);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(k * count + i)] = input(group[k], i, c);
    send = fill(count, c);
    recv.assign(static_cast<size_t>(n * count), -1);
    if (in_place) {
      std::copy(send.begin(), send.end(), recv.begin() + g * count);
      comm.all_gather(recv.data() + g * count, recv.data(), count, axes);
    } else {
      comm.all_gather(send.data(), recv.data(), count, axes);
    }
    check.expect("all_gather", ctx, recv, want);

    // reduce_scatter: recv[i] = sum over members of input(m, g*count + i).
    c = call++;
    want.assign(static_cast<size_t>(count), 0);
    for (int64_t m : group)
      for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] += input(m, g * count + i, c);
    send = fill(n * count, c);
    if (in_place) {
      comm.reduce_scatter(send.data(), send.data() + g * count, count, axes);
      recv.assign(send.begin() + g * count, send.begin() + (g + 1) * count);
    } else {
      recv.assign(static_cast<size_t>(count), -1);
      comm.reduce_scatter(send.data(), recv.data(), count, axes);
    }
    check.expect("reduce_scatter", ctx, recv, want);

    // all_to_all: recv[k*count + i] = input(member k, g*count + i).
    c = call++;
    want.assign(static_cast<size_t>(n * count), 0);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(k * count + i)] = input(group[k], g * count + i, c);
    send = fill(n * count, c);
    recv.assign(static_cast<size_t>(n * count), -1);
    if (in_place) {
      comm.all_to_all(send.data(), send.data(), count, axes);
      recv = send;
    } else {
      comm.all_to_all(send.data(), recv.data(), count, axes);
    }
    check.expect("all_to_all", ctx, recv, want);

    // broadcast (in place by nature; run once): every member ends with group rank 0's input.
    c = call++;
    if (in_place) continue;
    want.assign(static_cast<size_t>(count), 0);
    for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] = input(group[0], i, c);
    send = fill(count, c);
    comm.broadcast(send.data(), count, axes);
    check.expect("broadcast", ctx, send, want);
  }
  comm.barrier(axes);
}

/// The rank `offset` steps along mesh axis `a` (mod its size), computed from coordinates here.
int64_t peer_of(const Mesh& mesh, int64_t rank, size_t a, int64_t offset) {
  std::vector<int64_t> c = coords_of(mesh, rank);
  int64_t size = mesh.axes[a].size;
  c[a] = ((c[a] + offset) % size + size) % size;
  int64_t r = 0;
  for (size_t i = 0; i < mesh.axes.size(); ++i) r = r * mesh.axes[i].size + c[i];
  return r;
}

/// Rings along each axis of size > 1: blocking send/recv (even coordinates send first) in both
/// directions, then one batch exchanging with both neighbours at once (tags tell them apart).
void check_point_to_point(MpiCommunicator& comm, Checker& check, int64_t count, int64_t& call) {
  const Mesh& mesh = comm.mesh();
  const int64_t rank = comm.rank();
  std::vector<int64_t> mine = coords_of(mesh, rank);
  for (size_t a = 0; a < mesh.axes.size(); ++a) {
    if (mesh.axes[a].size < 2) continue;
    const std::string& axis = mesh.axes[a].name;
    std::string context = "axis=" + axis + " count=" + std::to_string(count);
    for (int64_t offset : {1, -1}) {
      int64_t c = call++, from = peer_of(mesh, rank, a, -offset);
      std::vector<float> send(static_cast<size_t>(count)), recv(static_cast<size_t>(count), -1), want = recv;
      for (int64_t i = 0; i < count; ++i) {
        send[static_cast<size_t>(i)] = input(rank, i, c);
        want[static_cast<size_t>(i)] = input(from, i, c);
      }
      bool even = mine[a] % 2 == 0;
      int64_t tag = 10 + offset;
      if (even) comm.send(send.data(), count, axis, offset, tag);
      comm.recv(recv.data(), count, axis, -offset, tag);
      if (!even) comm.send(send.data(), count, axis, offset, tag);
      check.expect("send_recv", context + " offset=" + std::to_string(offset), recv, want);
    }
    // One batch: send to +1 and -1, receive from -1 and +1; tag 1 = forward, tag 2 = backward.
    int64_t c = call++;
    std::vector<float> send(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) send[static_cast<size_t>(i)] = input(rank, i, c);
    std::vector<float> from_prev(static_cast<size_t>(count), -1), from_next = from_prev, want_prev = from_prev,
                                                                  want_next = from_prev;
    for (int64_t i = 0; i < count; ++i) {
      want_prev[static_cast<size_t>(i)] = input(peer_of(mesh, rank, a, -1), i, c);
      want_next[static_cast<size_t>(i)] = input(peer_of(mesh, rank, a, +1), i, c);
    }
    using Kind = mgt::rt::PointToPoint::Kind;
    std::vector<mgt::rt::PointToPoint> ring = {
        {Kind::send, send.data(), count, axis, +1, 1},
        {Kind::recv, from_prev.data(), count, axis, -1, 1},
        {Kind::send, send.data(), count, axis, -1, 2},
        {Kind::recv, from_next.data(), count, axis, +1, 2},
    };
    comm.batch(ring);
    check.expect("batch", context + " from -1", from_prev, want_prev);
    check.expect("batch", context + " from +1", from_next, want_next);
  }
}

/// Error paths that need no communication: unknown axis, wrong world size, self-send.
void check_errors(MpiCommunicator& comm, Checker& check) {
  auto expect_throw = [&](const std::string& what, auto&& body) {
    bool threw = false;
    try {
      body();
    } catch (const std::exception& e) {
      threw = true;
      if (comm.rank() == 0) std::printf("  expected error (%s): %s\n", what.c_str(), e.what());
    }
    check.expect("errors", what, {threw ? 1.0f : 0.0f}, {1.0f});
  };
  float x = 0;
  expect_throw("unknown axis", [&] { comm.all_reduce(&x, &x, 1, {"pp"}); });
  expect_throw("world size", [&] {
    Mesh wrong{{{"dp", comm.world_size() + 1}}};
    MpiCommunicator other(wrong);
  });
  expect_throw("self send", [&] { comm.send(&x, 1, comm.mesh().axes[0].name, comm.mesh().axes[0].size, 0); });
  expect_throw("bad tag", [&] {
    std::vector<mgt::rt::PointToPoint> bad = {{mgt::rt::PointToPoint::Kind::recv, &x, 1, comm.mesh().axes[0].name, 1, -3}};
    comm.batch(bad);
  });
  expect_throw("overlapping buffers", [&] {
    const Axes axes = {comm.mesh().axes[0].name};
    std::vector<float> v(static_cast<size_t>(4 * comm.group_size(axes)));
    comm.all_to_all(v.data(), v.data() + 1, 2, axes);
  });
}

/// time_collective over the whole world for each kind: results checked, time and bandwidths printed.
void check_timing(MpiCommunicator& comm, Checker& check) {
  const Axes world = comm.all_axes();
  const int64_t n = comm.group_size(world);
  const int64_t bytes = 4 * n * 1024;
  for (CollectiveKind kind : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                              CollectiveKind::all_to_all, CollectiveKind::broadcast}) {
    mgt::rt::CollectiveTiming t = mgt::rt::time_collective(comm, kind, world, bytes, /*iterations=*/5);
    check.expect("time_collective", mgt::ir::to_string(kind), {static_cast<float>(t.wrong)}, {0.0f});
    if (comm.rank() == 0)
      std::printf("  probe %-14s n=%lld bytes=%lld time=%.1f us algbw=%.3f GB/s busbw=%.3f GB/s wrong=%lld\n",
                  mgt::ir::to_string(kind).c_str(), static_cast<long long>(n), static_cast<long long>(bytes),
                  t.time_s * 1e6, mgt::rt::algbw_gbps(bytes, t.time_s), mgt::rt::busbw_gbps(kind, n, bytes, t.time_s),
                  static_cast<long long>(t.wrong));
  }
  // nccl-tests' factors.
  bool factors_ok = mgt::ir::bus_factor(CollectiveKind::all_reduce, 8) == 2.0 * 7 / 8 &&
                    mgt::ir::bus_factor(CollectiveKind::all_gather, 4) == 0.75 &&
                    mgt::ir::bus_factor(CollectiveKind::reduce_scatter, 2) == 0.5 &&
                    mgt::ir::bus_factor(CollectiveKind::all_to_all, 1) == 0.0 &&
                    mgt::ir::bus_factor(CollectiveKind::broadcast, 8) == 1.0 &&
                    mgt::rt::algbw_gbps(2'000'000'000, 2.0) == 1.0;
  check.expect("busbw_factor", "nccl-tests factors", {factors_ok ? 1.0f : 0.0f}, {1.0f});
}

int run(double comm_timeout_s) {
  const int64_t world = mgt::rt::mpi_world_size();
  // With a timeout every call takes the nonblocking path polled against a deadline (issue 8).
  MpiCommunicator comm(mesh_for(world), {.timeout_s = comm_timeout_s});
  Checker check;
  check.rank = comm.rank();
  const Mesh& mesh = comm.mesh();
  if (comm.rank() == 0) {
    std::string shape;
    for (const auto& a : mesh.axes) shape += " " + a.name + "=" + std::to_string(a.size);
    std::printf("mesh%s (world %lld)\n", shape.c_str(), static_cast<long long>(comm.world_size()));
  }

  int64_t call = 0;
  for (uint32_t mask = 0; mask < (1u << mesh.axes.size()); ++mask) {
    Axes axes;
    for (size_t i = mesh.axes.size(); i-- > 0;)  // innermost first: the order must not matter
      if (mask >> i & 1u) axes.push_back(mesh.axes[i].name);
    for (int64_t count : {0, 1, 7, 1000}) check_collectives(comm, check, axes, mask, count, call);
  }
  for (int64_t count : {1, 1000}) check_point_to_point(comm, check, count, call);
  check_errors(comm, check);
  check_timing(comm, check);

  // Totals over the world through MPI directly, independent of the communicator under test.
  int64_t any_wrong = 0;
  for (auto& [name, t] : check.tallies) {
    int64_t local[3] = {t.calls, t.elements, t.wrong}, total[3] = {0, 0, 0};
    MPI_Allreduce(local, total, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    any_wrong += total[2];
    if (comm.rank() == 0)
      std::printf("%-16s np=%lld calls=%lld elements=%lld wrong=%lld %s\n", name.c_str(),
                  static_cast<long long>(comm.world_size()), static_cast<long long>(total[0]),
                  static_cast<long long>(total[1]), static_cast<long long>(total[2]), total[2] == 0 ? "OK" : "FAILED");
  }
  if (comm.rank() == 0) std::printf("%s\n", any_wrong == 0 ? "PASSED" : "FAILED");
  return any_wrong == 0 ? 0 : 1;
}

}  // namespace

/// `communicator_mpi_test [--comm-timeout SECONDS]`
int main(int argc, char** argv) {
  try {
    const double timeout_s = argc == 3 && std::string(argv[1]) == "--comm-timeout" ? std::stod(argv[2]) : 0.0;
    return run(timeout_s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    int initialised = 0, finalised = 0;
    MPI_Initialized(&initialised);
    MPI_Finalized(&finalised);
    if (initialised && !finalised) MPI_Abort(MPI_COMM_WORLD, 2);  // peers may wait in a collective
    return 2;
  }
}
