// The example configs of the model families added with hf_families.cpp, with their published
// parameter counts. Shared by hf_config_test.cpp (every example is covered) and hf_families_test.cpp.
#pragma once

#include <array>
#include <string_view>

namespace mgt::ir::test {

inline constexpr std::array<std::string_view, 10> kFamilyExamples{
    "DeepSeek-V2-Lite", "Falcon-40B", "Gemma-2B", "Gemma-3-1B", "Llama-4-Maverick-17B-128E",
    "Llama-4-Scout-17B-16E", "OLMoE-1B-7B-0125", "Qwen1.5-MoE-A2.7B", "RedPajama-INCITE-3B", "StarCoder2-7B"};

}  // namespace mgt::ir::test
