// One reusable fork-join thread pool per loaded module, and `parallel_for` on top of it.
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
// Jobs from several caller threads are serialised. A forked child must not use a pool its
// parent started (the workers do not exist there); PyTorch has the same rule for its own pool.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>
#define MLLM_KERNEL_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define MLLM_KERNEL_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define MLLM_KERNEL_CPU_RELAX() ((void)0)
#endif

namespace mllm_kernel::cpu {

/// Below this much memory traffic per thread a job runs single-threaded.
inline constexpr std::int64_t kMinBytesPerThread = 64 * 1024;
/// Upper bound on the pool's size, whatever the caller asks for.
inline constexpr int kMaxThreads = 256;

/// A fork-join pool: `run(n, task)` calls task(0..n-1) across the caller and n-1 workers.
class ThreadPool {
 public:
  /// The module's pool (created on first use, never destroyed: joining threads while a
  /// shared library unloads at exit is unsafe, and the OS reclaims them).
  static ThreadPool& global() {
    static ThreadPool* pool = new ThreadPool();
    return *pool;
  }

  /// Runs task(i) for every i in [0, num_tasks) and returns when all have finished. Task i
  /// may run on any thread; the caller runs tasks too. `task` must not throw.
  template <typename Task>
  void run(int num_tasks, const Task& task) {
    if (num_tasks <= 1) {
      if (num_tasks == 1) task(0);
      return;
    }
    std::lock_guard<std::mutex> job_guard(job_mutex_);
    ensure_workers(num_tasks - 1);
    std::uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation = ++generation_;
      job_ = Job{&call<Task>, &task, num_tasks};
      pending_.store(num_tasks, std::memory_order_relaxed);
      state_.store(generation << 32, std::memory_order_release);
    }
    wake_.notify_all();
    work_on(generation, job_);
    // Spin until the workers finish their share: jobs are short, and sleeping would cost a
    // wake-up latency on the critical path.
    while (pending_.load(std::memory_order_acquire) != 0) MLLM_KERNEL_CPU_RELAX();
  }

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

 private:
  /// One job: a type-erased task and its number of tasks.
  struct Job {
    void (*invoke)(const void*, int) = nullptr;
    const void* context = nullptr;
    int num_tasks = 0;
  };

  template <typename Task>
  static void call(const void* context, int index) {
    (*static_cast<const Task*>(context))(index);
  }

  ThreadPool() = default;

  /// Claims and runs tasks of job `generation` until none is left. The claim is a CAS on
  /// (generation << 32 | next task), so a late worker never runs a task of a newer job with
  /// an older job's description.
  void work_on(std::uint64_t generation, const Job& job) {
    for (;;) {
      std::uint64_t state = state_.load(std::memory_order_acquire);
      for (;;) {
        if ((state >> 32) != (generation & 0xffffffffu)) return;
        if (static_cast<int>(state & 0xffffffffu) >= job.num_tasks) return;
        if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel)) break;
      }
      job.invoke(job.context, static_cast<int>(state & 0xffffffffu));
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  void ensure_workers(int count) {
    count = std::min(count, kMaxThreads - 1);
    while (static_cast<int>(workers_.size()) < count) {
      workers_.emplace_back([this] { worker_loop(); });
      workers_.back().detach();
    }
  }

  void worker_loop() {
    std::uint64_t seen = 0;
    for (;;) {
      // Spin a little for the next job before sleeping.
      for (int i = 0; i < 2000 && (state_.load(std::memory_order_acquire) >> 32) == (seen & 0xffffffffu); ++i) {
        MLLM_KERNEL_CPU_RELAX();
      }
      Job job;
      std::uint64_t generation;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        generation = seen = generation_;
        job = job_;
      }
      work_on(generation, job);
    }
  }

  std::mutex job_mutex_;  // one job at a time
  std::mutex mutex_;      // guards generation_ and job_
  std::condition_variable wake_;
  std::uint64_t generation_ = 0;
  Job job_;
  std::atomic<std::uint64_t> state_{0};
  std::atomic<int> pending_{0};
  std::vector<std::thread> workers_;
};

/// Calls fn(begin, end) on contiguous slices of [0, num_items) across up to `num_threads`
/// threads, fewer when the job moves less than kMinBytesPerThread per thread.
template <typename Fn>
void parallel_for(std::int64_t num_items, std::int64_t bytes_per_item, std::int64_t num_threads, const Fn& fn) {
  if (num_items <= 0) return;
  const std::int64_t by_size = std::max<std::int64_t>(1, num_items * bytes_per_item / kMinBytesPerThread);
  const int threads = static_cast<int>(
      std::max<std::int64_t>(1, std::min({num_threads, num_items, by_size, std::int64_t{kMaxThreads}})));
  if (threads == 1) {
    fn(std::int64_t{0}, num_items);
    return;
  }
  ThreadPool::global().run(threads, [&](int t) {
    fn(num_items * t / threads, num_items * (t + 1) / threads);
  });
}

}  // namespace mllm_kernel::cpu
