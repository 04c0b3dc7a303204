// AlignedVector<T, N>: N elements moved with one vector instruction.
//
//   using Vec = AlignedVector<bf16_t, 8>;          // 16 bytes: one ld.global.v4.b32
//   Vec v;
//   v.load(row, i);                               // row[i * 8 .. i * 8 + 8)
//   for (int j = 0; j < Vec::kSize; ++j) v[j] = ...;
//   v.store(out, i);
//
// The vector is aligned to its own size, so `load`/`store` compile to a single 2/4/8/16-byte
// access; the caller guarantees that `ptr + i * N` is aligned to `sizeof(Vec)` (the host side
// checks pointers and strides before choosing a vector width). 16 bytes is the widest access
// before Blackwell; `kMaxVecBytes` names that limit.
#pragma once

#include <mllm_kernel/utils.cuh>

#include <cstddef>
#include <cstdint>

namespace mllm_kernel::device {

/// The widest single global load or store (bytes) on sm_80/sm_90.
inline constexpr int kMaxVecBytes = 16;

/// Elements of T in one widest vector access (8 for 16-bit types, 4 for float).
template <typename T>
inline constexpr int kVecElems = kMaxVecBytes / static_cast<int>(sizeof(T));

/// N elements of T, aligned to their total size, loaded and stored as one access.
template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  static_assert(N > 0 && (N & (N - 1)) == 0, "AlignedVector: N must be a power of two");
  static_assert(sizeof(T) * N <= kMaxVecBytes, "AlignedVector: at most 16 bytes per access");

  /// The element type.
  using value_type = T;
  /// Number of elements.
  static constexpr int kSize = N;
  /// Bytes moved by one load or store.
  static constexpr int kBytes = static_cast<int>(sizeof(T)) * N;

  T data[N];

  MLLM_DEVICE T& operator[](int i) { return data[i]; }
  MLLM_DEVICE const T& operator[](int i) const { return data[i]; }

  /// Loads elements [i * N, i * N + N) of `ptr` (vector index `i`).
  MLLM_DEVICE void load(const T* ptr, std::int64_t i = 0) {
    *this = reinterpret_cast<const AlignedVector*>(ptr)[i];
  }
  /// Loads through the read-only (non-coherent) cache: for data no thread of this kernel writes.
  MLLM_DEVICE void load_readonly(const T* ptr, std::int64_t i = 0) {
    if constexpr (kBytes == 16) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(ptr) + i);
      *this = *reinterpret_cast<const AlignedVector*>(&raw);
    } else {
      load(ptr, i);
    }
  }
  /// Stores elements [i * N, i * N + N) of `ptr` (vector index `i`).
  MLLM_DEVICE void store(T* ptr, std::int64_t i = 0) const {
    reinterpret_cast<AlignedVector*>(ptr)[i] = *this;
  }
  /// Sets every element to `value`.
  MLLM_DEVICE void fill(T value) {
#pragma unroll
    for (int j = 0; j < N; ++j) data[j] = value;
  }
};

/// `*ptr` (1, 2, 4, 8 or 16 bytes, aligned to its size; global memory) loaded by a volatile asm
/// load: the compiler keeps it in program order with the other volatile ones instead of sinking
/// it next to its first use. Loads that feed code with branches (an IEEE reciprocal's slow path)
/// must all be issued before it: a load sunk past a branch costs one more round trip to memory.
template <typename U>
MLLM_DEVICE U load_issued_here(const U* ptr) {
  static_assert(sizeof(U) == 1 || sizeof(U) == 2 || sizeof(U) == 4 || sizeof(U) == 8 || sizeof(U) == 16);
  U value;
  if constexpr (sizeof(U) == 16) {
    uint4 raw;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
                 : "l"(ptr));
    __builtin_memcpy(&value, &raw, 16);
  } else if constexpr (sizeof(U) == 8) {
    unsigned long long raw;
    asm volatile("ld.global.u64 %0, [%1];" : "=l"(raw) : "l"(ptr));
    __builtin_memcpy(&value, &raw, 8);
  } else if constexpr (sizeof(U) == 4) {
    unsigned raw;
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(raw) : "l"(ptr));
    __builtin_memcpy(&value, &raw, 4);
  } else if constexpr (sizeof(U) == 2) {
    unsigned short raw;
    asm volatile("ld.global.u16 %0, [%1];" : "=h"(raw) : "l"(ptr));
    __builtin_memcpy(&value, &raw, 2);
  } else {
    unsigned raw;
    asm volatile("ld.global.u8 %0, [%1];" : "=r"(raw) : "l"(ptr));
    const auto byte = static_cast<unsigned char>(raw);
    __builtin_memcpy(&value, &byte, 1);
  }
  return value;
}

/// `*ptr = value` when `pred`, as one predicated store instruction (1, 2, 4, 8 or 16 bytes,
/// `ptr` aligned to the size; global memory). With an `if (pred)` around a plain store, the
/// compiler may sink the loads that feed `value` into the branch, behind the wait for `pred`:
/// data loaded ahead of the index that decides its store would then cost two round trips to
/// memory instead of one. `ptr` must be a valid address even when `pred` is false.
template <typename U>
MLLM_DEVICE void store_if(bool pred, U* ptr, const U& value) {
  static_assert(sizeof(U) == 1 || sizeof(U) == 2 || sizeof(U) == 4 || sizeof(U) == 8 || sizeof(U) == 16);
  const unsigned p = pred;
  if constexpr (sizeof(U) == 16) {
    uint4 raw;
    __builtin_memcpy(&raw, &value, 16);
    asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.global.v4.u32 [%1], {%2, %3, %4, %5}; }" ::"r"(p),
                 "l"(ptr), "r"(raw.x), "r"(raw.y), "r"(raw.z), "r"(raw.w)
                 : "memory");
  } else if constexpr (sizeof(U) == 8) {
    uint2 raw;
    __builtin_memcpy(&raw, &value, 8);
    asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.global.v2.u32 [%1], {%2, %3}; }" ::"r"(p), "l"(ptr),
                 "r"(raw.x), "r"(raw.y)
                 : "memory");
  } else if constexpr (sizeof(U) == 4) {
    unsigned raw;
    __builtin_memcpy(&raw, &value, 4);
    asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.global.u32 [%1], %2; }" ::"r"(p), "l"(ptr), "r"(raw)
                 : "memory");
  } else if constexpr (sizeof(U) == 2) {
    unsigned short raw;
    __builtin_memcpy(&raw, &value, 2);
    asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.global.u16 [%1], %2; }" ::"r"(p), "l"(ptr), "h"(raw)
                 : "memory");
  } else {
    unsigned char byte;
    __builtin_memcpy(&byte, &value, 1);
    const unsigned raw = byte;
    asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.global.u8 [%1], %2; }" ::"r"(p), "l"(ptr), "r"(raw)
                 : "memory");
  }
}

/// Whether `ptr` is aligned to `bytes` (a power of two); host and device.
MLLM_HOST_DEVICE bool is_aligned(const void* ptr, std::size_t bytes) {
  return (reinterpret_cast<std::uintptr_t>(ptr) & (bytes - 1)) == 0;
}

}  // namespace mllm_kernel::device

namespace mllm_kernel::host {

/// Host-side check that vectors of `elems` elements of `elem_bytes` bytes can be used on a set
/// of tensors: every base pointer aligned to the vector size, every used stride and every row
/// length a multiple of `elems`.
///
///   VectorizeCheck check(8, sizeof(bf16_t));
///   check.pointer(x.data_ptr()).stride(row_stride, num_rows).length(hidden);
///   if (check.ok()) launch the vector kernel, else the scalar one.
class VectorizeCheck {
 public:
  VectorizeCheck(int elems, int elem_bytes) : elems_(elems), bytes_(static_cast<std::size_t>(elems) * elem_bytes) {}
  /// A base pointer that vector accesses start from.
  VectorizeCheck& pointer(const void* ptr) {
    ok_ = ok_ && device::is_aligned(ptr, bytes_);
    return *this;
  }
  /// A stride (in elements) that moves between vectors; ignored when the dimension has one
  /// entry (its stride is never used).
  VectorizeCheck& stride(std::int64_t stride, std::int64_t extent) {
    ok_ = ok_ && (extent <= 1 || stride % elems_ == 0);
    return *this;
  }
  /// A length (in elements) that must split into whole vectors.
  VectorizeCheck& length(std::int64_t n) {
    ok_ = ok_ && n % elems_ == 0;
    return *this;
  }
  /// Whether every pointer, stride and length allows the vector width.
  bool ok() const { return ok_; }

 private:
  std::int64_t elems_;
  std::size_t bytes_;
  bool ok_ = true;
};

}  // namespace mllm_kernel::host
