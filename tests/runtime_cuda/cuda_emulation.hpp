// Enough of CUDA to run runtime/src/cuda/kernels_device.cuh on the CPU, for tests on machines without a
// GPU: one-dimensional grids and blocks; every thread of a block is a fiber (own stack) and the block's
// fibers run round-robin, each until its next __syncthreads (or shuffle), so a block barrier is a round
// of the scheduler. Blocks run one after another, so __shared__ arrays can be function-local statics.
// Kernels must reach their barriers uniformly (all threads or none), as CUDA requires anyway.
#pragma once

#include <setjmp.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

struct EmulatedDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline EmulatedDim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __shared__ static

using std::max;
using std::min;

struct __nv_bfloat16 {
  uint16_t bits;
};
/// Round to nearest even, as __float2bfloat16 (no NaN inputs here).
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(u >> 16)};
}

namespace cuda_emulation {

/// Why the emulation cannot run in this build, or nullptr: AddressSanitizer does not follow fibers switched
/// by _longjmp, and _FORTIFY_SOURCE's longjmp check rejects jumps between stacks.
inline const char* unsupported() {
#if defined(__SANITIZE_ADDRESS__)
  return "the CUDA emulation's fibers are not supported under AddressSanitizer";
#elif defined(_FORTIFY_SOURCE) && _FORTIFY_SOURCE > 0
  return "the CUDA emulation's fibers are not supported with _FORTIFY_SOURCE (longjmp between stacks)";
#else
  return nullptr;
#endif
}

// Fibers start through ucontext (makecontext / setcontext) and then switch with _setjmp / _longjmp, which,
// unlike swapcontext, makes no signal-mask system call per switch (the emulation switches at every barrier).
struct JumpBuffer {
  jmp_buf env;
};
struct Scheduler {
  jmp_buf main;
  std::vector<ucontext_t> start;
  std::vector<JumpBuffer> suspended;
  std::vector<char> started, done;
  unsigned current = 0;
  std::function<void()> body;
};
inline Scheduler* scheduler = nullptr;

/// Gives the CPU back to the scheduler: the calling fiber continues in the next round.
inline void yield() {
  if (_setjmp(scheduler->suspended[scheduler->current].env) == 0) _longjmp(scheduler->main, 1);
}

inline void fiber_entry() {
  scheduler->body();
  scheduler->done[scheduler->current] = 1;
  _longjmp(scheduler->main, 1);
}

// _setjmp returns twice in GCC's eyes; nothing of this frame changes between the save and the return
// (the fibers run on their own stacks), so -Wclobbered is a false positive here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wclobbered"
/// Runs body() as every thread of `grid` blocks of `block` threads.
inline void run_blocks(unsigned grid, unsigned block, std::function<void()> body) {
  Scheduler s;
  scheduler = &s;
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  s.body = std::move(body);
  s.start.resize(block);
  s.suspended.resize(block);
  static std::vector<std::vector<char>> stacks;  // 128 KiB per fiber, kept across launches
  while (stacks.size() < block) stacks.emplace_back(128 * 1024);
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx = {b, 0, 0};
    s.started.assign(block, 0);
    s.done.assign(block, 0);
    for (unsigned t = 0; t < block; ++t) {
      getcontext(&s.start[t]);
      s.start[t].uc_stack.ss_sp = stacks[t].data();
      s.start[t].uc_stack.ss_size = stacks[t].size();
      s.start[t].uc_link = nullptr;
      makecontext(&s.start[t], fiber_entry, 0);
    }
    for (bool running = true; running;) {  // one round = every fiber to its next barrier
      running = false;
      for (unsigned t = 0; t < block; ++t) {
        if (s.done[t]) continue;
        s.current = t;
        threadIdx = {t, 0, 0};
        if (_setjmp(s.main) == 0) {
          if (!s.started[t]) {
            s.started[t] = 1;
            setcontext(&s.start[t]);
          }
          _longjmp(s.suspended[t].env, 1);
        }
        running = running || !s.done[t];
      }
      if (running && std::count(s.done.begin(), s.done.end(), 1) != 0)
        throw std::logic_error("cuda emulation: some threads of a block returned while others wait at a barrier");
    }
  }
  scheduler = nullptr;
}
#pragma GCC diagnostic pop

/// Runs kernel(args...) on `grid` blocks of `block` threads (kernel<<<grid, block>>>(args...)).
template <class... Params, class... Args>
void launch(unsigned grid, unsigned block, void (*kernel)(Params...), Args... args) {
  run_blocks(grid, block, [&] { kernel(args...); });
}

}  // namespace cuda_emulation

inline void __syncthreads() { cuda_emulation::yield(); }

inline int __syncthreads_or(int predicate) {
  static int any = 0;
  cuda_emulation::yield();  // every thread has left the previous use
  if (predicate) any = 1;
  cuda_emulation::yield();
  const int result = any;
  cuda_emulation::yield();
  if (threadIdx.x == 0) any = 0;
  return result;
}

template <class T>
T __shfl_xor_sync(unsigned /*mask*/, T value, int lane_mask) {
  static double exchange[1024];
  exchange[threadIdx.x] = static_cast<double>(value);
  cuda_emulation::yield();
  const T result = static_cast<T>(exchange[threadIdx.x ^ static_cast<unsigned>(lane_mask)]);
  cuda_emulation::yield();
  return result;
}

template <class T>
T atomicAdd(T* address, T value) {
  const T old = *address;  // fibers on one OS thread: no interleaving inside this call
  *address = old + value;
  return old;
}
