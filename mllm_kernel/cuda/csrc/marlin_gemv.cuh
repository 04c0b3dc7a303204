// The weight-only GEMM for a few rows of activations (decoding) on Marlin-format weights
// (mllm_kernel/marlin.hpp has the format; csrc/marlin_gemm.cuh the operands and the general
// kernel), one module per activation type T and weight type as there:
//   marlin_gemv<T, kBits[, kFp8]>(a, c, b, scales, zeros, g_idx, partials, locks, size_m,
//                                 size_n, size_k, splits, enable_pdl)
// c[M, N] = a[M, K] @ dequant(b) for M <= 8 rows with plain groups, channel-wise scales or GPTQ
// act-order (g_idx, a's columns already in the repack's perm order; no zero points). Decoding
// reads each weight once and does little arithmetic per byte, so its speed is the bytes it keeps
// in flight. A lane's 16 bytes (4-bit; 32 for 8-bit) of a repacked 16 x 64
// tile are exactly its tensor-core fragments of the tile, so each warp loads them straight from
// global memory into registers, kBatch 16-row steps of K at once (4 KB a warp), with no
// shared-memory staging, barriers or copy addressing; the activations' fragments and each
// group's scales come in the same batch. As in the general kernel's swapped path, the
// dequantized weights are the MMA's A operand (exact integers q - zero, each group's float32
// sums scaled once) and the 8 rows of a its B operand. With act-order, a batch whose 16 kBatch
// rows all have one group id (every batch, for a GPTQ checkpoint's g_idx sorted by the repack's
// perm and groups of a multiple of its rows) runs as a plain group; any other batch scales each
// weight by its own row's group.
//
// A block of 8 warps takes 256 columns (four 64-column tiles) over one split of K: warp (wn, wk)
// the tile wn and the K-half wk of the split, whose sums the warps wk = 0 add up. K splits
// across blocks as for the general kernel (csrc/marlin_split.cuh), with the same output blocks
// and counters.
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

constexpr int kGemvWarpsN = 4;
constexpr int kGemvWarpsK = 2;
constexpr int kGemvThreads = 32 * kGemvWarpsN * kGemvWarpsK;
constexpr int kGemvBlockN = kGemvWarpsN * mllm_kernel::marlin::kTileN;
constexpr int kGemvMaxRows = 8;

/// 16-row steps of K a warp loads at once: 4 KB of weights.
constexpr int gemv_batch(int bits) { return 32 / bits; }

/// Two blocks an SM: 16 warps, 64 KB of weights in flight.
template <typename T, int kBits, bool kFp8, bool kActOrder>
__global__ void __launch_bounds__(kGemvThreads, 2) marlin_gemv_kernel(const __grid_constant__ MarlinGemmParams p,
                                                                    const MarlinSplit split) {
  using namespace mllm_kernel::device;
  namespace marlin = mllm_kernel::marlin;
  constexpr int kLaneVecs = kBits / 4;  // 16-byte vectors a lane loads per step (32 values)
  constexpr int kBatch = gemv_batch(kBits);
  constexpr bool kBf16 = std::is_same_v<T, bf16_t>;
  __shared__ float reduce[kGemvWarpsN * 16 * 32];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wn = warp % kGemvWarpsN, wk = warp / kGemvWarpsN;
  const int g = lane / 4, t = lane % 4;
  const int n_tiles = static_cast<int>(p.n / marlin::kTileN);
  const int tile = static_cast<int>(blockIdx.x) * kGemvWarpsN + wn;
  const bool tile_ok = tile < n_tiles;
  const int steps = static_cast<int>(p.k / marlin::kTileK);
  const int row_begin = static_cast<int>(blockIdx.z) * split.rows_per_split;
  // This warp's steps [first, last): the split's K-half wk (the launch makes each half a whole
  // number of batches, so every batch starts at a multiple of kBatch).
  const int half = split.rows_per_split / 2;
  const int first = min(steps, row_begin + wk * half);
  const int last = tile_ok ? min(steps, first + half) : first;
  const bool channelwise = p.groups == 1;  // (never with kActOrder)
  const int group_steps = static_cast<int>(p.group_size / marlin::kTileK);

  const std::int64_t row_vecs = p.n * marlin::kTileK * kBits / 32 / 4;
  const int4* b = reinterpret_cast<const int4*>(p.b) + static_cast<std::int64_t>(tile) * (marlin::tile_words(kBits) / 4) +
                  lane * kLaneVecs;
  // The lane's B fragments: row g of a, K pairs (2t, 2t + 1) and (2t + 8, 2t + 9) of a step, as
  // 32-bit words; rows past M read as zeros.
  const bool a_ok = g < p.m;
  const std::uint32_t* a_row = reinterpret_cast<const std::uint32_t*>(static_cast<const T*>(p.a) + (a_ok ? g : 0) * p.lda) + t;
  const T* scales = static_cast<const T*>(p.scales);
  const T* tile_scales = scales + static_cast<std::int64_t>(tile) * marlin::kTileN + g * 8;  // group 0's, this lane's
  const std::int64_t zero_row = p.n * kBits / 32;
  const std::int64_t zero_col = marlin::zero_point_word(kBits, static_cast<std::int64_t>(tile) * marlin::kTileN) + g;

  // Per 16-column sub-tile j: the C fragments of the current group (unscaled) and the total.
  float gacc[4][4], sacc[1][4][4], gscale[4][2];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) gacc[j][e] = sacc[0][j][e] = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) gscale[j][0] = gscale[j][1] = channelwise ? 1.0f : 0.0f;
  auto fold_group = [&]() {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) sacc[0][j][e] += gscale[j][e / 2] * gacc[j][e], gacc[j][e] = 0.0f;
  };
  // Zero points come with 4-bit weights and never with act-order (the wrapper refuses them).
  const bool zeros = kBits == 4 && !kActOrder && p.zeros != nullptr;
  const T bias = from_float<T>(kBits == 4 ? kBase4<T> + (zeros ? 0.0f : 8.0f) : 0.0f);
  Pair<T> sub[8];  // what 8-column block xb subtracts (4-bit): kBase4 + its zero point or the bias
#pragma unroll
  for (int xb = 0; xb < 8; ++xb) sub[xb] = pair_of<T>(bias, bias);

  if (channelwise && zeros && tile_ok) {
#pragma unroll
    for (int xb = 0; xb < 8; ++xb) {
      sub[xb] = as_pair<T>(zero_point_pair<T>(static_cast<std::uint32_t>(__ldg(p.zeros + zero_col)) >> (4 * marlin::slot_of(4, xb))));
    }
  }

  if (split.pdl) {
    // The first batch's weights are asked of L2 before the previous kernel has finished (a hint,
    // safe whatever that kernel writes), one lane a 128-byte line.
    if (lane % (8 / kLaneVecs) == 0) {
      for (int r = first; r < min(last, first + kBatch); ++r) prefetch_l2(b + r * row_vecs);
    }
    pdl_wait_and_release();
  }

  // Groups are whole batches (the wrapper's condition: group_steps a multiple of kBatch; with
  // act-order, the batches whose rows share one id), so a batch reads its group's scales (and
  // zero points) with its weights when the group is new. Act-order ids come a batch ahead (a
  // 16-byte vector a lane for 4-bit batches of 128 rows, 8 bytes for 8-bit ones), so that the
  // test of a batch's group waits on nothing.
  using Ids = std::conditional_t<kBits == 4, int4, int2>;
  constexpr int kIds = sizeof(Ids) / sizeof(int);
  static_assert(kIds * 32 == kBatch * marlin::kTileK);
  auto load_ids = [&](int r0) {  // (a lane's rows lie in one step: all before last, or none)
    Ids ids{};
    const int row = r0 * marlin::kTileK + lane * kIds;
    if (kActOrder && row < last * marlin::kTileK) ids = __ldg(reinterpret_cast<const Ids*>(p.g_idx + row));
    return ids;
  };
  Ids next_ids = load_ids(first);
  int group = -1;
  for (int r0 = first; r0 < last; r0 += kBatch) {
    int4 w[kBatch][kLaneVecs];
    std::uint32_t act[kBatch][2];
    int4 group_scales = make_int4(0, 0, 0, 0);
    std::uint32_t group_zeros = 0u;
    int batch_group = r0 / group_steps;
    bool one_group = true;
    if constexpr (kActOrder) {
      const Ids ids = next_ids;
      next_ids = load_ids(r0 + kBatch);
      // One group when the ids of all the warp's rows of the batch equal the first.
      const int* id = reinterpret_cast<const int*>(&ids);
      const int first_id = __shfl_sync(0xffffffffu, id[0], 0);
      bool same = true;
#pragma unroll
      for (int i = 0; i < kIds; ++i) same &= id[i] == first_id;
      one_group = __all_sync(0xffffffffu, same || r0 * marlin::kTileK + lane * kIds >= last * marlin::kTileK);
      batch_group = valid_group(p, first_id);
    }
    bool new_group = !channelwise && one_group && batch_group != group;
    if (new_group) {
      group_scales = __ldg(reinterpret_cast<const int4*>(tile_scales + static_cast<std::int64_t>(batch_group) * p.n));
      if (zeros) group_zeros = static_cast<std::uint32_t>(__ldg(p.zeros + batch_group * zero_row + zero_col));
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int r = r0 + u;
      const bool ok = r < last;
#pragma unroll
      for (int v = 0; v < kLaneVecs; ++v) w[u][v] = ok ? load_streaming(b + r * row_vecs + v) : make_int4(0, 0, 0, 0);
      act[u][0] = ok && a_ok ? __ldg(a_row + 8 * r) : 0u;
      act[u][1] = ok && a_ok ? __ldg(a_row + 8 * r + 4) : 0u;
    }
    if (new_group) group = batch_group;
    if (kActOrder && !one_group) {
      // Weights scaled by their rows' groups: the sums so far take the group's scales, and this
      // batch's sums scale 1 (the next batch reads its group anew).
      fold_group();
      group = -1;
#pragma unroll
      for (int j = 0; j < 4; ++j) gscale[j][0] = gscale[j][1] = 1.0f;
    }
    if (new_group) {
      fold_group();
      const T* s = reinterpret_cast<const T*>(&group_scales);
#pragma unroll
      for (int xb = 0; xb < 8; ++xb) {
        gscale[xb / 2][xb % 2] = cast<float>(s[xb]);
        if (zeros) sub[xb] = as_pair<T>(zero_point_pair<T>(group_zeros >> (4 * marlin::slot_of(4, xb))));
      }
    }
    // The batch's MMAs; kScaled: act-order across groups, each weight scaled by its row's group
    // (a loop of its own, so that this rare path's registers do not crowd the common one's).
    auto compute = [&](auto scaled) {
      constexpr bool kScaled = decltype(scaled)::value;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (r0 + u >= last) break;
        const std::uint32_t* q = reinterpret_cast<const std::uint32_t*>(&w[u][0]);
        int row_scales[4];  // the lane's rows 2t, 2t + 1, 2t + 8, 2t + 9: offsets from tile_scales
        if constexpr (kScaled) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int id = valid_group(p, __ldg(p.g_idx + (r0 + u) * marlin::kTileK + 2 * t + e % 2 + e / 2 * 8));
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
            dequant_block<T, kBits, kFp8>(q, xb, sub[xb], sub[xb], frag[h], frag[h + 2]);
            if constexpr (kScaled) {
              const T* s = tile_scales + xb;
              frag[h] = as_bits<T>(__hmul2(as_pair<T>(frag[h]), pair_of<T>(s[row_scales[0]], s[row_scales[1]])));
              frag[h + 2] = as_bits<T>(__hmul2(as_pair<T>(frag[h + 2]), pair_of<T>(s[row_scales[2]], s[row_scales[3]])));
            }
          }
          mma::mma_m16n8k16<kBf16>(gacc[j], frag, act[u][0], act[u][1]);
        }
      }
    };
    if (kActOrder && !one_group) {
      compute(std::integral_constant<bool, kActOrder>{});
    } else {
      compute(std::false_type{});
    }
  }
  fold_group();

  add_k_halves<16>(&sacc[0][0][0], reduce, wn, wk, lane);
  if (wk == 0 && tile_ok) store_swapped<T, 1>(p, split, sacc, static_cast<std::int64_t>(tile) * marlin::kTileN, lane);
  if (split.splits > 1 && split_arrive_last(split)) {
    const int tile0 = static_cast<int>(blockIdx.x) * kGemvWarpsN;
    const int cols = min(kGemvWarpsN, n_tiles - tile0) * marlin::kTileN;
    const std::int64_t col0 = static_cast<std::int64_t>(tile0) * marlin::kTileN;
    // Many splits: a quad a thread with up to 16 splits' partial sums asked at once, which saves
    // round trips to L2 (H100, 16-32 splits: 0.2-1.8 µs faster); fewer: two quads a thread, four
    // splits at a time (up to 11 splits that was as fast or faster, by up to 2 µs at 8 rows).
    if (split.splits >= 16) {
      split_fixup<T, kGemvThreads, 1, 16>(p, split, 0, static_cast<int>(p.m), col0, cols);
    } else {
      split_fixup<T, kGemvThreads>(p, split, 0, static_cast<int>(p.m), col0, cols);
    }
  }
}

/// g_idx, partials, locks, splits and enable_pdl as for marlin_gemm (one output block per 256
/// columns); each split is rounded up to whole batches for both K-halves, which may leave fewer
/// splits than asked. size_m at most 8; without g_idx, groups of a multiple of gemv_batch(kBits)
/// 16-row steps or channel-wise scales; with it, no zero points.
template <typename T, int kBits, bool kFp8 = false>
void marlin_gemv(mllm_kernel::TensorView a, mllm_kernel::TensorView c, mllm_kernel::TensorView b, mllm_kernel::TensorView scales,
                 mllm_kernel::TensorView zeros, mllm_kernel::TensorView g_idx, mllm_kernel::TensorView partials,
                 mllm_kernel::TensorView locks,
                 std::int64_t size_m, std::int64_t size_n, std::int64_t size_k, std::int64_t splits, bool enable_pdl) {
  using namespace mllm_kernel::host;
  namespace marlin = mllm_kernel::marlin;
  const MarlinGemmParams p = check_marlin_gemm<kDLCUDA, T>(a, c, b, scales, zeros, g_idx, kBits, size_m, size_n, size_k);
  static_assert(!kFp8 || kBits == 8, "float8 weights are 8-bit");
  RuntimeCheck(p.zeros == nullptr || kBits == 4, "zero points are supported for 4-bit weights only");
  RuntimeCheck(size_m <= kGemvMaxRows, "marlin_gemv takes at most ", kGemvMaxRows, " rows, got ", size_m);
  RuntimeCheck(p.lda % 2 == 0 && reinterpret_cast<std::uintptr_t>(p.a) % 4 == 0,
               "a: rows must start 4-byte aligned (even row stride), got row stride ", p.lda);
  RuntimeCheck(reinterpret_cast<std::uintptr_t>(p.scales) % 16 == 0 && reinterpret_cast<std::uintptr_t>(p.zeros) % 4 == 0,
               "b_scales must start 16-byte aligned and b_zeros 4-byte aligned");
  constexpr int kBatch = gemv_batch(kBits);
  const bool act_order = p.g_idx != nullptr && p.groups > 1;
  RuntimeCheck(act_order || p.groups == 1 || p.group_size % (kBatch * marlin::kTileK) == 0,
               "marlin_gemv takes groups of a multiple of ", kBatch * marlin::kTileK,
               " rows (or channel-wise scales), got groups of ", p.group_size);
  RuntimeCheck(!act_order || p.zeros == nullptr, "marlin_gemv takes no zero points with g_idx");
  RuntimeCheck(reinterpret_cast<std::uintptr_t>(p.g_idx) % 16 == 0, "g_idx must start 16-byte aligned");
  if (p.m == 0) return;
  const std::int64_t steps = size_k / marlin::kTileK;
  RuntimeCheck(splits >= 1 && splits <= steps, "splits must be in [1, ", steps, "], got ", splits);
  const std::int64_t split_rows = div_ceil(div_ceil(steps, splits), 2 * kBatch) * 2 * kBatch;
  MarlinSplit split{nullptr, nullptr, static_cast<int>(split_rows), static_cast<int>(div_ceil(steps, split_rows)), enable_pdl};
  const std::int64_t blocks = div_ceil(size_n, kGemvBlockN);
  if (splits > 1) bind_split_buffers(split, a, partials, locks, splits, size_m, size_n, blocks);
  const dim3 grid(static_cast<unsigned>(blocks), 1, static_cast<unsigned>(split.splits));
  const auto kernel = act_order ? marlin_gemv_kernel<T, kBits, kFp8, true> : marlin_gemv_kernel<T, kBits, kFp8, false>;
  LaunchKernel(grid, kGemvThreads, a.device()).enable_pdl(enable_pdl)(kernel, p, split);
}

}  // namespace
