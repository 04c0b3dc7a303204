// Per-target bodies of the CPU RMSNorm family (rmsnorm, fused_add_rmsnorm, qknorm,
// qknorm_across_heads). Highway's foreach_target includes this file once per SIMD target, so
// the parameter structs sit behind a classic include guard and the bodies have none.
//
// A "row" is `hidden` contiguous elements; row r lives at
//   base + (r / heads) * token_stride + (r % heads) * head_stride   (elements)
// which covers plain 2-D rows (heads = 1) and the heads of a [T, H, D] tensor alike.
#ifndef MLLM_KERNEL_CPU_NORM_PARAMS_
#define MLLM_KERNEL_CPU_NORM_PARAMS_

#include <cstdint>

namespace mllm_kernel::cpu {

/// Where the rows of one tensor live (see the file comment).
struct RowLayout {
  void* data;
  std::int64_t token_stride;
  std::int64_t head_stride;
  std::int64_t heads;

  template <typename T>
  T* row(std::int64_t r) const {
    return static_cast<T*>(data) + (r / heads) * token_stride + (r % heads) * head_stride;
  }
};

/// out_row = input_row * rsqrt(mean(input_row^2) + eps) * weight, for every row.
struct RmsNormParams {
  RowLayout input;
  RowLayout out;  // may equal input (in place)
  const void* weight;
  std::int64_t hidden;
  float eps;
};

/// residual <- input + residual (stored in T); input <- rmsnorm(residual) * weight.
struct FusedAddRmsNormParams {
  RowLayout input;
  RowLayout residual;
  const void* weight;
  std::int64_t hidden;
  float eps;
};

}  // namespace mllm_kernel::cpu

#endif  // MLLM_KERNEL_CPU_NORM_PARAMS_

#include <mllm_kernel/cpu/simd_io-inl.hpp>

#include <hwy/highway.h>

#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// y = x * scale * w over one row, in float32.
template <typename T>
HWY_INLINE void ScaleRow(DF df, const T* HWY_RESTRICT x, const T* HWY_RESTRICT w, T* y, std::size_t hidden,
                         float scale) {
  const VF v_scale = hn::Set(df, scale);
  ForEachChunk(df, hidden, [&](std::size_t i, std::size_t n) {
    Store(df, hn::Mul(hn::Mul(Load(df, x + i, n), v_scale), Load(df, w + i, n)), y + i, n);
  });
}

/// 1 / sqrt(mean of squares + eps).
HWY_INLINE float InvRms(float sum_of_squares, std::size_t hidden, float eps) {
  return 1.0f / std::sqrt(sum_of_squares / static_cast<float>(hidden) + eps);
}

/// RMSNorm of rows [begin, end).
template <typename T>
HWY_NOINLINE void RmsNormRows(const RmsNormParams& p, std::int64_t begin, std::int64_t end) {
  const DF df;
  const auto hidden = static_cast<std::size_t>(p.hidden);
  const T* w = static_cast<const T*>(p.weight);
  for (std::int64_t r = begin; r < end; ++r) {
    const T* x = p.input.row<T>(r);
    ScaleRow(df, x, w, p.out.row<T>(r), hidden, InvRms(SumOfSquares(df, x, hidden), hidden, p.eps));
  }
}

/// Fused residual add + RMSNorm of rows [begin, end). The norm reads the residual as stored
/// (rounded to T), exactly as a separate add followed by rmsnorm would.
template <typename T>
HWY_NOINLINE void FusedAddRmsNormRows(const FusedAddRmsNormParams& p, std::int64_t begin, std::int64_t end) {
  const DF df;
  const auto hidden = static_cast<std::size_t>(p.hidden);
  const T* w = static_cast<const T*>(p.weight);
  for (std::int64_t r = begin; r < end; ++r) {
    T* x = p.input.row<T>(r);
    T* res = p.residual.row<T>(r);
    VF acc = hn::Zero(df);
    ForEachChunk(df, hidden, [&](std::size_t i, std::size_t n) {
      Store(df, hn::Add(Load(df, x + i, n), Load(df, res + i, n)), res + i, n);
      const VF stored = Load(df, res + i, n);  // the rounded value
      acc = hn::MulAdd(stored, stored, acc);
    });
    ScaleRow(df, res, w, x, hidden, InvRms(SumLanes(df, acc), hidden, p.eps));
  }
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
