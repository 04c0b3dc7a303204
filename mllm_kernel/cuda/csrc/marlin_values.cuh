// The arithmetic that turns Marlin-format words into 16-bit MMA operands (for the Marlin GEMM,
// csrc/marlin_gemm.cuh): exact small integers made by placing bits under a float's exponent,
// zero points as the values to subtract, and the pair conversions of fp16 and bf16.
#pragma once

#include <mllm_kernel/type.cuh>

#include <cstdint>
#include <type_traits>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;

template <typename T>
using Pair = std::conditional_t<std::is_same_v<T, fp16_t>, __half2, __nv_bfloat162>;

template <typename T>
__device__ __forceinline__ Pair<T> as_pair(std::uint32_t bits) {
  return *reinterpret_cast<Pair<T>*>(&bits);
}
template <typename T>
__device__ __forceinline__ std::uint32_t as_bits(Pair<T> v) {
  return *reinterpret_cast<std::uint32_t*>(&v);
}

/// The exponent pattern that turns a small integer i in a 16-bit float's low mantissa bits into
/// kBase4 + i exactly (1024 for fp16, 128 for bf16).
template <typename T>
constexpr std::uint32_t kExponent4 = std::is_same_v<T, fp16_t> ? 0x64006400u : 0x43004300u;
template <typename T>
constexpr float kBase4 = std::is_same_v<T, fp16_t> ? 1024.0f : 128.0f;

/// (value of nibbles 0 and 4 of w) + kBase4, as a pair: (w & mask) | exponent in one LOP3
/// (written out because the compiler splits an AND and an OR of two constants in two).
template <typename T>
__device__ __forceinline__ std::uint32_t nibble_pair(std::uint32_t w) {
  std::uint32_t out;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(out) : "r"(w), "n"(0x000f000fu), "n"(kExponent4<T>));
  return out;
}

/// kBase4 + (the low nibble of w), in both halves of a pair: a 4-bit zero point as the value
/// the dequantizer subtracts.
template <typename T>
__device__ __forceinline__ std::uint32_t zero_point_pair(std::uint32_t w) {
  std::uint32_t v;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(v) : "r"(w), "n"(0xfu), "n"(kExponent4<T> & 0xffffu));
  return __byte_perm(v, 0u, 0x1010u);
}

/// Bytes (lo, hi) of w as a pair of exact signed values minus 128.
template <typename T>
__device__ __forceinline__ std::uint32_t byte_pair(std::uint32_t w, int lo, int hi) {
  if constexpr (std::is_same_v<T, fp16_t>) {
    // 0x64 above a byte is 1024 + byte in fp16.
    const std::uint32_t v = __byte_perm(w, 0x64u, lo | 4 << 4 | hi << 8 | 4 << 12);
    return as_bits<T>(__hsub2(as_pair<T>(v), __half2half2(__float2half(1152.0f))));
  } else {
    const float a = __uint_as_float(0x4b000000u | (w >> (8 * lo) & 0xffu)) - 8388736.0f;
    const float b = __uint_as_float(0x4b000000u | (w >> (8 * hi) & 0xffu)) - 8388736.0f;
    return as_bits<T>(__floats2bfloat162_rn(a, b));
  }
}

/// Bytes (lo, hi) of w, float8_e4m3fn values, as a pair whose exponent keeps float8's bias: the
/// sign and the 7 magnitude bits moved under T's sign, which is the value times 2^-8 in fp16 and
/// 2^-120 in bf16, exactly (subnormals too). Serving code folds that power of two into the scales
/// (fp8_fused_exponent_bias_into_scales), as vLLM's Marlin kernel expects.
template <typename T>
__device__ __forceinline__ std::uint32_t fp8_pair(std::uint32_t w, int lo, int hi) {
  constexpr int kShift = std::is_same_v<T, fp16_t> ? 1 : 4;  // magnitude from bits 14..8 to 13..7 or 10..4
  const std::uint32_t v = __byte_perm(w, 0u, 4 | lo << 4 | 4 << 8 | hi << 12);  // each byte in the top of a half
  return (v & 0x80008000u) | ((v & 0x7f007f00u) >> kShift);
}

/// The two B-fragment registers of 8-column block xb of a lane's words q (kBits words: 32
/// values), rows (2t, 2t + 1) in lo and (2t + 8, 2t + 9) in hi, unscaled: q minus its zero point
/// (4-bit: sub_lo and sub_hi, kBase4 + the zero point or the bias; 8-bit integers: 128) or, for
/// float8, the value times 2^-8 (fp16) or 2^-120 (bf16).
template <typename T, int kBits, bool kFp8>
__device__ __forceinline__ void dequant_block(const std::uint32_t* q, int xb, Pair<T> sub_lo, Pair<T> sub_hi,
                                              std::uint32_t& lo, std::uint32_t& hi) {
  if constexpr (kBits == 4) {
    const std::uint32_t w = q[xb / 2] >> (8 * (xb % 2));
    lo = as_bits<T>(__hsub2(as_pair<T>(nibble_pair<T>(w)), sub_lo));
    hi = as_bits<T>(__hsub2(as_pair<T>(nibble_pair<T>(w >> 4)), sub_hi));
  } else {
    // Bytes hold values 0, 2, 1, 3 of the block: (0, 1) at bytes 0 and 2, (2, 3) at 1 and 3.
    lo = kFp8 ? fp8_pair<T>(q[xb], 0, 2) : byte_pair<T>(q[xb], 0, 2);
    hi = kFp8 ? fp8_pair<T>(q[xb], 1, 3) : byte_pair<T>(q[xb], 1, 3);
  }
}

template <typename T>
__device__ __forceinline__ Pair<T> pair_of(T lo, T hi) {
  if constexpr (std::is_same_v<T, fp16_t>) {
    return __halves2half2(lo, hi);
  } else {
    return __halves2bfloat162(lo, hi);
  }
}

template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, fp16_t>) {
    return __float2half_rn(x);
  } else {
    return __float2bfloat16_rn(x);
  }
}

}  // namespace
