// Phase timelines of dynamic per-tensor FP8 quantization of contiguous bf16 (H100 tuning aid for
// stash_timeline.py). Each block's thread 0 stamps %globaltimer (ns) at fixed points into row
// blockIdx.x of an int64 [blocks, kSlots] tensor (a one-element tensor turns stamping off), so the
// passes, the grid barrier and the spread between blocks can be read off:
//   the library's two passes (amax blocks, then quantization blocks, in one tensor);
//   the one-launch stash kernel (cuda/csrc/quant.cuh, stash_tensor_quant_kernel) in the shapes
//   tried on the way to it: 1024 or 2048 threads an SM, the stash copied with cp.async (the
//   sixth session's kernel) or through registers, pass 2 static, reordered or shared out from
//   counters;
//   and, tried after it (tenth session), 512-thread blocks that keep some tiles in registers too
//   and load several tiles at a time.
// The counters and the per-block maxima live in module globals: one call at a time (a tuning aid,
// not the library).
#pragma once

#include "tensor_variants.cuh"

namespace {

constexpr int kSlots = 8;
// Slots of the stash kernels: start, pass 1 done, scale known (after the grid barrier), static
// part of pass 2 done, end.
enum Stamp { kStart = 0, kPass1 = 1, kScale = 2, kStatic = 3, kEnd = 4 };

__device__ __forceinline__ void stamp(std::int64_t* tl, int slot) {
  if (tl != nullptr && threadIdx.x == 0) {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    tl[static_cast<std::int64_t>(blockIdx.x) * kSlots + slot] = static_cast<std::int64_t>(t);
  }
}

std::int64_t* timeline_of(tvm::ffi::TensorView timeline) {
  return timeline.numel() > 1 ? static_cast<std::int64_t*>(timeline.data_ptr()) : nullptr;
}

using Vec8 = mllm_kernel::device::AlignedVector<bf16_t, 8>;

// The library's two passes, stamped (start and end of each block; quantization blocks also
// when their wait for the amax pass returned, slot 2).
__global__ void __launch_bounds__(kBlock) stamped_amax_kernel(const __grid_constant__ QuantParams<bf16_t, fp8_e4m3_t> p,
                                                              std::int64_t* tl) {
  using namespace mllm_kernel::device;
  __shared__ float scratch[cta::kScratchSize];
  stamp(tl, kStart);
  pdl_launch_dependents();
  const std::int64_t total = p.rows * (p.hidden / 8);
  const std::int64_t keep_from = total - kL2KeepBytes / Vec8::kBytes;
  const std::uint64_t keep = l2_evict_last(), drop = l2_evict_first();
  float amax = 0.0f;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * kBlock) {
    Vec8 v;
    load_with_policy(v, p.in + i * 8, i >= keep_from ? keep : drop);
    amax = fmaxf(amax, vec_amax(v));
  }
  amax = cta::reduce_max(amax, scratch);
  if (threadIdx.x == 0) atomic::max(p.scales, amax / QuantFormat<fp8_e4m3_t>::kMax);
  stamp(tl, kPass1);
}

__global__ void __launch_bounds__(kBlock) stamped_quant_kernel(const __grid_constant__ QuantParams<bf16_t, fp8_e4m3_t> p,
                                                               std::int64_t* tl) {
  using namespace mllm_kernel::device;
  stamp(tl, kStart);
  const std::int64_t total = p.rows * (p.hidden / 8);
  const std::int64_t i = (static_cast<std::int64_t>(gridDim.x) - 1 - blockIdx.x) * kBlock + threadIdx.x;
  const std::uint64_t drop = l2_evict_first();
  Vec8 v;
  if (i < total) load_with_policy(v, p.in + i * 8, drop);
  pdl_wait_primary();
  stamp(tl, kScale);
  const ScaleDivisor divide(*p.scales);
  if (i < total) store_with_policy(quantize<fp8_e4m3_t>(v, divide), p.out + i * 8, drop);
  stamp(tl, kPass1);
}

void run_stamped_two_pass(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input,
                          tvm::ffi::TensorView timeline) {
  using namespace mllm_kernel::host;
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  std::int64_t* tl = timeline_of(timeline);
  const std::int64_t total = p.rows * (p.hidden / 8);
  const std::int64_t amax_blocks = filling_grid(stamped_amax_kernel, div_ceil(total, kBlock), device.device_id);
  RuntimeDeviceCheck(cudaMemsetAsync(p.scales, 0, sizeof(float), LaunchKernel::resolve_device(device)));
  LaunchKernel(static_cast<unsigned>(amax_blocks), kBlock, device).enable_pdl(true)(stamped_amax_kernel, p, tl);
  LaunchKernel(static_cast<unsigned>(div_ceil(total, kBlock)), kBlock, device)
      .enable_pdl(true)(stamped_quant_kernel, p, tl == nullptr ? tl : tl + amax_blocks * kSlots);
}

/// This thread's place in a stash kernel's tiles: the tensor is walked in tiles of
/// gridDim.x * kThreads vectors, thread t of block b taking vector b * kThreads + t of each.
template <int kThreads>
struct ThreadTiles {
  std::int64_t total;  // vectors in the tensor
  std::int64_t tile;   // vectors a tile
  std::int64_t first;  // this thread's vector of tile 0
  int tiles;           // tiles in the tensor (the last may be partial)
  int mine;            // tiles holding one of this thread's vectors
  const Vec8* in;      // this thread's vector of tile 0
  __device__ explicit ThreadTiles(const QuantParams<bf16_t, fp8_e4m3_t>& p)
      : total(p.rows * (p.hidden / 8)),
        tile(static_cast<std::int64_t>(gridDim.x) * kThreads),
        first(static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x),
        tiles(static_cast<int>((total - 1) / tile + 1)),
        mine(first < total ? static_cast<int>((total - first - 1) / tile + 1) : 0),
        in(reinterpret_cast<const Vec8*>(p.in) + first) {}
  /// This thread's vector of tile k, loaded under an L2 policy.
  __device__ void load(Vec8& v, int k, std::uint64_t policy) const {
    load_with_policy(v, reinterpret_cast<const bf16_t*>(in + k * tile), policy);
  }
};

__device__ unsigned g_next_unit;    // pass 2's work counter (kSchedule > 0)
__device__ float g_partials[4096];  // the blocks' maxima
constexpr int kCounters = 64;       // kSchedule 3 and 4: pass 2's work counters, one a chunk,
constexpr int kCounterStride = 64;  // each in its own 256-byte span (atomics on one line serialize)
// Chunks a warp claims from: its own, then the next ones as each runs dry (every chunk's own warps,
// one a block pair, drain it in any case; visiting all would cost every warp kCounters atomics).
constexpr int kVisits = 3;
__device__ unsigned g_chunk_next[kCounters * kCounterStride];

/// The stash kernel's tiles and stash as the library's; kAsyncStash: pass 1 copies the stash with
/// cp.async and reduces it last (else through registers); kSchedule: pass 2 static (0), or its
/// last `dyn_tiles` streamed tiles shared out from a counter in units of kThreads vectors, one
/// block at a time (1), or of 32 vectors, one warp at a time (2), or of 64 vectors, one warp at
/// a time from kCounters counters each owning a contiguous chunk (a warp starts on its own
/// counter and moves on to the next when it runs dry, kVisits chunks in all), the stash written
/// after (3) or before (4); or static with the `dyn_tiles` tiles before the L2-kept ones first (5);
/// or static with the first tile (6) or two (7) that pass 2 reads from DRAM loaded into registers
/// before the grid barrier, so that DRAM is not idle while the blocks wait.
template <int kThreads, int kBlocksPerSM, bool kAsyncStash, int kSchedule>
__global__ void __launch_bounds__(kThreads, kBlocksPerSM)
    stamped_stash_kernel(const __grid_constant__ QuantParams<bf16_t, fp8_e4m3_t> p, int stash_tiles, int keep_tiles,
                         int dyn_tiles, std::int64_t* tl) {
  using namespace mllm_kernel::device;
  extern __shared__ __align__(16) unsigned char stash_bytes[];
  Vec8* stash = reinterpret_cast<Vec8*>(stash_bytes) + threadIdx.x;
  __shared__ float scratch[cta::kScratchSize];
  __shared__ unsigned next_unit[2];
  pdl_wait_and_release();  // a no-op unless launched with PDL
  stamp(tl, kStart);
  const ThreadTiles<kThreads> t(p);
  const int stashed = min(stash_tiles, t.mine);
  const std::uint64_t keep = l2_evict_last(), drop = l2_evict_first();

  float amax = 0.0f;
  for (int k = 0; k < stashed; ++k) {
    if constexpr (kAsyncStash) {
      async_copy_16(stash + k * kThreads, t.in + k * t.tile, drop);
    } else {
      Vec8 v;
      t.load(v, k, drop);
      amax = fmaxf(amax, vec_amax(v));
      stash[k * kThreads] = v;
    }
  }
  for (int k = stashed; k < t.mine; ++k) {
    Vec8 v;
    t.load(v, k, k >= t.tiles - keep_tiles ? keep : drop);
    amax = fmaxf(amax, vec_amax(v));
  }
  if constexpr (kAsyncStash) {
    async_copy_wait();
    for (int k = 0; k < stashed; ++k) amax = fmaxf(amax, vec_amax(stash[k * kThreads]));
  }
  // kSchedule 6 and 7: pass 2's first kEarly tiles from DRAM, the ones just before the L2-kept
  // tiles, loaded now so that they are in flight through the barrier.
  constexpr int kEarly = kSchedule == 6 ? 1 : kSchedule == 7 ? 2 : 1;
  const int keep_from = min(t.tiles - keep_tiles, t.mine);
  const int early = kSchedule >= 6 ? max(0, min(kEarly, keep_from - stashed)) : 0;
  Vec8 early_v[kEarly];
#pragma unroll
  for (int u = 0; u < kEarly; ++u) {
    if (u < early) t.load(early_v[u], keep_from - 1 - u, drop);
  }
  amax = cta::reduce_max(amax, scratch);
  stamp(tl, kPass1);
  if (threadIdx.x == 0) {
    g_partials[blockIdx.x] = amax;
    if (blockIdx.x == 0) g_next_unit = 0;
  }
  if ((kSchedule == 3 || kSchedule == 4) && blockIdx.x == 0 && threadIdx.x < kCounters) {
    g_chunk_next[threadIdx.x * kCounterStride] = 0;
  }
  cooperative_groups::this_grid().sync();
  if (kSchedule == 1 && threadIdx.x == 0) next_unit[0] = atomicAdd(&g_next_unit, 1u);
  float m = 0.0f;
  for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += kThreads) m = fmaxf(m, __ldcg(&g_partials[b]));
  const float scale = cta::reduce_max(m, scratch) / QuantFormat<fp8_e4m3_t>::kMax;  // syncs: next_unit[0] seen
  if (blockIdx.x == 0 && threadIdx.x == 0) *p.scales = scale;
  stamp(tl, kScale);

  const ScaleDivisor divide(scale);
  const auto put_at = [&](const Vec8& v, std::int64_t i) {
    store_with_policy(quantize<fp8_e4m3_t>(v, divide), p.out + i * 8, drop);
  };
  // Tiles [lo_tile, dyn_end) are shared out (kSchedule > 0); every thread walks its own others.
  const int lo_tile = min(stash_tiles, t.tiles);
  const int dyn_end = kSchedule == 0 || kSchedule >= 5 ? lo_tile : min(lo_tile + dyn_tiles, t.tiles);
  const auto put_stash = [&]() {
    for (int k = 0; k < stashed; ++k) put_at(stash[k * kThreads], t.first + k * t.tile);
  };
  const auto stream = [&](int from, int to) {  // tiles from - 1 down to `to`
    for (int k = from - 1; k >= to; --k) {
      Vec8 v;
      t.load(v, k, drop);
      put_at(v, t.first + k * t.tile);
    }
  };
  if constexpr (kSchedule == 5) {
    // The `dyn_tiles` evict_first tiles pass 1 read just before the kept ones (what L2 may still
    // hold of them) first, then the kept ones, then the others.
    const int before = max(stashed, keep_from - dyn_tiles);
    stream(keep_from, before);
    stream(t.mine, keep_from);
    stream(before, stashed);
  } else if constexpr (kSchedule >= 6) {
#pragma unroll
    for (int u = 0; u < kEarly; ++u) {
      if (u < early) put_at(early_v[u], t.first + (keep_from - 1 - u) * t.tile);
    }
    stream(t.mine, keep_from);
    stream(keep_from - early, stashed);
  } else {
    stream(t.mine, max(stashed, dyn_end));
  }
  stamp(tl, kStatic);
  const std::int64_t lo = lo_tile * t.tile, hi = std::min<std::int64_t>(dyn_end * t.tile, t.total);
  const auto unit = [&](std::int64_t n, int width, int lane) {  // vectors hi - (n + 1) * width + lane
    const std::int64_t i = hi - (n + 1) * width + lane;
    if (i >= lo) {
      Vec8 v;
      load_with_policy(v, p.in + i * 8, drop);
      put_at(v, i);
    }
  };
  if constexpr (kSchedule == 1) {
    const std::int64_t units = (hi - lo + kThreads - 1) / kThreads;
    for (int parity = 0;; parity ^= 1) {
      const std::int64_t n = next_unit[parity];
      if (n >= units) break;
      if (threadIdx.x == 0) next_unit[parity ^ 1] = atomicAdd(&g_next_unit, 1u);
      unit(n, kThreads, threadIdx.x);
      __syncthreads();  // next_unit[parity ^ 1] written, next_unit[parity] read by all
    }
  } else if constexpr (kSchedule == 2) {
    const unsigned units = static_cast<unsigned>((hi - lo + 31) / 32);
    const int lane = threadIdx.x & 31;
    unsigned n = lane == 0 ? atomicAdd(&g_next_unit, 1u) : 0u;
    for (n = __shfl_sync(0xffffffffu, n, 0); n < units;) {
      const unsigned next = lane == 0 ? atomicAdd(&g_next_unit, 1u) : 0u;
      unit(n, 32, lane);
      n = __shfl_sync(0xffffffffu, next, 0);
    }
  } else if constexpr (kSchedule == 3 || kSchedule == 4) {
    if constexpr (kSchedule == 4) put_stash();
    constexpr int kWidth = 64;  // vectors a unit: two a lane
    const unsigned units = static_cast<unsigned>((hi - lo + kWidth - 1) / kWidth);
    const int lane = threadIdx.x & 31;
    int c = static_cast<int>((blockIdx.x * kThreads + threadIdx.x) >> 5) % kCounters, visited = 0;
    // Chunk c: units [chunk_start(c), chunk_start(c + 1)), counted from hi down.
    const auto chunk_start = [&](int c) {
      return static_cast<unsigned>(static_cast<std::uint64_t>(units) * c / kCounters);
    };
    unsigned base = chunk_start(c), end = chunk_start(c + 1);
    const auto claim = [&]() { return lane == 0 ? base + atomicAdd(&g_chunk_next[c * kCounterStride], 1u) : 0u; };
    unsigned n = __shfl_sync(0xffffffffu, claim(), 0);
    for (;;) {
      while (n >= end && ++visited < kVisits) {
        c = c + 1 == kCounters ? 0 : c + 1;
        base = chunk_start(c);
        end = chunk_start(c + 1);
        n = __shfl_sync(0xffffffffu, claim(), 0);
      }
      if (visited == kVisits) break;
      const unsigned next = claim();
      const std::int64_t i = hi - static_cast<std::int64_t>(n + 1) * kWidth + lane;
      if (i >= lo) {  // both vectors (every unit but the last)
        Vec8 a, b;
        load_with_policy(a, p.in + i * 8, drop);
        load_with_policy(b, p.in + (i + 32) * 8, drop);
        put_at(a, i);
        put_at(b, i + 32);
      } else if (i + 32 >= lo) {
        Vec8 b;
        load_with_policy(b, p.in + (i + 32) * 8, drop);
        put_at(b, i + 32);
      }
      n = __shfl_sync(0xffffffffu, next, 0);
    }
  }
  if constexpr (kSchedule != 4) put_stash();
  stamp(tl, kEnd);
}

/// Launches a stamped stash kernel as kBlocksPerSM blocks of kThreads on every SM, each stashing
/// min(its share of shared memory, max_stash_tiles) tiles; the last 32 MB of the streamed part
/// marked evict_last; `extra` is the kernel's third int argument; `pdl`: launched with PDL.
template <int kThreads, int kBlocksPerSM, typename Kernel>
void launch_stamped(Kernel kernel, tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input,
                    tvm::ffi::TensorView timeline, std::int64_t max_stash_tiles, std::int64_t extra, bool pdl = false) {
  using namespace mllm_kernel::host;
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  const int id = device.device_id;
  constexpr std::int64_t kSliceBytes = static_cast<std::int64_t>(kThreads) * Vec8::kBytes;
  const std::int64_t share = std::min<std::int64_t>(
      runtime::get_smem_per_sm(id) / kBlocksPerSM - runtime::get_reserved_smem_per_block(id) - 256,
      runtime::get_available_dynamic_smem_per_block(id));
  const std::int64_t stash_tiles = std::min(share / kSliceBytes, max_stash_tiles);
  const std::size_t smem = static_cast<std::size_t>(stash_tiles * kSliceBytes);
  RuntimeDeviceCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  RuntimeCheck(runtime::get_blocks_per_sm(kernel, kThreads, smem) >= kBlocksPerSM, "the device cannot hold the grid");
  const std::int64_t blocks = static_cast<std::int64_t>(runtime::get_sm_count(id)) * kBlocksPerSM;
  LaunchKernel(static_cast<unsigned>(blocks), kThreads, device, smem)
      .enable_pdl(pdl)
      .enable_cooperative()(kernel, p, static_cast<int>(stash_tiles), static_cast<int>(kL2KeepBytes / (blocks * kSliceBytes)),
                            static_cast<int>(extra), timeline_of(timeline));
}

template <int kThreads, int kBlocksPerSM, bool kAsyncStash, int kSchedule>
void run_stamped_stash(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input,
                       tvm::ffi::TensorView timeline, std::int64_t max_stash_tiles, std::int64_t dyn_tiles) {
  launch_stamped<kThreads, kBlocksPerSM>(stamped_stash_kernel<kThreads, kBlocksPerSM, kAsyncStash, kSchedule>, out,
                                         scale, input, timeline, max_stash_tiles, dyn_tiles);
}

/// run_stamped_stash launched with PDL (each block waits for the previous kernel, then releases
/// the next, as the library's kernel does).
template <int kThreads, int kBlocksPerSM, bool kAsyncStash, int kSchedule>
void run_stamped_stash_pdl(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input,
                           tvm::ffi::TensorView timeline, std::int64_t max_stash_tiles, std::int64_t dyn_tiles) {
  launch_stamped<kThreads, kBlocksPerSM>(stamped_stash_kernel<kThreads, kBlocksPerSM, kAsyncStash, kSchedule>, out,
                                         scale, input, timeline, max_stash_tiles, dyn_tiles, true);
}

/// The stash kernel with kRegTiles more tiles kept in registers and the streamed tiles of both
/// passes loaded kBatch at a time, so that fewer threads (kThreads * kBlocksPerSM = 1024 an SM,
/// 64 registers) keep as many loads in flight. A thread's tiles: the shared-memory stash first,
/// then the streamed ones, then the register tiles (loaded last, so that they are not live while
/// pass 1 streams). Pass 2 writes the register tiles first (their registers then serve the
/// streamed batches), the streamed tiles backwards (the L2-kept ones first), then the stash.
template <int kThreads, int kBlocksPerSM, int kRegTiles, int kBatch>
__global__ void __launch_bounds__(kThreads, kBlocksPerSM)
    stamped_reg_stash_kernel(const __grid_constant__ QuantParams<bf16_t, fp8_e4m3_t> p, int stash_tiles, int keep_tiles,
                             int, std::int64_t* tl) {
  using namespace mllm_kernel::device;
  extern __shared__ __align__(16) unsigned char stash_bytes[];
  Vec8* stash = reinterpret_cast<Vec8*>(stash_bytes) + threadIdx.x;
  __shared__ float scratch[cta::kScratchSize];
  stamp(tl, kStart);
  const ThreadTiles<kThreads> t(p);
  const int stashed = min(stash_tiles, t.mine);
  const int regs = min(kRegTiles, t.mine - stashed);
  const int held_from = t.mine - regs;  // tiles [stashed, held_from) streamed
  const std::uint64_t keep = l2_evict_last(), drop = l2_evict_first();

  float amax = 0.0f;
  int k = 0;
  for (; k + kBatch <= stashed; k += kBatch) {
    Vec8 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) t.load(v[u], k + u, drop);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      amax = fmaxf(amax, vec_amax(v[u]));
      stash[(k + u) * kThreads] = v[u];
    }
  }
  for (; k < stashed; ++k) {
    Vec8 v;
    t.load(v, k, drop);
    amax = fmaxf(amax, vec_amax(v));
    stash[k * kThreads] = v;
  }
  const int keep_from = held_from - keep_tiles;
  for (; k + kBatch <= held_from; k += kBatch) {
    Vec8 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) t.load(v[u], k + u, k + u >= keep_from ? keep : drop);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) amax = fmaxf(amax, vec_amax(v[u]));
  }
  for (; k < held_from; ++k) {
    Vec8 v;
    t.load(v, k, k >= keep_from ? keep : drop);
    amax = fmaxf(amax, vec_amax(v));
  }
  Vec8 held[kRegTiles > 0 ? kRegTiles : 1];
#pragma unroll
  for (int r = 0; r < kRegTiles; ++r) {
    if (r < regs) t.load(held[r], held_from + r, drop);
  }
#pragma unroll
  for (int r = 0; r < kRegTiles; ++r) {
    if (r < regs) amax = fmaxf(amax, vec_amax(held[r]));
  }
  amax = cta::reduce_max(amax, scratch);
  stamp(tl, kPass1);
  if (threadIdx.x == 0) g_partials[blockIdx.x] = amax;
  cooperative_groups::this_grid().sync();
  float m = 0.0f;
  for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += kThreads) m = fmaxf(m, __ldcg(&g_partials[b]));
  const float scale = cta::reduce_max(m, scratch) / QuantFormat<fp8_e4m3_t>::kMax;
  if (blockIdx.x == 0 && threadIdx.x == 0) *p.scales = scale;
  stamp(tl, kScale);

  const ScaleDivisor divide(scale);
  fp8_e4m3_t* out = p.out + t.first * 8;
  const auto put = [&](const Vec8& v, int k) {
    store_with_policy(quantize<fp8_e4m3_t>(v, divide), out + k * t.tile * 8, drop);
  };
#pragma unroll
  for (int r = 0; r < kRegTiles; ++r) {
    if (r < regs) put(held[r], held_from + r);
  }
  k = held_from - 1;
  for (; k - kBatch + 1 >= stashed; k -= kBatch) {
    Vec8 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) t.load(v[u], k - u, drop);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) put(v[u], k - u);
  }
  for (; k >= stashed; --k) {
    Vec8 v;
    t.load(v, k, drop);
    put(v, k);
  }
  stamp(tl, kStatic);
  for (int s = 0; s < stashed; ++s) put(stash[s * kThreads], s);
  stamp(tl, kEnd);
}

template <int kThreads, int kBlocksPerSM, int kRegTiles, int kBatch>
void run_reg_stash(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input,
                   tvm::ffi::TensorView timeline, std::int64_t max_stash_tiles, std::int64_t) {
  launch_stamped<kThreads, kBlocksPerSM>(stamped_reg_stash_kernel<kThreads, kBlocksPerSM, kRegTiles, kBatch>, out, scale,
                                         input, timeline, max_stash_tiles, 0);
}

}  // namespace
