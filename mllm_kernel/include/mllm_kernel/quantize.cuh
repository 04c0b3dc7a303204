// Element quantization shared by the CUDA kernels that write float8_e4m3fn or int8: the
// activation quantizers (quant_per_*.cuh) and the FP8 KV-cache store (kv_cache.cuh).
//
//   q = x / scale                 in fp32, as IEEE division rounds it (not x * (1 / scale)), through
//                                 ScaleDivisor: a kernel builds one per scale and reuses it
//   float8_e4m3fn: round to nearest even, saturated to +-448 (NaN stays NaN)
//   int8:          round_half_even(clamp(q, -128, 127))
//   a zero scale gives 0
#pragma once

#include <mllm_kernel/scale_divisor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/vec.cuh>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mllm_kernel::device {

/// What a quantized element is: its largest magnitude and the conversion from q = x / scale.
template <typename Out>
struct QuantFormat;

template <>
struct QuantFormat<fp8_e4m3_t> {
  static constexpr float kMax = 448.0f;
  /// The saturating (__NV_SATFINITE) conversion rounds to nearest even and keeps NaN.
  static MLLM_DEVICE fp8_e4m3_t convert(float q) { return fp8_e4m3_t(q); }
};

template <>
struct QuantFormat<std::int8_t> {
  static constexpr float kMax = 127.0f;
  static MLLM_DEVICE std::int8_t convert(float q) {
    return static_cast<std::int8_t>(__float2int_rn(fminf(fmaxf(q, -128.0f), 127.0f)));
  }
};

/// Largest |x| of a vector, in fp32: the amax a scale is made from.
template <typename T, int N>
MLLM_DEVICE float vec_amax(const AlignedVector<T, N>& v) {
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < N; ++j) m = fmaxf(m, fabsf(cast<float>(v[j])));
  return m;
}

/// The smallest power of two >= s, for s >= 0 (0 stays 0): a scale in the UE8M0 format.
MLLM_DEVICE float round_up_pow2(float s) {
  unsigned bits = __float_as_uint(s);
  if (bits & 0x7FFFFFu) bits = (bits & 0x7F800000u) + 0x800000u;
  return __uint_as_float(bits);
}

/// A vector of T quantized to a vector of Out: x / scale converted, zero when the scale is zero.
/// float8_e4m3fn pairs go through one two-lane conversion (the same rounding and saturation as
/// one element at a time, half the conversions and no byte packing).
template <typename Out, typename T, int N>
MLLM_DEVICE AlignedVector<Out, N> quantize(const AlignedVector<T, N>& v, const ScaleDivisor& divide) {
  AlignedVector<Out, N> q;
  if constexpr (std::is_same_v<Out, fp8_e4m3_t> && N % 2 == 0) {
    __nv_fp8x2_storage_t pairs[N / 2];
#pragma unroll
    for (int j = 0; j < N / 2; ++j) {
      const float2 pair = make_float2(divide(cast<float>(v[2 * j])), divide(cast<float>(v[2 * j + 1])));
      pairs[j] = __nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, __NV_E4M3);
    }
    static_assert(sizeof(pairs) == sizeof(q));
    memcpy(&q, pairs, sizeof(q));
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) q[j] = QuantFormat<Out>::convert(divide(cast<float>(v[j])));
  }
  return q;
}

/// Quantizes a vector of T into a vector of Out and stores it at vector index `i` of `dst`.
template <typename Out, typename T, int N>
MLLM_DEVICE void quantize_store(const AlignedVector<T, N>& v, const ScaleDivisor& divide, Out* dst, std::int64_t i) {
  quantize<Out>(v, divide).store(dst, i);
}

}  // namespace mllm_kernel::device
