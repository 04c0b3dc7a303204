// Atomic loads and stores of plain variables, for the host code of every CUDA kernel's
// translation unit (per-device caches, the launch table), through the compiler's __atomic
// builtins: <atomic> costs each of nvcc's front ends more than any other standard header the
// kernels would include (about 0.2 s a pass on a development machine, 0.5 s a build).
#pragma once

namespace mllm_kernel::host::detail {

template <typename T>
T load_relaxed(const T& value) {
  return __atomic_load_n(&value, __ATOMIC_RELAXED);
}

template <typename T>
T load_acquire(const T& value) {
  return __atomic_load_n(&value, __ATOMIC_ACQUIRE);
}

template <typename T>
void store_relaxed(T& target, T value) {
  __atomic_store_n(&target, value, __ATOMIC_RELAXED);
}

template <typename T>
void store_release(T& target, T value) {
  __atomic_store_n(&target, value, __ATOMIC_RELEASE);
}

/// A spin lock's flag: test_and_set_acquire(flag) returns whether it was already set.
inline bool test_and_set_acquire(bool& flag) { return __atomic_test_and_set(&flag, __ATOMIC_ACQUIRE); }
inline void clear_release(bool& flag) { __atomic_clear(&flag, __ATOMIC_RELEASE); }

}  // namespace mllm_kernel::host::detail
