// One reusable fork-join thread pool per process, and `parallel_for` on top of it.
//
//   parallel_for(num_rows, bytes_per_row, num_threads, [&](std::int64_t begin, std::int64_t end) {
//     for (auto r = begin; r < end; ++r) process_row(r);
//   });
//
// The caller's thread takes part in every job, so `num_threads` counts it. Workers are created
// lazily (the first job that needs them) and then reused for the life of the process: a call
// never creates a thread once the pool has grown to the size asked for. Between jobs a worker
// spins briefly (a kernel call often follows another) and then sleeps on a condition variable,
// so an idle pool costs no CPU. Small jobs (less than kMinBytesPerThread of traffic per thread)
// run on the caller alone: waking a thread costs more than it saves.
//
// The thread count comes from the Python side (torch.get_num_threads() or the
// MLLM_KERNEL_NUM_THREADS environment variable, see mllm_kernel/cpu/jit/_threads.py) as a
// plain argument of each kernel, so torch.set_num_threads() applies to the next call.
//
// Jobs from several caller threads (and modules) are serialised. A forked child must not use a
// pool its parent started (the workers do not exist there); PyTorch has the same rule for its
// own pool. The pool is compiled once, into the host runtime (mllm_kernel/csrc/thread_pool.cpp):
// a kernel's module parses only this header, and the pool itself is built on POSIX threads, not
// <thread>, <mutex> and <condition_variable>, so that it compiles quickly beside a first call's
// module.
#pragma once

#include <mllm_kernel/host_runtime.hpp>
#include <mllm_kernel/integer.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

/// Below this much memory traffic per thread a job runs single-threaded.
inline constexpr std::int64_t kMinBytesPerThread = 64 * 1024;
/// Upper bound on the pool's size, whatever the caller asks for.
inline constexpr int kMaxThreads = 256;

/// Calls invoke(context, i) for every i in [0, num_tasks) across the caller and num_tasks - 1
/// workers of the process's pool, and returns when all have finished. Task i may run on any
/// thread; the caller runs tasks too. `invoke` must not throw.
MLLM_KERNEL_HOST_API void run_tasks(int num_tasks, void (*invoke)(const void*, int), const void* context);

/// Calls fn(begin, end) on contiguous slices of [0, num_items) across up to `num_threads`
/// threads, fewer when the job moves less than kMinBytesPerThread per thread.
template <typename Fn>
void parallel_for(std::int64_t num_items, std::int64_t bytes_per_item, std::int64_t num_threads, const Fn& fn) {
  using host::max_of;
  using host::min_of;
  if (num_items <= 0) return;
  const std::int64_t by_size = max_of(std::int64_t{1}, num_items * bytes_per_item / kMinBytesPerThread);
  const int threads = static_cast<int>(max_of(
      std::int64_t{1}, min_of(min_of(num_threads, num_items), min_of(by_size, std::int64_t{kMaxThreads}))));
  if (threads == 1) {
    fn(std::int64_t{0}, num_items);
    return;
  }
  const auto slice = [&](int t) { fn(num_items * t / threads, num_items * (t + 1) / threads); };
  run_tasks(
      threads, [](const void* context, int t) { (*static_cast<const decltype(slice)*>(context))(t); }, &slice);
}

}  // namespace mllm_kernel::cpu
