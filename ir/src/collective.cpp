// The one collective table: names, buffer extents and nccl-tests' bus factors per kind.
#include "mgt/ir/collective.hpp"

#include <array>
#include <stdexcept>

namespace mgt::ir {

namespace {
// In enumerator order; to_string and *_from_string both read them.
constexpr std::array<const char*, kNumCollectiveKinds> kCollectiveNames{
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"};
constexpr std::array<const char*, 2> kReduceOpNames{"sum", "max"};

void require_group(int64_t group_size, const char* what) {
  if (group_size < 1)
    throw std::invalid_argument(std::string(what) + ": group size " + std::to_string(group_size) +
                                " is not a group (hint: a collective needs at least 1 member)");
}
}  // namespace

std::string to_string(CollectiveKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kCollectiveNames.size() ? kCollectiveNames[i] : "?";
}
std::string to_string(ReduceOp op) {
  const auto i = static_cast<size_t>(op);
  return i < kReduceOpNames.size() ? kReduceOpNames[i] : "?";
}

std::optional<CollectiveKind> collective_kind_from_string(std::string_view text) {
  for (size_t i = 0; i < kCollectiveNames.size(); ++i)
    if (text == kCollectiveNames[i] && static_cast<CollectiveKind>(i) != CollectiveKind::send_recv)
      return static_cast<CollectiveKind>(i);
  return std::nullopt;
}
std::optional<ReduceOp> reduce_op_from_string(std::string_view text) {
  for (size_t i = 0; i < kReduceOpNames.size(); ++i)
    if (text == kReduceOpNames[i]) return static_cast<ReduceOp>(i);
  return std::nullopt;
}

bool count_is_per_member(CollectiveKind kind) {
  return kind == CollectiveKind::all_gather || kind == CollectiveKind::reduce_scatter ||
         kind == CollectiveKind::all_to_all;
}

double bus_factor(CollectiveKind kind, int64_t group_size) {
  if (group_size <= 1) return 0.0;
  const double n = static_cast<double>(group_size);
  switch (kind) {
    case CollectiveKind::all_reduce: return 2.0 * (n - 1) / n;  // reduce-scatter then all-gather
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: return (n - 1) / n;  // every block but one's own crosses a link
    case CollectiveKind::broadcast:                        // pipelined ring: the buffer once over every hop
    case CollectiveKind::send_recv: return 1.0;
  }
  return 0.0;
}

CollectiveExtents collective_extents(CollectiveKind kind, int64_t count, int64_t group_size) {
  require_group(group_size, "collective_extents");
  const int64_t n = group_size;
  switch (kind) {
    case CollectiveKind::all_gather: return {.send = count, .recv = n * count};
    case CollectiveKind::reduce_scatter: return {.send = n * count, .recv = count};
    case CollectiveKind::all_to_all: return {.send = n * count, .recv = n * count};
    case CollectiveKind::all_reduce:
    case CollectiveKind::broadcast:
    case CollectiveKind::send_recv: return {.send = count, .recv = count};
  }
  return {.send = count, .recv = count};
}

CollectiveBytes collective_bytes(CollectiveKind kind, int64_t bytes, int64_t group_size) {
  require_group(group_size, "collective_bytes");
  if (bytes < 0)
    throw std::invalid_argument("collective_bytes: " + std::to_string(bytes) +
                                " bytes is negative (hint: the nccl-tests size of the buffer)");
  const int64_t param_bytes = count_is_per_member(kind) ? bytes / group_size : bytes;
  const CollectiveExtents e = collective_extents(kind, param_bytes, group_size);
  return {.send_bytes = e.send,
          .recv_bytes = e.recv,
          .param_bytes = param_bytes,
          .bus_factor = bus_factor(kind, group_size)};
}

}  // namespace mgt::ir
