// The schedule executor (executor.hpp; docs/runtime_executor.md): one step runs this rank's program
// top to bottom, instruction by instruction; each kind goes to its room (impl.hpp lists them). This
// file holds the step itself, the compute phases (what is kept, dropped and handed between block
// copies), buffer alloc / free, the out-of-memory report and the public Executor.
#include "impl.hpp"

#include "mgt/ir/error.hpp"

#include <chrono>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <variant>

namespace mgt::rt {

/// One step: check and reset (begin_step), every instruction of the program in order (timed when asked),
/// check nothing is left (end_step), then the loss summed over the ranks holding different tokens.
StepStats Executor::Impl::step(const StepBatch& b) {
  const auto start = std::chrono::steady_clock::now();
  begin_step(b);
  std::vector<InstructionTiming> timeline;
  if (options.record_timeline) timeline.reserve(program->instructions.size());
  for (const auto& instr : program->instructions) {
    if (!options.record_timeline) {
      run(instr);
      continue;
    }
    const double t0 = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run(instr);
    const double t1 = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    timeline.push_back({instr.id, t0, t1});
  }
  end_step();
  StepStats s;
  // Each rank's loss_sum is its tokens' share of the global mean; the report sums them over the
  // ranks holding different tokens (an all-reduce of the executor's own, not a schedule instruction).
  s.loss = sum_over(loss_sum, loss_axes);
  s.grad_norm = grad_norm;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  s.tokens = b.sequences * b.seq_len;
  s.peak_bytes = tracker.step_peak;
  s.planned_peak_bytes = tracker.planned_step_peak;
  s.instructions = static_cast<int64_t>(program->instructions.size());
  s.timeline = std::move(timeline);
  return s;
}

/// Checks the batch against the schedule, fixes the rank's share of the sequence, resets the step's
/// counters and zeroes the gradients.
void Executor::Impl::begin_step(const StepBatch& b) {
  if (b.sequences % replicas != 0) {
    throw std::runtime_error("global batch of " + std::to_string(b.sequences) + " sequences does not split over " +
                             std::to_string(replicas) + " data-parallel replicas");
  }
  const int64_t per_replica = b.sequences / replicas;
  const int64_t expected = schedule.plan.micro_batch * schedule.plan.grad_accum.value_or(1);
  if (per_replica != expected) {
    throw std::runtime_error("the schedule runs " + std::to_string(schedule.plan.grad_accum.value_or(1)) +
                             " micro-batches of " + std::to_string(schedule.plan.micro_batch) +
                             " sequences per replica, but the batch gives each replica " + std::to_string(per_replica) +
                             " (hint: lower with the same global batch)");
  }
  if (S != b.seq_len) {  // the rank's share of the sequence (fixed for the run)
    S = b.seq_len;
    cp_pos = ir::cp_positions(S, cp, cp_rank);
    T_cp = S / cp;
    if (sp && T_cp % tp != 0) {
      throw ir::InputError("--seq-len", "seq_len", "sequence parallelism splits the " + std::to_string(T_cp) +
                                                       " positions of a cp rank over tp = " + std::to_string(tp) + ": not divisible",
                           "choose a sequence length divisible by cp*tp" + std::string(cp > 1 ? "*2" : ""));
    }
    T_sp = sp ? T_cp / tp : T_cp;
    rope_tables.clear();
  }
  batch = &b;
  token_cache.clear();
  loss_sum = 0.0;
  grad_norm = 0.0;
  ddp_reduced = 0;
  last_scattered.clear();
  tracker.step_peak = tracker.current;
  tracker.planned_step_peak = tracker.planned;
  K.fill_zero(state.grads().data(), static_cast<int64_t>(state.grads().size()));
}

/// Checks that the program released everything it allocated and, under DDP, reduced every gradient.
void Executor::Impl::end_step() {
  std::string leftovers;
  for (const auto& [name, buf] : live) leftovers += " " + name;
  if (!fwd_handoff.empty() || !bwd_handoff.empty()) leftovers += " (block boundary tensors)";
  if (!pending.empty()) leftovers += " (an unfinished batch of sends / recvs)";
  live.clear();
  fwd_handoff.clear();
  bwd_handoff.clear();
  pending.clear();
  batch = nullptr;
  if (!leftovers.empty()) throw std::runtime_error("the program left buffers live at its end:" + leftovers);
  const bool ddp = zero == 0 && comm && comm->group_size(copy_axes) > 1;
  if (ddp && ddp_reduced != stage_layout.size) {
    throw std::runtime_error("the schedule's DDP buckets all-reduced " + std::to_string(ddp_reduced) + " of " +
                             std::to_string(stage_layout.size) + " gradients");
  }
}

void Executor::Impl::run(const ir::Instruction& instr) {
  try {
    run_unguarded(instr);
  } catch (const std::bad_alloc&) {
    oom(instr);
  } catch (const std::length_error&) {  // a size beyond what a vector can hold
    oom(instr);
  }
}

void Executor::Impl::run_unguarded(const ir::Instruction& instr) {
  std::visit(
      [&](const auto& p) {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, ir::Compute>) {
          run_compute(instr, p);
        } else if constexpr (std::is_same_v<T, ir::Alloc>) {
          run_alloc(instr, p);
        } else if constexpr (std::is_same_v<T, ir::Free>) {
          run_free(instr, p);
        } else if constexpr (std::is_same_v<T, ir::OptimizerStep>) {
          run_optimizer(instr, p);
        } else if constexpr (std::is_same_v<T, ir::Wait>) {
          // Single-threaded in program order: instruction `on` has already finished.
        } else if constexpr (std::is_same_v<T, ir::Collective>) {
          run_collective(instr, p);
        } else if constexpr (std::is_same_v<T, ir::Send>) {
          run_p2p(instr, p, true);
        } else {
          run_p2p(instr, p, false);
        }
      },
      instr.op);
}

/// A Compute: the op's forward, recompute or backward part, then what its outputs become: inputs no
/// later op needs dropped, the block output handed to the next copy, the input gradient handed back.
void Executor::Impl::run_compute(const ir::Instruction& instr, const ir::Compute& c) {
  Ctx x = context_of(instr, c);
  const OpKey key{c.block, c.layer, c.micro_batch, c.op};
  const ir::Op& op = *x.op;

  switch (c.phase) {
    case ir::Phase::fwd: {
      forward(x, /*recompute=*/false);
      // Drop what neither a later forward op nor a backward needs (unless recomputed later).
      for (const auto& name : op.inputs) {
        auto lr = x.info->last_reader.find(name);
        if (lr == x.info->last_reader.end() || lr->second != x.op_index) continue;
        bool keep = x.info->needed_by_backward.count(name) > 0;
        auto pr = x.info->producer.find(name);
        if (keep && pr != x.info->producer.end() &&
            recomputed.count({c.block, c.layer, c.micro_batch, x.block->ops[pr->second].name})) {
          keep = false;
        }
        if (!keep) drop(x, name);
      }
      if (!op.output.empty() && op.output == x.info->output) {  // block output: hand to the next copy
        auto it = x.buf->tensors.find(op.output);
        if (fwd_handoff.count(c.micro_batch)) fail(instr, "the previous block output of micro-batch " + std::to_string(c.micro_batch) + " was never consumed");
        fwd_handoff[c.micro_batch] = std::move(it->second);
        x.buf->tensors.erase(it);
      }
      break;
    }
    case ir::Phase::recompute: {
      forward(x, /*recompute=*/true);
      if (!op.output.empty() && op.output == x.info->output) drop(x, op.output);
      break;
    }
    case ir::Phase::bwd_data:
    case ir::Phase::bwd_weight: {
      const bool split = split_weight.count(key) > 0;
      const bool data = c.phase == ir::Phase::bwd_data;
      const bool weight = c.phase == ir::Phase::bwd_weight || !split;
      backward(x, data, weight);
      if (weight && !op.output.empty()) drop(x, "d:" + op.output);  // consumed
      if (data && x.info->has_input && x.op_index == x.info->first_input_reader) {
        auto it = x.buf->tensors.find("d:x");
        if (it != x.buf->tensors.end()) {  // the block input's gradient is complete: hand it back
          if (bwd_handoff.count(c.micro_batch)) fail(instr, "the previous input gradient of micro-batch " + std::to_string(c.micro_batch) + " was never consumed");
          bwd_handoff[c.micro_batch] = std::move(it->second);
          x.buf->tensors.erase(it);
        }
      }
      break;
    }
  }
}

void Executor::Impl::run_alloc(const ir::Instruction& instr, const ir::Alloc& a) {
  if (live.count(a.buffer)) fail(instr, "buffer '" + a.buffer + "' is already allocated");
  Buffer& b = live[a.buffer];
  b.kind = a.kind;
  b.planned_bytes = a.bytes;
  tracker.add_planned(a.bytes);
  const auto n = static_cast<int64_t>(sizeof(float)) * state.padded_elements();
  if (a.kind == ir::BufferKind::parameters) b.state_bytes = n;
  if (a.kind == ir::BufferKind::gradients && a.buffer == "grads") b.state_bytes = n;
  if (a.kind == ir::BufferKind::optimizer) b.state_bytes = 2 * n;
  tracker.add(b.state_bytes);
}

void Executor::Impl::run_free(const ir::Instruction& instr, const ir::Free& f) {
  auto it = live.find(f.buffer);
  if (it == live.end()) fail(instr, "buffer '" + f.buffer + "' is not allocated");
  tracker.sub(it->second.state_bytes);
  tracker.planned -= it->second.planned_bytes;
  live.erase(it);
}

/// An allocation failed inside `instr`: names its buffers, the request, what was live and the
/// peak the plan predicted.
void Executor::Impl::oom(const ir::Instruction& instr) const {
  std::string buffers;
  for (const std::string& b : ir::buffers_of(instr)) buffers += (buffers.empty() ? "" : ", ") + b;
  fail(instr, "out of memory allocating " + std::to_string(Tensor::last_request_bytes) + " bytes for buffer " +
                  (buffers.empty() ? std::string("(scratch)") : buffers) + " with " + std::to_string(tracker.current) +
                  " bytes live; the plan predicted a peak of " + std::to_string(predicted_peak_bytes()) +
                  " bytes for this rank (hint: a plan with more sharding, recompute or a smaller micro-batch)");
}

/// The schedule's own peak of Alloc'd bytes for this rank's program (the simulator's peak).
int64_t Executor::Impl::predicted_peak_bytes() const {
  int64_t current = 0, peak = 0;
  std::map<std::string, int64_t> sizes;
  for (const ir::Instruction& i : program->instructions) {
    if (const auto* a = std::get_if<ir::Alloc>(&i.op)) {
      sizes[a->buffer] = a->bytes;
      peak = std::max(peak, current += a->bytes);
    } else if (const auto* f = std::get_if<ir::Free>(&i.op)) {
      current -= sizes[f->buffer];
    }
  }
  return peak;
}

Executor::Executor(const ir::Schedule& schedule, const ir::Graph& graph, ModelState& state, ExecutorOptions options,
                   Communicator* comm)
    : impl_(std::make_unique<Impl>(schedule, graph, state, std::move(options), comm)) {
  impl_->setup();
}

Executor::~Executor() = default;

void Executor::synchronize_state() { impl_->synchronize_state(); }

StepStats Executor::step(const StepBatch& batch) { return impl_->step(batch); }

MemoryStats Executor::memory() const {
  return {impl_->tracker.current, impl_->tracker.peak, impl_->tracker.planned, impl_->tracker.planned_peak};
}

const ir::Program& Executor::program() const { return *impl_->program; }

}  // namespace mgt::rt
