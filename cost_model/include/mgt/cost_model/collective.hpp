// Alpha-beta collective model with nccl-tests' bus-bandwidth factors (docs/cost-model.md §3):
//   time = steps * latency + (bytes * bus_factor(n)) / busbw
// where `bytes` is the buffer size nccl-tests reports for that op.
#pragma once

#include "mgt/cost_model/topology.hpp"

#include <cstdint>
#include <string>

namespace mgt::cost {

enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };
std::string to_string(CollectiveKind kind);

/// nccl-tests (doc/PERFORMANCE.md): all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all
/// (n-1)/n; send_recv 1. Returns 0 for n == 1 (no communication).
double bus_factor(CollectiveKind kind, int64_t group_size);

/// Ring steps that each pay the link latency: all_reduce 2(n-1), all_gather / reduce_scatter (n-1),
/// all_to_all (n-1), send_recv 1.
int64_t latency_steps(CollectiveKind kind, int64_t group_size);

/// Seconds for one collective over a group of `group_size` members with `bytes` as nccl-tests counts
/// them: all_reduce the full buffer, all_gather the gathered output, reduce_scatter the full input,
/// all_to_all the per-rank send buffer. 0 when group_size == 1 or bytes == 0.
double collective_time_s(CollectiveKind kind, int64_t group_size, int64_t bytes, const LinkEstimate& link);

/// The same, preferring the cluster's measured table (mgt-plan probe): when it has a row for this
/// op, time = bytes * bus_factor / measured busbw (the measured rate already includes latency);
/// otherwise the alpha-beta model above over `link`.
double collective_time_s(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size, int64_t bytes,
                         const LinkEstimate& link);

/// Looks `kind` up in a cluster's measured collective table (nearest group size and node count,
/// log-interpolated in message size); returns 0 when the table has no row for this op.
double measured_bus_bytes_per_s(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size,
                                int64_t domains_spanned, int64_t bytes);

}  // namespace mgt::cost
