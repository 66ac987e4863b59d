// The one collective table (docs/cluster.md §5): the kinds, the reduction, and per kind the
// buffers one rank hands to and gets from the call and nccl-tests' bus-bandwidth factor, filled side by
// side as nccl-tests does per collective (src/all_gather.cu: AllGatherGetCollByteCount + AllGatherGetBw).
// Schedules, the cost model, the simulator, the spmd lowering, the probes and the communicators all read
// it; pricing (link latency and bandwidth) stays in cost_model.
//
//   ir::CollectiveBytes b = ir::collective_bytes(ir::CollectiveKind::all_gather, /*bytes=*/1 << 20, 8);
//   // b.send_bytes == 131072, b.recv_bytes == 1 << 20, b.param_bytes == 131072, b.bus_factor == 7.0 / 8
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mgt::ir {

/// send_recv is one point-to-point transfer between two ranks; a Schedule spells it as a Send and a
/// Recv (its Collective carries only the other five), the cost model prices pipeline hops with it.
/// MLIR's all_slice is not here: it moves no bytes (a local slice), see plan::SpmdCollective.
enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv };
inline constexpr int kNumCollectiveKinds = 6;
/// The reduction of all_reduce / reduce_scatter.
enum class ReduceOp { sum, max };

std::string to_string(CollectiveKind kind);
std::string to_string(ReduceOp op);
/// Inverse of to_string for the kinds a Schedule's Collective may carry: nullopt for unknown text and
/// for "send_recv" (a schedule writes a Send and a Recv instead); readers turn that into an InputError.
std::optional<CollectiveKind> collective_kind_from_string(std::string_view text);
std::optional<ReduceOp> reduce_op_from_string(std::string_view text);

/// True when the call's count is one member's block rather than the whole buffer: all_gather (the
/// block each member contributes), reduce_scatter (the block each member keeps), all_to_all (the
/// block sent to each member).
bool count_is_per_member(CollectiveKind kind);

/// nccl-tests' bus-bandwidth factor, busbw = algbw x factor (doc/PERFORMANCE.md): the share of the
/// buffer each rank moves over its slowest link in the ring algorithm. all_reduce 2(n-1)/n;
/// all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast and send_recv 1.
/// n <= 1 is 0 for every kind: a group of one moves nothing over any link (nccl-tests' formulas give
/// 0 there for the ring kinds and 1 for broadcast; mgt uses 0 throughout, so that bytes x factor is
/// always the traffic on the bus).
double bus_factor(CollectiveKind kind, int64_t group_size);

/// The extents of one call's send and receive buffers, in the unit of its count (elements or bytes),
/// as the Communicator interface takes them (runtime/communicator.hpp): for count c over n members
///   all_reduce c -> c; all_gather c -> n c; reduce_scatter n c -> c; all_to_all n c -> n c;
///   broadcast c -> c (in place, root = group rank 0); send_recv c -> c.
struct CollectiveExtents {
  int64_t send = 0;
  int64_t recv = 0;
  bool operator==(const CollectiveExtents&) const = default;
};
CollectiveExtents collective_extents(CollectiveKind kind, int64_t count, int64_t group_size);

/// One rank's side of a collective whose nccl-tests size is `bytes` (Collective::bytes: the all-reduce
/// buffer, the gathered output, the unscattered input, the all-to-all send total, the broadcast or
/// point-to-point buffer) over `group_size` members. As in nccl-tests, the per-member block of the
/// chunked kinds is bytes / n rounded down, so their full side is n x block.
struct CollectiveBytes {
  int64_t send_bytes = 0;   ///< this rank's send (input) buffer
  int64_t recv_bytes = 0;   ///< its receive (output) buffer
  int64_t param_bytes = 0;  ///< the count the call takes, in bytes (nccl-tests' paramcount)
  double bus_factor = 0;    ///< bus_factor(kind, group_size)
  bool operator==(const CollectiveBytes&) const = default;
};
/// Throws std::invalid_argument for group_size < 1 or bytes < 0.
CollectiveBytes collective_bytes(CollectiveKind kind, int64_t bytes, int64_t group_size);

}  // namespace mgt::ir
