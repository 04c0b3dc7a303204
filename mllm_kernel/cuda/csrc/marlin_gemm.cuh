// CUDA weight-only quantized GEMM on Marlin-format weights (mllm_kernel/marlin.hpp has the
// format), one module per activation type T (fp16_t, bf16_t), weight type (integers of kBits 4
// or 8, or with kFp8 float8_e4m3fn bytes) and kernel (kMTiles, kActOrder, kSwap: below), so that
// a first call compiles the one kernel it runs:
//   marlin_gemm<T, kBits, kFp8, kMTiles, kActOrder, kSwap>(a, c, b, scales, zeros, g_idx,
//       partials, locks, size_m, size_n, size_k, m_tiles, splits, enable_pdl)
//   marlin_blocks_per_sm<T, kBits, kFp8, kMTiles, kActOrder, kSwap>(device_id)
// c[M, N] = a[M, K] @ dequant(b), dequant = (q - zero) * scale with the zero point from `zeros`
// (AWQ) or the type's bias (8 or 128), the scale of the value's group (rows of K grouped
// consecutively, or by g_idx for GPTQ act-order, whose activations the caller has permuted).
// float8 weights dequantize to value * 2^-8 (fp16) or 2^-120 (bf16) times scale, serving code
// having folded that power of two into the scales (marlin_values.cuh, fp8_pair).
//
// A block of 8 warps computes 16 * m_tiles rows x 256 columns over a range of K: warp (wn, wk)
// owns the 64-column tile wn and every other 16-row step of K (wk), so each step is one warp's
// 512-byte (4-bit) slice of a repacked tile: one 16-byte shared-memory load a lane, which
// dequantizes straight into m16n8k16 B fragments, read one step ahead of their use. Weights,
// activations and each group's scales and zero points stream through a 4-stage cp.async
// pipeline of 8 steps a stage (3 stages where a block has 99 KB: marlin_stages), so the inner
// loop never waits on global memory (with act-order the rows' g_idx stream instead, and a
// group's scales are read when a step reaches it); the two K-halves are summed through shared
// memory at the end. Up to 8 rows of a with plain groups (kSwap), the
// operands swap: the dequantized weights are the MMA's A operand and a its B operand, which
// halves the MMAs, and the weights stay exact integers, scaled once per group in float32.
// When the grid would not fill the GPU (small M), K is split across blocks
// (csrc/marlin_split.cuh). Launched with PDL, a block asks L2 for its first stages' weights
// before waiting for the previous kernel, whose tail then hides the pipeline's first DRAM
// latency.
#pragma once

#include <mllm_kernel/async_copy.cuh>
#include <mllm_kernel/marlin.hpp>
#include <mllm_kernel/mma.cuh>
#include <mllm_kernel/runtime.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include "marlin_split.cuh"
#include "marlin_values.cuh"

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>
#include <type_traits>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::host::MarlinGemmParams;
using mllm_kernel::host::valid_group;
namespace marlin = mllm_kernel::marlin;

constexpr int kThreads = 256;
constexpr int kWarpsN = 4;
constexpr int kWarpsK = 2;
constexpr int kBlockN = kWarpsN * marlin::kTileN;
constexpr int kStageRows = 8;  // 16-row steps of K per pipeline stage
constexpr int kWarpSteps = kStageRows / kWarpsK;  // steps a warp computes per stage

/// Pipeline stages of the kernels built for virtual architecture `arch` (__CUDA_ARCH__ / 10):
/// four, or three where a block has 99 KB of shared memory (sm_86, sm_89, sm_120, sm_121), which
/// four stages of the 4-bit 16-row tile (102,416 bytes) overfill. MLLM_MARLIN_STAGES, defined at
/// build time, sets every architecture's (the tests run three-stage kernels on the GPU they have).
constexpr int marlin_stages(int arch) {
#ifdef MLLM_MARLIN_STAGES
  (void)arch;
  return MLLM_MARLIN_STAGES;
#else
  return arch == 86 || arch == 89 || arch == 120 || arch == 121 ? 3 : 4;
#endif
}
// The kernels' own stage count; the host pass compiles no kernel body, and the launch asks the
// kernel's binary for its architecture (marlin_smem_bytes).
#ifdef __CUDA_ARCH__
constexpr int kStages = marlin_stages(__CUDA_ARCH__ / 10);
#else
constexpr int kStages = marlin_stages(0);
#endif
constexpr int kSwapRows = 8;  // rows of a the swapped path takes (the MMA's B operand has 8 columns)

template <int kBits, int kMTiles>
struct MarlinSmem {
  static constexpr int kTileVecs = marlin::tile_words(kBits) / 4;  // int4 per tile row
  static constexpr int kBVecs = kStageRows * kWarpsN * kTileVecs;
  static constexpr int kARowVecs = kStageRows * marlin::kTileK / 8;  // one row of a stage's A
  static constexpr int kAVecs = kMTiles * 16 * kARowVecs;
  // A group's scales (and zero points) for the block's columns, one slot a 16-row step; only
  // the slots where a group starts (and slot 0) are filled. Act-order kernels keep the stage's
  // g_idx there instead.
  static constexpr int kScaleVecs = kWarpsN * marlin::kTileN * 2 / 16;
  // Zero points come with 4-bit weights only (marlin_gemm refuses them otherwise): 8-bit
  // kernels keep no slots for them, which lets their 16-row tile fit the 163 KB a block has on
  // sm_80 and sm_87.
  static constexpr int kZeroVecs = kBits == 4 ? kWarpsN * marlin::kTileN * kBits / 32 / 4 : 0;
  static constexpr int kGroupVecs = kStageRows * (kScaleVecs + kZeroVecs);
  static constexpr int kStageVecs = kBVecs + kAVecs + kGroupVecs;
  static constexpr int kReduceBytes = kWarpsN * kMTiles * 32 * 32 * 4;
  /// The dynamic shared memory of a kernel with `stages` pipeline stages (the split-K fix-up's
  /// flag, 16 bytes of static shared memory, counted in).
  static constexpr int bytes(int stages) {
    const int pipeline = stages * kStageVecs * 16;
    return (pipeline > kReduceBytes ? pipeline : kReduceBytes) + 16;
  }
};

/// The scales (8, of this lane's columns in the tile: 16 j + 8 half + lane / 4) and zero-point
/// word of one group.
template <typename T, int kBits>
struct GroupParams {
  T scale[8];
  std::uint32_t zeros;
};

template <typename T, int kBits>
__device__ __forceinline__ GroupParams<T, kBits> load_group_params(const MarlinGemmParams& p, std::int64_t group,
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

template <typename T, int kBits, int kMTiles, bool kActOrder, bool kSwap, bool kFp8>
__global__ void __launch_bounds__(kThreads) marlin_gemm_kernel(const __grid_constant__ MarlinGemmParams p,
                                                                const MarlinSplit split) {
  using namespace mllm_kernel::device;
  using Smem = MarlinSmem<kBits, kMTiles>;
  constexpr int kTileVecs = Smem::kTileVecs;
  constexpr int kLaneWords = kBits;  // 32 values a lane
  constexpr bool kBf16 = std::is_same_v<T, bf16_t>;
  static_assert(!kSwap || (kMTiles == 1 && !kActOrder), "the swapped path is for up to 8 rows and plain groups");
  extern __shared__ int4 smem[];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wn = warp % kWarpsN, wk = warp / kWarpsN;
  // Steps (16-row runs of K), tiles and stage rows fit in 32 bits; only global offsets are 64-bit.
  const int n_tiles = static_cast<int>(p.n / marlin::kTileN);
  const int tile0 = static_cast<int>(blockIdx.x) * kWarpsN;
  const int tile = tile0 + wn;
  const bool tile_ok = tile < n_tiles;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.y) * kMTiles * 16;
  const int steps = static_cast<int>(p.k / marlin::kTileK);
  const int row_begin = static_cast<int>(blockIdx.z) * split.rows_per_split;
  const int rows = max(0, min(steps - row_begin, split.rows_per_split));  // steps of this split
  const int stages = (rows + kStageRows - 1) / kStageRows;
  const bool channelwise = p.groups == 1;
  const int group_steps = static_cast<int>(p.group_size / marlin::kTileK);
  const T* a = static_cast<const T*>(p.a);
  const T* scales = static_cast<const T*>(p.scales);

  // Each thread copies the same places of every stage: its sources are found once here and
  // advance by a stage's rows per stage, so that address arithmetic costs few instructions
  // beside the dequantization.
  constexpr int kBRowVecs = kWarpsN * kTileVecs;  // one 16-row step of the block's tiles
  constexpr int kBRowStep = kThreads / kBRowVecs;  // steps between a thread's copies
  constexpr int kBIters = Smem::kBVecs / kThreads;
  static_assert(kThreads % kBRowVecs == 0 && Smem::kBVecs % kThreads == 0);
  const std::int64_t row_vecs = p.n * marlin::kTileK * kBits / 32 / 4;
  const int b_row = threadIdx.x / kBRowVecs;
  const bool b_ok = tile0 + static_cast<int>(threadIdx.x) / kTileVecs % kWarpsN < n_tiles;
  const int4* b_next = reinterpret_cast<const int4*>(p.b) + (row_begin + b_row) * row_vecs + tile0 * kTileVecs +
                      threadIdx.x % kBRowVecs;
  // A: rows a_row + 16 it of the block, 16-byte column a_col of a stage's 128 values.
  constexpr int kAIters = kMTiles;
  static_assert(Smem::kAVecs == kAIters * kThreads && Smem::kARowVecs == 16);
  const int a_row = threadIdx.x / Smem::kARowVecs, a_col = threadIdx.x % Smem::kARowVecs;
  const int a_dst = a_row * Smem::kARowVecs + (a_col ^ (a_row % 8));  // (a_row + 16 it) % 8 == a_row % 8
  const T* a_next = a + (m0 + a_row) * p.lda + static_cast<std::int64_t>(row_begin) * marlin::kTileK + a_col * 8;
  int a_rows_ok = 0;  // bit it: row a_row + 16 it exists
#pragma unroll
  for (int it = 0; it < kAIters; ++it) a_rows_ok |= (m0 + a_row + 16 * it < p.m) << it;
  // Group copies: slot g_slot (a step of the stage), vector g_vec of its scales then zero points;
  // g_group is the group of that step's row and g_next the row where the next group starts.
  constexpr int kSlotVecs = Smem::kScaleVecs + Smem::kZeroVecs;
  constexpr int kGIters = (kStageRows * kSlotVecs + kThreads - 1) / kThreads;
  constexpr int kGidxVecs = kStageRows * marlin::kTileK / 4;  // act-order: the stage's rows' g_idx
  static_assert(kGidxVecs <= Smem::kGroupVecs && kGidxVecs <= kThreads);
  const int slot_vecs = Smem::kScaleVecs + (p.zeros != nullptr ? Smem::kZeroVecs : 0);
  int g_group[kGIters], g_next[kGIters];
  int g_src[kGIters];  // offset of the vector in group 0, in scale or zero-point elements
  bool g_ok[kGIters];
#pragma unroll
  for (int it = 0; it < kGIters; ++it) {
    const int i = threadIdx.x + it * kThreads, g_slot = i / kSlotVecs, g_vec = i % kSlotVecs;
    const bool scale = g_vec < Smem::kScaleVecs;
    const int z = g_vec - Smem::kScaleVecs;
    g_ok[it] = !kActOrder && !channelwise && g_slot < kStageRows && g_vec < slot_vecs &&
               (scale ? tile0 + g_vec / (Smem::kScaleVecs / kWarpsN) : tile0 + z / max(Smem::kZeroVecs / kWarpsN, 1)) < n_tiles;
    g_src[it] = scale ? tile0 * marlin::kTileN + g_vec * 8 : tile0 * marlin::kTileN * kBits / 32 + z * 4;
    g_group[it] = g_ok[it] ? (row_begin + g_slot) / group_steps : 0;
    g_next[it] = (g_group[it] + 1) * group_steps;
  }

  auto load_stage = [&](int s) {
    int4* stage = smem + (s % kStages) * Smem::kStageVecs;
    const int stage_row = s * kStageRows;  // relative to row_begin
    const int4* b_src = b_next;
#pragma unroll
    for (int it = 0; it < kBIters; ++it, b_src += kBRowStep * row_vecs) {
      if (b_ok && stage_row + b_row + it * kBRowStep < rows) cp_async16(stage + threadIdx.x + it * kThreads, b_src);
    }
    b_next += kStageRows * row_vecs;
    int4* stage_a = stage + Smem::kBVecs;
    const bool a_cols_ok = stage_row + a_col / 2 < rows;
#pragma unroll
    for (int it = 0; it < kAIters; ++it) {
      const bool valid = a_cols_ok && (a_rows_ok >> it & 1);
      cp_async16_or_zero(stage_a + a_dst + it * 16 * Smem::kARowVecs, valid ? a_next + 16 * it * p.lda : a, valid);
    }
    a_next += kStageRows * marlin::kTileK;
    // The scales (and zero points) of the first step's group and of each group that starts in
    // this stage, so that the inner loop never waits on a global load.
#pragma unroll
    for (int it = 0; it < kGIters; ++it) {
      if (!g_ok[it]) continue;
      const int i = threadIdx.x + it * kThreads, g_slot = i / kSlotVecs;
      const int row = row_begin + stage_row + g_slot;
      while (row >= g_next[it]) ++g_group[it], g_next[it] += group_steps;
      if (stage_row + g_slot >= rows || (g_slot > 0 && row != g_next[it] - group_steps)) continue;
      if (i % kSlotVecs < Smem::kScaleVecs) {
        cp_async16(stage_a + Smem::kAVecs + i, scales + (g_group[it] * p.n + g_src[it]));
      } else {
        cp_async16(stage_a + Smem::kAVecs + i, p.zeros + (g_group[it] * (p.n * kBits / 32) + g_src[it]));
      }
    }
    if constexpr (kActOrder) {
      // Act-order: the group ids (g_idx) of the stage's rows, in the slots plain groups' scales
      // take otherwise.
      if (threadIdx.x < kGidxVecs) {
        const bool valid = stage_row + static_cast<int>(threadIdx.x) / 4 < rows;
        const std::int32_t* src =
            p.g_idx + (static_cast<std::int64_t>(row_begin + stage_row) * marlin::kTileK + threadIdx.x * 4);
        cp_async16_or_zero(stage_a + Smem::kAVecs + threadIdx.x, valid ? src : p.g_idx, valid);
      }
    }
  };

  float acc[kMTiles][8][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int x = 0; x < 8; ++x)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][x][e] = 0.0f;
  // The swapped path (kSwap): per 16-column sub-tile j, the lane's output values at columns
  // 16 j + g and 16 j + 8 + g (g = lane / 4) and rows 2t, 2t + 1 (t = lane % 4), as the
  // m16n8k16 C fragment; `sacc` the total, `gacc` the current group's unscaled sums.
  // Channel-wise scales are applied at the very end, so there the one "group" has scale 1.
  float sacc[4][4], gacc[4][4], gscale[4][2];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) sacc[j][e] = gacc[j][e] = 0.0f;
    gscale[j][0] = gscale[j][1] = channelwise ? 1.0f : 0.0f;
  }
  // Adds the group's sums, scaled per column in float32, to the total.
  auto fold_group = [&]() {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) sacc[j][e] += gscale[j][e / 2] * gacc[j][e], gacc[j][e] = 0.0f;
  };

  const T bias = from_float<T>(kBits == 4 ? kBase4<T> + (p.zeros ? 0.0f : 8.0f) : 0.0f);

  // Per 8-column block x: what to subtract and the scale, for the fragment's rows (2t, 2t + 1)
  // in `lo` and (2t + 8, 2t + 9) in `hi`; kept across steps of one group. Without zero points
  // what to subtract is the type's bias, set once.
  Pair<T> sub_lo[8], sub_hi[8], scale_lo[8], scale_hi[8];
#pragma unroll
  for (int xb = 0; xb < 8; ++xb) sub_lo[xb] = sub_hi[xb] = pair_of<T>(bias, bias);
  auto use_group = [&](const GroupParams<T, kBits>& g, bool scaled) {
    if (kBits == 4 && p.zeros) {
#pragma unroll
      for (int xb = 0; xb < 8; ++xb) sub_lo[xb] = sub_hi[xb] = as_pair<T>(zero_point_pair<T>(g.zeros >> (4 * marlin::slot_of(4, xb))));
    }
    if (scaled) {
#pragma unroll
      for (int xb = 0; xb < 8; ++xb) {
        if constexpr (kSwap) {
          gscale[xb / 2][xb % 2] = cast<float>(g.scale[xb]);
        } else {
          scale_lo[xb] = scale_hi[xb] = pair_of<T>(g.scale[xb], g.scale[xb]);
        }
      }
    }
  };
  if (split.pdl) {
    // The weights of the first stages are asked of L2 before the previous kernel has finished
    // (a hint, safe whatever that kernel writes), so the pipeline's first loads overlap its tail.
    if (threadIdx.x % 8 == 0 && b_ok) {  // one thread per 128-byte line
      const int4* b_src = b_next;
      for (int r = b_row; r < min(rows, (kStages - 1) * kStageRows); r += kBRowStep, b_src += kBRowStep * row_vecs) {
        prefetch_l2(b_src);
      }
    }
    pdl_wait_and_release();
  }
  if (!kActOrder && channelwise && tile_ok) use_group(load_group_params<T, kBits>(p, 0, tile, lane, false), false);
  // The compute side's group: the step where the next one starts (the first step always reads).
  int next_group = row_begin / max(group_steps, 1) * group_steps;
  // Act-order: the group whose scales are in scale_lo/hi for every row of a step (-1: none).
  int act_group = -1;

  // The B fragment of 8-column block xb of a step, rows (2t, 2t + 1) in lo and (2t + 8, 2t + 9)
  // in hi: q - zero, scaled when `scaled`.
  auto dequant = [&](const std::uint32_t(&q)[kLaneWords], int xb, bool scaled, std::uint32_t& lo, std::uint32_t& hi) {
    dequant_block<T, kBits, kFp8>(q, xb, sub_lo[xb], sub_hi[xb], lo, hi);
    if (scaled) {
      lo = as_bits<T>(__hmul2(as_pair<T>(lo), scale_lo[xb]));
      hi = as_bits<T>(__hmul2(as_pair<T>(hi), scale_hi[xb]));
    }
  };

  auto compute_stage = [&](int s) {
    const int4* stage = smem + (s % kStages) * Smem::kStageVecs;
    const int4* stage_a = stage + Smem::kBVecs;
    const int stage_row = s * kStageRows;
    // Fragments are read one step ahead of the math that uses them (two register buffers), so
    // shared-memory latency overlaps the previous step's dequantization and MMAs.
    std::uint32_t frag_a[2][kMTiles][4], frag_q[2][kLaneWords];
    auto fetch = [&](int x) {
      const int r = wk + x * kWarpsK, buf = x % 2;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        // Matrices (rows 0-7, 8-15) x (K halves 0, 1): in the A fragment's order, or for the
        // swapped path with rows 0-7's two halves first, side by side as its B fragment.
        const int ar = kSwap ? lane % 8 + lane / 16 * 8 : mt * 16 + lane % 16;
        const int half = kSwap ? lane / 8 % 2 : lane / 16;
        mma::ldmatrix_x4_b16(frag_a[buf][mt], stage_a + ar * Smem::kARowVecs + ((r * 2 + half) ^ (ar % 8)));
      }
#pragma unroll
      for (int v = 0; v < kBits / 4; ++v) {
        const int4 w = stage[(r * kWarpsN + wn) * kTileVecs + lane * (kBits / 4) + v];
        frag_q[buf][4 * v] = w.x, frag_q[buf][4 * v + 1] = w.y, frag_q[buf][4 * v + 2] = w.z, frag_q[buf][4 * v + 3] = w.w;
      }
    };
    fetch(0);
#pragma unroll
    for (int x = 0; x < kWarpSteps; ++x) {
      if (x + 1 < kWarpSteps) fetch(x + 1);
      const int r = wk + x * kWarpsK;
      if (!tile_ok || stage_row + r >= rows) continue;
      const int row = row_begin + stage_row + r;
      const std::uint32_t(&fa)[kMTiles][4] = frag_a[x % 2];
      const std::uint32_t(&q)[kLaneWords] = frag_q[x % 2];
      if constexpr (kActOrder) {
        // The lane's rows of the step: 2t, 2t + 1, 2t + 8 and 2t + 9. When the step's 16 rows
        // share a group (every step with g_idx sorted by the caller's perm and the whole of K),
        // its scales are read once and kept while the group lasts; otherwise row by row.
        const int* step_groups = reinterpret_cast<const int*>(stage + Smem::kBVecs + Smem::kAVecs) +
                                 r * marlin::kTileK + 2 * (lane % 4);
        int groups[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) groups[e] = valid_group(p, step_groups[e % 2 + e / 2 * 8]);
        const int first = __shfl_sync(0xffffffffu, groups[0], 0);
        const bool one = groups[0] == first && groups[1] == first && groups[2] == first && groups[3] == first;
        if (__all_sync(0xffffffffu, one)) {
          if (first != act_group) {
            act_group = first;
            use_group(load_group_params<T, kBits>(p, first, tile, lane, true), true);
          }
        } else {
          act_group = -1;
          GroupParams<T, kBits> g[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) g[e] = load_group_params<T, kBits>(p, groups[e], tile, lane, true);
#pragma unroll
          for (int xb = 0; xb < 8; ++xb) {
            T sub[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int slot = marlin::slot_of(kBits, xb);
              sub[e] = p.zeros ? from_float<T>(kBase4<T> + static_cast<float>(g[e].zeros >> (kBits * slot) & 0xfu))
                               : bias;
            }
            sub_lo[xb] = pair_of<T>(sub[0], sub[1]);
            sub_hi[xb] = pair_of<T>(sub[2], sub[3]);
            scale_lo[xb] = pair_of<T>(g[0].scale[xb], g[1].scale[xb]);
            scale_hi[xb] = pair_of<T>(g[2].scale[xb], g[3].scale[xb]);
          }
        }
      } else if (!channelwise && row >= next_group) {
        // A new group (a warp-uniform test): read it from the stage slot where it starts, or
        // from slot 0 when it started before this stage.
        if constexpr (kSwap) fold_group();
        while (row >= next_group) next_group += group_steps;
        const int start = next_group - group_steps - (row_begin + stage_row);
        const int4* slot = stage + Smem::kBVecs + Smem::kAVecs + max(start, 0) * kSlotVecs;
        GroupParams<T, kBits> g;
        *reinterpret_cast<int4*>(g.scale) = slot[wn * (Smem::kScaleVecs / kWarpsN) + lane / 4];
        g.zeros = p.zeros ? reinterpret_cast<const std::uint32_t*>(slot + Smem::kScaleVecs)
                                [wn * (marlin::kTileN * kBits / 32) + lane / 4]
                          : 0u;
        use_group(g, true);
      }
      if constexpr (kSwap) {
        // The weights are the MMA's A operand (16 columns x 16 rows of K: the repacked tile's
        // B-fragment registers, reordered) and the activations its B operand (rows 0..7 of the
        // stage's A): half the MMAs, and the dequantized values stay exact integers (q - zero),
        // so the group scale is applied once per group to the float32 sums instead of to
        // every weight.
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          std::uint32_t w[4];  // (column g, rows 2t..), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..)
#pragma unroll
          for (int half = 0; half < 2; ++half) dequant(q, 2 * j + half, false, w[half], w[half + 2]);
          mma::mma_m16n8k16<kBf16>(gacc[j], w, fa[0][0], fa[0][1]);
        }
      } else {
#pragma unroll
        for (int xb = 0; xb < 8; ++xb) {
          std::uint32_t b0, b1;
          dequant(q, xb, !channelwise, b0, b1);
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
  if constexpr (kSwap) fold_group();

  add_k_halves<kSwap ? 16 : kMTiles * 8 * 4>(kSwap ? &sacc[0][0] : &acc[0][0][0], reinterpret_cast<float*>(smem), wn, wk,
                                             lane);

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
  // (the swapped path has one block of rows: m0 is 0)
  const auto& swapped_sums = *reinterpret_cast<const float(*)[1][4][4]>(&sacc);

  if (split.splits > 1) {
    if (wk == 0 && tile_ok) {
      if constexpr (kSwap) {
        store_swapped<T, 1>(p, split, swapped_sums, static_cast<std::int64_t>(tile) * marlin::kTileN, lane);
      } else {
        for_each_pair([&](int mt, int xb, int h, std::int64_t row, std::int64_t col) {
          *reinterpret_cast<float2*>(split.partials + (blockIdx.z * p.m + row) * p.n + col) =
              make_float2(acc[mt][xb][2 * h], acc[mt][xb][2 * h + 1]);
        });
      }
    }
    if (!split_arrive_last(split)) return;
    split_fixup<T, kThreads>(p, split, m0, static_cast<int>(min(static_cast<std::int64_t>(kMTiles * 16), p.m - m0)),
                             static_cast<std::int64_t>(tile0) * marlin::kTileN, min(kWarpsN, n_tiles - tile0) * marlin::kTileN);
    return;
  }
  if (wk != 0 || !tile_ok) return;
  T* c = static_cast<T*>(p.c);
  if constexpr (kSwap) {
    store_swapped<T, 1>(p, split, swapped_sums, static_cast<std::int64_t>(tile) * marlin::kTileN, lane);
    return;
  }
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

/// Whether a call of m rows on m_tiles-tile blocks runs the swapped kernel (kSwap).
constexpr bool marlin_swaps(std::int64_t m_tiles, std::int64_t m, bool act_order) {
  return m_tiles == 1 && m <= kSwapRows && !act_order;
}

/// The one kernel a module holds: kMTiles 16-row tiles a block, act-order or not, operands
/// swapped or not (each its own module, so that a first call compiles only what it runs).
template <typename T, int kBits, bool kFp8, int kMTiles, bool kActOrder, bool kSwap>
constexpr auto marlin_kernel() {
  static_assert(kMTiles == 1 || kMTiles == 2 || kMTiles == 4, "16-row tiles 1, 2 or 4 at a time");
  static_assert(!kSwap || (kMTiles == 1 && !kActOrder), "the swapped kernel takes one 16-row tile, no act-order");
  static_assert(!kFp8 || kBits == 8, "float8 weights are 8-bit");
  return marlin_gemm_kernel<T, kBits, kMTiles, kActOrder, kSwap, kFp8>;
}

/// The dynamic shared memory `kernel` takes on the current device `device_id`: its binary's
/// stages, as its virtual architecture set them (marlin_stages).
template <int kBits, int kMTiles, typename Kernel>
int marlin_smem_bytes(Kernel kernel, int device_id) {
  return MarlinSmem<kBits, kMTiles>::bytes(
      marlin_stages(mllm_kernel::host::runtime::get_kernel_virtual_arch(kernel, device_id)));
}

/// Blocks of this module's kernel that one SM of GPU device_id holds at once, as its registers
/// and shared memory allow (0 when a block cannot have its shared memory): the caller splits K
/// for one wave of them.
template <typename T, int kBits, bool kFp8, int kMTiles, bool kActOrder, bool kSwap>
std::int64_t marlin_blocks_per_sm(std::int64_t device_id) {
  using namespace mllm_kernel::host;
  detail::DeviceGuard guard(static_cast<int>(device_id));
  const auto kernel = marlin_kernel<T, kBits, kFp8, kMTiles, kActOrder, kSwap>();
  const int smem = marlin_smem_bytes<kBits, kMTiles>(kernel, static_cast<int>(device_id));
  if (smem > runtime::get_available_dynamic_smem_per_block(static_cast<int>(device_id))) return 0;
  RuntimeDeviceCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  return runtime::get_blocks_per_sm(kernel, kThreads, smem);
}

/// The kernels are instantiated for 16-row tiles 1, 2 and 4 at a time only.
inline void check_m_tiles(std::int64_t m_tiles) {
  mllm_kernel::host::RuntimeCheck(m_tiles == 1 || m_tiles == 2 || m_tiles == 4, "m_tiles must be 1, 2 or 4, got ",
                                  m_tiles);
}

/// partials: float32 [splits * M * N] (empty when splits is 1); locks: int32, at least one per
/// output block (grid x * grid y), zero, and left zero. enable_pdl: launch with programmatic
/// dependent launch where the GPU has it (docs/pdl.md).
template <typename T, int kBits, bool kFp8, int kMTiles, bool kActOrder, bool kSwap>
void marlin_gemm(mllm_kernel::TensorView a, mllm_kernel::TensorView c, mllm_kernel::TensorView b, mllm_kernel::TensorView scales,
                 mllm_kernel::TensorView zeros, mllm_kernel::TensorView g_idx, mllm_kernel::TensorView partials,
                 mllm_kernel::TensorView locks, std::int64_t size_m, std::int64_t size_n, std::int64_t size_k,
                 std::int64_t m_tiles, std::int64_t splits, bool enable_pdl) {
  using namespace mllm_kernel::host;
  const MarlinGemmParams p =
      check_marlin_gemm<kDLCUDA, T>(a, c, b, scales, zeros, g_idx, kBits, size_m, size_n, size_k);
  check_m_tiles(m_tiles);
  const bool act_order = p.g_idx != nullptr && p.groups > 1;
  const bool swap = marlin_swaps(m_tiles, size_m, act_order);
  RuntimeCheck(m_tiles == kMTiles && act_order == kActOrder && swap == kSwap, "this marlin_gemm module runs ", kMTiles,
               "-tile blocks", kActOrder ? " with act-order" : "", kSwap ? ", swapped" : "", "; the call needs ",
               m_tiles, "-tile blocks", act_order ? " with act-order" : "", swap ? ", swapped" : "");
  RuntimeCheck(p.lda % 8 == 0 && reinterpret_cast<std::uintptr_t>(p.a) % 16 == 0,
               "a: rows must start 16-byte aligned (row stride a multiple of 8), got row stride ", p.lda);
  RuntimeCheck(reinterpret_cast<std::uintptr_t>(p.scales) % 16 == 0 && reinterpret_cast<std::uintptr_t>(p.zeros) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(p.g_idx) % 16 == 0,
               "b_scales, b_zeros and g_idx must start 16-byte aligned");
  if (p.m == 0) return;
  const std::int64_t steps = size_k / marlin::kTileK;
  RuntimeCheck(splits >= 1 && splits <= steps, "splits must be in [1, ", steps, "], got ", splits);
  MarlinSplit split{nullptr, nullptr, static_cast<int>(div_ceil(steps, splits)), static_cast<int>(splits), enable_pdl};
  const std::int64_t blocks = div_ceil(size_n, kBlockN) * div_ceil(size_m, m_tiles * 16);
  if (splits > 1) bind_split_buffers(split, a, partials, locks, splits * size_m * size_n, blocks);
  const auto kernel = marlin_kernel<T, kBits, kFp8, kMTiles, kActOrder, kSwap>();
  const int smem = marlin_smem_bytes<kBits, kMTiles>(kernel, a.device().device_id);
  const int available = runtime::get_available_dynamic_smem_per_block(a.device().device_id);
  RuntimeCheck(smem <= available, "the kernel for ", kBits, "-bit weights on ", kMTiles * 16, "-row tiles needs ",
               smem, " bytes of shared memory a block; this GPU's blocks have ", available);
  const dim3 grid(static_cast<unsigned>(div_ceil(p.n, kBlockN)), static_cast<unsigned>(div_ceil(p.m, kMTiles * 16)),
                  static_cast<unsigned>(split.splits));
  LaunchKernel(grid, kThreads, a.device(), smem).enable_pdl(split.pdl)(kernel, p, split);
}

}  // namespace
