// A parallel plan (`mgt.plan/1`): mesh sizes and per-strategy policy. Mesh order is
// dp_replicate, dp_shard, cp, tp (tp innermost, so tp groups sit inside a node).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace mgt::ir {

enum class Recompute { none, selective, full };
std::string to_string(Recompute recompute);

/// Keys and defaults exactly as `mgt.plan/1` documents them (docs/formats.md). Optional fields are
/// the derived defaults: grad_accum from the global batch, sequence_parallel = (tp > 1),
/// zero_stage = (dp_shard > 1 ? 3 : 0).
struct Plan {
  int64_t dp_replicate = 1;
  int64_t dp_shard = 1;
  int64_t tp = 1;
  int64_t cp = 1;
  int64_t pp = 1;
  int64_t vpp = 1;
  int64_t ep = 1;
  /// Expert tensor parallel: an expert's FFN split over etp ranks, independent of tp (Megatron
  /// --expert-tensor-parallel-size); unset = tp.
  std::optional<int64_t> etp;
  int64_t micro_batch = 1;
  std::optional<int64_t> grad_accum;
  Recompute recompute = Recompute::none;
  /// With recompute "full": how many layers per pipeline stage are recomputed (Megatron
  /// --recompute-num-layers); unset = all of them.
  std::optional<int64_t> recompute_layers;
  std::optional<bool> sequence_parallel;
  std::optional<int64_t> zero_stage;
  bool operator==(const Plan&) const = default;
};

/// Product of every mesh axis: dp_replicate * dp_shard * cp * tp * pp (ep folds into dp x cp ranks).
int64_t world_size(const Plan& plan);
bool sequence_parallel(const Plan& plan);  ///< the explicit value, else tp > 1
int64_t expert_tp(const Plan& plan);       ///< the explicit etp, else tp
int64_t zero_stage(const Plan& plan);      ///< the explicit value, else 3 when dp_shard > 1, else 0

/// Reads a plan object; missing keys take the defaults; unknown keys and bad values are InputErrors
/// naming `source` ("--plan" or a path) and the key.
Plan plan_from_json(const nlohmann::json& doc, const std::string& source);
/// Accepts either inline JSON text (starts with '{') or a path to a JSON file.
Plan parse_plan_argument(const std::string& text_or_path);
/// Writes every key, with the derived defaults resolved (grad_accum only when set).
nlohmann::json to_json(const Plan& plan);
/// One line: "dp_replicate=1 dp_shard=4 tp=2(sp) cp=1 mbs=1 ga=4 recompute=none".
std::string to_string(const Plan& plan);

}  // namespace mgt::ir
