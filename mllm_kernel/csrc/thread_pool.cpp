// The process's fork-join thread pool behind `parallel_for` (mllm_kernel/cpu/thread_pool.hpp),
// compiled once into the host runtime. Workers are created lazily (the first job that needs
// them) and reused for the life of the process; between jobs a worker spins briefly (a kernel
// call often follows another) and then sleeps on a condition variable, so an idle pool costs no
// CPU.
#include <mllm_kernel/cpu/thread_pool.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

// The compilers' builtin rather than _mm_pause: <immintrin.h> would be two fifths of this
// file's compile, which a first call waits for.
#if defined(__x86_64__) || defined(__i386__)
#define MLLM_KERNEL_CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define MLLM_KERNEL_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define MLLM_KERNEL_CPU_RELAX() ((void)0)
#endif

namespace mllm_kernel::cpu {

namespace {

/// A fork-join pool: `run(n, invoke, context)` calls invoke(context, 0..n-1) across the caller
/// and n-1 workers.
class ThreadPool {
 public:
  /// The process's pool (created on first use, never destroyed: joining threads while a
  /// shared library unloads at exit is unsafe, and the OS reclaims them).
  static ThreadPool& global() {
    static ThreadPool* pool = new ThreadPool();
    return *pool;
  }

  /// run_tasks (thread_pool.hpp).
  void run(int num_tasks, void (*invoke)(const void*, int), const void* context) {
    if (num_tasks <= 1) {
      if (num_tasks == 1) invoke(context, 0);
      return;
    }
    std::lock_guard<std::mutex> job_guard(job_mutex_);
    ensure_workers(num_tasks - 1);
    std::uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation = ++generation_;
      job_ = Job{invoke, context, num_tasks};
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
    count = host::min_of(count, kMaxThreads - 1);
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

}  // namespace

void run_tasks(int num_tasks, void (*invoke)(const void*, int), const void* context) {
  ThreadPool::global().run(num_tasks, invoke, context);
}

}  // namespace mllm_kernel::cpu
