// Per-target helpers shared by the CPU kernel bodies: float32 vectors loaded from and stored to
// float, fp16_t or bf16_t memory, with exact tails, and lane reductions.
//
// Included from per-target body headers (once per SIMD target), so it uses Highway's toggle
// guard instead of #pragma once.
//
// Row loops are written once with ForEachChunk: the body sees an offset and a lane count that
// is the full vector width except for the last, shorter chunk, and uses Load/Store with that
// count. A short chunk goes through a small stack buffer, so no load or store ever touches
// memory past the row's end, and lanes past the end read as zero.
#if defined(MLLM_KERNEL_CPU_SIMD_IO_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MLLM_KERNEL_CPU_SIMD_IO_INL_H_
#undef MLLM_KERNEL_CPU_SIMD_IO_INL_H_
#else
#define MLLM_KERNEL_CPU_SIMD_IO_INL_H_
#endif

#include <mllm_kernel/cpu/types.hpp>

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// The float32 vector type every kernel computes in.
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

/// Loads Lanes(df) elements of T as float32.
template <typename T>
HWY_INLINE VF LoadF32(DF df, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else {
    return hn::PromoteTo(df, hn::LoadU(hn::Rebind<T, DF>(), p));
  }
}

/// float32 -> bfloat16 bits, rounding to nearest even (Highway 1.0's DemoteTo truncates);
/// NaN stays NaN.
HWY_INLINE hn::Vec<hn::Rebind<bf16_t, DF>> DemoteToBF16(DF df, VF v) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), lsb));
  rounded = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Set(du, 0x7FC0u), rounded);
  const auto packed = hn::DemoteTo(hn::Rebind<std::uint16_t, DF>(), hn::BitCast(di, rounded));
  return hn::BitCast(hn::Rebind<bf16_t, DF>(), packed);
}

/// Stores Lanes(df) float32 lanes as T (rounded to nearest even).
template <typename T>
HWY_INLINE void StoreF32(DF df, VF v, T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float>) {
    hn::StoreU(v, df, p);
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    hn::StoreU(DemoteToBF16(df, v), hn::Rebind<T, DF>(), p);
  } else {
    hn::StoreU(hn::DemoteTo(hn::Rebind<T, DF>(), v), hn::Rebind<T, DF>(), p);
  }
}

/// Loads `count` (1..Lanes) elements; the lanes past them are zero.
template <typename T>
HWY_INLINE VF Load(DF df, const T* HWY_RESTRICT p, std::size_t count) {
  if (HWY_LIKELY(count == hn::Lanes(df))) return LoadF32(df, p);
  alignas(64) T buffer[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buffer, p, count * sizeof(T));
  return LoadF32(df, buffer);
}

/// Stores the first `count` (1..Lanes) lanes; memory past them is untouched.
template <typename T>
HWY_INLINE void Store(DF df, VF v, T* HWY_RESTRICT p, std::size_t count) {
  if (HWY_LIKELY(count == hn::Lanes(df))) return StoreF32(df, v, p);
  alignas(64) T buffer[HWY_MAX_BYTES / sizeof(float)];
  StoreF32(df, v, buffer);
  std::memcpy(p, buffer, count * sizeof(T));
}

/// Calls body(offset, count) over [0, size) in chunks of Lanes(df); only the last chunk may
/// be shorter.
template <typename Body>
HWY_INLINE void ForEachChunk(DF df, std::size_t size, const Body& body) {
  const std::size_t lanes = hn::Lanes(df);
  std::size_t i = 0;
  for (; i + lanes <= size; i += lanes) body(i, lanes);
  if (i < size) body(i, size - i);
}

/// Sum of all lanes.
HWY_INLINE float SumLanes(DF df, VF v) { return hn::GetLane(hn::SumOfLanes(df, v)); }
/// Maximum of all lanes.
HWY_INLINE float MaxLanes(DF df, VF v) { return hn::GetLane(hn::MaxOfLanes(df, v)); }

/// Sum of squares of `size` elements, in float32.
/// Promotes a row to float32 into `staged` and returns its sum of squares.
template <typename T>
HWY_INLINE float StageRow(DF df, const T* HWY_RESTRICT x, float* HWY_RESTRICT staged, std::size_t hidden) {
  VF acc = hn::Zero(df);
  ForEachChunk(df, hidden, [&](std::size_t i, std::size_t n) {
    const VF v = Load(df, x + i, n);
    Store(df, v, staged + i, n);
    acc = hn::MulAdd(v, v, acc);
  });
  return SumLanes(df, acc);
}

template <typename T>
HWY_INLINE float SumOfSquares(DF df, const T* HWY_RESTRICT x, std::size_t size) {
  VF acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  const std::size_t lanes = hn::Lanes(df);
  std::size_t i = 0;
  // Two accumulators hide the FMA latency.
  for (; i + 2 * lanes <= size; i += 2 * lanes) {
    const VF a = LoadF32(df, x + i), b = LoadF32(df, x + i + lanes);
    acc0 = hn::MulAdd(a, a, acc0);
    acc1 = hn::MulAdd(b, b, acc1);
  }
  ForEachChunk(df, size - i, [&](std::size_t j, std::size_t n) {
    const VF a = Load(df, x + i + j, n);
    acc0 = hn::MulAdd(a, a, acc0);
  });
  return SumLanes(df, hn::Add(acc0, acc1));
}

/// Maximum of |x| over `size` elements, in float32.
template <typename T>
HWY_INLINE float AbsMax(DF df, const T* HWY_RESTRICT x, std::size_t size) {
  VF acc = hn::Zero(df);
  ForEachChunk(df, size, [&](std::size_t i, std::size_t n) { acc = hn::Max(acc, hn::Abs(Load(df, x + i, n))); });
  return MaxLanes(df, acc);
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // MLLM_KERNEL_CPU_SIMD_IO_INL_H_ toggle
