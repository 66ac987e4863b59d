// Bounded work for any input (docs/hardening.md "Inputs"): models, plans, clusters, validation
// files and MLIR are text of a few MB at most, so anything larger, a device that never ends or a
// FIFO that never delivers is refused with an error naming the file, in bounded time and memory,
// instead of being read until memory runs out or blocking forever; and the sizes whose work grows
// without bound (layers, GPUs and NICs per node) have physical limits.
#pragma once

#include <cstdint>
#include <string>

#include "mgt/ir/cluster_spec.hpp"
#include "mgt/ir/graph.hpp"

namespace mgt::ir {

/// Default limit on an input file's size: 64 MiB (the largest mgt input we ship, a validation
/// catalogue, is under 1 MiB; a Hugging Face config.json is a few kB).
inline constexpr int64_t kDefaultMaxInputBytes = int64_t{64} << 20;
/// Seconds a FIFO or pipe (`--plan <(...)`) may take to deliver all of its data.
inline constexpr double kInputPipeDeadlineSeconds = 5.0;

/// The size limit in force: kDefaultMaxInputBytes, or the environment variable MGT_MAX_INPUT_BYTES
/// (a positive integer of bytes) to raise or lower it; mgt-plan's --max-input-mib sets that variable.
/// Throws InputError naming the variable when it is not a positive integer.
int64_t max_input_bytes();
/// Largest --max-input-mib: 1 TiB (the limit in bytes stays far inside 64 bits).
inline constexpr int64_t kMaxInputMib = int64_t{1} << 20;

/// The whole content of `path`. A regular file must be at most max_input_bytes(); a FIFO, pipe or
/// character device is read until its end, at most max_input_bytes() and kInputPipeDeadlineSeconds
/// (one that gives nothing is named as such). A directory, a missing file, or one over a limit is an
/// InputError naming `path`, what it is, and the fix.
std::string read_input_file(const std::string& path);

/// Most layers a model may have (docs/hardening.md "Inputs"): 500 times the deepest model trained
/// (Llama 3.1 405B: 126 layers), so that the search, whose work grows with the layer count, answers
/// in bounded time. Readers of num_layers / num_hidden_layers refuse more, naming the field.
inline constexpr int64_t kMaxLayers = int64_t{1} << 16;

/// Largest size of one tensor dimension (hidden, ffn, vocab, head_dim, ...): 64 x the largest in a
/// trained model (Gemma 3's vocabulary of 262,208). ir::verify refuses more, naming the config field.
inline constexpr int64_t kMaxDimSize = int64_t{1} << 24;

/// Most parameters a model may have: 2^50 (1.1e15), about 500 times the largest trained models
/// (about 2e12). The memory terms count bytes in int64: at up to kMaxStateBytesPerParameter bytes of
/// training state a parameter (bf16 weights 2, fp32 master weights 4, gradients 4, AdamW moments 8,
/// rounded up), 2^50 parameters are 2^54.3 bytes, which leaves a factor of 2^8 for the sums and the
/// products with small counts that the estimator forms, where 7e17 parameters wrapped to 0 bytes.
inline constexpr int64_t kMaxParameters = int64_t{1} << 50;
inline constexpr int64_t kMaxStateBytesPerParameter = 20;
/// Most bytes of activations one token may take over all blocks: 2^40 (1 TiB), at fp32
/// (kMaxActivationBytesPerElement). Llama 3.1 405B's graph keeps 1.65e8 = 2^27.3 bytes a token (126 layers,
/// the most of the models in examples/models), so this is 6,600 times more; the estimator multiplies it
/// by the tokens of a micro-batch.
inline constexpr int64_t kMaxActivationBytesPerToken = int64_t{1} << 40;
inline constexpr int64_t kMaxActivationBytesPerElement = 4;
/// Throws InputError naming `source` and the config fields of the largest tensor's dims when the
/// parameters exceed kMaxParameters or the activations of one token kMaxActivationBytesPerToken
/// (ir::verify calls it, after the per-dimension and layer-count bounds).
void check_model_size(const Graph& graph, const std::string& source);

/// Physical bounds on a node (docs/hardening.md "Inputs"), so that a typo cannot make the topology
/// graph or the search unbounded: the largest node shipped has 16 GPUs and the largest NVLink domain
/// announced 576 (NVL576), so 1024 leaves room for both; a DGX has one compute NIC per GPU, and no
/// design has more than a few, so 8 per GPU.
inline constexpr int64_t kMaxGpusPerNode = 1024;
inline constexpr int64_t kMaxNvlinkDomainGpus = 1024;
inline constexpr int64_t kMaxNicsPerGpu = 8;
/// Throws InputError naming `source`, the field, the bound and why, when gpus_per_node,
/// nvlink_domain_gpus or nics_per_node is beyond its bound (or below 1).
void check_node_bounds(const ClusterSpec& cluster, const std::string& source);

}  // namespace mgt::ir
