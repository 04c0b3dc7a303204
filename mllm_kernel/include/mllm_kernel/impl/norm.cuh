// RMSNorm building blocks: y = x * rsqrt(mean(x^2) + eps) * weight, in fp32 internally.
//
// A row is normalised in one pass: each thread loads its share of the row into registers
// (kItems vectors), the sum of squares is reduced across the cooperating threads, and the
// registers are scaled and stored. Two cooperation shapes:
//   - group path (`device::norm::rms_group_row`): kWidth lanes of a warp share a row (kWidth
//     <= 32); several rows per block, no shared memory, no barriers. For small hidden sizes
//     (<= 32 * kItems vectors), including per-head norms.
//   - CTA path (`device::norm::rms_cta_row`): the whole block shares one row through a
//     shared-memory reduction. For large hidden sizes.
// The launch plan that picks the path and block shape for a row length lives with its kernels'
// launch switch (cuda/csrc/norm.cuh).
//
// What is fused around the norm (`Fuse`): the residual add before it (flashinfer/sglang
// semantics: r = x + r is computed in fp32, rounded to T and stored, and the *rounded* r is what
// gets normalised), or the SiLU gate after it (gated DeltaNet's output norm: y = rmsnorm(x) * w *
// silu(z), all in fp32, rounded once).
#pragma once

#include <mllm_kernel/cta.cuh>
#include <mllm_kernel/math.cuh>
#include <mllm_kernel/tile.cuh>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/vec.cuh>
#include <mllm_kernel/warp.cuh>

#include <cstdint>

namespace mllm_kernel::device::norm {

/// What a norm does besides normalising a row.
enum class Fuse {
  kNone,         // y = rmsnorm(x) * w
  kResidualAdd,  // r = x + r (stored); y = rmsnorm(r) * w
  kSiluGate,     // y = rmsnorm(x) * w * silu(z)
};

/// Sum of squares of a vector's elements, in fp32.
template <typename T, int N>
MLLM_DEVICE float sum_squares(const AlignedVector<T, N>& v) {
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const float x = cast<float>(v[j]);
    acc = fmaf(x, x, acc);
  }
  return acc;
}

/// x + r in fp32, rounded once to T (the value stored back as the new residual).
template <typename T, int N>
MLLM_DEVICE AlignedVector<T, N> add(const AlignedVector<T, N>& x, const AlignedVector<T, N>& r) {
  AlignedVector<T, N> out;
#pragma unroll
  for (int j = 0; j < N; ++j) out[j] = cast<T>(cast<float>(x[j]) + cast<float>(r[j]));
  return out;
}

/// x * inv_rms * w per element in fp32, rounded once to T.
template <typename T, int N>
MLLM_DEVICE AlignedVector<T, N> scale(const AlignedVector<T, N>& x, const AlignedVector<T, N>& w, float inv_rms) {
  AlignedVector<T, N> out;
#pragma unroll
  for (int j = 0; j < N; ++j) out[j] = cast<T>(cast<float>(x[j]) * inv_rms * cast<float>(w[j]));
  return out;
}

/// x * inv_rms * w * silu(z) per element in fp32, rounded once to T.
template <typename T, int N>
MLLM_DEVICE AlignedVector<T, N> scale_gated(const AlignedVector<T, N>& x, const AlignedVector<T, N>& w,
                                            const AlignedVector<T, N>& z, float inv_rms) {
  AlignedVector<T, N> out;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const float g = cast<float>(z[j]);
    out[j] = cast<T>(cast<float>(x[j]) * inv_rms * cast<float>(w[j]) * __fdividef(g, 1.0f + __expf(-g)));
  }
  return out;
}

/// The pointers and sizes of one row. `residual` is read only by Fuse::kResidualAdd, `gate` only
/// by Fuse::kSiluGate.
template <typename T>
struct Row {
  T* out;
  const T* in;
  T* residual;
  const T* gate;
  const T* weight;
  int hidden;  // elements
};

namespace detail {

/// Shared body of both paths; `reduce` turns this thread's partial sum of squares into the
/// row's total.
template <typename T, int kVec, int kItems, Fuse kFuse, typename Reduce>
MLLM_DEVICE void rms_row(const tile::Memory<AlignedVector<T, kVec>>& mem, const Row<T>& row, float eps,
                         Reduce&& reduce) {
  using Vec = AlignedVector<T, kVec>;
  constexpr bool kFusedAdd = kFuse == Fuse::kResidualAdd;
  const int num_vecs = row.hidden / kVec;
  Vec x[kItems];
  Vec w[kItems];
  // The weight is usually L2-resident; issuing its loads together with the row's hides them.
  // The fused path holds x and r at once, so with many items per thread it issues the weight
  // loads right after the add (r is dead then): they still overlap the reduction, and the
  // peak stays at two vectors per item (no spills under the CTA path's register budget).
  constexpr bool kEarlyWeight = !kFusedAdd || kItems * kVec * sizeof(T) <= 32;
  mem.template load<kItems>(x, row.in, num_vecs);
  // The gate goes out with the row where a thread holds little of it; with many items per
  // thread it is loaded after the reduction, so it holds no registers through it.
  constexpr bool kGated = kFuse == Fuse::kSiluGate;
  constexpr bool kEarlyGate = kItems * kVec * sizeof(T) <= 32;
  Vec z[kGated ? kItems : 1];
  if constexpr (kGated && kEarlyGate) mem.template load<kItems>(z, row.gate, num_vecs);
  if constexpr (kFusedAdd) {
    Vec r[kItems];
    mem.template load<kItems>(r, row.residual, num_vecs);
    if constexpr (kEarlyWeight) mem.template load<kItems>(w, row.weight, num_vecs);
    mem.template for_each<kItems>(num_vecs, [&](int j, int) { x[j] = add(x[j], r[j]); });
    if constexpr (!kEarlyWeight) mem.template load<kItems>(w, row.weight, num_vecs);
  } else {
    mem.template load<kItems>(w, row.weight, num_vecs);
  }
  float partial = 0.0f;
  mem.template for_each<kItems>(num_vecs, [&](int j, int) { partial += sum_squares(x[j]); });
  const float total = reduce(partial);
  // The new residual is stored only now: a store before the loads above would keep them from
  // being issued early (residual may alias nothing, but the compiler cannot know).
  if constexpr (kFusedAdd) mem.template store<kItems>(x, row.residual, num_vecs);
  // Fast division (reciprocal + multiply, 2 ulp): the mean feeds rsqrtf, itself approximate,
  // and an IEEE division would add a subroutine to the critical path of every row.
  const float inv_rms = rsqrtf(__fdividef(total, static_cast<float>(row.hidden)) + eps);
  if constexpr (kGated) {
    if constexpr (!kEarlyGate) mem.template load<kItems>(z, row.gate, num_vecs);
    mem.template for_each<kItems>(num_vecs, [&](int j, int) { x[j] = scale_gated(x[j], w[j], z[j], inv_rms); });
  } else {
    mem.template for_each<kItems>(num_vecs, [&](int j, int) { x[j] = scale(x[j], w[j], inv_rms); });
  }
  mem.template store<kItems>(x, row.out, num_vecs);
}

}  // namespace detail

/// Normalises `row` with kWidth consecutive lanes (an aligned lane group of one warp); each
/// lane holds up to kItems vectors, so rows up to kWidth * kItems * kVec elements fit.
/// Every lane of the group must call it (no early exit for some lanes only).
template <typename T, int kVec, int kWidth, int kItems, Fuse kFuse>
MLLM_DEVICE void rms_group_row(const Row<T>& row, float eps) {
  using Vec = AlignedVector<T, kVec>;
  const auto mem = tile::Memory<Vec>::template group<kWidth>();
  // Lanes of other groups run other rows, so the shuffle mask is the whole warp: the groups
  // of a warp always call this together (the caller keeps every lane alive).
  detail::rms_row<T, kVec, kItems, kFuse>(mem, row, eps, [](float v) { return warp::reduce_sum<kWidth>(v); });
}

namespace detail {

/// Block sum for blocks of at most kMaxThreads threads (blockDim.x a multiple of 32): like
/// cta::reduce_sum, but the second stage shuffles over log2(kMaxThreads / 32) levels only.
/// Each aligned group of kMaxWarps lanes reads every warp's slot, so every lane gets the total.
template <int kMaxThreads>
MLLM_DEVICE float block_sum(float value, float* scratch) {
  constexpr int kMaxWarps = kMaxThreads / kWarpThreads;
  static_assert(kMaxWarps >= 1 && kMaxWarps <= kWarpThreads && (kMaxWarps & (kMaxWarps - 1)) == 0);
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  value = warp::reduce_sum(value);
  if constexpr (kMaxWarps == 1) {
    return value;
  } else {
    if (lane == 0) scratch[threadIdx.x / kWarpThreads] = value;
    __syncthreads();
    const int slot = lane % kMaxWarps;
    value = slot < static_cast<int>(blockDim.x) / kWarpThreads ? scratch[slot] : 0.0f;
    return warp::reduce_sum<kMaxWarps>(value);
  }
}

}  // namespace detail

/// Normalises `row` with all blockDim.x threads of the block (a multiple of 32); each thread
/// holds up to kItems vectors, so rows up to blockDim.x * kItems * kVec elements fit.
/// `scratch` is cta::kScratchSize floats of shared memory.
template <typename T, int kVec, int kItems, Fuse kFuse>
MLLM_DEVICE void rms_cta_row(const Row<T>& row, float eps, float* scratch) {
  using Vec = AlignedVector<T, kVec>;
  const auto mem = tile::Memory<Vec>::cta();
  detail::rms_row<T, kVec, kItems, kFuse>(mem, row, eps, [scratch](float v) { return cta::reduce_sum(v, scratch); });
}

/// rms_cta_row for blocks known to have at most kMaxThreads threads (a power of two, 32 to
/// 1024): the cross-warp stage of the reduction is shorter. `scratch` is kMaxThreads / 32
/// floats of shared memory.
template <typename T, int kVec, int kItems, int kMaxThreads, Fuse kFuse>
MLLM_DEVICE void rms_cta_row_bounded(const Row<T>& row, float eps, float* scratch) {
  using Vec = AlignedVector<T, kVec>;
  const auto mem = tile::Memory<Vec>::cta();
  detail::rms_row<T, kVec, kItems, kFuse>(mem, row, eps,
                                               [scratch](float v) { return detail::block_sum<kMaxThreads>(v, scratch); });
}

}  // namespace mllm_kernel::device::norm
