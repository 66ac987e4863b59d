// Fuzz target: the token file reader (rt::TokenSource::open + rt::global_batch). The first 8 bytes
// choose the dtype, the step, the sequences per step and the sequence length (any value, hostile ones
// included); the rest is the token file.
#include "fuzz_common.hpp"
#include "mgt/runtime/data.hpp"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  const auto dtype = data[0] & 1 ? mgt::rt::TokenDType::u32 : mgt::rt::TokenDType::u16;
  int16_t step = 0, sequences = 0;
  std::memcpy(&step, data + 1, 2);
  std::memcpy(&sequences, data + 3, 2);
  int32_t seq_len = 0;
  std::memcpy(&seq_len, data + 5, 3);
  // Large values of the low 24 bits, and the top byte's sign, reach the overflow checks.
  seq_len = (data[0] & 2) ? seq_len << 8 : seq_len;
  const std::string path = mgt::fuzz::write_scratch("tokens.bin", mgt::fuzz::text_of(data + 8, size - 8));
  try {
    const mgt::rt::TokenSource source = mgt::rt::TokenSource::open(path, dtype);
    const mgt::rt::StepBatch b = mgt::rt::global_batch(source, step, sequences, seq_len);
    if (b.inputs.size() != b.targets.size()) __builtin_trap();
    for (int32_t t : b.inputs)
      if (t < 0) __builtin_trap();
  } catch (const mgt::ir::InputError&) {
  }
  return 0;
}
