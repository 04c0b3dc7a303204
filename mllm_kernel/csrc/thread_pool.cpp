// The process's fork-join thread pool behind `parallel_for` (mllm_kernel/cpu/thread_pool.hpp),
// compiled once into the host runtime. Workers are created lazily (the first job that needs
// them) and reused for the life of the process; between jobs a worker spins briefly (a kernel
// call often follows another) and then sleeps on a condition variable, so an idle pool costs no
// CPU.
//
// POSIX threads and the compilers' __atomic builtins, not <thread>, <mutex>,
// <condition_variable> and <atomic>: this file is compiled beside a first CPU call's module,
// and those headers made it the slower of the two (0.7 s against 0.1 s on a development
// machine, where a 2-core first call runs both compiles and the host runtime's at once).
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/errors.hpp>
#include <mllm_kernel/host_atomic.hpp>

#include <pthread.h>

#include <cstdint>

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

using host::detail::load_acquire;
using host::detail::store_relaxed;
using host::detail::store_release;

/// A mutex held for a scope.
class ScopedLock {
 public:
  explicit ScopedLock(pthread_mutex_t& mutex) : mutex_(mutex) { pthread_mutex_lock(&mutex_); }
  ~ScopedLock() { pthread_mutex_unlock(&mutex_); }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  pthread_mutex_t& mutex_;
};

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
    ScopedLock job_guard(job_mutex_);
    ensure_workers(num_tasks - 1);
    std::uint64_t generation;
    {
      ScopedLock lock(mutex_);
      generation = ++generation_;
      job_ = Job{invoke, context, num_tasks};
      store_relaxed(pending_, num_tasks);
      store_release(state_, generation << 32);
    }
    pthread_cond_broadcast(&wake_);
    work_on(generation, job_);
    // Spin until the workers finish their share: jobs are short, and sleeping would cost a
    // wake-up latency on the critical path.
    while (load_acquire(pending_) != 0) MLLM_KERNEL_CPU_RELAX();
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
      std::uint64_t state = load_acquire(state_);
      for (;;) {
        if ((state >> 32) != (generation & 0xffffffffu)) return;
        if (static_cast<int>(state & 0xffffffffu) >= job.num_tasks) return;
        if (__atomic_compare_exchange_n(&state_, &state, state + 1, /*weak=*/true, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
          break;
        }
      }
      job.invoke(job.context, static_cast<int>(state & 0xffffffffu));
      __atomic_fetch_sub(&pending_, 1, __ATOMIC_ACQ_REL);
    }
  }

  void ensure_workers(int count) {
    count = host::min_of(count, kMaxThreads - 1);
    while (workers_ < count) {
      pthread_t thread;
      const int error = pthread_create(
          &thread, nullptr, [](void* pool) -> void* { static_cast<ThreadPool*>(pool)->worker_loop(); }, this);
      if (error != 0) {
        throw host::PanicError("RuntimeError",
                               host::detail::concat("thread pool: cannot start a worker thread (pthread_create: ",
                                                    error, ")"));
      }
      pthread_detach(thread);
      ++workers_;
    }
  }

  [[noreturn]] void worker_loop() {
    std::uint64_t seen = 0;
    for (;;) {
      // Spin a little for the next job before sleeping.
      for (int i = 0; i < 2000 && (load_acquire(state_) >> 32) == (seen & 0xffffffffu); ++i) {
        MLLM_KERNEL_CPU_RELAX();
      }
      Job job;
      std::uint64_t generation;
      {
        ScopedLock lock(mutex_);
        while (generation_ == seen) pthread_cond_wait(&wake_, &mutex_);
        generation = seen = generation_;
        job = job_;
      }
      work_on(generation, job);
    }
  }

  pthread_mutex_t job_mutex_ = PTHREAD_MUTEX_INITIALIZER;  // one job at a time
  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;      // guards generation_ and job_
  pthread_cond_t wake_ = PTHREAD_COND_INITIALIZER;
  std::uint64_t generation_ = 0;
  Job job_;
  std::uint64_t state_ = 0;  // atomic: (generation << 32) | next task
  int pending_ = 0;          // atomic: tasks of the current job not yet finished
  int workers_ = 0;          // under job_mutex_
};

}  // namespace

void run_tasks(int num_tasks, void (*invoke)(const void*, int), const void* context) {
  ThreadPool::global().run(num_tasks, invoke, context);
}

}  // namespace mllm_kernel::cpu
