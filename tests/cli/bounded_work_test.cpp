// End-to-end tests of issue 18's "unbounded work" and "silent wrong answers" items that the CLI shows
// (docs/hardening.md "Inputs"): every input of the kinds the issue lists is answered within 10 s and
// 2 GiB or refused with one error naming the file or flag; pipeline traffic that crosses nodes is
// priced (an absurd NIC is refused, a slow one slows the step). Each run is measured with
// /usr/bin/time under a hard `timeout`: refusals by wall seconds (a FIFO is waited for), admitted
// work by CPU seconds (ctest shares the machine), both by peak resident memory.
#include "cli_util.hpp"

#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <tuple>

namespace mgt_cli_test {
namespace {

constexpr double kMaxSeconds = 10.0;
constexpr int64_t kMaxResidentKiB = int64_t{2} << 20;  // 2 GiB

struct Measured {
  Result result;
  double seconds = -1;      ///< wall clock
  double cpu_seconds = -1;  ///< user + system: what the input costs, whatever else the machine runs
  int64_t max_resident_kib = -1;
};

/// Runs mgt-plan under `timeout 60` and /usr/bin/time; a run past 60 s is killed and fails the bound.
Measured run_measured(const std::vector<std::string>& args) {
  TempDir dir;
  const std::string stats = dir.file("time.txt");
  Measured m;
  m.result = run_cli(args, {"/usr/bin/time", "-f", "%e %U %S %M", "-o", stats, "timeout", "-s", "KILL", "60"});
  std::ifstream in(stats);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;  // "Command exited with non-zero status 2" comes first
  double user = -1, system = -1;
  std::istringstream(last) >> m.seconds >> user >> system >> m.max_resident_kib;
  m.cpu_seconds = user + system;
  return m;
}

/// Bad input answered within the bounds: exit 2, one line naming every word, no crash.
void expect_bounded_refusal(const std::vector<std::string>& args, const std::vector<std::string>& words) {
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  SCOPED_TRACE("mgt-plan " + joined);
  const Measured m = run_measured(args);
  EXPECT_EQ(m.result.exit_code, 2) << describe(m.result);
  EXPECT_FALSE(contains(m.result.err, "internal error")) << describe(m.result);
  EXPECT_EQ(lines_of(m.result.err).size(), 1u) << describe(m.result);
  for (const auto& w : words) EXPECT_TRUE(contains(m.result.err, w)) << "missing '" << w << "'\n" << describe(m.result);
  EXPECT_GE(m.seconds, 0.0) << "no /usr/bin/time figures";
  EXPECT_LE(m.seconds, kMaxSeconds) << describe(m.result);
  EXPECT_LE(m.max_resident_kib, kMaxResidentKiB) << describe(m.result);
}

std::string cluster_with(const TempDir& dir, const std::string& name, const std::function<void(json&)>& edit) {
  json cluster = json::parse(slurp(fs::path(MGT_SOURCE_DIR) / "examples" / "clusters" / "h100-sxm.json"));
  edit(cluster);
  return dir.write(name + ".json", cluster.dump(2));
}

std::string llama_with(const TempDir& dir, const std::string& key, const json& value) {
  json config = llama_config();
  config[key] = value;
  return dir.write("config-" + key + ".json", config.dump(2));
}

const std::vector<std::string> kPipelinePlans = {R"({"pp":16})", R"({"dp_shard":4,"pp":4})", R"({"tp":4,"pp":4})",
                                                 R"({"dp_replicate":4,"pp":4,"vpp":4})"};

// ------------------------------------------------------------------------------------------------
// Item 2: pipeline traffic that crosses nodes is priced, in estimate and simulate

TEST(CliPipelineAcrossNodes, AbsurdNicOrLatencyIsRefusedNotPricedAsTheDefault) {
  TempDir dir;
  const std::string nic = cluster_with(dir, "tiny-nic", [](json& c) { c["nic_bytes_per_s"] = 1e-300; });
  const std::string latency = cluster_with(dir, "huge-latency", [](json& c) { c["network_latency_s"] = 1e308; });
  for (const auto& plan : kPipelinePlans)
    for (const auto& cluster : {nic, latency}) {
      expect_bad_input({"estimate", kLlama8B, "--gpus", "16", "--cluster", cluster, "--plan", plan},
                       {cluster, "estimate out of range", "exposed PP"});
      expect_bad_input({"simulate", kLlama8B, "--gpus", "16", "--cluster", cluster, "--plan", plan, "--global-batch", "16"},
                       {"out of range"});
    }
}

TEST(CliPipelineAcrossNodes, SlowNicSlowsTheStepByTheBoundaryTraffic) {
  // A NIC of 1 kB/s: every micro-batch sends at least one [1, 8192, 4096] bf16 activation (split over
  // tp by sequence parallelism) across the nodes, 64 MiB / tp, which takes at least 67,109 s / tp; the
  // default cluster's step takes seconds. Exit 1 is "does not fit in memory", still with the estimate.
  TempDir dir;
  const std::string slow = cluster_with(dir, "slow-nic", [](json& c) { c["nic_bytes_per_s"] = 1e3; });
  for (const auto& plan : kPipelinePlans) {
    SCOPED_TRACE(plan);
    const double tp = double(json::parse(plan).value("tp", 1));
    const double boundary_bytes = 8192.0 * 4096.0 * 2.0 / tp;
    const Result fast = run_cli({"estimate", kLlama8B, "--gpus", "16", "--plan", plan, "--global-batch", "16", "--json"});
    const Result r = run_cli({"estimate", kLlama8B, "--gpus", "16", "--cluster", slow, "--plan", plan,
                              "--global-batch", "16", "--json"});
    ASSERT_TRUE(fast.exit_code == 0 || fast.exit_code == 1) << describe(fast);
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << describe(r);
    const json e = parse_json_or_fail(r);
    const int64_t micro_batches = e.at("plan").at("grad_accum").get<int64_t>();
    EXPECT_GT(e.at("step_time_s").get<double>(), double(micro_batches) * boundary_bytes / 1e3);
    EXPECT_LT(parse_json_or_fail(fast).at("step_time_s").get<double>(), 1e3);
    const Result sim = run_cli({"simulate", kLlama8B, "--gpus", "16", "--cluster", slow, "--plan", plan,
                                "--global-batch", "16", "--json"});
    ASSERT_TRUE(sim.exit_code == 0 || sim.exit_code == 1) << describe(sim);
    EXPECT_GT(parse_json_or_fail(sim).at("step_time_s").get<double>(), double(micro_batches) * boundary_bytes / 1e3);
  }
}

// ------------------------------------------------------------------------------------------------
// Items 14, 15: layer counts and node sizes that would make the work unbounded

TEST(CliBoundedWork, LayerCountsBeyondTheLimitAreRefusedNamingTheField) {
  TempDir dir;
  for (const int64_t layers : {int64_t{1} << 27, int64_t{1} << 31, int64_t{1} << 40}) {
    const std::string model = llama_with(dir, "num_hidden_layers", layers);
    expect_bounded_refusal({model, "--gpus", "8"}, {model, "num_hidden_layers", std::to_string(layers), "65536"});
  }
  // The limit itself still plans, within the bounds.
  const std::string deepest = llama_with(dir, "num_hidden_layers", 65536);
  const Measured ok = run_measured({"estimate", deepest, "--gpus", "8", "--plan", R"({"dp_shard":8})"});
  EXPECT_LE(ok.cpu_seconds, kMaxSeconds) << describe(ok.result);
  EXPECT_LE(ok.max_resident_kib, kMaxResidentKiB) << describe(ok.result);
  EXPECT_NE(ok.result.exit_code, 2) << describe(ok.result);
}

TEST(CliBoundedWork, NodeSizesBeyondPhysicalBoundsAreRefusedNamingTheField) {
  TempDir dir;
  const std::vector<std::tuple<std::string, int64_t, std::string>> cases = {
      {"nics_per_node", int64_t(9223372036854775807), "[1, 64]"},
      {"nics_per_node", 10000000, "[1, 64]"},
      {"gpus_per_node", int64_t{1} << 20, "[1, 1024]"},
      {"gpus_per_node", int64_t{1} << 40, "[1, 1024]"},
      {"nvlink_domain_gpus", int64_t{1} << 20, "[1, 1024]"}};
  for (const auto& [field, value, range] : cases) {
    const std::string cluster = cluster_with(dir, field, [&](json& c) { c[field] = value; });
    expect_bounded_refusal({kLlama8B, "--gpus", "8", "--cluster", cluster}, {cluster, field, range});
  }
  // validate's hardware blocks: every row of the system is skipped naming the field (it was skipped as
  // "estimator: std::bad_alloc" after building the topology).
  json rows = json::parse(slurp(fs::path(MGT_SOURCE_DIR) / "examples" / "validation" / "bloom_176b_bigscience.json"));
  rows["hardware"]["jean_zay_a100"]["gpus_per_node"] = int64_t{1} << 40;
  const Measured v = run_measured({"validate", dir.write("bloom.json", rows.dump())});
  EXPECT_EQ(v.result.exit_code, 0) << describe(v.result);
  EXPECT_TRUE(contains(v.result.out, "hardware jean_zay_a100: field 'gpus_per_node': is 1099511627776, outside [1, 1024]"))
      << describe(v.result);
  EXPECT_FALSE(contains(v.result.out, "bad_alloc")) << describe(v.result);
  EXPECT_LE(v.cpu_seconds, kMaxSeconds);
  EXPECT_LE(v.max_resident_kib, kMaxResidentKiB);
}

// ------------------------------------------------------------------------------------------------
// Item 16: micro-batch counts the schedule would materialise

TEST(CliBoundedWork, SchedulesTooLargeToMaterialiseAreRefusedNamingTheBatchFlag) {
  expect_bounded_refusal({"simulate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8})", "--global-batch-tokens", "256M"},
                         {"--global-batch", "micro-batches per rank", "estimate"});
  expect_bounded_refusal({"simulate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8})", "--global-batch-tokens", "1G"},
                         {"--global-batch", "micro-batches per rank"});
  expect_bounded_refusal({"compile", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8})", "--global-batch-tokens", "1G"},
                         {"--global-batch", "micro-batches per rank"});
  TempDir dir;
  const std::string tiny = dir.write("config.json", R"({"architectures":["LlamaForCausalLM"],"model_type":"llama",
    "hidden_size":64,"intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
    "num_hidden_layers":2,"vocab_size":512,"max_position_embeddings":128,"tie_word_embeddings":false})");
  expect_bounded_refusal({"run", tiny, "--seq-len", "16", "--global-batch", "100000", "--steps", "1"},
                         {"--global-batch", "micro-batches per rank"});
  // The estimate prices the same batch analytically, within the bounds.
  const Measured e = run_measured({"estimate", kLlama8B, "--gpus", "8", "--plan", R"({"dp_shard":8})",
                                   "--global-batch-tokens", "1G"});
  EXPECT_EQ(e.result.exit_code, 0) << describe(e.result);
  EXPECT_LE(e.cpu_seconds, kMaxSeconds);
}

TEST(CliBoundedWork, DeepPipelinesAreSimulatedOrRefusedWithinTheBounds) {
  // 405B on pp 126 with the default batch (512 micro-batches x 126 layers' ops) took 18 s and 2.5 GB.
  expect_bounded_refusal({"simulate", "examples/models/Llama-3.1-405B.json", "--gpus", "126", "--plan", R"({"pp":126})"},
                         {"--global-batch", "micro-batches per rank"});
  // Llama-3.1-8B on pp 16 with the default batch (512 micro-batches, 775K instructions) is simulated.
  const Measured m = run_measured({"simulate", kLlama8B, "--gpus", "16", "--plan", R"({"pp":16})", "--json"});
  EXPECT_EQ(m.result.exit_code, 0) << describe(m.result);
  EXPECT_LE(m.cpu_seconds, kMaxSeconds) << describe(m.result);
  EXPECT_LE(m.max_resident_kib, kMaxResidentKiB) << describe(m.result);
}

// ------------------------------------------------------------------------------------------------
// Item 17: devices, FIFOs and huge files as inputs

TEST(CliBoundedWork, EndlessDevicesHugeFilesAndSilentFifosAreRefusedNamingTheFile) {
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    expect_bounded_refusal({device, "--gpus", "8"}, {device, "a character device", "67108864", "MGT_MAX_INPUT_BYTES"});
    expect_bounded_refusal({"estimate", kLlama8B, "--gpus", "8", "--plan", device}, {device, "67108864"});
    expect_bounded_refusal({kLlama8B, "--gpus", "8", "--cluster", device}, {device, "67108864"});
  }
  TempDir dir;
  const std::string huge = dir.file("huge.json");
  fs::resize_file(dir.write("huge.json", ""), uintmax_t{1} << 30);  // 1 GiB, sparse
  expect_bounded_refusal({huge, "--gpus", "8"}, {huge, "1073741824 bytes", "67108864", "MGT_MAX_INPUT_BYTES"});
  expect_bounded_refusal({"validate", huge}, {huge, "1073741824 bytes"});
  const std::string fifo = dir.file("model.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_bounded_refusal({fifo, "--gpus", "8"}, {fifo, "a FIFO", "did not deliver its data within 5 s"});
  // The limit is the environment's to raise: the same file under a larger limit is read (and is not JSON).
  const Result raised = run_cli({"inspect", huge}, {"env", "MGT_MAX_INPUT_BYTES=abc"});
  EXPECT_TRUE(contains(raised.err, "MGT_MAX_INPUT_BYTES")) << describe(raised);
  const std::string small = dir.write("small.json", std::string(100, ' ') + slurp(fs::path(MGT_SOURCE_DIR) / kLlama8B));
  const Result limited = run_cli({"inspect", small}, {"env", "MGT_MAX_INPUT_BYTES=64"});
  EXPECT_EQ(limited.exit_code, 2) << describe(limited);
  EXPECT_TRUE(contains(limited.err, "more than the input limit of 64 bytes")) << describe(limited);
}

}  // namespace
}  // namespace mgt_cli_test
