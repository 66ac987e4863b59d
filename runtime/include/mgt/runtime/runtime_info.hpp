// The runtime library's identity. The executor over an ir::Schedule (CPU: Eigen + MPI, CUDA: cuBLAS +
// NCCL) is added by the schedule and runtime issues; this library links mgt_ir only.
#pragma once

#include <string>

namespace mgt::rt {

/// Backends this build can execute on; empty until the executor lands.
std::string available_backends();

}  // namespace mgt::rt
