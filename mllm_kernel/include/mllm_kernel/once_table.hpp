// Per-process caches in kernels' host code (a kernel's CUfunction per device, its occupancy per
// block size): a fixed, open-addressed table of values computed once per key. Lookups take no
// lock; an insert takes a spin lock, since <mutex> (like <map> and <atomic>) would cost every
// kernel's translation unit a fifth of a second of each nvcc pass (docs/adding_a_kernel.md).
#pragma once

#include <mllm_kernel/host_atomic.hpp>

#include <sched.h>

#include <cstddef>

namespace mllm_kernel::host::detail {

/// Holds a flag set (spinning, yielding the CPU) for its lifetime.
class SpinLock {
 public:
  explicit SpinLock(bool& flag) : flag_(flag) {
    while (test_and_set_acquire(flag_)) sched_yield();
  }
  ~SpinLock() { clear_release(flag_); }
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

 private:
  bool& flag_;
};

/// Values computed once per key, for the life of the process. Key must be trivially copyable and
/// equality-comparable; `hash` spreads keys over the slots. A full table computes each time.
template <typename Key, typename Value, std::size_t kSlots>
class OnceTable {
 public:
  /// Sets `value` to the value of `key`, calling `compute(value)` (under the lock, at most once
  /// per key while the table has room) when the table has none. `compute` returns false when it
  /// cannot, and nothing is kept; so does get.
  template <typename Compute>
  bool get(const Key& key, std::size_t hash, Value& value, Compute&& compute) {
    if (const Entry* e = find(key, hash); e != nullptr && load_acquire(e->ready)) {
      value = e->value;
      return true;
    }
    const SpinLock lock(insert_);
    Entry* e = find(key, hash);  // another thread may have inserted it meanwhile
    if (e != nullptr && load_relaxed(e->ready)) {
      value = e->value;
      return true;
    }
    if (!compute(value)) return false;
    if (e != nullptr) {
      e->key = key;
      e->value = value;
      store_release(e->ready, true);  // published last: readers that see it see the rest
    }
    return true;
  }

 private:
  struct Entry {
    Key key{};
    Value value{};
    bool ready = false;
  };

  /// The slot of `key`, or the first free one on its probe sequence; nullptr when full. Slots
  /// are never freed, so a free slot ends the search.
  Entry* find(const Key& key, std::size_t hash) {
    for (std::size_t i = 0; i < kSlots; ++i) {
      Entry& e = entries_[(hash + i) % kSlots];
      if (!load_acquire(e.ready) || e.key == key) return &e;
    }
    return nullptr;
  }

  Entry entries_[kSlots];
  bool insert_ = false;
};

}  // namespace mllm_kernel::host::detail
