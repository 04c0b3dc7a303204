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
// `host::norm::plan` picks the path and block shape for a row length.
//
// The optional fused residual add (flashinfer/sglang semantics): r = x + r is computed in fp32,
// rounded to T and stored, and the *rounded* r is what gets normalised.
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

/// The pointers and sizes of one row. `residual` is only used when the fused add is on.
template <typename T>
struct Row {
  T* out;
  const T* in;
  T* residual;
  const T* weight;
  int hidden;  // elements
};

namespace detail {

/// Shared body of both paths; `reduce` turns this thread's partial sum of squares into the
/// row's total.
template <typename T, int kVec, int kItems, bool kFusedAdd, typename Reduce>
MLLM_DEVICE void rms_row(const tile::Memory<AlignedVector<T, kVec>>& mem, const Row<T>& row, float eps,
                         Reduce&& reduce) {
  using Vec = AlignedVector<T, kVec>;
  const int num_vecs = row.hidden / kVec;
  Vec x[kItems];
  Vec w[kItems];
  // The weight is usually L2-resident; issuing its loads together with the row's hides them,
  // unless the fused path already holds so many registers that this would spill.
  constexpr bool kEarlyWeight = !kFusedAdd || kItems * kVec * sizeof(T) <= 64;
  mem.template load<kItems>(x, row.in, num_vecs);
  if constexpr (kFusedAdd) {
    Vec r[kItems];
    mem.template load<kItems>(r, row.residual, num_vecs);
    if constexpr (kEarlyWeight) mem.template load<kItems>(w, row.weight, num_vecs);
    mem.template for_each<kItems>(num_vecs, [&](int j, int) { x[j] = add(x[j], r[j]); });
  } else {
    mem.template load<kItems>(w, row.weight, num_vecs);
  }
  float partial = 0.0f;
  mem.template for_each<kItems>(num_vecs, [&](int j, int) { partial += sum_squares(x[j]); });
  const float total = reduce(partial);
  if constexpr (!kEarlyWeight) mem.template load<kItems>(w, row.weight, num_vecs);
  // The new residual is stored only now: a store before the loads above would keep them from
  // being issued early (residual may alias nothing, but the compiler cannot know).
  if constexpr (kFusedAdd) mem.template store<kItems>(x, row.residual, num_vecs);
  const float inv_rms = rsqrtf(total / static_cast<float>(row.hidden) + eps);
  mem.template for_each<kItems>(num_vecs, [&](int j, int) { x[j] = scale(x[j], w[j], inv_rms); });
  mem.template store<kItems>(x, row.out, num_vecs);
}

}  // namespace detail

/// Normalises `row` with kWidth consecutive lanes (an aligned lane group of one warp); each
/// lane holds up to kItems vectors, so rows up to kWidth * kItems * kVec elements fit.
/// Every lane of the group must call it (no early exit for some lanes only).
template <typename T, int kVec, int kWidth, int kItems, bool kFusedAdd>
MLLM_DEVICE void rms_group_row(const Row<T>& row, float eps) {
  using Vec = AlignedVector<T, kVec>;
  const auto mem = tile::Memory<Vec>::template group<kWidth>();
  // Lanes of other groups run other rows, so the shuffle mask is the whole warp: the groups
  // of a warp always call this together (the caller keeps every lane alive).
  detail::rms_row<T, kVec, kItems, kFusedAdd>(mem, row, eps, [](float v) { return warp::reduce_sum<kWidth>(v); });
}

/// Normalises `row` with all blockDim.x threads of the block (a multiple of 32); each thread
/// holds up to kItems vectors, so rows up to blockDim.x * kItems * kVec elements fit.
/// `scratch` is cta::kScratchSize floats of shared memory.
template <typename T, int kVec, int kItems, bool kFusedAdd>
MLLM_DEVICE void rms_cta_row(const Row<T>& row, float eps, float* scratch) {
  using Vec = AlignedVector<T, kVec>;
  const auto mem = tile::Memory<Vec>::cta();
  detail::rms_row<T, kVec, kItems, kFusedAdd>(mem, row, eps, [scratch](float v) { return cta::reduce_sum(v, scratch); });
}

}  // namespace mllm_kernel::device::norm

namespace mllm_kernel::host::norm {

/// Vectors each lane holds on the group path with full-warp groups.
inline constexpr int kGroupItems = 4;
/// Threads per block on the group path.
inline constexpr int kGroupBlockThreads = 128;
/// Most threads per block on the CTA path (512 keeps 128 registers per thread: no spills).
inline constexpr int kCtaMaxThreads = 512;
/// Vectors per thread on the CTA path when that is enough; longer rows use a larger count
/// chosen by the caller per vector width (`large_items`).
inline constexpr int kCtaItemsSmall = 4;

/// How to run a row length: group path with `group_width` lanes per row (8, 16 or 32), or the
/// CTA path (`group_width == 0`) with `cta_threads` threads per row, each holding `cta_items`
/// vectors.
struct Plan {
  int group_width = 0;
  int cta_threads = 0;
  int cta_items = 0;
  /// Rows handled by one block.
  int rows_per_block() const { return group_width ? kGroupBlockThreads / group_width : 1; }
  /// Threads per block.
  int block_threads() const { return group_width ? kGroupBlockThreads : cta_threads; }
};

/// The plan for rows of `num_vecs` vectors; rows of more than kCtaMaxThreads * large_items
/// vectors do not fit (a ValueError).
inline Plan plan(std::int64_t num_vecs, int large_items) {
  Plan p;
  if (num_vecs <= 8) {
    p.group_width = 8;
  } else if (num_vecs <= 16) {
    p.group_width = 16;
  } else if (num_vecs <= kGroupItems * 32) {
    p.group_width = 32;
  } else {
    p.cta_items = num_vecs <= kCtaMaxThreads * kCtaItemsSmall ? kCtaItemsSmall : large_items;
    const std::int64_t threads = div_ceil(div_ceil(num_vecs, p.cta_items), 32) * 32;
    RuntimeCheck(threads <= kCtaMaxThreads, "row of ", num_vecs, " vectors does not fit one block");
    p.cta_threads = static_cast<int>(threads);
  }
  return p;
}

}  // namespace mllm_kernel::host::norm
