// The cluster as a Boost.Graph of GPUs, NVLink switches, PCIe, NICs and network switches, and the
// question the estimator asks of it: what bandwidth and latency does a collective over this group of
// mesh axes see, given where the mesh places its ranks.
#pragma once

#include "mgt/cost_model/cost_params.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/layout.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace mgt::cost {

/// One mesh axis as laid on ranks: member i of a group along this axis is at rank offset i * stride
/// (ir::Layout::spans gives them for each named group of a plan).
using AxisPlacement = ir::AxisSpan;

/// A communication group over one or more mesh axes (FSDP shards over dp_shard x cp).
struct GroupPlacement {
  std::vector<AxisPlacement> axes;
  int64_t size() const;
  bool operator==(const GroupPlacement&) const = default;
};

/// What a ring collective over a group sees.
struct LinkEstimate {
  double bus_bytes_per_s = 0;     ///< achievable busbw per member (nccl-tests definition)
  double latency_s = 0;           ///< per ring step (the slowest hop's latency)
  int64_t domains_spanned = 1;    ///< NVLink domains (or nodes, without NVLink) the group spans
  int64_t members_per_domain = 1; ///< group members inside one domain
  /// All-to-all busbw across the network cut (0 inside one cut unit: the ring's bus_bytes_per_s
  /// holds). A ring sends one hop per unit over the NICs; an all-to-all sends (n-g)/n of every
  /// member's buffer out of its unit, so with the unit's g members sharing NIC capacity C:
  /// busbw = (n-1)/(n-g) x C/g (the kernel model's formula, kernel_model.cpp).
  double all_to_all_bus_bytes_per_s = 0;
  bool crosses_network() const { return domains_spanned > 1; }
};

/// Builds the graph for `num_gpus` GPUs of `cluster` (ceil(num_gpus / gpus_per_node) nodes).
/// Ranks are numbered node-major: rank r sits on node r / gpus_per_node.
class Topology {
 public:
  Topology(const ir::ClusterSpec& cluster, int64_t num_gpus, const CostParams& params = {});
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  /// Bandwidth and latency for a ring collective over `group` (the group containing rank 0; every
  /// other group along the same axes is a translate of it). The bottleneck is found on the graph:
  /// the widest path between consecutive ring members, with NIC capacity shared among the groups
  /// that run concurrently on the same node.
  LinkEstimate link_for_group(const GroupPlacement& group) const;
  /// The same for the axes given in place (no allocation: the search prices groups per candidate).
  LinkEstimate link_for_axes(std::span<const AxisPlacement> axes) const;

  /// Point-to-point bandwidth and latency between two ranks (widest path on the graph).
  LinkEstimate link_between(int64_t rank_a, int64_t rank_b) const;

  /// The slowest link between neighbouring stages of a pipeline of `stages` stages `stride` ranks
  /// apart (stage k on ranks k * stride + ...): the boundaries that leave the first node, NVLink
  /// domain or NIC cut unit are the ones that cross the network, so those and the first boundary are
  /// compared; `wraps` adds the last stage -> stage 0 hop of an interleaved pipeline. Bandwidth is
  /// the minimum and latency the maximum over them. A single stage gets link_between(0, 0).
  LinkEstimate pipeline_link(int64_t stride, int64_t stages, bool wraps) const;

  const ir::ClusterSpec& cluster() const;
  int64_t num_gpus() const;
  int64_t num_vertices() const;  ///< for tests: GPUs + switches + NICs in the graph

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgt::cost
