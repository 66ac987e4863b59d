// Token data: file or synthetic source, fixed plan-independent order (data.hpp).
#include "mgt/runtime/data.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace mgt::rt {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int64_t token_bytes(TokenDType dtype) { return dtype == TokenDType::u16 ? 2 : 4; }

}  // namespace

std::optional<TokenDType> token_dtype_from_string(std::string_view text) {
  if (text == "uint16" || text == "u16") return TokenDType::u16;
  if (text == "uint32" || text == "u32") return TokenDType::u32;
  return std::nullopt;
}

TokenSource TokenSource::open(const std::string& path, TokenDType dtype) {
  std::error_code ec;
  // Tokens are read at offsets (seek), so only a regular file will do; a device or FIFO has no size.
  const auto type = std::filesystem::status(path, ec).type();
  if (!ec && type != std::filesystem::file_type::regular && type != std::filesystem::file_type::not_found)
    throw ir::InputError(path, "--data",
                         type == std::filesystem::file_type::directory ? "is a directory, not a token file"
                                                                        : "is not a regular file (a device, FIFO or socket)",
                         "pass a file of uint16 or uint32 token ids");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw ir::InputError(path, "--data", "cannot open the token file: " + ec.message(), "check the path");
  const int64_t width = token_bytes(dtype);
  if (static_cast<int64_t>(size) % width != 0) {
    throw ir::InputError(path, "--data",
                         "size " + std::to_string(size) + " bytes is not a multiple of the token size " +
                             std::to_string(width),
                         "check --data-dtype (uint16 or uint32)");
  }
  TokenSource s;
  s.path_ = path;
  s.dtype_ = dtype;
  s.num_tokens_ = static_cast<int64_t>(size) / width;
  return s;
}

TokenSource TokenSource::synthetic(uint64_t seed, int64_t vocab) {
  if (vocab < 1) throw ir::InputError("synthetic data", "vocab", "vocab must be >= 1");
  TokenSource s;
  s.seed_ = seed;
  s.vocab_ = vocab;
  return s;
}

std::string TokenSource::describe() const {
  if (!is_synthetic()) return path_;
  return "synthetic(seed=" + std::to_string(seed_) + ", vocab=" + std::to_string(vocab_) + ")";
}

void TokenSource::read(int64_t begin, int64_t count, int32_t* out) const {
  if (is_synthetic()) {
    if (begin < 0 || count < 0 || begin > INT64_MAX - count)
      throw ir::InputError(describe(), "--data", "tokens [" + std::to_string(begin) + ", +" + std::to_string(count) +
                                                     ") lie outside the 64-bit token counter");
    for (int64_t i = 0; i < count; ++i) {
      const uint64_t r = splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(begin + i)));
      out[i] = static_cast<int32_t>(r % static_cast<uint64_t>(vocab_));
    }
    return;
  }
  if (begin < 0 || count < 0 || count > num_tokens_ || begin > num_tokens_ - count) {
    throw ir::InputError(path_, "--data",
                         std::to_string(count) + " tokens from token " + std::to_string(begin) +
                             " requested but the file holds " + std::to_string(num_tokens_),
                         "use a longer token file or fewer --steps");
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw ir::InputError(path_, "--data", "cannot open the token file", "check the path");
  const int64_t width = token_bytes(dtype_);
  in.seekg(begin * width);
  std::vector<unsigned char> raw(static_cast<size_t>(count * width));
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (!in) throw ir::InputError(path_, "--data", "short read", "is the file being written?");
  for (int64_t i = 0; i < count; ++i) {
    const unsigned char* p = raw.data() + i * width;
    uint32_t v = 0;
    for (int64_t b = width - 1; b >= 0; --b) v = (v << 8) | p[b];  // little-endian
    if (v > 0x7fffffffu) {
      throw ir::InputError(path_, "--data", "token " + std::to_string(v) + " at index " +
                                                std::to_string(begin + i) + " does not fit int32");
    }
    out[i] = static_cast<int32_t>(v);
  }
}

FileFingerprint fingerprint_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ir::InputError(path, "--data", "cannot open the token file to checksum it", "check the path");
  FileFingerprint f;
  uint64_t h = 0;
  std::vector<char> chunk(size_t{1} << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (got == 0) break;
    f.size_bytes += static_cast<int64_t>(got);
    std::fill(chunk.begin() + static_cast<std::ptrdiff_t>(got), chunk.begin() + static_cast<std::ptrdiff_t>((got + 7) / 8 * 8), 0);
    for (size_t i = 0; i < got; i += 8) {
      uint64_t word = 0;
      for (int b = 7; b >= 0; --b) word = (word << 8) | static_cast<unsigned char>(chunk[i + static_cast<size_t>(b)]);
      h = splitmix64(h ^ word);
    }
  }
  if (in.bad()) throw ir::InputError(path, "--data", "read failed while checksumming the token file", "check the disk");
  // The size is mixed in last, so files that differ only by trailing zero bytes differ.
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(splitmix64(h ^ static_cast<uint64_t>(f.size_bytes))));
  f.checksum = std::string("mix64:") + hex;
  return f;
}

void check_token_range(const TokenSource& source, int64_t begin, int64_t count, int64_t vocab) {
  if (source.is_synthetic()) return;
  if (begin < 0 || count < 0 || begin > source.num_tokens() - count) {
    throw ir::InputError(source.describe(), "--data",
                         "the run reads " + std::to_string(count) + " tokens from token " + std::to_string(begin) +
                             " but the file holds " + std::to_string(source.num_tokens()),
                         "use a longer token file or fewer --steps");
  }
  constexpr int64_t kChunk = int64_t{1} << 19;  // tokens per read
  std::vector<int32_t> tokens(static_cast<size_t>(std::min(count, kChunk)));
  for (int64_t at = begin; at < begin + count; at += kChunk) {
    const int64_t n = std::min(kChunk, begin + count - at);
    source.read(at, n, tokens.data());
    for (int64_t i = 0; i < n; ++i) {
      if (tokens[static_cast<size_t>(i)] < vocab) continue;
      const int64_t index = at + i;
      throw ir::InputError(source.describe(), "--data",
                           "token " + std::to_string(tokens[static_cast<size_t>(i)]) + " at index " +
                               std::to_string(index) + " (byte offset " + std::to_string(index * source.token_width_bytes()) +
                               ") is not below the model's vocab_size " + std::to_string(vocab),
                           "the file was made with another tokenizer, or --data-dtype is wrong");
    }
  }
}

StepBatch global_batch(const TokenSource& source, int64_t step, int64_t sequences, int64_t seq_len) {
  if (step < 0 || sequences < 1 || seq_len < 1) {
    throw ir::InputError(source.describe(), "batch", "step must be >= 0 and sequences, seq_len >= 1");
  }
  StepBatch b;
  b.step = step;
  b.sequences = sequences;
  b.seq_len = seq_len;
  // A step far enough out (or a batch large enough) to overflow the token counter is bad input.
  const int64_t per_step = ir::checked_mul(sequences, seq_len, source.describe(), "global batch tokens");
  const int64_t first = ir::checked_mul(step, per_step, source.describe(), "first token of step " + std::to_string(step));
  if (per_step > INT64_MAX - 1 - first)
    throw ir::InputError(source.describe(), "--steps", "step " + std::to_string(step) + " ends beyond token 2^63",
                         "use fewer --steps or a smaller batch");
  const int64_t needed = first + per_step + 1;
  if (!source.is_synthetic() && needed > source.num_tokens()) {
    throw ir::InputError(source.describe(), "--data",
                         "step " + std::to_string(step) + " needs " + std::to_string(needed) +
                             " tokens (global batch " + std::to_string(sequences) + " x seq " +
                             std::to_string(seq_len) + " per step, plus 1) but the file holds " +
                             std::to_string(source.num_tokens()),
                         "use a longer token file or fewer --steps");
  }
  // Sequences are contiguous in the stream, so one read covers the whole batch plus one token.
  std::vector<int32_t> tokens(static_cast<size_t>(per_step + 1));
  source.read(first, static_cast<int64_t>(tokens.size()), tokens.data());
  b.inputs.resize(static_cast<size_t>(per_step));
  b.targets.resize(b.inputs.size());
  for (int64_t j = 0; j < sequences; ++j) {
    for (int64_t t = 0; t < seq_len; ++t) {
      const auto i = static_cast<size_t>(j * seq_len + t);
      b.inputs[i] = tokens[i];
      b.targets[i] = tokens[i + 1];
    }
  }
  return b;
}

}  // namespace mgt::rt
