// The local sizes of a plan's shard (docs/cost-model.md §1): which dims tensor parallelism splits,
// and how many elements of a tensor one GPU holds for one micro-batch under tp, cp and sequence
// parallelism. layer_cost.cpp prices blocks from them.
#include "mgt/cost_model/layer_cost.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <string>

namespace mgt::cost {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

bool is_tp_dim(char name) { return ir::is_tensor_parallel_dim(name); }

bool has_tp_dim(const ir::TensorDecl& tensor) {
  return std::any_of(tensor.dims.begin(), tensor.dims.end(), [](const ir::Dim& d) { return is_tp_dim(d.name); });
}

ShardContext shard_context(const ir::Plan& plan, const ir::TrainingSettings& settings) {
  const ir::LinearFormat format = settings.linear_gemm_format();
  return ShardContext{plan.micro_batch, settings.seq_len, plan.tp, plan.cp, ir::sequence_parallel(plan),
                      settings.compute_dtype, plan.ep, format != ir::LinearFormat::none, format, settings.task,
                      settings.lora, ir::expert_tp(plan), settings.document_tokens};
}

int64_t local_dim_size(const ir::Dim& dim, const ShardContext& ctx, bool in_tp_region) {
  switch (dim.name) {
    case 'b': return ctx.micro_batch;
    case 's': {
      const int64_t split = ctx.cp * ((ctx.sequence_parallel && !in_tp_region) ? ctx.tp : 1);
      return ceil_div(ctx.seq_len, split);
    }
    default:
      return is_tp_dim(dim.name) ? ceil_div(dim.size, ctx.tp) : dim.size;
  }
}

int64_t local_elements(const ir::TensorDecl& tensor, const ShardContext& ctx) {
  const bool in_tp = ctx.tp > 1 && has_tp_dim(tensor);
  int64_t n = 1;
  for (const auto& d : tensor.dims) {
    // Checked, and capped so that bytes, sums over tensors and layers stay far from int64's end: a
    // vocab of 2^36 at --seq-len 2^30 overflowed here (UBSan, issue 8).
    if (__builtin_mul_overflow(n, local_dim_size(d, ctx, in_tp), &n) || n > kMaxLocalElements)
      throw ir::InputError("model", tensor.name,
                           "the tensor holds more than 2^44 elements per micro-batch on one GPU (seq_len " +
                               std::to_string(ctx.seq_len) + ", micro-batch " + std::to_string(ctx.micro_batch) +
                               ", tp " + std::to_string(ctx.tp) + ", cp " + std::to_string(ctx.cp) + ")",
                           "no GPU holds that: use a smaller model, --seq-len or micro-batch");
  }
  return n;
}

}  // namespace mgt::cost
