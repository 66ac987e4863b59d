// ir::Layout: the one place that validates a plan, builds its mesh and named groups, and maps
// layers to pipeline chunks (layout.hpp; docs/architecture.md "The Layout").
#include "mgt/ir/layout.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <limits>
#include <set>

namespace mgt::ir {

int64_t num_layers(const Graph& graph) {
  int64_t n = 0;
  for (const auto& block : graph.blocks)
    if (block.is_layer) n += block.repeat;
  return n;
}

// ---- pipeline split ----

bool PipelineSplit::splits(int64_t num_layers, int64_t virtual_stages) {
  if (virtual_stages < 1) return false;
  return num_layers % virtual_stages == 0 || (num_layers + 2) % virtual_stages == 0;
}

int64_t PipelineSplit::layers_per_chunk() const {
  return uneven() ? (num_layers + 2) / virtual_stages : num_layers / virtual_stages;
}

int64_t PipelineSplit::chunk_of_layer(int64_t layer) const {
  const int64_t per_chunk = layers_per_chunk();
  if (per_chunk == 0) return 0;
  if (!uneven()) return layer / per_chunk;
  // The first chunk holds per_chunk - 1 layers, the middle ones per_chunk, the last what is left.
  if (layer < per_chunk - 1) return 0;
  return std::min(virtual_stages - 1, 1 + (layer - (per_chunk - 1)) / per_chunk);
}

int64_t PipelineSplit::chunk_of_block_after(int64_t layers_before) const {
  return layers_before == 0 ? 0 : chunk_of_layer(layers_before - 1);
}

// ---- mesh geometry ----

namespace {
// Stride of axis i of n: the product of the sizes of the axes inside it (row-major, last fastest).
// The one place a stride is derived, for an ir::Mesh and for a Layout's fixed axes alike.
template <class SizeOf>
int64_t stride_of(size_t i, size_t n, SizeOf size_of) {
  int64_t stride = 1;
  for (size_t j = i + 1; j < n; ++j) stride *= std::max<int64_t>(1, size_of(j));
  return stride;
}
int64_t stride_of(const Mesh& mesh, size_t i) {
  return stride_of(i, mesh.axes.size(), [&](size_t j) { return mesh.axes[j].size; });
}
}  // namespace

std::vector<AxisSpan> spans_of(const Mesh& mesh, const std::vector<std::string>& axes) {
  std::vector<AxisSpan> out;
  out.reserve(axes.size());
  for (const auto& name : axes)
    if (const auto i = axis_index(mesh, name)) out.push_back({std::max<int64_t>(1, mesh.axes[*i].size), stride_of(mesh, *i)});
  return out;
}

int64_t nodes_spanned(const Mesh& mesh, const std::vector<std::string>& axes, int64_t gpus_per_node) {
  std::vector<int64_t> ranks{0};
  for (const AxisSpan& span : spans_of(mesh, axes)) {
    std::vector<int64_t> next;
    next.reserve(ranks.size() * size_t(span.size));
    for (int64_t r : ranks)
      for (int64_t c = 0; c < span.size; ++c) next.push_back(r + c * span.stride);
    ranks = std::move(next);
  }
  const int64_t per_node = std::max<int64_t>(1, gpus_per_node);
  std::set<int64_t> nodes;
  for (int64_t r : ranks) nodes.insert(r / per_node);
  return int64_t(nodes.size());
}

Mesh Layout::mesh() const {
  Mesh out;
  for (size_t i = 0; i < num_mesh_axes; ++i) out.axes.push_back({mesh_axes[i].name, mesh_axes[i].size});
  return out;
}

std::vector<std::string> Layout::axes(MeshGroup group) const {
  std::vector<std::string> out;
  const uint32_t bits = members[size_t(group)];
  for (size_t i = 0; i < num_mesh_axes; ++i)
    if ((bits >> i) & 1u && mesh_axes[i].size > 1) out.emplace_back(mesh_axes[i].name);
  return out;
}

std::vector<AxisSpan> Layout::spans(MeshGroup group) const {
  std::vector<AxisSpan> out;
  const uint32_t bits = members[size_t(group)];
  const auto size_of = [this](size_t j) { return mesh_axes[j].size; };
  for (size_t i = 0; i < num_mesh_axes; ++i)
    if ((bits >> i) & 1u && mesh_axes[i].size > 1) out.push_back({mesh_axes[i].size, stride_of(i, num_mesh_axes, size_of)});
  return out;
}

int64_t Layout::size(MeshGroup group) const {
  int64_t n = 1;
  const uint32_t bits = members[size_t(group)];
  for (size_t i = 0; i < num_mesh_axes; ++i)
    if ((bits >> i) & 1u) n *= mesh_axes[i].size;
  return n;
}

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// The degrees are each at least 1 and their products fit in int64 (a hostile plan whose product
// wraps around could otherwise pass a divisibility check).
void check_degrees(const Plan& plan) {
  const std::pair<const char*, int64_t> degrees[] = {
      {"dp_replicate", plan.dp_replicate}, {"dp_shard", plan.dp_shard}, {"tp", plan.tp},  {"cp", plan.cp},
      {"pp", plan.pp},                     {"vpp", plan.vpp},           {"ep", plan.ep},  {"micro_batch", plan.micro_batch}};
  for (const auto& [key, value] : degrees)
    if (value < 1) throw InputError("--plan", key, std::string(key) + "=" + str(value) + " must be at least 1");
  const int64_t max = std::numeric_limits<int64_t>::max();
  if (plan.pp > max / plan.vpp)
    throw InputError("--plan", "pp*vpp", "pp=" + str(plan.pp) + " times vpp=" + str(plan.vpp) + " overflows",
                     "choose vpp so that pp*vpp divides the layer count");
  if (plan.dp_replicate > max / plan.dp_shard || plan.dp_replicate * plan.dp_shard > max / plan.micro_batch)
    throw InputError("--plan", "micro_batch",
                     "dp_replicate*dp_shard*micro_batch overflows (micro_batch=" + str(plan.micro_batch) + ")",
                     "micro_batch is sequences per replica per micro-step; choose a small value");
}

// Validates the plan against the model and batch, and resolves grad_accum, sequence_parallel and
// zero_stage (mgt.plan/1 defaults).
void resolve_plan(Layout& x, const Graph& graph, const TrainingSettings& settings) {
  Plan& plan = x.plan;
  check_degrees(plan);
  if (world_size(plan) != x.num_gpus)
    throw InputError("--plan", "dp_replicate*dp_shard*cp*tp*pp",
                     "plan uses " + str(world_size(plan)) + " GPUs, not --gpus " + str(x.num_gpus),
                     "make the product equal the GPU count");
  x.pipeline = {num_layers(graph), plan.pp * plan.vpp};
  if (!PipelineSplit::splits(x.pipeline.num_layers, x.pipeline.virtual_stages))
    throw InputError("--plan", "pp*vpp",
                     str(x.pipeline.num_layers) + " layers do not split into pp*vpp=" + str(x.pipeline.virtual_stages) +
                         " pipeline chunks",
                     "choose pp*vpp dividing the layer count, or the layer count + 2 (first and last chunks one "
                     "layer lighter)");
  // Megatron's --recompute-num-layers counts layers of one chunk; more than a chunk holds is a typo.
  if (plan.recompute_layers && *plan.recompute_layers > x.pipeline.layers_per_chunk())
    throw InputError("--plan", "recompute_layers",
                     str(*plan.recompute_layers) + " layers to recompute, but a pipeline chunk holds " +
                         str(x.pipeline.layers_per_chunk()) + " (" + str(x.pipeline.num_layers) + " layers / pp*vpp=" +
                         str(x.pipeline.virtual_stages) + ")",
                     "use at most " + str(x.pipeline.layers_per_chunk()) +
                         ", or drop recompute_layers to recompute every layer");
  const int64_t experts = graph.info.num_experts;
  if ((plan.dp_shard * plan.cp) % plan.ep != 0 || (experts > 0 ? experts % plan.ep != 0 : plan.ep != 1))
    throw InputError("--plan", "ep",
                     "ep=" + str(plan.ep) + " must divide dp_shard*cp=" + str(plan.dp_shard * plan.cp) +
                         " and the expert count " + str(experts),
                     "ep borrows ranks from dp_shard x cp; use ep=1 for dense models");
  if (plan.ep > 1 && plan.cp > 1 && plan.cp % plan.ep != 0 && plan.ep % plan.cp != 0)
    throw InputError("--plan", "ep",
                     "the mesh nests ep with cp, but neither of ep=" + str(plan.ep) + " and cp=" + str(plan.cp) +
                         " divides the other",
                     "choose ep and cp as powers of two");
  x.replicas = plan.dp_replicate * plan.dp_shard;
  const int64_t seqs = settings.global_batch_seqs();
  if (seqs <= 0 || seqs % (x.replicas * plan.micro_batch) != 0)
    throw InputError("--plan", "micro_batch",
                     "global batch of " + str(seqs) + " sequences does not divide into " + str(x.replicas) +
                         " data-parallel replicas x micro_batch " + str(plan.micro_batch),
                     "change --global-batch-tokens, micro_batch or the data-parallel sizes");
  x.grad_accum = seqs / (x.replicas * plan.micro_batch);
  if (plan.grad_accum && *plan.grad_accum != x.grad_accum)
    throw InputError("--plan", "grad_accum",
                     "grad_accum " + str(*plan.grad_accum) + " disagrees with the global batch, which needs " +
                         str(x.grad_accum),
                     "drop grad_accum to derive it");
  plan.grad_accum = x.grad_accum;
  plan.sequence_parallel = sequence_parallel(plan);
  plan.zero_stage = ir::zero_stage(plan);
  x.zero_stage = *plan.zero_stage;
  x.shard_group = plan.dp_shard * plan.cp;
  x.expert_shard_group = std::max<int64_t>(1, x.shard_group / plan.ep);
  x.fsdp = x.zero_stage == 3 && x.shard_group > 1;
}

// The mesh and the axes of each named group (docs/lowering.md "Mesh"). Built per search candidate:
// a fixed array of axes and a bit mask per group, so that it allocates nothing.
void build_mesh(Layout& x) {
  const Plan& p = x.plan;
  size_t n = 0;
  auto push = [&](const char* name, int64_t size) { x.mesh_axes[n++] = {name, size}; };
  push("pp", p.pp);
  push("dp_replicate", p.dp_replicate);
  constexpr uint32_t kReplicate = 1u << 1;
  const uint32_t a2 = 1u << 2, a3 = 1u << 3, a4 = 1u << 4;
  uint32_t cp = 0, ep = 0, shard = 0, expert = 0;
  if (p.ep == 1) {  // [pp, dp_replicate, dp_shard, cp, tp]
    push("dp_shard", p.dp_shard);
    push("cp", p.cp);
    cp = a3;
    shard = expert = a2 | a3;
  } else if (p.cp % p.ep == 0) {  // ep inside cp: [pp, dp_replicate, dp_shard, cp/ep, ep, tp]
    push("dp_shard", p.dp_shard);
    push("cp", p.cp / p.ep);
    push("ep", p.ep);
    cp = a3 | a4;
    ep = a4;
    shard = a2 | a3 | a4;
    expert = a2 | a3;
  } else {  // ep spans all of cp and part of dp_shard: [pp, dp_replicate, dp_shard*cp/ep, ep/cp, cp, tp]
    push("dp_shard", p.dp_shard * p.cp / p.ep);
    push("ep", p.ep / p.cp);
    push("cp", p.cp);
    cp = a4;
    ep = a3 | a4;
    shard = a2 | a3 | a4;
    expert = a2;
  }
  push("tp", p.tp);
  x.num_mesh_axes = n;
  x.members[size_t(MeshGroup::tp)] = 1u << (n - 1);
  x.members[size_t(MeshGroup::cp)] = cp;
  x.members[size_t(MeshGroup::ep)] = ep;
  x.members[size_t(MeshGroup::shard)] = shard;
  x.members[size_t(MeshGroup::expert_shard)] = expert;
  x.members[size_t(MeshGroup::replicate)] = kReplicate;
  x.members[size_t(MeshGroup::dp)] = kReplicate | shard;
}

}  // namespace

Layout resolve(const Graph& graph, const Plan& plan, const TrainingSettings& settings, int64_t num_gpus) {
  Layout x;
  x.plan = plan;
  x.num_gpus = num_gpus;
  resolve_plan(x, graph, settings);
  build_mesh(x);
  return x;
}

void require_schedulable(const Layout& layout) {
  const Plan& plan = layout.plan;
  if (plan.vpp > 1 && (plan.pp == 1 || layout.grad_accum % plan.pp != 0))
    throw InputError("--plan", "vpp",
                     "the interleaved schedule needs pp > 1 and grad_accum (" + str(layout.grad_accum) +
                         ") divisible by pp=" + str(plan.pp),
                     "use vpp=1 or a batch with a multiple of pp micro-batches");
}

}  // namespace mgt::ir
