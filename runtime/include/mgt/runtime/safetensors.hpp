// Safetensors I/O: the Hugging Face weight format (8-byte little-endian header length, a JSON header
// of {name: {dtype, shape, data_offsets}} plus optional "__metadata__", then raw little-endian data).
// F32, BF16 and F16 tensors read as fp32; sharded checkpoints through model.safetensors.index.json.
// Design and error behaviour: docs/runtime_state.md, "Safetensors".
#pragma once

#include "mgt/ir/graph.hpp"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mgt::rt {

/// One tensor entry of a safetensors header. `dtype` is the format's name ("F32", "BF16", ...);
/// [data_begin, data_end) are byte offsets into the data section (after the header).
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t data_begin = 0;
  int64_t data_end = 0;
  int64_t num_elements() const;
};

/// An opened, validated safetensors file. `open` reads the header only; tensor data is read on demand.
/// Every problem with the file is an ir::InputError naming the file and the tensor or field.
class SafetensorsFile {
 public:
  /// Reads and validates the header: file at least 8 bytes, header length within the file (and at
  /// most 100 MB), JSON object, each entry with a known dtype, a shape of non-negative ints and
  /// data_offsets [begin, end] inside the data section, byte size equal to elements x dtype size,
  /// no two tensors overlapping; `__metadata__` must map strings to strings.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  /// Tensors sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The entry for `name`; nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;

  /// Reads tensor `name` converted to fp32 into `out`, whose size must equal its element count.
  /// Throws InputError when absent, when the dtype is not F32/BF16/F16, or when the read fails.
  void read_f32(const std::string& name, std::span<float> out) const;
  std::vector<float> read_f32(const std::string& name) const;

 private:
  std::string path_;
  int64_t data_start_ = 0;  ///< byte offset of the data section in the file (8 + header length)
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A checkpoint made of one or more safetensors files. `open` accepts a .safetensors file, a
/// model.safetensors.index.json, or a directory holding one of model.safetensors.index.json or
/// model.safetensors. An index must name, for every tensor in its weight_map, a file that exists and
/// holds that tensor; otherwise InputError names the index and the tensor.
class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open(const std::string& path);

  /// Where the checkpoint was opened from (the index or the single file), for messages.
  const std::string& source() const { return source_; }
  /// Every tensor name, sorted.
  std::vector<std::string> names() const;
  /// The entry for `name` and its file; nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;
  const SafetensorsFile* file_of(const std::string& name) const;
  void read_f32(const std::string& name, std::span<float> out) const;
  /// The `__metadata__` of the first file (the index's "metadata" is not read).
  const std::map<std::string, std::string>& metadata() const { return files_.front().metadata(); }

 private:
  std::string source_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> file_by_tensor_;
};

/// A tensor to write: fp32 data in row-major order of `shape`.
struct SafetensorsWriteTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> data;
};

/// Writes a safetensors file atomically (a temporary file in the same folder, then rename). `dtype`
/// is f32 (exact) or bf16 (round to nearest even); tensors are laid out in the order given. Throws
/// InputError for a shape/data size mismatch, a duplicate or reserved name, another dtype, or an I/O
/// failure.
void write_safetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors,
                       ir::DType dtype = ir::DType::f32, const std::map<std::string, std::string>& metadata = {});

/// Writes a model.safetensors.index.json: {"metadata": {"total_size": bytes}, "weight_map": {...}}.
void write_safetensors_index(const std::string& path, const std::map<std::string, std::string>& weight_map,
                             int64_t total_size_bytes);

/// Writes `bytes` to `path` so that a crash at any moment leaves the old file or the new one whole:
/// a temporary file in the same folder, written, fsynced, renamed over `path`, then the folder
/// fsynced. Throws InputError naming `path` on any failure (the temporary file is removed).
void write_file_durably(const std::string& path, std::string_view bytes);

/// Puts the finished folder `staging` in the place of `target` (absent, or a folder to replace):
/// staging is fsynced, then the two trade names in one atomic rename (Linux RENAME_EXCHANGE), the
/// parent is fsynced and the old folder removed. So `target` names the old checkpoint or the new
/// one at every instant. Files inside `staging` must already be durable (write_file_durably).
void replace_folder_durably(const std::string& staging, const std::string& target);

/// Fault injection for crash tests: when the environment holds MGT_FAULT_KILL_AT=<name>:<n>, the
/// n-th call of fault_point(<name>) in this process kills it with SIGKILL (nothing is flushed or
/// cleaned up, as when a node dies). Points: "write" (after each write(2) of write_file_durably),
/// "checkpoint-file" (after each file of save_checkpoint), "replace-folder" (before the swap),
/// "collective" (at the start of each MpiCommunicator collective). MGT_FAULT_STOP_AT=<name>:<n> stops
/// the process with SIGSTOP instead (a frozen rank: alive, holding its sockets, never answering).
void fault_point(std::string_view name);

/// Scalar conversions used by the reader and writer (exposed for tests).
float bf16_to_f32(uint16_t bits);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);  ///< round to nearest even; NaN stays NaN

}  // namespace mgt::rt
