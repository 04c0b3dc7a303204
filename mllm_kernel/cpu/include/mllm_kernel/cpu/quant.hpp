// Per-target bodies of CPU per-token(-group) quantization to int8 and float8_e4m3fn, computed
// in float32. Included once per SIMD target by Highway's foreach_target; the parameter struct
// sits behind a classic include guard.
//
// Per group of `group_size` elements of a row: amax = max(max|x|, eps); scale = amax / qmax
// (qmax 127 for int8, 448 for e4m3), rounded up to a power of two with scale_ue8m0;
// q = x / scale rounded to nearest even and saturated. A zero scale (eps = 0, all-zero group)
// writes zeros.
#ifndef MLLM_KERNEL_CPU_QUANT_PARAMS_
#define MLLM_KERNEL_CPU_QUANT_PARAMS_

#include <cstdint>

namespace mllm_kernel::cpu {

/// Rows of `hidden` elements split into groups; scales[t, g] at the given strides.
struct QuantParams {
  const void* input;
  std::int64_t input_stride;
  void* out;  // int8_t or e4m3 bytes
  std::int64_t out_stride;
  float* scales;
  std::int64_t scale_token_stride;
  std::int64_t scale_group_stride;
  std::int64_t hidden;
  std::int64_t group_size;
  float eps;
  bool scale_ue8m0;
};

}  // namespace mllm_kernel::cpu

#endif  // MLLM_KERNEL_CPU_QUANT_PARAMS_

#include <mllm_kernel/cpu/simd_io-inl.hpp>

#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// Stores `count` (1..Lanes) int32 lanes, each in [-128, 255], as bytes (saturating).
template <typename Byte>
HWY_INLINE void StoreBytes(DF df, hn::Vec<hn::RebindToSigned<DF>> v, Byte* p, std::size_t count) {
  const hn::Rebind<Byte, DF> d8;
  const auto bytes = hn::DemoteTo(d8, v);
  if (HWY_LIKELY(count == hn::Lanes(df))) return hn::StoreU(bytes, d8, p);
  alignas(64) Byte buffer[HWY_MAX_BYTES / sizeof(float)];
  hn::StoreU(bytes, d8, buffer);
  std::memcpy(p, buffer, count);
}

/// int8: round to nearest even, saturate to [-128, 127].
struct ToInt8 {
  using Byte = std::int8_t;
  static constexpr float kMax = 127.0f;
  HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> operator()(DF df, VF q) const {
    return hn::NearestInt(hn::Min(hn::Max(q, hn::Set(df, -128.0f)), hn::Set(df, 127.0f)));
  }
};

/// float8_e4m3fn bits of q clamped to [-448, 448], rounded to nearest even, as int32 lanes.
struct ToFp8E4M3 {
  using Byte = std::uint8_t;
  static constexpr float kMax = 448.0f;
  HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> operator()(DF df, VF q) const {
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const VF a = hn::Min(hn::Abs(q), hn::Set(df, kMax));
    const auto bits = hn::BitCast(du, a);
    // Normal: round the mantissa to 3 bits (nearest even), rebias the exponent 127 -> 7.
    const auto lsb = hn::And(hn::ShiftRight<20>(bits), hn::Set(du, 1u));
    const auto normal = hn::Sub(hn::ShiftRight<20>(hn::Add(bits, hn::Add(hn::Set(du, 0x7FFFFu), lsb))),
                                hn::Set(du, (127u - 7u) << 3));
    // Subnormal (below 2^-6): multiples of 2^-9; 8 * 2^-9 rounds into the smallest normal code.
    const auto subnormal = hn::BitCast(du, hn::NearestInt(hn::Mul(a, hn::Set(df, 512.0f))));
    const auto magnitude =
        hn::IfThenElse(hn::RebindMask(du, hn::Lt(a, hn::Set(df, 0.015625f))), subnormal, normal);
    const auto sign = hn::ShiftRight<24>(hn::And(hn::BitCast(du, q), hn::Set(du, 0x80000000u)));
    return hn::BitCast(di, hn::Or(magnitude, sign));
  }
};

/// The smallest power of two >= s (s positive and finite).
HWY_INLINE float RoundUpToPowerOfTwo(float s) {
  std::uint32_t bits;
  std::memcpy(&bits, &s, sizeof(bits));
  if (bits & 0x7FFFFFu) bits = (bits & 0x7F800000u) + 0x800000u;
  std::memcpy(&s, &bits, sizeof(bits));
  return s;
}

/// y[i] = Convert(x[i] / scale) for i < size; zeros when the scale is zero.
template <typename T, typename Convert>
HWY_INLINE void QuantizeSpan(DF df, const T* HWY_RESTRICT x, typename Convert::Byte* HWY_RESTRICT y,
                             std::size_t size, float scale) {
  if (scale == 0.0f) {
    std::memset(y, 0, size);
    return;
  }
  const Convert convert;
  const VF v_scale = hn::Set(df, scale);
  ForEachChunk(df, size, [&](std::size_t i, std::size_t n) {
    StoreBytes(df, convert(df, hn::Div(Load(df, x + i, n), v_scale)), y + i, n);
  });
}

/// Quantizes rows [begin, end).
template <typename T, typename Convert>
HWY_INLINE void QuantRows(const QuantParams& p, std::int64_t begin, std::int64_t end) {
  using Byte = typename Convert::Byte;
  const DF df;
  const auto group = static_cast<std::size_t>(p.group_size);
  const std::int64_t groups = p.hidden / p.group_size;
  for (std::int64_t r = begin; r < end; ++r) {
    const T* x_row = static_cast<const T*>(p.input) + r * p.input_stride;
    Byte* y_row = static_cast<Byte*>(p.out) + r * p.out_stride;
    for (std::int64_t g = 0; g < groups; ++g) {
      const T* x = x_row + g * p.group_size;
      Byte* y = y_row + g * p.group_size;
      float scale = std::max(AbsMax(df, x, group), p.eps) / Convert::kMax;
      if (p.scale_ue8m0 && scale > 0.0f) scale = RoundUpToPowerOfTwo(scale);
      p.scales[r * p.scale_token_stride + g * p.scale_group_stride] = scale;
      QuantizeSpan<T, Convert>(df, x, y, group, scale);
    }
  }
}

/// Per-token(-group) int8 quantization.
template <typename T>
HWY_NOINLINE void QuantInt8Rows(const QuantParams& p, std::int64_t begin, std::int64_t end) {
  QuantRows<T, ToInt8>(p, begin, end);
}
/// Per-token-group float8_e4m3fn quantization.
template <typename T>
HWY_NOINLINE void QuantFp8Rows(const QuantParams& p, std::int64_t begin, std::int64_t end) {
  QuantRows<T, ToFp8E4M3>(p, begin, end);
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
