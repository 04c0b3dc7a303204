// Per-target body of CPU row softmax, computed in float32 with Highway's Exp. Included once
// per SIMD target by Highway's foreach_target; the parameter struct sits behind a classic
// include guard.
#ifndef MLLM_KERNEL_CPU_SOFTMAX_PARAMS_
#define MLLM_KERNEL_CPU_SOFTMAX_PARAMS_

#include <cstdint>

namespace mllm_kernel::cpu {

/// Rows of `cols` elements; strides in elements.
struct SoftmaxParams {
  const void* input;
  std::int64_t input_stride;
  void* out;
  std::int64_t out_stride;
  std::int64_t cols;
};

}  // namespace mllm_kernel::cpu

#endif  // MLLM_KERNEL_CPU_SOFTMAX_PARAMS_

#include <mllm_kernel/cpu/simd_io-inl.hpp>

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <limits>
#include <type_traits>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// softmax of rows [begin, end): max, then exp(x - max) kept in float32 (in the output row
/// itself for float32, else in a per-thread buffer) with its sum, then a scale by 1 / sum.
template <typename T>
HWY_NOINLINE void SoftmaxRows(const SoftmaxParams& p, std::int64_t begin, std::int64_t end) {
  const DF df;
  const auto cols = static_cast<std::size_t>(p.cols);
  thread_local std::vector<float> scratch;
  if (!std::is_same_v<T, float> && scratch.size() < cols) scratch.resize(cols);
  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  for (std::int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(p.input) + r * p.input_stride;
    T* y = static_cast<T*>(p.out) + r * p.out_stride;
    float* e = std::is_same_v<T, float> ? reinterpret_cast<float*>(y) : scratch.data();

    VF v_max = neg_inf;
    ForEachChunk(df, cols, [&](std::size_t i, std::size_t n) {
      v_max = hn::Max(v_max, hn::IfThenElse(hn::FirstN(df, n), Load(df, x + i, n), neg_inf));
    });
    const VF row_max = hn::Set(df, MaxLanes(df, v_max));

    VF v_sum = hn::Zero(df);
    ForEachChunk(df, cols, [&](std::size_t i, std::size_t n) {
      const VF ex = hn::IfThenElseZero(hn::FirstN(df, n), hn::Exp(df, hn::Sub(Load(df, x + i, n), row_max)));
      Store(df, ex, e + i, n);
      v_sum = hn::Add(v_sum, ex);
    });
    const VF inv_sum = hn::Set(df, 1.0f / SumLanes(df, v_sum));

    ForEachChunk(df, cols, [&](std::size_t i, std::size_t n) { Store(df, hn::Mul(Load(df, e + i, n), inv_sum), y + i, n); });
  }
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
