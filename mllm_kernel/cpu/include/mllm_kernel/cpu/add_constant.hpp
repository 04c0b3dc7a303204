// Per-target body of the CPU add_constant kernels. Highway's foreach_target includes this file
// once per SIMD target, so it has no #pragma once.
#include <hwy/highway.h>

#include <cstddef>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// dst[i] = src[i] + value over `count` floats; full vectors, then a masked-free scalar tail.
inline void AddScalar(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, std::size_t count, float value) {
  const hn::ScalableTag<float> d;
  const std::size_t lanes = hn::Lanes(d);
  const auto v_value = hn::Set(d, value);
  std::size_t i = 0;
  for (; i + lanes <= count; i += lanes) {
    hn::StoreU(hn::Add(hn::LoadU(d, src + i), v_value), d, dst + i);
  }
  for (; i < count; ++i) dst[i] = src[i] + value;
}

/// The compile-time constant variant: the constant is folded into the vector body.
template <int kConstant>
HWY_NOINLINE void AddConstant(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, std::size_t count) {
  AddScalar(dst, src, count, static_cast<float>(kConstant));
}

/// The run-time value variant.
HWY_NOINLINE void AddConstantRuntime(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, std::size_t count,
                                     float value) {
  AddScalar(dst, src, count, value);
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
