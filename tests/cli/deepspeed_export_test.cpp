// `--emit deepspeed` for Llama-3.1-405B on 512 H100s: DeepSpeed's ZeRO-3 gathers per submodule under
// limits the file writes (docs/cost-model.md §4.3), so a plan fits where FSDP2's whole-block buffers did
// not, and the file carries exactly the limits the estimate assumed.
#include "cli_util.hpp"

namespace mgt_cli_test {
namespace {

constexpr const char* kLlama405B = "examples/models/Llama-3.1-405B.json";

TEST(CliDeepSpeedExport, Llama405BOn512GpusWritesTheZero3Limits) {
  const Result r = run_cli({kLlama405B, "--gpus", "512", "--seq-len", "8192", "--top", "20", "--emit", "deepspeed"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = json::parse(r.out);
  const json& zero = doc.at("zero_optimization");
  EXPECT_EQ(zero.at("stage").get<int>(), 3) << r.out;
  // The values the deepspeed profile's bound assumed: DeepSpeedZeroConfig's defaults
  // (deepspeed/runtime/zero/config.py) but the reuse distance 0, with the IPG bucket and overlap.
  EXPECT_EQ(zero.at("stage3_max_live_parameters").get<int64_t>(), 1000000000) << r.out;
  EXPECT_EQ(zero.at("stage3_prefetch_bucket_size").get<int64_t>(), 50000000) << r.out;
  EXPECT_EQ(zero.at("stage3_max_reuse_distance").get<int64_t>(), 0) << r.out;
  EXPECT_EQ(zero.at("stage3_param_persistence_threshold").get<int64_t>(), 100000) << r.out;
  EXPECT_EQ(zero.at("reduce_bucket_size").get<int64_t>(), 500000000) << r.out;
  EXPECT_TRUE(zero.at("contiguous_gradients").get<bool>()) << r.out;
  EXPECT_TRUE(zero.at("overlap_comm").get<bool>()) << r.out;
  // DeepSpeed's batch rule: 512 sequences of 8192 tokens (the 4M-token default) over 512 ranks.
  EXPECT_EQ(doc.at("train_batch_size").get<int64_t>(), 512);
  EXPECT_EQ(doc.at("train_micro_batch_size_per_gpu").get<int64_t>() * doc.at("gradient_accumulation_steps").get<int64_t>() *
                512,
            512);
}

TEST(CliDeepSpeedExport, Llama405BZero3BuffersByHand) {
  // The lightest DeepSpeed plan of the case: ZeRO-3 over all 512 ranks, full recompute.
  const Result r = run_cli({"estimate", kLlama405B, "--gpus", "512", "--seq-len", "8192", "--framework", "deepspeed",
                            "--plan", R"({"dp_shard":512,"micro_batch":1,"recompute":"full"})", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json doc = parse_json_or_fail(r);
  // Largest tensor P: the untied LM head (and embedding), 128256 x 16384 = 2101346304, which 512
  // divides (so reduce_scatter_coalesced needs no interleaved copy of it). Persistent (at most 1e5
  // elements): 126 layers x 2 norms + the final norm, 16384 each = 4145152.
  const int64_t P = 128256ll * 16384, S = (126 * 2 + 1) * 16384ll;
  const int64_t L = 1000000000, R = 500000000;
  EXPECT_EQ(P % 512, 0);
  const int64_t gathered = S + L + P;        // 3105491456
  const int64_t gradients = R + P + R + P;   // IPG bucket, P outside it, a bucket's copy, the next gradient
  EXPECT_EQ(gathered, 3105491456);
  EXPECT_EQ(gradients, 5202692608);
  EXPECT_EQ(doc.at("memory").at("fsdp_buffers_bytes").get<int64_t>(), 2 * (gathered + gradients)) << r.out;
  // It fits an 80 GiB H100 (it did not with FSDP2's whole-block units: 90.9 GiB).
  EXPECT_LE(doc.at("memory").at("peak_bytes").get<int64_t>(), kH100Hbm) << r.out;
}

}  // namespace
}  // namespace mgt_cli_test
