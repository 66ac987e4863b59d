// The communicator interface the executor runs a Schedule's Collective, Send and Recv instructions
// on; the MPI backend (mpi_communicator.hpp) and, later, the NCCL backend implement it. Groups are
// named by mesh axes exactly as in ir::Collective; semantics and buffer rules: docs/runtime_communicator.md.
//
//   rt::MpiCommunicator comm(mesh);                        // mesh {dp_shard 2, cp 2, tp 2}, 8 ranks
//   comm.all_reduce(grad, grad, n, {"dp_shard", "cp"});    // in place, sum over 4 ranks
//   comm.all_gather(w + comm.group_rank({"tp"}) * n, w, n, {"tp"});   // in place, 2*n outputs
#pragma once

#include "mgt/ir/collective.hpp"
#include "mgt/ir/schedule.hpp"

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mgt::rt {

/// Mesh axes naming a group, as in ir::Collective::axes. The group of a rank is every rank that shares
/// its coordinates on all other axes; order inside the list does not matter (a set), axes of size 1
/// change nothing, and an empty list is the rank alone.
using Axes = std::vector<std::string>;

/// Position of `rank` inside its group over `axes`: row-major over the group's axes in mesh order
/// (outermost first), the same as ordering the members by global rank. Throws std::invalid_argument
/// for an axis the mesh lacks.
int64_t group_rank(const ir::Mesh& mesh, int64_t rank, const Axes& axes);

/// The global rank reached from `rank` by moving `offset` steps along `axis`, modulo the axis size
/// (ir::Send / ir::Recv). Throws std::invalid_argument for an axis the mesh lacks.
int64_t peer_rank(const ir::Mesh& mesh, int64_t rank, std::string_view axis, int64_t offset);

/// One half of a point-to-point exchange issued in a batch (ir::Send / ir::Recv with batch_with_next).
struct PointToPoint {
  enum class Kind { send, recv };
  Kind kind = Kind::send;
  float* buffer = nullptr;  ///< read for send, written for recv
  int64_t count = 0;        ///< elements
  std::string axis;         ///< mesh axis the peer lies along
  int64_t offset = 0;       ///< peer = this rank moved by offset along axis (mod its size)
  int64_t tag = 0;          ///< a send matches the peer's recv with the opposite offset and this tag
};

/// Collectives and point-to-point transfers over float buffers, counts in elements (the extents each
/// count implies are the collective table's, ir::collective_extents). Every rank of the
/// group must call a collective in the same order with the same counts (NCCL's rule for one
/// communicator). Reductions are sums. Out-of-place calls need disjoint buffers; the in-place forms
/// follow NCCL: all_reduce/all_to_all/broadcast with send == recv, all_gather with
/// send == recv + group_rank * count, reduce_scatter with recv == send + group_rank * count.
/// Calls block until this rank's part is complete. Errors throw (std::invalid_argument for misuse,
/// a backend error carrying the backend's message for transport failures).
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int64_t rank() const = 0;        ///< global rank, 0 .. world_size()-1
  virtual int64_t world_size() const = 0;  ///< equals ir::num_ranks(mesh())
  virtual const ir::Mesh& mesh() const = 0;

  /// recv[i] = sum over the group of send[i], for i < count.
  virtual void all_reduce(const float* send, float* recv, int64_t count, const Axes& axes) = 0;
  /// recv[i] = max over the group of send[i] (ir::ReduceOp::max: the vocab-parallel loss's maximum).
  virtual void all_reduce_max(const float* send, float* recv, int64_t count, const Axes& axes) = 0;
  /// recv[g * count + i] = send[i] of group rank g; recv holds group_size * count elements.
  virtual void all_gather(const float* send, float* recv, int64_t count, const Axes& axes) = 0;
  /// recv[i] = sum over the group of send[group_rank * count + i]; send holds group_size * count.
  virtual void reduce_scatter(const float* send, float* recv, int64_t count, const Axes& axes) = 0;
  /// Chunk j (count elements) of send goes to group rank j; recv chunk g comes from group rank g.
  /// Both buffers hold group_size * count elements.
  virtual void all_to_all(const float* send, float* recv, int64_t count, const Axes& axes) = 0;
  /// buffer of group rank 0 is copied to every member (ir::CollectiveKind::broadcast).
  virtual void broadcast(float* buffer, int64_t count, const Axes& axes) = 0;

  /// Sends count elements to peer_rank(rank, axis, offset); returns when the matching recv has
  /// started (rendezvous, like NCCL), so a schedule that deadlocks on GPUs deadlocks here too.
  virtual void send(const float* buffer, int64_t count, std::string_view axis, int64_t offset, int64_t tag) = 0;
  /// Receives count elements from peer_rank(rank, axis, offset) sent with the same tag.
  virtual void recv(float* buffer, int64_t count, std::string_view axis, int64_t offset, int64_t tag) = 0;
  /// Issues every transfer at once and waits for all (ncclGroupStart/End, batch_isend_irecv): the
  /// form ring exchanges need to avoid deadlock.
  virtual void batch(std::span<const PointToPoint> transfers) = 0;

  /// Returns once every member of the group has called it (empty axes: no-op; all axes: the world).
  virtual void barrier(const Axes& axes) = 0;

  /// Number of ranks in the group over `axes` (ir::group_size; throws for an unknown axis).
  int64_t group_size(const Axes& axes) const;
  /// This rank's position in the group over `axes` (the free function group_rank).
  int64_t group_rank(const Axes& axes) const { return rt::group_rank(mesh(), rank(), axes); }
  /// Every axis of the mesh, outermost first: the world as a group.
  Axes all_axes() const;
};

/// The Communicator overrides, declared once for every backend class (MpiCommunicator,
/// NcclCommunicator): each implements the whole interface, so each declares the same list.
#define MGT_COMMUNICATOR_OVERRIDES                                                                          \
  int64_t rank() const override;                                                                            \
  int64_t world_size() const override;                                                                      \
  const ir::Mesh& mesh() const override;                                                                    \
  void all_reduce(const float* send, float* recv, int64_t count, const Axes& axes) override;                \
  void all_reduce_max(const float* send, float* recv, int64_t count, const Axes& axes) override;            \
  void all_gather(const float* send, float* recv, int64_t count, const Axes& axes) override;                \
  void reduce_scatter(const float* send, float* recv, int64_t count, const Axes& axes) override;            \
  void all_to_all(const float* send, float* recv, int64_t count, const Axes& axes) override;                \
  void broadcast(float* buffer, int64_t count, const Axes& axes) override;                                  \
  void send(const float* buffer, int64_t count, std::string_view axis, int64_t offset, int64_t tag) override; \
  void recv(float* buffer, int64_t count, std::string_view axis, int64_t offset, int64_t tag) override;     \
  void batch(std::span<const PointToPoint> transfers) override;                                             \
  void barrier(const Axes& axes) override

// ---- small inline helpers shared by every backend ----

namespace detail {
inline size_t require_axis(const ir::Mesh& mesh, std::string_view axis) {
  auto i = ir::axis_index(mesh, axis);
  if (!i) {
    std::string names;
    for (const auto& a : mesh.axes) names += (names.empty() ? "" : ",") + a.name;
    throw std::invalid_argument("unknown mesh axis '" + std::string(axis) + "' (hint: the mesh has " +
                                (names.empty() ? std::string("no axes") : names) + ")");
  }
  return *i;
}
}  // namespace detail

inline int64_t group_rank(const ir::Mesh& mesh, int64_t rank, const Axes& axes) {
  std::vector<bool> in_group(mesh.axes.size(), false);
  for (const auto& a : axes) in_group[detail::require_axis(mesh, a)] = true;
  std::vector<int64_t> coords = ir::rank_coords(mesh, rank);
  int64_t index = 0;
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    if (in_group[i]) index = index * mesh.axes[i].size + coords[i];
  return index;
}

inline int64_t peer_rank(const ir::Mesh& mesh, int64_t rank, std::string_view axis, int64_t offset) {
  size_t a = detail::require_axis(mesh, axis);
  std::vector<int64_t> coords = ir::rank_coords(mesh, rank);
  int64_t size = mesh.axes[a].size;
  coords[a] = ((coords[a] + offset) % size + size) % size;
  int64_t peer = 0;
  for (size_t i = 0; i < mesh.axes.size(); ++i) peer = peer * mesh.axes[i].size + coords[i];
  return peer;
}

inline int64_t Communicator::group_size(const Axes& axes) const {
  for (const auto& a : axes) detail::require_axis(mesh(), a);
  int64_t n = 1;
  std::vector<bool> seen(mesh().axes.size(), false);
  for (const auto& a : axes) {
    size_t i = *ir::axis_index(mesh(), a);
    if (!seen[i]) n *= mesh().axes[i].size;
    seen[i] = true;
  }
  return n;
}

inline Axes Communicator::all_axes() const {
  Axes axes;
  for (const auto& a : mesh().axes) axes.push_back(a.name);
  return axes;
}

/// True when the send and receive buffers of a `kind` call with `count` over `axes` share an element,
/// their extents taken from the collective table (ir::collective_extents). Backends reject such calls
/// unless they are the in-place form. The group size is looked up only where the count is one member's
/// block (the other kinds' extents do not depend on it).
inline bool buffers_overlap(const Communicator& comm, ir::CollectiveKind kind, const float* send, const float* recv,
                            int64_t count, const Axes& axes) {
  const int64_t n = ir::count_is_per_member(kind) ? comm.group_size(axes) : 1;
  const ir::CollectiveExtents e = ir::collective_extents(kind, count, n);
  if (e.send <= 0 || e.recv <= 0) return false;
  const auto lo_send = reinterpret_cast<uintptr_t>(send), lo_recv = reinterpret_cast<uintptr_t>(recv);
  return lo_send < lo_recv + static_cast<uintptr_t>(e.recv) * sizeof(float) &&
         lo_recv < lo_send + static_cast<uintptr_t>(e.send) * sizeof(float);
}

}  // namespace mgt::rt
