// Split-K for the Marlin GEMM kernels (marlin_gemm.cuh, marlin_gemv.cuh, marlin_wgmma.cuh):
// when the output blocks do not fill the GPU, K is split across blocks; each writes float32
// partial sums, and the last block of an output block to arrive (counted in `locks`, which it
// resets to zero) adds them in split order, so results do not depend on timing.
#pragma once

#include <mllm_kernel/atomic.cuh>
#include <mllm_kernel/marlin.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>

#include "marlin_values.cuh"

#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace {

struct MarlinSplit {
  float* partials;  // when splits > 1: [splits, M, N], or as the kernel lays them out (WgTiles)
  std::int32_t* locks;  // one per split output block
  int rows_per_split;  // 16-row steps of K per split
  int splits;
  bool pdl;  // launched with programmatic dependent launch
};

/// Checks a split-K call's buffers (partials: float32 [partial_count], splits x M x N for the
/// kernels that lay them out so; locks: int32, at least `blocks` counters) on a's device and
/// points `split` at them.
inline void bind_split_buffers(MarlinSplit& split, mllm_kernel::TensorView a, mllm_kernel::TensorView partials,
                               mllm_kernel::TensorView locks, std::int64_t partial_count, std::int64_t blocks) {
  using namespace mllm_kernel::host;
  SymbolicDevice device;
  device.bind(a.device(), "a");
  (void)TensorMatcher({partial_count}).with_dtype<float>().with_device<kDLCUDA>(device).verify(partials, "partials");
  SymbolicSize lock_count{"locks size"};
  (void)TensorMatcher({lock_count}).with_dtype<std::int32_t>().with_device<kDLCUDA>(device).verify(locks, "locks");
  RuntimeCheck(lock_count.unwrap() >= blocks, "locks needs ", blocks, " entries, got ", lock_count.unwrap());
  split.partials = static_cast<float*>(partials.data_ptr());
  split.locks = static_cast<std::int32_t*>(locks.data_ptr());
}

/// The K-halves of a block's tiles: warp (wn, wk = 1) adds its kValues sums a lane to those of
/// warp (wn, 0), through `reduce` (kValues * 32 floats a wn). Every thread calls it (a barrier).
template <int kValues>
__device__ __forceinline__ void add_k_halves(float* values, float* reduce, int wn, int wk, int lane) {
  if (wk == 1) {
#pragma unroll
    for (int i = 0; i < kValues; ++i) reduce[(wn * kValues + i) * 32 + lane] = values[i];
  }
  __syncthreads();
  if (wk == 0) {
#pragma unroll
    for (int i = 0; i < kValues; ++i) values[i] += reduce[(wn * kValues + i) * 32 + lane];
  }
}

/// Split-K where each split's own sums are still on chip when it finishes (marlin_wgmma.cuh):
/// every split takes a ticket at `lock` (take_split_ticket, then last_split); all but the last
/// then store their partial sums and count them stored (publish_split), while the last waits for
/// that (await_splits) and adds the others' partial sums to its own, which it never stores.
/// Arrivals add 1 and stores `splits` to the counter, so a ticket's remainder by `splits` counts
/// the splits that arrived before, and the last sees splits * splits once every other has
/// stored; it resets the counter for the next call. The last waits only on splits that arrived,
/// which run. `sync` is the barrier of the threads that store the sums, `leader` one of them.
///
/// The ticket (the leader's, relaxed: it publishes nothing) is taken before the sums are made
/// ready to store, so that its round trip overlaps that work.
__device__ __forceinline__ int take_split_ticket(std::int32_t* lock, bool leader) {
  return leader ? atomicAdd(lock, 1) : 0;
}
template <typename Sync>
__device__ __forceinline__ bool last_split(int ticket, int splits, bool leader, Sync sync) {
  __shared__ int last;
  if (leader) last = ticket % splits == splits - 1;
  sync();
  return last;
}
template <typename Sync>
__device__ __forceinline__ void publish_split(std::int32_t* lock, int splits, bool leader, Sync sync) {
  sync();
  if (leader) mllm_kernel::device::atomic::add_acq_rel(lock, splits);
}
template <typename Sync>
__device__ __forceinline__ void await_splits(std::int32_t* lock, int splits, bool leader, Sync sync) {
  if (leader) {
    while (mllm_kernel::device::atomic::load_acquire(lock) != splits * splits) __nanosleep(64);
    *lock = 0;  // ready for the next call
  }
  sync();
}

/// Called by every thread of a block of a grid of output blocks (a lock each, in the grid's
/// x-then-y order) once its partial sums are stored: whether this block is the last of its
/// output block to arrive (and must add the splits). The barrier orders every thread's stores
/// before thread 0's counter add, whose release publishes them and whose acquire, in the last
/// block, takes in the other blocks' (no fence in every thread: one ordered atomic is the whole
/// hand-over).
__device__ __forceinline__ bool split_arrive_last(const MarlinSplit& split) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::int32_t* lock = split.locks + blockIdx.y * gridDim.x + blockIdx.x;
    const int arrived = mllm_kernel::device::atomic::add_acq_rel(lock, 1);
    last = arrived == split.splits - 1;
    if (last) *lock = 0;  // ready for the next call
  }
  __syncthreads();
  return last;
}

/// Adds the splits' sums of items [begin, end) of an output tile of rows from m0 and columns
/// [col0, col0 + cols) (cols a multiple of 4; item i: row m0 + i / (cols / 4), four columns from
/// col0 + i % (cols / 4) * 4) in split order, applies channel-wise scales and writes c;
/// `load(z, i)` gives split z's float4 of item i. `thread` counts kThreads from 0. A thread takes
/// kFixQuads items and loads kFixSplits splits of each before adding them: the sums come from L2
/// or other SMs, and one load in flight at a time would make the fix-up a chain of splits x
/// items round trips.
template <typename T, int kThreads, int kFixQuads, int kFixSplits, typename Load>
__device__ __forceinline__ void add_splits(const mllm_kernel::host::MarlinGemmParams& p, int splits, int begin,
                                           int end, int thread, std::int64_t m0, std::int64_t col0, int cols,
                                           Load load) {
  using namespace mllm_kernel::device;
  namespace marlin = mllm_kernel::marlin;
  const int quads = cols / 4;
  const T* scales = static_cast<const T*>(p.scales);
  const bool channelwise = p.groups == 1;
  T* c = static_cast<T*>(p.c);
  for (int i0 = begin + thread; i0 < end; i0 += kThreads * kFixQuads) {
    float4 sum[kFixQuads];
#pragma unroll
    for (int q = 0; q < kFixQuads; ++q) sum[q] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int z0 = 0; z0 < splits; z0 += kFixSplits) {
      float4 v[kFixQuads][kFixSplits];
#pragma unroll
      for (int q = 0; q < kFixQuads; ++q) {
        const int i = i0 + q * kThreads;
#pragma unroll
        for (int j = 0; j < kFixSplits; ++j) {
          v[q][j] = i < end && z0 + j < splits ? load(z0 + j, i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      }
#pragma unroll
      for (int q = 0; q < kFixQuads; ++q) {
#pragma unroll
        for (int j = 0; j < kFixSplits; ++j) {
          if (z0 + j >= splits) break;  // (no padding added: the sums stay bit for bit)
          sum[q].x += v[q][j].x, sum[q].y += v[q][j].y, sum[q].z += v[q][j].z, sum[q].w += v[q][j].w;
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kFixQuads; ++q) {
      const int i = i0 + q * kThreads;
      if (i >= end) break;
      const std::int64_t row = m0 + i / quads, col = col0 + i % quads * 4;
      if (channelwise) {
        sum[q].x *= cast<float>(scales[marlin::channel_scale_pos(col)]);
        sum[q].y *= cast<float>(scales[marlin::channel_scale_pos(col + 1)]);
        sum[q].z *= cast<float>(scales[marlin::channel_scale_pos(col + 2)]);
        sum[q].w *= cast<float>(scales[marlin::channel_scale_pos(col + 3)]);
      }
      Pair<T>* out = reinterpret_cast<Pair<T>*>(c + row * p.n + col);
      out[0] = pair_of<T>(from_float<T>(sum[q].x), from_float<T>(sum[q].y));
      out[1] = pair_of<T>(from_float<T>(sum[q].z), from_float<T>(sum[q].w));
    }
  }
}

/// The last block adds the splits of rows [m0, m0 + rows) x columns [col0, col0 + cols)
/// (add_splits), split z's sum for row m0 + r, column col0 + j being at part[z * split_stride +
/// r * row_stride + j] (16-byte aligned at j a multiple of 4). With kOwn, split own_split's sums
/// come from shared memory instead (`own`, rows own_pitch bytes apart, 16-byte aligned): the
/// last split's, never stored (take_split_ticket).
template <typename T, int kThreads, int kFixQuads = 2, int kFixSplits = 4, bool kOwn = false>
__device__ __forceinline__ void add_split_partials(const mllm_kernel::host::MarlinGemmParams& p, const float* part,
                                                   int splits, std::int64_t split_stride, std::int64_t row_stride,
                                                   int thread, std::int64_t m0, int rows, std::int64_t col0, int cols,
                                                   const unsigned char* own = nullptr, int own_split = -1,
                                                   int own_pitch = 0) {
  const int quads = cols / 4;
  add_splits<T, kThreads, kFixQuads, kFixSplits>(p, splits, 0, rows * quads, thread, m0, col0, cols, [&](int z, int i) {
    if (kOwn && z == own_split) return *reinterpret_cast<const float4*>(own + i / quads * own_pitch + i % quads * 16);
    return __ldcg(reinterpret_cast<const float4*>(part + z * split_stride + i / quads * row_stride + i % quads * 4));
  });
}

/// add_split_partials for a block of the kernels that keep partial sums as [splits, M, N].
template <typename T, int kThreads, int kFixQuads = 2, int kFixSplits = 4>
__device__ __forceinline__ void split_fixup(const mllm_kernel::host::MarlinGemmParams& p, const MarlinSplit& split,
                                            std::int64_t m0, int rows, std::int64_t col0, int cols) {
  add_split_partials<T, kThreads, kFixQuads, kFixSplits>(p, split.partials + m0 * p.n + col0, split.splits,
                                                         p.m * p.n, p.n, threadIdx.x, m0, rows, col0, cols);
}

/// Stores the sums of the swapped MMA (dequantized weights as A, activations as B) of one lane
/// for the 64-column tile at col0: per 8-row block rb of a and 16-column sub-tile j, the m16n8k16
/// C fragment, value e at row 8 rb + 2 (lane % 4) + e % 2 and column col0 + 16 j + 8 (e / 2) +
/// lane / 4. With K split, into split blockIdx.z's partial sums; else into c, channel-wise scales
/// applied.
template <typename T, int kRowBlocks>
__device__ __forceinline__ void store_swapped(const mllm_kernel::host::MarlinGemmParams& p, const MarlinSplit& split,
                                              const float (&sums)[kRowBlocks][4][4], std::int64_t col0, int lane) {
  using namespace mllm_kernel::device;
  namespace marlin = mllm_kernel::marlin;
  const int g = lane / 4, t = lane % 4;
  const T* scales = static_cast<const T*>(p.scales);
  T* c = static_cast<T*>(p.c);
#pragma unroll
  for (int rb = 0; rb < kRowBlocks; ++rb)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t row = 8 * rb + 2 * t + e % 2, col = col0 + 16 * j + 8 * (e / 2) + g;
        if (row >= p.m) continue;
        float v = sums[rb][j][e];
        if (split.splits > 1) {
          split.partials[(blockIdx.z * p.m + row) * p.n + col] = v;
        } else {
          if (p.groups == 1) v *= cast<float>(scales[marlin::channel_scale_pos(col)]);
          c[row * p.n + col] = from_float<T>(v);
        }
      }
}

}  // namespace
