// Tests for the mgt.cluster/1 format, the embedded presets and `--cluster NAME|FILE` resolution.
#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace mgt::ir {
namespace {

/// Runs `fn`, expects an InputError and returns it (fails the test otherwise).
template <class Fn>
InputError expect_input_error(Fn fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "expected InputError";
  return InputError("", "", "");
}

// The message names the rejected `input` and lists every preset.
void expect_names_input_and_presets(const InputError& e, const std::string& input) {
  const std::string what = e.what();
  EXPECT_NE(what.find(input), std::string::npos) << what;
  for (const auto& name : cluster_preset_names()) EXPECT_NE(what.find(name), std::string::npos) << what;
}

// Published GPU names to the preset of their die (NVIDIA datasheets / whitepapers): siblings of a
// preset's part carry an assumption, the part's own variants none, other vendors no preset. The
// traps: "H200" holds "h20", "GH200" holds "h200", "A100" holds "a10", "adapter" holds "ada".
TEST(preset_for_gpu_name, maps_each_part_to_its_die) {
  struct Case {
    const char* gpu;
    const char* preset;  // nullptr: no preset
    bool sibling;
  };
  const Case cases[] = {
      {"H100-SXM5-80GB", "h100-sxm", false}, {"H100 PCIe", "h100-sxm", false},      {"Hopper (H100 presumably)", "h100-sxm", false},
      {"H200-SXM-141GB", "h200-sxm", false}, {"NVIDIA H800", "h100-sxm", true},     {"H20 96GB", "h100-sxm", true},
      {"NVIDIA H20", "h100-sxm", true},      {"GH200 (900W, 141GiB HBM3e)", "h100-sxm", true},
      {"A100-SXM4-40GB", "a100-80g-sxm", false}, {"A800-SXM4-80GB", "a100-80g-sxm", true},
      {"NVIDIA A10G", "a100-80g-sxm", true}, {"RTX A6000", "a100-80g-sxm", true},   {"RTX 4090", "rtx4090-pcie", false},
      {"NVIDIA L40S", "rtx4090-pcie", true}, {"NVIDIA L4", "rtx4090-pcie", true},   {"RTX 6000 Ada", "rtx4090-pcie", true},
      {"B200", "b200", false},               {"DGX B300", "b300", false},           {"GB200", "gb200-nvl72", false},
      {"GB300 NVL72", "gb300-nvl72", false}, {"AMD MI300X", nullptr, false},        {"Instinct MI250X", nullptr, false},
      {"TPU v5p", nullptr, false},           {"Tesla V100", nullptr, false},        {"adapter card", nullptr, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.gpu);
    const auto match = preset_for_gpu_name(c.gpu);
    if (!c.preset) {
      EXPECT_FALSE(match.has_value()) << match->preset;
      continue;
    }
    ASSERT_TRUE(match.has_value());
    EXPECT_EQ(match->preset, c.preset);
    EXPECT_EQ(!match->assumption.empty(), c.sibling) << match->assumption;
    if (c.sibling) {
      EXPECT_NE(match->assumption.find(c.gpu), std::string::npos) << match->assumption;
    }
  }
}

TEST(cluster_preset, every_preset_round_trips_through_json) {
  for (const auto& name : cluster_preset_names()) {
    SCOPED_TRACE(name);
    ClusterSpec correct = cluster_preset(name);
    EXPECT_EQ(correct.name, name);
    EXPECT_FALSE(correct.source.empty());
    nlohmann::json doc = to_json(correct);
    EXPECT_EQ(doc.at("format"), "mgt.cluster/1");
    // Through text as well: the file users copy is dump() output.
    ClusterSpec result = cluster_from_json(nlohmann::json::parse(doc.dump(2)), name + ".json");
    EXPECT_EQ(result, correct);
  }
}

TEST(cluster_preset, round_trip_keeps_measured_tables) {
  ClusterSpec correct = cluster_preset("a100-80g-sxm");
  correct.gemm_table = {{.m = 4096, .n = 4096, .k = 4096, .dtype = DType::bf16, .efficiency = 0.71},
                        {.m = 128, .n = 8192, .k = 1024, .dtype = DType::f16, .efficiency = 0.33}};
  correct.collective_table = {{.op = "all_reduce", .group_size = 16, .nodes_spanned = 2,
                               .message_bytes = int64_t(1) << 30, .bus_bytes_per_s = 181.5e9}};
  correct.kernel_table = {{.op = "norm", .phase = "fwd", .work_per_s = 2.5e9},
                          {.op = "attention_core", .phase = "bwd", .work_per_s = 3.1e10}};
  ClusterSpec result = cluster_from_json(to_json(correct), "measured.json");
  EXPECT_EQ(result, correct);
  EXPECT_EQ(measured_kernel_rate(result, "norm", "fwd"), 2.5e9);
  EXPECT_EQ(measured_kernel_rate(result, "attention_core", "bwd"), 3.1e10);
  EXPECT_EQ(measured_kernel_rate(result, "norm", "bwd"), 0.0);  // no row
}

TEST(cluster_from_json, cpu_arch_and_kernel_table_errors) {
  nlohmann::json doc = to_json(cluster_preset("h100-sxm"));
  doc["gpu"]["arch"] = "cpu";
  EXPECT_EQ(cluster_from_json(doc, "c.json").gpu.arch, GpuArch::cpu);
  auto with_rows = [&](nlohmann::json rows) {
    nlohmann::json d = doc;
    d["kernel_table"] = std::move(rows);
    return d;
  };
  InputError e = expect_input_error([&] { cluster_from_json(with_rows({{{"op", "conv"}, {"phase", "fwd"}, {"work_per_s", 1}}}), "c.json"); });
  EXPECT_EQ(e.field(), "kernel_table[0].op");
  e = expect_input_error([&] { cluster_from_json(with_rows({{{"op", "norm"}, {"phase", "up"}, {"work_per_s", 1}}}), "c.json"); });
  EXPECT_EQ(e.field(), "kernel_table[0].phase");
  e = expect_input_error([&] { cluster_from_json(with_rows({{{"op", "norm"}, {"phase", "fwd"}, {"work_per_s", 0}}}), "c.json"); });
  EXPECT_EQ(e.field(), "kernel_table[0].work_per_s");
  e = expect_input_error([&] {
    cluster_from_json(with_rows({{{"op", "norm"}, {"phase", "fwd"}, {"work_per_s", 1}},
                                 {{"op", "norm"}, {"phase", "fwd"}, {"work_per_s", 2}}}), "c.json");
  });
  EXPECT_EQ(e.field(), "kernel_table[1].op");
}

// The SFU's exponent rate is optional (0 = the generation's 16), written only when set, and must be a
// non-negative number: Blackwell Ultra's presets carry 32.
TEST(cluster_from_json, sfu_exp2_rate_optional_and_checked) {
  nlohmann::json doc = to_json(cluster_preset("h100-sxm"));
  EXPECT_FALSE(doc["gpu"].contains("sfu_exp2_per_clock_per_sm"));
  EXPECT_EQ(to_json(cluster_preset("b300"))["gpu"]["sfu_exp2_per_clock_per_sm"], 32.0);
  doc["gpu"]["sfu_exp2_per_clock_per_sm"] = 32;
  EXPECT_EQ(cluster_from_json(doc, "c.json").gpu.sfu_exp2_per_clock_per_sm, 32.0);
  doc["gpu"]["sfu_exp2_per_clock_per_sm"] = -1;
  InputError e = expect_input_error([&] { cluster_from_json(doc, "c.json"); });
  EXPECT_EQ(e.field(), "gpu.sfu_exp2_per_clock_per_sm");
}

TEST(cluster_preset, names_default_first) {
  const auto& names = cluster_preset_names();
  ASSERT_EQ(names.size(), 8u);
  EXPECT_EQ(names.front(), "h100-sxm");
  for (const char* n : {"a100-80g-sxm", "h200-sxm", "b200", "b300", "gb200-nvl72", "gb300-nvl72", "rtx4090-pcie"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

TEST(cluster_preset, datasheet_numbers) {
  ClusterSpec h100 = cluster_preset("h100-sxm");
  EXPECT_DOUBLE_EQ(h100.gpu.peak_bf16_flops_per_s, 989.4e12);
  EXPECT_DOUBLE_EQ(h100.gpu.peak_fp8_flops_per_s, 1978.9e12);
  EXPECT_DOUBLE_EQ(h100.nvlink_bytes_per_s, 450e9);  // 900 GB/s bidirectional
  EXPECT_DOUBLE_EQ(h100.nic_bytes_per_s, 50e9);      // 400 Gb/s
  EXPECT_EQ(h100.nics_per_node, 8);

  ClusterSpec gb200 = cluster_preset("gb200-nvl72");
  EXPECT_EQ(gb200.gpus_per_node, 4);
  EXPECT_EQ(gb200.nvlink_domain_gpus, 72);

  ClusterSpec rtx = cluster_preset("rtx4090-pcie");
  EXPECT_EQ(rtx.nvlink_domain_gpus, 1);
  EXPECT_DOUBLE_EQ(rtx.gpu.peak_bf16_flops_per_s, 165.2e12);

  EXPECT_DOUBLE_EQ(cluster_preset("h200-sxm").gpu.hbm_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(cluster_preset("a100-80g-sxm").gpu.peak_fp8_flops_per_s, 0.0);
}

TEST(cluster_preset, unknown_name_lists_the_presets) {
  expect_names_input_and_presets(expect_input_error([] { cluster_preset("h100-pcie"); }), "h100-pcie");
}

TEST(peak_flops_per_s, by_dtype) {
  GpuSpec h100 = cluster_preset("h100-sxm").gpu;
  EXPECT_DOUBLE_EQ(peak_flops_per_s(h100, DType::bf16), 989.4e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s(h100, DType::fp8), 1978.9e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s(h100, DType::f32), 66.9e12);
  GpuSpec no_fp16 = h100;
  no_fp16.peak_fp16_flops_per_s = 0;  // 0 = same as bf16
  EXPECT_DOUBLE_EQ(peak_flops_per_s(no_fp16, DType::f16), 989.4e12);
}

TEST(peak_flops_per_s, fp8_on_a100_is_an_input_error) {
  GpuSpec a100 = cluster_preset("a100-80g-sxm").gpu;
  InputError e = expect_input_error([&] { peak_flops_per_s(a100, DType::fp8); });
  EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos) << e.what();
}

TEST(load_cluster, preset_name_or_file) {
  EXPECT_EQ(load_cluster("b200"), cluster_preset("b200"));

  auto path = std::filesystem::temp_directory_path() / "mgt_cluster_spec_test_my-cluster.json";
  ClusterSpec spec = cluster_preset("h200-sxm");
  spec.name = "my-cluster";
  {
    std::ofstream out(path);
    out << to_json(spec).dump(2);
  }
  EXPECT_EQ(load_cluster(path.string()), spec);
  std::filesystem::remove(path);
}

TEST(load_cluster, example_file_matches_preset) {
  std::string path = std::string(MGT_SOURCE_DIR) + "/examples/clusters/h100-sxm.json";
  EXPECT_EQ(load_cluster(path), cluster_preset("h100-sxm"));
}

TEST(load_cluster, neither_preset_nor_file_lists_presets) {
  expect_names_input_and_presets(expect_input_error([] { load_cluster("no-such-cluster.json"); }),
                                 "no-such-cluster.json");
}

TEST(load_cluster, malformed_file_names_the_file) {
  auto path = std::filesystem::temp_directory_path() / "mgt_cluster_spec_test_bad.json";
  {
    std::ofstream out(path);
    out << "{\"format\": \"mgt.cluster/1\", \"gpu\": {";
  }
  InputError e = expect_input_error([&] { load_cluster(path.string()); });
  EXPECT_EQ(e.source(), path.string());
  std::filesystem::remove(path);
}

TEST(cluster_from_json, name_defaults_to_file_stem) {
  nlohmann::json doc = to_json(cluster_preset("h100-sxm"));
  doc.erase("name");
  EXPECT_EQ(cluster_from_json(doc, "/tmp/clusters/lab-a.json").name, "lab-a");
}

TEST(cluster_from_json, field_errors_name_file_and_field) {
  const nlohmann::json good = to_json(cluster_preset("h100-sxm"));
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&)> edit;
    std::string field;
  };
  std::vector<Case> cases = {
      {"missing top-level", [](nlohmann::json& d) { d.erase("nic_bytes_per_s"); }, "nic_bytes_per_s"},
      {"missing nested", [](nlohmann::json& d) { d["gpu"].erase("hbm_bytes"); }, "gpu.hbm_bytes"},
      {"negative", [](nlohmann::json& d) { d["pcie_latency_s"] = -1e-6; }, "pcie_latency_s"},
      {"zero", [](nlohmann::json& d) { d["gpu"]["peak_bf16_flops_per_s"] = 0; }, "gpu.peak_bf16_flops_per_s"},
      {"wrong type", [](nlohmann::json& d) { d["gpus_per_node"] = "eight"; }, "gpus_per_node"},
      {"negative int", [](nlohmann::json& d) { d["nics_per_node"] = -8; }, "nics_per_node"},
      {"fractional int", [](nlohmann::json& d) { d["gpus_per_node"] = 7.5; }, "gpus_per_node"},
      {"unknown key", [](nlohmann::json& d) { d["nvlink_byte_per_s"] = 1; }, "nvlink_byte_per_s"},
      {"inconsistent domain", [](nlohmann::json& d) { d["nvlink_domain_gpus"] = 3; }, "nvlink_domain_gpus"},
      {"format", [](nlohmann::json& d) { d["format"] = "mgt.cluster/2"; }, "format"},
      {"bad table op", [](nlohmann::json& d) {
         d["collective_table"] = {{{"op", "all_reduse"}, {"group_size", 8}, {"nodes_spanned", 1},
                                   {"message_bytes", 1024}, {"bus_bytes_per_s", 1e9}}};
       }, "collective_table[0].op"},
      {"bad efficiency", [](nlohmann::json& d) {
         d["gemm_table"] = {{{"m", 8}, {"n", 8}, {"k", 8}, {"dtype", "bf16"}, {"efficiency", 1.5}}};
       }, "gemm_table[0].efficiency"},
      {"bad dtype", [](nlohmann::json& d) {
         d["gemm_table"] = {{{"m", 8}, {"n", 8}, {"k", 8}, {"dtype", "int8"}, {"efficiency", 0.5}}};
       }, "gemm_table[0].dtype"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    nlohmann::json doc = good;
    c.edit(doc);
    InputError e = expect_input_error([&] { cluster_from_json(doc, "lab.json"); });
    EXPECT_EQ(e.source(), "lab.json");
    EXPECT_EQ(e.field(), c.field) << e.what();
  }
}

TEST(cluster_from_json, no_nvlink_needs_no_nvlink_fields) {
  nlohmann::json doc = to_json(cluster_preset("rtx4090-pcie"));
  doc.erase("nvlink_bytes_per_s");
  doc.erase("nvlink_latency_s");
  ClusterSpec result = cluster_from_json(doc, "rtx.json");
  EXPECT_EQ(result, cluster_preset("rtx4090-pcie"));
}

}  // namespace
}  // namespace mgt::ir
