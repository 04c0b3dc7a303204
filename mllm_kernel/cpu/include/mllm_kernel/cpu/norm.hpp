// Per-target bodies of the CPU RMSNorm family (rmsnorm, fused_add_rmsnorm, qknorm,
// qknorm_across_heads, rms_norm_gated). Highway's foreach_target includes this file once per SIMD target, so
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
};

/// Visits rows first, first + 1, ... of a RowLayout. It steps (token, head) instead of dividing
/// per row: for a 64-128 element head a 64-bit division costs as much as the norm itself.
class RowIterator {
 public:
  RowIterator(const RowLayout& layout, std::int64_t first)
      : layout_(layout), token_(first / layout.heads), head_(first % layout.heads) {}

  template <typename T>
  T* get() const {
    return static_cast<T*>(layout_.data) + token_ * layout_.token_stride + head_ * layout_.head_stride;
  }

  void next() {
    if (++head_ == layout_.heads) {
      head_ = 0;
      ++token_;
    }
  }

 private:
  const RowLayout& layout_;
  std::int64_t token_;
  std::int64_t head_;
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

/// out <- rmsnorm(input) * weight * silu(gate), rows of one length.
struct RmsNormGatedParams {
  RowLayout input;
  RowLayout gate;
  RowLayout out;  // may equal input (in place)
  const void* weight;
  std::int64_t hidden;
  float eps;
};

}  // namespace mllm_kernel::cpu

#endif  // MLLM_KERNEL_CPU_NORM_PARAMS_

#include <mllm_kernel/cpu/silu-inl.hpp>
#include <mllm_kernel/cpu/simd_io-inl.hpp>

#include <hwy/highway.h>

#include <cmath>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// y = x * scale * w over one row, in float32 (x and w are T or already-promoted float32).
template <typename TIn, typename T>
HWY_INLINE void ScaleRow(DF df, const TIn* HWY_RESTRICT x, const TIn* HWY_RESTRICT w, T* y, std::size_t hidden,
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

/// Rows of fp16/bf16 up to this many elements are promoted to float32 once, on the stack.
constexpr std::size_t kStagedRowMax = 4096;

/// RMSNorm of rows [begin, end).
template <typename T>
HWY_NOINLINE void RmsNormRows(const RmsNormParams& p, std::int64_t begin, std::int64_t end) {
  const DF df;
  const auto hidden = static_cast<std::size_t>(p.hidden);
  const T* w = static_cast<const T*>(p.weight);
  RowIterator in(p.input, begin), out(p.out, begin);
  if constexpr (!std::is_same_v<T, float>) {
    if (hidden <= kStagedRowMax) {
      // Half-precision rows are compute-bound once in cache: convert the weight once per call and
      // each row once, so both passes read float32 from L1 instead of converting again.
      alignas(64) float weight[kStagedRowMax], row[kStagedRowMax];
      (void)StageRow(df, w, weight, hidden);  // the weight's sum of squares is not needed
      for (std::int64_t r = begin; r < end; ++r, in.next(), out.next()) {
        const float sum_of_squares = StageRow(df, in.get<T>(), row, hidden);
        ScaleRow(df, row, weight, out.get<T>(), hidden, InvRms(sum_of_squares, hidden, p.eps));
      }
      return;
    }
  }
  for (std::int64_t r = begin; r < end; ++r, in.next(), out.next()) {
    const T* x = in.get<T>();
    ScaleRow(df, x, w, out.get<T>(), hidden, InvRms(SumOfSquares(df, x, hidden), hidden, p.eps));
  }
}

/// Fused residual add + RMSNorm of rows [begin, end). The norm reads the residual as stored
/// (rounded to T), exactly as a separate add followed by rmsnorm would.
template <typename T>
HWY_NOINLINE void FusedAddRmsNormRows(const FusedAddRmsNormParams& p, std::int64_t begin, std::int64_t end) {
  const DF df;
  const auto hidden = static_cast<std::size_t>(p.hidden);
  const T* w = static_cast<const T*>(p.weight);
  RowIterator in(p.input, begin), residual(p.residual, begin);
  for (std::int64_t r = begin; r < end; ++r, in.next(), residual.next()) {
    T* x = in.get<T>();
    T* res = residual.get<T>();
    VF acc = hn::Zero(df);
    ForEachChunk(df, hidden, [&](std::size_t i, std::size_t n) {
      Store(df, hn::Add(Load(df, x + i, n), Load(df, res + i, n)), res + i, n);
      const VF stored = Load(df, res + i, n);  // the rounded value
      acc = hn::MulAdd(stored, stored, acc);
    });
    ScaleRow(df, res, w, x, hidden, InvRms(SumLanes(df, acc), hidden, p.eps));
  }
}

/// Gated RMSNorm of rows [begin, end): the row's sum of squares, then one pass of
/// x * inv_rms * w * silu(z).
template <typename T>
HWY_NOINLINE void RmsNormGatedRows(const RmsNormGatedParams& p, std::int64_t begin, std::int64_t end) {
  const DF df;
  const auto hidden = static_cast<std::size_t>(p.hidden);
  const T* w = static_cast<const T*>(p.weight);
  const Silu silu;
  RowIterator in(p.input, begin), gate(p.gate, begin), out(p.out, begin);
  for (std::int64_t r = begin; r < end; ++r, in.next(), gate.next(), out.next()) {
    const T* x = in.get<T>();
    const T* z = gate.get<T>();
    T* y = out.get<T>();
    const VF v_scale = hn::Set(df, InvRms(SumOfSquares(df, x, hidden), hidden, p.eps));
    ForEachChunk(df, hidden, [&](std::size_t i, std::size_t n) {
      const VF normed = hn::Mul(hn::Mul(Load(df, x + i, n), v_scale), Load(df, w + i, n));
      Store(df, hn::Mul(normed, silu(df, Load(df, z + i, n))), y + i, n);
    });
  }
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
