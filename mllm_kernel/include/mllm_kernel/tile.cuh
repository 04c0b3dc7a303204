// Cooperative tiled memory access: a group of threads (one thread, a warp, or the whole CTA)
// walks a row of vectors so that consecutive threads touch consecutive 16-byte chunks
// (coalesced), each thread keeping up to kItems vectors in registers.
//
//   using Vec = AlignedVector<bf16_t, 8>;
//   const auto mem = tile::Memory<Vec>::warp();      // lane i owns vectors i, i + 32, ...
//   Vec v[4];
//   mem.load<4>(v, row, num_vecs);                   // vectors past num_vecs are left alone
//   ...
//   mem.store<4>(v, out_row, num_vecs);
//
// `Memory<Vec>::cta()` spreads the row over blockDim.x threads, `thread()` gives one thread the
// whole row. Each `load`/`store` call is fully unrolled over kItems.
#pragma once

#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/vec.cuh>

#include <cstdint>

namespace mllm_kernel::device::tile {

/// A view of a thread's place in a cooperating group: thread `id` of `count` owns vectors
/// id, id + count, id + 2 * count, ...
template <typename Vec>
struct Memory {
  using T = typename Vec::value_type;

  int id;
  int count;

  /// One thread does all the work.
  static MLLM_DEVICE Memory thread() { return {0, 1}; }
  /// The lanes of a warp share a row (blockDim.x must be a multiple of 32).
  static MLLM_DEVICE Memory warp() { return {static_cast<int>(threadIdx.x % kWarpThreads), kWarpThreads}; }
  /// Aligned groups of kWidth consecutive lanes (a power of two <= 32) each share a row.
  template <int kWidth>
  static MLLM_DEVICE Memory group() {
    static_assert(kWidth > 0 && kWidth <= kWarpThreads && (kWidth & (kWidth - 1)) == 0,
                  "tile::Memory::group: kWidth must be a power of two <= 32");
    return {static_cast<int>(threadIdx.x % kWidth), kWidth};
  }
  /// The x-dimension threads of the block share a row.
  static MLLM_DEVICE Memory cta() { return {static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)}; }

  /// Vector index of this thread's item `j` (rows hold fewer than 2^31 vectors).
  MLLM_DEVICE int index(int j) const { return id + j * count; }

  /// Loads this thread's items (vector indices below `num_vecs`) of `row` into `items`.
  template <int kItems>
  MLLM_DEVICE void load(Vec (&items)[kItems], const T* row, int num_vecs) const {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      if (index(j) < num_vecs) items[j].load(row, index(j));
    }
  }
  /// Stores this thread's items (vector indices below `num_vecs`) of `items` to `row`.
  template <int kItems>
  MLLM_DEVICE void store(const Vec (&items)[kItems], T* row, int num_vecs) const {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      if (index(j) < num_vecs) items[j].store(row, index(j));
    }
  }
  /// Calls f(j, vector_index) for each of this thread's items below `num_vecs`.
  template <int kItems, typename F>
  MLLM_DEVICE void for_each(int num_vecs, F&& f) const {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      if (index(j) < num_vecs) f(j, index(j));
    }
  }
};

}  // namespace mllm_kernel::device::tile
