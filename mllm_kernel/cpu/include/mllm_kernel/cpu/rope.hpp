// Per-target body of CPU rotary position embedding (NeoX and GPT-J layouts, partial rotary),
// applied in place to q and k in float32. Included once per SIMD target by Highway's
// foreach_target; the parameter struct sits behind a classic include guard.
#ifndef MLLM_KERNEL_CPU_ROPE_PARAMS_
#define MLLM_KERNEL_CPU_ROPE_PARAMS_

#include <cstdint>

namespace mllm_kernel::cpu {

/// Heads of one tensor ([T, H, D], strides in elements, last dim dense).
struct RopeHeads {
  void* data;
  std::int64_t token_stride;
  std::int64_t head_stride;
  std::int64_t heads;
};

/// q and k rotated by the cos/sin of each token's position.
struct RopeParams {
  RopeHeads q;
  RopeHeads k;
  const void* positions;  // [T], int32 or int64, already range-checked
  bool positions_int64;
  const float* cos_sin_cache;  // [max_pos, rotary_dim]: cos (rotary_dim/2) then sin
  std::int64_t rotary_dim;     // even, <= head_dim; dims past it are left alone
  bool is_neox;                // NeoX: pairs (i, i + rotary_dim/2); GPT-J: pairs (2i, 2i+1)
};

}  // namespace mllm_kernel::cpu

#endif  // MLLM_KERNEL_CPU_ROPE_PARAMS_

#include <mllm_kernel/cpu/simd_io-inl.hpp>

#include <hwy/highway.h>

#include <vector>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// NeoX: x1' = x1 c - x2 s, x2' = x2 c + x1 s with x1 = x[:half], x2 = x[half:rot].
template <typename T>
HWY_INLINE void RotateNeox(DF df, T* x, const float* cos, const float* sin, std::size_t half) {
  ForEachChunk(df, half, [&](std::size_t i, std::size_t n) {
    const VF x1 = Load(df, x + i, n), x2 = Load(df, x + half + i, n);
    const VF c = Load(df, cos + i, n), s = Load(df, sin + i, n);
    Store(df, hn::NegMulAdd(x2, s, hn::Mul(x1, c)), x + i, n);
    Store(df, hn::MulAdd(x1, s, hn::Mul(x2, c)), x + half + i, n);
  });
}

/// GPT-J: x' = x * cos_dup + swap_pairs(x) * signed_sin_dup, where cos_dup[2i] =
/// cos_dup[2i+1] = cos[i] and signed_sin_dup = (-sin[i], +sin[i]) (built once per token).
template <typename T>
HWY_INLINE void RotateGptj(DF df, T* x, const float* cos_dup, const float* sin_dup, std::size_t rot) {
  if (hn::Lanes(df) < 2) {  // a one-lane target has no pairs to swap within a vector
    for (std::size_t i = 0; i < rot; i += 2) {
      const float a = hn::GetLane(Load(df, x + i, 1)), b = hn::GetLane(Load(df, x + i + 1, 1));
      Store(df, hn::Set(df, a * cos_dup[i] + b * sin_dup[i]), x + i, 1);
      Store(df, hn::Set(df, b * cos_dup[i + 1] + a * sin_dup[i + 1]), x + i + 1, 1);
    }
    return;
  }
  // Chunks start at multiples of the (even) lane count and rot is even, so pairs never split.
  ForEachChunk(df, rot, [&](std::size_t i, std::size_t n) {
    const VF v = Load(df, x + i, n);
    const VF swapped = hn::Reverse2(df, v);
    Store(df, hn::MulAdd(swapped, Load(df, sin_dup + i, n), hn::Mul(v, Load(df, cos_dup + i, n))), x + i, n);
  });
}

/// Rotates every head of tokens [begin, end).
template <typename T>
HWY_NOINLINE void RopeTokens(const RopeParams& p, std::int64_t begin, std::int64_t end) {
  const DF df;
  const auto rot = static_cast<std::size_t>(p.rotary_dim);
  const std::size_t half = rot / 2;
  thread_local std::vector<float> dup;  // GPT-J's duplicated cos/sin, per thread
  if (!p.is_neox && dup.size() < 2 * rot) dup.resize(2 * rot);
  for (std::int64_t t = begin; t < end; ++t) {
    const std::int64_t pos = p.positions_int64 ? static_cast<const std::int64_t*>(p.positions)[t]
                                               : static_cast<const std::int32_t*>(p.positions)[t];
    const float* cos = p.cos_sin_cache + pos * p.rotary_dim;
    const float* sin = cos + half;
    if (!p.is_neox) {
      for (std::size_t i = 0; i < half; ++i) {
        dup[2 * i] = dup[2 * i + 1] = cos[i];
        dup[rot + 2 * i] = -sin[i];
        dup[rot + 2 * i + 1] = sin[i];
      }
    }
    for (const RopeHeads* heads : {&p.q, &p.k}) {
      for (std::int64_t h = 0; h < heads->heads; ++h) {
        T* x = static_cast<T*>(heads->data) + t * heads->token_stride + h * heads->head_stride;
        if (p.is_neox) {
          RotateNeox(df, x, cos, sin, half);
        } else {
          RotateGptj(df, x, dup.data(), dup.data() + rot, rot);
        }
      }
    }
  }
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
