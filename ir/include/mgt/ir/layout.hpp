// What a plan means on a model, said once (docs/architecture.md "The Layout"): the validated and
// resolved degrees, the device mesh with its named groups and their strides, and which pipeline
// chunk holds each layer. Rules, estimator, lowering, simulator and executor read it; none of them
// re-derives it. The cost model prices what the Layout and the Schedule say; it decides neither.
//
//   const ir::Layout layout = ir::resolve(graph, plan, settings, /*num_gpus=*/64);
//   layout.spans(ir::MeshGroup::shard);           // [{size 8, stride 4}]: FSDP over dp_shard x cp
//   layout.axes(ir::MeshGroup::shard);            // {"dp_shard", "cp"} (axes of size 1 left out)
//   layout.pipeline.chunk_of_layer(125);          // virtual pipeline stage of the last layer
//
// The model is torchtitan's ParallelDims: validate the degrees once, build every named view of the
// mesh once, and let everything else ask for a group by name.
#pragma once

#include "mgt/ir/graph.hpp"
#include "mgt/ir/plan.hpp"
#include "mgt/ir/schedule.hpp"
#include "mgt/ir/training_settings.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mgt::ir {

/// Layers of layer blocks (sum of their repeats): what pipeline stages split.
int64_t num_layers(const Graph& graph);

/// How `num_layers` layers split over `virtual_stages` = pp * vpp pipeline chunks (chunk c sits on
/// pipeline rank c % pp), the way Megatron-LM would be told to split them (docs/lowering.md
/// "Pipeline split"), in this order of preference:
///   even         the count divides: equal chunks;
///   account      layers + 2 (or + 1) divides: the embedding and the loss (or the loss only) count as
///                one layer each, so the first and last chunk hold one layer fewer
///                (--account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split;
///                Llama 3 405B: 126 layers on 16 stages = 7 + 14 x 8 + 7);
///   first_last   the first and last pipeline rank hold their own counts and the middle ranks an equal
///                share (--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers; each
///                rank's count divisible by vpp): the middle share is the smallest that fits, the first
///                rank takes up to as much, the last (with the LM head and loss) what is left;
///   balanced     otherwise (e.g. an odd count with vpp = 2): chunks of floor(layers / chunks) layers,
///                one more on chunks 1, 2, ... (--pipeline-model-parallel-layout).
struct PipelineSplit {
  /// compute_balanced: nanotron's (vpp 1 only), the layers cut where the running cost crosses each
  /// rank's share, the LM head weighing `head_cost_in_layers` layers (choose's last argument).
  enum class Rule { even, account, first_last, balanced, compute_balanced, mtp_tail };
  PipelineSplit() = default;  // not an aggregate: {layers, chunks} would read as {layers, pp}; use choose()
  int64_t num_layers = 0;
  int64_t pp = 1, vpp = 1;
  int64_t virtual_stages = 1;  ///< pp * vpp
  Rule rule = Rule::even;
  bool embedding_as_layer = false, loss_as_layer = false;  ///< account
  /// first_last: layers on the first, each middle and the last pipeline rank (all its chunks).
  int64_t first_rank_layers = 0, middle_rank_layers = 0, last_rank_layers = 0;
  double head_cost_in_layers = 0;  ///< compute_balanced: the LM head's cost in layers
  /// mtp_tail: multi-token prediction depths on the last chunk, and the decoder layers beside them.
  int64_t mtp_depths = 0, last_chunk_layers = 0;

  /// The split of `num_layers` over pp * vpp chunks, or nullopt when there is none (fewer layers
  /// than chunks, or pp, vpp below 1 or their product overflowing). With `compute_balanced_head`
  /// (the framework balances compute, TrainingSettings::pipeline_balanced_by_compute) it is
  /// nanotron's split, nullopt for vpp > 1 or when a rank would hold no layer.
  ///
  /// A model with multi-token prediction (`mtp_depths` > 0: DeepSeek-V3's MTP layers, which sit on
  /// the last chunk with the loss) is split as Megatron-Bridge's DeepSeek-V3 layouts do
  /// (`--pipeline-model-parallel-layout`; recipes/deepseek/deepseek_v3.py layout_map: 16 chunks
  /// "Et*4|(t*4|)*14tmL", 8 "Et*8|(t*8|)*6t*5mL", 4 "Et*16|t*16|t*16|t*13mL"; the H100 recipe's 32
  /// "Et|(tt|)*30mL"): the loss counts as one layer and each MTP depth as two (its layer and its
  /// output head), chunks hold ceil((layers + units) / chunks) units, the last chunk what its units
  /// leave for decoder layers (possibly none), the other chunks the rest evenly, the first the lightest.
  static std::optional<PipelineSplit> choose(int64_t num_layers, int64_t pp, int64_t vpp,
                                             std::optional<double> compute_balanced_head = std::nullopt,
                                             int64_t mtp_depths = 0);
  /// Why choose() (same arguments) finds no split, one sentence naming `layers_field`.
  static std::string why_none(int64_t num_layers, int64_t pp, int64_t vpp, std::optional<double> compute_balanced_head,
                              const std::string& layers_field);
  /// Whether choose() finds a split.
  static bool splits(int64_t num_layers, int64_t pp, int64_t vpp) { return choose(num_layers, pp, vpp).has_value(); }
  bool uneven() const { return rule != Rule::even; }
  /// Layers in chunk `chunk` (0-based, forward order).
  int64_t layers_in_chunk(int64_t chunk) const;
  /// Layers in the fullest chunk.
  int64_t layers_per_chunk() const;
  /// The virtual stage (chunk) of layer `layer` (0-based, forward order).
  int64_t chunk_of_layer(int64_t layer) const;
  /// The chunk of a non-layer block placed after `layers_before` layers: before any layer it joins
  /// the first chunk (embedding), after every layer the last chunk (LM head, loss, MTP: Megatron's
  /// post-process stage, which may hold no decoder layer), otherwise the chunk of the layer before it.
  int64_t chunk_of_block_after(int64_t layers_before) const;
};

/// nanotron's weight of the LM head against one decoder layer (models/llama.py
/// get_block_compute_costs: a layer costs 4·heads·(hidden/heads)·hidden + 3·ffn·hidden, the head
/// vocab·hidden, everything else 0), from the graph's hidden, vocab and its layers' ffn dim;
/// nullopt unless `settings` balance by compute or when the graph lacks those sizes.
std::optional<double> compute_balanced_head(const Graph& graph, const TrainingSettings& settings);

/// Multi-token prediction depths of `graph`: copies of non-layer blocks that hold attention (an MTP
/// module's transformer layer, which Megatron places beside the head, not among the decoder layers).
int64_t mtp_depths(const Graph& graph);

/// Calls `place(block_index, copy, chunk)` for every copy of every block of `graph` in forward
/// order, with the pipeline chunk that holds it. Physical stage k holds chunks k, k + pp, ...
/// (Megatron's interleaved schedule, Narayanan et al. 2021 §2.2).
template <class Place>
void for_each_block_copy(const Graph& graph, const PipelineSplit& split, Place&& place) {
  // Walks the chunks along with the layers (chunk_of_layer per layer would cost O(chunks) each).
  int64_t layer = 0;                              // layers placed so far
  int64_t chunk = 0;                              // the chunk of the last layer placed (0 before any)
  int64_t chunk_end = split.layers_in_chunk(0);  // layers up to the end of `chunk`
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    const Block& block = graph.blocks[b];
    for (int64_t r = 0; r < block.repeat; ++r) {
      if (block.is_layer) {
        while (layer >= chunk_end && chunk + 1 < split.virtual_stages) chunk_end += split.layers_in_chunk(++chunk);
        ++layer;
      } else if (layer > 0 && layer == split.num_layers) {
        chunk = split.virtual_stages - 1;  // head, loss, MTP: the last chunk, even one without layers
      }
      place(b, r, chunk);
    }
  }
}

/// One mesh axis inside a group: `size` members, `stride` ranks apart (ranks are row-major over
/// the mesh, the last axis fastest).
struct AxisSpan {
  int64_t size = 1;
  int64_t stride = 1;
  bool operator==(const AxisSpan&) const = default;
};

/// The spans of `axes` in `mesh`, in the order given; unknown names are skipped.
std::vector<AxisSpan> spans_of(const Mesh& mesh, const std::vector<std::string>& axes);
/// Distinct nodes of `gpus_per_node` GPUs that the group over `axes` containing rank 0 touches.
int64_t nodes_spanned(const Mesh& mesh, const std::vector<std::string>& axes, int64_t gpus_per_node);

/// The named process groups of a plan.
enum class MeshGroup {
  tp,                ///< tensor (and sequence) parallel
  cp,                ///< context parallel
  ep,                ///< expert parallel: routed experts split over these ranks
  shard,             ///< FSDP / ZeRO shard group of dense parameters: dp_shard x cp (torchtitan)
  expert_shard,      ///< the expert-data-parallel ranks inside the shard group, for routed experts
  replicate,         ///< dp_replicate: HSDP replicas
  dp,                ///< every rank that sees other data: replicate x shard (DDP all-reduce)
  etp,               ///< expert tensor parallel: an expert's FFN split over these ranks
  expert_replicate,  ///< the expert-data-parallel ranks outside the shard group: among the replicas,
                     ///< and tp ranks beyond etp x ep (expert_shard x expert_replicate = expert_dp)
  expert_dp,         ///< expert data parallel: the ranks holding the same experts (dp x cp x tp / etp x ep)
};
inline constexpr int kNumMeshGroups = 10;

/// The resolved meaning of a plan. Build it with resolve(); it is a value, cheap to copy.
struct Layout {
  Plan plan;  ///< resolved: grad_accum, sequence_parallel, zero_stage and etp set
  int64_t num_gpus = 1;
  int64_t grad_accum = 1;
  int64_t zero_stage = 0;          ///< what runs: plan.zero_stage, or 1 where the framework runs FSDP so
                                   ///< under a pipeline (TrainingSettings::fsdp_gathers_once_under_pipeline)
  int64_t replicas = 1;            ///< dp_replicate * dp_shard: replicas that see distinct sequences
  int64_t shard_group = 1;         ///< dp_shard * cp: the FSDP / ZeRO shard group
  int64_t expert_shard_group = 1;  ///< members of expert_shard: what routed experts shard over
  int64_t expert_tp = 1;           ///< etp (tp unless the plan sets it)
  bool fsdp = false;               ///< zero_stage 3 over a shard group of more than one rank
  PipelineSplit pipeline;
  /// The device mesh: pp outermost, then the ranks of one stage. Those carry two factorisations
  /// (Megatron-Core's MoE parallel folding): dp_replicate, dp_shard, cp, tp (tp innermost, so tp groups
  /// sit inside a node) for attention and dense layers, and expert data parallel, ep, etp (etp
  /// innermost) for routed experts. The mesh is their common refinement: an axis that an expert group
  /// cuts is split, the piece at the top of ep named "ep" (of etp, "etp") and the rest keeping the
  /// axis's name. E.g. ep inside cp: [pp, dp_replicate, dp_shard, cp/ep, ep, tp]; ep over all of cp and
  /// part of dp_shard: [pp, dp_replicate, dp_shard*cp/ep, ep/cp, cp, tp]. docs/lowering.md "Mesh".
  Mesh mesh() const;

  /// Names of the group's mesh axes of size > 1, outermost first (a size-1 group is empty).
  std::vector<std::string> axes(MeshGroup group) const;
  /// The group's axes of size > 1 with their strides, outermost first.
  std::vector<AxisSpan> spans(MeshGroup group) const;
  /// The same in a fixed array (no allocation: the search prices a plan's groups per candidate).
  struct FixedSpans {
    std::array<AxisSpan, 10> items{};
    size_t count = 0;
    std::span<const AxisSpan> view() const { return {items.data(), count}; }
  };
  FixedSpans fixed_spans(MeshGroup group) const;
  /// Members of the group (the product of its axes' sizes).
  int64_t size(MeshGroup group) const;
  /// Ranks between neighbouring pipeline stages.
  int64_t pp_stride() const { return num_gpus / plan.pp; }

  /// The mesh axes, outermost first (a fixed array: the search resolves a plan per candidate).
  struct Axis {
    const char* name = "";
    int64_t size = 1;
  };
  std::array<Axis, 10> mesh_axes{};
  size_t num_mesh_axes = 0;
  /// Per group, a bit per mesh axis (bit i = mesh_axes[i]); axes of size 1 included.
  std::array<uint32_t, kNumMeshGroups> members{};
};

/// Validates `plan` for `graph` under `settings` on `num_gpus` GPUs and resolves it. Throws
/// ir::InputError naming "--plan" and the key for a plan no estimate or schedule can express:
/// a degree below 1 or a product of degrees that overflows, a world size other than num_gpus, fewer
/// layers than pp*vpp chunks, ep or etp not dividing the expert count or the ranks of a stage, expert
/// groups that do not nest with tp, cp and the data-parallel axes, a batch that does not divide into
/// replicas x micro-batches, a grad_accum that disagrees with it.
Layout resolve(const Graph& graph, const Plan& plan, const TrainingSettings& settings, int64_t num_gpus);

/// Whether routed experts' gradients reduce over groups of their own (expert_dp; under ZeRO / FSDP
/// expert_shard, then expert_replicate) rather than with the dense ones: when ep > 1 or etp != tp, so
/// that the ranks holding the same expert shard differ from dp (Megatron-Core's expert data parallel
/// group, parallel_state.py). Estimator and lowering both ask here.
inline bool experts_reduce_apart(const Layout& layout) { return layout.plan.ep > 1 || layout.expert_tp != layout.plan.tp; }

/// Whether the expert groups (etp, then ep) nest with tp, cp, dp_shard and dp_replicate so that the
/// mesh refines both (resolve throws when they do not).
bool expert_groups_nest(const Plan& plan);

/// What a schedule needs beyond resolve (the estimator prices these plans; no step can run them):
/// an interleaved pipeline (vpp > 1) needs pp > 1 and grad_accum a multiple of pp (Megatron-LM's
/// interleaved 1F1B). Throws ir::InputError naming "--plan" and "vpp". (Expert layouts, ep carved
/// from dp_replicate and etp != tp, lower as the estimator prices them: expert gradients reduce over
/// expert_dp, or expert_shard then expert_replicate.)
void require_schedulable(const Layout& layout);

}  // namespace mgt::ir
