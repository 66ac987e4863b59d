// A row that leaves its tensor or pipeline degree unstated (docs/validation.md §5, "Layout not
// stated"): the degrees are taken as tuned, as every other unstated knob is. Each (tp, pp) the row's
// stated degrees allow becomes the setup of the same row with those two stated; validate_prepared
// keeps the fastest that fits, and says so.
#include "mgt/planner/rules.hpp"
#include "mgt/planner/search.hpp"
#include "mgt/planner/validate.hpp"

#include "validate_util.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace mgt::plan {

using detail::json;
using detail::opt_int;

namespace {

// Degrees tried: no node holds more GPUs than this in one tensor-parallel group, and no pipeline has
// more stages than a model has layers (a bound that keeps a row with an absurd GPU count from
// turning into billions of candidates).
constexpr int64_t kMaxTriedDegree = 1024;

/// Powers of two up to `limit` (tensor-parallel degrees: the planner's rules want tp to divide the
/// heads, and every preset node holds a power of two GPUs).
std::vector<int64_t> powers_of_two(int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t v = 1; v <= std::min(limit, kMaxTriedDegree); v *= 2) out.push_back(v);
  return out;
}

/// Divisors of n up to `limit`.
std::vector<int64_t> divisors(int64_t n, int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= std::min(n, limit); ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

}  // namespace

std::optional<TunedLayouts> tuned_layouts(const ValidationSource& source, const json& row) {
  const json& par = row.contains("parallel") && row["parallel"].is_object() ? row["parallel"] : json();
  if (!par.is_object()) return std::nullopt;
  std::optional<int64_t> gpus, tp, pp, dp, cp;
  try {
    gpus = opt_int(par, "num_gpus", "parallel");
    tp = opt_int(par, "tp", "parallel"), pp = opt_int(par, "pp", "parallel"), dp = opt_int(par, "dp", "parallel");
    cp = opt_int(par, "cp", "parallel").value_or(1);
  } catch (const RowSkipped&) {
    return std::nullopt;  // a degree that is not a number: setup_row says which, in its order of checks
  }
  if ((tp && pp) || !gpus || *gpus <= 0) return std::nullopt;  // stated, or setup_row says what is missing
  if (*cp <= 0 || *gpus % *cp != 0 || (tp && *tp <= 0) || (pp && *pp <= 0) || (dp && *dp <= 0))
    return std::nullopt;  // setup_row names the bad degree
  const int64_t model_ranks = *gpus / *cp;  // tp x pp x dp

  // A pipeline has at most as many stages as the row's model has layers (when it says).
  int64_t max_pp = kMaxTriedDegree;
  try {
    if (row.contains("model") && row["model"].is_object())
      if (const auto layers = opt_int(row["model"], "num_layers", "model"); layers && *layers > 0)
        max_pp = std::min(max_pp, *layers);
  } catch (const RowSkipped&) {
    // setup_row names the field
  }

  TunedLayouts out;
  std::map<std::string, int64_t> broken;  // rule -> layouts it rejected
  std::string first_skip;
  const std::vector<int64_t> tps = tp ? std::vector<int64_t>{*tp} : powers_of_two(model_ranks);
  for (const int64_t t : tps) {
    if (model_ranks % t != 0) continue;
    const std::vector<int64_t> pps = pp ? std::vector<int64_t>{*pp} : divisors(model_ranks / t, max_pp);
    for (const int64_t q : pps) {
      if ((model_ranks / t) % q != 0) continue;
      if (dp && t * q * *dp != model_ranks) continue;  // a stated dp fixes tp x pp
      json r = row;
      r["parallel"]["tp"] = t;
      r["parallel"]["pp"] = q;
      RowSetup s;
      try {
        s = setup_row(source, r);
      } catch (const RowSkipped& e) {
        if (first_skip.empty()) first_skip = e.what();
        continue;
      }
      // A pipeline the framework runs and the search proposes; the planner's rules (tp within a
      // node, tp dividing the heads, ...), as a search would reject them.
      if (q > 1 && (!s.framework.offers_pipeline || !pipeline_split_proposed(s.shape.layers, q, 1, ir::mtp_depths(s.graph)))) {
        ++broken["pp=" + std::to_string(q) + " is not a pipeline " + s.framework.name + " runs for " +
                 std::to_string(s.shape.layers) + " layers"];
        continue;
      }
      RuleOptions rules;
      rules.num_gpus = s.num_gpus;
      rules.framework = s.framework.name;
      if (const auto why = first_broken_rule(s.plan, model_facts(s.graph), s.cluster, s.settings, rules)) {
        ++broken[*why];
        continue;
      }
      out.setups.push_back(std::move(s));
    }
  }
  std::string stated;
  if (tp) stated = "tp " + std::to_string(*tp) + " stated";
  if (pp) stated = "pp " + std::to_string(*pp) + " stated";
  if (dp) stated += std::string(stated.empty() ? "" : ", ") + "dp " + std::to_string(*dp) + " stated";
  const std::string what = std::string(!tp && !pp ? "parallel.tp and pp" : !tp ? "parallel.tp" : "parallel.pp") + " not stated";
  if (out.setups.empty()) {
    std::string why = first_skip;
    for (const auto& [rule, n] : broken) why += (why.empty() ? "" : "; ") + rule;
    throw RowSkipped(what + ": no layout of " + std::to_string(*gpus) + " GPUs with cp " + std::to_string(*cp) +
                     (stated.empty() ? "" : " and " + stated) + " can run (" + why + ")");
  }
  out.note = what + ": tuned over " + std::to_string(out.setups.size()) + " layouts (tp x pp x dp x cp = " +
             std::to_string(*gpus) + ", cp " + std::to_string(*cp) + (stated.empty() ? "" : ", " + stated) +
             ", the planner's rules and the pipelines " + out.setups.front().framework.name + " runs)";
  return out;
}

}  // namespace mgt::plan
