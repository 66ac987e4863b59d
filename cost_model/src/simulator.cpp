// The discrete-event simulator over an ir::Schedule (docs/simulator.md; semantics docs/schedule.md).
// Prices come from the estimator's building blocks (op_costs, collective_time_s, Topology,
// memory_bound_time_s), so a simulated schedule and the estimator price the same work identically;
// what the simulator adds is the timing the schedule actually implies: streams, dependencies,
// rendezvous of collectives and send/recv across programs, and overlap.
#include "mgt/cost_model/simulator.hpp"

#include "simulator_category.hpp"

#include "mgt/cost_model/collective.hpp"
#include "mgt/cost_model/compute.hpp"
#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/cost_model/topology.hpp"
#include "mgt/cost_model/ep_overlap.hpp"
#include "mgt/cost_model/tp_overlap.hpp"
#include "mgt/ir/error.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>

namespace mgt::cost {

namespace {

using simulation::Category, simulation::category_of, simulation::kNumCategories, simulation::slot;


bool is_communication(const ir::Instruction& instr) {
  const auto k = ir::kind(instr);
  return k == ir::InstrKind::collective || k == ir::InstrKind::send || k == ir::InstrKind::recv;
}
bool is_kernel(const ir::Instruction& instr) {
  const auto k = ir::kind(instr);
  return k == ir::InstrKind::compute || k == ir::InstrKind::optimizer_step;
}

std::string axes_key(std::vector<std::string> axes) {
  std::sort(axes.begin(), axes.end());
  std::string key;
  for (const auto& a : axes) key += a + ",";
  return key;
}

int64_t mod(int64_t a, int64_t n) { return n <= 0 ? 0 : ((a % n) + n) % n; }

std::string where(size_t p, ir::InstrId i) {
  return "programs[" + std::to_string(p) + "].instructions[" + std::to_string(i) + "]";
}

struct Finish {
  double time;
  int64_t seq;
  int64_t g;
  bool operator>(const Finish& o) const { return std::tie(time, seq) > std::tie(o.time, o.seq); }
};

// ---- pricing -------------------------------------------------------------------------------------

struct Model {
  ir::Graph graph;
  ir::ClusterSpec cluster;
  TrainingSettings settings;
  CostParams params;
  TokenRouting routing;  // the expert-parallel dispatch's (token_routing)
  std::unordered_map<std::string, size_t> block_index;
  std::vector<std::unordered_map<std::string, size_t>> op_index;  // per block: op name -> position
  // op_costs per (block, shard context): per-shape constants.
  mutable std::map<std::tuple<size_t, int64_t, int64_t, int64_t, int64_t, bool, int, int64_t, bool, int, int, int64_t>,
                   std::vector<OpCost>>
      op_memo;

  const OpCost& op_cost(const ir::Compute& c, const ShardContext& ctx, size_t p, ir::InstrId id) const {
    auto b = block_index.find(c.block);
    if (b == block_index.end())
      throw ir::InputError("schedule", where(p, id) + ".block", "block '" + c.block + "' is not in the model graph",
                           "simulate the schedule with the model it was lowered from");
    auto o = op_index[b->second].find(c.op);
    if (o == op_index[b->second].end())
      throw ir::InputError("schedule", where(p, id) + ".op",
                           "op '" + c.op + "' is not in block '" + c.block + "' of the model graph",
                           "simulate the schedule with the model it was lowered from");
    const auto key = std::make_tuple(b->second, ctx.micro_batch, ctx.seq_len, ctx.tp, ctx.cp, ctx.sequence_parallel,
                                     int(ctx.dtype), ctx.ep, ctx.fp8_linears, int(ctx.linear_format), int(ctx.task),
                                     ctx.lora.rank);
    auto it = op_memo.find(key);
    if (it == op_memo.end())
      it = op_memo.emplace(key, op_costs(graph.blocks[b->second], ctx, cluster, params)).first;
    return it->second[o->second];
  }
};


}  // namespace

struct Simulator::Impl : Model {};

Simulator::Simulator(const ir::Graph& graph, const ir::ClusterSpec& cluster, TrainingSettings settings)
    : Simulator(graph, cluster, settings, default_cost_params(cluster.gpu)) {}

Simulator::Simulator(const ir::Graph& graph, const ir::ClusterSpec& cluster, TrainingSettings settings,
                     CostParams params)
    : impl_(std::make_unique<Impl>()) {
  impl_->graph = graph;
  impl_->cluster = cluster;
  impl_->settings = settings;
  impl_->params = params;
  impl_->routing = token_routing(graph);
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    impl_->block_index.emplace(graph.blocks[b].name, b);
    std::unordered_map<std::string, size_t> ops;
    for (size_t o = 0; o < graph.blocks[b].ops.size(); ++o) ops.emplace(graph.blocks[b].ops[o].name, o);
    impl_->op_index.push_back(std::move(ops));
  }
}

Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
const CostParams& Simulator::params() const { return impl_->params; }

namespace {

// Per-schedule state of one run. Instructions are numbered globally: g = offset[p] + id.
struct Run {
  const ir::Schedule& s;
  const Model& sim;
  Run(const ir::Schedule& schedule, const Model& model) : s(schedule), sim(model) {}
  std::vector<int64_t> offset;  // per program, plus the total at the end
  std::vector<uint32_t> prog;   // g -> program
  std::vector<double> base_s, start_s, end_s, reach_s, extra_s;
  std::vector<int64_t> binding;     // the prerequisite that finished last (-1: none)
  std::vector<int32_t> pending;     // unfinished prerequisites
  std::vector<int64_t> succ_begin, succ;  // CSR: instructions waiting on g
  std::vector<int32_t> sync_of;     // g -> sync group, -1 when it runs alone
  struct Sync {
    std::vector<int64_t> members;
    size_t reached = 0;
    double duration_s = 0;
  };
  std::vector<Sync> syncs;
  std::vector<Category> category;
  // Per program: communication in flight, for the overlap slowdown, and its booking per category.
  struct Flight {
    double start, end;
    Category category;
  };
  std::vector<std::vector<Flight>> in_flight;
  std::vector<std::array<double, kNumCategories>> slowdown_booked;
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> events;
  std::vector<int64_t> deferred;  // kernels reached at the current instant, started after its events
  int64_t seq = 0;

  const ir::Instruction& instr(int64_t g) const {
    return s.programs[prog[size_t(g)]].instructions[size_t(g - offset[prog[size_t(g)]])];
  }
};

// Each mesh axis with its stride (ir::spans_of: the one place strides are derived from a mesh).
std::unordered_map<std::string, AxisPlacement> axis_placements(const ir::Mesh& mesh) {
  std::unordered_map<std::string, AxisPlacement> out;
  for (const auto& axis : mesh.axes) out[axis.name] = ir::spans_of(mesh, {axis.name}).at(0);
  return out;
}

// 1. Base durations (docs/simulator.md §1): compute from op_costs by phase, collectives from the
//    topology's link for the group's placement, send/recv from the link to the peer, optimizer step
//    at HBM bandwidth; alloc, free and wait take no time.
void price(Run& r, const Topology& topology) {
  const ir::Plan& plan = r.s.plan;
  const Model& sim = r.sim;
  const ShardContext ctx = shard_context(plan, sim.settings);
  const bool selective = plan.recompute == ir::Recompute::selective;
  const auto placements = axis_placements(r.s.mesh);
  std::unordered_map<std::string, LinkEstimate> group_links;
  std::map<std::pair<int64_t, int64_t>, LinkEstimate> p2p_links;  // by (lower rank, higher rank)
  const int64_t zero = ir::zero_stage(plan);
  // Under TP communication overlap each TP collective takes its block phase's exposed share (the
  // schedule has no chunked GEMMs for it to hide under); the phase is the program's latest kernel's
  // (the forward's sequence-parallel gather follows the previous layer's last kernel).
  TpExposedShares tp_shares(sim.graph, sim.cluster, sim.params, ctx);
  // Under EP A2A overlap each expert-parallel collective takes its block phase's exposed share over the
  // steady state's merged passes (ep_overlap.hpp): the schedule keeps one micro-batch's phases in order,
  // so the share stands in for the partner micro-batch's kernels.
  EpExposedShares ep_shares(sim.graph, sim.cluster, sim.params, ctx, sim.routing,
                            ep_merged_fraction(plan, plan.grad_accum.value_or(1), sim.params.ep_comm_hidden_fraction));
  // Each program's first rank: its pinned coordinates, every other axis at 0.
  std::vector<int64_t> program_rank(r.s.programs.size(), 0);
  for (size_t p = 0; p < r.s.programs.size(); ++p)
    for (const auto& c : r.s.programs[p].coords)
      if (auto pl = placements.find(c.axis); pl != placements.end()) program_rank[p] += c.index * pl->second.stride;

  for (size_t p = 0; p < r.s.programs.size(); ++p) {
    const auto& instrs = r.s.programs[p].instructions;
    std::optional<size_t> kernel_block;  // the latest kernel's block and phase (TpShares)
    bool kernel_forward = true;
    for (size_t i = 0; i < instrs.size(); ++i) {
      const ir::Instruction& in = instrs[i];
      const int64_t g = r.offset[p] + int64_t(i);
      r.category[size_t(g)] = category_of(in, zero);
      double t = 0;
      if (const auto* c = std::get_if<ir::Compute>(&in.op)) {
        const OpCost& oc = sim.op_cost(*c, ctx, p, in.id);
        kernel_block = sim.block_index.at(c->block);
        kernel_forward = c->phase == ir::Phase::fwd || c->phase == ir::Phase::recompute;
        switch (c->phase) {
          case ir::Phase::fwd: t = oc.fwd_s; break;
          case ir::Phase::bwd_data: t = oc.bwd_data_s; break;
          case ir::Phase::bwd_weight: t = oc.bwd_weight_s; break;
          case ir::Phase::recompute: t = selective ? oc.selective_recompute_s : oc.fwd_s; break;
        }
      } else if (const auto* c = std::get_if<ir::Collective>(&in.op)) {
        const std::string key = axes_key(c->axes);
        auto it = group_links.find(key);
        if (it == group_links.end()) {
          GroupPlacement group;
          for (const auto& a : c->axes) {
            auto pl = placements.find(a);
            if (pl == placements.end())
              throw ir::InputError("schedule", where(p, in.id) + ".axes", "axis '" + a + "' is not in the mesh",
                                   "run ir::verify on the schedule");
            group.axes.push_back(pl->second);
          }
          std::sort(group.axes.begin(), group.axes.end(),
                    [](const AxisPlacement& a, const AxisPlacement& b) { return a.stride < b.stride; });
          it = group_links.emplace(key, topology.link_for_group(group)).first;
        }
        // A DDP bucket (the "grads" buffer, no named tensors, no FSDP) may be reduced in place.
        const bool ddp_bucket = c->kind == CollectiveKind::all_reduce && c->buffer == "grads" && c->tensors.empty() &&
                                ir::zero_stage(r.s.plan) == 0;
        const int64_t n = ir::group_size(r.s.mesh, c->axes);
        if (c->kind == CollectiveKind::all_to_all && in.stream == ir::Stream::ep)  // MoE dispatch / combine
          t = ep_dispatch_time_s(sim.cluster, n, c->bytes, it->second, sim.routing, sim.params.moe_hierarchical_dispatch);
        else
          t = collective_time_s(sim.cluster, c->kind, n, c->bytes, it->second,
                                ddp_bucket ? ddp_bucket_copies(r.s.plan.tp) : HostCopies::scratch);
        if (sim.params.ep_comm_hidden_fraction > 0 && kernel_block && in.stream == ir::Stream::ep)
          t *= ep_shares.share(*kernel_block, kernel_forward, n, it->second);
        if (sim.params.tp_comm_hidden_fraction > 0 && kernel_block && c->axes == std::vector<std::string>{"tp"})
          t *= tp_shares.share(*kernel_block, kernel_forward, it->second);
      } else if (ir::kind(in) == ir::InstrKind::send || ir::kind(in) == ir::InstrKind::recv) {
        const bool send = ir::kind(in) == ir::InstrKind::send;
        const std::string& axis = send ? std::get<ir::Send>(in.op).axis : std::get<ir::Recv>(in.op).axis;
        const int64_t offset = send ? std::get<ir::Send>(in.op).offset : std::get<ir::Recv>(in.op).offset;
        const int64_t bytes = send ? std::get<ir::Send>(in.op).bytes : std::get<ir::Recv>(in.op).bytes;
        auto pl = placements.find(axis);
        if (pl == placements.end())
          throw ir::InputError("schedule", where(p, in.id) + ".axis", "axis '" + axis + "' is not in the mesh",
                               "run ir::verify on the schedule");
        // The link between this program's first rank and its peer: which stage boundary a send
        // crosses decides whether it leaves the node (pp 16 on two nodes: stage 7 -> 8 does).
        const int64_t coord = program_rank[p] / pl->second.stride % pl->second.size;
        const int64_t peer = program_rank[p] + (mod(coord + offset, pl->second.size) - coord) * pl->second.stride;
        const std::pair<int64_t, int64_t> key{std::min(program_rank[p], peer), std::max(program_rank[p], peer)};
        auto it = p2p_links.find(key);
        if (it == p2p_links.end()) it = p2p_links.emplace(key, topology.link_between(key.first, key.second)).first;
        t = peer == program_rank[p] ? 0 : collective_time_s(sim.cluster, CollectiveKind::send_recv, 2, bytes, it->second);
      } else if (const auto* o = std::get_if<ir::OptimizerStep>(&in.op)) {
        t = optimizer_time_s(o->param_elements, o->bytes, sim.cluster, sim.params);
      }
      r.base_s[size_t(g)] = t;
    }
  }
}

// 2. Prerequisites: the previous instruction on the same stream, deps and Wait.on (deduplicated).
void link_prerequisites(Run& r) {
  const int64_t n = r.offset.back();
  const bool serial = !r.sim.params.concurrent_streams;
  std::vector<int64_t> pre_begin(size_t(n) + 1, 0), pre;
  pre.reserve(size_t(n) * 2);
  for (size_t p = 0; p < r.s.programs.size(); ++p) {
    std::array<int64_t, ir::kNumStreams> last, batch_pred;
    std::array<bool, ir::kNumStreams> batch_open{};
    last.fill(-1);
    batch_pred.fill(-1);
    for (const auto& in : r.s.programs[p].instructions) {
      const int64_t g = r.offset[p] + in.id;
      const size_t first = pre.size();
      auto add = [&](ir::InstrId id) {
        if (id < 0 || id >= in.id)
          throw ir::InputError("schedule", where(p, in.id) + ".deps",
                               "dependency #" + std::to_string(id) + " is not an earlier instruction",
                               "run ir::verify on the schedule");
        pre.push_back(r.offset[p] + id);
      };
      // Members of a send/recv batch are issued together: all wait for what precedes the batch.
      // Without concurrent streams (the CPU backend) a program is one queue in program order.
      const size_t stream = serial ? 0 : size_t(in.stream);
      const bool p2p = ir::kind(in) == ir::InstrKind::send || ir::kind(in) == ir::InstrKind::recv;
      const int64_t stream_pred = p2p && batch_open[stream] ? batch_pred[stream] : last[stream];
      if (p2p) {
        const bool batched = std::holds_alternative<ir::Send>(in.op) ? std::get<ir::Send>(in.op).batch_with_next
                                                                     : std::get<ir::Recv>(in.op).batch_with_next;
        if (batched && !batch_open[stream]) batch_pred[stream] = stream_pred;
        batch_open[stream] = batched;
      } else {
        batch_open[stream] = false;
      }
      if (stream_pred >= 0) add(stream_pred);
      for (ir::InstrId d : in.deps) add(d);
      if (const auto* w = std::get_if<ir::Wait>(&in.op)) add(w->on);
      std::sort(pre.begin() + int64_t(first), pre.end());
      pre.erase(std::unique(pre.begin() + int64_t(first), pre.end()), pre.end());
      r.pending[size_t(g)] = int32_t(pre.size() - first);
      pre_begin[size_t(g) + 1] = int64_t(pre.size());
      last[stream] = in.id;
    }
  }
  // Invert into successor lists.
  std::vector<int64_t> count(size_t(n) + 1, 0);
  for (int64_t q : pre) ++count[size_t(q) + 1];
  std::partial_sum(count.begin(), count.end(), count.begin());
  r.succ_begin = count;
  r.succ.assign(pre.size(), 0);
  for (int64_t g = 0; g < n; ++g)
    for (int64_t k = pre_begin[size_t(g)]; k < pre_begin[size_t(g) + 1]; ++k) r.succ[size_t(count[size_t(pre[size_t(k)])]++)] = g;
}

// 3. Rendezvous groups. A collective over axes A issued by program C waits for the matching
//    collective (same ordinal among those over A) of every participant; a Send and its Recv, and the
//    send/recv batched with them (batch_with_next), start together.

// Sends keyed (axis, offset mod size, tag) and recvs keyed (axis, -offset mod size, tag), so a send
// and the recv it feeds share a key.
using P2pKey = std::tuple<std::string, int64_t, int64_t>;

// Per program, the instructions that rendezvous, in program order.
struct RendezvousIndex {
  std::vector<std::map<std::string, std::vector<int64_t>>> by_group;  // per axes set: collectives
  std::vector<std::map<P2pKey, std::vector<int64_t>>> sends, recvs;
};

RendezvousIndex index_rendezvous(const Run& r) {
  const size_t np = r.s.programs.size();
  RendezvousIndex x{std::vector<std::map<std::string, std::vector<int64_t>>>(np),
                    std::vector<std::map<P2pKey, std::vector<int64_t>>>(np),
                    std::vector<std::map<P2pKey, std::vector<int64_t>>>(np)};
  auto axis_size = [&](const std::string& axis) {
    auto i = ir::axis_index(r.s.mesh, axis);
    return i ? r.s.mesh.axes[*i].size : int64_t{1};
  };
  for (size_t p = 0; p < np; ++p)
    for (const auto& in : r.s.programs[p].instructions) {
      const int64_t g = r.offset[p] + in.id;
      if (const auto* c = std::get_if<ir::Collective>(&in.op)) x.by_group[p][axes_key(c->axes)].push_back(g);
      if (const auto* snd = std::get_if<ir::Send>(&in.op))
        x.sends[p][{snd->axis, mod(snd->offset, axis_size(snd->axis)), snd->tag}].push_back(g);
      if (const auto* rcv = std::get_if<ir::Recv>(&in.op))
        x.recvs[p][{rcv->axis, mod(-rcv->offset, axis_size(rcv->axis)), rcv->tag}].push_back(g);
    }
  return x;
}

// Collectives: one sync per instance over several programs, created by the lowest participant.
void add_collective_syncs(Run& r, const RendezvousIndex& x) {
  for (size_t p = 0; p < r.s.programs.size(); ++p) {
    for (const auto& [key, ids] : x.by_group[p]) {
      const auto& axes = std::get<ir::Collective>(r.instr(ids.front()).op).axes;
      const std::vector<size_t> parts = ir::participants(r.s, p, axes);
      if (parts.size() <= 1 || parts.front() != p) continue;
      for (size_t k = 0; k < ids.size(); ++k) {
        Run::Sync sync;
        for (size_t q : parts) {
          auto it = x.by_group[q].find(key);
          if (it == x.by_group[q].end() || it->second.size() != ids.size())
            throw ir::InputError("schedule", where(q, 0),
                                 "program " + std::to_string(q) + " issues " +
                                     std::to_string(it == x.by_group[q].end() ? 0 : it->second.size()) +
                                     " collectives over " + key + " but program " + std::to_string(p) + " issues " +
                                     std::to_string(ids.size()),
                                 "run ir::verify on the schedule (rule collective-order)");
          sync.members.push_back(it->second[k]);
        }
        for (int64_t g : sync.members) r.sync_of[size_t(g)] = int32_t(r.syncs.size());
        r.syncs.push_back(std::move(sync));
      }
    }
  }
}

// Union-find over instructions: the send/recv that must start together end up in one set.
struct P2pSets {
  std::vector<int64_t> parent;
  std::vector<char> is_p2p;     // g is a matched send or recv
  std::vector<double> pair_s;   // g's pair's duration: the slower side's, seconds
  explicit P2pSets(int64_t n) : parent(size_t(n)), is_p2p(size_t(n), 0), pair_s(size_t(n), 0) {
    std::iota(parent.begin(), parent.end(), 0);
  }
  int64_t find(int64_t x) {
    while (parent[size_t(x)] != x) x = parent[size_t(x)] = parent[size_t(parent[size_t(x)])];
    return x;
  }
  void unite(int64_t a, int64_t b) { parent[size_t(find(a))] = find(b); }
};

// Pairs each send with its recv on the peer program, in order per key; throws when counts differ.
void match_sends_to_recvs(const Run& r, const RendezvousIndex& x, P2pSets& sets) {
  for (size_t p = 0; p < r.s.programs.size(); ++p) {
    for (const auto& [key, ids] : x.sends[p]) {
      const auto& [axis, offset, tag] = key;
      const auto q = ir::peer_program(r.s, p, axis, offset);
      const std::vector<int64_t>* matched = nullptr;
      if (q) {
        auto it = x.recvs[*q].find(key);
        if (it != x.recvs[*q].end()) matched = &it->second;
      }
      if (!matched || matched->size() != ids.size())
        throw ir::InputError("schedule", where(p, ids.front() - r.offset[p]),
                             std::to_string(ids.size()) + " sends along " + axis + " with tag " + std::to_string(tag) +
                                 " but " + std::to_string(matched ? matched->size() : 0) + " matching receives",
                             "run ir::verify on the schedule (rule unmatched-send)");
      for (size_t k = 0; k < ids.size(); ++k) {
        const int64_t a = ids[k], b = (*matched)[k];
        sets.unite(a, b);
        sets.is_p2p[size_t(a)] = sets.is_p2p[size_t(b)] = 1;
        sets.pair_s[size_t(a)] = sets.pair_s[size_t(b)] = std::max(r.base_s[size_t(a)], r.base_s[size_t(b)]);
      }
    }
  }
}

// Joins each send/recv marked batch_with_next with the next one on its stream; throws on a recv
// that no send matched.
void join_p2p_batches(const Run& r, P2pSets& sets) {
  for (size_t p = 0; p < r.s.programs.size(); ++p) {
    std::array<int64_t, ir::kNumStreams> batch_open;  // last send/recv with batch_with_next, per stream
    batch_open.fill(-1);
    for (const auto& in : r.s.programs[p].instructions) {
      const int64_t g = r.offset[p] + in.id;
      bool batch = false;
      if (const auto* snd = std::get_if<ir::Send>(&in.op)) batch = snd->batch_with_next;
      else if (const auto* rcv = std::get_if<ir::Recv>(&in.op)) batch = rcv->batch_with_next;
      else continue;
      if (!sets.is_p2p[size_t(g)])
        throw ir::InputError("schedule", where(p, in.id), "receive without a matching send",
                             "run ir::verify on the schedule (rule unmatched-recv)");
      auto& open = batch_open[size_t(in.stream)];
      if (open >= 0) sets.unite(open, g);
      open = batch ? g : -1;
    }
  }
}

// Send/recv: one sync per set, lasting as long as its slowest pair.
void add_p2p_syncs(Run& r, const RendezvousIndex& x) {
  const int64_t n = r.offset.back();
  P2pSets sets(n);
  match_sends_to_recvs(r, x, sets);
  join_p2p_batches(r, sets);
  std::unordered_map<int64_t, int32_t> sync_of_root;
  for (int64_t g = 0; g < n; ++g) {
    if (!sets.is_p2p[size_t(g)]) continue;
    const int64_t root = sets.find(g);
    auto [it, fresh] = sync_of_root.emplace(root, int32_t(r.syncs.size()));
    if (fresh) r.syncs.emplace_back();
    Run::Sync& sync = r.syncs[size_t(it->second)];
    sync.members.push_back(g);
    sync.duration_s = std::max(sync.duration_s, sets.pair_s[size_t(g)]);
    r.sync_of[size_t(g)] = it->second;
  }
}

void build_syncs(Run& r) {
  const RendezvousIndex x = index_rendezvous(r);
  add_collective_syncs(r, x);
  add_p2p_syncs(r, x);
  for (auto& sync : r.syncs)
    if (sync.duration_s == 0)
      for (int64_t g : sync.members) sync.duration_s = std::max(sync.duration_s, r.base_s[size_t(g)]);
}

void start(Run& r, int64_t g, double now, double duration) {
  const size_t p = r.prog[size_t(g)];
  const ir::Instruction& in = r.instr(g);
  r.start_s[size_t(g)] = now;
  if (is_kernel(in) && r.sim.params.overlap_compute_slowdown > 0 && duration > 0) {
    // Compute shares the SMs with the communication kernels in flight when it starts: it runs
    // `overlap_compute_slowdown` slower for the part of its duration they still run (docs/simulator.md §2).
    auto& flights = r.in_flight[p];
    std::erase_if(flights, [now](const Run::Flight& f) { return f.end <= now; });
    const double window_end = now + duration;
    double covered = 0;
    std::array<double, kNumCategories> per{};
    double per_total = 0;
    for (const auto& f : flights) {
      const double o = std::min(f.end, window_end) - now;
      covered = std::max(covered, o);
      per[size_t(f.category)] += o;
      per_total += o;
    }
    if (covered > 0) {
      const double extra = r.sim.params.overlap_compute_slowdown * covered;
      r.extra_s[size_t(g)] = extra;
      for (int c = 0; c < kNumCategories; ++c) r.slowdown_booked[p][size_t(c)] += extra * per[size_t(c)] / per_total;
      duration += extra;
    }
  }
  if (is_communication(in) && duration > 0) r.in_flight[p].push_back({now, now + duration, r.category[size_t(g)]});
  r.events.push({now + duration, r.seq++, g});
}

void reach(Run& r, int64_t g, double now) {
  r.reach_s[size_t(g)] = now;
  const int32_t sid = r.sync_of[size_t(g)];
  if (sid < 0) {
    // Kernels start after the communication that starts at the same instant (so they see it in
    // flight); run_events starts them once the instant's events are processed.
    if (is_kernel(r.instr(g))) r.deferred.push_back(g);
    else start(r, g, now, r.base_s[size_t(g)]);
    return;
  }
  Run::Sync& sync = r.syncs[size_t(sid)];
  if (++sync.reached < sync.members.size()) return;
  for (int64_t m : sync.members) start(r, m, now, sync.duration_s);
}

// 4. The event loop: finish events in time order (ties in issue order); a finish releases the
//    instructions waiting on it.
void run_events(Run& r) {
  const int64_t n = r.offset.back();
  auto start_deferred = [&r](double now) {
    for (int64_t g : r.deferred) start(r, g, now, r.base_s[size_t(g)]);
    r.deferred.clear();
  };
  for (int64_t g = 0; g < n; ++g)
    if (r.pending[size_t(g)] == 0) reach(r, g, 0.0);
  start_deferred(0.0);
  while (!r.events.empty()) {
    const double now = r.events.top().time;
    while (!r.events.empty() && r.events.top().time == now) {
      const Finish f = r.events.top();
      r.events.pop();
      r.end_s[size_t(f.g)] = f.time;
      for (int64_t k = r.succ_begin[size_t(f.g)]; k < r.succ_begin[size_t(f.g) + 1]; ++k) {
        const int64_t w = r.succ[size_t(k)];
        if (--r.pending[size_t(w)] == 0) {
          r.binding[size_t(w)] = f.g;
          reach(r, w, f.time);
        }
      }
    }
    start_deferred(now);
  }
  for (int64_t g = 0; g < n; ++g) {
    if (r.end_s[size_t(g)] >= 0) continue;
    const size_t p = r.prog[size_t(g)];
    std::string why = r.reach_s[size_t(g)] >= 0 ? "waits for its collective or send/recv partners"
                                                : "waits for an instruction that never finishes";
    throw ir::InputError("schedule", where(p, g - r.offset[p]),
                         "simulation stuck: '" + ir::to_text(r.instr(g), p) + "' " + why,
                         "run ir::verify on the schedule (rule deadlock)");
  }
}

// 5. Breakdown of one program (docs/simulator.md §3): walk its compute stream; busy time is booked
//    by instruction kind, each idle gap by following the chain of binding prerequisites backwards
//    (a communication instruction's transfer is exposed communication of its category, waiting for
//    another program's arrival is bubble); the tail up to the makespan is bubble.
TimeBreakdown program_breakdown(const Run& r, size_t p, double makespan) {
  TimeBreakdown t;
  const auto& instrs = r.s.programs[p].instructions;
  const int64_t off = r.offset[p];
  auto explain = [&](double lo, double hi, int64_t d) {
    while (hi > lo && d >= 0) {
      const double s = r.start_s[size_t(d)], e = std::min(hi, r.end_s[size_t(d)]);
      const Category c = r.category[size_t(d)];
      if (e > s && e > lo && c != Category::none) slot(t, c) += e - std::max(lo, s);
      hi = std::min(hi, s);
      if (hi <= lo) return;
      const double reached = r.reach_s[size_t(d)];
      if (reached < hi) {
        t.bubble_s += hi - std::max(lo, reached);  // waiting for other programs
        hi = reached;
      }
      d = r.binding[size_t(d)];
    }
    if (hi > lo) t.bubble_s += hi - lo;
  };
  double prev_end = 0;
  for (size_t i = 0; i < instrs.size(); ++i) {
    if (instrs[i].stream != ir::Stream::compute) continue;
    const int64_t g = off + int64_t(i);
    const double s = r.start_s[size_t(g)], e = r.end_s[size_t(g)];
    if (s > prev_end) {
      const double reached = r.reach_s[size_t(g)];
      if (reached < s) t.bubble_s += s - std::max(prev_end, reached);
      explain(prev_end, std::min(s, reached), r.binding[size_t(g)]);
    }
    const double busy = e - s - r.extra_s[size_t(g)];
    slot(t, r.category[size_t(g)]) += busy;
    prev_end = std::max(prev_end, e);
  }
  for (int c = 0; c < kNumCategories; ++c) slot(t, Category(c)) += r.slowdown_booked[p][size_t(c)];
  // Tail: after the last compute-stream instruction, the program waits for its other streams.
  int64_t last = -1;
  double program_end = 0;
  for (size_t i = 0; i < instrs.size(); ++i) {
    const int64_t g = off + int64_t(i);
    if (r.end_s[size_t(g)] > program_end) program_end = r.end_s[size_t(g)], last = g;
  }
  if (program_end > prev_end) explain(prev_end, program_end, last);
  if (makespan > std::max(prev_end, program_end)) t.bubble_s += makespan - std::max(prev_end, program_end);
  return t;
}

ProgramMemory program_memory(const Run& r, size_t p, const CostParams& params) {
  struct Change {
    double time;
    int64_t id, bytes;
    ir::BufferKind kind;
    const std::string* buffer;
  };
  std::vector<Change> changes;
  std::unordered_map<std::string, std::pair<int64_t, ir::BufferKind>> live;
  for (const auto& in : r.s.programs[p].instructions) {
    const double t = r.start_s[size_t(r.offset[p] + in.id)];
    if (const auto* a = std::get_if<ir::Alloc>(&in.op)) {
      live[a->buffer] = {a->bytes, a->kind};
      changes.push_back({t, in.id, a->bytes, a->kind, &a->buffer});
    } else if (const auto* f = std::get_if<ir::Free>(&in.op)) {
      auto it = live.find(f->buffer);
      if (it == live.end()) continue;  // verify reports it (double-free); nothing to release here
      changes.push_back({t, in.id, -it->second.first, it->second.second, &f->buffer});
      live.erase(it);
    }
  }
  std::sort(changes.begin(), changes.end(),
            [](const Change& a, const Change& b) { return std::tie(a.time, a.id) < std::tie(b.time, b.id); });
  ProgramMemory m;
  std::array<int64_t, kNumBufferKinds> by_kind{};
  int64_t bytes = 0;
  size_t peak_change = 0;
  m.timeline.reserve(changes.size());
  for (size_t i = 0; i < changes.size(); ++i) {
    const Change& c = changes[i];
    bytes += c.bytes;
    by_kind[size_t(c.kind)] += c.bytes;
    if (!m.timeline.empty() && m.timeline.back().time_s == c.time)
      m.timeline.back().bytes = bytes;
    else
      m.timeline.push_back({c.time, bytes});
    if (bytes > m.peak_bytes) {
      m.peak_bytes = bytes;
      m.peak_time_s = c.time;
      m.peak_by_kind = by_kind;
      peak_change = i;
    }
  }
  // Replay up to the peak for the live set (once, not at every new maximum).
  if (!changes.empty() && m.peak_bytes > 0) {
    std::unordered_map<std::string, LiveBuffer> at_peak;
    for (size_t i = 0; i <= peak_change; ++i) {
      const Change& c = changes[i];
      if (c.bytes >= 0) at_peak[*c.buffer] = {*c.buffer, c.bytes, c.kind};
      else at_peak.erase(*c.buffer);
    }
    for (auto& [name, b] : at_peak) m.peak_live.push_back(std::move(b));
    std::sort(m.peak_live.begin(), m.peak_live.end(), [](const LiveBuffer& a, const LiveBuffer& b) {
      return std::tie(b.bytes, a.name) < std::tie(a.bytes, b.name);
    });
  }
  m.peak_reserved_bytes = m.peak_bytes + params.cuda_context_bytes + params.nccl_buffer_bytes +
                          int64_t(std::llround(params.allocator_fragmentation * double(m.peak_bytes)));
  return m;
}

}  // namespace

SimulationResult Simulator::simulate(const ir::Schedule& schedule) const {
  Run r{schedule, *impl_};
  const size_t np = schedule.programs.size();
  r.offset.assign(np + 1, 0);
  for (size_t p = 0; p < np; ++p) {
    const auto& instrs = schedule.programs[p].instructions;
    for (size_t i = 0; i < instrs.size(); ++i)
      if (instrs[i].id != int64_t(i))
        throw ir::InputError("schedule", where(p, int64_t(i)) + ".id",
                             "id " + std::to_string(instrs[i].id) + " is not its position " + std::to_string(i),
                             "run ir::verify on the schedule");
    r.offset[p + 1] = r.offset[p] + int64_t(instrs.size());
  }
  const size_t n = size_t(r.offset.back());
  r.prog.resize(n);
  for (size_t p = 0; p < np; ++p)
    std::fill(r.prog.begin() + r.offset[p], r.prog.begin() + r.offset[p + 1], uint32_t(p));
  r.base_s.assign(n, 0);
  r.start_s.assign(n, -1);
  r.end_s.assign(n, -1);
  r.reach_s.assign(n, -1);
  r.extra_s.assign(n, 0);
  r.binding.assign(n, -1);
  r.pending.assign(n, 0);
  r.sync_of.assign(n, -1);
  r.category.assign(n, Category::none);
  r.in_flight.resize(np);
  r.slowdown_booked.assign(np, {});

  const Topology topology(impl_->cluster, std::max<int64_t>(1, schedule.num_gpus), impl_->params);
  price(r, topology);
  link_prerequisites(r);
  build_syncs(r);
  run_events(r);

  SimulationResult out;
  out.timeline.reserve(n);
  out.programs.resize(np);
  int64_t max_mb = -1;
  for (size_t p = 0; p < np; ++p) {
    ProgramResult& pr = out.programs[p];
    for (const auto& in : schedule.programs[p].instructions) {
      const int64_t g = r.offset[p] + in.id;
      const double s = r.start_s[size_t(g)], e = r.end_s[size_t(g)];
      out.timeline.push_back({int64_t(p), in.stream, in.id, s, e});
      pr.busy_s[size_t(in.stream)] += e - s;
      pr.end_s = std::max(pr.end_s, e);
      if (const auto* c = std::get_if<ir::Compute>(&in.op)) max_mb = std::max(max_mb, c->micro_batch);
    }
    if (pr.end_s > out.makespan_s) out.makespan_s = pr.end_s, out.critical_program = p;
  }
  out.micro_batches = max_mb + 1;
  const double overhead =
      double(out.micro_batches) * impl_->params.per_microbatch_overhead_s + impl_->params.per_step_overhead_s;
  out.step_time_s = out.makespan_s + overhead;
  for (size_t p = 0; p < np; ++p) {
    ProgramResult& pr = out.programs[p];
    pr.breakdown = program_breakdown(r, p, out.makespan_s);
    pr.breakdown.overhead_s = overhead;
    pr.memory = program_memory(r, p, impl_->params);
    if (pr.memory.peak_reserved_bytes > out.peak_bytes) out.peak_bytes = pr.memory.peak_reserved_bytes, out.peak_program = p;
  }
  if (np > 0) out.breakdown = out.programs[out.critical_program].breakdown;
  return out;
}

}  // namespace mgt::cost
