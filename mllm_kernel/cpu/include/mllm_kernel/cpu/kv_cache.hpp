// Per-target body of the CPU KV-cache store into a float8_e4m3fn cache: each token's k and v
// heads divided by their scale and converted by the quantization kernels' QuantizeSpan (round
// to nearest even, saturate to +-448; a zero scale writes zeros). Included once per SIMD target by
// Highway's foreach_target; the parameter struct sits behind a classic include guard.
#ifndef MLLM_KERNEL_CPU_KV_CACHE_PARAMS_
#define MLLM_KERNEL_CPU_KV_CACHE_PARAMS_

#include <cstdint>

namespace mllm_kernel::cpu {

/// One of k and v: its heads ([T, H, D], strides in elements) and its cache ([N, H, D] bytes).
struct KVQuantSide {
  const void* src;
  std::int64_t token_stride;
  std::int64_t head_stride;
  std::uint8_t* cache;
  float scale;
};

/// The store of tokens [begin, end): k and v heads into cache slot slots[t] (skipped if < 0).
struct KVQuantParams {
  KVQuantSide k;
  KVQuantSide v;
  const void* slots;  // [T], int32 or int64, already range-checked
  bool slots_int64;
  std::int64_t heads;
  std::int64_t head_dim;
};

}  // namespace mllm_kernel::cpu

#endif  // MLLM_KERNEL_CPU_KV_CACHE_PARAMS_

#include <mllm_kernel/cpu/quant.hpp>
#include <mllm_kernel/cpu/simd_io-inl.hpp>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// The heads of token t of one side into `cache` slot `slot`.
template <typename T>
HWY_INLINE void QuantizeTokenHeads(const KVQuantSide& s, std::int64_t t, std::int64_t slot, std::int64_t heads,
                                   std::int64_t head_dim) {
  const DF df;
  std::uint8_t* slot_bytes = s.cache + slot * heads * head_dim;
  for (std::int64_t h = 0; h < heads; ++h) {
    const T* x = static_cast<const T*>(s.src) + t * s.token_stride + h * s.head_stride;
    QuantizeSpan<T, ToFp8E4M3>(df, x, slot_bytes + h * head_dim, static_cast<std::size_t>(head_dim), s.scale);
  }
}

/// Stores tokens [begin, end) of k and v into their float8_e4m3fn caches.
template <typename T>
HWY_NOINLINE void StoreKVFp8Tokens(const KVQuantParams& p, std::int64_t begin, std::int64_t end) {
  for (std::int64_t t = begin; t < end; ++t) {
    const std::int64_t slot = p.slots_int64 ? static_cast<const std::int64_t*>(p.slots)[t]
                                            : static_cast<const std::int32_t*>(p.slots)[t];
    if (slot < 0) continue;
    QuantizeTokenHeads<T>(p.k, t, slot, p.heads, p.head_dim);
    QuantizeTokenHeads<T>(p.v, t, slot, p.heads, p.head_dim);
  }
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
