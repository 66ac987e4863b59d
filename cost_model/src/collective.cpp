// Alpha-beta collective model with nccl-tests' bus-bandwidth factors (docs/cluster.md §5).
#include "mgt/cost_model/collective.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mgt::cost {

// Ring all-reduce = reduce-scatter (n-1 steps) then all-gather (n-1 steps); the others one pass.
int64_t latency_steps(CollectiveKind kind, int64_t group_size) {
  if (group_size <= 1) return 0;
  switch (kind) {
    case CollectiveKind::all_reduce: return 2 * (group_size - 1);
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: return group_size - 1;
    case CollectiveKind::broadcast:
    case CollectiveKind::send_recv: return 1;
  }
  return 0;
}

std::string measured_op(CollectiveKind kind) {
  return ir::to_string(kind == CollectiveKind::broadcast ? CollectiveKind::send_recv : kind);
}

double collective_time_s(CollectiveKind kind, int64_t group_size, int64_t bytes, const LinkEstimate& link) {
  if (group_size <= 1 || bytes <= 0) return 0.0;
  // An all-to-all across the network cut is bound by the NICs every member sends through, not by
  // the ring's one hop per unit (LinkEstimate::all_to_all_bus_bytes_per_s).
  const double bus = kind == CollectiveKind::all_to_all && link.all_to_all_bus_bytes_per_s > 0
                         ? link.all_to_all_bus_bytes_per_s
                         : link.bus_bytes_per_s;
  double bandwidth_s = bus > 0 ? double(bytes) * ir::bus_factor(kind, group_size) / bus
                               : std::numeric_limits<double>::infinity();
  return double(latency_steps(kind, group_size)) * link.latency_s + bandwidth_s;
}

// Lookup in the measured table:
//   1. keep rows of this op;
//   2. pick the (group_size, nodes_spanned) configuration nearest in |log ratio| of both (exact match
//      first; ties go to the smaller configuration, the more conservative measurement);
//   3. among its rows, interpolate busbw linearly in log(message bytes), clamped at the ends.
double measured_bus_bytes_per_s(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size,
                                int64_t domains_spanned, int64_t bytes) {
  const std::string op = measured_op(kind);
  auto log_distance = [](int64_t a, int64_t b) {
    return std::abs(std::log(double(std::max<int64_t>(a, 1))) - std::log(double(std::max<int64_t>(b, 1))));
  };
  const ir::CollectiveMeasurement* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const auto& row : cluster.collective_table) {
    if (row.op != op) continue;
    double d = log_distance(row.group_size, group_size) + log_distance(row.nodes_spanned, domains_spanned);
    bool better = d < best_distance - 1e-12 ||
                  (std::abs(d - best_distance) <= 1e-12 &&
                   (row.group_size < best->group_size ||
                    (row.group_size == best->group_size && row.nodes_spanned < best->nodes_spanned)));
    if (better) {
      best = &row;
      best_distance = d;
    }
  }
  if (!best) return 0.0;

  // Nearest rows below and above `bytes` for the chosen configuration.
  const ir::CollectiveMeasurement* below = nullptr;
  const ir::CollectiveMeasurement* above = nullptr;
  for (const auto& row : cluster.collective_table) {
    if (row.op != op || row.group_size != best->group_size || row.nodes_spanned != best->nodes_spanned) continue;
    if (row.message_bytes <= bytes && (!below || row.message_bytes > below->message_bytes)) below = &row;
    if (row.message_bytes >= bytes && (!above || row.message_bytes < above->message_bytes)) above = &row;
  }
  if (!below) return above->bus_bytes_per_s;
  if (!above) return below->bus_bytes_per_s;
  if (below->message_bytes == above->message_bytes) return below->bus_bytes_per_s;
  double t = (std::log(double(std::max<int64_t>(bytes, 1))) - std::log(double(below->message_bytes))) /
             (std::log(double(above->message_bytes)) - std::log(double(below->message_bytes)));
  return below->bus_bytes_per_s + t * (above->bus_bytes_per_s - below->bus_bytes_per_s);
}

// The CPU executor (runtime/src/executor/collectives.cpp) moves most collectives through scratch
// buffers in host memory: it zero-fills them (std::vector::assign), packs the segments or sequence
// rows in, and unpacks the result; a GPU backend hands NCCL the tensors themselves. Bytes of memory
// traffic (reads + writes) per byte of the collective's buffer B, with shards = B / group (group 2):
//   all_reduce (tp-replicated gradients, HSDP shards, DDP buckets of tp slices):
//              zero B, pack 2B, unpack 2B                                                     = 5
//   all_reduce of a DDP bucket of whole tensors (tp = 1; HostCopies::in_place): in place      = 0
//              (measured before it was: 6.5 ms of copies per 26 MB bucket beside 14 ms of MPI)
//   all_gather (FSDP units): zero 1.5B, pack 2B/2, unpack 2B = 4.5; (sequence rows): 4.5
//   reduce_scatter (FSDP units): zero 1.5B, pack 2B, zero the gradients B, unpack 2B/2 = 5.5;
//                  (sequence rows): zero B, pack 2B = 3; priced at the mean 4.5 (bounds 3-5.5)
//   all_to_all, broadcast, send/recv: no copies (the executor passes the tensors)
// Counted from the code, not fitted; priced at the probe's triad bandwidth (reads + writes per s).
namespace {
double host_copy_bytes_per_byte(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return 5.0;
    case CollectiveKind::all_gather: return 4.5;
    case CollectiveKind::reduce_scatter: return 4.5;
    case CollectiveKind::all_to_all:
    case CollectiveKind::broadcast:
    case CollectiveKind::send_recv: return 0.0;
  }
  return 0.0;
}
}  // namespace

double hierarchical_dispatch_network_share(const TokenRouting& routing, int64_t domains) {
  const int64_t k = routing.top_k, e = routing.experts;
  if (domains <= 1 || k <= 1 || e < domains || k > e) return 1.0;
  // P(a given remote domain holds none of the token's k experts), drawn without replacement.
  const double per_domain = double(e) / double(domains);
  double miss = 1.0;
  for (int64_t i = 0; i < k; ++i) miss *= std::max(0.0, (double(e) - per_domain - double(i)) / double(e - i));
  return std::min(1.0, (1.0 - miss) * double(domains) / double(k));
}

double ep_dispatch_time_s(const ir::ClusterSpec& cluster, int64_t group_size, int64_t bytes, const LinkEstimate& link,
                          const TokenRouting& routing, bool hierarchical) {
  const double flat = collective_time_s(cluster, CollectiveKind::all_to_all, group_size, bytes, link);
  if (!hierarchical || link.domains_spanned <= 1 || group_size <= 1 || bytes <= 0) return flat;
  LinkEstimate nvlink = link;
  nvlink.all_to_all_bus_bytes_per_s = 0;  // the ring link's rate: the fan-out inside each domain
  const double fan_out = collective_time_s(CollectiveKind::all_to_all, group_size, bytes, nvlink);
  return std::max(fan_out, flat * hierarchical_dispatch_network_share(routing, link.domains_spanned));
}

HostCopies ddp_bucket_copies(int64_t tp) { return tp == 1 ? HostCopies::in_place : HostCopies::scratch; }

double collective_time_s(const ir::ClusterSpec& cluster, CollectiveKind kind, int64_t group_size, int64_t bytes,
                         const LinkEstimate& link, HostCopies copies) {
  if (group_size <= 1 || bytes <= 0) return 0.0;
  double copies_s = 0.0;
  if (cluster.gpu.arch == ir::GpuArch::cpu && cluster.gpu.hbm_bytes_per_s > 0 && copies == HostCopies::scratch)
    copies_s = double(bytes) * host_copy_bytes_per_byte(kind) / cluster.gpu.hbm_bytes_per_s;
  if (!cluster.collective_table.empty()) {
    const double measured = measured_bus_bytes_per_s(cluster, kind, group_size, link.domains_spanned, bytes);
    if (measured > 0) return double(bytes) * ir::bus_factor(kind, group_size) / measured + copies_s;
  }
  return collective_time_s(kind, group_size, bytes, link) + copies_s;
}

}  // namespace mgt::cost
