// The weight-only GEMM for a few rows of activations (decoding) on Marlin-format weights
// (mllm_kernel/marlin.hpp has the format; csrc/marlin_gemm.cuh the operands and the general
// kernel), one module per activation type T and weight type as there, and act-order or not:
//   marlin_gemv<T, kBits, kFp8, kActOrder>(a, c, b, scales, zeros, g_idx, partials, locks,
//                                          size_m, size_n, size_k, splits, enable_pdl)
// c[M, N] = a[M, K] @ dequant(b) for M <= 16 rows with plain groups, channel-wise scales or GPTQ
// act-order (g_idx, a's columns already in the repack's perm order; no zero points). Decoding
// reads each weight once and does little arithmetic per byte, so its speed is the bytes it keeps
// in flight while it computes, and the few instructions it spends on each. Each warp streams its
// range of K through a ring of stages in its own shared memory (cp.async, no block barriers): a
// stage holds 2 KB of weights (4 16-row steps of 4-bit weights, 2 of 8-bit ones), the
// activations' rows for those steps and the group's scales and zero points, and the warp
// computes one stage while the next ones load. A lane's 16 bytes (4-bit; 32 for 8-bit) of a
// repacked 16 x 64 tile are exactly its tensor-core fragments, so each lane copies and reads back
// its own. As in the general kernel's swapped path, the dequantized weights are the MMA's A
// operand (exact integers, each group's float32 sums scaled once) and a's rows its B operand, 8
// rows an MMA. With act-order, a stage whose rows all have one group id (every stage, for a GPTQ
// checkpoint's g_idx sorted by the repack's perm and groups of a multiple of its rows) runs as a
// plain group; any other stage scales each weight by its own row's group.
//
// A block of 8 warps takes one 64-column tile over one split of K, an eighth of the split a
// warp; the warps add up their sums in shared memory. Where the tiles leave SMs idle, K splits
// across blocks as for the general kernel (csrc/marlin_split.cuh), one output block and counter a
// tile: the fix-up costs about as much as a split saves, so the wrapper splits only narrow layers.
#pragma once

#include <mllm_kernel/async_copy.cuh>
#include <mllm_kernel/cache_hint.cuh>
#include <mllm_kernel/marlin.hpp>
#include <mllm_kernel/mma.cuh>
#include <mllm_kernel/pdl.cuh>
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

using mllm_kernel::host::MarlinGemmParams;
using mllm_kernel::host::valid_group;

constexpr int kGemvWarps = 8;
constexpr int kGemvThreads = 32 * kGemvWarps;
constexpr int kGemvMaxRows = 16;

/// 16-row steps of K in a stage of a warp's ring: 2 KB of weights.
constexpr int gemv_stage_steps(int bits) { return 16 / bits; }

/// One stage of a warp's ring in shared memory, for kRowBlocks blocks of 8 rows of a.
template <int kBits, int kRowBlocks>
struct GemvStage {
  static constexpr int kSteps = gemv_stage_steps(kBits);
  static constexpr int kLaneVecs = kBits / 4;  // 16-byte vectors of a lane a step
  static constexpr int kRowWords = kSteps * 8;  // 32-bit words of a row of a in the stage
  /// Three stages, two in flight while the warp computes one: a fourth (8 rows of a) was slower
  /// on the H100 and the H200 and at no Llama-3-8B shape faster (docs/tuning/marlin.md).
  static constexpr int kStages = 3;
  int4 w[kSteps][32 * kLaneVecs];  // step u: lane l's vectors at [u][l * kLaneVecs + v]
  // Row r of a, word i at [r][i ^ 4 (r % 8)]: the swizzle spreads the 8 rows a fragment load
  // reads over all 32 banks, and keeps 16-byte chunks whole.
  std::uint32_t a[8 * kRowBlocks][32];
  int4 scales[8];  // the group's 64 scales of the warp's tile, 8 a lane g
  std::uint32_t zeros[8];  // the group's zero-point words, one a lane g
  int group;  // the stage's group (act-order: -1 when its rows span several)
  static __device__ __forceinline__ int a_word(int r, int i) { return i ^ ((r & 7) << 2); }
};

template <int kBits, int kRowBlocks>
constexpr int gemv_smem_bytes() {
  return kGemvWarps * GemvStage<kBits, kRowBlocks>::kStages * static_cast<int>(sizeof(GemvStage<kBits, kRowBlocks>));
}

template <typename T, int kBits, bool kFp8, bool kActOrder, int kRowBlocks>
__global__ void __launch_bounds__(kGemvThreads, 2) marlin_gemv_kernel(const __grid_constant__ MarlinGemmParams p,
                                                                    const MarlinSplit split) {
  using namespace mllm_kernel::device;
  namespace marlin = mllm_kernel::marlin;
  using Stage = GemvStage<kBits, kRowBlocks>;
  constexpr int kSteps = Stage::kSteps, kLaneVecs = Stage::kLaneVecs, kStages = Stage::kStages;
  constexpr int kRowWords = Stage::kRowWords;
  constexpr bool kBf16 = std::is_same_v<T, bf16_t>;
  extern __shared__ int4 gemv_smem[];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  Stage* ring = reinterpret_cast<Stage*>(gemv_smem) + warp * kStages;
  const int tile = static_cast<int>(blockIdx.x);
  const int steps = static_cast<int>(p.k / marlin::kTileK);
  const int row_begin = static_cast<int>(blockIdx.z) * split.rows_per_split;
  // This warp's steps [first, last): its eighth of the split (the launch makes each a whole
  // number of stages, so every stage starts at a multiple of kSteps).
  const int part = split.rows_per_split / kGemvWarps;
  const int first = min(steps, row_begin + warp * part);
  const int last = min(steps, first + part);
  const bool channelwise = p.groups == 1;  // (never with kActOrder)
  const int group_steps = static_cast<int>(p.group_size / marlin::kTileK);
  const int rows = static_cast<int>(p.m);

  const std::int64_t row_vecs = p.n * marlin::kTileK * kBits / 32 / 4;
  const int4* b = reinterpret_cast<const int4*>(p.b) + static_cast<std::int64_t>(tile) * (marlin::tile_words(kBits) / 4) +
                  lane * kLaneVecs;
  const std::uint32_t* a_words = static_cast<const std::uint32_t*>(p.a);
  const std::int64_t a_row_words = p.lda / 2;
  const T* tile_scales = static_cast<const T*>(p.scales) + static_cast<std::int64_t>(tile) * marlin::kTileN;
  const std::int64_t zero_row = p.n * kBits / 32;
  const std::int32_t* tile_zeros = p.zeros + marlin::zero_point_word(kBits, static_cast<std::int64_t>(tile) * marlin::kTileN);
  // Zero points come with 4-bit weights and never with act-order (the wrapper refuses them).
  const bool zeros = kBits == 4 && !kActOrder && p.zeros != nullptr;

  // Rows of a past M read as zeros (their MMA columns are never stored, but stay finite).
  for (int r = rows; r < 8 * kRowBlocks; ++r) {
    for (int s = 0; s < kStages; ++s) ring[s].a[r][lane] = 0u;
  }

  // 4-bit weights with bf16 activations enter the MMAs as 128 + q, exact, and each group's sums
  // take off (128 + zero point) times the group's sums of a's rows, which one more MMA a step
  // (by a matrix of ones) gathers: half the dequantization's instructions. fp16 would enter them
  // as 1024 + q, whose cancellation takes more bits than fp16's output can spare, so fp16 (and
  // 8-bit weights, which do not fit under bf16's exponent) subtract the zero point from each value.
  constexpr bool kFold = kBits == 4 && kBf16;
  // Per 8-row block rb of a and 16-column sub-tile j: the C fragments of the current group
  // (unscaled) and the total; per rb, the group's sums of a's rows (for kFold).
  float gacc[kRowBlocks][4][4], sacc[kRowBlocks][4][4], gsum[kRowBlocks][4], gscale[4][2];
#pragma unroll
  for (int rb = 0; rb < kRowBlocks; ++rb) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) gacc[rb][j][e] = sacc[rb][j][e] = 0.0f;
#pragma unroll
    for (int e = 0; e < 4; ++e) gsum[rb][e] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) gscale[j][0] = gscale[j][1] = channelwise ? 1.0f : 0.0f;
  const T bias = from_float<T>(kBits == 4 ? kBase4<T> + (zeros ? 0.0f : 8.0f) : 0.0f);
  // What 8-column block xb subtracts (4-bit): kBase4 + its zero point or the bias, as a pair and
  // (kFold) as a float.
  Pair<T> sub[8];
  float sub_f[8];
  auto set_sub = [&](int xb, Pair<T> value) { sub[xb] = value, sub_f[xb] = __low2float(value); };
#pragma unroll
  for (int xb = 0; xb < 8; ++xb) set_sub(xb, pair_of<T>(bias, bias));
  if (channelwise && zeros) {
    const auto word = static_cast<std::uint32_t>(__ldg(tile_zeros + g));
#pragma unroll
    for (int xb = 0; xb < 8; ++xb) set_sub(xb, as_pair<T>(zero_point_pair<T>(word >> (4 * marlin::slot_of(4, xb)))));
  }
  // Stages computed since the sums were last folded into the totals. kFold folds every
  // kFoldStages stages (128 rows) whatever the group (channel-wise scales: all of the warp's K),
  // since the 128 offset costs the float32 sums bits in proportion to their length.
  int unfolded = 0;
  constexpr int kFoldStages = 128 / (kSteps * marlin::kTileK);
  auto fold_group = [&]() {
    if (unfolded == 0) return;  // (nothing summed since)
    unfolded = 0;
#pragma unroll
    for (int rb = 0; rb < kRowBlocks; ++rb) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = kFold ? gacc[rb][j][e] - sub_f[2 * j + e / 2] * gsum[rb][e] : gacc[rb][j][e];
          sacc[rb][j][e] += gscale[j][e / 2] * v, gacc[rb][j][e] = 0.0f;
        }
#pragma unroll
      for (int e = 0; e < 4; ++e) gsum[rb][e] = 0.0f;
    }
  };

  if (split.pdl) {
    // The first stages' weights are asked of L2 before the previous kernel has finished (a hint,
    // safe whatever that kernel writes), one lane a 128-byte line.
    if (lane % (8 / kLaneVecs) == 0) {
      for (int r = first; r < min(last, first + (kStages - 1) * kSteps); ++r) prefetch_l2(b + r * row_vecs);
    }
    pdl_wait_and_release();
  }

  // Act-order ids come by cp.async, kIdsAhead stages ahead of the stage they are for, into a ring
  // of their own (kIds a lane, each lane reading back its own; a lane's rows lie in one step: all
  // before last, or none). Stage j is issued once the copies of stage j - kStages are waited for
  // (two stages before the loop, then one as each stage's turn comes), so with its ids in that
  // stage's copy group the test of its group waits on nothing. Ids loaded into registers a stage
  // ahead made it wait for them, which one block an SM cannot hide (a register queue deeper than
  // one does not help: moving a register waits for its load).
  constexpr int kIds = kSteps * marlin::kTileK / 32;
  using Ids = std::conditional_t<kIds == 2, int2, int>;
  static_assert(kIds == 1 || kIds == 2);
  constexpr int kIdsAhead = kStages;
  __shared__ Ids ids_ring[kActOrder ? kGemvWarps : 1][kIdsAhead + 1][32];
  int ids_slot = 0;  // stage j's ids are in slot j % (kIdsAhead + 1)
  auto copy_ids = [&](int r0, int at) {
    const int row = r0 * marlin::kTileK + lane * kIds;
    if (row >= last * marlin::kTileK) return;
    if constexpr (kIds == 2) {
      cp_async8(&ids_ring[warp][at][lane], p.g_idx + row);
    } else {
      cp_async4(&ids_ring[warp][at][lane], p.g_idx + row);
    }
  };
  if constexpr (kActOrder) {
#pragma unroll
    for (int j = 0; j < kIdsAhead; ++j) copy_ids(first + j * kSteps, j);
    cp_async_commit();
    cp_async_wait<0>();
  }

  // Where the next stage to issue starts: the lane's weights, its words of a's rows and, for plain
  // groups, the group and the step that ends it. a's rows come 16 bytes a lane where they are
  // 16-byte aligned (a contiguous a), else 4: copy_words words of row copy_row, rows_per_copy
  // rows a copy instruction (16 rows of a are as many bytes as the warp's weights: the fewer
  // copies, the fewer instructions a stage), through L1, since the SM's other block reads the
  // same rows.
  const int4* w_next = b + static_cast<std::int64_t>(first) * row_vecs;
  const bool a_vec = p.lda % 8 == 0 && reinterpret_cast<std::uintptr_t>(p.a) % 16 == 0;
  const int copy_words = a_vec ? 4 : 1;
  const int lanes_per_row = kRowWords / copy_words, rows_per_copy = 32 / lanes_per_row;
  const int copy_row = lane / lanes_per_row, copy_word = lane % lanes_per_row * copy_words;
  const std::uint32_t* a_next = a_words + copy_row * a_row_words + first * 8 + copy_word;
  const std::int64_t a_copy_stride = rows_per_copy * a_row_words;
  int issue_group = channelwise || kActOrder ? -1 : first / group_steps;
  int group_end = (issue_group + 1) * group_steps;

  // Each weight is read once: its lines go first from L2 (cp_async16_stream).
  const std::uint64_t stream = l2_evict_first();
  // Starts the copies of the stage of steps [r0, r0 + kSteps) into `st` (nothing at or past
  // last); r0 runs through the warp's stages in order.
  auto issue = [&](Stage& st, int r0) {
    if (r0 >= last) return;
    if (r0 + kSteps <= last) {
#pragma unroll
      for (int u = 0; u < kSteps; ++u)
#pragma unroll
        for (int v = 0; v < kLaneVecs; ++v) {
          cp_async16_stream(&st.w[u][lane * kLaneVecs + v], w_next + u * row_vecs + v, stream);
        }
      const std::uint32_t* src = a_next;
      for (int r = copy_row; r < rows; r += rows_per_copy, src += a_copy_stride) {
        std::uint32_t* dst = &st.a[r][Stage::a_word(r, copy_word)];
        if (a_vec) {
          cp_async16_cached_or_zero(dst, src, true);
        } else {
          cp_async4(dst, src);
        }
      }
    } else {
      // The end of K: steps past last read as zeros, so that the stage's MMAs need no test of
      // their step (zero activations times finite weights).
#pragma unroll
      for (int u = 0; u < kSteps; ++u) {
        const bool ok = r0 + u < last;
#pragma unroll
        for (int v = 0; v < kLaneVecs; ++v) {
          cp_async16_stream_or_zero(&st.w[u][lane * kLaneVecs + v], ok ? w_next + u * row_vecs + v : b, ok, stream);
        }
      }
      const bool ok = r0 + copy_word / 8 < last;  // (a lane's words lie in one step)
      const std::uint32_t* src = a_next;
      for (int r = copy_row; r < rows; r += rows_per_copy, src += a_copy_stride) {
        std::uint32_t* dst = &st.a[r][Stage::a_word(r, copy_word)];
        if (a_vec) {
          cp_async16_cached_or_zero(dst, ok ? src : a_words, ok);
        } else if (ok) {
          cp_async4(dst, src);
        } else {
          *dst = 0u;
        }
      }
    }
    w_next += kSteps * row_vecs;
    a_next += kSteps * 8;
    if (channelwise) return;
    int group;
    if constexpr (kActOrder) {
      const Ids ids = ids_ring[warp][ids_slot][lane];
      const int ahead_slot = ids_slot == 0 ? kIdsAhead : ids_slot - 1;  // the previous stage's, read
      copy_ids(r0 + kIdsAhead * kSteps, ahead_slot);
      ids_slot = ids_slot == kIdsAhead ? 0 : ids_slot + 1;
      // One group when the ids of all the stage's rows equal the first.
      const int* id = reinterpret_cast<const int*>(&ids);
      const int first_id = __shfl_sync(0xffffffffu, id[0], 0);
      bool same = true;
#pragma unroll
      for (int i = 0; i < kIds; ++i) same &= id[i] == first_id;
      const bool one_group = __all_sync(0xffffffffu, same || r0 * marlin::kTileK + lane * kIds >= last * marlin::kTileK);
      group = one_group ? valid_group(p, first_id) : -1;
    } else {
      // (stages never straddle a group: groups are whole stages)
      if (r0 >= group_end) ++issue_group, group_end += group_steps;
      group = issue_group;
    }
    if (lane == 0) st.group = group;
    if (group >= 0 && lane < 8) {
      cp_async16(&st.scales[lane], tile_scales + static_cast<std::int64_t>(group) * p.n + lane * 8);
      if (zeros) cp_async4(&st.zeros[lane], tile_zeros + group * zero_row + lane);
    }
  };

  // The stage's MMAs; kScaled: act-order across groups, each weight scaled by its row's group
  // (a loop of its own, so that this rare path's registers do not crowd the common one's; its
  // steps not unrolled, since unrolled they spilled the common path's registers at 9-16 rows).
  const std::uint32_t one = as_bits<T>(pair_of<T>(from_float<T>(1.0f), from_float<T>(1.0f)));
  const std::uint32_t kOnes[4] = {one, one, one, one};
  auto compute = [&](const Stage& st, int r0, auto scaled) {
    constexpr bool kScaled = decltype(scaled)::value;
#pragma unroll(kScaled ? 1 : kSteps)
    for (int u = 0; u < kSteps; ++u) {
      int4 w[kLaneVecs];
#pragma unroll
      for (int v = 0; v < kLaneVecs; ++v) w[v] = st.w[u][lane * kLaneVecs + v];
      const std::uint32_t* q = reinterpret_cast<const std::uint32_t*>(w);
      // The lane's B fragments: row g of each row block, K pairs (2t, 2t + 1) and (2t + 8, 2t + 9).
      std::uint32_t act[kRowBlocks][2];
#pragma unroll
      for (int rb = 0; rb < kRowBlocks; ++rb) {
        act[rb][0] = st.a[8 * rb + g][Stage::a_word(g, 8 * u + t)];
        act[rb][1] = st.a[8 * rb + g][Stage::a_word(g, 8 * u + t + 4)];
      }
      int row_scales[4];  // the lane's rows 2t, 2t + 1, 2t + 8, 2t + 9: offsets from tile_scales
      if constexpr (kScaled) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = (r0 + u) * marlin::kTileK + 2 * t + e % 2 + e / 2 * 8;
          const int id = r0 + u < last ? valid_group(p, __ldg(p.g_idx + row)) : 0;
          row_scales[e] = id * static_cast<int>(p.n);
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // (column g, rows 2t..), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..) of sub-tile j
        std::uint32_t frag[4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int xb = 2 * j + h;
          if constexpr (kFold && !kScaled) {
            const std::uint32_t w4 = q[xb / 2] >> (8 * (xb % 2));
            frag[h] = nibble_pair<T>(w4), frag[h + 2] = nibble_pair<T>(w4 >> 4);
          } else {
            dequant_block<T, kBits, kFp8>(q, xb, sub[xb], sub[xb], frag[h], frag[h + 2]);
          }
          if constexpr (kScaled) {
            const T* s = tile_scales + g * 8 + xb;
            frag[h] = as_bits<T>(__hmul2(as_pair<T>(frag[h]), pair_of<T>(s[row_scales[0]], s[row_scales[1]])));
            frag[h + 2] = as_bits<T>(__hmul2(as_pair<T>(frag[h + 2]), pair_of<T>(s[row_scales[2]], s[row_scales[3]])));
          }
        }
#pragma unroll
        for (int rb = 0; rb < kRowBlocks; ++rb) mma::mma_m16n8k16<kBf16>(gacc[rb][j], frag, act[rb][0], act[rb][1]);
      }
      if constexpr (kFold && !kScaled) {
#pragma unroll
        for (int rb = 0; rb < kRowBlocks; ++rb) mma::mma_m16n8k16<kBf16>(gsum[rb], kOnes, act[rb][0], act[rb][1]);
      }
    }
  };

  // kStages - 1 stages in flight while the warp computes one.
  int issued = first;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s, issued += kSteps) {
    issue(ring[s], issued);
    cp_async_commit();
  }
  int group = -1;
  int slot = 0;
  for (int r0 = first; r0 < last; r0 += kSteps) {
    issue(ring[slot == 0 ? kStages - 1 : slot - 1], issued);
    cp_async_commit();
    issued += kSteps;
    cp_async_wait<kStages - 1>();
    __syncwarp();
    const Stage& st = ring[slot];
    const int stage_group = channelwise ? -1 : st.group;
    if (kActOrder && stage_group < 0) {
      // Weights scaled by their rows' groups: the sums so far take the group's scales, and this
      // stage's sums scale 1 (the next stage reads its group anew).
      fold_group();
      group = -1;
#pragma unroll
      for (int j = 0; j < 4; ++j) gscale[j][0] = gscale[j][1] = 1.0f;
      compute(st, r0, std::integral_constant<bool, kActOrder>{});
      ++unfolded;
    } else {
      if (!channelwise && stage_group != group) {
        fold_group();
        group = stage_group;
        const int4 packed = st.scales[g];
        const T* s = reinterpret_cast<const T*>(&packed);
        const std::uint32_t word = zeros ? st.zeros[g] : 0u;
#pragma unroll
        for (int xb = 0; xb < 8; ++xb) {
          gscale[xb / 2][xb % 2] = cast<float>(s[xb]);
          if (zeros) set_sub(xb, as_pair<T>(zero_point_pair<T>(word >> (4 * marlin::slot_of(4, xb)))));
        }
      }
      compute(st, r0, std::false_type{});
      if (++unfolded == kFoldStages && kFold) fold_group();
    }
    __syncwarp();
    slot = slot == kStages - 1 ? 0 : slot + 1;
  }
  fold_group();
  cp_async_wait<0>();

  // The warps add up their sums through their rings, idle now, and share the stores: value i of
  // lane l is, for 8-row block rb, sub-tile j and C fragment entry e (i = 16 rb + 4 j + e), row
  // 8 rb + 2 (l % 4) + e % 2 and column 16 j + 8 (e / 2) + l / 4 of the tile. With K split, into
  // split blockIdx.z's partial sums; else into c, channel-wise scales applied.
  constexpr int kValues = kRowBlocks * 16;
  {
    float* mine = reinterpret_cast<float*>(ring);
    const float* sums = &sacc[0][0][0];
#pragma unroll
    for (int i = 0; i < kValues; ++i) mine[i * 32 + lane] = sums[i];
  }
  __syncthreads();
  const T* scales = static_cast<const T*>(p.scales);
  T* c = static_cast<T*>(p.c);
  const std::int64_t col0 = static_cast<std::int64_t>(tile) * marlin::kTileN;
  for (int x = threadIdx.x; x < kValues * 32; x += kGemvThreads) {
    const int i = x / 32, l = x % 32;
    const int row = 8 * (i / 16) + 2 * (l % 4) + i % 2;
    if (row >= rows) continue;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < kGemvWarps; ++w) v += reinterpret_cast<const float*>(reinterpret_cast<const Stage*>(gemv_smem) + w * kStages)[x];
    const std::int64_t col = col0 + 16 * (i / 4 % 4) + 8 * (i % 4 / 2) + l / 4;
    if (split.splits > 1) {
      split.partials[(blockIdx.z * p.m + row) * p.n + col] = v;
    } else {
      if (channelwise) v *= cast<float>(scales[marlin::channel_scale_pos(col)]);
      c[row * p.n + col] = from_float<T>(v);
    }
  }
  if (split.splits > 1 && split_arrive_last(split)) {
    // Many splits: a quad a thread with up to 16 splits' partial sums asked at once, which saves
    // round trips to L2; fewer: two quads a thread, four splits at a time.
    if (split.splits >= 16) {
      split_fixup<T, kGemvThreads, 1, 16>(p, split, 0, rows, col0, marlin::kTileN);
    } else {
      split_fixup<T, kGemvThreads>(p, split, 0, rows, col0, marlin::kTileN);
    }
  }
}

/// g_idx, partials, locks, splits and enable_pdl as for marlin_gemm (one output block per 64
/// columns); each split is rounded up to whole stages for each of the 8 warps, which may leave
/// fewer splits than asked. size_m at most 16; without g_idx, groups of a multiple of a stage's rows
/// (16 gemv_stage_steps(kBits)) or channel-wise scales; with it, no zero points.
template <typename T, int kBits, bool kFp8, bool kActOrder>
void marlin_gemv(mllm_kernel::TensorView a, mllm_kernel::TensorView c, mllm_kernel::TensorView b, mllm_kernel::TensorView scales,
                 mllm_kernel::TensorView zeros, mllm_kernel::TensorView g_idx, mllm_kernel::TensorView partials,
                 mllm_kernel::TensorView locks,
                 std::int64_t size_m, std::int64_t size_n, std::int64_t size_k, std::int64_t splits, bool enable_pdl) {
  using namespace mllm_kernel::host;
  namespace marlin = mllm_kernel::marlin;
  const MarlinGemmParams p = check_marlin_gemm<kDLCUDA, T>(a, c, b, scales, zeros, g_idx, kBits, size_m, size_n, size_k);
  static_assert(!kFp8 || kBits == 8, "float8 weights are 8-bit");
  RuntimeCheck(size_m <= kGemvMaxRows, "marlin_gemv takes at most ", kGemvMaxRows, " rows, got ", size_m);
  RuntimeCheck(p.lda % 2 == 0 && reinterpret_cast<std::uintptr_t>(p.a) % 4 == 0,
               "a: rows must start 4-byte aligned (even row stride), got row stride ", p.lda);
  RuntimeCheck(reinterpret_cast<std::uintptr_t>(p.scales) % 16 == 0 && reinterpret_cast<std::uintptr_t>(p.zeros) % 4 == 0,
               "b_scales must start 16-byte aligned and b_zeros 4-byte aligned");
  constexpr int kSteps = gemv_stage_steps(kBits);
  const bool act_order = p.g_idx != nullptr && p.groups > 1;
  RuntimeCheck(act_order || p.groups == 1 || p.group_size % (kSteps * marlin::kTileK) == 0,
               "marlin_gemv takes groups of a multiple of ", kSteps * marlin::kTileK,
               " rows (or channel-wise scales), got groups of ", p.group_size);
  RuntimeCheck(!act_order || p.zeros == nullptr, "marlin_gemv takes no zero points with g_idx");
  RuntimeCheck(act_order == kActOrder, "this marlin_gemv module is built ", kActOrder ? "for" : "without",
               " act-order (g_idx with more than one group); the call ", act_order ? "has it" : "has none");
  RuntimeCheck(reinterpret_cast<std::uintptr_t>(p.g_idx) % 16 == 0, "g_idx must start 16-byte aligned");
  if (p.m == 0) return;
  const std::int64_t steps = size_k / marlin::kTileK;
  RuntimeCheck(splits >= 1 && splits <= steps, "splits must be in [1, ", steps, "], got ", splits);
  const std::int64_t split_rows = div_ceil(div_ceil(steps, splits), kGemvWarps * kSteps) * kGemvWarps * kSteps;
  MarlinSplit split{nullptr, nullptr, static_cast<int>(split_rows), static_cast<int>(div_ceil(steps, split_rows)), enable_pdl};
  const std::int64_t blocks = size_n / marlin::kTileN;
  if (splits > 1) bind_split_buffers(split, a, partials, locks, splits * size_m * size_n, blocks);
  const dim3 grid(static_cast<unsigned>(blocks), 1, static_cast<unsigned>(split.splits));
  const auto launch = [&](auto kernel, int smem) {
    LaunchKernel(grid, kGemvThreads, a.device(), smem).enable_pdl(enable_pdl)(kernel, p, split);
  };
  if (size_m <= 8) {
    constexpr int kSmem = gemv_smem_bytes<kBits, 1>();
    launch(marlin_gemv_kernel<T, kBits, kFp8, kActOrder, 1>, kSmem);
  } else {
    constexpr int kSmem = gemv_smem_bytes<kBits, 2>();
    launch(marlin_gemv_kernel<T, kBits, kFp8, kActOrder, 2>, kSmem);
  }
}

}  // namespace
