// Launch shapes of the library's per-tensor FP8 kernels (cuda/csrc/quant.cuh) for contiguous
// bf16 input (benchmarks/tuning/tune_quant.py): static quantization with kItems vectors a
// thread, and the dynamic two-pass path with kAmaxItems loads in flight a thread in the amax
// pass and kItems vectors a thread in the quantization pass. Also three experiments on the
// dynamic path (none faster on the H100, BENCHMARKS.md, sixth session): the resident one-launch
// kernel (its successor, with the stash loaded through registers at 2048 threads an SM, is the
// library's stash kernel since the ninth session: stash_timeline.cuh), the amax pass through the
// bulk-copy unit, and other walk orders.
#pragma once

#include "../../mllm_kernel/cuda/csrc/quant.cuh"

#include <cooperative_groups.h>

namespace {

/// The library's checks, then contiguous 16-byte vectors required (the variants' only layout).
QuantParams<bf16_t, fp8_e4m3_t> contiguous_params(tvm::ffi::TensorView out, tvm::ffi::TensorView scale,
                                                  tvm::ffi::TensorView input, DLDevice* device) {
  const auto p = check_tensor<bf16_t>(out, scale, input, device);
  mllm_kernel::host::RuntimeCheck(is_flat(p) && can_vectorize(p, 8),
                                  "input and out must be contiguous with 16-byte aligned rows");
  return p;
}

/// Static quantization with kItems vectors of kVec elements a thread: the library's 16-byte
/// vectors (kVec 8), or narrower ones, more threads with less work each, as Inductor's kernel at
/// one token (16 blocks x 128 threads x 2 elements).
template <int kVec, int kItems>
void run_static_vec(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  launch_static<bf16_t, kVec, kItems>(p, device, true);
}

template <int kAmaxItems, int kItems>
void run_two_pass(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  launch_two_pass<bf16_t, 8, kAmaxItems, kItems>(p, device, true);
}

// ---------------------------------------------------------------------------------------------
// Experiment (slower than the two passes on the H100, BENCHMARKS.md): dynamic per-tensor
// quantization of a large contiguous tensor in one cooperative launch that reads most of it
// from HBM once. Every block is resident. The tensor is walked in tiles of
// gridDim.x * kThreads vectors, block b taking the b-th kThreads of each (all blocks read
// neighbouring addresses, as a grid-stride loop does). The amax pass copies the first
// `stash_tiles` tiles into shared memory (cp.async: deep in flight, no registers) while it
// streams the rest kUnroll tiles at a time, the last `keep_tiles` marked evict_last; one grid
// barrier later every block knows the amax and quantizes the streamed tiles backwards (the
// last ones still in L2), then the stash. The two-kernel path re-reads all that L2 lost.

/// The shared-memory address of `p` as PTX takes it.
__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

/// Copies 16 bytes from global to shared memory asynchronously with an L2 policy (sm_80+; a
/// plain copy below). `async_copy_wait` makes the calling thread's copies visible to it.
__device__ __forceinline__ void async_copy_16(void* smem, const void* gmem, std::uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(smem_address(smem)), "l"(gmem),
               "l"(policy)
               : "memory");
#else
  (void)policy;
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void async_copy_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

template <typename T, int kVec, int kThreads, int kUnroll>
__global__ void __launch_bounds__(kThreads) resident_tensor_quant_kernel(const __grid_constant__ QuantParams<T, fp8_e4m3_t> p,
                                                                         std::int64_t stash_tiles, std::int64_t keep_tiles) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<T, kVec>;
  static_assert(Vec::kBytes == 16, "the stash copies 16-byte vectors");
  extern __shared__ __align__(16) unsigned char stash_bytes[];
  Vec* stash = reinterpret_cast<Vec*>(stash_bytes);
  __shared__ float scratch[cta::kScratchSize];
  const std::int64_t total = p.rows * (p.hidden / kVec);
  const std::int64_t tile = static_cast<std::int64_t>(gridDim.x) * kThreads;
  const std::int64_t tiles = (total + tile - 1) / tile;
  const std::int64_t stashed = std::min(stash_tiles, tiles);
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;  // in tile 0
  const std::uint64_t keep = l2_evict_last(), drop = l2_evict_first();

  // Pass 1: amax. The stash copies fly while the streamed tiles are reduced from registers.
  for (std::int64_t k = 0; k < stashed; ++k) {
    const std::int64_t i = first + k * tile;
    if (i < total) async_copy_16(stash + k * kThreads + threadIdx.x, p.in + i * kVec, drop);
  }
  float amax = 0.0f;
  const std::int64_t keep_from = tiles - keep_tiles;
  for (std::int64_t k = stashed; k < tiles; k += kUnroll) {
    Vec v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = first + (k + u) * tile;
      if (k + u < tiles && i < total) load_with_policy(v[u], p.in + i * kVec, k + u >= keep_from ? keep : drop);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (k + u < tiles && first + (k + u) * tile < total) amax = fmaxf(amax, vec_amax(v[u]));
    }
  }
  async_copy_wait();  // each thread reads back only the slots it copied
  for (std::int64_t k = 0; k < stashed; ++k) {
    if (first + k * tile < total) amax = fmaxf(amax, vec_amax(stash[k * kThreads + threadIdx.x]));
  }
  amax = cta::reduce_max(amax, scratch);
  if (threadIdx.x == 0) atomic::max(p.scales, amax / QuantFormat<fp8_e4m3_t>::kMax);
  cooperative_groups::this_grid().sync();
  const float scale = __ldcg(p.scales);  // from L2, never a stale L1 line

  // Pass 2.
  const ScaleDivisor divide(scale);
  for (std::int64_t k = tiles - kUnroll; k > stashed - kUnroll; k -= kUnroll) {
    Vec v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = first + (k + u) * tile;
      if (k + u >= stashed && i < total) load_with_policy(v[u], p.in + i * kVec, drop);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = first + (k + u) * tile;
      if (k + u >= stashed && i < total) store_with_policy(quantize<fp8_e4m3_t>(v[u], divide), p.out + i * kVec, drop);
    }
  }
  for (std::int64_t k = 0; k < stashed; ++k) {
    const std::int64_t i = first + k * tile;
    if (i < total) store_with_policy(quantize<fp8_e4m3_t>(stash[k * kThreads + threadIdx.x], divide), p.out + i * kVec, drop);
  }
}

/// The resident one-launch path for contiguous 16-byte vectors: kBlocksPerSM blocks of
/// kThreads on every SM, each stashing what its share of the SM's shared memory holds, the
/// last `keep_bytes` of the streamed parts marked evict_last. Returns false, launching nothing,
/// where the device cannot hold that grid.
template <typename T, int kVec, int kThreads, int kUnroll, int kBlocksPerSM>
bool launch_resident(const QuantParams<T, fp8_e4m3_t>& p, DLDevice device, std::int64_t keep_bytes,
                     std::int64_t max_stash_bytes = -1) {
  using namespace mllm_kernel::host;
  using Vec = mllm_kernel::device::AlignedVector<T, kVec>;
  const auto kernel = resident_tensor_quant_kernel<T, kVec, kThreads, kUnroll>;
  const int id = device.device_id;
  cudaFuncAttributes attributes{};
  RuntimeDeviceCheck(cudaFuncGetAttributes(&attributes, kernel));
  const std::int64_t share = runtime::get_smem_per_sm(id) / kBlocksPerSM - runtime::get_reserved_smem_per_block(id);
  const std::int64_t cap = std::min<std::int64_t>(share, runtime::get_available_dynamic_smem_per_block(id)) -
                           static_cast<std::int64_t>(attributes.sharedSizeBytes);
  if (cap < static_cast<std::int64_t>(sizeof(Vec))) return false;
  const std::size_t smem = static_cast<std::size_t>(cap / sizeof(Vec) * sizeof(Vec));
  RuntimeDeviceCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int per_sm = std::min(kBlocksPerSM, runtime::get_blocks_per_sm(kernel, kThreads, smem));
  if (per_sm < 1) return false;
  const std::int64_t blocks = static_cast<std::int64_t>(runtime::get_sm_count(id)) * per_sm;
  const std::int64_t tile_bytes = blocks * kThreads * static_cast<std::int64_t>(sizeof(Vec));
  std::int64_t stash_tiles = static_cast<std::int64_t>(smem / sizeof(Vec)) / kThreads;
  if (max_stash_bytes >= 0) {
    stash_tiles = std::min<std::int64_t>(stash_tiles, max_stash_bytes / static_cast<std::int64_t>(sizeof(Vec)) / kThreads);
  }
  RuntimeDeviceCheck(cudaMemsetAsync(p.scales, 0, sizeof(float), LaunchKernel::resolve_device(device)));
  LaunchKernel(static_cast<unsigned>(blocks), kThreads, device, stash_tiles * kThreads * sizeof(Vec))
      .enable_cooperative()(kernel, p, stash_tiles, keep_bytes / tile_bytes);
  return true;
}

template <int kThreads, int kUnroll, int kBlocksPerSM, int kKeepMB, int kStashKB = -1>
void run_resident(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  mllm_kernel::host::RuntimeCheck(
      launch_resident<bf16_t, 8, kThreads, kUnroll, kBlocksPerSM>(
          p, device, static_cast<std::int64_t>(kKeepMB) << 20, kStashKB < 0 ? -1 : static_cast<std::int64_t>(kStashKB) << 10),
      "the device cannot hold the resident grid");
}

// ---------------------------------------------------------------------------------------------
// The amax pass through the Hopper bulk-copy unit (experiment): each block pulls chunks of
// kChunkBytes through a ring of kStages shared-memory buffers with cp.async.bulk and an
// mbarrier each, and reduces them from shared memory; the last kL2KeepBytes marked evict_last.

template <int kChunkBytes, int kStages>
__global__ void __launch_bounds__(kBlock) bulk_amax_kernel(const __grid_constant__ QuantParams<bf16_t, fp8_e4m3_t> p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<bf16_t, 8>;
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) std::uint64_t full[kStages];
  __shared__ float scratch[cta::kScratchSize];
  pdl_launch_dependents();
  float amax = 0.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const std::int64_t bytes = p.rows * p.hidden * static_cast<std::int64_t>(sizeof(bf16_t));
  const std::int64_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  const std::int64_t mine = chunks > blockIdx.x ? (chunks - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const std::int64_t keep_from = bytes - kL2KeepBytes;
  const auto chunk_bytes = [&](std::int64_t k) {
    const std::int64_t offset = (blockIdx.x + k * gridDim.x) * static_cast<std::int64_t>(kChunkBytes);
    return static_cast<unsigned>(std::min<std::int64_t>(kChunkBytes, bytes - offset));
  };
  const auto issue = [&](std::int64_t k) {  // thread 0 only
    const int s = static_cast<int>(k % kStages);
    const std::int64_t offset = (blockIdx.x + k * gridDim.x) * static_cast<std::int64_t>(kChunkBytes);
    const unsigned n = chunk_bytes(k);
    const std::uint64_t policy = offset >= keep_from ? l2_evict_last() : l2_evict_first();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(&full[s])), "r"(n) : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
            smem_address(ring + s * kChunkBytes)),
        "l"(reinterpret_cast<const unsigned char*>(p.in) + offset), "r"(n), "r"(smem_address(&full[s])), "l"(policy)
        : "memory");
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(&full[s])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (std::int64_t k = 0; k < std::min<std::int64_t>(kStages, mine); ++k) issue(k);
  }
  __syncthreads();
  for (std::int64_t k = 0; k < mine; ++k) {
    const int s = static_cast<int>(k % kStages);
    const unsigned parity = static_cast<unsigned>((k / kStages) & 1);
    unsigned done = 0;
    while (!done) {
      asm volatile(
          "{ .reg .pred P; mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2; selp.u32 %0, 1, 0, P; }"
          : "=r"(done)
          : "r"(smem_address(&full[s])), "r"(parity)
          : "memory");
    }
    const Vec* v = reinterpret_cast<const Vec*>(ring + s * kChunkBytes);
    const int n = static_cast<int>(chunk_bytes(k) / sizeof(Vec));
    for (int i = threadIdx.x; i < n; i += kBlock) amax = fmaxf(amax, vec_amax(v[i]));
    __syncthreads();  // stage s read by every thread before it is refilled
    if (threadIdx.x == 0 && k + kStages < mine) issue(k + kStages);
  }
#endif
  amax = cta::reduce_max(amax, scratch);
  if (threadIdx.x == 0) atomic::max(p.scales, amax / QuantFormat<fp8_e4m3_t>::kMax);
}

/// Memset and the bulk amax pass; with kQuantize the library's quantization pass after it.
template <int kChunkBytes, int kStages, bool kQuantize>
void run_bulk_amax(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  using namespace mllm_kernel::host;
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  RuntimeCheck(runtime::get_cc_major(device.device_id) >= 9, "the bulk-copy amax pass needs sm_90 or newer");
  const auto kernel = bulk_amax_kernel<kChunkBytes, kStages>;
  constexpr std::size_t smem = static_cast<std::size_t>(kChunkBytes) * kStages;
  if (smem > 48 * 1024) RuntimeDeviceCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const std::int64_t chunks =
      div_ceil(p.rows * p.hidden * static_cast<std::int64_t>(sizeof(bf16_t)), static_cast<std::int64_t>(kChunkBytes));
  RuntimeDeviceCheck(cudaMemsetAsync(p.scales, 0, sizeof(float), LaunchKernel::resolve_device(device)));
  LaunchKernel(static_cast<unsigned>(filling_grid(kernel, chunks, device.device_id, smem)), kBlock, device, smem)(kernel, p);
  if constexpr (kQuantize) launch_quant_after_amax<bf16_t, 8, 1>(p, device, true);
}

/// Memset and the library's amax pass alone (to time it against the variants).
void run_amax_only(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  launch_amax<bf16_t, 8, 1>(p, device);
}

// ---------------------------------------------------------------------------------------------
// Walk orders of the two passes (experiment): the library's amax pass reads forwards and its
// quantization pass backwards, so that the tail the amax pass read last is still in L2; a
// static pass measured 9 us slower backwards. Here the amax pass reads backwards (kReverse,
// its last kKeepMB of reads being the head) and the quantization pass forwards.

template <bool kReverse, int kKeepMB>
__global__ void __launch_bounds__(kBlock) ordered_amax_kernel(const __grid_constant__ QuantParams<bf16_t, fp8_e4m3_t> p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<bf16_t, 8>;
  __shared__ float scratch[cta::kScratchSize];
  pdl_launch_dependents();
  const std::int64_t total = p.rows * (p.hidden / 8);
  const std::int64_t keep_vecs = (static_cast<std::int64_t>(kKeepMB) << 20) / Vec::kBytes;
  const std::uint64_t keep = l2_evict_last(), drop = l2_evict_first();
  float amax = 0.0f;
  for (std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x; n < total;
       n += static_cast<std::int64_t>(gridDim.x) * kBlock) {
    const std::int64_t i = kReverse ? total - 1 - n : n;
    const bool kept = kReverse ? i < keep_vecs : i >= total - keep_vecs;
    Vec v;
    load_with_policy(v, p.in + i * 8, kept ? keep : drop);
    amax = fmaxf(amax, vec_amax(v));
  }
  amax = cta::reduce_max(amax, scratch);
  if (threadIdx.x == 0) atomic::max(p.scales, amax / QuantFormat<fp8_e4m3_t>::kMax);
}

__global__ void __launch_bounds__(kBlock) forward_quant_kernel(const __grid_constant__ QuantParams<bf16_t, fp8_e4m3_t> p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<bf16_t, 8>;
  const std::int64_t total = p.rows * (p.hidden / 8);
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  const std::uint64_t drop = l2_evict_first();
  Vec v;
  if (i < total) load_with_policy(v, p.in + i * 8, drop);
  pdl_wait_primary();
  const ScaleDivisor divide(*p.scales);
  if (i < total) store_with_policy(quantize<fp8_e4m3_t>(v, divide), p.out + i * 8, drop);
}

template <bool kReverse, int kKeepMB>
void run_ordered(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  using namespace mllm_kernel::host;
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  const std::int64_t total = p.rows * (p.hidden / 8);
  const auto amax = ordered_amax_kernel<kReverse, kKeepMB>;
  RuntimeDeviceCheck(cudaMemsetAsync(p.scales, 0, sizeof(float), LaunchKernel::resolve_device(device)));
  LaunchKernel(static_cast<unsigned>(filling_grid(amax, div_ceil(total, kBlock), device.device_id)), kBlock, device)(amax, p);
  LaunchKernel(static_cast<unsigned>(div_ceil(total, kBlock)), kBlock, device).enable_pdl(true)(forward_quant_kernel, p);
}

}  // namespace
