// rt::Communicator over NCCL with an MPI bootstrap (cuda/nccl_communicator.hpp, docs/runtime_cuda.md).
// Every NCCL and CUDA return code is checked; every wait polls ncclCommGetAsyncError against the timeout.
#include "mgt/runtime/cuda/nccl_communicator.hpp"

#include "check.hpp"
#include "mgt/runtime/mpi_communicator.hpp"

#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <thread>
#include <vector>

namespace mgt::rt {

namespace {

std::string axes_text(const Axes& axes) {
  std::string text;
  for (const auto& a : axes) text += (text.empty() ? "" : ",") + a;
  return "{" + text + "}";
}

/// A call queued fine: ncclInProgress is the normal answer of a non-blocking communicator.
bool queued(ncclResult_t code) { return code == ncclSuccess || code == ncclInProgress; }

void require_count(int64_t count, const char* op) {
  if (count < 0) throw std::invalid_argument(std::string(op) + ": negative count " + std::to_string(count));
}

}  // namespace

struct NcclCommunicator::Impl {
  ir::Mesh mesh;
  NcclOptions options;
  std::unique_ptr<MpiCommunicator> mpi;  // MPI lifetime, world-size check, bootstrap
  int64_t rank = 0, world = 1;
  int device = 0;
  cudaStream_t stream = nullptr;
  ncclComm_t world_comm = nullptr;
  std::map<uint32_t, ncclComm_t> groups;  // bit mask of mesh axes (size > 1) -> communicator
  float* scratch = nullptr;               // one float for barrier
  bool aborted = false;

  // Which axes of size > 1 a group names, as a bit mask (unknown axes throw).
  uint32_t mask_of(const Axes& axes) const {
    uint32_t mask = 0;
    for (const auto& a : axes) {
      const size_t i = detail::require_axis(mesh, a);
      if (mesh.axes[i].size > 1) mask |= 1u << i;
    }
    return mask;
  }

  [[noreturn]] void fail(const std::string& what, const std::string& problem) {
    abort_all();
    throw NcclError("nccl rank " + std::to_string(rank) + ": " + what + ": " + problem +
                    "; every nccl communicator of this rank was aborted");
  }

  void abort_all() {
    if (aborted) return;
    aborted = true;
    for (auto& [mask, comm] : groups) ncclCommAbort(comm);
    if (world_comm != nullptr) ncclCommAbort(world_comm);
    groups.clear();
    world_comm = nullptr;
  }

  void check_usable(const std::string& what) const {
    if (aborted)
      throw NcclError("nccl rank " + std::to_string(rank) + ": " + what +
                      ": the communicators were aborted by an earlier failure");
  }

  // A non-blocking NCCL call returned `code`; ncclInProgress is fine (waited for by poll), others fail.
  void check(ncclResult_t code, const std::string& what, const char* call) {
    if (code == ncclSuccess || code == ncclInProgress) return;
    fail(what, std::string(call) + " returned " + ncclGetErrorString(code) + " (" + ncclGetLastError(nullptr) + ")");
  }

  // Waits until `comms` finished their pending non-blocking calls (ncclInProgress) and, when
  // `stream_work`, until the stream drained; polls asynchronous errors and the timeout.
  void wait(const std::string& what, std::vector<ncclComm_t> comms, bool stream_work = true) {
    const auto start = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      bool pending = false;
      for (ncclComm_t c : comms) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t code = ncclCommGetAsyncError(c, &state);
        if (code != ncclSuccess) fail(what, std::string("ncclCommGetAsyncError returned ") + ncclGetErrorString(code));
        if (state == ncclInProgress) pending = true;
        else if (state != ncclSuccess)
          fail(what, std::string("asynchronous error ") + ncclGetErrorString(state) + " (" +
                         ncclGetLastError(c) + "; hint: a peer rank may have died)");
      }
      if (!pending && stream_work) {
        const cudaError_t q = cudaStreamQuery(stream);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) fail(what, std::string("cuda stream error: ") + cudaGetErrorString(q));
      } else if (!pending) {
        return;
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > options.timeout_s)
        fail(what, "not complete after " + std::to_string(options.timeout_s) +
                       " s (--comm-timeout; hint: a peer rank died, hangs, or issued a different collective)");
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  ncclComm_t comm_for(const Axes& axes) {
    const uint32_t mask = mask_of(axes);
    if (mask == 0) return nullptr;
    return groups.at(mask);
  }

  // A collective over `axes`; a group of one rank copies send to recv (when they differ) on the stream.
  template <class Call>
  void run_collective(const char* op, const Axes& axes, int64_t count, const float* send, float* recv,
                      int64_t copy_count, Call call) {
    const std::string what = std::string(op) + " over " + axes_text(axes) + " of " + std::to_string(count) + " floats";
    check_usable(what);
    ncclComm_t comm = comm_for(axes);
    if (comm == nullptr) {
      if (send != recv && copy_count > 0)
        MGT_CUDA_CHECK(cudaMemcpyAsync(recv, send, static_cast<size_t>(copy_count) * sizeof(float),
                                       cudaMemcpyDefault, stream));
      MGT_CUDA_CHECK(cudaStreamSynchronize(stream));
      return;
    }
    check(call(comm), what, op);
    wait(what, {comm});
  }

  /// all_reduce (op ncclSum) and all_reduce_max (ncclMax): in place when send == recv, else the buffers
  /// must not overlap.
  void all_reduce(const Communicator& self, const float* send, float* recv, int64_t count, const Axes& axes,
                  ncclRedOp_t op, const char* what) {
    require_count(count, what);
    if (send != recv && buffers_overlap(self, ir::CollectiveKind::all_reduce, send, recv, count, axes))
      throw std::invalid_argument(std::string(what) + ": send and recv overlap but are not the in-place form");
    run_collective(what, axes, count, send, recv, count, [&](ncclComm_t c) {
      return ncclAllReduce(send, recv, static_cast<size_t>(count), ncclFloat, op, c, stream);
    });
  }
};

NcclCommunicator::NcclCommunicator(const ir::Mesh& mesh, NcclOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.mesh = mesh;
  s.options = options;
  if (mesh.axes.size() > 16) throw std::invalid_argument("nccl: at most 16 mesh axes are supported");
  // 1. A device first: without one, fail before MPI starts.
  const cuda::DeviceCount devices = cuda::device_count();
  if (devices.count == 0) throw cuda::CudaError("no CUDA device (" + devices.reason + ")");
  s.mpi = std::make_unique<MpiCommunicator>(mesh);
  s.rank = s.mpi->rank();
  s.world = s.mpi->world_size();
  int local_rank = 0;
  {
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, static_cast<int>(s.rank), MPI_INFO_NULL, &node) !=
            MPI_SUCCESS ||
        MPI_Comm_rank(node, &local_rank) != MPI_SUCCESS)
      throw NcclError("nccl rank " + std::to_string(s.rank) + ": MPI_Comm_split_type failed");
    MPI_Comm_free(&node);
  }
  s.device = options.device >= 0 ? options.device % devices.count : local_rank % devices.count;
  MGT_CUDA_CHECK(cudaSetDevice(s.device));
  MGT_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  MGT_CUDA_CHECK(cudaMalloc(&s.scratch, sizeof(float)));

  // 2. The world communicator from a unique id broadcast over MPI.
  ncclUniqueId id{};
  if (s.rank == 0) s.check(ncclGetUniqueId(&id), "init", "ncclGetUniqueId");
  if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw NcclError("nccl rank " + std::to_string(s.rank) + ": MPI_Bcast of the ncclUniqueId failed");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  s.check(ncclCommInitRankConfig(&s.world_comm, static_cast<int>(s.world), id, static_cast<int>(s.rank), &config),
          "init", "ncclCommInitRankConfig");
  s.wait("init of the world communicator", {s.world_comm}, /*stream_work=*/false);

  // 3. One split per distinct set of axes of size > 1, in the same order on every rank.
  std::vector<size_t> big;
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    if (mesh.axes[i].size > 1) big.push_back(i);
  const std::vector<int64_t> coords = ir::rank_coords(mesh, s.rank);
  for (uint32_t subset = 1; subset < (1u << big.size()); ++subset) {
    uint32_t mask = 0;
    for (size_t j = 0; j < big.size(); ++j)
      if (subset & (1u << j)) mask |= 1u << big[j];
    int64_t color = 0, key = 0;
    for (size_t i = 0; i < mesh.axes.size(); ++i) {
      if (mask & (1u << i)) key = key * mesh.axes[i].size + coords[i];
      else color = color * mesh.axes[i].size + coords[i];
    }
    ncclComm_t comm = nullptr;
    ncclConfig_t split_config = NCCL_CONFIG_INITIALIZER;
    split_config.blocking = 0;
    s.check(ncclCommSplit(s.world_comm, static_cast<int>(color), static_cast<int>(key), &comm, &split_config), "init",
            "ncclCommSplit");
    s.wait("ncclCommSplit", {s.world_comm, comm}, /*stream_work=*/false);
    int size = 0, rank_in = 0;
    s.check(ncclCommCount(comm, &size), "init", "ncclCommCount");
    s.check(ncclCommUserRank(comm, &rank_in), "init", "ncclCommUserRank");
    int64_t want_size = 1;
    for (size_t i = 0; i < mesh.axes.size(); ++i)
      if (mask & (1u << i)) want_size *= mesh.axes[i].size;
    s.groups[mask] = comm;
    if (size != want_size || rank_in != key)
      s.fail("ncclCommSplit", "group of size " + std::to_string(size) + " rank " + std::to_string(rank_in) +
                                  ", expected size " + std::to_string(want_size) + " rank " + std::to_string(key));
  }
}

NcclCommunicator::~NcclCommunicator() {
  Impl& s = *impl_;
  if (!s.aborted) {
    // Finalize (non-blocking: flushes pending work), then destroy; a hang here aborts instead.
    std::vector<ncclComm_t> all;
    for (auto& [mask, comm] : s.groups) all.push_back(comm);
    if (s.world_comm != nullptr) all.push_back(s.world_comm);
    try {
      for (ncclComm_t c : all) s.check(ncclCommFinalize(c), "shutdown", "ncclCommFinalize");
      s.wait("shutdown", all, /*stream_work=*/false);
      for (ncclComm_t c : all) ncclCommDestroy(c);
    } catch (const std::exception&) {
      // abort_all ran inside fail(); nothing else can be done in a destructor
    }
  }
  if (s.scratch != nullptr) cudaFree(s.scratch);
  if (s.stream != nullptr) cudaStreamDestroy(s.stream);
}

int64_t NcclCommunicator::rank() const { return impl_->rank; }
int64_t NcclCommunicator::world_size() const { return impl_->world; }
const ir::Mesh& NcclCommunicator::mesh() const { return impl_->mesh; }
void* NcclCommunicator::stream() const { return impl_->stream; }
int NcclCommunicator::device() const { return impl_->device; }

void NcclCommunicator::all_reduce(const float* send, float* recv, int64_t count, const Axes& axes) {
  impl_->all_reduce(*this, send, recv, count, axes, ncclSum, "all_reduce");
}

void NcclCommunicator::all_reduce_max(const float* send, float* recv, int64_t count, const Axes& axes) {
  impl_->all_reduce(*this, send, recv, count, axes, ncclMax, "all_reduce_max");
}

void NcclCommunicator::all_gather(const float* send, float* recv, int64_t count, const Axes& axes) {
  require_count(count, "all_gather");
  if (send != recv + group_rank(axes) * count &&
      buffers_overlap(*this, ir::CollectiveKind::all_gather, send, recv, count, axes))
    throw std::invalid_argument("all_gather: send and recv overlap but are not the in-place form");
  Impl& s = *impl_;
  s.run_collective("all_gather", axes, count, send, recv, count, [&](ncclComm_t c) {
    return ncclAllGather(send, recv, static_cast<size_t>(count), ncclFloat, c, s.stream);
  });
}

void NcclCommunicator::reduce_scatter(const float* send, float* recv, int64_t count, const Axes& axes) {
  require_count(count, "reduce_scatter");
  if (recv != send + group_rank(axes) * count &&
      buffers_overlap(*this, ir::CollectiveKind::reduce_scatter, send, recv, count, axes))
    throw std::invalid_argument("reduce_scatter: send and recv overlap but are not the in-place form");
  Impl& s = *impl_;
  s.run_collective("reduce_scatter", axes, count, send, recv, count, [&](ncclComm_t c) {
    return ncclReduceScatter(send, recv, static_cast<size_t>(count), ncclFloat, ncclSum, c, s.stream);
  });
}

// Grouped ncclSend/ncclRecv to every member (chunk j to group rank j). In place (send == recv) stages
// the input in a temporary device copy first.
void NcclCommunicator::all_to_all(const float* send, float* recv, int64_t count, const Axes& axes) {
  require_count(count, "all_to_all");
  const int64_t n = group_size(axes);
  if (send != recv && buffers_overlap(*this, ir::CollectiveKind::all_to_all, send, recv, count, axes))
    throw std::invalid_argument("all_to_all: send and recv overlap but are not the in-place form");
  Impl& s = *impl_;
  float* staged = nullptr;
  if (send == recv && n > 1 && count > 0) {
    MGT_CUDA_CHECK(cudaMallocAsync(&staged, static_cast<size_t>(n * count) * sizeof(float), s.stream));
    MGT_CUDA_CHECK(cudaMemcpyAsync(staged, send, static_cast<size_t>(n * count) * sizeof(float),
                                   cudaMemcpyDefault, s.stream));
    send = staged;
  }
  s.run_collective("all_to_all", axes, count, send, recv, n * count, [&](ncclComm_t c) {
    ncclResult_t code = ncclGroupStart();
    for (int64_t j = 0; j < n && queued(code); ++j) {
      code = ncclSend(send + j * count, static_cast<size_t>(count), ncclFloat, static_cast<int>(j), c, s.stream);
      if (queued(code))
        code = ncclRecv(recv + j * count, static_cast<size_t>(count), ncclFloat, static_cast<int>(j), c, s.stream);
    }
    const ncclResult_t end = ncclGroupEnd();
    return queued(code) ? end : code;
  });
  if (staged != nullptr) {
    MGT_CUDA_CHECK(cudaFreeAsync(staged, s.stream));
    MGT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  }
}

void NcclCommunicator::broadcast(float* buffer, int64_t count, const Axes& axes) {
  require_count(count, "broadcast");
  Impl& s = *impl_;
  s.run_collective("broadcast", axes, count, buffer, buffer, count, [&](ncclComm_t c) {
    return ncclBroadcast(buffer, buffer, static_cast<size_t>(count), ncclFloat, /*root=*/0, c, s.stream);
  });
}

void NcclCommunicator::send(const float* buffer, int64_t count, std::string_view axis, int64_t offset, int64_t tag) {
  PointToPoint t{PointToPoint::Kind::send, const_cast<float*>(buffer), count, std::string(axis), offset, tag};
  if (peer_rank(mesh(), rank(), axis, offset) == rank())
    throw std::invalid_argument("send along " + std::string(axis) + " offset " + std::to_string(offset) +
                                " reaches this rank itself (hint: use batch for a self exchange)");
  batch(std::span<const PointToPoint>(&t, 1));
}

void NcclCommunicator::recv(float* buffer, int64_t count, std::string_view axis, int64_t offset, int64_t tag) {
  PointToPoint t{PointToPoint::Kind::recv, buffer, count, std::string(axis), offset, tag};
  if (peer_rank(mesh(), rank(), axis, offset) == rank())
    throw std::invalid_argument("recv along " + std::string(axis) + " offset " + std::to_string(offset) +
                                " reaches this rank itself (hint: use batch for a self exchange)");
  batch(std::span<const PointToPoint>(&t, 1));
}

// All transfers in one ncclGroupStart/End on the world communicator; a transfer to this rank itself is a
// device copy from the matching send of the batch (same tag, opposite offset).
void NcclCommunicator::batch(std::span<const PointToPoint> transfers) {
  Impl& s = *impl_;
  std::string what = "batch of " + std::to_string(transfers.size()) + " send/recv";
  for (const auto& t : transfers) {
    require_count(t.count, "batch");
    if (t.tag < 0) throw std::invalid_argument("tag " + std::to_string(t.tag) + " must be >= 0");
    peer_rank(mesh(), rank(), t.axis, t.offset);  // validates the axis
  }
  if (transfers.size() == 1) {
    const auto& t = transfers[0];
    what = std::string(t.kind == PointToPoint::Kind::send ? "send to " : "recv from ") + "rank " +
           std::to_string(peer_rank(mesh(), rank(), t.axis, t.offset)) + " along " + t.axis + " (" +
           std::to_string(t.count) + " floats, tag " + std::to_string(t.tag) + ")";
  }
  s.check_usable(what);
  // Self transfers: copy each self recv from the self send with the same tag.
  for (const auto& r : transfers) {
    if (r.kind != PointToPoint::Kind::recv || peer_rank(mesh(), rank(), r.axis, r.offset) != rank()) continue;
    const PointToPoint* match = nullptr;
    for (const auto& t : transfers)
      if (t.kind == PointToPoint::Kind::send && t.tag == r.tag && peer_rank(mesh(), rank(), t.axis, t.offset) == rank())
        match = &t;
    if (match == nullptr || match->count != r.count)
      throw std::invalid_argument(what + ": a recv from this rank itself has no send of the same tag and count");
    if (r.count > 0)
      MGT_CUDA_CHECK(cudaMemcpyAsync(r.buffer, match->buffer, static_cast<size_t>(r.count) * sizeof(float),
                                     cudaMemcpyDefault, s.stream));
  }
  ncclResult_t code = ncclGroupStart();
  for (const auto& t : transfers) {
    if (!queued(code)) break;
    const int peer = static_cast<int>(peer_rank(mesh(), rank(), t.axis, t.offset));
    if (peer == rank()) continue;
    code = t.kind == PointToPoint::Kind::send
               ? ncclSend(t.buffer, static_cast<size_t>(t.count), ncclFloat, peer, s.world_comm, s.stream)
               : ncclRecv(t.buffer, static_cast<size_t>(t.count), ncclFloat, peer, s.world_comm, s.stream);
  }
  const ncclResult_t end = ncclGroupEnd();
  s.check(queued(code) ? end : code, what, "ncclSend/ncclRecv");
  s.wait(what, {s.world_comm});
}

void NcclCommunicator::barrier(const Axes& axes) {
  Impl& s = *impl_;
  if (s.comm_for(axes) == nullptr) return;
  MGT_CUDA_CHECK(cudaMemsetAsync(s.scratch, 0, sizeof(float), s.stream));
  all_reduce(s.scratch, s.scratch, 1, axes);
}

}  // namespace mgt::rt
