// The training loop (trainer.hpp; docs/runtime_run.md): steps, log, checkpoint with its run record,
// and the measured side of the predicted-vs-measured summary.
#include "mgt/runtime/trainer.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/runtime/safetensors.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
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

/// The shortest text that reads back as `v` ("1e+308", "nan", "-inf").
std::string number_text(double v) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general).ptr;
  return std::string(buf, end);
}

std::string errno_text(int err) { return std::string(std::strerror(err)); }

/// The first element of `values` that is NaN or infinite; -1 when all are finite.
int64_t first_non_finite(std::span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  return -1;
}

/// Refuses to write a checkpoint that holds NaN or infinite parameters or moments (a diverged run):
/// it would replace a good one and every resume would train on garbage.
void check_state_finite(const ModelState& state, const std::string& dir) {
  for (const ParamEntry& e : state.table().entries) {
    for (const auto& [what, buffer] : {std::pair{"parameter", state.params()}, std::pair{"exp_avg", state.adam_m()},
                                       std::pair{"exp_avg_sq", state.adam_v()}}) {
      const int64_t i = first_non_finite(buffer.subspan(static_cast<size_t>(e.offset), static_cast<size_t>(e.num_elements)));
      if (i < 0) continue;
      throw ir::InputError(dir, "--save",
                           std::string(what) + " " + e.name + " element " + std::to_string(i) + " is " +
                               number_text(buffer[static_cast<size_t>(e.offset + i)]) + ": not saving a diverged state",
                           "the previous checkpoint in the folder is kept; lower --lr or set --grad-clip");
    }
  }
}

fs::path normal_folder(const std::string& dir) {
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  return target;
}

/// `<name>.partial-<digits>` or `<name>.partial-<digits>.tmp-<digits>`: what write_checkpoint and
/// save_checkpoint stage a save of `<name>` in.
bool is_partial_of(const std::string& entry, const std::string& name) {
  const std::string prefix = name + ".partial-";
  if (!entry.starts_with(prefix)) return false;
  const auto digits = [](std::string_view s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
  };
  const std::string_view rest = std::string_view(entry).substr(prefix.size());
  const size_t tmp = rest.find(".tmp-");
  return tmp == std::string_view::npos ? digits(rest) : digits(rest.substr(0, tmp)) && digits(rest.substr(tmp + 5));
}

/// Removes the staging folders of `target` that saves which failed or were killed left behind. The
/// caller holds CheckpointLock(target), so none of them belongs to a live writer.
void remove_stale_partials(const fs::path& target) {
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  std::vector<fs::path> stale;
  for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (is_partial_of(it->path().filename().string(), target.filename().string())) stale.push_back(it->path());
  for (const fs::path& p : stale) {
    fs::remove_all(p, ec);
    std::fprintf(stderr, "note: removed %s, left by a save that did not finish%s\n", p.c_str(),
                 ec ? (": " + ec.message()).c_str() : "");
  }
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
  return run_record_from_json(ir::read_json_file(path), path);
}

RunRecord run_record_from_json(const json& doc, const std::string& path) {
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
  r.document_tokens = ir::optional_nonnegative_int(doc, "document_tokens", 0, path);
  check_optimizer_settings(r.adamw, r.grad_clip, path, /*command_line=*/false);
  if (doc.contains("data_checksum")) {
    r.data_checksum = ir::require_string(doc, "data_checksum", path);
    r.data_size_bytes = ir::optional_nonnegative_int(doc, "data_size_bytes", 0, path);
  }
  if (doc.contains("architecture")) {
    const json& arch = doc.at("architecture");
    if (!arch.is_object()) throw ir::InputError(path, "architecture", "not an object", "--save writes it");
    for (const auto& [field, value] : arch.items()) {
      if (!value.is_number())
        throw ir::InputError(path, "architecture." + field, "not a number", "--save writes it");
      r.architecture[field] = value.get<double>();
    }
  }
  r.parameters = ir::require_positive_int(doc, "parameters", path);
  r.model = doc.value("model", std::string("?"));
  r.model_path = doc.value("model_path", std::string("?"));
  if (doc.contains("step")) r.step = ir::optional_nonnegative_int(doc, "step", 0, path);
  if (doc.contains("tokens_seen")) {  // derived; a record whose numbers disagree was edited by hand
    const int64_t tokens = ir::optional_nonnegative_int(doc, "tokens_seen", 0, path);
    const int64_t want = r.step.value_or(0) * r.global_batch * r.seq_len;
    if (tokens != want)
      throw ir::InputError(path, "tokens_seen", std::to_string(tokens) + " is not step x global_batch x seq_len = " +
                                                    std::to_string(want), "--save writes it");
  }
  if (doc.contains("plan")) r.plan = ir::plan_from_json(doc.at("plan"), path + ": plan");
  return r;
}

json to_json(const RunRecord& r) {
  const int64_t step = r.step.value_or(0);
  json doc = {{"format", kRunFormat},
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
  if (r.document_tokens > 0) doc["document_tokens"] = r.document_tokens;
  if (!r.data_checksum.empty()) {
    doc["data_size_bytes"] = r.data_size_bytes;
    doc["data_checksum"] = r.data_checksum;
  }
  if (!r.architecture.empty()) doc["architecture"] = r.architecture;
  return doc;
}

// ---------------------------------------------------------------------------------------------
// What a resume must match beyond the parameter count

std::map<std::string, double> model_architecture(const ir::Graph& graph, const ModelNumerics& numerics) {
  const ir::ModelInfo& info = graph.info;
  return {{"num_hidden_layers", double(info.num_layers)},
          {"hidden_size", double(info.hidden_size)},
          {"num_attention_heads", double(info.num_attention_heads)},
          {"num_key_value_heads", double(info.num_kv_heads)},
          {"vocab_size", double(info.vocab_size)},
          {"rms_norm_eps", double(numerics.norm_eps)},
          {"rope_theta", numerics.rope.theta},
          {"rope_scaling.factor", numerics.rope.factor},
          {"rope_scaling.low_freq_factor", numerics.rope.low_freq_factor},
          {"rope_scaling.high_freq_factor", numerics.rope.high_freq_factor},
          {"rope_scaling.original_max_position_embeddings", double(numerics.rope.original_max_position_embeddings)}};
}

void check_same_architecture(const RunRecord& saved, const std::map<std::string, double>& now, const std::string& dir,
                             const std::string& model_path) {
  const std::string path = (fs::path(dir) / kRunFile).string();
  for (const auto& [field, value] : saved.architecture) {
    const auto it = now.find(field);
    if (it != now.end() && it->second == value) continue;
    throw ir::InputError(path, "architecture." + field,
                         "the checkpoint was trained with " + field + " " + number_text(value) + ", " + model_path +
                             (it == now.end() ? " does not set it" : " has " + number_text(it->second)),
                         "resume with the config the checkpoint was saved from (" + saved.model_path + ")");
  }
}

void check_same_data(const RunRecord& saved, const FileFingerprint& now, const std::string& data_path,
                     const std::string& dir) {
  if (saved.data_checksum.empty()) return;  // synthetic data, or a record from before fingerprints
  if (now.size_bytes == saved.data_size_bytes && now.checksum == saved.data_checksum) return;
  throw ir::InputError(data_path, "--data",
                       "the file changed since the checkpoint was saved: now " + std::to_string(now.size_bytes) +
                           " bytes, " + now.checksum + "; " + (fs::path(dir) / kRunFile).string() + " recorded " +
                           std::to_string(saved.data_size_bytes) + " bytes, " + saved.data_checksum,
                       "put the original token file back; to continue on other data on purpose, pass it under "
                       "another path with --data");
}

void check_optimizer_settings(const cpu::AdamWConfig& adamw, double grad_clip, const std::string& source,
                              bool command_line) {
  struct Range {
    const char* flag;
    const char* field;
    double value, lo, hi;
    bool lo_open, hi_open;
    const char* hint;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const Range ranges[] = {
      {"--lr", "adamw.lr", adamw.lr, 0, 10, false, false, "typical 1e-4 .. 3e-3"},
      {"--beta1", "adamw.beta1", adamw.beta1, 0, 1, false, true, "typical 0.9"},
      {"--beta2", "adamw.beta2", adamw.beta2, 0, 1, false, true, "typical 0.95 .. 0.999"},
      {"--eps", "adamw.eps", adamw.eps, 0, 1, true, false, "typical 1e-8"},
      {"--weight-decay", "adamw.weight_decay", adamw.weight_decay, 0, 1, false, false, "typical 0 .. 0.1"},
      {"--grad-clip", "grad_clip", grad_clip, 0, inf, false, true, "0 = off; typical 1.0"},
  };
  for (const Range& r : ranges) {
    const bool above_lo = r.lo_open ? r.value > r.lo : r.value >= r.lo;  // false for NaN
    const bool below_hi = r.hi_open ? r.value < r.hi : r.value <= r.hi;
    if (above_lo && below_hi) continue;
    const std::string range = std::string(r.lo_open ? "(" : "[") + number_text(r.lo) + ", " + number_text(r.hi) +
                              (r.hi_open ? ")" : "]");
    throw ir::InputError(source, command_line ? r.flag : r.field,
                         "must be in " + range + ", got " + number_text(r.value), r.hint);
  }
}

// ---------------------------------------------------------------------------------------------
// The save lock

namespace {

/// What the lock file says about its holder ("pid 1234 on host node7"), or a placeholder.
std::string lock_holder(int fd) {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "a process that has not written its pid yet" : text;
}

}  // namespace

CheckpointLock::CheckpointLock(const std::string& dir) : path_(normal_folder(dir).string() + ".lock") {
  // A previous holder removes the file on release; a lock taken on a file that was removed (or
  // replaced) meanwhile locks nothing, so take it again on the file the path names now.
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw ir::InputError(dir, "--save", "cannot create the lock file " + path_ + ": " + errno_text(errno),
                           "check that the parent folder exists and is writable");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string holder = lock_holder(fd);
      ::close(fd);
      if (err == EWOULDBLOCK)
        throw ir::InputError(dir, "--save",
                             "another run is saving to this folder: " + path_ + " is locked by " + holder,
                             "wait for that run to finish, or pass another --save folder");
      throw ir::InputError(dir, "--save", "cannot lock " + path_ + ": " + errno_text(err));
    }
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      char host[256] = "?";
      ::gethostname(host, sizeof host - 1);
      const std::string me = "pid " + std::to_string(::getpid()) + " on host " + host + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
        const int err = errno;
        ::close(fd);
        throw ir::InputError(dir, "--save", "cannot write the lock file " + path_ + ": " + errno_text(err),
                             "check free disk space");
      }
      fd_ = fd;
      return;
    }
    ::close(fd);
  }
  throw ir::InputError(dir, "--save", "cannot take the lock " + path_ + ": it keeps being replaced");
}

CheckpointLock::~CheckpointLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: a waiter that opened it sees it replaced and retries
  ::close(fd_);
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

std::string checked_save_folder(const std::string& dir) {
  const fs::path target = normal_folder(dir);
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
  check_state_finite(state, dir);
  remove_stale_partials(target);
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
    log_.reset(std::fopen(options_.log_path.c_str(), "w"));
    if (!log_)
      throw ir::InputError(options_.log_path, "--log", "cannot write the log file: " + errno_text(errno),
                           "check the directory exists");
  }
  TrainReport report;
  report.first_step = state_.step;  // data step k = optimizer steps taken before it
  report.last_step = report.first_step + options_.steps - 1;
  check_data(report);
  for (int64_t k = report.first_step; k <= report.last_step; ++k) {
    StepStats s = executor_.step(global_batch(data_, k, options_.global_batch, options_.seq_len));
    report.step_seconds.push_back(s.seconds);
    report.peak_bytes = std::max(report.peak_bytes, s.peak_bytes);
    report.planned_peak_bytes = std::max(report.planned_peak_bytes, s.planned_peak_bytes);
    if (lead_) log_step(k, s);
    // A NaN or infinity never recovers: stop here, before anything is saved over a good checkpoint.
    if (!std::isfinite(s.loss) || !std::isfinite(s.grad_norm)) {
      throw NonFiniteLoss("step " + std::to_string(k) + ": loss " + number_text(s.loss) + ", grad_norm " +
                          number_text(s.grad_norm) + " is not finite; training stopped and nothing was saved" +
                          (options_.save_dir.empty() ? "" : " (" + options_.save_dir + " is left as it was)") +
                          " (hint: lower --lr, set --grad-clip, or check --weights)");
    }
    report.last_timeline = std::move(s.timeline);
  }
  if (!options_.save_dir.empty()) save();
  // Measured: the mean step time over the steps after the first (warm-up), or the one step.
  const size_t skip = report.step_seconds.size() > 1 ? 1 : 0;
  for (size_t i = skip; i < report.step_seconds.size(); ++i) report.measured_step_s += report.step_seconds[i];
  if (report.step_seconds.size() > skip) report.measured_step_s /= static_cast<double>(report.step_seconds.size() - skip);
  report.measured_from_step = report.first_step + static_cast<int64_t>(skip);
  if (lead_ && options_.prediction) report_summary(report);
  if (log_ && std::fclose(log_.release()) != 0)
    throw ir::InputError(options_.log_path, "--log", "cannot write the log file: " + errno_text(errno),
                         "check free disk space");
  return report;
}

void Trainer::check_data(const TrainReport& report) const {
  if (options_.steps < 1) return;
  // Steps first..last read tokens [first*G*S, (last+1)*G*S + 1): check them all before step one, so
  // a bad token cannot stop the run after steps that are then lost.
  const std::string source = data_.describe();
  const int64_t per_step = ir::checked_mul(options_.global_batch, options_.seq_len, source, "global batch tokens");
  const int64_t begin = ir::checked_mul(report.first_step, per_step, source, "first token of the run");
  const int64_t count = ir::checked_mul(options_.steps, per_step, source, "tokens of the run");
  if (count > INT64_MAX - 1 - begin)
    throw ir::InputError(source, "--steps", "the run ends beyond token 2^63", "use fewer --steps or a smaller batch");
  const int64_t vocab = state_.graph().info.vocab_size;
  check_token_range(data_, begin, count + 1, vocab > 0 ? vocab : std::numeric_limits<int32_t>::max());
}

void Trainer::write_log_line(const std::string& line) {
  // Checked line by line: a full disk fails the run at that step, not a log silently cut short.
  if (std::fputs(line.c_str(), log_.get()) < 0 || std::fputc('\n', log_.get()) == EOF || std::fflush(log_.get()) != 0)
    throw ir::InputError(options_.log_path, "--log", "cannot write the log file: " + errno_text(errno),
                         "check free disk space");
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
  write_log_line(line.dump());
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
  write_log_line(summary.dump());
}

}  // namespace mgt::rt
