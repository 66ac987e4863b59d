// The training loop (trainer.hpp; docs/runtime_run.md): steps, log, checkpoint with its run record,
// and the measured side of the predicted-vs-measured summary.
#include "mgt/runtime/trainer.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/runtime/safetensors.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace mgt::rt {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

cpu::AdamWConfig read_adamw(const json& rec, const std::string& path) {
  if (!rec.contains("adamw") || !rec.at("adamw").is_object())
    throw ir::InputError(path, "adamw", "missing or not an object", "--save writes it");
  const json& adamw = rec.at("adamw");
  cpu::AdamWConfig c;
  for (const auto& [field, value] : {std::pair{"lr", &c.lr}, std::pair{"beta1", &c.beta1}, std::pair{"beta2", &c.beta2},
                                     std::pair{"eps", &c.eps}, std::pair{"weight_decay", &c.weight_decay}}) {
    if (!adamw.contains(field) || !adamw.at(field).is_number())
      throw ir::InputError(path, std::string("adamw.") + field, "missing or not a number", "--save writes it");
    *value = adamw.at(field).get<double>();
  }
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The run record (mgt.run/1)

RunRecord read_run_record(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ir::InputError(dir, "--resume", fs::exists(dir, ec) ? "not a folder" : "no such checkpoint folder",
                         "pass a folder written by mgt-plan run --save DIR");
  }
  const std::string path = (fs::path(dir) / kRunFile).string();
  if (!fs::exists(path, ec)) {
    throw ir::InputError(path, "", "missing: the folder was not written by mgt-plan run --save",
                         "resume from a folder --save wrote; to start from its weights alone pass it to --weights");
  }
  const json doc = ir::read_json_file(path);
  ir::require_format(doc, kRunFormat, path);
  RunRecord r;
  r.seq_len = ir::require_positive_int(doc, "seq_len", path);
  r.global_batch = ir::require_positive_int(doc, "global_batch", path);
  r.data = ir::require_string(doc, "data", path);
  r.data_dtype = ir::require_string(doc, "data_dtype", path);
  if (!doc.contains("seed") || !doc.at("seed").is_number_unsigned())
    throw ir::InputError(path, "seed", "missing or not a non-negative integer", "--save writes it");
  r.seed = doc.at("seed").get<uint64_t>();
  r.adamw = read_adamw(doc, path);
  r.grad_clip = ir::optional_number(doc, "grad_clip", 0.0, path);
  r.parameters = ir::require_positive_int(doc, "parameters", path);
  r.model = doc.value("model", std::string("?"));
  r.model_path = doc.value("model_path", std::string("?"));
  if (doc.contains("step")) r.step = ir::optional_nonnegative_int(doc, "step", 0, path);
  return r;
}

json to_json(const RunRecord& r) {
  const int64_t step = r.step.value_or(0);
  return {{"format", kRunFormat},
          {"model", r.model},
          {"model_path", r.model_path},
          {"parameters", r.parameters},
          {"step", step},
          {"seq_len", r.seq_len},
          {"global_batch", r.global_batch},
          {"tokens_seen", step * r.global_batch * r.seq_len},
          {"data", r.data},
          {"data_dtype", r.data_dtype},
          {"seed", r.seed},
          {"adamw",
           {{"lr", r.adamw.lr}, {"beta1", r.adamw.beta1}, {"beta2", r.adamw.beta2}, {"eps", r.adamw.eps},
            {"weight_decay", r.adamw.weight_decay}}},
          {"grad_clip", r.grad_clip},
          {"plan", ir::to_json(r.plan)}};
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

std::string checked_save_folder(const std::string& dir) {
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  if (target.empty() || target.filename() == "." || target.filename() == "..")
    throw ir::InputError(dir, "--save", "not a folder name", "pass a new folder, e.g. --save ckpt");
  std::error_code ec;
  if (fs::exists(target, ec)) {
    if (!fs::is_directory(target, ec))
      throw ir::InputError(dir, "--save", "exists and is not a folder", "pass a new folder name");
    const bool checkpoint = fs::exists(target / kRunFile, ec) || fs::exists(target / "optimizer.safetensors", ec);
    if (!checkpoint && !fs::is_empty(target, ec))
      throw ir::InputError(dir, "--save", "exists and is not a checkpoint folder (--save replaces the folder)",
                           "pass a new folder name, or remove this one first");
  }
  return target.string();
}

void write_checkpoint(const ModelState& state, const std::string& dir, const RunRecord& record) {
  const fs::path target = checked_save_folder(dir);
  std::error_code ec;
  const fs::path staging = target.string() + ".partial-" + std::to_string(::getpid());
  fs::remove_all(staging, ec);
  save_checkpoint(state, staging.string());
  write_file_durably((staging / kRunFile).string(), to_json(record).dump(2) + "\n");
  // Trades names with the previous checkpoint in one atomic rename: a crash at any moment leaves
  // `dir` holding the old checkpoint or the new one, whole.
  replace_folder_durably(staging.string(), target.string());
}

void resume_checkpoint(ModelState& state, const std::string& dir, const RunRecord& record,
                       const std::string& model_path) {
  const std::string path = (fs::path(dir) / kRunFile).string();
  const int64_t have = state.table().total_elements;
  if (record.parameters != have) {
    throw ir::InputError(path, "parameters",
                         "the checkpoint holds " + std::to_string(record.parameters) + " parameters of model '" +
                             record.model + "' (" + record.model_path + "), but " + model_path + " has " +
                             std::to_string(have),
                         "resume with the model the checkpoint was saved from: mgt-plan run " + record.model_path +
                             " --resume " + dir + " ...");
  }
  load_checkpoint(state, dir);
  if (record.step && *record.step != state.step) {
    throw ir::InputError(path, "step",
                         std::to_string(*record.step) + " differs from optimizer.safetensors' step " +
                             std::to_string(state.step),
                         "the folder mixes two checkpoints: save again");
  }
}

// ---------------------------------------------------------------------------------------------
// The loop

Trainer::Trainer(Executor& executor, ModelState& state, const TokenSource& data, TrainerOptions options,
                 Communicator* comm)
    : executor_(executor), state_(state), data_(data), options_(std::move(options)), comm_(comm),
      lead_(!comm || comm->rank() == 0) {}

TrainReport Trainer::train() {
  if (lead_ && !options_.log_path.empty()) {
    log_ = std::make_unique<std::ofstream>(options_.log_path, std::ios::trunc);
    if (!*log_) throw ir::InputError(options_.log_path, "--log", "cannot write the log file", "check the directory exists");
  }
  TrainReport report;
  report.first_step = state_.step;  // data step k = optimizer steps taken before it
  report.last_step = report.first_step + options_.steps - 1;
  for (int64_t k = report.first_step; k <= report.last_step; ++k) {
    StepStats s = executor_.step(global_batch(data_, k, options_.global_batch, options_.seq_len));
    report.step_seconds.push_back(s.seconds);
    report.peak_bytes = std::max(report.peak_bytes, s.peak_bytes);
    report.planned_peak_bytes = std::max(report.planned_peak_bytes, s.planned_peak_bytes);
    if (lead_) log_step(k, s);
    report.last_timeline = std::move(s.timeline);
  }
  if (!options_.save_dir.empty()) save();
  // Measured: the mean step time over the steps after the first (warm-up), or the one step.
  const size_t skip = report.step_seconds.size() > 1 ? 1 : 0;
  for (size_t i = skip; i < report.step_seconds.size(); ++i) report.measured_step_s += report.step_seconds[i];
  if (report.step_seconds.size() > skip) report.measured_step_s /= static_cast<double>(report.step_seconds.size() - skip);
  report.measured_from_step = report.first_step + static_cast<int64_t>(skip);
  if (lead_ && options_.prediction) report_summary(report);
  return report;
}

void Trainer::log_step(int64_t k, const StepStats& s) {
  const double tps = s.seconds > 0 ? static_cast<double>(s.tokens) / s.seconds : 0.0;
  std::printf("step %4lld  loss %.6f  grad_norm %.4f  step_time %.3f s  %.0f tokens/s  peak %.2f MiB (planned %.2f MiB)\n",
              static_cast<long long>(k), s.loss, s.grad_norm, s.seconds, tps, mib(s.peak_bytes),
              mib(s.planned_peak_bytes));
  std::fflush(stdout);
  if (!log_) return;
  // nlohmann writes doubles in the shortest form that reads back to the same value.
  const json line = {{"step", k},           {"loss", s.loss},          {"grad_norm", s.grad_norm},
                     {"step_time_s", s.seconds}, {"tokens_per_s", tps}, {"tokens", s.tokens},
                     {"peak_bytes", s.peak_bytes}, {"planned_peak_bytes", s.planned_peak_bytes}};
  *log_ << line.dump() << "\n";
  log_->flush();
}

void Trainer::save() {
  executor_.synchronize_state();  // collective: the full parameters and moments on every rank
  if (!lead_) return;
  RunRecord record = options_.record;
  record.parameters = state_.table().total_elements;
  record.step = state_.step;
  record.seq_len = options_.seq_len;
  record.global_batch = options_.global_batch;
  write_checkpoint(state_, options_.save_dir, record);
  std::printf("saved %s: step %lld (resume with --resume %s)\n", options_.save_dir.c_str(),
              static_cast<long long>(state_.step), options_.save_dir.c_str());
}

void Trainer::report_summary(const TrainReport& r) {
  const Prediction& p = *options_.prediction;
  const double time_ratio = p.step_time_s > 0 ? r.measured_step_s / p.step_time_s : 0.0;
  const double mem_ratio = p.peak_bytes > 0 ? double(r.peak_bytes) / double(p.peak_bytes) : 0.0;
  std::printf("predicted vs measured (%s, rank 0 program %s):\n", p.cluster.c_str(), p.program.c_str());
  std::printf("  step time    predicted %.3f ms (of which %.3f ms fixed per-step and per-micro-batch overheads)  "
              "measured %.3f ms (mean of steps %lld..%lld)  measured/predicted %.3f\n",
              p.step_time_s * 1e3, p.overhead_s * 1e3, r.measured_step_s * 1e3,
              static_cast<long long>(r.measured_from_step), static_cast<long long>(r.last_step), time_ratio);
  std::printf("  peak memory  predicted %.2f MiB (schedule; %.2f MiB with runtime overhead)  measured %.2f MiB  "
              "measured/predicted %.3f\n",
              mib(p.peak_bytes), mib(p.peak_reserved_bytes), mib(r.peak_bytes), mem_ratio);
  if (!log_) return;
  const json summary = {{"summary",
                         {{"cluster", p.cluster},
                          {"program", p.program},
                          {"first_step", r.first_step},
                          {"last_step", r.last_step},
                          {"step_time_s",
                           {{"predicted", p.step_time_s},
                            {"predicted_overheads", p.overhead_s},
                            {"measured", r.measured_step_s},
                            {"measured_from_step", r.measured_from_step},
                            {"measured_over_predicted", time_ratio}}},
                          {"peak_bytes",
                           {{"predicted", p.peak_bytes},
                            {"predicted_reserved", p.peak_reserved_bytes},
                            {"measured", r.peak_bytes},
                            {"planned", r.planned_peak_bytes},
                            {"measured_over_predicted", mem_ratio}}}}}};
  *log_ << summary.dump() << "\n";
  log_->flush();
}

}  // namespace mgt::rt
