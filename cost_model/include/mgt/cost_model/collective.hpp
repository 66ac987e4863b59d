// Alpha-beta collective model with nccl-tests' bus-bandwidth factors (docs/cost-model.md §3):
//   time = steps * latency + (bytes * bus_factor(n)) / busbw
// where `bytes` is the buffer size nccl-tests reports for that op. The kinds and the bus factor are
// the ir's collective table (mgt/ir/collective.hpp); this file adds the prices.
#pragma once

#include "mgt/cost_model/topology.hpp"
#include "mgt/ir/collective.hpp"

#include <cstdint>
#include <string>

namespace mgt::cost {

/// The ir's kinds (one table); named here so the cost model's code reads unqualified.
using CollectiveKind = ir::CollectiveKind;

/// Ring steps that each pay the link latency: all_reduce 2(n-1), all_gather / reduce_scatter (n-1),
/// all_to_all (n-1), send_recv 1, broadcast 1 (pipelined: one hop's latency, as send_recv).
int64_t latency_steps(CollectiveKind kind, int64_t group_size);

/// The op name of the measured-table rows that price `kind` (ir::ClusterSpec::collective_table):
/// the kind's own name, except broadcast, which the probe does not measure and which runs at the
/// point-to-point rate (pipelined ring, busbw = algbw), so "send_recv".
std::string measured_op(CollectiveKind kind);

/// Seconds for one collective over a group of `group_size` members with `bytes` as nccl-tests counts
/// them: all_reduce the full buffer, all_gather the gathered output, reduce_scatter the full input,
/// all_to_all the per-rank send buffer. bytes x ir::bus_factor(kind, n) cross the slowest link.
/// 0 when group_size == 1 or bytes == 0.
double collective_time_s(CollectiveKind kind, int64_t group_size, int64_t bytes, const LinkEstimate& link);

/// Whether the CPU executor moves a collective's buffer through host scratch copies (collective.cpp
/// counts them per kind) or hands the communicator the tensors where they lie: DDP gradient buckets
/// of whole tensors (tp = 1), which it all-reduces in place in the flat gradient buffer.
enum class HostCopies { scratch, in_place };

/// The same, preferring the cluster's measured table (mgt-plan probe): when it has a row for this
/// op, time = bytes * bus_factor / measured busbw (the measured rate already includes latency);
/// otherwise the alpha-beta model above over `link`. On a `cpu` cluster the executor's host copies
/// are added (none for HostCopies::in_place).
double collective_time_s(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size, int64_t bytes,
                         const LinkEstimate& link, HostCopies copies = HostCopies::scratch);

/// How the CPU executor moves a DDP gradient bucket (an all_reduce of the "grads" buffer with no named
/// tensors under ZeRO 0): in place when tp = 1, through scratch when tp slices make it strided.
HostCopies ddp_bucket_copies(int64_t tp);

/// Looks `kind` up (by measured_op) in a cluster's measured collective table (nearest group size and node count,
/// log-interpolated in message size); returns 0 when the table has no row for this op.
double measured_bus_bytes_per_s(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size,
                                int64_t domains_spanned, int64_t bytes);

}  // namespace mgt::cost
