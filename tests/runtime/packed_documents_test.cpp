// Packed sequences (ir::TrainingSettings::document_tokens; docs/runtime_executor.md): attention stays
// within a document and rotary positions restart at each. Checked against what packing means: a
// sequence of T tokens holding T / d documents trains exactly as T / d sequences of d tokens do.
// The data order makes that comparison exact: sequence g of length S reads tokens [g*S, g*S + S) of
// one stream, with its targets one further, so B sequences of T tokens and B*T/d sequences of d
// tokens hold the same inputs and targets in the same memory order.
#include "mgt/runtime/cpu/kernels.hpp"
#include "mgt/runtime/executor.hpp"

#include "random_floats.hpp"
#include "train_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace mgt::rt {
namespace {

namespace fs = std::filesystem;

using test::random_floats;

struct Grads {
  std::vector<float> out, dq, dk, dv;
};

Grads run_attention(const cpu::AttentionConfig& c, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, const std::vector<float>& dout) {
  Grads g{std::vector<float>(q.size()), std::vector<float>(q.size()), std::vector<float>(k.size()),
          std::vector<float>(v.size())};
  std::vector<float> lse(size_t(c.B * c.H * c.T)), scratch(size_t(cpu::attention_backward_scratch(c)));
  cpu::attention_forward(g.out.data(), lse.data(), q.data(), k.data(), v.data(), c, scratch.data());
  cpu::attention_backward(g.dq.data(), g.dk.data(), g.dv.data(), dout.data(), q.data(), k.data(), v.data(), lse.data(), c,
                          scratch.data());
  return g;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - want[i])));
  EXPECT_LT(worst, 1e-5) << what;
}

// The kernel: one batch row of 200 positions packed with documents of 50 (a document boundary inside
// a 64-row query block) against four rows of 50, causal with GQA; and with a 20-token window inside
// the documents; and bidirectional (an encoder's packed batch), where a document sees its later keys
// but nothing past its end.
TEST(PackedDocuments, AttentionWithinDocumentsEqualsOneRowPerDocument) {
  const int64_t T = 200, doc = 50, H = 4, KVH = 2, D = 8;
  const auto q = random_floats(size_t(T * H * D), 1), k = random_floats(size_t(T * KVH * D), 2),
             v = random_floats(size_t(T * KVH * D), 3), dout = random_floats(size_t(T * H * D), 4);
  for (const auto& [causal, window] : {std::pair{true, int64_t(0)}, std::pair{true, int64_t(20)}, std::pair{false, int64_t(0)}}) {
    SCOPED_TRACE(std::string(causal ? "causal" : "bidirectional") + " window " + std::to_string(window));
    cpu::AttentionConfig packed;
    packed.B = 1, packed.T = T, packed.H = H, packed.KVH = KVH, packed.D = D;
    packed.causal = causal, packed.window = window, packed.doc = doc;
    cpu::AttentionConfig rows = packed;
    rows.B = T / doc, rows.T = doc, rows.doc = 0;
    const Grads got = run_attention(packed, q, k, v, dout), want = run_attention(rows, q, k, v, dout);
    expect_close(got.out, want.out, "out");
    expect_close(got.dq, want.dq, "dq");
    expect_close(got.dk, want.dk, "dk");
    expect_close(got.dv, want.dv, "dv");
    // Not vacuous: the same row without packing attends across the boundaries.
    cpu::AttentionConfig unpacked = packed;
    unpacked.doc = 0;
    const Grads across = run_attention(unpacked, q, k, v, dout);
    double differs = 0;
    for (size_t i = size_t(doc * H * D); i < across.out.size(); ++i)
      differs = std::max(differs, double(std::fabs(across.out[i] - want.out[i])));
    EXPECT_GT(differs, 1e-3);
  }
}

// Context parallel: a rank's queries at its own positions (q_pos, the load-balanced split of two
// chunks, 0-49 and 150-199 here) against all keys see the same documents as the whole row does.
TEST(PackedDocuments, ContextParallelQueriesSeeTheirOwnDocuments) {
  const int64_t T = 200, doc = 30, H = 2, KVH = 2, D = 8;
  const auto q = random_floats(size_t(T * H * D), 5), k = random_floats(size_t(T * KVH * D), 6),
             v = random_floats(size_t(T * KVH * D), 7), dout = random_floats(size_t(T * H * D), 8);
  cpu::AttentionConfig whole;
  whole.B = 1, whole.T = T, whole.H = H, whole.KVH = KVH, whole.D = D, whole.doc = doc;
  const Grads want = run_attention(whole, q, k, v, dout);
  std::vector<int64_t> positions;
  for (int64_t t = 0; t < 50; ++t) positions.push_back(t);
  for (int64_t t = 150; t < 200; ++t) positions.push_back(t);
  std::vector<float> q_shard, dout_shard;
  for (const int64_t p : positions) {
    q_shard.insert(q_shard.end(), q.begin() + p * H * D, q.begin() + (p + 1) * H * D);
    dout_shard.insert(dout_shard.end(), dout.begin() + p * H * D, dout.begin() + (p + 1) * H * D);
  }
  cpu::AttentionConfig shard = whole;
  shard.T = int64_t(positions.size());
  shard.Tk = T;
  shard.q_pos = positions.data();
  const Grads got = run_attention(shard, q_shard, k, v, dout_shard);
  std::vector<float> want_rows;
  for (const int64_t p : positions) want_rows.insert(want_rows.end(), want.out.begin() + p * H * D, want.out.begin() + (p + 1) * H * D);
  expect_close(got.out, want_rows, "out");
}

constexpr const char* kTinyLlama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
  "intermediate_size":128,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,
  "vocab_size":512,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000.0,
  "tie_word_embeddings":false,"hidden_act":"silu"})";

// The executor: three AdamW steps of a tiny Llama on 2 sequences of 32 tokens packed with documents
// of 8 give the losses and gradient norms of 8 sequences of 8 tokens, under a plain plan and one with
// a micro-batch of 2 and full recompute. (Rotary positions restart at each document, as frameworks'
// position ids do; rotary scores depend only on relative positions, so it is the document mask that
// makes the two runs equal, and without it this test fails.)
TEST(PackedDocuments, TrainingOnPackedSequencesEqualsTrainingOnTheDocuments) {
  const fs::path config = fs::temp_directory_path() / ("mgt_packed_" + std::to_string(::getpid()) + ".json");
  std::ofstream(config) << kTinyLlama;
  for (const char* plan : {R"({})", R"({"micro_batch":2,"recompute":"full"})"}) {
    SCOPED_TRACE(plan);
    const auto packed = test::train_tiny(config.string(), plan, nullptr,
                                         {.seq_len = 32, .batch_seqs = 2, .steps = 3, .document_tokens = 8});
    const auto documents = test::train_tiny(config.string(), plan, nullptr, {.seq_len = 8, .batch_seqs = 8, .steps = 3});
    const auto whole = test::train_tiny(config.string(), plan, nullptr, {.seq_len = 32, .batch_seqs = 2, .steps = 3});
    ASSERT_EQ(packed.size(), documents.size());
    for (size_t s = 0; s < packed.size(); ++s) {
      EXPECT_NEAR(packed[s].loss, documents[s].loss, 1e-5 * std::fabs(documents[s].loss)) << "step " << s;
      EXPECT_NEAR(packed[s].grad_norm, documents[s].grad_norm, 1e-4 * documents[s].grad_norm) << "step " << s;
    }
    // Not vacuous: unpacked 32-token sequences train differently.
    EXPECT_GT(std::fabs(whole.back().loss - documents.back().loss), 1e-4);
  }
  fs::remove(config);
}

}  // namespace
}  // namespace mgt::rt
