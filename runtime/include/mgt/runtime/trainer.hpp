// The training loop over a schedule executor (docs/runtime_run.md), shaped like torchtitan's Trainer:
// the caller builds (graph, schedule, state, data, executor), then `trainer.train()` runs the steps,
// writes the per-step log, saves the checkpoint with its run record (format mgt.run/1) and reports the
// measurement beside the prediction. The prediction is plain data the caller computes with the
// simulator: the runtime never links the cost model or the planner (DESIGN.md).
//
//   rt::Trainer trainer(executor, state, data, {.steps = 20, .seq_len = 512, .global_batch = 8,
//                                               .log_path = "log.jsonl", .prediction = predicted}, comm);
//   const rt::TrainReport report = trainer.train();   // report.last_timeline: the last step, measured
#pragma once

#include "mgt/ir/plan.hpp"
#include "mgt/runtime/communicator.hpp"
#include "mgt/runtime/cpu/kernels.hpp"
#include "mgt/runtime/data.hpp"
#include "mgt/runtime/executor.hpp"
#include "mgt/runtime/model_state.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgt::rt {

inline constexpr const char* kRunFormat = "mgt.run/1";
inline constexpr const char* kRunFile = "run.json";  ///< the run record beside a checkpoint

/// The run record a checkpoint folder carries (`<dir>/run.json`, format mgt.run/1): what continues the
/// run that wrote it. step k of a run reads sequences k*G .. k*G+G-1, so seq_len and global_batch
/// fix the data position.
struct RunRecord {
  std::string model{};       ///< the graph's name
  std::string model_path{};  ///< the config the run was started with
  int64_t parameters = 0;  ///< the model's parameter count, checked on resume
  std::optional<int64_t> step{};  ///< optimizer steps taken; must equal optimizer.safetensors' step
  int64_t seq_len = 0;
  int64_t global_batch = 0;  ///< sequences per optimizer step
  std::string data{};          ///< token file; empty = synthetic tokens from `seed`
  std::string data_dtype = "uint16";
  uint64_t seed = 0;
  int64_t data_size_bytes = -1;  ///< the token file's size when saved; -1 = not recorded (synthetic, older records)
  std::string data_checksum{};    ///< its FileFingerprint::checksum; empty = not recorded
  cpu::AdamWConfig adamw{};
  double grad_clip = 0.0;
  /// Packed documents per sequence the run trained with (--document-tokens); 0 = unpacked (also
  /// records written before the field existed).
  int64_t document_tokens = 0;
  /// What the parameter shapes do not show, by config field ("num_attention_heads", "rms_norm_eps",
  /// "rope_theta", ...): model_architecture of the model it was trained with; empty in older records.
  std::map<std::string, double> architecture{};
  ir::Plan plan{};  ///< the plan it was trained with (for the reader: a resume takes --plan)
};

/// Reads `<dir>/run.json`. Throws ir::InputError naming the folder (missing, not a folder), the file
/// (missing: the folder was not written by --save) or the field (missing, wrong type).
RunRecord read_run_record(const std::string& dir);
/// Reads an mgt.run/1 document (what to_json writes); `source` names it in errors. Throws ir::InputError
/// naming the field that is missing, of the wrong type or out of range (check_optimizer_settings),
/// a tokens_seen other than step x global_batch x seq_len, or another "format". Records of older
/// versions may lack step, data_checksum, architecture, model, model_path and plan.
RunRecord run_record_from_json(const nlohmann::json& doc, const std::string& source);
/// The record as written, with tokens_seen = step * global_batch * seq_len beside it.
nlohmann::json to_json(const RunRecord& record);

/// The folder a save may write: a new one, or one that holds a checkpoint (replaced whole). Throws
/// ir::InputError naming `dir` otherwise; callers check before training so a bad folder fails early.
std::string checked_save_folder(const std::string& dir);
/// save_checkpoint into a staging folder, the run record beside it, then the staging folder renamed
/// over `dir` in one atomic swap: a reader sees the old checkpoint or the new one, never a mix. First
/// removes the staging folders (`<dir>.partial-<pid>`, and their `.tmp-<pid>`) that failed or killed
/// saves left: the caller holds CheckpointLock(dir), so no live writer owns them. Refuses (ir::InputError
/// naming the parameter and element) parameters or moments that are NaN or infinite.
void write_checkpoint(const ModelState& state, const std::string& dir, const RunRecord& record);
/// Checks the record against the model about to be trained (parameter count; hint: the model it was
/// saved from), loads the checkpoint, and checks the record's step against the optimizer file's.
void resume_checkpoint(ModelState& state, const std::string& dir, const RunRecord& record,
                       const std::string& model_path);

/// The model settings a checkpoint is only valid for, beyond its parameter shapes, by Hugging Face
/// config field: layers, hidden size, attention and key-value heads, vocab (from the graph), the
/// norm eps and the rotary settings (from the numerics). Heads can change with the shapes unchanged
/// (4 heads of 16 or 8 of 8), and eps and rope_theta change no shape at all.
std::map<std::string, double> model_architecture(const ir::Graph& graph, const ModelNumerics& numerics);

/// Throws ir::InputError naming `<dir>/run.json`, the field, both values and the config the checkpoint
/// was saved from, when a field of the record's architecture differs from `now` (or `now` lacks it).
/// An older record without architecture passes.
void check_same_architecture(const RunRecord& saved, const std::map<std::string, double>& now,
                             const std::string& dir, const std::string& model_path);

/// Throws ir::InputError naming `data_path`, both sizes and checksums and `<dir>/run.json`, when the
/// record holds a fingerprint of its token file and `now` (the same path's file today) differs: the
/// file was replaced since the checkpoint was saved, so step k would no longer read what it read.
void check_same_data(const RunRecord& saved, const FileFingerprint& now, const std::string& data_path,
                     const std::string& dir);

/// Range checks of the optimizer settings; each error names the setting and its valid range:
/// lr in [0, 10], beta1 and beta2 in [0, 1), eps in (0, 1], weight_decay in [0, 1], grad_clip
/// finite and >= 0 (0 = off). NaN and infinities fail every range. `source` and the field names:
/// "command line" with the flags (--lr, ...), or a run record's path with its fields (adamw.lr, ...).
void check_optimizer_settings(const cpu::AdamWConfig& adamw, double grad_clip, const std::string& source,
                              bool command_line);

/// An exclusive lock on checkpoint folder `dir` for as long as the object lives: flock(2) on
/// `<dir>.lock` beside it (the folder itself is swapped on save), holding "pid P host H". A second
/// run saving to the same folder is refused instead of both writing and one checkpoint being lost.
/// The lock dies with the process (kill -9 included); the file is removed on release.
class CheckpointLock {
 public:
  /// Takes the lock or throws ir::InputError naming `dir`, the lock file and its holder (pid, host).
  explicit CheckpointLock(const std::string& dir);
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;  ///< the lock file
  int fd_ = -1;
};

/// The simulator's prediction for the lead rank's program, computed by the caller.
struct Prediction {
  std::string cluster{};       ///< the cluster it was priced on
  std::string program{};       ///< the program's name
  double step_time_s = 0.0;
  double overhead_s = 0.0;   ///< of step_time_s: fixed per-step and per-micro-batch overheads
  int64_t peak_bytes = 0;    ///< the schedule's Alloc / Free peak
  int64_t peak_reserved_bytes = 0;  ///< with the runtime's allocator overhead
};

struct TrainerOptions {
  int64_t steps = 0;         ///< optimizer steps to run, continuing from state.step
  int64_t seq_len = 0;       ///< S
  int64_t global_batch = 0;  ///< G sequences per step
  std::string log_path{};      ///< one JSON line per step, then one {"summary": ...} line; empty = none
  std::string save_dir{};      ///< checkpoint folder written after the last step; empty = none
  RunRecord record{};          ///< what the save writes beside it (parameters and step are filled in)
  std::optional<Prediction> prediction{};  ///< the summary's predicted side; none = no summary
};

/// What the steps measured (every rank; the summary printed and logged by the lead rank).
struct TrainReport {
  int64_t first_step = 0, last_step = 0;
  std::vector<double> step_seconds{};
  double measured_step_s = 0.0;    ///< mean over the steps after the first (warm-up), or the one step
  int64_t measured_from_step = 0;  ///< first step of that mean
  int64_t peak_bytes = 0;          ///< highest measured peak of any step
  int64_t planned_peak_bytes = 0;  ///< highest schedule (planned) peak of any step
  std::vector<InstructionTiming> last_timeline{};  ///< the last step (ExecutorOptions::record_timeline)
};

/// A step whose loss or gradient norm is not finite: training stops there (what() names the step).
class NonFiniteLoss : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Trainer {
 public:
  /// Keeps references to `executor`, `state`, `data` and `comm` (may be null for one rank): they must
  /// outlive the trainer. The lead rank (comm rank 0, or the only one) prints and writes files.
  Trainer(Executor& executor, ModelState& state, const TokenSource& data, TrainerOptions options,
          Communicator* comm = nullptr);

  /// Runs options.steps steps from state.step: step k trains on global_batch(data, k, G, S). The lead
  /// prints one line per step (loss, grad norm, step time, tokens/s, measured and planned peak) and
  /// logs it; then the save (every rank synchronises its state first: collective), then the
  /// predicted-vs-measured summary. Before the first step, checks that the token file holds the
  /// tokens the steps read and that every one is below the model's vocab (check_token_range).
  /// Errors: std::runtime_error from the executor (naming the instruction), and NonFiniteLoss when a
  /// step's loss or gradient norm is NaN or infinite (nothing is saved); ir::InputError for data that
  /// does not fit the model, or a log (any failed write: full disk) or save folder that cannot be written.
  TrainReport train();

 private:
  void log_step(int64_t k, const StepStats& s);
  void write_log_line(const std::string& line);
  void check_data(const TrainReport& report) const;
  void save();
  void report_summary(const TrainReport& report);

  Executor& executor_;
  ModelState& state_;
  const TokenSource& data_;
  TrainerOptions options_;
  Communicator* comm_;
  bool lead_ = true;
  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, CloseFile> log_;  ///< --log, lead rank only
};

}  // namespace mgt::rt
