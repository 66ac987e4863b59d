// Fuzz target: a model.safetensors.index.json (rt::SafetensorsCheckpoint::open) beside two valid
// shards, a.safetensors (tensors "x", "y") and b.safetensors ("z"); names that leave the folder must
// be refused.
#include "fuzz_common.hpp"
#include "mgt/runtime/safetensors.hpp"

#include <vector>

namespace {
void write_shards() {
  static bool done = false;
  if (done) return;
  const std::vector<float> two{1.0f, 2.0f}, one{3.0f};
  mgt::rt::write_safetensors((mgt::fuzz::scratch_dir() / "a.safetensors").string(),
                             {{"x", {2}, two}, {"y", {1, 1}, one}});
  mgt::rt::write_safetensors((mgt::fuzz::scratch_dir() / "b.safetensors").string(), {{"z", {1}, one}});
  done = true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write_shards();
  const std::string index = mgt::fuzz::write_scratch("model.safetensors.index.json", mgt::fuzz::text_of(data, size));
  try {
    const mgt::rt::SafetensorsCheckpoint c = mgt::rt::SafetensorsCheckpoint::open(index);
    for (const std::string& name : c.names()) {
      const mgt::rt::SafetensorsFile* f = c.file_of(name);
      // Every shard it opened lies in the folder of the index.
      if (!f || std::filesystem::path(f->path()).parent_path() != mgt::fuzz::scratch_dir()) __builtin_trap();
      std::vector<float> out(static_cast<size_t>(c.find(name)->num_elements()));
      c.read_f32(name, out);
    }
  } catch (const mgt::ir::InputError&) {
  }
  return 0;
}
