// `mgt-plan simulate MODEL --gpus N --plan P [--trace t.json] [--svg s.svg] [--json]`: lowers the plan
// to a Schedule, verifies and simulates it (docs/simulator.md), and prints the step time with its
// breakdown, peak memory by category and when it happens, beside the analytic estimate.
#pragma once

#include "mgt/cost_model/cost_params.hpp"

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/plan.hpp"

#include <cstdint>
#include <string>

namespace mgt::cli {

/// Exit status 0 when the plan fits in GPU memory, 1 when its simulated peak does not. Writes the
/// Chrome trace to `trace_path` and the SVG report to `svg_path` when they are non-empty. With
/// `json`, prints the mgt.simulation/1 document (cost::SimulationReport). Throws ir::InputError for a
/// plan the lowering rejects or a file it cannot write.
int run_simulate(const ir::Graph& graph, const ir::ClusterSpec& cluster, const ir::Plan& plan,
                 const cost::TrainingSettings& settings, int64_t num_gpus, const std::string& trace_path,
                 const std::string& svg_path, bool json, const cost::CostParams& params);

}  // namespace mgt::cli
