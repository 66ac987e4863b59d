// `mgt-plan compile model.json --gpus N --plan P --out schedule.json [--text]`: lowers one plan to the
// mgt.schedule/1 program every rank runs (docs/lowering.md, docs/schedule.md).
#pragma once

#include "mgt/cost_model/estimator.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/plan.hpp"

#include <cstdint>
#include <string>

namespace mgt::cli {

/// Lowers `plan`, verifies the schedule and writes it to `out_path` ("-" or empty: stdout) as
/// mgt.schedule/1 JSON, or as the text dump when `text`. Prints one summary line to stderr
/// ("schedule: 4 programs, 1234 instructions, verify OK, lowered in 0.012 s"). Returns 0, or 2 after
/// printing the error when the plan cannot be lowered or the file cannot be written (ir::InputError
/// from the lowering propagates to the caller's handler). `params` are the framework's constants, which
/// order the pipeline transfers as `simulate` does (plan::LowerOptions::params).
int run_compile(const ir::Graph& graph, const ir::ClusterSpec& cluster, const ir::Plan& plan,
                const cost::TrainingSettings& settings, int64_t num_gpus, const std::string& out_path, bool text,
                const cost::CostParams& params);

}  // namespace mgt::cli
