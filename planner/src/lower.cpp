// Lowering driver (docs/lowering.md): resolves the plan, builds the mesh, the per-stage layout and
// the pipeline order once, runs the passes of lower_passes.cpp in order (each verified in debug
// builds and tests) and materialises the programs.
#include "mgt/planner/lower.hpp"

#include "mgt/cost_model/task_cost.hpp"
#include "mgt/ir/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

namespace mgt::plan {

namespace lowering {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

int64_t State::group_nodes(const std::vector<std::string>& axes) {
  auto it = nodes_cache.find(axes);
  if (it != nodes_cache.end()) return it->second;
  return nodes_cache[axes] = ir::nodes_spanned(schedule.mesh, axes, cluster->gpus_per_node);
}

ir::Collective State::collective(ir::CollectiveKind kind, const std::vector<std::string>& axes, int64_t bytes,
                                 ir::DType dtype, std::string buffer) {
  ir::Collective c;
  c.kind = kind;
  c.axes = axes;
  c.group_size = ir::group_size(schedule.mesh, axes);
  c.nodes = group_nodes(axes);
  c.bytes = bytes;
  c.dtype = dtype;
  c.buffer = std::move(buffer);
  return c;
}

int64_t add(Stage& stage, Key key, ir::Stream stream, ir::Payload op, std::vector<int64_t> deps) {
  Node n;
  n.key = key;
  n.instr.stream = stream;
  n.instr.deps = std::move(deps);
  n.instr.op = std::move(op);
  stage.nodes.push_back(std::move(n));
  return int64_t(stage.nodes.size()) - 1;
}

namespace {
std::vector<int64_t> sorted_handles(const Stage& stage) {
  std::vector<int64_t> order(stage.nodes.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return stage.nodes[size_t(a)].key < stage.nodes[size_t(b)].key; });
  return order;
}
}  // namespace

void materialize(State& state) {
  for (size_t p = 0; p < state.stages.size(); ++p) {
    const Stage& stage = state.stages[p];
    const std::vector<int64_t> order = sorted_handles(stage);
    std::vector<int64_t> pos(order.size());
    for (size_t i = 0; i < order.size(); ++i) pos[size_t(order[i])] = int64_t(i);
    auto& out = state.schedule.programs[p].instructions;
    out.clear();
    out.reserve(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      ir::Instruction in = stage.nodes[size_t(order[i])].instr;
      in.id = int64_t(i);
      for (auto& d : in.deps) d = pos[size_t(d)];
      std::sort(in.deps.begin(), in.deps.end());
      in.deps.erase(std::unique(in.deps.begin(), in.deps.end()), in.deps.end());
      if (auto* w = std::get_if<ir::Wait>(&in.op)) w->on = pos[size_t(w->on)];
      out.push_back(std::move(in));
    }
  }
}

void index_computes(State& state) {
  for (Stage& stage : state.stages) {
    stage.compute_order.clear();
    for (int64_t h : sorted_handles(stage))
      if (std::holds_alternative<ir::Compute>(stage.nodes[size_t(h)].instr.op)) stage.compute_order.push_back(h);
    stage.next_compute.assign(stage.nodes.size(), -1);
    stage.prev_compute.assign(stage.nodes.size(), -1);
    for (size_t i = 0; i < stage.compute_order.size(); ++i) {
      const int64_t h = stage.compute_order[i];
      if (i + 1 < stage.compute_order.size()) stage.next_compute[size_t(h)] = stage.compute_order[i + 1];
      if (i > 0) stage.prev_compute[size_t(h)] = stage.compute_order[i - 1];
    }
    for (auto& task : stage.unit_nodes)
      for (UnitNodes& u : task) {
        u.first = u.last = -1;
        for (const auto* list : {&u.fwd, &u.recompute, &u.bwd_data, &u.bwd_weight})
          for (int64_t h : *list) {
            if (h < 0) continue;
            const Key& k = stage.nodes[size_t(h)].key;
            if (u.first < 0 || k < stage.nodes[size_t(u.first)].key) u.first = h;
            if (u.last < 0 || stage.nodes[size_t(u.last)].key < k) u.last = h;
          }
      }
  }
}

namespace {

// ---- the plan's meaning, from ir::resolve (the one place it is derived) ----
void adopt_layout(State& s, ir::Layout layout) {
  s.schedule.mesh = layout.mesh();
  // Groups name only axes of size > 1 (a collective over a size-1 group is not emitted).
  s.tp_axes = layout.axes(ir::MeshGroup::tp);
  s.cp_axes = layout.axes(ir::MeshGroup::cp);
  s.ep_axes = layout.axes(ir::MeshGroup::ep);
  s.shard_axes = layout.axes(ir::MeshGroup::shard);
  s.expert_shard_axes = layout.axes(ir::MeshGroup::expert_shard);
  s.replicate_axes = layout.axes(ir::MeshGroup::replicate);
  s.dp_axes = layout.axes(ir::MeshGroup::dp);
  s.expert_replicate_axes = layout.axes(ir::MeshGroup::expert_replicate);
  s.expert_dp_axes = layout.axes(ir::MeshGroup::expert_dp);
  s.layout = std::move(layout);
}

// A schedule holds every op of every micro-batch as instructions (docs/lowering.md), so its size is
// micro-batches per rank x op copies of the model; compile, simulate and run materialise all of it.
// Past kMaxScheduleOpSteps (about 3 instructions each; measured on 2 busy cores: Llama-3.1-8B pp 16
// at 530K op steps lowered and simulated in 10.6 s and 1.2 GB, 405B pp 126 at 1.05M in 18 s and
// 2.5 GB) the plan is refused before anything is built. The estimator prices any batch analytically.
constexpr int64_t kMaxScheduleOpSteps = int64_t{1} << 19;

void require_bounded_schedule(const ir::Graph& graph, const ir::Layout& layout) {
  int64_t op_copies = 0;  // every op of every block copy, each held by one pipeline stage
  for (const auto& b : graph.blocks) op_copies += b.repeat * int64_t(b.ops.size() + 1);
  const int64_t micro_batches = layout.grad_accum;
  if (op_copies > kMaxScheduleOpSteps / std::max<int64_t>(micro_batches, 1))
    throw ir::InputError(
        "--global-batch", "",
        std::to_string(micro_batches) + " micro-batches per rank x " + std::to_string(op_copies) +
            " op copies is more than the " + std::to_string(kMaxScheduleOpSteps) +
            " op steps a schedule may hold (compile, simulate and run build one instruction per op and micro-batch)",
        "use a smaller --global-batch or --global-batch-tokens, a larger micro_batch in --plan, or `estimate`, which "
        "prices any batch");
}

void build_block_infos(State& s) {
  const ir::Graph& g = *s.graph;
  for (const auto& block : g.blocks) {
    BlockInfo info;
    info.cost = cost::block_cost(block, s.ctx, *s.cluster, s.params);
    const auto costs = cost::op_costs(block, s.ctx, *s.cluster, s.params);
    for (size_t j = 0; j < block.ops.size(); ++j) {
      const ir::Op& op = block.ops[j];
      OpInfo o;
      o.cost = costs[j];
      o.fwd_flops = std::llround(costs[j].fwd_flops);
      o.is_loss = op.kind == ir::OpKind::softmax_cross_entropy;
      o.is_attention = op.kind == ir::OpKind::attention_core;
      o.has_weight_grad = costs[j].bwd_weight_s > 0;
      o.selective = block.is_layer && costs[j].selective_recompute_s > 0;
      std::vector<std::string> names = op.inputs;
      if (!op.output.empty()) names.push_back(op.output);
      for (const auto& name : names) {
        const ir::TensorDecl* t = ir::find_tensor(block, name);
        if (!t) continue;
        o.bytes += cost::local_elements(*t, s.ctx) * ir::dtype_bytes(s.ctx.dtype);
        const bool in_tp = s.ctx.tp > 1 && std::any_of(t->dims.begin(), t->dims.end(),
                                                        [](const ir::Dim& d) { return cost::is_tp_dim(d.name); });
        for (const auto& d : t->dims)
          if (std::none_of(o.dims.begin(), o.dims.end(), [&](const ir::Dim& x) { return x.name == d.name; }))
            o.dims.push_back({d.name, cost::local_dim_size(d, s.ctx, in_tp)});
      }
      for (const auto& c : costs[j].fwd_collectives) {
        info.fwd_ws_bytes = std::max(info.fwd_ws_bytes, c.bytes);
        if (c.axis != cost::BlockCollective::Axis::cp)
          info.recompute_collective_bytes = std::max(info.recompute_collective_bytes, c.bytes);
      }
      for (const auto& c : costs[j].bwd_collectives) info.bwd_collective_bytes = std::max(info.bwd_collective_bytes, c.bytes);
      info.ops.push_back(std::move(o));
    }
    if (block.is_layer && s.boundary_bytes == 0) s.boundary_bytes = info.cost.boundary_bytes;
    s.blocks.push_back(std::move(info));
  }
}

// Tied parameters (Graph::tied_parameters): elements of the second copy when both sit on one stage.
struct Tie {
  size_t first_block, second_block;
  int64_t local_elements;
};
std::vector<Tie> find_ties(const State& s) {
  const ir::Graph& g = *s.graph;
  auto block_index = [&](const std::string& q) -> std::optional<size_t> {
    const std::string name = q.substr(0, q.find('.'));
    for (size_t b = 0; b < g.blocks.size(); ++b)
      if (g.blocks[b].name == name) return b;
    return std::nullopt;
  };
  std::vector<Tie> ties;
  for (const auto& [first, second] : g.tied_parameters) {
    const auto b1 = block_index(first), b2 = block_index(second);
    if (!b1 || !b2) continue;
    const ir::TensorDecl* t = ir::find_tensor(g.blocks[*b2], second.substr(second.find('.') + 1));
    if (!t) continue;
    int64_t local = 1;
    for (const auto& d : t->dims) local *= cost::is_tp_dim(d.name) ? ceil_div(d.size, s.layout.plan.tp) : d.size;
    ties.push_back({*b1, *b2, local});
  }
  return ties;
}

// ---- stage layout: the block copies of each chunk (ir::for_each_block_copy), copy by copy ----
void build_layout(State& s) {
  const ir::Plan& p = s.layout.plan;
  const ir::Graph& g = *s.graph;
  std::vector<std::vector<Unit>> virt(static_cast<size_t>(s.layout.pipeline.virtual_stages));
  ir::for_each_block_copy(g, s.layout.pipeline, [&](size_t b, int64_t copy, int64_t chunk) {
    virt[size_t(chunk)].push_back({int32_t(b), copy, false, 0});
  });
  // Full recompute: the first recompute_layers layer copies of every chunk (all when unset).
  if (p.recompute == ir::Recompute::full)
    for (auto& chunk : virt) {
      int64_t done = 0;
      for (Unit& u : chunk)
        if (g.blocks[size_t(u.block)].is_layer && (!p.recompute_layers || done < *p.recompute_layers)) {
          u.full_recompute = true;
          ++done;
        }
    }
  const auto ties = find_ties(s);
  const int64_t shard = s.layout.zero_stage >= 1 ? s.layout.shard_group : 1;
  const int64_t expert_shard = s.layout.zero_stage >= 1 ? s.layout.expert_shard_group : 1;
  s.stages.resize(size_t(p.pp));
  for (int64_t k = 0; k < p.pp; ++k) {
    Stage& st = s.stages[size_t(k)];
    st.index = k;
    for (int64_t c = 0; c < p.vpp; ++c) st.chunks.push_back(virt[size_t(c * p.pp + k)]);
    std::vector<Unit*> first_of(g.blocks.size(), nullptr);
    int64_t adapters = 0, nf4 = 0;
    for (auto& chunk : st.chunks)
      for (Unit& u : chunk) {
        if (!first_of[size_t(u.block)]) first_of[size_t(u.block)] = &u;
        const auto& c = s.blocks[size_t(u.block)].cost;
        st.params += c.param_elements_local;
        st.expert += c.expert_param_elements_local;
        adapters += c.adapter_param_elements_local;
        nf4 += c.nf4_param_elements_local;
      }
    for (const Tie& t : ties)
      if (first_of[t.first_block] && first_of[t.second_block]) {
        first_of[t.second_block]->tied_elements += t.local_elements;
        st.params -= t.local_elements;
      }
    if (s.ctx.task == ir::Task::lora || s.ctx.task == ir::Task::qlora) {
      // The estimator's rule (estimator_memory.cpp stage_memory): the frozen base as stored, sharded only under
      // ZeRO-3; the trained weights, their gradients and optimizer states are the adapters.
      const double base = cost::frozen_base_bytes(st.params, std::min(nf4, st.params));
      st.frozen_bytes = int64_t(std::ceil(s.layout.zero_stage == 3 ? base / double(s.layout.shard_group) : base));
      st.params = adapters, st.expert = 0;
    }
    st.shard_params = ceil_div(st.params - st.expert, shard) + ceil_div(st.expert, expert_shard);
  }
}

// ---- pipeline order (Narayanan et al. 2021 §2; Megatron-LM schedules.py) ----
void build_tasks(State& s) {
  const int64_t pp = s.layout.plan.pp, vpp = s.layout.plan.vpp, ga = s.layout.grad_accum;
  for (Stage& st : s.stages) {
    const int64_t k = st.index;
    if (vpp == 1) {
      const int64_t warmup = std::min(pp - k - 1, ga);
      for (int64_t m = 0; m < warmup; ++m) st.tasks.push_back({true, 0, m});
      for (int64_t i = 0; i < ga - warmup; ++i) {
        st.tasks.push_back({true, 0, warmup + i});
        st.tasks.push_back({false, 0, i});
      }
      for (int64_t m = ga - warmup; m < ga; ++m) st.tasks.push_back({false, 0, m});
      continue;
    }
    const int64_t total = ga * vpp;
    const int64_t warmup = ga == pp ? total : std::min((pp - k - 1) * 2 + (vpp - 1) * pp, total);
    auto fwd_task = [&](int64_t i) {
      return Task{true, int32_t((i % (pp * vpp)) / pp), (i / (pp * vpp)) * pp + i % pp};
    };
    auto bwd_task = [&](int64_t i) {
      return Task{false, int32_t(vpp - 1 - (i % (pp * vpp)) / pp), (i / (pp * vpp)) * pp + i % pp};
    };
    for (int64_t i = 0; i < warmup; ++i) st.tasks.push_back(fwd_task(i));
    for (int64_t i = 0; i < total - warmup; ++i) {
      st.tasks.push_back(fwd_task(warmup + i));
      st.tasks.push_back(bwd_task(i));
    }
    for (int64_t i = total - warmup; i < total; ++i) st.tasks.push_back(bwd_task(i));
  }
}

bool is_memory_rule(const std::string& problem) {
  for (const char* rule : {"use-before-alloc", "use-after-free", "double-alloc", "double-free", "leak", "buffer-size"})
    if (problem.rfind(rule, 0) == 0) return true;
  return false;
}

void verify_pass(State& s, const std::string& pass, bool memory_done) {
  materialize(s);
  std::vector<std::string> problems = ir::verify(s.schedule);
  if (!memory_done) std::erase_if(problems, is_memory_rule);
  if (problems.empty()) return;
  std::string text = "lowering pass '" + pass + "' broke the schedule: " + problems[0];
  for (size_t i = 1; i < problems.size() && i < 3; ++i) text += "; " + problems[i];
  throw std::logic_error(text);
}

struct Pass {
  const char* name;
  void (*run)(State&);
};
constexpr Pass kPasses[] = {
    {"compute", compute_pass}, {"recompute", recompute_pass}, {"tp", tp_pass},     {"cp", cp_pass},
    {"ep", ep_pass},           {"fsdp", fsdp_pass},           {"dp", dp_pass},     {"zero", zero_pass},
    {"pp", pp_pass},           {"optimizer", optimizer_pass}, {"memory", memory_pass},
};

}  // namespace
}  // namespace lowering

std::vector<std::string> lowering_pass_names() {
  std::vector<std::string> names{"mesh"};
  for (const auto& p : lowering::kPasses) names.emplace_back(p.name);
  return names;
}

ir::Schedule lower_to_schedule(const ir::Graph& graph, const ir::Plan& plan, const ir::TrainingSettings& settings,
                               int64_t num_gpus, const ir::ClusterSpec& cluster, const LowerOptions& options) {
  using namespace lowering;
  State s;
  s.graph = &graph;
  s.cluster = &cluster;
  s.params = options.params ? *options.params : cost::default_cost_params(cluster.gpu);
  s.settings = settings;
  ir::Layout layout = ir::resolve(graph, plan, settings, num_gpus);
  ir::require_schedulable(layout);
  require_bounded_schedule(graph, layout);
  adopt_layout(s, std::move(layout));
  s.ctx = cost::shard_context(s.layout.plan, settings);
  build_block_infos(s);
  build_layout(s);
  build_tasks(s);

  s.schedule.model = graph.info.name;
  s.schedule.plan = s.layout.plan;
  s.schedule.num_gpus = num_gpus;
  const int64_t ranks_per_stage = num_gpus / s.layout.plan.pp;
  for (const Stage& st : s.stages)
    ir::add_program(s.schedule, "stage" + std::to_string(st.index), {{"pp", st.index}}, ranks_per_stage);
  if (options.verify_each_pass) verify_pass(s, "mesh", false);
  for (const auto& pass : kPasses) {
    pass.run(s);
    if (options.verify_each_pass) verify_pass(s, pass.name, std::string(pass.name) == "memory");
  }
  if (!options.verify_each_pass) materialize(s);
  return std::move(s.schedule);
}

}  // namespace mgt::plan
