// Per-target SiLU on float32 vectors, shared by the gated activations and the gated RMSNorm.
// Included from per-target body headers (once per SIMD target), so it uses Highway's toggle
// guard instead of #pragma once.
#if defined(MLLM_KERNEL_CPU_SILU_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MLLM_KERNEL_CPU_SILU_INL_H_
#undef MLLM_KERNEL_CPU_SILU_INL_H_
#else
#define MLLM_KERNEL_CPU_SILU_INL_H_
#endif

#include <mllm_kernel/cpu/simd_io-inl.hpp>

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// x * sigmoid(x) = x / (1 + exp(-x)); the exponent is capped where exp(-x) already
/// overflows float32 anyway (Highway's Exp is only valid up to +104).
struct Silu {
  HWY_INLINE VF operator()(DF df, VF x) const {
    const VF e = hn::Exp(df, hn::Min(hn::Neg(x), hn::Set(df, 88.0f)));
    return hn::Div(x, hn::Add(hn::Set(df, 1.0f), e));
  }
};

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // MLLM_KERNEL_CPU_SILU_INL_H_
