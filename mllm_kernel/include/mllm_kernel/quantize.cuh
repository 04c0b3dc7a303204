// Element quantization shared by the CUDA kernels that write float8_e4m3fn or int8: the
// activation quantizers (quant.cuh) and the FP8 KV-cache store (kv_cache.cuh).
//
//   q = x / scale                 in fp32, IEEE division (not x * (1 / scale))
//   float8_e4m3fn: round to nearest even, saturated to +-448 (NaN stays NaN)
//   int8:          round_half_even(clamp(q, -128, 127))
//   a zero scale gives 0
#pragma once

#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/vec.cuh>

#include <cstdint>

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

/// x / scale converted to Out; zero when the scale is zero.
template <typename Out>
MLLM_DEVICE Out quantize(float x, float scale) {
  return QuantFormat<Out>::convert(scale == 0.0f ? 0.0f : x / scale);
}

/// Quantizes a vector of T into a vector of Out and stores it at vector index `i` of `dst`.
template <typename Out, typename T, int N>
MLLM_DEVICE void quantize_store(const AlignedVector<T, N>& v, float scale, Out* dst, std::int64_t i) {
  AlignedVector<Out, N> q;
#pragma unroll
  for (int j = 0; j < N; ++j) q[j] = quantize<Out>(cast<float>(v[j]), scale);
  q.store(dst, i);
}

}  // namespace mllm_kernel::device
