// MpiCommunicator: rt::Communicator on the MPI C API, and the collective timing for probe.
// Design: docs/runtime_communicator.md.
#include "mgt/runtime/mpi_communicator.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/runtime/safetensors.hpp"

#include <mpi.h>

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define MGT_LSAN_DISABLE() __lsan_disable()
#define MGT_LSAN_ENABLE() __lsan_enable()
#else
#define MGT_LSAN_DISABLE() ((void)0)
#define MGT_LSAN_ENABLE() ((void)0)
#endif

namespace mgt::rt {

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "unknown mpi error";
  return std::string(text, static_cast<size_t>(length));
}

void check(int code, const std::string& call) {
  if (code != MPI_SUCCESS) throw MpiError(call, code);
}

// Open MPI's mpirun --enable-recovery (OMPI_MCA_orte_enable_recovery=1 in the ranks' environment)
// tolerates failed processes by design and then exits 0 whatever the ranks' statuses and MPI_Abort
// (Open MPI 4.1.4: rank 0 calling MPI_Abort(4), _exit(4) or returning 4 after MPI_Finalize all give
// mpirun status 0, 4 without the flag). A rank that ends the job for a lost peer asks its launcher
// to end instead: SIGTERM to the parent process when that is mpirun itself (one node, the `run`
// case; mpirun then exits 1 and stops the other ranks). Under a remote daemon (orted) or a wrapper
// script it does nothing: the rank's own exit status and stderr line remain the evidence.
bool parent_is_recovering_mpirun() {
  const char* recovery = std::getenv("OMPI_MCA_orte_enable_recovery");
  if (recovery == nullptr || std::strcmp(recovery, "1") != 0) return false;
  std::ifstream comm("/proc/" + std::to_string(::getppid()) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name == "mpirun" || name == "mpiexec" || name == "orterun" || name == "prterun";
}

}  // namespace

std::string comm_timeout_range_problem(double timeout_s) {
  char text[160];
  std::snprintf(text, sizeof text,
                "must be in [0, 1e9] seconds, got %g (a deadline is the clock's nanosecond count plus the timeout, "
                "which overflows past about 9.2e9 s)",
                timeout_s);
  return text;
}

namespace {

// ---- process-wide MPI ownership: mgt finalises only what it initialised ----

bool g_mgt_initialised = false;  // MPI_Init was called by mgt
int g_live = 0;                  // live MpiCommunicators

void finalise_if_owned() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (g_mgt_initialised && !finalised) {
    MGT_LSAN_DISABLE();
    MPI_Finalize();
    MGT_LSAN_ENABLE();
  }
}

/// Initialises MPI unless it already is; returns the provided thread level.
int ensure_mpi(bool thread_multiple) {
  int initialised = 0, finalised = 0;
  check(MPI_Initialized(&initialised), "MPI_Initialized");
  check(MPI_Finalized(&finalised), "MPI_Finalized");
  if (finalised)
    throw std::runtime_error(
        "mpi was already finalised in this process (hint: keep one MpiCommunicator alive for the whole run)");
  int provided = MPI_THREAD_SINGLE;
  if (!initialised) {
    int required = thread_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
    // What Open MPI allocates while it starts and keeps to the end is its own, not a leak of ours
    // (the sanitizer build, docs/hardening.md).
    MGT_LSAN_DISABLE();
    const int rc = MPI_Init_thread(nullptr, nullptr, required, &provided);
    MGT_LSAN_ENABLE();
    check(rc, "MPI_Init_thread");
    g_mgt_initialised = true;
    std::atexit(finalise_if_owned);
  } else {
    check(MPI_Query_thread(&provided), "MPI_Query_thread");
  }
  return provided;
}

int to_int(int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX)
    throw std::invalid_argument(std::string(what) + " " + std::to_string(value) +
                                " is out of range for mpi (hint: 0 .. 2^31-1 elements per call)");
  return static_cast<int>(value);
}

/// Throws unless the buffers of an out-of-place `kind` call are disjoint (extents: the collective table).
void require_disjoint(const Communicator& comm, const char* op, ir::CollectiveKind kind, const float* send,
                      const float* recv, int64_t count, const Axes& axes) {
  if (buffers_overlap(comm, kind, send, recv, count, axes))
    throw std::invalid_argument(std::string(op) +
                                ": send and recv buffers overlap but are not the in-place form "
                                "(hint: see Communicator in communicator.hpp)");
}

std::string axes_text(const Axes& axes) {
  std::string text;
  for (const auto& a : axes) text += (text.empty() ? "" : ",") + a;
  return text.empty() ? "{}" : text;
}

}  // namespace

MpiError::MpiError(const std::string& call, int code)
    : std::runtime_error(call + " failed: " + mpi_error_text(code) + " (mpi error " + std::to_string(code) + ")"),
      code_(code) {}

int64_t mpi_world_size() {
  ensure_mpi(/*thread_multiple=*/false);
  int size = 1;
  check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  return size;
}

struct MpiCommunicator::Impl {
  ir::Mesh mesh;
  int rank = 0;
  int world = 1;
  int thread_level = MPI_THREAD_SINGLE;
  int tag_ub = 32767;
  MPI_Comm world_comm = MPI_COMM_NULL;  // duplicate of MPI_COMM_WORLD, for send/recv
  uint32_t trivial = 0;                 // mask of axes of size 1
  std::vector<MPI_Comm> groups;         // indexed by axis mask (bit i = mesh axis i); canonical masks only
  std::vector<std::vector<int>> members;  // world ranks of each group, by mask
  double timeout_s = 0;                 // MpiOptions::timeout_s
  MPI_Comm ping_comm = MPI_COMM_NULL;   // liveness pings while a timed call waits (timeout_s > 0)

  /// The canonical mask of `axes` (axes of size 1 dropped); throws for an unknown axis.
  uint32_t mask_of(const Axes& axes) const {
    uint32_t mask = 0;
    for (const auto& a : axes) mask |= 1u << detail::require_axis(mesh, a);
    return mask & ~trivial;
  }
  MPI_Comm group(const Axes& axes) const {
    fault_point("collective");  // crash tests: MGT_FAULT_KILL_AT=collective:<n> (safetensors.hpp)
    return groups[mask_of(axes)];
  }
  const std::vector<int>& group_members(const Axes& axes) const { return members[mask_of(axes)]; }
  int group_rank(const Axes& axes) const { return static_cast<int>(rt::group_rank(mesh, rank, axes)); }
  int group_size(uint32_t mask) const {
    int n = 1;
    for (size_t i = 0; i < mesh.axes.size(); ++i)
      if (mask & (1u << i)) n *= static_cast<int>(mesh.axes[i].size);
    return n;
  }

  void free_all() {
    for (MPI_Comm& c : groups)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    groups.clear();
    if (world_comm != MPI_COMM_NULL) MPI_Comm_free(&world_comm);
    if (ping_comm != MPI_COMM_NULL) MPI_Comm_free(&ping_comm);
  }

  // ---- deadlines (MpiOptions::timeout_s) ----

  static constexpr int kPingTag = 1, kPongTag = 2;

  /// Answers every liveness ping that has arrived (a rank waiting in a call is alive).
  void serve_pings() const {
    static const int pong = 1;
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, ping_comm, &flag, &st) != MPI_SUCCESS || !flag) return;
      int ping = 0;
      MPI_Recv(&ping, 1, MPI_INT, st.MPI_SOURCE, kPingTag, ping_comm, MPI_STATUS_IGNORE);
      MPI_Request r = MPI_REQUEST_NULL;
      MPI_Isend(&pong, 1, MPI_INT, st.MPI_SOURCE, kPongTag, ping_comm, &r);
      MPI_Request_free(&r);
    }
  }

  /// Waits for `requests` (issued by `call`) until the deadline, answering pings meanwhile; past it,
  /// lost() ends the job. `peers` are the world ranks the call waits for.
  void wait(std::vector<MPI_Request>& requests, std::vector<MPI_Status>& statuses, const std::string& call,
            const std::vector<int>& peers) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    statuses.resize(requests.size());
    for (;;) {
      int done = 0;
      check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data()),
            "MPI_Testall (" + call + ")");
      if (done) return;
      serve_pings();
      if (std::chrono::steady_clock::now() > deadline) lost(call, peers);
      sched_yield();
    }
  }

  void wait(MPI_Request request, const std::string& call, const std::vector<int>& peers) const {
    std::vector<MPI_Request> requests{request};
    std::vector<MPI_Status> statuses;
    wait(requests, statuses, call, peers);
  }

  /// Past the deadline of `call`: pings `peers`, gives them a grace period to answer, prints one line
  /// naming the call and the silent ranks, and aborts the job.
  [[noreturn]] void lost(const std::string& call, const std::vector<int>& peers) const {
    static const int ping = 1;
    std::vector<int> others;
    for (int p : peers)
      if (p != rank && std::find(others.begin(), others.end(), p) == others.end()) others.push_back(p);
    std::vector<int> answers(others.size(), 0);
    std::vector<MPI_Request> pongs(others.size(), MPI_REQUEST_NULL);
    for (size_t i = 0; i < others.size(); ++i) {
      MPI_Request r = MPI_REQUEST_NULL;
      MPI_Isend(&ping, 1, MPI_INT, others[i], kPingTag, ping_comm, &r);
      MPI_Request_free(&r);
      MPI_Irecv(&answers[i], 1, MPI_INT, others[i], kPongTag, ping_comm, &pongs[i]);
    }
    const double grace_s = std::clamp(timeout_s, 1.0, 10.0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
    std::vector<int> answered(others.size(), 0);
    while (std::chrono::steady_clock::now() < until) {
      bool all = true;
      for (size_t i = 0; i < others.size(); ++i) {
        if (!answered[i]) MPI_Test(&pongs[i], &answered[i], MPI_STATUS_IGNORE);
        all = all && answered[i];
      }
      if (all) break;
      serve_pings();
      sched_yield();
    }
    std::string silent;
    for (size_t i = 0; i < others.size(); ++i)
      if (!answered[i]) silent += (silent.empty() ? "" : ", ") + std::to_string(others[i]);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
    std::string line = "mgt: rank " + std::to_string(rank) + ": " + call + " did not complete within --comm-timeout " +
                       seconds + " s; ";
    if (!silent.empty())
      line += "lost rank " + silent + " (no answer to a ping within " + std::to_string(static_cast<int>(grace_s)) +
              " s: killed, crashed or frozen)";
    else
      line += "every rank it waits for answers, so they are alive but did not all reach this call "
              "(ranks running different schedules?)";
    const bool stop_launcher = parent_is_recovering_mpirun();
    line += stop_launcher ? "; aborting the job (mpirun --enable-recovery ignores exit statuses: stopping mpirun)\n"
                          : "; aborting the job\n";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    if (stop_launcher) ::kill(::getppid(), SIGTERM);
    MPI_Abort(MPI_COMM_WORLD, kCommTimeoutExitCode);
    std::_Exit(kCommTimeoutExitCode);
  }

  bool timed() const { return timeout_s > 0; }

  /// Steps 2 and 3 of the class comment: world size check, then one split per canonical axis set.
  void create_groups() {
    if (world != ir::num_ranks(mesh)) {
      std::string shape;
      for (const auto& a : mesh.axes) shape += (shape.empty() ? "" : " ") + a.name + "=" + std::to_string(a.size);
      throw ir::InputError("mpi", "world size",
                           "the launcher started " + std::to_string(world) + " ranks but the mesh " +
                               (shape.empty() ? "{}" : shape) + " has " + std::to_string(ir::num_ranks(mesh)),
                           "run mpirun -np " + std::to_string(ir::num_ranks(mesh)) + " or change the plan");
    }
    check(MPI_Comm_dup(MPI_COMM_WORLD, &world_comm), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(world_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    int* ub = nullptr;
    int found = 0;
    check(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
    if (found && ub) tag_ub = *ub;

    std::vector<int64_t> coords = ir::rank_coords(mesh, rank);
    groups.assign(size_t{1} << mesh.axes.size(), MPI_COMM_NULL);
    for (uint32_t mask = 0; mask < groups.size(); ++mask) {  // same order on every rank
      if (mask & trivial) continue;
      int color = 0, key = 0;
      for (size_t i = 0; i < mesh.axes.size(); ++i) {
        int size = static_cast<int>(mesh.axes[i].size), c = static_cast<int>(coords[i]);
        if (mask & (1u << i)) key = key * size + c;
        else color = color * size + c;
      }
      check(MPI_Comm_split(world_comm, color, key, &groups[mask]), "MPI_Comm_split");
      check(MPI_Comm_set_errhandler(groups[mask], MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      int got_rank = -1, got_size = -1;
      check(MPI_Comm_rank(groups[mask], &got_rank), "MPI_Comm_rank");
      check(MPI_Comm_size(groups[mask], &got_size), "MPI_Comm_size");
      if (got_rank != key || got_size != group_size(mask))
        throw std::logic_error("mpi split gave rank " + std::to_string(got_rank) + " of " + std::to_string(got_size) +
                               ", expected " + std::to_string(key) + " of " + std::to_string(group_size(mask)));
    }
    // World ranks of each group, named when a timed call finds one of them lost.
    members.assign(groups.size(), {});
    MPI_Group world_group = MPI_GROUP_NULL;
    check(MPI_Comm_group(world_comm, &world_group), "MPI_Comm_group");
    for (uint32_t mask = 0; mask < groups.size(); ++mask) {
      if (groups[mask] == MPI_COMM_NULL) continue;
      MPI_Group g = MPI_GROUP_NULL;
      check(MPI_Comm_group(groups[mask], &g), "MPI_Comm_group");
      const int n = group_size(mask);
      std::vector<int> local(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) local[static_cast<size_t>(i)] = i;
      members[mask].resize(static_cast<size_t>(n));
      check(MPI_Group_translate_ranks(g, n, local.data(), world_group, members[mask].data()),
            "MPI_Group_translate_ranks");
      MPI_Group_free(&g);
    }
    MPI_Group_free(&world_group);
    if (timed()) {
      check(MPI_Comm_dup(MPI_COMM_WORLD, &ping_comm), "MPI_Comm_dup");
      check(MPI_Comm_set_errhandler(ping_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    }
  }

  int peer(std::string_view axis, int64_t offset) const {
    return static_cast<int>(rt::peer_rank(mesh, rank, axis, offset));
  }
  int checked_tag(int64_t tag) const {
    if (tag < 0 || tag > tag_ub)
      throw std::invalid_argument("tag " + std::to_string(tag) + " is outside mpi's range 0.." +
                                  std::to_string(tag_ub) + " (hint: renumber the schedule's tags)");
    return static_cast<int>(tag);
  }
  /// all_reduce (op MPI_SUM) and all_reduce_max (MPI_MAX): in place when send == recv, else the buffers
  /// must not overlap; non-blocking and waited for under the timeout when one is set.
  void all_reduce(const Communicator& self, const float* send, float* recv, int64_t count, const Axes& axes,
                  MPI_Op op, const char* what, const char* call_prefix) {
    MPI_Comm comm = group(axes);
    int n = to_int(count, (std::string(what) + " count").c_str());
    if (send != recv) require_disjoint(self, what, ir::CollectiveKind::all_reduce, send, recv, count, axes);
    const std::string call = call_prefix + axes_text(axes);
    if (timed()) {
      MPI_Request r = MPI_REQUEST_NULL;
      check(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, n, MPI_FLOAT, op, comm, &r), call);
      return wait(r, call, group_members(axes));
    }
    check(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n, MPI_FLOAT, op, comm), call);
  }
  static void check_received(const MPI_Status& status, int count, std::string_view axis, int64_t offset) {
    int got = 0;
    check(MPI_Get_count(&status, MPI_FLOAT, &got), "MPI_Get_count");
    if (got != count)
      throw std::runtime_error("recv along " + std::string(axis) + " offset " + std::to_string(offset) + " expected " +
                               std::to_string(count) + " elements but the peer sent " + std::to_string(got) +
                               " (hint: the send and recv sizes of the schedule disagree)");
  }
};

MpiCommunicator::MpiCommunicator(const ir::Mesh& mesh, MpiOptions options) : impl_(std::make_unique<Impl>()) {
  if (mesh.axes.size() > 16)
    throw std::invalid_argument("mesh has " + std::to_string(mesh.axes.size()) + " axes, at most 16 are supported");
  for (const auto& a : mesh.axes)
    if (a.size < 1) throw std::invalid_argument("mesh axis '" + a.name + "' has size " + std::to_string(a.size));
  if (!(options.timeout_s >= 0) || options.timeout_s > kMaxCommTimeoutSeconds)
    throw ir::InputError("mpi", "--comm-timeout", comm_timeout_range_problem(options.timeout_s), "0 waits forever");
  impl_->mesh = mesh;
  impl_->timeout_s = options.timeout_s;
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    if (mesh.axes[i].size == 1) impl_->trivial |= 1u << i;
  impl_->thread_level = ensure_mpi(options.thread_multiple);
  ++g_live;
  try {
    check(MPI_Comm_rank(MPI_COMM_WORLD, &impl_->rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &impl_->world), "MPI_Comm_size");
    MGT_LSAN_DISABLE();  // communicators Open MPI caches for the whole run
    try {
      impl_->create_groups();
    } catch (...) {
      MGT_LSAN_ENABLE();
      throw;
    }
    MGT_LSAN_ENABLE();
  } catch (...) {
    impl_->free_all();
    if (--g_live == 0) finalise_if_owned();
    throw;
  }
}

MpiCommunicator::~MpiCommunicator() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) impl_->free_all();
  if (--g_live == 0) finalise_if_owned();
}

int64_t MpiCommunicator::rank() const { return impl_->rank; }
int64_t MpiCommunicator::world_size() const { return impl_->world; }
const ir::Mesh& MpiCommunicator::mesh() const { return impl_->mesh; }
bool MpiCommunicator::thread_multiple() const { return impl_->thread_level == MPI_THREAD_MULTIPLE; }

void MpiCommunicator::all_reduce(const float* send, float* recv, int64_t count, const Axes& axes) {
  impl_->all_reduce(*this, send, recv, count, axes, MPI_SUM, "all_reduce", "MPI_Allreduce over ");
}

void MpiCommunicator::all_reduce_max(const float* send, float* recv, int64_t count, const Axes& axes) {
  impl_->all_reduce(*this, send, recv, count, axes, MPI_MAX, "all_reduce_max", "MPI_Allreduce (max) over ");
}

void MpiCommunicator::all_gather(const float* send, float* recv, int64_t count, const Axes& axes) {
  MPI_Comm comm = impl_->group(axes);
  int n = to_int(count, "all_gather count");
  bool in_place = send == recv + impl_->group_rank(axes) * count;
  if (!in_place) require_disjoint(*this, "all_gather", ir::CollectiveKind::all_gather, send, recv, count, axes);
  const std::string call = "MPI_Allgather over " + axes_text(axes);
  if (impl_->timed()) {
    MPI_Request r = MPI_REQUEST_NULL;
    check(in_place ? MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_FLOAT, comm, &r)
                   : MPI_Iallgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm, &r),
          call);
    return impl_->wait(r, call, impl_->group_members(axes));
  }
  check(in_place ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_FLOAT, comm)
                 : MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm),
        call);
}

void MpiCommunicator::reduce_scatter(const float* send, float* recv, int64_t count, const Axes& axes) {
  MPI_Comm comm = impl_->group(axes);
  int n = to_int(count, "reduce_scatter count");
  const int64_t g = impl_->group_rank(axes);
  std::string call = "MPI_Reduce_scatter_block over " + axes_text(axes);
  if (recv == send + g * count) {  // NCCL's in-place form: MPI leaves the result at the start
    float* buffer = recv - g * count;
    if (impl_->timed()) {
      MPI_Request r = MPI_REQUEST_NULL;
      check(MPI_Ireduce_scatter_block(MPI_IN_PLACE, buffer, n, MPI_FLOAT, MPI_SUM, comm, &r), call);
      impl_->wait(r, call, impl_->group_members(axes));
    } else {
      check(MPI_Reduce_scatter_block(MPI_IN_PLACE, buffer, n, MPI_FLOAT, MPI_SUM, comm), call);
    }
    // count 0: the buffers may be null, which memmove must not be given (UBSan, issue 8).
    if (g != 0 && count > 0) std::memmove(recv, buffer, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  require_disjoint(*this, "reduce_scatter", ir::CollectiveKind::reduce_scatter, send, recv, count, axes);
  if (impl_->timed()) {
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Ireduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, comm, &r), call);
    return impl_->wait(r, call, impl_->group_members(axes));
  }
  check(MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, comm), call);
}

void MpiCommunicator::all_to_all(const float* send, float* recv, int64_t count, const Axes& axes) {
  MPI_Comm comm = impl_->group(axes);
  int n = to_int(count, "all_to_all count");
  if (send != recv) require_disjoint(*this, "all_to_all", ir::CollectiveKind::all_to_all, send, recv, count, axes);
  const std::string call = "MPI_Alltoall over " + axes_text(axes);
  if (impl_->timed()) {
    MPI_Request r = MPI_REQUEST_NULL;
    check(send == recv ? MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_FLOAT, comm, &r)
                       : MPI_Ialltoall(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm, &r),
          call);
    return impl_->wait(r, call, impl_->group_members(axes));
  }
  check(send == recv ? MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_FLOAT, comm)
                     : MPI_Alltoall(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm),
        call);
}

void MpiCommunicator::broadcast(float* buffer, int64_t count, const Axes& axes) {
  MPI_Comm comm = impl_->group(axes);
  const std::string call = "MPI_Bcast over " + axes_text(axes);
  if (impl_->timed()) {
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Ibcast(buffer, to_int(count, "broadcast count"), MPI_FLOAT, /*root=*/0, comm, &r), call);
    return impl_->wait(r, call, impl_->group_members(axes));
  }
  check(MPI_Bcast(buffer, to_int(count, "broadcast count"), MPI_FLOAT, /*root=*/0, comm), call);
}

void MpiCommunicator::send(const float* buffer, int64_t count, std::string_view axis, int64_t offset, int64_t tag) {
  int peer = impl_->peer(axis, offset);
  if (peer == impl_->rank)
    throw std::invalid_argument("send along " + std::string(axis) + " offset " + std::to_string(offset) +
                                " reaches this rank itself (hint: issue it with its recv in batch())");
  const std::string call = "MPI_Ssend to rank " + std::to_string(peer) + " along " + std::string(axis);
  if (impl_->timed()) {
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Issend(buffer, to_int(count, "send count"), MPI_FLOAT, peer, impl_->checked_tag(tag), impl_->world_comm, &r),
          call);
    return impl_->wait(r, call, {peer});
  }
  check(MPI_Ssend(buffer, to_int(count, "send count"), MPI_FLOAT, peer, impl_->checked_tag(tag), impl_->world_comm),
        call);
}

void MpiCommunicator::recv(float* buffer, int64_t count, std::string_view axis, int64_t offset, int64_t tag) {
  int peer = impl_->peer(axis, offset);
  if (peer == impl_->rank)
    throw std::invalid_argument("recv along " + std::string(axis) + " offset " + std::to_string(offset) +
                                " reaches this rank itself (hint: issue it with its send in batch())");
  int n = to_int(count, "recv count");
  const std::string call = "MPI_Recv from rank " + std::to_string(peer) + " along " + std::string(axis);
  if (impl_->timed()) {
    std::vector<MPI_Request> r(1, MPI_REQUEST_NULL);
    std::vector<MPI_Status> statuses;
    check(MPI_Irecv(buffer, n, MPI_FLOAT, peer, impl_->checked_tag(tag), impl_->world_comm, &r[0]), call);
    impl_->wait(r, statuses, call, {peer});
    return Impl::check_received(statuses[0], n, axis, offset);
  }
  MPI_Status status;
  check(MPI_Recv(buffer, n, MPI_FLOAT, peer, impl_->checked_tag(tag), impl_->world_comm, &status), call);
  Impl::check_received(status, n, axis, offset);
}

void MpiCommunicator::batch(std::span<const PointToPoint> transfers) {
  struct Resolved {
    int peer, count, tag;
  };
  std::vector<Resolved> resolved;  // every transfer validated before any is posted
  for (const PointToPoint& t : transfers)
    resolved.push_back({impl_->peer(t.axis, t.offset), to_int(t.count, "batch count"), impl_->checked_tag(t.tag)});
  std::vector<MPI_Request> requests(transfers.size(), MPI_REQUEST_NULL);
  // Receives first, so every send of the batch finds its match posted.
  for (auto kind : {PointToPoint::Kind::recv, PointToPoint::Kind::send}) {
    for (size_t i = 0; i < transfers.size(); ++i) {
      const PointToPoint& t = transfers[i];
      const Resolved& r = resolved[i];
      if (t.kind != kind) continue;
      if (kind == PointToPoint::Kind::recv)
        check(MPI_Irecv(t.buffer, r.count, MPI_FLOAT, r.peer, r.tag, impl_->world_comm, &requests[i]),
              "MPI_Irecv along " + t.axis);
      else
        check(MPI_Issend(t.buffer, r.count, MPI_FLOAT, r.peer, r.tag, impl_->world_comm, &requests[i]),
              "MPI_Issend along " + t.axis);
    }
  }
  std::vector<MPI_Status> statuses(transfers.size());
  if (impl_->timed()) {
    std::vector<int> peers;
    std::string call = "send/recv batch with rank";
    for (const Resolved& r : resolved) {
      call += (peers.empty() ? " " : ", ") + std::to_string(r.peer);
      peers.push_back(r.peer);
    }
    impl_->wait(requests, statuses, call, peers);
  } else {
    check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), statuses.data()), "MPI_Waitall");
  }
  for (size_t i = 0; i < transfers.size(); ++i)
    if (transfers[i].kind == PointToPoint::Kind::recv)
      Impl::check_received(statuses[i], static_cast<int>(transfers[i].count), transfers[i].axis, transfers[i].offset);
}

void MpiCommunicator::barrier(const Axes& axes) {
  const std::string call = "MPI_Barrier over " + axes_text(axes);
  if (impl_->timed()) {
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(impl_->group(axes), &r), call);
    return impl_->wait(r, call, impl_->group_members(axes));
  }
  check(MPI_Barrier(impl_->group(axes)), call);
}

// ---- timing (nccl-tests) ----

namespace {

/// The value group rank `g` sends at index `i`: small integers, so sums of up to 2^20 ranks are exact.
float timing_input(int64_t g, int64_t i) { return static_cast<float>((g * 5 + i) % 13); }

}  // namespace

CollectiveTiming time_collective(Communicator& comm, ir::CollectiveKind kind, const Axes& axes, int64_t bytes,
                                 int iterations, int warmup) {
  using ir::CollectiveKind;
  const int64_t n = comm.group_size(axes), g = comm.group_rank(axes);
  const int64_t elements = bytes / static_cast<int64_t>(sizeof(float));
  const bool chunked = ir::count_is_per_member(kind);
  if (kind == CollectiveKind::send_recv)
    throw std::invalid_argument("time_collective: send_recv is point-to-point, not a group collective "
                                "(hint: time all_reduce, all_gather, reduce_scatter, all_to_all or broadcast)");
  if (bytes < 0 || bytes % static_cast<int64_t>(sizeof(float)) != 0 || (chunked && elements % n != 0))
    throw std::invalid_argument("time_collective: " + std::to_string(bytes) + " bytes is not a multiple of " +
                                std::to_string(chunked ? 4 * n : 4) + " (hint: 4 bytes per float x group size " +
                                std::to_string(n) + ")");
  if (iterations < 1) throw std::invalid_argument("time_collective: iterations must be at least 1");
  // The buffers and the call's count from the collective table, in floats.
  const ir::CollectiveBytes table = ir::collective_bytes(kind, bytes, n);
  const int64_t chunk = table.param_bytes / static_cast<int64_t>(sizeof(float));
  const int64_t send_count = table.send_bytes / static_cast<int64_t>(sizeof(float));
  const int64_t recv_count = table.recv_bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> send(static_cast<size_t>(send_count)), recv(static_cast<size_t>(recv_count), -1.0f);
  for (int64_t i = 0; i < send_count; ++i) send[i] = timing_input(g, i);
  auto call = [&] {
    switch (kind) {
      case CollectiveKind::all_reduce: comm.all_reduce(send.data(), recv.data(), chunk, axes); break;
      case CollectiveKind::all_gather: comm.all_gather(send.data(), recv.data(), chunk, axes); break;
      case CollectiveKind::reduce_scatter: comm.reduce_scatter(send.data(), recv.data(), chunk, axes); break;
      case CollectiveKind::all_to_all: comm.all_to_all(send.data(), recv.data(), chunk, axes); break;
      case CollectiveKind::broadcast: comm.broadcast(send.data(), chunk, axes); break;
      case CollectiveKind::send_recv: break;  // rejected above
    }
  };
  for (int w = 0; w < warmup; ++w) call();
  comm.barrier(axes);
  auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < iterations; ++it) call();
  double time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iterations;

  // Check every element against the result computed from timing_input.
  int64_t wrong = 0;
  auto sum_over_group = [&](int64_t i) {
    float s = 0;
    for (int64_t h = 0; h < n; ++h) s += timing_input(h, i);
    return s;
  };
  const std::vector<float>& result = kind == CollectiveKind::broadcast ? send : recv;
  for (int64_t i = 0; i < static_cast<int64_t>(result.size()); ++i) {
    float expected = 0;
    switch (kind) {
      case CollectiveKind::all_reduce: expected = sum_over_group(i); break;
      case CollectiveKind::all_gather: expected = timing_input(i / chunk, i % chunk); break;
      case CollectiveKind::reduce_scatter: expected = sum_over_group(g * chunk + i); break;
      case CollectiveKind::all_to_all: expected = timing_input(i / chunk, g * chunk + i % chunk); break;
      case CollectiveKind::broadcast: expected = timing_input(0, i); break;
      case CollectiveKind::send_recv: break;  // rejected above
    }
    wrong += result[static_cast<size_t>(i)] != expected;
  }

  // Mean time and total wrong over the group (floats: the time to ~1e-7, the count exactly to 2^24).
  float totals[2] = {static_cast<float>(time_s), static_cast<float>(wrong)};
  comm.all_reduce(totals, totals, 2, axes);
  return {.time_s = static_cast<double>(totals[0]) / static_cast<double>(n),
          .wrong = static_cast<int64_t>(totals[1])};
}

double algbw_gbps(int64_t bytes, double time_s) { return time_s > 0 ? static_cast<double>(bytes) / time_s / 1e9 : 0; }

double busbw_gbps(ir::CollectiveKind kind, int64_t group_size, int64_t bytes, double time_s) {
  return algbw_gbps(bytes, time_s) * ir::bus_factor(kind, group_size);
}

}  // namespace mgt::rt
