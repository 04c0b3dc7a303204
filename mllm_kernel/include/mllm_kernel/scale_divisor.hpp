// Division of many values by one scale, as the quantizers need it: x / scale equal to IEEE
// fp32 division wherever a quantized format can tell, for two multiplies and two FMAs an element.
//
// Why not `x / scale`: nvcc inlines a reciprocal sequence, a range check and a call to an
// out-of-line slow path for every IEEE division. A kernel quantizing 32 elements per thread
// grows past a thousand instructions, and for a few tokens fetching that code, not memory, sets
// the kernel's time (Nsight Compute, H100, one token of group-128 FP8 quantization: 5.6 us for
// ours against 3.1 us for Inductor's kernel).
//
// How: the reciprocal is taken once (IEEE, correctly rounded); each quotient q = x * inv, within
// an ulp of x / scale, is then refined once with the exact remainder: q + fma(-scale, q, x) * inv
// (Markstein's correction: with a correctly rounded reciprocal one step gives the correctly
// rounded quotient; a second step changed nothing in the tests below nor in 57 million random
// float pairs with quotients in the band). That is exact while the scale lies in [2^-64, 2^64];
// other scales are first brought there by a power of two (2^100 or 2^-100) that multiplies x
// too. The result equals x / scale whenever 2^-19 <= |x / scale| < 2^19, for every scale
// (tests/cpp/test_scale_divisor.cpp checks every bf16 and fp16 value and random floats against
// scales over the whole float range). Where q is not within 2^-20 <= |q| < 2^20 the unrefined
// product is returned: it keeps the sign, NaN and infinity, and is within two ulps of the
// quotient, which fp8 e4m3 and int8 round to zero (below 2^-19) or saturate (from 2^19) either
// way. A zero scale gives 0, as the quantizers define it. Per element: two multiplies, two
// FMAs, two compares, a select and a mask, no branch.
#pragma once

#include <mllm_kernel/host_device.hpp>

#include <math.h>

#include <bit>
#include <cstdint>

namespace mllm_kernel {

/// Divides by one scale; built once per scale, applied to every element.
class ScaleDivisor {
 public:
  MLLM_HOST_DEVICE explicit ScaleDivisor(float scale) {
    // Scales outside [2^-64, 2^64] are brought inside by a power of two that the dividend is
    // multiplied by too (exact wherever the quotient is in the band: see the file comment).
    const float magnitude = fabsf(scale);
    prescale_ = magnitude < 0x1p-64f ? 0x1p100f : (magnitude > 0x1p64f ? 0x1p-100f : 1.0f);
    divisor_ = scale * prescale_;
    inv_ = 1.0f / divisor_;
    keep_bits_ = scale == 0.0f ? 0u : ~0u;
  }

  /// x / scale (see the file comment for where it is exact); 0 for a zero scale.
  MLLM_HOST_DEVICE float operator()(float x) const {
    const float dividend = x * prescale_;
    const float q0 = dividend * inv_;
    const float q1 = fmaf(fmaf(-divisor_, q0, dividend), inv_, q0);
    // False for NaN and infinity, which stay as they are (and for a zero scale's quotients).
    const bool in_band = fabsf(q0) >= 0x1p-20f && fabsf(q0) < 0x1p20f;
    // A prvalue: bit_cast of the lvalue `in_band ? q1 : q0` binds a reference, and nvcc then
    // put both quotients in local memory and loaded through the chosen address.
    const float q = in_band ? q1 : q0;
    // A zero scale clears every bit: a mask, not a branch, so nvcc keeps one copy of the loop.
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(q) & keep_bits_);
  }

 private:
  float prescale_;
  float divisor_;
  float inv_;
  std::uint32_t keep_bits_;
};

}  // namespace mllm_kernel
