// Fuzz target: a safetensors file (rt::SafetensorsFile::open: length, JSON header, entries, offsets,
// overlaps), then every floating-point tensor read as fp32.
#include "fuzz_common.hpp"
#include "mgt/runtime/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mgt::fuzz::write_scratch("model.safetensors", mgt::fuzz::text_of(data, size));
  try {
    const mgt::rt::SafetensorsFile f = mgt::rt::SafetensorsFile::open(path);
    for (const auto& t : f.tensors()) {
      if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16") continue;
      // A tensor that reads has exactly the elements its shape says.
      int64_t elements = 1;
      for (int64_t d : t.shape) elements *= d;
      if (static_cast<int64_t>(f.read_f32(t.name).size()) != elements) __builtin_trap();
    }
  } catch (const mgt::ir::InputError&) {
  }
  return 0;
}
