// The GPU idle time a MoE token dispatcher's host synchronisation exposes (docs/cost-model.md §9,
// "MoE dispatcher host sync"). Megatron-Core's dropless alltoall dispatcher copies the routed-token
// counts to the host and calls cudaStreamSynchronize before its expert-parallel all-to-all, so the
// GPU queue is empty when the host resumes; the kernels of the rest of the MoE layer then start as
// fast as the host launches them until the host is ahead again.
#pragma once

#include "mgt/cost_model/layer_cost.hpp"
#include "mgt/ir/graph.hpp"

#include <set>
#include <string>
#include <vector>

namespace mgt::cost {

/// GPU idle seconds after a host sync, for kernels launched one every `host_launch_s` of host time
/// with GPU times `kernel_gpu_s` in launch order. The host first returns from the sync (one
/// host_launch_s), then launches kernel k (1-based) at k * host_launch_s; kernel k starts at
/// max(that, the end of kernel k - 1), so the idle total is
///   host_launch_s + max over k of (k * host_launch_s - sum of the GPU times of kernels 1 .. k-1).
/// 0 for an empty list or host_launch_s <= 0.
double host_sync_stall_s(double host_launch_s, const std::vector<double>& kernel_gpu_s);

/// The GPU times of the kernels Megatron-Core launches after the dispatcher's sync, in order, for
/// the ops of `block` after its router (`router_index`) up to the op that reads the routing weights
/// (the combine / unpermute): the dispatch all-to-all, the sort by local expert (more than one local
/// expert), fc1 as one GEMM per local expert (consecutive expert contractions of one input are
/// Megatron's fused gate-and-up fc1), the activation, fc2 per local expert, the sort back, the
/// combine all-to-all and the unpermute. `op_fwd_s` holds each op's forward seconds (block order),
/// `expert_weights` the routed-expert parameters. All-to-alls and sorts count 0 GPU seconds (their
/// transfer is priced as EP communication; 0 can only lengthen the stall: an upper bound); an
/// expert GEMM's time is split over the local experts, each keeping one `kernel_floor_s`.
std::vector<double> moe_kernels_after_sync(const ir::Block& block, size_t router_index, const ShardContext& ctx,
                                           const std::vector<double>& op_fwd_s,
                                           const std::set<std::string>& expert_weights, double kernel_floor_s);

}  // namespace mgt::cost
