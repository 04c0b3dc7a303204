// CUDA per-tensor quantization to float8_e4m3fn with one scale for the whole tensor, one module
// per input type T (fp32_t, fp16_t, bf16_t) and mode (a first call compiles one mode's kernels):
//   per_tensor_quant_fp8<T, kStatic>(out, scale, workspace, input, enable_pdl)
// scale is float32 [1]: computed as amax / 448 (dynamic, kStatic false) or read (static).
// workspace is float32 [W], the one-launch dynamic kernel's per-block partial maxima (one a
// block; with fewer, dynamic quantization takes the two passes); unread when static.
//   q = x / scale in fp32, IEEE division (not x * (1 / scale)); e4m3 of q, round to nearest
//   even, saturated to +-448 (NaN stays NaN); a zero scale writes zeros.
// enable_pdl: launch with programmatic dependent launch (sm_90+; each kernel waits for the
// previous one before touching memory, except the second pass of dynamic quantization, which
// loads its input before waiting for the amax pass: docs/pdl.md says why that is safe).
// Five strategies, chosen by launch_tensor: static (one pass), one block or one cluster holding
// the tensor in registers, the one-launch stash kernel, and the amax pass then the quantization.
// Tensor layouts and checks: mllm_kernel/impl/quant.cuh. 16-byte vector kernels run when
// pointers and strides allow it, element-wise kernels otherwise.
#pragma once

#include <mllm_kernel/atomic.cuh>
#include <mllm_kernel/cache_hint.cuh>
#include <mllm_kernel/cluster.cuh>
#include <mllm_kernel/cta.cuh>
#include <mllm_kernel/grid_barrier.cuh>
#include <mllm_kernel/impl/quant.cuh>
#include <mllm_kernel/quantize.cuh>
#include <mllm_kernel/runtime.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/vec.cuh>
#include <mllm_kernel/warp.cuh>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>
#include <map>
#include <mutex>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp32_t;
using mllm_kernel::fp8_e4m3_t;
using mllm_kernel::ScaleDivisor;
using mllm_kernel::device::QuantFormat;
using mllm_kernel::device::quantize;
using mllm_kernel::device::quantize_store;
using mllm_kernel::device::quant::QuantParams;
using mllm_kernel::device::l2_evict_first;
using mllm_kernel::device::l2_evict_last;
using mllm_kernel::device::load_with_policy;
using mllm_kernel::device::store_with_policy;
using mllm_kernel::device::vec_amax;
using mllm_kernel::host::quant::can_vectorize;
using mllm_kernel::host::quant::check_tensor;
using mllm_kernel::host::quant::is_flat;

constexpr int kBlock = 256;

// ---------------------------------------------------------------------------------------------
// Per-tensor: `amax_kernel` folds |x| / 448 of the whole tensor into scale[0] with one atomic
// max per block (the division rounds monotonically, so the max of the quotients is amax / 448
// exactly); `tensor_quant_kernel` then quantizes with that scale. After the amax pass
// (kAfterAmax) the quantization walks the tensor from the end backwards, the tail, read last by
// the amax pass, being still in L2; with a given (static) scale it walks forwards with plain
// loads and stores (H100, [16384, 4096] bf16: 72 us against 81 us with the backward walk).
// The amax pass reads with plain vector loads: through the bulk-copy unit it was slower (H100,
// [16384, 4096] bf16: 52 against 46 us). These two kernels serve strided rows, mid sizes and
// GPUs before sm_90; large contiguous tensors on sm_90+ take the one-launch
// `stash_tensor_quant_kernel` below, which keeps part of the input on chip.

/// Bytes at the end of the input the amax pass asks L2 to keep (evict_last) for the
/// quantization pass, which reads them first; H100's L2 is 50 MB.
constexpr std::int64_t kL2KeepBytes = 32LL << 20;

/// Vector `i` of the tensor seen as rows of `vecs_per_row` vectors.
__device__ __forceinline__ std::int64_t vec_offset(std::int64_t i, std::int64_t vecs_per_row, std::int64_t stride,
                                                   int vec) {
  const std::int64_t row = i / vecs_per_row;
  return row * stride + (i - row * vecs_per_row) * vec;
}

/// kItems: vectors a thread loads at once (all in flight before any is reduced).
template <typename T, int kVec, int kItems>
__global__ void __launch_bounds__(kBlock) amax_kernel(const __grid_constant__ QuantParams<T, fp8_e4m3_t> p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<T, kVec>;
  __shared__ float scratch[cta::kScratchSize];
  // Launched with PDL, wait for the input's writer before anything else. Then the quantization
  // kernel may be scheduled; it waits for this grid's writes itself.
  if (p.pdl) pdl_wait_primary();
  pdl_launch_dependents();
  const std::int64_t vecs_per_row = p.hidden / kVec;
  const std::int64_t total = p.rows * vecs_per_row;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * kBlock * kItems;
  float amax = 0.0f;
  const bool flat = p.rows == 1 || p.in_stride == p.hidden;
  const std::int64_t keep_from = total - kL2KeepBytes / Vec::kBytes;
  const std::uint64_t keep = l2_evict_last(), drop = l2_evict_first();
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * kBlock * kItems + threadIdx.x; base < total;
       base += step) {
    Vec v[kItems];
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const std::int64_t i = base + u * kBlock;
      if (i < total) {
        load_with_policy(v[u], p.in + (flat ? i * kVec : vec_offset(i, vecs_per_row, p.in_stride, kVec)),
                         i >= keep_from ? keep : drop);
      }
    }
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      if (base + u * kBlock < total) amax = fmaxf(amax, vec_amax(v[u]));
    }
  }
  amax = cta::reduce_max(amax, scratch);
  if (threadIdx.x == 0) atomic::max(p.scales, amax / QuantFormat<fp8_e4m3_t>::kMax);
}

/// Vector `i`'s element offset: i * vec when the tensor is flat (kFlat: contiguous or one row,
/// known at compile time, so the strided addressing, a 64-bit division, stays out of the code),
/// vec_offset's otherwise.
template <bool kFlat>
__device__ __forceinline__ std::int64_t tensor_vec_offset(std::int64_t i, std::int64_t vecs_per_row,
                                                          std::int64_t stride, int vec) {
  return kFlat ? i * vec : vec_offset(i, vecs_per_row, stride, vec);
}

/// Dynamic per-tensor quantization of a tensor that fits in the registers of kBlocks blocks of
/// kThreads threads, kItems vectors each: amax, scale and quantization in one launch, instead
/// of a memset, the amax kernel and the quantization kernel. One block (any GPU) for small
/// tensors; for mid sizes one thread block cluster (sm_90+), where each block reduces its part's
/// amax into its shared memory and, after a cluster barrier, reads every block's through
/// distributed shared memory (H100, [64, 4096] bf16: 5.06 against 5.73 us for the two passes).
/// `flat` is a kernel argument here, not a template one: a thread's few vectors do not need the
/// strided addressing kept out of the code, and one kernel serves both layouts (fewer kernels
/// for a first call to compile).
constexpr int kSmallTensorItems = 8;
constexpr std::int64_t kSmallTensorVecs = static_cast<std::int64_t>(kBlock) * kSmallTensorItems;
constexpr int kClusterBlocks = 8;  // the cluster size every sm_90 GPU supports
constexpr int kClusterThreads = 1024;
constexpr int kClusterItems = 4;
constexpr std::int64_t kClusterTensorVecs = static_cast<std::int64_t>(kClusterBlocks) * kClusterThreads * kClusterItems;

template <typename T, int kVec, int kBlocks, int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads) resident_tensor_quant_kernel(const __grid_constant__ QuantParams<T, fp8_e4m3_t> p,
                                                                         bool flat) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<T, kVec>;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  if constexpr (kBlocks > 1) return;  // no clusters: the host never launches this (LaunchKernel refuses)
#endif
  __shared__ float scratch[cta::kScratchSize];
  if (p.pdl) pdl_wait_and_release();
  const std::int64_t vecs_per_row = p.hidden / kVec;
  const std::int64_t total = p.rows * vecs_per_row;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kThreads * kItems + threadIdx.x;
  Vec v[kItems];
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const std::int64_t i = first + j * kThreads;
    if (i < total) {
      v[j].load(p.in + (flat ? i * kVec : vec_offset(i, vecs_per_row, p.in_stride, kVec)));
      amax = fmaxf(amax, vec_amax(v[j]));
    }
  }
  amax = cta::reduce_max(amax, scratch);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kBlocks > 1) {
    __shared__ float block_amax, cluster_amax;
    if (threadIdx.x == 0) block_amax = amax;
    cluster::sync();  // every block's amax is written
    if (threadIdx.x < kWarpThreads) {
      float m = 0.0f;
      if (threadIdx.x < kBlocks) m = cluster::load_shared(&block_amax, threadIdx.x);
      m = warp::reduce_max(m);
      if (threadIdx.x == 0) cluster_amax = m;
    }
    __syncthreads();
    amax = cluster_amax;
  }
#endif
  const float scale = amax / QuantFormat<fp8_e4m3_t>::kMax;
  if (blockIdx.x == 0 && threadIdx.x == 0) *p.scales = scale;
  const ScaleDivisor divide(scale);
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const std::int64_t i = first + j * kThreads;
    if (i < total) {
      quantize_store(v[j], divide, p.out + (flat ? i * kVec : vec_offset(i, vecs_per_row, p.out_stride, kVec)), 0);
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // No block leaves while another may still read its shared memory.
  if constexpr (kBlocks > 1) cluster::sync();
#endif
}

/// kFlat as for tensor_vec_offset. kItems: vectors a thread quantizes, kBlock apart (all loads issued first).
template <typename T, int kVec, bool kAfterAmax, bool kFlat, int kItems>
__global__ void __launch_bounds__(kBlock) tensor_quant_kernel(const __grid_constant__ QuantParams<T, fp8_e4m3_t> p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<T, kVec>;
  const std::int64_t vecs_per_row = p.hidden / kVec;
  const std::int64_t total = p.rows * vecs_per_row;
  // After the amax pass, block b takes the b-th chunk from the end (blocks start roughly in
  // index order).
  const std::int64_t chunk = kAfterAmax ? static_cast<std::int64_t>(gridDim.x) - 1 - blockIdx.x : blockIdx.x;
  const std::int64_t first = chunk * kBlock * kItems + threadIdx.x;
  const auto in_at = [&](std::int64_t i) { return p.in + tensor_vec_offset<kFlat>(i, vecs_per_row, p.in_stride, kVec); };
  const auto out_at = [&](std::int64_t i) { return p.out + tensor_vec_offset<kFlat>(i, vecs_per_row, p.out_stride, kVec); };
  Vec v[kItems];
  if constexpr (kAfterAmax) {
    // Nothing here is read again: let these lines go first so the kept tail stays.
    const std::uint64_t drop = l2_evict_first();
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      if (first + u * kBlock < total) load_with_policy(v[u], in_at(first + u * kBlock), drop);
    }
    // The scale is written by the amax kernel.
    pdl_wait_primary();
    const ScaleDivisor divide(*p.scales);
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const std::int64_t i = first + u * kBlock;
      if (i < total) store_with_policy(quantize<fp8_e4m3_t>(v[u], divide), out_at(i), drop);
    }
  } else {
    if (p.pdl) pdl_wait_and_release();
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      if (first + u * kBlock < total) v[u].load(in_at(first + u * kBlock));
    }
    const ScaleDivisor divide(*p.scales);
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const std::int64_t i = first + u * kBlock;
      if (i < total) quantize<fp8_e4m3_t>(v[u], divide).store(out_at(i));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Dynamic per-tensor quantization of a large contiguous tensor in one cooperative launch (sm_90+)
// that reads part of it from DRAM only once. kStashBlocksPerSM blocks of kStashThreads on every
// SM, all resident; the tensor is walked in tiles of gridDim.x * kStashThreads vectors, thread t
// of block b taking vector b * kStashThreads + t of each. Pass 1 reduces the amax through
// registers, copies this thread's vectors of the first `stash_tiles` tiles into shared memory (30
// MB over an H100) and marks the last `keep_tiles` evict_last. Each block writes its amax to
// `partials`, a grid barrier, and every block reduces them (no memset). Pass 2 re-reads the
// other tiles, backwards so that the L2-kept ones come first, then quantizes the
// stash (H100, [16384, 4096] bf16: 104 us against 116 us for the two kernels). Two blocks of
// 1024 threads an SM, as the amax kernel: one 1024-thread block an SM, copying the stash with
// cp.async, keeping tiles in registers as well, or sharing pass 2 out from counters was no
// faster.
constexpr int kStashThreads = 1024;
constexpr int kStashBlocksPerSM = 2;
/// The stash kernel's grid barrier counter (grid_barrier.cuh), one a device: zero when the module
/// loads, and never a call's to set up, so a call captured into a CUDA graph needs nothing
/// before it. Launches share it safely: each fills every SM, so one starts only as the last
/// finishes.
__device__ std::uint32_t stash_barrier = 0;

template <typename T, int kVec>
__global__ void __launch_bounds__(kStashThreads, kStashBlocksPerSM)
    stash_tensor_quant_kernel(const __grid_constant__ QuantParams<T, fp8_e4m3_t> p, float* partials, int stash_tiles,
                              int keep_tiles) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<T, kVec>;
  extern __shared__ __align__(16) unsigned char stash_bytes[];
  Vec* stash = reinterpret_cast<Vec*>(stash_bytes) + threadIdx.x;  // this thread's slot of tile 0
  __shared__ float scratch[cta::kScratchSize];
  if (p.pdl) pdl_wait_and_release();
  const std::int64_t total = p.rows * (p.hidden / kVec);
  const std::int64_t tile = static_cast<std::int64_t>(gridDim.x) * kStashThreads;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kStashThreads + threadIdx.x;
  // This thread's vector of tile k is in[k * tile]; it has one in `mine` tiles.
  const Vec* in = reinterpret_cast<const Vec*>(p.in) + first;
  const int mine = first < total ? static_cast<int>((total - first - 1) / tile + 1) : 0;
  const int stashed = min(stash_tiles, mine);
  const int keep_from = static_cast<int>((total - 1) / tile + 1) - keep_tiles;
  const std::uint64_t keep = l2_evict_last(), drop = l2_evict_first();
  const auto load = [&](Vec& v, int k, std::uint64_t policy) {
    load_with_policy(v, reinterpret_cast<const T*>(in + k * tile), policy);
  };

  float amax = 0.0f;
  for (int k = 0; k < stashed; ++k) {
    Vec v;
    load(v, k, drop);
    amax = fmaxf(amax, vec_amax(v));
    stash[k * kStashThreads] = v;
  }
  for (int k = stashed; k < mine; ++k) {
    Vec v;
    load(v, k, k >= keep_from ? keep : drop);
    amax = fmaxf(amax, vec_amax(v));
  }
  amax = cta::reduce_max(amax, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = amax;
  grid_barrier(&stash_barrier);  // also a fence: every block's partial is visible
  float m = 0.0f;
  for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += kStashThreads) m = fmaxf(m, __ldcg(&partials[b]));
  const float scale = cta::reduce_max(m, scratch) / QuantFormat<fp8_e4m3_t>::kMax;
  if (blockIdx.x == 0 && threadIdx.x == 0) *p.scales = scale;

  const ScaleDivisor divide(scale);
  fp8_e4m3_t* out = p.out + first * kVec;
  const auto put = [&](const Vec& v, int k) {
    store_with_policy(quantize<fp8_e4m3_t>(v, divide), out + k * tile * kVec, drop);
  };
  for (int k = mine - 1; k >= stashed; --k) {
    Vec v;
    load(v, k, drop);
    put(v, k);
  }
  for (int k = 0; k < stashed; ++k) put(stash[k * kStashThreads], k);
}

// ---------------------------------------------------------------------------------------------
// Host side.

/// Blocks of kBlock threads for a grid-stride kernel: enough for `work_blocks`, at most as many
/// as the GPU holds at once.
template <typename... KernelArgs>
std::int64_t filling_grid(void (*kernel)(KernelArgs...), std::int64_t work_blocks, int device_id,
                          std::size_t dynamic_smem = 0) {
  using namespace mllm_kernel::host;
  const std::int64_t resident = static_cast<std::int64_t>(runtime::get_sm_count(device_id)) *
                                runtime::get_blocks_per_sm(kernel, kBlock, dynamic_smem);
  return mllm_kernel::host::min_of(work_blocks, resident);
}

/// The first pass of dynamic per-tensor quantization: zero the scale, then fold the amax into it
/// (a strided kernel with enough blocks to fill the GPU, kAmaxItems loads in flight a thread).
template <typename T, int kVec, int kAmaxItems>
void launch_amax(const QuantParams<T, fp8_e4m3_t>& p, DLDevice device) {
  using namespace mllm_kernel::host;
  const std::int64_t total = p.rows * (p.hidden / kVec);
  RuntimeDeviceCheck(cudaMemsetAsync(p.scales, 0, sizeof(float), LaunchKernel::resolve_device(device)));
  const auto kernel = amax_kernel<T, kVec, kAmaxItems>;
  const std::int64_t blocks = filling_grid(kernel, div_ceil(total, kBlock * kAmaxItems), device.device_id);
  LaunchKernel(static_cast<unsigned>(blocks), kBlock, device).enable_pdl(p.pdl)(kernel, p);
}

/// The second pass: quantize with the scale the previous kernel wrote (the tail first, PDL;
/// kItems vectors a thread).
template <typename T, int kVec, int kItems>
void launch_quant_after_amax(const QuantParams<T, fp8_e4m3_t>& p, DLDevice device, bool flat) {
  using namespace mllm_kernel::host;
  const std::int64_t total = p.rows * (p.hidden / kVec);
  LaunchKernel(static_cast<unsigned>(div_ceil(total, kBlock * kItems)), kBlock, device)
      .enable_pdl(true)(flat ? tensor_quant_kernel<T, kVec, true, true, kItems>
                             : tensor_quant_kernel<T, kVec, true, false, kItems>,
                        p);
}

/// Dynamic per-tensor quantization in two passes.
template <typename T, int kVec, int kAmaxItems, int kItems>
void launch_two_pass(const QuantParams<T, fp8_e4m3_t>& p, DLDevice device, bool flat) {
  launch_amax<T, kVec, kAmaxItems>(p, device);
  launch_quant_after_amax<T, kVec, kItems>(p, device, flat);
}

/// The stash kernel's launch on one device: blocks, tiles kept in shared memory and in L2, the
/// shared memory of a block; `fits` false where the device cannot hold that grid.
struct StashGeometry {
  std::int64_t blocks;
  int stash_tiles;
  int keep_tiles;
  std::size_t smem;
  bool fits;
};

/// StashGeometry of stash_tensor_quant_kernel<T, kVec> on `device_id`, worked out (and the
/// kernel's shared-memory limit raised for the occupancy query) once per device.
template <typename T, int kVec>
StashGeometry stash_geometry(int device_id) {
  using namespace mllm_kernel::host;
  using Vec = mllm_kernel::device::AlignedVector<T, kVec>;
  static std::mutex mutex;
  static std::map<int, StashGeometry> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(device_id); it != cache.end()) return it->second;
  const std::int64_t blocks = static_cast<std::int64_t>(runtime::get_sm_count(device_id)) * kStashBlocksPerSM;
  // Each block's share of the SM's shared memory, in whole tiles of its kStashThreads vectors.
  constexpr std::int64_t kSliceBytes = static_cast<std::int64_t>(kStashThreads) * Vec::kBytes;
  const std::int64_t share = mllm_kernel::host::min_of<std::int64_t>(
      runtime::get_smem_per_sm(device_id) / kStashBlocksPerSM - runtime::get_reserved_smem_per_block(device_id) -
          static_cast<std::int64_t>(sizeof(float)) * mllm_kernel::device::cta::kScratchSize,
      runtime::get_available_dynamic_smem_per_block(device_id));
  const std::int64_t stash_tiles = share / kSliceBytes;
  const std::size_t smem = static_cast<std::size_t>(stash_tiles * kSliceBytes);
  const auto kernel = stash_tensor_quant_kernel<T, kVec>;
  RuntimeDeviceCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const StashGeometry geometry{blocks, static_cast<int>(stash_tiles),
                               static_cast<int>(kL2KeepBytes / (blocks * kSliceBytes)), smem,
                               runtime::get_blocks_per_sm(kernel, kStashThreads, smem) >= kStashBlocksPerSM};
  cache.emplace(device_id, geometry);
  return geometry;
}

/// Dynamic per-tensor quantization in one cooperative launch (stash_tensor_quant_kernel) on
/// sm_90+, for contiguous 16-byte vectors, `partials` holding `num_partials` floats. Returns
/// false, launching nothing, where the device cannot hold the grid or `partials` one float per
/// block.
template <typename T, int kVec>
bool launch_stash(const QuantParams<T, fp8_e4m3_t>& p, float* partials, std::int64_t num_partials, DLDevice device) {
  using namespace mllm_kernel::host;
  static_assert(sizeof(T) * kVec == 16, "the stash kernel reads 16-byte vectors");
  if (runtime::get_cc_major(device.device_id) < 9) return false;
  const StashGeometry g = stash_geometry<T, kVec>(device.device_id);
  if (!g.fits || g.blocks > num_partials) return false;
  LaunchKernel(static_cast<unsigned>(g.blocks), kStashThreads, device, g.smem)
      .enable_pdl(p.pdl)
      .enable_cooperative()(stash_tensor_quant_kernel<T, kVec>, p, partials, g.stash_tiles, g.keep_tiles);
  return true;
}

/// Static per-tensor quantization: one pass with the given scale, kItems vectors a thread.
template <typename T, int kVec, int kItems>
void launch_static(const QuantParams<T, fp8_e4m3_t>& p, DLDevice device, bool flat) {
  using namespace mllm_kernel::host;
  const std::int64_t total = p.rows * (p.hidden / kVec);
  LaunchKernel(static_cast<unsigned>(div_ceil(total, kBlock * kItems)), kBlock, device).enable_pdl(p.pdl)(
      flat ? tensor_quant_kernel<T, kVec, false, true, kItems> : tensor_quant_kernel<T, kVec, false, false, kItems>,
      p);
}

/// Elements (not vectors) up to which static quantization takes 2-element vectors (measured up
/// to 64 x 4096).
constexpr std::int64_t kStaticNarrowElems = 1LL << 18;

/// Full vectors below which static quantization takes two a thread.
constexpr std::int64_t kStaticPairVecs = 1LL << 21;

/// 16-byte vectors from which dynamic quantization of a contiguous tensor takes the stash kernel:
/// where it draws level with the two passes (H100, bf16 rows of 4096: at 128 tokens; ahead
/// beyond, 28.3 against 32.8 us at 4096 tokens).
constexpr std::int64_t kStashTensorVecs = 1LL << 17;

/// Dynamic quantization: the amax, then the quantization, by the fastest strategy the input
/// allows (see the file comment).
template <typename T, int kVec>
void launch_dynamic(const QuantParams<T, fp8_e4m3_t>& p, DLDevice device, bool flat, float* partials,
                    std::int64_t num_partials) {
  using namespace mllm_kernel::host;
  const std::int64_t total = p.rows * (p.hidden / kVec);
  if (total <= kSmallTensorVecs) {
    LaunchKernel(1, kBlock, device)
        .enable_pdl(p.pdl)(resident_tensor_quant_kernel<T, kVec, 1, kBlock, kSmallTensorItems>, p, flat);
    return;
  }
  const auto cluster_kernel = resident_tensor_quant_kernel<T, kVec, kClusterBlocks, kClusterThreads, kClusterItems>;
  if (total <= kClusterTensorVecs && runtime::get_cc_major(device.device_id) >= 9 &&
      runtime::get_kernel_virtual_arch(cluster_kernel, device.device_id) >= 90) {
    // One cluster (blocks past the tensor's end only take part in the barriers).
    LaunchKernel(kClusterBlocks, kClusterThreads, device)
        .enable_pdl(p.pdl)
        .cluster_blocks(kClusterBlocks)(cluster_kernel, p, flat);
    return;
  }
  if constexpr (sizeof(T) * kVec == 16) {
    if (flat && total >= kStashTensorVecs && launch_stash<T, kVec>(p, partials, num_partials, device)) return;
  }
  // One load in flight a thread in the amax pass and one vector a thread after it: more loads a
  // thread made both passes slower (H100: 117 against 122 us at 16384 tokens).
  launch_two_pass<T, kVec, 1, 1>(p, device, flat);
}

/// `partials` (`num_partials` floats) is the dynamic path's scratch; unused when static.
template <typename T, int kVec, bool kStatic>
void launch_tensor(const QuantParams<T, fp8_e4m3_t>& p, DLDevice device, float* partials, std::int64_t num_partials) {
  using namespace mllm_kernel::host;
  static_assert(kVec >= 2, "one-element rows take launch_tensor_scalar");
  const std::int64_t total = p.rows * (p.hidden / kVec);
  RuntimeCheck(div_ceil(total, kBlock) <= 0x7fffffff, "input too large: ", p.rows, " rows of ", p.hidden);
  const bool flat = is_flat(p);
  if constexpr (kStatic) {
    // Small inputs: two 2-element vectors a thread, more threads with less work each (H100, bf16
    // [1, 4096]: 1.27 against 1.39 us with 16-byte vectors; slower on large inputs; fp16 and fp32
    // follow bf16, unmeasured).
    if (p.rows * p.hidden <= kStaticNarrowElems) return launch_static<T, 2, 2>(p, device, flat);
    // Then two full vectors a thread up to kStaticPairVecs, one beyond (H100, bf16 rows of 4096:
    // two are faster at 1024 tokens, 6.9 against 7.6 us, one at 16384).
    if (total < kStaticPairVecs) return launch_static<T, kVec, 2>(p, device, flat);
    return launch_static<T, kVec, 1>(p, device, flat);
  } else {
    launch_dynamic<T, kVec>(p, device, flat, partials, num_partials);
  }
}

/// Inputs that are misaligned or not a whole number of 16-byte vectors a row (rare in serving)
/// take the general kernels alone, one element a thread: one kernel to compile (static) or three
/// (dynamic) beside the vectorised paths', a module's first build being mostly spent on its
/// kernels.
/// Static quantization runs row-strided whatever the layout (on an H100 as fast as the tuned set
/// from 4096 rows of 4095, 1.2 us slower at 128 rows); the pass after the amax keeps its flat
/// variant (a third faster on large inputs there).
template <typename T, bool kStatic>
void launch_tensor_scalar(const QuantParams<T, fp8_e4m3_t>& p, DLDevice device) {
  using namespace mllm_kernel::host;
  const std::int64_t blocks = div_ceil(p.rows * p.hidden, kBlock);
  RuntimeCheck(blocks <= 0x7fffffff, "input too large: ", p.rows, " rows of ", p.hidden);
  if constexpr (kStatic) {
    LaunchKernel(static_cast<unsigned>(blocks), kBlock, device)
        .enable_pdl(p.pdl)(tensor_quant_kernel<T, 1, false, false, 1>, p);
  } else {
    launch_two_pass<T, 1, 1, 1>(p, device, is_flat(p));
  }
}

// ---------------------------------------------------------------------------------------------
// Entry points.

/// float8_e4m3fn quantization of the whole tensor with one scale ([1] float32). Dynamic
/// (kStatic false): scale = amax / 448 is computed into `scale`. Static: `scale` is read.
template <typename T, bool kStatic>
void per_tensor_quant_fp8(mllm_kernel::TensorView out, mllm_kernel::TensorView scale, mllm_kernel::TensorView workspace,
                          mllm_kernel::TensorView input, bool enable_pdl) {
  using namespace mllm_kernel::host;
  DLDevice device;
  auto p = check_tensor<T>(out, scale, input, &device);
  p.pdl = enable_pdl;
  SymbolicSize W{"workspace_size"};
  SymbolicDevice input_device;
  input_device.bind(device, "input");
  (void)TensorMatcher({W}).with_dtype<float>().with_device<kDLCUDA>(input_device).verify(workspace, "workspace");
  auto* partials = static_cast<float*>(workspace.data_ptr());
  constexpr int kVec = mllm_kernel::device::kVecElems<T>;
  if (can_vectorize(p, kVec)) {
    launch_tensor<T, kVec, kStatic>(p, device, partials, W.unwrap());
  } else {
    launch_tensor_scalar<T, kStatic>(p, device);
  }
}

}  // namespace
