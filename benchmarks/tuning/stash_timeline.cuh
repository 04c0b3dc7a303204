// Phase timelines of dynamic per-tensor FP8 quantization of contiguous bf16 (H100 tuning aid for
// stash_timeline.py). Each block's thread 0 stamps %globaltimer (ns) at fixed points into row
// blockIdx.x of an int64 [blocks, kSlots] tensor (a one-element tensor turns stamping off), so the
// passes, the grid barrier and the spread between blocks can be read off:
//   the library's two passes (amax blocks, then quantization blocks, in one tensor);
//   the one-launch stash kernel (cuda/csrc/quant.cuh, stash_tensor_quant_kernel) in the shapes
//   tried on the way to it: 1024 or 2048 threads an SM, the stash copied with cp.async (the
//   sixth session's kernel) or through registers, pass 2 static or shared out from a counter.
// The counter and the per-block maxima live in module globals: one call at a time (a tuning aid,
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

__device__ unsigned g_next_unit;    // pass 2's work counter (kSchedule > 0)
__device__ float g_partials[4096];  // the blocks' maxima

/// The stash kernel's tiles and stash as the library's; kAsyncStash: pass 1 copies the stash with
/// cp.async and reduces it last (else through registers); kSchedule: pass 2 static (0), or its
/// last `dyn_tiles` streamed tiles shared out from a counter in units of kThreads vectors, one
/// block at a time (1), or of 32 vectors, one warp at a time (2).
template <int kThreads, int kBlocksPerSM, bool kAsyncStash, int kSchedule>
__global__ void __launch_bounds__(kThreads, kBlocksPerSM)
    stamped_stash_kernel(const __grid_constant__ QuantParams<bf16_t, fp8_e4m3_t> p, int stash_tiles, int keep_tiles,
                         int dyn_tiles, std::int64_t* tl) {
  using namespace mllm_kernel::device;
  extern __shared__ __align__(16) unsigned char stash_bytes[];
  Vec8* stash = reinterpret_cast<Vec8*>(stash_bytes) + threadIdx.x;
  __shared__ float scratch[cta::kScratchSize];
  __shared__ unsigned next_unit[2];
  stamp(tl, kStart);
  const std::int64_t total = p.rows * (p.hidden / 8);
  const std::int64_t tile = static_cast<std::int64_t>(gridDim.x) * kThreads;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const Vec8* in = reinterpret_cast<const Vec8*>(p.in) + first;
  const int tiles = static_cast<int>((total - 1) / tile + 1);
  const int mine = first < total ? static_cast<int>((total - first - 1) / tile + 1) : 0;
  const int stashed = min(stash_tiles, mine);
  const std::uint64_t keep = l2_evict_last(), drop = l2_evict_first();
  const auto load = [&](Vec8& v, int k, std::uint64_t policy) {
    load_with_policy(v, reinterpret_cast<const bf16_t*>(in + k * tile), policy);
  };

  float amax = 0.0f;
  for (int k = 0; k < stashed; ++k) {
    if constexpr (kAsyncStash) {
      async_copy_16(stash + k * kThreads, in + k * tile, drop);
    } else {
      Vec8 v;
      load(v, k, drop);
      amax = fmaxf(amax, vec_amax(v));
      stash[k * kThreads] = v;
    }
  }
  for (int k = stashed; k < mine; ++k) {
    Vec8 v;
    load(v, k, k >= tiles - keep_tiles ? keep : drop);
    amax = fmaxf(amax, vec_amax(v));
  }
  if constexpr (kAsyncStash) {
    async_copy_wait();
    for (int k = 0; k < stashed; ++k) amax = fmaxf(amax, vec_amax(stash[k * kThreads]));
  }
  amax = cta::reduce_max(amax, scratch);
  stamp(tl, kPass1);
  if (threadIdx.x == 0) {
    g_partials[blockIdx.x] = amax;
    if (blockIdx.x == 0) g_next_unit = 0;
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
  const int lo_tile = min(stash_tiles, tiles);
  const int dyn_end = kSchedule == 0 ? lo_tile : min(lo_tile + dyn_tiles, tiles);
  for (int k = mine - 1; k >= max(stashed, dyn_end); --k) {
    Vec8 v;
    load(v, k, drop);
    put_at(v, first + k * tile);
  }
  stamp(tl, kStatic);
  const std::int64_t lo = lo_tile * tile, hi = std::min<std::int64_t>(dyn_end * tile, total);
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
  }
  for (int k = 0; k < stashed; ++k) put_at(stash[k * kThreads], first + k * tile);
  stamp(tl, kEnd);
}

/// kBlocksPerSM blocks of kThreads on every SM, each stashing min(its share of shared memory,
/// max_stash_tiles) tiles; the last 32 MB of the streamed part marked evict_last.
template <int kThreads, int kBlocksPerSM, bool kAsyncStash, int kSchedule>
void run_stamped_stash(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input,
                       tvm::ffi::TensorView timeline, std::int64_t max_stash_tiles, std::int64_t dyn_tiles) {
  using namespace mllm_kernel::host;
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  const auto kernel = stamped_stash_kernel<kThreads, kBlocksPerSM, kAsyncStash, kSchedule>;
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
      .enable_cooperative()(kernel, p, static_cast<int>(stash_tiles), static_cast<int>(kL2KeepBytes / (blocks * kSliceBytes)),
                            static_cast<int>(dyn_tiles), timeline_of(timeline));
}

}  // namespace
