// Shared by the libFuzzer targets (tests/fuzz/README.md): each target feeds the input to one
// parser of outside input. A clean InputError is the expected answer to bad input; anything else
// that escapes (another exception, a crash, a sanitizer report, a hang) is a finding.
#pragma once

#include "mgt/ir/error.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace mgt::fuzz {

inline std::string_view text_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// A scratch folder of this process (in /dev/shm when it exists: no disk I/O per execution).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    const std::filesystem::path d = base / ("mgt_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

/// Writes `bytes` to `name` in the scratch folder and returns its path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = (scratch_dir() / name).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) __builtin_trap();
  std::fclose(f);
  return path;
}

}  // namespace mgt::fuzz
