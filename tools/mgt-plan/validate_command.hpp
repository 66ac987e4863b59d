// `mgt-plan validate FILE...`: the estimator's predictions against published measurements
// (docs/validation.md). Prints per source the rows compared and skipped, the median and p90
// absolute error, the five worst rows with their breakdown; with --json the `mgt.validation/1`
// document. With --cv, leave-one-source-out cross-validation (`mgt.validation_cv/1`).
#pragma once

#include "mgt/planner/validate.hpp"

#include <string>
#include <vector>

namespace mgt::cli {

/// Exit status 0 when it ran (whatever the errors), 2 when a file is unreadable or malformed. With
/// `cv`, leave-one-source-out cross-validation of the fitted constants instead (run_validate_cv).
int run_validate(const std::vector<std::string>& files, bool json, bool cv = false, int cv_rounds = 8,
                 const std::string& cv_start = "shipped");

/// `--cv` (validate_cv_command.cpp): refits the constants once on every source and once without each
/// source, prints in-sample vs out-of-sample errors per source and pooled, the fitted values, and
/// the rank order; `max_rounds` bounds each fit's coordinate-descent rounds; `start` is "shipped"
/// (plan::shipped_values) or "prior" (plan::prior_values).
int run_validate_cv(const std::vector<plan::ValidationSource>& sources, bool json, int max_rounds,
                    const std::string& start);

}  // namespace mgt::cli
