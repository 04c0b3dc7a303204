// Per-target bodies of the CPU gated activations: out = act(x[:d]) * x[d:] per row, with act
// SiLU, exact (erf) GELU or tanh GELU, computed in float32. Included once per SIMD target by
// Highway's foreach_target; the parameter struct sits behind a classic include guard.
#ifndef MLLM_KERNEL_CPU_ACTIVATION_PARAMS_
#define MLLM_KERNEL_CPU_ACTIVATION_PARAMS_

#include <cstdint>

namespace mllm_kernel::cpu {

/// input rows are [2 * d] (gate then up), out rows [d]; strides in elements.
struct ActAndMulParams {
  const void* input;
  std::int64_t input_stride;
  void* out;
  std::int64_t out_stride;
  std::int64_t d;
};

}  // namespace mllm_kernel::cpu

#endif  // MLLM_KERNEL_CPU_ACTIVATION_PARAMS_

#include <mllm_kernel/cpu/silu-inl.hpp>
#include <mllm_kernel/cpu/simd_io-inl.hpp>

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// 0.5 * x * (1 + erf(x / sqrt(2))). Highway 1.0 has no Erf, so erf is Abramowitz & Stegun
/// 7.1.26 (|error| < 1.5e-7, below float32's resolution of the result) on top of Highway's Exp.
struct GeluErf {
  HWY_INLINE VF operator()(DF df, VF x) const {
    const VF z = hn::Mul(hn::Abs(x), hn::Set(df, 0.70710678118654752f));
    const VF t = hn::Div(hn::Set(df, 1.0f), hn::MulAdd(hn::Set(df, 0.3275911f), z, hn::Set(df, 1.0f)));
    VF poly = hn::Set(df, 1.061405429f);
    poly = hn::MulAdd(poly, t, hn::Set(df, -1.453152027f));
    poly = hn::MulAdd(poly, t, hn::Set(df, 1.421413741f));
    poly = hn::MulAdd(poly, t, hn::Set(df, -0.284496736f));
    poly = hn::MulAdd(poly, t, hn::Set(df, 0.254829592f));
    poly = hn::Mul(poly, t);
    // erfc(|x|/sqrt2) = poly * exp(-z^2); erf(x/sqrt2) = sign(x) * (1 - erfc).
    const VF erfc = hn::Mul(poly, hn::Exp(df, hn::Neg(hn::Mul(z, z))));
    const VF erf = hn::CopySign(hn::Sub(hn::Set(df, 1.0f), erfc), x);
    return hn::Mul(hn::Mul(hn::Set(df, 0.5f), x), hn::Add(hn::Set(df, 1.0f), erf));
  }
};

/// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), with Highway's Tanh.
struct GeluTanh {
  HWY_INLINE VF operator()(DF df, VF x) const {
    const VF x3 = hn::Mul(hn::Mul(x, x), x);
    const VF inner = hn::Mul(hn::Set(df, 0.7978845608028654f), hn::MulAdd(hn::Set(df, 0.044715f), x3, x));
    return hn::Mul(hn::Mul(hn::Set(df, 0.5f), x), hn::Add(hn::Set(df, 1.0f), hn::Tanh(df, inner)));
  }
};

/// out = act(gate) * up over rows [begin, end).
template <typename T, typename Act>
HWY_INLINE void ActAndMulRows(const ActAndMulParams& p, std::int64_t begin, std::int64_t end) {
  const DF df;
  const Act act;
  const auto d = static_cast<std::size_t>(p.d);
  for (std::int64_t r = begin; r < end; ++r) {
    const T* gate = static_cast<const T*>(p.input) + r * p.input_stride;
    const T* up = gate + d;
    T* y = static_cast<T*>(p.out) + r * p.out_stride;
    ForEachChunk(df, d, [&](std::size_t i, std::size_t n) {
      Store(df, hn::Mul(act(df, Load(df, gate + i, n)), Load(df, up + i, n)), y + i, n);
    });
  }
}

/// SiLU(gate) * up.
template <typename T>
HWY_NOINLINE void SiluAndMulRows(const ActAndMulParams& p, std::int64_t begin, std::int64_t end) {
  ActAndMulRows<T, Silu>(p, begin, end);
}
/// GELU(gate) * up, exact (erf) form.
template <typename T>
HWY_NOINLINE void GeluAndMulRows(const ActAndMulParams& p, std::int64_t begin, std::int64_t end) {
  ActAndMulRows<T, GeluErf>(p, begin, end);
}
/// GELU(gate) * up, tanh approximation.
template <typename T>
HWY_NOINLINE void GeluTanhAndMulRows(const ActAndMulParams& p, std::int64_t begin, std::int64_t end) {
  ActAndMulRows<T, GeluTanh>(p, begin, end);
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
