// What binds a step (estimator.hpp bottleneck_of): the summary line of every estimate.
#include "mgt/cost_model/estimator.hpp"

#include <string>

namespace mgt::cost {

std::string bottleneck_of(const TimeBreakdown& t, double step_time_s, double host_wait_s) {
  // Communication, the bubble or the host's launches bind when at least 10 % of the step; otherwise
  // compute does.
  struct Term { const char* name; double s; };
  const Term terms[] = {{"host dispatch (eager kernel launches)", host_wait_s},
                        {"exposed tp communication", t.exposed_tp_s},
                        {"exposed cp communication", t.exposed_cp_s},
                        {"exposed fsdp communication", t.exposed_fsdp_s},
                        {"exposed dp communication", t.exposed_dp_s},
                        {"exposed pp communication", t.exposed_pp_s},
                        {"exposed ep communication", t.exposed_ep_s},
                        {"pipeline bubble", t.bubble_s}};
  const Term* worst = &terms[0];
  for (const auto& term : terms)
    if (term.s > worst->s) worst = &term;
  if (worst->s > 0 && worst->s >= 0.10 * step_time_s) return worst->name;
  if (t.optimizer_s + t.overhead_s >= 0.25 * step_time_s) return "fixed costs (optimizer and per-step overhead)";
  return "compute";
}

}  // namespace mgt::cost
