// Executor setup (impl.hpp): the rank's process groups, read from the schedule alone (its mesh and
// the axes its collectives name; docs/runtime_executor.md "Several ranks"), what the executor cannot
// run refused up front, and the indexes the step uses (per-block op facts, the stage's parameter
// units, the Compute each tensor collective belongs to).
#include "impl.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <variant>

namespace mgt::rt {

namespace {

/// Every collective of every program, in program order.
template <typename F>
void for_each_collective(const ir::Schedule& schedule, F&& f) {
  for (const ir::Program& p : schedule.programs)
    for (const ir::Instruction& instr : p.instructions)
      if (const auto* c = std::get_if<ir::Collective>(&instr.op)) f(instr, *c);
}

bool names_unit(const std::string& buffer, char prefix) {
  return buffer.size() > 3 && buffer[0] == prefix && buffer[1] == '[' && buffer.back() == ']';
}

}  // namespace

int64_t Executor::Impl::coord(const std::string& axis) const {
  for (const auto& a : schedule.mesh.axes)
    if (a.name == axis) return a.size > 1 ? group_rank(schedule.mesh, options.rank, {axis}) : 0;
  return 0;
}

void Executor::Impl::setup() {
  ir::verify_or_throw(schedule, "schedule");
  if (comm) options.rank = comm->rank();
  const auto p = ir::program_for_rank(schedule, options.rank);
  if (!p) {
    throw ir::InputError("schedule", "programs",
                         "no program for rank " + std::to_string(options.rank) + " of " +
                             std::to_string(schedule.num_gpus));
  }
  program_index = *p;
  program = &schedule.programs[program_index];
  if (schedule.num_gpus > 1 && !comm) {
    throw ir::InputError("schedule", "num_gpus",
                         "the schedule has " + std::to_string(schedule.num_gpus) + " ranks but no communicator was given",
                         "run one process per rank under mpirun");
  }
  setup_groups();
  check_supported();
  index_blocks();
  index_program();
  anchor_collectives();
}

/// 1. Degrees and coordinates from the mesh: tp, cp, pp; the replicas are the dp_* axes; the loss
///    is summed over every axis but tp (tp ranks hold the same tokens).
/// 2. FSDP when the schedule all-gathers parameter units ("w[block.copy]"): the shard group is the
///    axes those all-gathers name; HSDP replicas lie outside it.
/// 3. Sequence parallelism when the schedule gathers or scatters activations over tp.
void Executor::Impl::setup_groups() {
  const ir::Mesh& mesh = schedule.mesh;
  tp = ir::group_size(mesh, {"tp"});
  cp = ir::group_size(mesh, {"cp"});
  pp = ir::group_size(mesh, {"pp"});
  tp_rank = coord("tp");
  cp_rank = coord("cp");
  for (const ir::MeshAxis& a : mesh.axes) {
    if (a.name.rfind("dp_", 0) == 0) dp_axes.push_back(a.name);
    if (a.name != "tp") loss_axes.push_back(a.name);
  }
  replicas = ir::group_size(mesh, dp_axes);
  replica = replicas > 1 ? group_rank(mesh, options.rank, dp_axes) : 0;
  for_each_collective(schedule, [&](const ir::Instruction&, const ir::Collective& c) {
    if (c.kind == ir::CollectiveKind::all_gather && names_unit(c.buffer, 'w') && c.group_size > 1) {
      zero = 3;
      shard_axes = c.axes;
    }
    const bool sequence = c.kind == ir::CollectiveKind::all_gather || c.kind == ir::CollectiveKind::reduce_scatter;
    if (sequence && c.axes == Axes{"tp"} && !c.tensors.empty()) sp = true;
  });
  norm_axes = {"pp", "tp"};
  if (zero == 3) {
    shards = ir::group_size(mesh, shard_axes);
    shard_index = shards > 1 ? group_rank(mesh, options.rank, shard_axes) : 0;
    norm_axes.insert(norm_axes.end(), shard_axes.begin(), shard_axes.end());
  }
  for (const std::string& a : loss_axes)
    if (a != "pp" && std::find(shard_axes.begin(), shard_axes.end(), a) == shard_axes.end()) copy_axes.push_back(a);
}

/// What the CPU executor cannot run yet, refused before the first step: expert parallelism, a tie
/// across pipeline stages, ZeRO-1/2 (parameters all-gathered whole after the optimizer step).
void Executor::Impl::check_supported() const {
  // Encoders (BERT, ViT) attend both ways and read segment ids or image patches the CPU executor's
  // token batches do not carry: refused by name rather than trained on the wrong inputs.
  for (const ir::Block& block : graph.blocks)
    for (const ir::Op& op : block.ops)
      if (op.kind == ir::OpKind::attention_core && !op.causal)
        throw ir::InputError("model", block.name + "." + op.name,
                             "bidirectional attention (an encoder such as BERT or ViT): the CPU executor trains "
                             "decoder-only language models",
                             "plan, estimate and simulate encoders with mgt-plan; run a decoder-only model");
  const int64_t ep = ir::group_size(schedule.mesh, {"ep"});
  if (ep > 1) {
    throw ir::InputError("schedule", "mesh.ep",
                         "ep = " + std::to_string(ep) + ": the CPU executor has no MoE kernels (router, experts) yet",
                         "use a dense model and ep = 1");
  }
  if (pp > 1 && !graph.tied_parameters.empty()) {
    throw ir::InputError("schedule", "mesh.pp",
                         "pp = " + std::to_string(pp) + " with tied parameters (" + graph.tied_parameters.front().first +
                             " = " + graph.tied_parameters.front().second +
                             "): the CPU executor does not synchronise a tie across pipeline stages yet",
                         "use pp = 1, or a model with untied embeddings");
  }
  if (state.padded_elements() != state.table().total_elements) {
    throw ir::InputError("model state", "padded_elements", "the executor needs an unpadded ModelState (every rank holds the full layout)");
  }
  int64_t zero12 = 0;  // ZeRO-1 reduce-scatters "grads" whole; ZeRO-2 per unit; both gather "params"
  for_each_collective(schedule, [&](const ir::Instruction&, const ir::Collective& c) {
    if (c.kind == ir::CollectiveKind::reduce_scatter && c.buffer == "grads") zero12 = 1;
    if (c.kind == ir::CollectiveKind::all_gather && c.buffer == "params" && zero12 == 0) zero12 = 2;
  });
  if (zero12 > 0) {
    throw ir::InputError("schedule", "plan.zero_stage",
                         "ZeRO-" + std::to_string(zero12) + " is not implemented by the CPU executor yet",
                         "use zero_stage 0 (DDP) or 3 (FSDP)");
  }
}

/// Per graph block: its ops by name, each activation's producer and last forward reader, what a
/// backward reads, the block input and output.
void Executor::Impl::index_blocks() {
  for (size_t b = 0; b < graph.blocks.size(); ++b) {
    const ir::Block& block = graph.blocks[b];
    block_index[block.name] = b;
    BlockInfo info;
    info.has_input = ir::find_tensor(block, "x") != nullptr;
    info.first_input_reader = block.ops.size();
    for (size_t i = 0; i < block.ops.size(); ++i) {
      const ir::Op& op = block.ops[i];
      info.op_index[op.name] = i;
      if (!op.output.empty()) info.producer[op.output] = i;
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        const std::string& in = op.inputs[k];
        const ir::TensorDecl* t = ir::find_tensor(block, in);
        if (!t || t->is_parameter) continue;
        info.last_reader[in] = i;
        if (in == "x") info.first_input_reader = std::min(info.first_input_reader, i);
        bool needed = false;
        switch (op.kind) {
          case ir::OpKind::contraction: needed = (k == 0); break;  // dW needs the activation
          case ir::OpKind::norm: needed = (k == 0); break;
          case ir::OpKind::attention_core: needed = true; break;
          case ir::OpKind::activation: needed = true; break;
          case ir::OpKind::softmax_cross_entropy: needed = true; break;
          default: break;
        }
        if (needed) info.needed_by_backward.insert(in);
      }
    }
    if (!block.ops.empty()) info.output = block.ops.back().output;
    blocks.push_back(std::move(info));
  }
}

/// The program's split backward and recomputed ops; the stage's parameters as units.
void Executor::Impl::index_program() {
  std::set<std::string> on_stage;
  const auto& instrs = program->instructions;
  for (const auto& instr : instrs) {
    const auto* c = std::get_if<ir::Compute>(&instr.op);
    if (!c) continue;
    if (c->phase == ir::Phase::bwd_weight) split_weight.insert({c->block, c->layer, c->micro_batch, c->op});
    if (c->phase == ir::Phase::recompute) recomputed.insert({c->block, c->layer, c->micro_batch, c->op});
    if (!block_index.count(c->block)) {
      throw ir::InputError("schedule", "compute", "block '" + c->block + "' is not in the graph (" +
                                                      ir::to_text(instr, program_index) + ")");
    }
    on_stage.insert(c->block + "." + std::to_string(c->layer));
  }
  // The stage's parameters, unit by unit in table order (a tied second name is not an entry).
  for (const ParamEntry& e : state.table().entries) {
    const std::string key = e.block + "." + std::to_string(e.copy);
    if (!on_stage.count(key)) continue;
    units[key].append(slice_layout(e, tp, tp_rank));
  }
  for (const ParamEntry& e : state.table().entries) {
    const std::string key = e.block + "." + std::to_string(e.copy);
    if (on_stage.count(key) && units.count(key)) stage_layout.append(slice_layout(e, tp, tp_rank));
  }
}

/// Each collective that names tensors belongs to one Compute of the block copy its workspace names
/// (ws[block.copy]; any block for "grads"): the one it depends on (issued after it) or the first one
/// that depends on it (issued before it). docs/schedule.md "Tensors".
void Executor::Impl::anchor_collectives() {
  const auto& instrs = program->instructions;
  for (size_t i = 0; i < instrs.size(); ++i) {
    const auto* c = std::get_if<ir::Collective>(&instrs[i].op);
    if (!c || c->tensors.empty() || c->group_size <= 1) continue;
    const bool ws = c->buffer.rfind("ws[", 0) == 0 && c->buffer.back() == ']';
    const std::string copy = ws ? c->buffer.substr(3, c->buffer.size() - 4) : std::string();
    const auto matches = [&](size_t j) {
      const auto* k = std::get_if<ir::Compute>(&instrs[j].op);
      return k && (!ws || k->block + "." + std::to_string(k->layer) == copy);
    };
    int64_t anchor = -1;
    for (ir::InstrId d : instrs[i].deps)
      if (matches(size_t(d))) anchor = d;
    for (size_t j = i + 1; anchor < 0 && j < instrs.size(); ++j) {
      const auto& deps = instrs[j].deps;
      if (matches(j) && std::find(deps.begin(), deps.end(), instrs[i].id) != deps.end()) anchor = int64_t(j);
    }
    if (anchor < 0) {
      throw ir::InputError("schedule", "programs[" + std::to_string(program_index) + "].instructions[" + std::to_string(i) + "]",
                           "a collective naming tensors is neither after a Compute nor before one (" +
                               ir::to_text(instrs[i], program_index) + ")");
    }
    anchor_of[instrs[i].id] = anchor;
  }
}

}  // namespace mgt::rt
