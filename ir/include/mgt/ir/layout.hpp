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
#include <string>
#include <string_view>
#include <vector>

namespace mgt::ir {

/// Layers of layer blocks (sum of their repeats): what pipeline stages split.
int64_t num_layers(const Graph& graph);

/// How `num_layers` layers split over `virtual_stages` = pp * vpp pipeline chunks. Equal chunks when
/// the count divides; otherwise, when num_layers + 2 divides, the first and the last chunk hold one
/// layer fewer, to balance the embedding and the LM head (Megatron-LM
/// --decoder-first/last-pipeline-num-layers; Llama 3 405B: 126 layers on 16 stages).
struct PipelineSplit {
  int64_t num_layers = 0;
  int64_t virtual_stages = 1;

  /// The uneven-stage rule: whether the layers split into `virtual_stages` chunks at all.
  static bool splits(int64_t num_layers, int64_t virtual_stages);
  bool uneven() const { return num_layers % virtual_stages != 0; }
  /// Layers in a full chunk (the first and last hold one fewer when uneven).
  int64_t layers_per_chunk() const;
  /// The virtual stage (chunk) of layer `layer` (0-based, forward order).
  int64_t chunk_of_layer(int64_t layer) const;
  /// The chunk of a non-layer block placed after `layers_before` layers: before any layer it joins
  /// the first chunk (embedding), otherwise the chunk of the layer before it (LM head, loss).
  int64_t chunk_of_block_after(int64_t layers_before) const;
};

/// Calls `place(block_index, copy, chunk)` for every copy of every block of `graph` in forward
/// order, with the pipeline chunk that holds it. Physical stage k holds chunks k, k + pp, ...
/// (Megatron's interleaved schedule, Narayanan et al. 2021 §2.2).
template <class Place>
void for_each_block_copy(const Graph& graph, const PipelineSplit& split, Place&& place) {
  int64_t layer = 0;  // layers placed so far
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    const Block& block = graph.blocks[b];
    for (int64_t r = 0; r < block.repeat; ++r) {
      const int64_t chunk = block.is_layer ? split.chunk_of_layer(layer) : split.chunk_of_block_after(layer);
      place(b, r, chunk);
      if (block.is_layer) ++layer;
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
  tp,            ///< tensor (and sequence) parallel
  cp,            ///< context parallel (with ep nested inside it when ep divides cp)
  ep,            ///< expert parallel: routed experts split over these ranks
  shard,         ///< FSDP / ZeRO shard group of dense parameters: dp_shard x cp (torchtitan)
  expert_shard,  ///< what ep leaves of the shard group, for routed experts
  replicate,     ///< dp_replicate: HSDP replicas
  dp,            ///< every rank that sees other data: replicate x shard (DDP all-reduce)
};
inline constexpr int kNumMeshGroups = 7;

/// The resolved meaning of a plan. Build it with resolve(); it is a value, cheap to copy.
struct Layout {
  Plan plan;  ///< resolved: grad_accum, sequence_parallel and zero_stage set
  int64_t num_gpus = 1;
  int64_t grad_accum = 1;
  int64_t zero_stage = 0;
  int64_t replicas = 1;            ///< dp_replicate * dp_shard: replicas that see distinct sequences
  int64_t shard_group = 1;         ///< dp_shard * cp: the FSDP / ZeRO shard group
  int64_t expert_shard_group = 1;  ///< shard_group / ep: what routed experts shard over
  bool fsdp = false;               ///< zero_stage 3 over a shard group of more than one rank
  PipelineSplit pipeline;
  /// The device mesh: pp, dp_replicate, then dp_shard, cp, ep in the nesting the plan needs, then tp
  /// (innermost, so tp groups sit inside a node). Expert parallel is carved from dp_shard x cp: inside
  /// cp when ep divides cp ([dp_shard, cp/ep, ep]); otherwise spanning cp and part of dp_shard
  /// ([dp_shard*cp/ep, ep/cp, cp]). docs/lowering.md "Mesh".
  Mesh mesh() const;

  /// Names of the group's mesh axes of size > 1, outermost first (a size-1 group is empty).
  std::vector<std::string> axes(MeshGroup group) const;
  /// The group's axes of size > 1 with their strides, outermost first.
  std::vector<AxisSpan> spans(MeshGroup group) const;
  /// Members of the group (the product of its axes' sizes).
  int64_t size(MeshGroup group) const;
  /// Ranks between neighbouring pipeline stages.
  int64_t pp_stride() const { return num_gpus / plan.pp; }

  /// The mesh axes, outermost first (a fixed array: the search resolves a plan per candidate).
  struct Axis {
    const char* name = "";
    int64_t size = 1;
  };
  std::array<Axis, 6> mesh_axes{};
  size_t num_mesh_axes = 0;
  /// Per group, a bit per mesh axis (bit i = mesh_axes[i]); axes of size 1 included.
  std::array<uint32_t, kNumMeshGroups> members{};
};

/// Validates `plan` for `graph` under `settings` on `num_gpus` GPUs and resolves it. Throws
/// ir::InputError naming "--plan" and the key for a plan no estimate or schedule can express:
/// a degree below 1 or a product of degrees that overflows, a world size other than num_gpus, layers
/// that do not split into pp*vpp chunks, ep not dividing dp_shard*cp and the expert count or not
/// nesting with cp, a batch that does not divide into replicas x micro-batches, a grad_accum that
/// disagrees with it.
Layout resolve(const Graph& graph, const Plan& plan, const TrainingSettings& settings, int64_t num_gpus);

/// What a schedule needs beyond resolve (the estimator prices these plans; no step can run them):
/// an interleaved pipeline (vpp > 1) needs pp > 1 and grad_accum a multiple of pp (Megatron-LM's
/// interleaved 1F1B). Throws ir::InputError naming "--plan" and "vpp".
void require_schedulable(const Layout& layout);

}  // namespace mgt::ir
