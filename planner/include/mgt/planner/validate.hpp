// `mgt-plan validate`: checks the estimator against published training measurements
// (../shared/validation, format in examples/validation/README.md; docs/validation.md says how each
// field is read, every default and every FLOP convention). Pure library code: reading a file,
// turning each row into a Graph, ClusterSpec, Plan and TrainingSettings, estimating it, and
// comparing like with like.
#pragma once

#include "mgt/cost_model/estimator.hpp"
#include "mgt/cost_model/framework_profile.hpp"
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/plan.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mgt::plan {

/// A row that cannot be compared; what() is the reason shown to the user.
class RowSkipped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One validation file: one source (or a tightly related group) with its hardware and rows.
struct ValidationSource {
  std::string path;
  std::string name;      ///< file stem, e.g. "megatron2021_narayanan"
  std::string citation;  ///< the file's "source"
  std::string notes;     ///< the file's "source_notes"
  nlohmann::json hardware = nlohmann::json::object();  ///< system id -> hardware block
  /// The file's "framework" ({"name", "version", "features"}); a row's own "framework" wins.
  nlohmann::json framework;
  std::vector<nlohmann::json> rows;
  bool catalog = false;  ///< catalog_*.json: shared definitions, no rows
};

/// Reads a validation document. Malformed documents (not an object, "rows" not an array of objects,
/// a row without a string "id", a row whose "system" names no hardware block) throw ir::InputError
/// naming `path` and the field; a catalog file (no "rows", but "models"/"gpus"/"systems") yields no rows.
ValidationSource validation_source_from_json(const nlohmann::json& doc, const std::string& path);
ValidationSource read_validation_source(const std::string& path);

/// Sizes of a row's inline `model` object, as the graph and the FLOP conventions need them.
struct ModelShape {
  std::string name;
  std::string family;  ///< the Hugging Face model_type used: llama, gpt2, starcoder2, mixtral, gpt_oss, deepseek_v3
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  bool gated = false;  ///< gated MLP (SwiGLU/GeGLU: three matrices) vs plain (two)
  /// model.activation says "clamped" (GPT-OSS): the gated unit's inputs are clamped (HF swiglu_limit;
  /// the value is not stated and does not change the cost: GPT-OSS's 7.0 is written).
  bool glu_clamped = false;
  bool tied = false;
  // Mixture of experts (experts == 0: dense).
  int64_t experts = 0, top_k = 0, moe_ffn = 0, shared_ffn = 0, dense_layers = 0;
  // DeepSeek multi-head latent attention.
  bool mla = false;
  int64_t q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
  int64_t mtp_layers = 0;  ///< model.mtp_layers: DeepSeek-V3 multi-token prediction depths (MLA models)
  double published_params = 0;  ///< params_B * 1e9; 0 when not stated
  /// model.attention_pattern: a sliding window of this many tokens (0: full attention everywhere),
  /// on every layer or, when `window_alternates`, on the even layers (the odd ones attend fully).
  int64_t sliding_window = 0;
  bool window_alternates = false;
};

/// Reads `model`; fills defaults (listed in `assumptions`); throws RowSkipped for unsupported
/// architectures or missing essential sizes.
ModelShape model_shape(const nlohmann::json& model, std::vector<std::string>& assumptions);
/// The Hugging Face config.json that ir::graph_from_hf_config turns into the row's graph.
nlohmann::json hf_config(const ModelShape& shape, int64_t seq_len);

/// Matrix-multiply parameters a token touches (attention projections and MLPs of every layer,
/// routed experts counted top_k times, plus the LM head V*h; no embeddings, norms or biases).
double matmul_params_active(const ModelShape& shape);

/// A hardware block (one entry of the file's "hardware") as a ClusterSpec: the closest preset with
/// every stated number overriding it; what stayed from the preset is listed in `assumptions`.
ir::ClusterSpec cluster_from_hardware(const std::string& system_id, const nlohmann::json& block,
                                      std::vector<std::string>& assumptions);

/// Everything one row turns into.
struct RowSetup {
  ModelShape shape;
  ir::Graph graph;
  std::string system;
  ir::ClusterSpec cluster;
  int64_t num_gpus = 0;
  ir::Plan plan;
  cost::TrainingSettings settings;
  double peak_flops_per_s = 0;  ///< the hardware block's dense peak at the row's precision (MFU denominator)
  std::vector<std::string> assumptions;
  /// The software that ran the row (its "framework", else the file's; docs/cost-model.md §9).
  cost::FrameworkProfile framework = cost::default_framework_profile();
  /// Knobs the row leaves unstated, as the values to try (empty: stated, plan holds it). plan holds
  /// the first; validate_row estimates every combination and keeps the fastest that fits in HBM
  /// (else the fastest), recording the choice in the result's assumptions.
  std::vector<int64_t> vpp_choices;          ///< "interleaved" without V: 2..8 dividing layers / pp; vpp not stated at all (pp > 1, the framework interleaves): 1 and those
  std::vector<int64_t> micro_batch_choices;  ///< micro_batch_size null: 1, 2, 4, 8, 16 dividing the per-replica batch
  std::vector<int64_t> zero_stage_choices;   ///< zero_stage unstated, dp > 1: the framework's stages 0-2
  std::vector<ir::Recompute> recompute_choices;  ///< recompute unstated: none, selective, full
  /// recompute unstated and the framework offers block recompute: full recompute of the fewest
  /// layers per (virtual) stage that fit is tried beside every fitting full-recompute plan.
  bool recompute_layers_choice = false;
  std::vector<bool> sequence_parallel_choices;   ///< sequence_parallel unstated, tp > 1: on, off
};

/// The setups of a row that leaves tp or pp unstated (validate_layout.cpp): the same row with each
/// (tp, pp) stated that its num_gpus, cp and any stated degree allow, the framework runs and the
/// planner's rules accept; `note` says what was tuned over how many layouts. nullopt when the row
/// states both (or lacks num_gpus: setup_row then says so); RowSkipped when no layout can run.
struct TunedLayouts {
  std::vector<RowSetup> setups;
  std::string note;
};
std::optional<TunedLayouts> tuned_layouts(const ValidationSource& source, const nlohmann::json& row);

/// The framework a row ran under: the row's "framework" object, else the file's, else none stated
/// (the default profile, listed in `assumptions`). An unknown name gets the default profile and a
/// warning on stderr (once per name).
cost::FrameworkProfile row_framework(const ValidationSource& source, const nlohmann::json& row,
                                     std::vector<std::string>& assumptions);

/// Builds the row's model, cluster, plan and settings; throws RowSkipped with the reason when a
/// field the estimate needs is missing or does not map.
RowSetup setup_row(const ValidationSource& source, const nlohmann::json& row);

/// How a source counts FLOPs (docs/validation.md, "FLOP conventions").
enum class FlopConvention {
  model,         ///< PaLM 6N + 12·l·a·d·s = Megatron-Core num_floating_point_operations = NeMo model TFLOPs
  megatron_eq3,  ///< Narayanan 2021 Eq. 3: 24·k·l·h²(1 + s/6h + V/16lh), k = 4 with full recompute, else 3
  mosaicml,      ///< llm-foundry: 6·N_published + 12·l·h·s (MFU), 8·N + 16·l·h·s (HFU with checkpointing)
  torchtitan,    ///< torchtitan: 6·(N - embedding) + 12·l·a·d·s
};
std::string to_string(FlopConvention convention);

/// The convention of a FLOP-rate metric, from tflops_kind, the source citation and its notes.
FlopConvention flop_convention(const std::string& tflops_kind, const std::string& citation, const std::string& notes);

/// FLOPs per trained token. `hardware` counts recomputation (HFU): model convention adds the
/// attention term again for selective (Korthikanti 2022: 72Blsh²(1 + s/3h + V/12lh)) and 4/3 of the
/// layers for full; mosaicml 8N + 16lhs with full recompute. Megatron Eq. 3 always applies its own
/// recompute factor.
double flops_per_token(FlopConvention convention, const ModelShape& shape, int64_t seq_len,
                       ir::Recompute recompute, bool hardware);

enum class MetricKind { throughput, memory, oom };
std::string to_string(MetricKind kind);
/// The kind whose to_string is `text`; nullopt when none is.
std::optional<MetricKind> metric_kind_from_string(std::string_view text);

/// One comparison (or one skipped row).
struct ValidationResult {
  std::string id;
  std::string source;  ///< ValidationSource::name
  std::string metric;  ///< the measured key compared ("iteration_time_s", "mfu", "peak_memory_GB", "oom")
  MetricKind kind = MetricKind::throughput;
  std::optional<double> predicted, measured, error;  ///< error = (predicted - measured) / measured
  std::optional<std::string> skipped;                 ///< the reason, when the row was not compared
  std::string conversion;                             ///< how the prediction was put in the metric's units
  std::vector<std::string> assumptions;
  std::optional<cost::Estimate> estimate;  ///< the breakdown behind `predicted`
  int64_t hbm_bytes = 0;
};

/// A measured key the source gives as approximate ends in this; it is compared as the key without it.
inline constexpr std::string_view kApproxSuffix = "_approx";
/// `metric` without its kApproxSuffix: the key whose units it has.
std::string_view metric_key(std::string_view metric);
/// Returns true for a throughput metric that is a time, lower when faster: the iteration time and
/// the days to train 300B tokens.
bool time_metric(std::string_view metric);

/// The metrics of `measured` that can be compared, in order: the first time/throughput metric by
/// priority (a key's `_approx` variant only when no exact key is there), then memory metrics, then
/// "oom" (only when true).
std::vector<std::pair<std::string, MetricKind>> comparable_metrics(const nlohmann::json& measured);

/// The cost constants to estimate with, per GPU and framework profile: cost::cost_params_for unless a
/// calibration run supplies others (bench/calibrate.cpp).
using CostParamsFor = std::function<cost::CostParams(const ir::GpuSpec&, const cost::FrameworkProfile&)>;

/// Compares one row: one result per comparable metric, or one skipped result with the reason.
std::vector<ValidationResult> validate_row(const ValidationSource& source, const nlohmann::json& row,
                                           const CostParamsFor& params_for = cost::cost_params_for);
/// A row read once: what it measured, its setup (or the result saying why it is skipped), ready to be
/// estimated again with other cost constants without re-reading its model, hardware and plan
/// (planner/calibrate.hpp refits the constants this way).
struct PreparedRow {
  ValidationResult base;  ///< id, source; the setup's assumptions and HBM size once set up
  nlohmann::json measured = nlohmann::json::object();
  std::vector<std::pair<std::string, MetricKind>> metrics;  ///< comparable_metrics(measured)
  std::optional<std::vector<ValidationResult>> skipped;     ///< set: the row is not compared, these are its results
  RowSetup setup;
  /// tp or pp unstated (tuned_layouts): every layout's setup (`setup` is the first) and what was
  /// tuned; validate_prepared keeps the fastest that fits. Empty: the row states its layout.
  std::vector<RowSetup> layouts;
  std::string layout_note;
  std::string citation, notes;  ///< the source's, for its FLOP convention
};
PreparedRow prepare_row(const ValidationSource& source, const nlohmann::json& row);
/// validate_row's results for a prepared row estimated with `params`.
std::vector<ValidationResult> validate_prepared(const PreparedRow& row, const cost::CostParams& params);

std::vector<ValidationResult> validate_source(const ValidationSource& source,
                                              const CostParamsFor& params_for = cost::cost_params_for);

/// Linear interpolation between closest ranks (numpy's default), p in [0, 1]; 0 for an empty list.
double percentile(std::vector<double> values, double p);

struct ErrorStats {
  int64_t count = 0;
  double median_abs_pct = 0;  ///< median of |error| x 100
  double p90_abs_pct = 0;
};
/// Stats of |error| in percent over the results of `kind` that were compared.
ErrorStats error_stats(const std::vector<ValidationResult>& results, MetricKind kind);

struct ValidationSummary {
  std::string source, citation;
  int64_t rows = 0;           ///< distinct row ids
  int64_t rows_compared = 0;  ///< ids with at least one comparison
  int64_t rows_skipped = 0;   ///< ids skipped (with a reason)
  ErrorStats throughput, memory;
  int64_t oom_rows = 0, oom_predicted = 0;
  std::vector<ValidationResult> worst;  ///< up to five compared results, largest |error| first
  std::vector<std::pair<std::string, int64_t>> skip_reasons;  ///< most frequent first
};
ValidationSummary summarize(const std::string& source, const std::string& citation,
                            const std::vector<ValidationResult>& results);

inline constexpr const char* kValidationFormat = "mgt.validation/1";

/// The whole `mgt-plan validate --json` document: every result, a summary per source and overall.
struct ValidationReport {
  std::vector<ValidationResult> rows;
  std::vector<ValidationSummary> sources;
  ValidationSummary overall;
};

/// `mgt.validation/1` (docs/formats.md). The readers take what the writers write and throw
/// ir::InputError naming `source` and the field otherwise. Not carried: ValidationResult::hbm_bytes;
/// a summary's `worst` entries carry id, source, metric and error only.
nlohmann::json to_json(const ValidationResult& result, bool with_breakdown = true);
nlohmann::json to_json(const ValidationSummary& summary);
nlohmann::json to_json(const ValidationReport& report);
/// The estimate of a compared row, keyed as an mgt.plans/1 entry (cost::to_json(Estimate)).
nlohmann::json breakdown_to_json(const cost::Estimate& estimate);
ValidationResult validation_result_from_json(const nlohmann::json& doc, const std::string& source);
ValidationSummary validation_summary_from_json(const nlohmann::json& doc, const std::string& source);
ValidationReport validation_report_from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace mgt::plan
