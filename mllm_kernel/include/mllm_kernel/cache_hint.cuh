// L2 cache hints for global loads and stores (sm_80+): a kernel that reads a tensor twice can
// ask L2 to keep the part it reads again and to drop the rest first.
//
//   const std::uint64_t keep = l2_evict_last(), drop = l2_evict_first();
//   load_with_policy(v, ptr, reread_later ? keep : drop);
//   store_with_policy(q, out, drop);
//
// Below sm_80 the policies are 0 and the accesses plain loads and stores.
#pragma once

#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/vec.cuh>

#include <cstdint>

namespace mllm_kernel::device {

/// L2 policy: keep the line as long as possible.
MLLM_DEVICE std::uint64_t l2_evict_last() {
  std::uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}

/// L2 policy: drop the line first.
MLLM_DEVICE std::uint64_t l2_evict_first() {
  std::uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}

/// Loads vector `v` (an AlignedVector) from `ptr` with an L2 policy (16-byte vectors on sm_80+;
/// a plain load otherwise).
template <typename Vec>
MLLM_DEVICE void load_with_policy(Vec& v, const typename Vec::value_type* ptr, std::uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (Vec::kBytes == 16) {
    uint4 raw;
    asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
                 : "l"(ptr), "l"(policy));
    v = *reinterpret_cast<const Vec*>(&raw);
    return;
  }
#endif
  (void)policy;
  v.load(ptr);
}

/// Stores vector `v` (an AlignedVector) to `ptr` with an L2 policy (8- and 4-byte vectors on
/// sm_80+; a plain store otherwise).
template <typename Vec>
MLLM_DEVICE void store_with_policy(const Vec& v, typename Vec::value_type* ptr, std::uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (Vec::kBytes == 8) {
    const uint2 raw = *reinterpret_cast<const uint2*>(&v);
    asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1, %2}, %3;" ::"l"(ptr), "r"(raw.x), "r"(raw.y),
                 "l"(policy)
                 : "memory");
    return;
  }
  if constexpr (Vec::kBytes == 4) {
    const unsigned raw = *reinterpret_cast<const unsigned*>(&v);
    asm volatile("st.global.L2::cache_hint.u32 [%0], %1, %2;" ::"l"(ptr), "r"(raw), "l"(policy) : "memory");
    return;
  }
#endif
  (void)policy;
  v.store(ptr);
}

/// Loads 16 bytes that the kernel reads once and that nothing writes while it runs (weights
/// streamed through a GEMV), through the read-only path without allocating them in L1; a plain
/// load below sm_80. Not volatile: the compiler may batch such loads as it sees fit.
MLLM_DEVICE int4 load_streaming(const int4* ptr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  int4 v;
  asm("ld.global.nc.L1::no_allocate.v4.s32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(ptr));
  return v;
#else
  return *ptr;
#endif
}

}  // namespace mllm_kernel::device
