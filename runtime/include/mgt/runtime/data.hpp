// Token data for training (issue 5 part 5): a flat little-endian token file (uint16 or uint32), or
// synthetic tokens from a seed, read in a fixed order that does not depend on the plan.
// Format and order: docs/runtime_executor.md ("Data").
//
//   TokenSource data = TokenSource::open("tokens.bin", TokenDType::u16);   // or ::synthetic(seed, vocab)
//   StepBatch batch = global_batch(data, /*step=*/k, /*sequences=*/G, /*seq_len=*/S);
//   // sequence j of the batch is g = k*G + j: inputs tokens[g*S, g*S+S), targets tokens[g*S+1, g*S+S+1)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mgt::rt {

enum class TokenDType { u16, u32 };
/// "uint16" / "uint32" (also "u16" / "u32"); nullopt otherwise.
std::optional<TokenDType> token_dtype_from_string(std::string_view text);

/// Where tokens come from: a file (read on demand, never loaded whole) or a counter-based generator.
class TokenSource {
 public:
  /// A flat little-endian file of uint16 or uint32 tokens. Throws ir::InputError naming the file when
  /// it cannot be opened or its size is not a multiple of the token size.
  static TokenSource open(const std::string& path, TokenDType dtype);
  /// Unbounded synthetic tokens: token i = splitmix64(seed ^ splitmix64(i)) mod vocab.
  static TokenSource synthetic(uint64_t seed, int64_t vocab);

  /// Tokens available; -1 for synthetic (unbounded).
  int64_t num_tokens() const { return num_tokens_; }
  bool is_synthetic() const { return path_.empty(); }
  /// Bytes per token in the file: 2 (uint16) or 4 (uint32).
  int64_t token_width_bytes() const { return dtype_ == TokenDType::u16 ? 2 : 4; }
  /// Describes the source for messages: the path, or "synthetic(seed=1, vocab=512)".
  std::string describe() const;
  /// Reads tokens [begin, begin + count) into `out`. Throws ir::InputError naming the file when the
  /// range lies beyond its end.
  void read(int64_t begin, int64_t count, int32_t* out) const;

 private:
  std::string path_;
  TokenDType dtype_ = TokenDType::u16;
  int64_t num_tokens_ = -1;
  uint64_t seed_ = 0;
  int64_t vocab_ = 0;
};

/// The global batch of one optimizer step: `sequences` rows of `seq_len` tokens, row-major.
struct StepBatch {
  int64_t step = 0;
  int64_t sequences = 0;  ///< G
  int64_t seq_len = 0;    ///< S
  std::vector<int32_t> inputs;   ///< G*S: row j = tokens[g*S, g*S+S) with g = step*G + j
  std::vector<int32_t> targets;  ///< G*S: row j = tokens[g*S+1, g*S+S+1)
};

/// Size and content checksum of a file, recorded in a checkpoint's run record so that a token file
/// replaced under the same path is noticed on --resume (docs/runtime_run.md, "Save and resume").
struct FileFingerprint {
  int64_t size_bytes = 0;
  std::string checksum;  ///< "mix64:" + 16 hex digits: splitmix64 chained over the 8-byte little-endian words
  bool operator==(const FileFingerprint&) const = default;
};

/// Reads the whole file once (about 1 GB/s). Throws ir::InputError naming the file when it cannot be read.
FileFingerprint fingerprint_file(const std::string& path);

/// Checks that tokens [begin, begin + count) exist and are all below `vocab` (an embedding row). Reads
/// them in 1 MiB chunks; synthetic sources pass (they draw below their vocab). Throws ir::InputError
/// naming the file, the first bad token's index and byte offset, its value and the vocab size, or the
/// shortfall when the file ends before begin + count.
void check_token_range(const TokenSource& source, int64_t begin, int64_t count, int64_t vocab);

/// Step `step` (0-based) of the fixed order: sequence g = step*G + j for j < G. Needs
/// (step+1)*G*S + 1 tokens; a file that is too short is an ir::InputError naming the step and the count.
StepBatch global_batch(const TokenSource& source, int64_t step, int64_t sequences, int64_t seq_len);

}  // namespace mgt::rt
