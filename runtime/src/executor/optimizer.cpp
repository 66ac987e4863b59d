// The optimizer step (impl.hpp): the global gradient norm over the elements each rank owns, clipping,
// AdamW on those elements; and the state synchronisation that makes every rank's copy complete.
#include "impl.hpp"

#include <algorithm>
#include <cmath>

namespace mgt::rt {

void Executor::Impl::run_optimizer(const ir::Instruction& instr, const ir::OptimizerStep& o) {
  if (zero == 0 && o.param_elements != stage_layout.size) {
    fail(instr, "the step updates " + std::to_string(o.param_elements) + " elements but this rank holds " +
                    std::to_string(stage_layout.size));
  }
  float* g = state.grads().data();
  // Global norm: each element once over the world (replicated tp slices from tp rank 0 only).
  double sq = 0.0;
  for (const auto& [name, u] : units)
    for_each_in(u, owned(u), [&](const Segment& s, int64_t fb, int64_t n, int64_t) {
      if (!s.tp_replicated || tp_rank == 0) sq += K.grad_sum_squares(g + fb, n);
    });
  grad_norm = std::sqrt(sum_over(sq, norm_axes));
  const float coef = cpu::grad_clip_coefficient(grad_norm, options.grad_clip);
  state.step += 1;
  for (const auto& [name, u] : units)
    for_each_in(u, owned(u), [&](const Segment&, int64_t fb, int64_t n, int64_t) {
      if (coef < 1.0f) K.scale_in_place(g + fb, n, coef);
      K.adamw_step(state.params().data() + fb, g + fb, state.adam_m().data() + fb, state.adam_v().data() + fb, n,
                      state.step, options.adamw);
    });
}

void Executor::Impl::synchronize_state() {
  if (!comm || comm->world_size() <= 1) return;
  // Every element from exactly one owner, zeros elsewhere, summed over the world: exact.
  const int64_t n = state.table().total_elements;
  const bool replica0 = copy_axes.empty() || group_rank(schedule.mesh, options.rank, copy_axes) == 0;
  for (std::span<float> buf : {state.params(), state.adam_m(), state.adam_v()}) {
    std::pmr::vector<float> sum(static_cast<size_t>(n), 0.0f, K.memory());
    if (replica0)
      for (const auto& [name, u] : units)
        for_each_in(u, owned(u), [&](const Segment& s, int64_t fb, int64_t count, int64_t) {
          if (!s.tp_replicated || tp_rank == 0) std::copy_n(buf.data() + fb, count, sum.data() + fb);
        });
    comm->all_reduce(sum.data(), sum.data(), n, comm->all_axes());
    std::copy(sum.begin(), sum.end(), buf.begin());
  }
}

}  // namespace mgt::rt
