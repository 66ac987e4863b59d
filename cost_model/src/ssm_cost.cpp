// State-space scan FLOPs and memory (formulas and sources in ssm_cost.hpp).
#include "mgt/cost_model/ssm_cost.hpp"

namespace mgt::cost {

namespace {
constexpr double kMamba1StateChunkTokens = 2048;  // mamba_ssm's selective_scan kChunkSize
}

double ssm_scan_fwd_flops_per_token(const SsmScanShape& s) {
  const double n = double(s.state), p = double(s.head_dim), h = double(s.heads), g = double(s.groups);
  if (s.chunk == 0) return 9.0 * double(s.channels()) * n + double(s.channels());
  const double q = double(s.chunk);
  return 2.0 * q * n * g + h * (2.0 * q * p + 4.0 * n * p + p);
}

double ssm_scan_bwd_flops_per_token(const SsmScanShape& s) { return 2.0 * ssm_scan_fwd_flops_per_token(s); }

double ssm_scan_extra_saved_bytes_per_token(const SsmScanShape& s) {
  if (s.chunk == 0) return double(s.channels()) * 2.0 * double(s.state) * 4.0 / kMamba1StateChunkTokens;
  return double(s.heads) * 4.0;
}

double ssm_scan_bytes_per_token(const SsmScanShape& s, int64_t dtype_bytes) {
  // x and y: channels each; dt: channels (Mamba-1) or one per head (SSD); B and C: groups * N each.
  const double dt = s.chunk == 0 ? double(s.channels()) : double(s.heads);
  return (2.0 * double(s.channels()) + dt + 2.0 * double(s.groups * s.state)) * double(dtype_bytes);
}

}  // namespace mgt::cost
