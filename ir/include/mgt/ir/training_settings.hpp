// What the user trains, independent of how it is split: sequence length, global batch, precision.
// Every library reads it (rules, estimator, lowering, simulator, CLI), so it lives in ir.
#pragma once

#include "mgt/ir/graph.hpp"

#include <cstdint>

namespace mgt::ir {

/// Sequence length, global batch and precision (bf16 compute, fp32 master weights and AdamW states,
/// as torchtitan, Accelerate FSDP2 and Megatron-LM do by default).
struct TrainingSettings {
  int64_t seq_len = 8192;
  int64_t global_batch_tokens = 4ll << 20;
  DType compute_dtype = DType::bf16;  ///< bf16 or f16 (mixed precision, fp32 master weights)
  bool fp8_linears = false;           ///< GEMMs of linear layers at the fp8 peak, the rest as compute_dtype
  int64_t global_batch_seqs() const { return global_batch_tokens / seq_len; }
};

}  // namespace mgt::ir
