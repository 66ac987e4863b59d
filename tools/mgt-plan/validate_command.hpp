// `mgt-plan validate FILE...`: the estimator's predictions against published measurements
// (docs/validation.md). Prints per source the rows compared and skipped, the median and p90
// absolute error, the five worst rows with their breakdown; with --json the `mgt.validation/1`
// document.
#pragma once

#include <string>
#include <vector>

namespace mgt::cli {

/// Exit status 0 when it ran (whatever the errors), 2 when a file is unreadable or malformed.
int run_validate(const std::vector<std::string>& files, bool json);

}  // namespace mgt::cli
