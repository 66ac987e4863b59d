// The cluster as a Boost.Graph and the link estimate of a collective group (docs/cluster.md §3-4).
// Only a bounded representative subgraph is built: every group the planner asks about is a translate
// of the group containing rank 0, so one NVLink domain (or node) plus one node of the next is enough;
// spans and member counts of larger clusters are computed arithmetically.
#include "mgt/cost_model/topology.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

namespace mgt::cost {

int64_t GroupPlacement::size() const {
  int64_t n = 1;
  for (const auto& a : axes) n *= a.size;
  return n;
}

namespace {

enum class VertexKind { gpu, nvswitch, pcie_switch, nic, network_switch };

struct VertexProps {
  VertexKind kind = VertexKind::gpu;
  int64_t node = -1;   ///< representative node index; -1 for the fabric switch
  int64_t index = -1;  ///< GPU / NIC / PCIe switch index inside its node, NVLink domain id for NVSwitch
};

struct EdgeProps {
  double bytes_per_s = 0;  ///< one direction
  double latency_s = 0;    ///< share of the end-to-end latency of the hops that use this edge
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, VertexProps, EdgeProps>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

/// Widest path between two vertices: its bottleneck bandwidth and the summed latency along it.
struct PathResult {
  double bytes_per_s = 0;
  double latency_s = 0;
};

/// A GroupPlacement normalised for caching: size-1 axes dropped, axes sorted by stride (the member
/// set does not depend on axis order). Groups with more than kMaxAxes non-trivial axes are not cached.
constexpr int kMaxAxes = 6;
struct PlacementKey {
  int32_t count = 0;
  std::array<AxisPlacement, kMaxAxes> axes{};
  bool operator==(const PlacementKey& o) const {
    if (count != o.count) return false;
    for (int i = 0; i < count; ++i)
      if (!(axes[i] == o.axes[i])) return false;
    return true;
  }
};

struct PlacementKeyHash {
  size_t operator()(const PlacementKey& k) const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ uint64_t(k.count);
    for (int i = 0; i < k.count; ++i) {
      h = (h ^ uint64_t(k.axes[i].size)) * 0x100000001b3ull;
      h = (h ^ uint64_t(k.axes[i].stride)) * 0x100000001b3ull;
    }
    return size_t(h ^ (h >> 29));
  }
};

/// Returns false when the placement has too many axes to be a cache key.
bool make_key(std::span<const AxisPlacement> axes, PlacementKey& key) {
  key.count = 0;
  for (const auto& a : axes) {
    if (a.size == 1) continue;
    if (key.count == kMaxAxes) return false;
    // Insertion sort by (stride, size): at most kMaxAxes elements.
    int i = key.count++;
    while (i > 0 && (key.axes[i - 1].stride > a.stride ||
                     (key.axes[i - 1].stride == a.stride && key.axes[i - 1].size > a.size))) {
      key.axes[i] = key.axes[i - 1];
      --i;
    }
    key.axes[i] = a;
  }
  return true;
}

}  // namespace

struct Topology::Impl {
  ir::ClusterSpec cluster;
  CostParams params;
  int64_t num_gpus = 0;
  int64_t gpus_per_node = 0;
  int64_t nvlink_domain_gpus = 1;  ///< 1 = no NVLink
  int64_t domain_gpus = 0;         ///< LinkEstimate's "domain": the NVLink domain, or the node without NVLink
  int64_t cut_gpus = 0;            ///< unit whose NICs a cross-network hop shares: max(node, NVLink domain)
  int64_t num_nodes = 0;
  int64_t rep_nodes = 0;           ///< nodes in the representative subgraph

  Graph graph;
  std::vector<Vertex> gpu_vertex;              ///< rep_node * gpus_per_node + local -> vertex
  std::vector<double> nic_share_bytes_per_s;   ///< per local GPU: its share of NIC capacity (from the graph)

  mutable std::mutex mutex;
  mutable std::unordered_map<PlacementKey, LinkEstimate, PlacementKeyHash> group_cache;
  mutable std::unordered_map<uint64_t, PathResult> path_cache;  ///< (u << 32 | v) -> widest path
  /// pipeline_link by (stride, stages, wraps): the search asks it for every pipelined candidate.
  mutable std::map<std::tuple<int64_t, int64_t, bool>, LinkEstimate> pipeline_cache;

  void build();
  PathResult widest_path(Vertex u, Vertex v) const;  // caller holds `mutex`
  /// Maps a hop between two global ranks onto representative GPU vertices.
  std::pair<Vertex, Vertex> representative_pair(int64_t a, int64_t b) const;
  double hop_efficiency(int64_t a, int64_t b) const;
  LinkEstimate compute_group(const GroupPlacement& group) const;  // caller holds `mutex`
  void check_rank(int64_t rank) const {
    if (rank < 0 || rank >= num_gpus)
      throw std::out_of_range("rank " + std::to_string(rank) + " is outside the " + std::to_string(num_gpus) +
                              "-GPU topology");
  }
};

// Graph construction (docs/cluster.md §3), per representative node:
//   1. one GPU vertex per GPU;
//   2. without NVLink nothing more; with NVLink, one NVSwitch vertex per NVLink domain (an NVL72
//      domain spans 18 nodes, so its switch is shared across nodes), edge GPU-NVSwitch = nvlink rate;
//   3. P = min(nics, gpus) PCIe switches, GPU i under switch i*P/gpus and NIC j under switch j*P/nics
//      (so GPU i reaches NIC i*nics/gpus), all switches under one host root complex; every PCIe edge
//      has the per-GPU PCIe rate;
//   4. every NIC connects to one non-blocking fabric switch (full-bisection fat tree) at the NIC rate.
// Latencies: GPU-NVSwitch nvlink/2 and GPU-PCIe-switch pcie/2, so a GPU-to-GPU hop costs exactly the
// cluster's nvlink_latency_s or pcie_latency_s; NIC-fabric (network - pcie)/2, so a GPU-to-GPU hop
// across the network costs network_latency_s end to end.
void Topology::Impl::build() {
  const auto& c = cluster;
  const int64_t nics = c.nics_per_node;
  const int64_t pcie_switches = std::min(nics, gpus_per_node);
  const bool has_nvlink = nvlink_domain_gpus > 1;
  const double nic_edge_latency_s = std::max(0.0, c.network_latency_s - c.pcie_latency_s) / 2;

  Vertex fabric = boost::add_vertex(VertexProps{VertexKind::network_switch, -1, 0}, graph);
  std::unordered_map<int64_t, Vertex> nvswitch_of_domain;
  gpu_vertex.resize(size_t(rep_nodes * gpus_per_node));
  for (int64_t node = 0; node < rep_nodes; ++node) {
    Vertex root = boost::add_vertex(VertexProps{VertexKind::pcie_switch, node, -1}, graph);
    std::vector<Vertex> switches;
    for (int64_t s = 0; s < pcie_switches; ++s) {
      switches.push_back(boost::add_vertex(VertexProps{VertexKind::pcie_switch, node, s}, graph));
      boost::add_edge(switches.back(), root, EdgeProps{c.pcie_bytes_per_s, 0.0}, graph);
    }
    for (int64_t j = 0; j < nics; ++j) {
      Vertex nic = boost::add_vertex(VertexProps{VertexKind::nic, node, j}, graph);
      boost::add_edge(nic, switches[size_t(j * pcie_switches / nics)], EdgeProps{c.pcie_bytes_per_s, 0.0}, graph);
      boost::add_edge(nic, fabric, EdgeProps{c.nic_bytes_per_s, nic_edge_latency_s}, graph);
    }
    for (int64_t i = 0; i < gpus_per_node; ++i) {
      Vertex gpu = boost::add_vertex(VertexProps{VertexKind::gpu, node, i}, graph);
      gpu_vertex[size_t(node * gpus_per_node + i)] = gpu;
      boost::add_edge(gpu, switches[size_t(i * pcie_switches / gpus_per_node)],
                      EdgeProps{c.pcie_bytes_per_s, c.pcie_latency_s / 2}, graph);
      if (!has_nvlink) continue;
      int64_t domain = (node * gpus_per_node + i) / nvlink_domain_gpus;
      auto it = nvswitch_of_domain.find(domain);
      if (it == nvswitch_of_domain.end())
        it = nvswitch_of_domain
                 .emplace(domain, boost::add_vertex(VertexProps{VertexKind::nvswitch, -1, domain}, graph))
                 .first;
      boost::add_edge(gpu, it->second, EdgeProps{c.nvlink_bytes_per_s, c.nvlink_latency_s / 2}, graph);
    }
  }

  // Each GPU's share of NIC capacity, read off node 0 of the graph: the NICs under its PCIe switch,
  // divided among the GPUs under that switch, and at most its own PCIe edge. All GPUs of a node run
  // translates of the same group at the same time, so they all compete for the NICs.
  nic_share_bytes_per_s.assign(size_t(gpus_per_node), 0.0);
  for (int64_t i = 0; i < gpus_per_node; ++i) {
    Vertex gpu = gpu_vertex[size_t(i)];
    for (auto [e, e_end] = boost::out_edges(gpu, graph); e != e_end; ++e) {
      Vertex sw = boost::target(*e, graph);
      if (graph[sw].kind != VertexKind::pcie_switch) continue;
      double nic_bytes_per_s = 0;
      int64_t gpus_under = 0;
      for (auto [f, f_end] = boost::out_edges(sw, graph); f != f_end; ++f) {
        Vertex w = boost::target(*f, graph);
        if (graph[w].kind == VertexKind::nic) {
          for (auto [h, h_end] = boost::out_edges(w, graph); h != h_end; ++h)
            if (graph[boost::target(*h, graph)].kind == VertexKind::network_switch) nic_bytes_per_s += graph[*h].bytes_per_s;
        } else if (graph[w].kind == VertexKind::gpu) {
          ++gpus_under;
        }
      }
      nic_share_bytes_per_s[size_t(i)] = std::min(graph[*e].bytes_per_s, nic_bytes_per_s / double(gpus_under));
    }
  }
}

/// Keeps the edges at least as wide as a path's bottleneck (for the second pass of widest_path).
struct WideEdges {
  const Graph* graph = nullptr;
  double min_bytes_per_s = 0;
  bool operator()(boost::graph_traits<Graph>::edge_descriptor e) const {
    return (*graph)[e].bytes_per_s >= min_bytes_per_s;
  }
};

// Widest path in two passes:
//   1. the bottleneck bandwidth W with Boost's Dijkstra in the (max, min) semiring: distances combine
//      with min and compare with greater, the source starts at +inf and unreached vertices at 0;
//   2. among paths of width W, the one with the least summed latency: plain Dijkstra on latency over
//      the subgraph of edges >= W (one lexicographic pass would be wrong: a wide prefix with more
//      latency can shadow a narrower, faster one that ties once the bottleneck is reached).
PathResult Topology::Impl::widest_path(Vertex u, Vertex v) const {
  uint64_t key = (uint64_t(u) << 32) | uint64_t(v);
  if (auto it = path_cache.find(key); it != path_cache.end()) return it->second;
  const size_t n = boost::num_vertices(graph);
  auto index = boost::get(boost::vertex_index, graph);
  std::vector<double> width(n, 0.0);
  boost::dijkstra_shortest_paths(
      graph, u,
      boost::weight_map(boost::get(&EdgeProps::bytes_per_s, graph))
          .distance_map(boost::make_iterator_property_map(width.begin(), index))
          .distance_compare(std::greater<double>())
          .distance_combine([](double a, double b) { return std::min(a, b); })
          .distance_inf(0.0)
          .distance_zero(std::numeric_limits<double>::infinity()));
  if (!(width[v] > 0)) throw std::logic_error("topology graph is disconnected");

  boost::filtered_graph<Graph, WideEdges> wide(graph, WideEdges{&graph, width[v]});
  std::vector<double> latency(n, 0.0);
  boost::dijkstra_shortest_paths(wide, u,
                                 boost::weight_map(boost::get(&EdgeProps::latency_s, graph))
                                     .distance_map(boost::make_iterator_property_map(latency.begin(), index)));
  PathResult result{width[v], latency[v]};
  path_cache.emplace(key, result);
  return result;
}

// Hop classes: same node -> both ends on representative node 0; same NVLink domain across nodes
// (NVL72) -> their node offsets inside domain 0; different cut units -> node 0 and the last
// representative node, which lies in another domain/node.
std::pair<Vertex, Vertex> Topology::Impl::representative_pair(int64_t a, int64_t b) const {
  int64_t local_a = a % gpus_per_node, local_b = b % gpus_per_node;
  int64_t node_a = a / gpus_per_node, node_b = b / gpus_per_node;
  int64_t rep_a = 0, rep_b = 0;
  if (node_a == node_b) {
    rep_a = rep_b = 0;
  } else if (a / cut_gpus == b / cut_gpus) {
    int64_t first_node = (a / cut_gpus) * (cut_gpus / gpus_per_node);
    rep_a = node_a - first_node;
    rep_b = node_b - first_node;
  } else {
    rep_a = 0;
    rep_b = rep_nodes - 1;
  }
  return {gpu_vertex[size_t(rep_a * gpus_per_node + local_a)], gpu_vertex[size_t(rep_b * gpus_per_node + local_b)]};
}

/// NCCL busbw / raw rate for a hop inside a cut unit: NVLink inside an NVLink domain, else PCIe.
double Topology::Impl::hop_efficiency(int64_t a, int64_t b) const {
  bool same_nvlink = nvlink_domain_gpus > 1 && a / nvlink_domain_gpus == b / nvlink_domain_gpus;
  return same_nvlink ? params.nvlink_efficiency : params.pcie_efficiency;
}

// link_for_group (docs/cluster.md §4):
//   1. enumerate the members {sum_i c_i * stride_i} of the group containing rank 0 and sort them:
//      the ring visits them in rank order (NCCL orders rings intra-node first);
//   2. members_per_domain = members in rank 0's domain, domains_spanned = ceil(size / that);
//   3. every ring hop inside one cut unit (node, or NVLink domain when that is larger) costs the
//      widest-path bandwidth x nvlink or pcie efficiency;
//   4. hops across cut units share the unit's NIC capacity: the m members inside rank 0's unit each
//      bring their NIC share (nic_share_bytes_per_s), so the cut carries sum(shares) x
//      network_efficiency (8 members on a DGX: 8 NICs; 1 member: 1 NIC, the other 7 NICs serve the
//      7 translates of the group that run at the same time);
//   5. busbw = the minimum over hops; latency = the slowest hop's path latency;
//   6. an all-to-all is not a ring: every member sends (n-g)/n of its buffer out of its unit, so the
//      g members of a unit share the cut's capacity C and busbw = (n-1)/(n-g) x C/g
//      (all_to_all_bus_bytes_per_s; the kernel model prices nccl-tests' alltoall rows the same way).
LinkEstimate Topology::Impl::compute_group(const GroupPlacement& group) const {
  // Innermost axis first: nested axes (each stride at least the span below it, as a mesh's are)
  // then enumerate the members already in rank order, and the sort below is a linear check.
  std::vector<AxisPlacement> axes(group.axes.begin(), group.axes.end());
  std::stable_sort(axes.begin(), axes.end(), [](const AxisPlacement& x, const AxisPlacement& y) { return x.stride < y.stride; });
  std::vector<int64_t> members{0};
  for (const auto& axis : axes) {
    if (axis.size < 1 || axis.stride < 1)
      throw std::invalid_argument("group axis has size " + std::to_string(axis.size) + " and stride " +
                                  std::to_string(axis.stride) + "; both must be positive");
    if (axis.size == 1) continue;
    size_t before = members.size();
    members.reserve(before * size_t(axis.size));
    for (int64_t c = 1; c < axis.size; ++c)
      for (size_t i = 0; i < before; ++i) members.push_back(members[i] + c * axis.stride);
  }
  if (!std::is_sorted(members.begin(), members.end())) std::sort(members.begin(), members.end());
  if (std::adjacent_find(members.begin(), members.end()) != members.end())
    throw std::invalid_argument("group axes overlap: two members share a rank");
  check_rank(members.back());

  LinkEstimate out;
  const int64_t n = int64_t(members.size());
  if (n == 1) {
    out.bus_bytes_per_s = cluster.gpu.hbm_bytes_per_s;  // no communication; a local copy at most
    return out;
  }
  out.members_per_domain = std::count_if(members.begin(), members.end(), [&](int64_t r) { return r < domain_gpus; });
  out.domains_spanned = (n + out.members_per_domain - 1) / out.members_per_domain;

  double bus = std::numeric_limits<double>::infinity();
  double latency = 0;
  bool crosses_cut = false;
  // A ring over thousands of ranks repeats a few hop classes (representative vertices, across the
  // cut or not, inside an NVLink domain or not); min and max are idempotent, so each is priced once.
  struct HopClass {
    Vertex u, v;
    bool across, same_nvlink;
    bool operator==(const HopClass&) const = default;
  };
  std::vector<HopClass> priced;
  for (int64_t i = 0; i < n; ++i) {
    int64_t a = members[size_t(i)], b = members[size_t((i + 1) % n)];
    if (b < a) std::swap(a, b);
    auto [u, v] = representative_pair(a, b);
    const HopClass hop{u, v, a / cut_gpus != b / cut_gpus,
                       nvlink_domain_gpus > 1 && a / nvlink_domain_gpus == b / nvlink_domain_gpus};
    if (std::find(priced.begin(), priced.end(), hop) != priced.end()) continue;
    priced.push_back(hop);
    PathResult path = widest_path(u, v);
    latency = std::max(latency, path.latency_s);
    if (a / cut_gpus != b / cut_gpus) {
      crosses_cut = true;
      continue;
    }
    bus = std::min(bus, path.bytes_per_s * hop_efficiency(a, b));
  }
  if (crosses_cut) {
    double cut_bytes_per_s = 0;
    for (int64_t r : members) {
      if (r >= cut_gpus) break;  // members are sorted
      cut_bytes_per_s += nic_share_bytes_per_s[size_t(r % gpus_per_node)];
    }
    bus = std::min(bus, cut_bytes_per_s * params.network_efficiency);
    // 6. an all-to-all sends (n-g)/n of each member's buffer across the cut, g = members per unit.
    const int64_t g = std::count_if(members.begin(), members.end(), [&](int64_t r) { return r < cut_gpus; });
    const double network = cut_bytes_per_s * params.network_efficiency;
    out.all_to_all_bus_bytes_per_s =
        std::min(bus, double(n - 1) / double(std::max<int64_t>(1, n - g)) * network / double(std::max<int64_t>(1, g)));
  }
  out.bus_bytes_per_s = bus;
  out.latency_s = latency;
  return out;
}

Topology::Topology(const ir::ClusterSpec& cluster, int64_t num_gpus, const CostParams& params)
    : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  if (num_gpus < 1) throw std::invalid_argument("num_gpus must be positive, got " + std::to_string(num_gpus));
  if (cluster.gpus_per_node < 1 || cluster.nvlink_domain_gpus < 1 || cluster.nics_per_node < 1)
    throw std::invalid_argument("cluster '" + cluster.name + "': gpus_per_node, nvlink_domain_gpus and "
                                "nics_per_node must be positive");
  if (cluster.gpus_per_node % cluster.nvlink_domain_gpus != 0 && cluster.nvlink_domain_gpus % cluster.gpus_per_node != 0)
    throw std::invalid_argument("cluster '" + cluster.name + "': nvlink_domain_gpus must divide gpus_per_node "
                                "or be a multiple of it");
  m.cluster = cluster;
  m.params = params;
  m.num_gpus = num_gpus;
  m.gpus_per_node = cluster.gpus_per_node;
  m.nvlink_domain_gpus = cluster.nvlink_domain_gpus;
  m.domain_gpus = m.nvlink_domain_gpus > 1 ? m.nvlink_domain_gpus : m.gpus_per_node;
  m.cut_gpus = std::max(m.nvlink_domain_gpus, m.gpus_per_node);
  m.num_nodes = (num_gpus + m.gpus_per_node - 1) / m.gpus_per_node;
  // One whole cut unit plus one node of the next: every hop class of every group appears in it.
  m.rep_nodes = std::min(m.num_nodes, m.cut_gpus / m.gpus_per_node + 1);
  m.build();
}

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

LinkEstimate Topology::link_for_group(const GroupPlacement& group) const {
  return link_for_axes(group.axes);
}

LinkEstimate Topology::link_for_axes(std::span<const AxisPlacement> axes) const {
  auto& m = *impl_;
  PlacementKey key;
  bool cacheable = make_key(axes, key);
  if (cacheable && key.count == 0) {  // one member: no communication (compute_group's n == 1), no lock
    LinkEstimate local;
    local.bus_bytes_per_s = m.cluster.gpu.hbm_bytes_per_s;
    return local;
  }
  std::lock_guard<std::mutex> lock(m.mutex);
  if (cacheable) {
    if (auto it = m.group_cache.find(key); it != m.group_cache.end()) return it->second;
  }
  LinkEstimate result = m.compute_group(GroupPlacement{{axes.begin(), axes.end()}});
  if (cacheable) m.group_cache.emplace(key, result);
  return result;
}

// Point-to-point: the widest path between the two ranks, with the sender's NIC share across the
// network (pipeline sends leave every GPU of a node at the same time, so they share the NICs).
LinkEstimate Topology::link_between(int64_t rank_a, int64_t rank_b) const {
  auto& m = *impl_;
  m.check_rank(rank_a);
  m.check_rank(rank_b);
  LinkEstimate out;
  if (rank_a == rank_b) {
    out.bus_bytes_per_s = m.cluster.gpu.hbm_bytes_per_s;
    return out;
  }
  int64_t a = std::min(rank_a, rank_b), b = std::max(rank_a, rank_b);
  std::lock_guard<std::mutex> lock(m.mutex);
  auto [u, v] = m.representative_pair(a, b);
  PathResult path = m.widest_path(u, v);
  bool same_domain = a / m.domain_gpus == b / m.domain_gpus;
  out.domains_spanned = same_domain ? 1 : 2;
  out.members_per_domain = same_domain ? 2 : 1;
  out.latency_s = path.latency_s;
  if (a / m.cut_gpus == b / m.cut_gpus) {
    out.bus_bytes_per_s = path.bytes_per_s * m.hop_efficiency(a, b);
  } else {
    double share = std::min(m.nic_share_bytes_per_s[size_t(a % m.gpus_per_node)],
                            m.nic_share_bytes_per_s[size_t(b % m.gpus_per_node)]);
    out.bus_bytes_per_s = std::min(path.bytes_per_s, share) * m.params.network_efficiency;
  }
  return out;
}

// Stage k's ranks are k * stride + (offsets inside a stage); rank k * stride and (k + 1) * stride
// sit in different units of B GPUs exactly when k * stride < B' <= (k + 1) * stride for a multiple B'
// of B, and every such boundary is a translate of the first one (k = (B - 1) / stride), so a few
// link_between calls cover all boundaries whatever the pipeline depth.
LinkEstimate Topology::pipeline_link(int64_t stride, int64_t stages, bool wraps) const {
  if (stages < 2) return link_between(0, 0);
  if (stride < 1 || stride > (num_gpus() - 1) / (stages - 1))
    throw std::invalid_argument("pipeline of " + std::to_string(stages) + " stages " + std::to_string(stride) +
                                " ranks apart does not fit the " + std::to_string(num_gpus()) + "-GPU topology");
  const std::tuple<int64_t, int64_t, bool> key{stride, stages, wraps};
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (auto it = impl_->pipeline_cache.find(key); it != impl_->pipeline_cache.end()) return it->second;
  }
  LinkEstimate slowest = link_between(0, stride);
  auto include = [&](int64_t a, int64_t b) {
    const LinkEstimate l = link_between(a, b);
    slowest.bus_bytes_per_s = std::min(slowest.bus_bytes_per_s, l.bus_bytes_per_s);
    slowest.latency_s = std::max(slowest.latency_s, l.latency_s);
    slowest.domains_spanned = std::max(slowest.domains_spanned, l.domains_spanned);
    slowest.members_per_domain = std::min(slowest.members_per_domain, l.members_per_domain);
  };
  for (const int64_t unit : {impl_->gpus_per_node, impl_->domain_gpus, impl_->cut_gpus}) {
    const int64_t k = (unit - 1) / stride;  // the first boundary leaving the unit of rank 0
    if (k + 1 < stages) include(k * stride, (k + 1) * stride);
  }
  if (wraps) include(0, (stages - 1) * stride);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->pipeline_cache.emplace(key, slowest);
  return slowest;
}

const ir::ClusterSpec& Topology::cluster() const { return impl_->cluster; }
int64_t Topology::num_gpus() const { return impl_->num_gpus; }
int64_t Topology::num_vertices() const { return int64_t(boost::num_vertices(impl_->graph)); }

}  // namespace mgt::cost
