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

/// The experts each token is sent to: the router's top_k of `experts` (0 = no routed experts).
struct TokenRouting {
  int64_t top_k = 0;
  int64_t experts = 0;
  bool operator==(const TokenRouting&) const = default;
};

/// Of a flat all-to-all's network bytes, the share a hierarchical dispatcher sends when the expert-
/// parallel group spans `domains` NVLink domains with experts spread evenly over them: it sends each
/// token once to every remote domain that holds one of its experts and fans out over NVLink there,
/// where the flat all-to-all sends one copy per remote expert. Uniform routing of top_k distinct
/// experts of E: a remote domain (E/D experts) is missed with probability C(E-E/D, k) / C(E, k), so
/// the share is (1 - that) x D / k; 1 for top-1, inside one domain, or without routing.
double hierarchical_dispatch_network_share(const TokenRouting& routing, int64_t domains);

/// One expert-parallel dispatch or combine of `bytes` (the flat all-to-all's send total per rank)
/// over `group_size` ranks. Flat (`hierarchical` false): collective_time_s of an all_to_all. A
/// hierarchical dispatcher (Megatron-Core's flex dispatcher, DeepEP / HybridEP) across domains:
/// the slower of its NVLink fan-out (the ring link's rate over the whole buffer) and its network
/// part (the flat all-to-all's time x hierarchical_dispatch_network_share).
double ep_dispatch_time_s(const ir::ClusterSpec& cluster, int64_t group_size, int64_t bytes, const LinkEstimate& link,
                          const TokenRouting& routing, bool hierarchical);

/// Looks `kind` up (by measured_op) in a cluster's measured collective table (nearest group size and node count,
/// log-interpolated in message size); returns 0 when the table has no row for this op.
double measured_bus_bytes_per_s(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size,
                                int64_t domains_spanned, int64_t bytes);

}  // namespace mgt::cost
