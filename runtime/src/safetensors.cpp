// Safetensors reader and writer; the format and the checks: docs/runtime_state.md, "Safetensors".
#include "mgt/runtime/safetensors.hpp"

#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <set>
#include <unistd.h>

namespace mgt::rt {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using ir::InputError;

constexpr int64_t kMaxHeaderBytes = 100'000'000;  // the limit the reference implementation uses

/// Element sizes of every dtype the format defines; anything else is rejected on open.
int64_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, int64_t> sizes{
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

int64_t checked_product(const std::vector<int64_t>& shape, const std::string& source, const std::string& field) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw InputError(source, field, "shape element count overflows a 64-bit integer", "the header is corrupt");
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t read_int(const json& v, const std::string& source, const std::string& field, const std::string& what) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    throw InputError(source, field, what + " must be non-negative integers, got " + v.dump());
  return v.get<int64_t>();
}

SafetensorsTensor parse_entry(const std::string& name, const json& e, const std::string& source, int64_t data_bytes) {
  if (!e.is_object()) throw InputError(source, name, "expected an object with dtype, shape and data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!e.contains(key)) throw InputError(source, name, std::string("missing \"") + key + "\"");
  SafetensorsTensor t;
  t.name = name;
  if (!e["dtype"].is_string()) throw InputError(source, name, "dtype must be a string, got " + e["dtype"].dump());
  t.dtype = e["dtype"].get<std::string>();
  const int64_t elem = dtype_size(t.dtype);
  if (elem == 0) throw InputError(source, name, "unknown dtype \"" + t.dtype + "\"", "safetensors dtypes: F32 BF16 F16 ...");
  if (!e["shape"].is_array()) throw InputError(source, name, "shape must be an array, got " + e["shape"].dump());
  for (const json& d : e["shape"]) t.shape.push_back(read_int(d, source, name, "shape entries"));
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    throw InputError(source, name, "data_offsets must be [begin, end], got " + off.dump());
  t.data_begin = read_int(off[0], source, name, "data_offsets");
  t.data_end = read_int(off[1], source, name, "data_offsets");
  if (t.data_begin > t.data_end)
    throw InputError(source, name, "data_offsets begin " + std::to_string(t.data_begin) + " > end " +
                                       std::to_string(t.data_end));
  if (t.data_end > data_bytes)
    throw InputError(source, name, "data_offsets end " + std::to_string(t.data_end) + " is beyond the data section of " +
                                       std::to_string(data_bytes) + " bytes", "the file is truncated or the header is corrupt");
  int64_t bytes = 0;
  if (__builtin_mul_overflow(checked_product(t.shape, source, name), elem, &bytes) ||
      bytes != t.data_end - t.data_begin)
    throw InputError(source, name, "shape " + shape_string(t.shape) + " of " + t.dtype + " needs " + std::to_string(bytes) +
                                       " bytes but data_offsets span " + std::to_string(t.data_end - t.data_begin));
  return t;
}

std::map<std::string, std::string> parse_metadata(const json& m, const std::string& source) {
  if (!m.is_object()) throw InputError(source, "__metadata__", "expected an object of strings, got " + m.dump());
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : m.items()) {
    if (!v.is_string()) throw InputError(source, "__metadata__." + k, "metadata values must be strings, got " + v.dump());
    out[k] = v.get<std::string>();
  }
  return out;
}

void put_u64_le(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Scalar conversions (IEEE 754 binary16 and bfloat16, little-endian in the file).

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exp = (bits >> 10) & 0x1f;
  uint32_t mant = bits & 0x3ff;
  uint32_t out = 0;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  } else if (mant == 0) {
    out = sign;  // signed zero
  } else {
    // Subnormal: normalise the mantissa.
    exp = 127 - 15 + 1;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --exp;
    }
    out = sign | (exp << 23) | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(out);
}

uint16_t f32_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

int64_t SafetensorsTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Reader.

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file", "check the path");
  std::error_code ec;
  const auto file_size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) throw InputError(path, "", "cannot read the file size: " + ec.message());
  if (file_size < 8)
    throw InputError(path, "header", "truncated: " + std::to_string(file_size) + " bytes, fewer than the 8-byte header length",
                     "the file is not a safetensors file or was cut short");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > static_cast<uint64_t>(file_size - 8))
    throw InputError(path, "header", "header length " + std::to_string(header_len) + " exceeds the " +
                                         std::to_string(file_size - 8) + " bytes after the length field",
                     "the file is truncated or not a safetensors file");
  if (header_len > static_cast<uint64_t>(kMaxHeaderBytes))
    throw InputError(path, "header", "header length " + std::to_string(header_len) + " exceeds the 100 MB limit");
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  if (!in) throw InputError(path, "header", "read failed");

  const json header = ir::parse_json_text(text, path + " (header)");
  if (!header.is_object()) throw InputError(path, "header", "expected a JSON object, got " + std::string(header.type_name()));
  SafetensorsFile f;
  f.path_ = path;
  f.data_start_ = 8 + static_cast<int64_t>(header_len);
  const int64_t data_bytes = file_size - f.data_start_;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      f.metadata_ = parse_metadata(entry, path);
      continue;
    }
    f.tensors_.push_back(parse_entry(name, entry, path, data_bytes));
  }
  // Overlap check over tensors sorted by data offset (empty tensors occupy nothing).
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& t : f.tensors_)
    if (t.data_end > t.data_begin) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->data_begin < b->data_begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->data_begin < by_offset[i - 1]->data_end)
      throw InputError(path, by_offset[i]->name, "data_offsets [" + std::to_string(by_offset[i]->data_begin) + ", " +
                                                     std::to_string(by_offset[i]->data_end) + ") overlap tensor \"" +
                                                     by_offset[i - 1]->name + "\"", "the header is corrupt");
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                                   [](const SafetensorsTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

void SafetensorsFile::read_f32(const std::string& name, std::span<float> out) const {
  const SafetensorsTensor* t = find(name);
  if (!t) throw InputError(path_, name, "no such tensor in the file");
  const int64_t n = t->num_elements();
  if (static_cast<int64_t>(out.size()) != n)
    throw InputError(path_, name, "destination holds " + std::to_string(out.size()) + " elements, tensor has " +
                                      std::to_string(n) + " (shape " + shape_string(t->shape) + ")");
  if (t->dtype != "F32" && t->dtype != "BF16" && t->dtype != "F16")
    throw InputError(path_, name, "dtype " + t->dtype + " cannot be read as floating point weights",
                     "convert the checkpoint to F32, BF16 or F16");
  if (n == 0) return;
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw InputError(path_, name, "cannot open file");
  std::string raw(static_cast<size_t>(t->data_end - t->data_begin), '\0');
  in.seekg(data_start_ + t->data_begin);
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (!in) throw InputError(path_, name, "read failed (file changed since it was opened?)");
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");
  if (t->dtype == "F32") {
    std::memcpy(out.data(), raw.data(), raw.size());
  } else {
    const bool bf16 = t->dtype == "BF16";
    for (int64_t i = 0; i < n; ++i) {
      const auto bits = static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
      out[static_cast<size_t>(i)] = bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    }
  }
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (!t) throw InputError(path_, name, "no such tensor in the file");
  std::vector<float> out(static_cast<size_t>(t->num_elements()));
  read_f32(name, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Checkpoints (one file or an index over shards).

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& path) {
  fs::path p(path);
  // error_code overloads throughout: a name the file system refuses (too long, ...) must be an
  // InputError, not std::filesystem_error (found by safetensors_index_fuzz).
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "model.safetensors.index.json", ec)) {
      p = p / "model.safetensors.index.json";
    } else if (fs::exists(p / "model.safetensors", ec)) {
      p = p / "model.safetensors";
    } else {
      throw InputError(path, "", "folder holds neither model.safetensors.index.json nor model.safetensors",
                       "pass the .safetensors file or the index");
    }
  }
  SafetensorsCheckpoint c;
  c.source_ = p.string();
  if (p.extension() != ".json") {
    c.files_.push_back(SafetensorsFile::open(c.source_));
    for (const auto& t : c.files_.front().tensors()) c.file_by_tensor_[t.name] = 0;
    return c;
  }
  const json index = ir::read_json_file(c.source_);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw InputError(c.source_, "weight_map", "missing or not an object", "a sharded checkpoint index maps tensor names to files");
  std::map<std::string, size_t> file_index;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) throw InputError(c.source_, "weight_map." + name, "expected a file name, got " + file.dump());
    const std::string rel = file.get<std::string>();
    if (rel.empty() || fs::path(rel).is_absolute() || rel.find("..") != std::string::npos)
      throw InputError(c.source_, "weight_map." + name, "file \"" + rel + "\" must be a plain name next to the index");
    auto it = file_index.find(rel);
    if (it == file_index.end()) {
      const fs::path shard = p.parent_path() / rel;
      if (!fs::exists(shard, ec))
        throw InputError(c.source_, "weight_map." + name,
                         "shard file " + shard.string() + (ec ? " cannot be read: " + ec.message() : " does not exist"));
      c.files_.push_back(SafetensorsFile::open(shard.string()));
      it = file_index.emplace(rel, c.files_.size() - 1).first;
    }
    if (!c.files_[it->second].find(name))
      throw InputError(c.source_, "weight_map." + name, "missing tensor: shard " + rel + " does not hold it");
    c.file_by_tensor_[name] = it->second;
  }
  if (c.files_.empty()) throw InputError(c.source_, "weight_map", "empty", "the index names no tensors");
  return c;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : file_by_tensor_) out.push_back(name);
  return out;
}

const SafetensorsFile* SafetensorsCheckpoint::file_of(const std::string& name) const {
  const auto it = file_by_tensor_.find(name);
  return it == file_by_tensor_.end() ? nullptr : &files_[it->second];
}

const SafetensorsTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  const SafetensorsFile* f = file_of(name);
  return f ? f->find(name) : nullptr;
}

void SafetensorsCheckpoint::read_f32(const std::string& name, std::span<float> out) const {
  const SafetensorsFile* f = file_of(name);
  if (!f) throw InputError(source_, name, "missing tensor", "the checkpoint does not hold this parameter");
  f->read_f32(name, out);
}

// ---------------------------------------------------------------------------------------------
// Writer.

void write_safetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors, ir::DType dtype,
                       const std::map<std::string, std::string>& metadata) {
  if (dtype != ir::DType::f32 && dtype != ir::DType::bf16)
    throw InputError(path, "dtype", "cannot write " + ir::to_string(dtype), "use f32 or bf16");
  const int64_t elem = dtype == ir::DType::f32 ? 4 : 2;
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  int64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || !seen.insert(t.name).second)
      throw InputError(path, t.name, "duplicate or reserved tensor name");
    const int64_t n = checked_product(t.shape, path, t.name);
    if (n != static_cast<int64_t>(t.data.size()))
      throw InputError(path, t.name, "shape " + shape_string(t.shape) + " has " + std::to_string(n) +
                                         " elements but the data holds " + std::to_string(t.data.size()));
    header[t.name] = {{"dtype", dtype == ir::DType::f32 ? "F32" : "BF16"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + n * elem}}};
    offset += n * elem;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so that the data starts 8-byte aligned
  std::string bytes;
  bytes.reserve(8 + text.size() + static_cast<size_t>(offset));
  put_u64_le(bytes, text.size());
  bytes += text;
  for (const auto& t : tensors) {
    if (dtype == ir::DType::f32) {
      bytes.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
    } else {
      for (float x : t.data) {
        const uint16_t b = f32_to_bf16(x);
        bytes.push_back(static_cast<char>(b & 0xff));
        bytes.push_back(static_cast<char>(b >> 8));
      }
    }
  }
  write_file_durably(path, bytes);
}

void write_safetensors_index(const std::string& path, const std::map<std::string, std::string>& weight_map,
                             int64_t total_size_bytes) {
  const json index = {{"metadata", {{"total_size", total_size_bytes}}}, {"weight_map", weight_map}};
  write_file_durably(path, index.dump(2) + "\n");
}


// ---------------------------------------------------------------------------------------------
// Durable writes.

namespace {

std::string errno_text(int err) { return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"; }

/// fsync of a file or a folder (a folder's fsync makes the names created or renamed in it durable).
void sync_path(const fs::path& path, const std::string& source) {
  const int fd = ::open(path.empty() ? "." : path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(source, "", "cannot open " + path.string() + " to sync it: " + errno_text(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems cannot sync a folder (EINVAL); their renames are as durable as they get.
  if (rc != 0 && err != EINVAL && err != EROFS)
    throw InputError(source, "", "fsync of " + path.string() + " failed: " + errno_text(err), "check the disk");
}

fs::path parent_or_dot(const fs::path& p) { return p.has_parent_path() ? p.parent_path() : fs::path("."); }

/// One fault variable: MGT_FAULT_KILL_AT or MGT_FAULT_STOP_AT, "<name>:<n>", and its count of hits.
struct FaultSpec {
  const char* variable;
  int signal;
  const char* doing;
  const char* spec = std::getenv(variable);
  int64_t hits = 0;

  void hit(std::string_view name) {
    if (!spec) return;
    const std::string_view s(spec);
    const size_t colon = s.rfind(':');
    if (s.substr(0, colon) != name) return;
    const int64_t wanted = colon == std::string_view::npos ? 1 : std::atoll(std::string(s.substr(colon + 1)).c_str());
    if (++hits != wanted) return;
    std::fprintf(stderr, "mgt: %s=%s: %s this process\n", variable, spec, doing);
    std::fflush(stderr);
    std::raise(signal);
  }
};

}  // namespace

void fault_point(std::string_view name) {
  static FaultSpec kill{"MGT_FAULT_KILL_AT", SIGKILL, "killing"};
  static FaultSpec stop{"MGT_FAULT_STOP_AT", SIGSTOP, "stopping"};
  kill.hit(name);
  stop.hit(name);
}

void write_file_durably(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw InputError(path, "", "cannot create temporary file " + tmp + ": " + errno_text(errno),
                     "check the folder exists and is writable");
  const auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    std::error_code ec;
    fs::remove(tmp, ec);
    throw InputError(path, "", what + ": " + errno_text(err), "check free disk space");
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write failed", n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
    fault_point("write");
  }
  if (::fsync(fd) != 0) fail("fsync failed", errno);
  if (::close(fd) != 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw InputError(path, "", "close failed: " + errno_text(errno), "check free disk space");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::error_code ec;
    fs::remove(tmp, ec);
    throw InputError(path, "", "cannot rename the temporary file into place: " + errno_text(err));
  }
  sync_path(parent_or_dot(fs::path(path)), path);
}

void replace_folder_durably(const std::string& staging, const std::string& target) {
  sync_path(staging, target);
  fault_point("replace-folder");
  std::error_code ec;
  if (fs::exists(target, ec)) {
    // One atomic step: staging and target trade names, so `target` names a complete checkpoint at
    // every instant; the old one is then under the staging name and is removed.
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
      sync_path(parent_or_dot(fs::path(target)), target);
      fs::remove_all(staging, ec);
      return;
    }
    if (errno != EINVAL && errno != ENOSYS)
      throw InputError(target, "", "cannot swap " + staging + " into place: " + errno_text(errno));
    // A file system without RENAME_EXCHANGE: move the old one aside, then rename (a crash in between
    // leaves the previous checkpoint under <target>.old-<pid>).
    const std::string old = target + ".old-" + std::to_string(::getpid());
    fs::remove_all(old, ec);
    fs::rename(target, old, ec);
    if (ec) throw InputError(target, "", "cannot move the previous checkpoint aside: " + ec.message());
    fs::rename(staging, target, ec);
    if (ec) throw InputError(target, "", "cannot rename " + staging + " into place: " + ec.message());
    sync_path(parent_or_dot(fs::path(target)), target);
    fs::remove_all(old, ec);
    return;
  }
  fs::rename(staging, target, ec);
  if (ec) throw InputError(target, "", "cannot rename " + staging + " into place: " + ec.message());
  sync_path(parent_or_dot(fs::path(target)), target);
}

}  // namespace mgt::rt
