// CUDA weight-only quantized GEMM on Marlin-format weights (mllm_kernel/marlin.hpp has the
// format), one module per activation type T (fp16_t, bf16_t) and weight width kBits (4, 8):
//   marlin_gemm<T, kBits>(a, c, b, scales, zeros, g_idx, partials, locks, size_m, size_n, size_k,
//                         m_tiles, splits)
// c[M, N] = a[M, K] @ dequant(b), dequant = (q - zero) * scale with the zero point from `zeros`
// (AWQ) or the type's bias (8 or 128), the scale of the value's group (rows of K grouped
// consecutively, or by g_idx for GPTQ act-order, whose activations the caller has permuted).
//
// A block of 8 warps computes 16 * m_tiles rows x 256 columns over a range of K: warp (wn, wk)
// owns the 64-column tile wn and every other 16-row step of K (wk), so each step is one warp's
// 512-byte (4-bit) slice of a repacked tile: one 16-byte shared-memory load a lane, which
// dequantizes straight into m16n8k16 B fragments. Weights and activations stream through a
// 4-stage cp.async pipeline; the two K-halves are summed through shared memory at the end.
// When the grid would not fill the GPU (small M), K is split across blocks: each writes float32
// partial sums and the last block of a tile to arrive (counted in `locks`, which it resets to
// zero) adds them in split order, so results do not depend on timing.
#pragma once

#include <mllm_kernel/async_copy.cuh>
#include <mllm_kernel/marlin.hpp>
#include <mllm_kernel/mma.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::host::MarlinGemmParams;
namespace marlin = mllm_kernel::marlin;

constexpr int kThreads = 256;
constexpr int kWarpsN = 4;
constexpr int kWarpsK = 2;
constexpr int kBlockN = kWarpsN * marlin::kTileN;
constexpr int kStageRows = 4;  // 16-row steps of K per pipeline stage
constexpr int kStages = 4;

struct MarlinSplit {
  float* partials;  // [splits, M, N] when splits > 1
  std::int32_t* locks;
  std::int64_t rows_per_split;  // 16-row steps of K per split
  int splits;
};

template <int kBits, int kMTiles>
struct MarlinSmem {
  static constexpr int kTileVecs = marlin::tile_words(kBits) / 4;  // int4 per tile row
  static constexpr int kBVecs = kStageRows * kWarpsN * kTileVecs;
  static constexpr int kAVecs = kMTiles * 16 * 8;  // 16 * kMTiles rows of 64 elements
  static constexpr int kStageVecs = kBVecs + kAVecs;
  static constexpr int kPipelineBytes = kStages * kStageVecs * 16;
  static constexpr int kReduceBytes = kWarpsN * kMTiles * 32 * 32 * 4;
  static constexpr int kBytes = (kPipelineBytes > kReduceBytes ? kPipelineBytes : kReduceBytes) + 16;
};

template <typename T>
using Pair = std::conditional_t<std::is_same_v<T, fp16_t>, __half2, __nv_bfloat162>;

template <typename T>
__device__ __forceinline__ Pair<T> as_pair(std::uint32_t bits) {
  return *reinterpret_cast<Pair<T>*>(&bits);
}
template <typename T>
__device__ __forceinline__ std::uint32_t as_bits(Pair<T> v) {
  return *reinterpret_cast<std::uint32_t*>(&v);
}

/// The exponent pattern that turns a small integer i in a 16-bit float's low mantissa bits into
/// kBase4 + i exactly (1024 for fp16, 128 for bf16).
template <typename T>
constexpr std::uint32_t kExponent4 = std::is_same_v<T, fp16_t> ? 0x64006400u : 0x43004300u;
template <typename T>
constexpr float kBase4 = std::is_same_v<T, fp16_t> ? 1024.0f : 128.0f;

/// (value of nibbles 0 and 4 of w) + kBase4, as a pair.
template <typename T>
__device__ __forceinline__ std::uint32_t nibble_pair(std::uint32_t w) {
  return (w & 0x000f000fu) | kExponent4<T>;
}

/// Bytes (lo, hi) of w as a pair of exact signed values minus 128.
template <typename T>
__device__ __forceinline__ std::uint32_t byte_pair(std::uint32_t w, int lo, int hi) {
  if constexpr (std::is_same_v<T, fp16_t>) {
    // 0x64 above a byte is 1024 + byte in fp16.
    const std::uint32_t v = __byte_perm(w, 0x64u, lo | 4 << 4 | hi << 8 | 4 << 12);
    return as_bits<T>(__hsub2(as_pair<T>(v), __half2half2(__float2half(1152.0f))));
  } else {
    const float a = __uint_as_float(0x4b000000u | (w >> (8 * lo) & 0xffu)) - 8388736.0f;
    const float b = __uint_as_float(0x4b000000u | (w >> (8 * hi) & 0xffu)) - 8388736.0f;
    return as_bits<T>(__floats2bfloat162_rn(a, b));
  }
}

template <typename T>
__device__ __forceinline__ Pair<T> pair_of(T lo, T hi) {
  if constexpr (std::is_same_v<T, fp16_t>) {
    return __halves2half2(lo, hi);
  } else {
    return __halves2bfloat162(lo, hi);
  }
}

template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, fp16_t>) {
    return __float2half_rn(x);
  } else {
    return __float2bfloat16_rn(x);
  }
}

/// The scales (8, of this lane's columns in the tile: 16 j + 8 half + lane / 4) and zero-point
/// word of one group.
template <typename T, int kBits>
struct GroupParams {
  T scale[8];
  std::uint32_t zeros;
};

template <typename T, int kBits>
__device__ __forceinline__ GroupParams<T, kBits> load_group(const MarlinGemmParams& p, std::int64_t group,
                                                            std::int64_t tile, int lane, bool scaled) {
  GroupParams<T, kBits> g;
  if (scaled) {
    const int4 s = __ldg(reinterpret_cast<const int4*>(static_cast<const T*>(p.scales) + group * p.n +
                                                       tile * marlin::kTileN + lane / 4 * 8));
    *reinterpret_cast<int4*>(g.scale) = s;
  }
  g.zeros = p.zeros ? static_cast<std::uint32_t>(
                          __ldg(p.zeros + group * (p.n * kBits / 32) + marlin::zero_point_word(kBits, tile * marlin::kTileN) +
                                lane / 4))
                    : 0u;
  return g;
}

/// Group of K row k.
__device__ __forceinline__ std::int64_t group_of(const MarlinGemmParams& p, std::int64_t k, bool act_order) {
  if (!act_order) return k / p.group_size;
  const std::int64_t g = __ldg(p.g_idx + k);
  return g < 0 ? 0 : (g >= p.groups ? p.groups - 1 : g);  // out-of-range ids read a valid row
}

template <typename T, int kBits, int kMTiles, bool kActOrder>
__global__ void __launch_bounds__(kThreads) marlin_gemm_kernel(const __grid_constant__ MarlinGemmParams p,
                                                                const MarlinSplit split) {
  using namespace mllm_kernel::device;
  using Smem = MarlinSmem<kBits, kMTiles>;
  constexpr int kTileVecs = Smem::kTileVecs;
  constexpr int kLaneWords = kBits;  // 32 values a lane
  constexpr bool kBf16 = std::is_same_v<T, bf16_t>;
  extern __shared__ int4 smem[];
  __shared__ int last_flag;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wn = warp % kWarpsN, wk = warp / kWarpsN;
  const std::int64_t n_tiles = p.n / marlin::kTileN;
  const std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kWarpsN + wn;
  const bool tile_ok = tile < n_tiles;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.y) * kMTiles * 16;
  const std::int64_t steps = p.k / marlin::kTileK;
  const std::int64_t row_begin = blockIdx.z * split.rows_per_split;
  const std::int64_t row_end = std::min(steps, row_begin + split.rows_per_split);
  const int stages = row_end > row_begin ? static_cast<int>((row_end - row_begin + kStageRows - 1) / kStageRows) : 0;
  const std::int64_t row_words = p.n * marlin::kTileK * kBits / 32;
  const bool channelwise = p.groups == 1;
  const T* a = static_cast<const T*>(p.a);

  auto load_stage = [&](int s) {
    int4* stage = smem + (s % kStages) * Smem::kStageVecs;
    const std::int64_t row0 = row_begin + static_cast<std::int64_t>(s) * kStageRows;
#pragma unroll
    for (int i = threadIdx.x; i < Smem::kBVecs; i += kThreads) {
      const int r = i / (kWarpsN * kTileVecs), t = i / kTileVecs % kWarpsN;
      const std::int64_t row = row0 + r, tl = static_cast<std::int64_t>(blockIdx.x) * kWarpsN + t;
      if (row < row_end && tl < n_tiles) {
        cp_async16(stage + i, reinterpret_cast<const int4*>(p.b + row * row_words) + tl * kTileVecs + i % kTileVecs);
      }
    }
    int4* stage_a = stage + Smem::kBVecs;
#pragma unroll
    for (int i = threadIdx.x; i < Smem::kAVecs; i += kThreads) {
      const int r = i / 8, c = i % 8;
      const std::int64_t k = row0 * marlin::kTileK + c * 8;
      const bool valid = m0 + r < p.m && k < row_end * marlin::kTileK;
      cp_async16_or_zero(stage_a + r * 8 + (c ^ (r % 8)), valid ? a + (m0 + r) * p.lda + k : a, valid);
    }
  };

  float acc[kMTiles][8][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int x = 0; x < 8; ++x)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][x][e] = 0.0f;

  const T bias = from_float<T>(kBits == 4 ? kBase4<T> + (p.zeros ? 0.0f : 8.0f) : 0.0f);

  // Per 8-column block x: what to subtract and the scale, for the fragment's rows (2t, 2t + 1)
  // in `lo` and (2t + 8, 2t + 9) in `hi`; kept across steps of one group.
  Pair<T> sub_lo[8], sub_hi[8], scale_lo[8], scale_hi[8];
  int cached_group = -1;
  const int group_steps = static_cast<int>(p.group_size / marlin::kTileK);

  auto compute_stage = [&](int s) {
    const int4* stage = smem + (s % kStages) * Smem::kStageVecs;
    const int4* stage_a = stage + Smem::kBVecs;
    const std::int64_t row0 = row_begin + static_cast<std::int64_t>(s) * kStageRows;
#pragma unroll
    for (int x = 0; x < kStageRows / kWarpsK; ++x) {
      const int r = wk + x * kWarpsK;
      const std::int64_t row = row0 + r;
      if (!tile_ok || row >= row_end) continue;
      std::uint32_t fa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const int ar = mt * 16 + lane % 16;
        mma::ldmatrix_x4_b16(fa[mt], stage_a + ar * 8 + ((r * 2 + lane / 16) ^ (ar % 8)));
      }
      std::uint32_t q[kLaneWords];
#pragma unroll
      for (int v = 0; v < kBits / 4; ++v) {
        const int4 w = stage[(r * kWarpsN + wn) * kTileVecs + lane * (kBits / 4) + v];
        q[4 * v] = w.x, q[4 * v + 1] = w.y, q[4 * v + 2] = w.z, q[4 * v + 3] = w.w;
      }
      const std::int64_t k0 = row * marlin::kTileK + 2 * (lane % 4);
      if constexpr (kActOrder) {
        GroupParams<T, kBits> g[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) g[e] = load_group<T, kBits>(p, group_of(p, k0 + e % 2 + e / 2 * 8, true), tile, lane, true);
#pragma unroll
        for (int xb = 0; xb < 8; ++xb) {
          T sub[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int slot = marlin::slot_of(kBits, xb);
            sub[e] = p.zeros ? from_float<T>(kBase4<T> + static_cast<float>(g[e].zeros >> (kBits * slot) & 0xfu)) : bias;
          }
          sub_lo[xb] = pair_of<T>(sub[0], sub[1]);
          sub_hi[xb] = pair_of<T>(sub[2], sub[3]);
          scale_lo[xb] = pair_of<T>(g[0].scale[xb], g[1].scale[xb]);
          scale_hi[xb] = pair_of<T>(g[2].scale[xb], g[3].scale[xb]);
        }
      } else {
        // Decoded once per group (a warp-uniform test): consecutive steps mostly share one.
        const int group = channelwise ? 0 : static_cast<int>(row) / group_steps;
        if (group != cached_group) {
          cached_group = group;
          const GroupParams<T, kBits> g = load_group<T, kBits>(p, group, tile, lane, !channelwise);
#pragma unroll
          for (int xb = 0; xb < 8; ++xb) {
            const int slot = marlin::slot_of(kBits, xb);
            const T sub =
                p.zeros ? from_float<T>(kBase4<T> + static_cast<float>(g.zeros >> (kBits * slot) & 0xfu)) : bias;
            sub_lo[xb] = sub_hi[xb] = pair_of<T>(sub, sub);
            if (!channelwise) scale_lo[xb] = scale_hi[xb] = pair_of<T>(g.scale[xb], g.scale[xb]);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int xb = 2 * j + half;
          std::uint32_t b0, b1;
          if constexpr (kBits == 4) {
            const std::uint32_t w = q[j] >> (8 * half);
            b0 = as_bits<T>(__hsub2(as_pair<T>(nibble_pair<T>(w)), sub_lo[xb]));
            b1 = as_bits<T>(__hsub2(as_pair<T>(nibble_pair<T>(w >> 4)), sub_hi[xb]));
          } else {
            // Bytes hold values 0, 2, 1, 3 of the block: (0, 1) at bytes 0 and 2, (2, 3) at 1 and 3.
            b0 = byte_pair<T>(q[xb], 0, 2);
            b1 = byte_pair<T>(q[xb], 1, 3);
          }
          if (!channelwise) {
            b0 = as_bits<T>(__hmul2(as_pair<T>(b0), scale_lo[xb]));
            b1 = as_bits<T>(__hmul2(as_pair<T>(b1), scale_hi[xb]));
          }
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) mma::mma_m16n8k16<kBf16>(acc[mt][xb], fa[mt], b0, b1);
        }
      }
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < stages) load_stage(s);
    cp_async_commit();
  }
  for (int s = 0; s < stages; ++s) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (s + kStages - 1 < stages) load_stage(s + kStages - 1);
    cp_async_commit();
    compute_stage(s);
  }
  cp_async_wait<0>();
  __syncthreads();

  // The K-halves of each tile: warps wk = 1 hand their sums to warps wk = 0.
  float* reduce = reinterpret_cast<float*>(smem);
  constexpr int kValues = kMTiles * 8 * 4;
  if (wk == 1) {
#pragma unroll
    for (int i = 0; i < kValues; ++i) reduce[(wn * kValues + i) * 32 + lane] = (&acc[0][0][0])[i];
  }
  __syncthreads();
  if (wk == 0) {
#pragma unroll
    for (int i = 0; i < kValues; ++i) (&acc[0][0][0])[i] += reduce[(wn * kValues + i) * 32 + lane];
  }

  const int g = lane / 4, t = lane % 4;
  auto for_each_pair = [&](auto&& f) {  // f(mt, xb, half of the fragment, row, column)
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int xb = 0; xb < 8; ++xb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const std::int64_t row = m0 + mt * 16 + g + 8 * h;
          if (row < p.m) f(mt, xb, h, row, tile * marlin::kTileN + xb * 8 + 2 * t);
        }
  };

  if (split.splits > 1) {
    if (wk == 0 && tile_ok) {
      for_each_pair([&](int mt, int xb, int h, std::int64_t row, std::int64_t col) {
        *reinterpret_cast<float2*>(split.partials + (blockIdx.z * p.m + row) * p.n + col) =
            make_float2(acc[mt][xb][2 * h], acc[mt][xb][2 * h + 1]);
      });
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      std::int32_t* lock = split.locks + blockIdx.y * gridDim.x + blockIdx.x;
      const int arrived = atomicAdd(lock, 1);
      last_flag = arrived == split.splits - 1;
      if (last_flag) *lock = 0;  // ready for the next call
    }
    __syncthreads();
    if (!last_flag) return;
    __threadfence();
    if (wk == 0 && tile_ok) {
      for_each_pair([&](int mt, int xb, int h, std::int64_t row, std::int64_t col) {
        float2 sum = make_float2(0.0f, 0.0f);
        for (int z = 0; z < split.splits; ++z) {
          const float2 v = __ldcg(reinterpret_cast<const float2*>(split.partials + (z * p.m + row) * p.n + col));
          sum.x += v.x, sum.y += v.y;
        }
        acc[mt][xb][2 * h] = sum.x, acc[mt][xb][2 * h + 1] = sum.y;
      });
    }
  }
  if (wk != 0 || !tile_ok) return;
  T* c = static_cast<T*>(p.c);
  const T* scales = static_cast<const T*>(p.scales);
  for_each_pair([&](int mt, int xb, int h, std::int64_t row, std::int64_t col) {
    float v0 = acc[mt][xb][2 * h], v1 = acc[mt][xb][2 * h + 1];
    if (channelwise) {
      // Columns col and col + 1 sit side by side in the channel-wise permutation.
      v0 *= cast<float>(scales[marlin::channel_scale_pos(col)]);
      v1 *= cast<float>(scales[marlin::channel_scale_pos(col + 1)]);
    }
    *reinterpret_cast<Pair<T>*>(c + row * p.n + col) = pair_of<T>(from_float<T>(v0), from_float<T>(v1));
  });
}

template <typename T, int kBits, int kMTiles>
void launch_marlin(const MarlinGemmParams& p, const MarlinSplit& split, bool act_order, DLDevice device) {
  using namespace mllm_kernel::host;
  const dim3 grid(static_cast<unsigned>(div_ceil(p.n, kBlockN)), static_cast<unsigned>(div_ceil(p.m, kMTiles * 16)),
                  static_cast<unsigned>(split.splits));
  constexpr int kSmem = MarlinSmem<kBits, kMTiles>::kBytes;
  if (act_order) {
    LaunchKernel(grid, kThreads, device, kSmem)(marlin_gemm_kernel<T, kBits, kMTiles, true>, p, split);
  } else {
    LaunchKernel(grid, kThreads, device, kSmem)(marlin_gemm_kernel<T, kBits, kMTiles, false>, p, split);
  }
}

/// partials: float32 [splits * M * N] (empty when splits is 1); locks: int32, at least one per
/// output block (grid x * grid y), zero, and left zero.
template <typename T, int kBits>
void marlin_gemm(tvm::ffi::TensorView a, tvm::ffi::TensorView c, tvm::ffi::TensorView b, tvm::ffi::TensorView scales,
                 tvm::ffi::TensorView zeros, tvm::ffi::TensorView g_idx, tvm::ffi::TensorView partials,
                 tvm::ffi::TensorView locks, std::int64_t size_m, std::int64_t size_n, std::int64_t size_k,
                 std::int64_t m_tiles, std::int64_t splits) {
  using namespace mllm_kernel::host;
  const MarlinGemmParams p =
      check_marlin_gemm<kDLCUDA, T>(a, c, b, scales, zeros, g_idx, kBits, size_m, size_n, size_k);
  RuntimeCheck(p.zeros == nullptr || kBits == 4, "zero points are supported for 4-bit weights only");
  RuntimeCheck(m_tiles == 1 || m_tiles == 2 || m_tiles == 4, "m_tiles must be 1, 2 or 4, got ", m_tiles);
  RuntimeCheck(p.lda % 8 == 0 && reinterpret_cast<std::uintptr_t>(p.a) % 16 == 0,
               "a: rows must start 16-byte aligned (row stride a multiple of 8), got row stride ", p.lda);
  if (p.m == 0) return;
  const std::int64_t steps = size_k / marlin::kTileK;
  RuntimeCheck(splits >= 1 && splits <= steps, "splits must be in [1, ", steps, "], got ", splits);
  MarlinSplit split{nullptr, nullptr, div_ceil(steps, splits), static_cast<int>(splits)};
  const std::int64_t blocks = div_ceil(size_n, kBlockN) * div_ceil(size_m, m_tiles * 16);
  if (splits > 1) {
    SymbolicDevice device;
    device.bind(a.device(), "a");
    (void)TensorMatcher({splits * size_m * size_n})
        .with_dtype<float>()
        .with_device<kDLCUDA>(device)
        .verify(partials, "partials");
    SymbolicSize lock_count{"locks size"};
    (void)TensorMatcher({lock_count}).with_dtype<std::int32_t>().with_device<kDLCUDA>(device).verify(locks, "locks");
    RuntimeCheck(lock_count.unwrap() >= blocks, "locks needs ", blocks, " entries, got ", lock_count.unwrap());
    split.partials = static_cast<float*>(partials.data_ptr());
    split.locks = static_cast<std::int32_t*>(locks.data_ptr());
  }
  const bool act_order = p.g_idx != nullptr && p.groups > 1;
  if (m_tiles == 1) {
    launch_marlin<T, kBits, 1>(p, split, act_order, a.device());
  } else if (m_tiles == 2) {
    launch_marlin<T, kBits, 2>(p, split, act_order, a.device());
  } else {
    launch_marlin<T, kBits, 4>(p, split, act_order, a.device());
  }
}

}  // namespace
