// ir::Layout: the one place that validates a plan, builds its mesh and named groups, and maps
// layers to pipeline chunks (layout.hpp; docs/architecture.md "The Layout").
#include "mgt/ir/layout.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
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

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// first_last: the smallest middle-rank share m (a multiple of vpp) for which the first rank takes up
// to m layers and the last rank what is left, at least vpp and at most m, both multiples of vpp.
std::optional<PipelineSplit> first_last_split(PipelineSplit split) {
  const int64_t layers = split.num_layers, pp = split.pp, vpp = split.vpp;
  if (pp < 2 || layers % vpp != 0) return std::nullopt;
  for (int64_t middle = ceil_div(ceil_div(layers, pp), vpp) * vpp; middle <= layers; middle += vpp) {
    const int64_t ends = layers - middle * (pp - 2);  // layers on the first and last rank together
    if (ends < 2 * vpp) break;
    if (ends > 2 * middle) continue;
    const int64_t first = std::min(middle, ends - vpp), last = ends - first;
    split.first_rank_layers = first, split.middle_rank_layers = middle, split.last_rank_layers = last;
    return split;
  }
  return std::nullopt;
}
}  // namespace

namespace {
// nanotron models/base.py build_model ("Balance compute across PP blocks"): blocks in forward order
// with their costs (embedding 0, each layer 1, the head h), threshold_r = total * (r + 1) / pp; a block
// goes to the current rank, which moves on once the running cost exceeds its threshold. So rank r
// ends after layer floor(threshold_r) + 1 (counted from 1; thresholds are at least a layer apart as
// layers >= pp), the head lands on the rank after the last layer's.
int64_t balanced_layers_through(const PipelineSplit& split, int64_t rank) {
  if (rank < 0) return 0;
  if (rank >= split.pp - 1) return split.num_layers;
  const double total = double(split.num_layers) + split.head_cost_in_layers;
  const double threshold = total * double(rank + 1) / double(split.pp);
  return std::min(split.num_layers, int64_t(std::floor(threshold)) + 1);
}
}  // namespace

std::optional<double> compute_balanced_head(const Graph& graph, const TrainingSettings& settings) {
  if (!settings.pipeline_balanced_by_compute) return std::nullopt;
  const double hidden = double(graph.info.hidden_size);
  int64_t ffn = 0;
  for (const auto& block : graph.blocks)
    if (block.is_layer)
      for (const auto& t : block.tensors)
        for (const auto& d : t.dims)
          if (t.is_parameter && d.name == 'f') ffn = std::max(ffn, d.size);
  const double layer = 4.0 * hidden * hidden + 3.0 * double(ffn) * hidden;
  if (hidden <= 0 || layer <= 0) return std::nullopt;
  return double(graph.info.vocab_size) * hidden / layer;
}

int64_t mtp_depths(const Graph& graph) {
  int64_t depths = 0;
  for (const auto& block : graph.blocks)
    if (!block.is_layer && std::any_of(block.ops.begin(), block.ops.end(),
                                       [](const Op& op) { return op.kind == OpKind::attention_core; }))
      depths += block.repeat;
  return depths;
}

std::optional<PipelineSplit> PipelineSplit::choose(int64_t num_layers, int64_t pp, int64_t vpp,
                                                   std::optional<double> compute_balanced_head, int64_t mtp_depths) {
  if (pp < 1 || vpp < 1 || num_layers < 0 || pp > std::numeric_limits<int64_t>::max() / vpp) return std::nullopt;
  PipelineSplit split;
  split.num_layers = num_layers, split.pp = pp, split.vpp = vpp, split.virtual_stages = pp * vpp;
  const int64_t chunks = split.virtual_stages;
  if (compute_balanced_head && pp > 1) {
    if (vpp > 1 || num_layers < pp || !(*compute_balanced_head >= 0)) return std::nullopt;  // nanotron: no interleaving
    split.rule = Rule::compute_balanced;
    split.head_cost_in_layers = *compute_balanced_head;
    for (int64_t r = 0; r < pp; ++r)
      if (split.layers_in_chunk(r) < 1) return std::nullopt;  // a rank nanotron would leave without layers
    return split;
  }
  if (mtp_depths > 0 && chunks > 1) {
    split.rule = Rule::mtp_tail;
    split.mtp_depths = mtp_depths;
    const int64_t tail_units = 1 + 2 * mtp_depths;  // the loss, each depth's layer and head
    if (mtp_depths > num_layers || num_layers < chunks - 1) return std::nullopt;
    const int64_t per_chunk = ceil_div(num_layers + tail_units, chunks);
    split.last_chunk_layers = std::min(num_layers, std::max<int64_t>(0, per_chunk - tail_units));
    if (num_layers - split.last_chunk_layers < chunks - 1) return std::nullopt;  // a chunk without layers
    return split;
  }
  if (num_layers % chunks == 0) return split;
  split.rule = Rule::account;
  if ((num_layers + 2) % chunks == 0) {
    split.embedding_as_layer = split.loss_as_layer = true;
    return split;
  }
  if ((num_layers + 1) % chunks == 0) {  // the loss: the LM head GEMM outweighs the embedding lookup
    split.loss_as_layer = true;
    return split;
  }
  split.rule = Rule::first_last;
  if (auto first_last = first_last_split(split)) return first_last;
  if (num_layers < chunks) return std::nullopt;
  split.rule = Rule::balanced;
  return split;
}

std::string PipelineSplit::why_none(int64_t num_layers, int64_t pp, int64_t vpp, std::optional<double> compute_balanced_head,
                                   const std::string& layers_field) {
  const std::string at_most = "pp*vpp (pp=" + std::to_string(pp) + ", vpp=" + std::to_string(vpp) + ") must be at most " +
                              layers_field + "=" + std::to_string(num_layers);
  if (!compute_balanced_head || pp < 2 || (vpp == 1 && num_layers < pp)) return at_most;
  if (vpp > 1) return "vpp=" + std::to_string(vpp) + ": this framework places layers by compute (nanotron) and has no interleaved schedule; use vpp=1";
  char head[32];
  std::snprintf(head, sizeof head, "%.2f", *compute_balanced_head);
  return "nanotron's compute-balanced split of " + layers_field + "=" + std::to_string(num_layers) + " over pp=" +
         std::to_string(pp) + " leaves a rank without layers (the LM head weighs " + head + " layers); use a smaller pp";
}

int64_t PipelineSplit::layers_in_chunk(int64_t chunk) const {
  if (chunk < 0 || chunk >= virtual_stages) return 0;
  switch (rule) {
    case Rule::even: return num_layers / virtual_stages;
    case Rule::account: {
      const int64_t per_chunk = (num_layers + int64_t(embedding_as_layer) + int64_t(loss_as_layer)) / virtual_stages;
      return per_chunk - int64_t(embedding_as_layer && chunk == 0) - int64_t(loss_as_layer && chunk == virtual_stages - 1);
    }
    case Rule::first_last: {
      const int64_t rank = chunk % pp;
      return (rank == 0 ? first_rank_layers : rank == pp - 1 ? last_rank_layers : middle_rank_layers) / vpp;
    }
    case Rule::balanced: {
      const int64_t extra = num_layers % virtual_stages;
      return num_layers / virtual_stages + int64_t(chunk >= 1 && chunk <= extra);
    }
    case Rule::compute_balanced: return balanced_layers_through(*this, chunk) - balanced_layers_through(*this, chunk - 1);
    case Rule::mtp_tail: {
      if (chunk == virtual_stages - 1) return last_chunk_layers;
      const int64_t rest = num_layers - last_chunk_layers, others = virtual_stages - 1;
      // The remainder goes to the later chunks: the first one, beside the embedding, is the lightest.
      return rest / others + int64_t(chunk >= others - rest % others);
    }
  }
  return 0;
}

int64_t PipelineSplit::layers_per_chunk() const {
  switch (rule) {
    case Rule::even: return num_layers / virtual_stages;
    case Rule::account: return (num_layers + int64_t(embedding_as_layer) + int64_t(loss_as_layer)) / virtual_stages;
    case Rule::first_last: return std::max({first_rank_layers, middle_rank_layers, last_rank_layers}) / vpp;
    case Rule::balanced: return ceil_div(num_layers, virtual_stages);
    case Rule::mtp_tail: return std::max(last_chunk_layers, ceil_div(num_layers - last_chunk_layers, virtual_stages - 1));
    case Rule::compute_balanced: {
      int64_t most = 0;
      for (int64_t c = 0; c < virtual_stages; ++c) most = std::max(most, layers_in_chunk(c));
      return most;
    }
  }
  return 0;
}

int64_t PipelineSplit::chunk_of_layer(int64_t layer) const {
  if (rule == Rule::even) return num_layers >= virtual_stages ? layer / (num_layers / virtual_stages) : 0;
  int64_t end = 0;
  for (int64_t chunk = 0; chunk < virtual_stages; ++chunk)
    if ((end += layers_in_chunk(chunk)) > layer) return chunk;
  return virtual_stages - 1;
}

int64_t PipelineSplit::chunk_of_block_after(int64_t layers_before) const {
  if (layers_before == 0) return 0;
  return layers_before >= num_layers ? virtual_stages - 1 : chunk_of_layer(layers_before - 1);
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

Layout::FixedSpans Layout::fixed_spans(MeshGroup group) const {
  FixedSpans out;
  const uint32_t bits = members[size_t(group)];
  int64_t stride = 1;  // of axis i: the product of the sizes inside it (stride_of, innermost first)
  for (size_t i = num_mesh_axes; i-- > 0;) {
    if ((bits >> i) & 1u && mesh_axes[i].size > 1) out.items[out.count++] = {mesh_axes[i].size, stride};
    stride *= std::max<int64_t>(1, mesh_axes[i].size);
  }
  std::reverse(out.items.begin(), out.items.begin() + std::ptrdiff_t(out.count));  // outermost first
  return out;
}

std::vector<AxisSpan> Layout::spans(MeshGroup group) const {
  const FixedSpans fixed = fixed_spans(group);
  return {fixed.items.begin(), fixed.items.begin() + std::ptrdiff_t(fixed.count)};
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

// Expert parallel and expert tensor parallel fold into the ranks of a pipeline stage (Megatron-Core's
// MoE parallel folding): etp * ep must divide dp_replicate * dp_shard * cp * tp, ep the expert count.
// Whether the groups nest with the attention axes is build_mesh's check.
void check_experts(const Plan& plan, int64_t experts) {
  const int64_t etp = expert_tp(plan);
  if (etp < 1) throw InputError("--plan", "etp", "etp=" + str(etp) + " must be at least 1");
  const int64_t stage_ranks = plan.dp_replicate * plan.dp_shard * plan.cp * plan.tp;
  if (experts == 0 && plan.ep != 1)
    throw InputError("--plan", "ep", "ep=" + str(plan.ep) + " needs a mixture-of-experts model", "use ep=1 for dense models");
  if (experts == 0 && etp != plan.tp)
    throw InputError("--plan", "etp", "etp=" + str(etp) + " needs a mixture-of-experts model", "drop etp for dense models");
  if (experts > 0 && experts % plan.ep != 0)
    throw InputError("--plan", "ep", "ep=" + str(plan.ep) + " must divide the expert count " + str(experts),
                     "choose ep dividing the expert count");
  if (etp > stage_ranks || plan.ep > stage_ranks / etp || stage_ranks % (etp * plan.ep) != 0)
    throw InputError("--plan", "ep",
                     "etp*ep=" + str(etp) + "*" + str(plan.ep) + " must divide the ranks of a pipeline stage, "
                     "dp_replicate*dp_shard*cp*tp=" + str(stage_ranks),
                     "expert groups fold into the data-parallel, context and tensor ranks; choose etp*ep dividing them");
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
  const auto head = compute_balanced_head(graph, settings);
  const auto split = PipelineSplit::choose(num_layers(graph), plan.pp, plan.vpp, head, mtp_depths(graph));
  if (!split)
    throw InputError("--plan", "pp*vpp", PipelineSplit::why_none(num_layers(graph), plan.pp, plan.vpp, head, "layers"),
                     "choose pp*vpp of at most the layer count");
  x.pipeline = *split;
  // Megatron's --recompute-num-layers counts layers of one chunk; more than a chunk holds is a typo.
  if (plan.recompute_layers && *plan.recompute_layers > x.pipeline.layers_per_chunk())
    throw InputError("--plan", "recompute_layers",
                     str(*plan.recompute_layers) + " layers to recompute, but a pipeline chunk holds " +
                         str(x.pipeline.layers_per_chunk()) + " (" + str(x.pipeline.num_layers) + " layers / pp*vpp=" +
                         str(x.pipeline.virtual_stages) + ")",
                     "use at most " + str(x.pipeline.layers_per_chunk()) +
                         ", or drop recompute_layers to recompute every layer");
  check_experts(plan, graph.info.num_experts);
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
  x.expert_tp = expert_tp(plan);
  x.fsdp = x.zero_stage == 3 && x.shard_group > 1;
  if (settings.fsdp_gathers_once_under_pipeline && plan.pp > 1 && (x.fsdp || x.zero_stage == 2)) {
    // The framework runs this plan (resharding after forward or not) as ZeRO-1 over the same shard
    // group: one all-gather before the first forward, one reduce-scatter under the last backward, the
    // stage's parameters and gradients whole in between (TrainingSettings). The plan keeps the stage
    // the user writes; the layout, which the estimator prices and the lowering schedules, runs.
    x.zero_stage = 1;
    x.fsdp = false;
  }
}

// One piece of the refined mesh: an attention axis, or the part of one that an expert group cuts.
struct Piece {
  const char* name;
  int64_t size;
  uint32_t groups;  // bit g = MeshGroup g
};
constexpr uint32_t bit(MeshGroup g) { return 1u << unsigned(g); }
// The groups of an expert-data-parallel piece of an attention axis with groups `axis_groups`: inside
// the shard group (cp, dp_shard) it shards expert states (expert_shard); outside it (dp_replicate, and
// tp ranks beyond etp x ep) it holds replicas of them (expert_replicate), so that expert_shard x
// expert_replicate = expert_dp, the group Megatron-Core reduces expert gradients over.
constexpr uint32_t expert_dp_groups(uint32_t axis_groups) {
  return axis_groups | bit(MeshGroup::expert_dp) |
         ((axis_groups & bit(MeshGroup::shard)) ? bit(MeshGroup::expert_shard) : bit(MeshGroup::expert_replicate));
}
// At most 4 per attention axis (two cuts and a size-1 piece of its own name); fixed, so that a
// search candidate allocates nothing.
struct Pieces {
  std::array<Piece, 16> items{};
  size_t count = 0;
  void push_back(const Piece& piece) { items[count++] = piece; }
};

// The pieces of one pipeline stage, innermost first: each attention axis (tp, cp, dp_shard,
// dp_replicate) cut where the expert groups begin and end (etp = ranks [1, etp], ep = (etp, etp*ep]).
// A piece topping ep (etp) is named "ep" ("etp"), and its axis keeps a piece of its own name (size 1
// when nothing is left) outside it; an axis wholly inside an expert group keeps its name.
Pieces stage_pieces(const Plan& p, int64_t etp) {
  struct AttentionAxis {
    const char* name;
    const char* ep_name;  // a partial piece of the axis low in ep (above an etp that ends inside it)
    int64_t size;
    uint32_t groups;
  };
  const AttentionAxis attention[] = {
      {"tp", "ep_tp", p.tp, bit(MeshGroup::tp)},
      {"cp", "ep_cp", p.cp, bit(MeshGroup::cp) | bit(MeshGroup::shard) | bit(MeshGroup::dp)},
      {"dp_shard", "ep_dp_shard", p.dp_shard, bit(MeshGroup::shard) | bit(MeshGroup::dp)},
      {"dp_replicate", "ep_dp_replicate", p.dp_replicate, bit(MeshGroup::replicate) | bit(MeshGroup::dp)}};
  const bool own_etp = etp != p.tp;  // else the expert tensor group is the tp axis itself
  const int64_t etp_top = etp, ep_top = etp * p.ep;
  Pieces pieces;
  int64_t lo = 1;  // ranks inside the axis
  for (const AttentionAxis& axis : attention) {
    const int64_t hi = lo * axis.size;
    int64_t cuts[4] = {lo, 0, 0, 0};
    size_t n = 1;
    for (int64_t cut : {etp_top, ep_top})
      if (cut > cuts[n - 1] && cut < hi) cuts[n++] = cut;
    cuts[n++] = hi;
    bool named = false;  // a piece carries the axis's own name
    for (size_t i = 0; i + 1 < n; ++i) {
      const int64_t a = cuts[i], b = cuts[i + 1];
      if (b % a != 0)
        throw InputError("--plan", "ep",
                         "the expert groups (etp=" + str(etp) + ", ep=" + str(p.ep) + ") do not nest with " + axis.name +
                             "=" + str(axis.size) + " (Megatron-Core folds etp x ep into tp x cp x dp in that order)",
                         "choose tp, cp, the data-parallel sizes, etp and ep as powers of two");
      const bool whole = a == lo && b == hi;
      Piece piece{axis.name, b / a, axis.groups};
      if (a == b) {  // a size-1 axis: no rank of an expert group, keeps its name
        piece.groups = expert_dp_groups(axis.groups);
      } else if (b <= etp_top && own_etp) {
        piece.groups |= bit(MeshGroup::etp);
        if (b == etp_top && !whole) piece.name = "etp";
      } else if (b <= etp_top) {
        piece.groups |= bit(MeshGroup::etp);
      } else if (a >= etp_top && b <= ep_top) {
        piece.groups |= bit(MeshGroup::ep);
        if (b == ep_top) piece.name = "ep";
        else if (!whole) piece.name = axis.ep_name;
      } else {
        piece.groups = expert_dp_groups(axis.groups);
      }
      named = named || piece.name == axis.name;
      pieces.push_back(piece);
    }
    if (!named) {  // outside the expert pieces: a size-1 expert-data-parallel piece of the axis's name
      pieces.push_back({axis.name, 1, expert_dp_groups(axis.groups)});
    }
    lo = hi;
  }
  return pieces;
}

// The mesh and the axes of each named group (docs/lowering.md "Mesh"): pp, then the stage's pieces
// outermost first. Built per search candidate: a fixed array of axes and a bit mask per group.
void build_mesh(Layout& x) {
  const Pieces pieces = stage_pieces(x.plan, x.expert_tp);
  if (pieces.count + 1 > x.mesh_axes.size())
    throw InputError("--plan", "etp", "etp and ep cut the mesh into more than " + str(int64_t(x.mesh_axes.size())) + " axes",
                     "choose etp equal to tp or to 1");
  x.num_mesh_axes = 0;
  x.members.fill(0);
  x.mesh_axes[x.num_mesh_axes++] = {"pp", x.plan.pp};
  for (size_t k = pieces.count; k-- > 0;) {
    const Piece& piece = pieces.items[k];
    const size_t i = x.num_mesh_axes++;
    x.mesh_axes[i] = {piece.name, piece.size};
    for (int g = 0; g < kNumMeshGroups; ++g)
      if (piece.groups & (1u << unsigned(g))) x.members[size_t(g)] |= 1u << i;
  }
  x.expert_shard_group = x.size(MeshGroup::expert_shard);
}

}  // namespace

bool expert_groups_nest(const Plan& plan) {
  try {
    stage_pieces(plan, expert_tp(plan));
    return true;
  } catch (const InputError&) {
    return false;
  }
}

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
