// Per-target body of the CPU weight-only GEMM on Marlin-format 4-bit weights (format:
// mllm_kernel/marlin.hpp), the CPU side of gptq_marlin_gemm:
//
//   c[m, n] = sum_k a[m, k] * (q[k, n] - zero[g, n]) * scale[g, n],   g the group of row k
//
// The repacked words are read in their stored order, never unpacked into a matrix: within a
// 16 x 64 tile, word w (of 128) holds 8 values of columns 16 (w % 4) + w / 16 and that + 8, at
// rows 2 q, 2 q + 1, 2 q + 8, 2 q + 9 with q = w % 16 / 4. A vector of words therefore meets a
// fixed pattern of rows, and each of its 8 nibbles is one multiply-add with the activation
// pattern for that nibble's row: sum_k a[k] * q[k, n] accumulates per (word, half of the word)
// in float32, and the zero point and scale come in once a group, when the group ends:
//   total[n] += scale[g, n] * (sum over the group of a * q - zero[g, n] * sum over the group of a)
// (each column's 4 words, one per q, are added then). Groups are runs of K rows with one group
// id (g_idx, or consecutive rows of group_size); a group that changes inside a 16-row block
// splits that block by masking rows, so any g_idx gives the right sum, and sorted ids (serving
// code sorts them) cost one pass a block.
//
// A call computes a range of 64-column tiles for up to 4 rows of a at a time (the nibbles are
// converted once for them), in panels of up to 128 tiles whose sums (1 KiB a tile and row) stay
// in L2 while the panel's slice of every 16-row block streams past: a thread's slice of a block
// is one contiguous run. Rows of a are staged in float32 first. Included once per SIMD target
// by Highway's foreach_target.
#ifndef MLLM_KERNEL_CPU_MARLIN_GEMM_PARAMS_
#define MLLM_KERNEL_CPU_MARLIN_GEMM_PARAMS_

#include <cstdint>

namespace mllm_kernel::cpu {

/// Tiles of 64 columns whose partial sums a thread keeps at once (a long contiguous run of each
/// block for the prefetchers; sums of 128 KiB a row of a).
inline constexpr std::int64_t kMarlinPanelTiles = 128;
/// Rows of a that share one pass over the weights.
inline constexpr int kMarlinRows = 4;

}  // namespace mllm_kernel::cpu

#endif  // MLLM_KERNEL_CPU_MARLIN_GEMM_PARAMS_

#include <mllm_kernel/cpu/simd_io-inl.hpp>
#include <mllm_kernel/marlin.hpp>

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

#if HWY_TARGET != HWY_SCALAR
using D4 = hn::FixedTag<float, 4>;  // one group's column sums, four at a time
#endif

/// Words of a repacked tile, and the period of their row pattern.
inline constexpr int kMarlinTileWords = 128;
inline constexpr int kMarlinPatternWords = 16;
/// How many 16-row blocks ahead the weights are prefetched.
inline constexpr std::int64_t kMarlinPrefetchBlocks = 2;

/// Adds the products of one 16-row block of tile `words` into `sums` for `rows` rows of a
/// (row r's sums at sums + r * sums_stride: [2][128], the low and high half of each word).
/// patterns + r * 8 * period holds row r's activations as nibble s of each word position meets
/// them, scaled by 2^(-4 s): nibble s is converted in place, as (word & 0xf << 4 s), which is
/// its value times 2^(4 s) exactly, so no shift is needed and the product is exact as before
/// (the top nibble, which would read as negative, is shifted down and meets an unscaled pattern).
HWY_INLINE void MarlinTileBlock(DF df, const std::int32_t* HWY_RESTRICT words, int rows,
                                const float* HWY_RESTRICT patterns, std::size_t period, float* HWY_RESTRICT sums,
                                std::size_t sums_stride) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const std::size_t lanes = hn::Lanes(df);
  const auto value = [&](auto w, std::uint32_t mask) HWY_ATTR {
    return hn::ConvertTo(df, hn::BitCast(di, hn::And(w, hn::Set(du, mask))));
  };
  for (std::size_t o = 0; o < kMarlinTileWords; o += lanes) {
    const auto w = hn::BitCast(du, hn::LoadU(di, words + o));
    const VF v0 = value(w, 0xfu), v1 = value(w, 0xf0u), v2 = value(w, 0xf00u), v3 = value(w, 0xf000u);
    const VF v4 = value(w, 0xf0000u), v5 = value(w, 0xf00000u), v6 = value(w, 0xf000000u);
    const VF v7 = hn::ConvertTo(df, hn::BitCast(di, hn::ShiftRight<28>(w)));  // the top nibble, unsigned
    for (int r = 0; r < rows; ++r) {
      const float* x = patterns + r * 8 * period + o % period;
      float* s = sums + r * sums_stride;
      // Nibble s holds value 0, 2, 4, 6, 1, 3, 5, 7 of the word: value v is in half v / 4.
      // Two chains a half, so that no multiply-add waits on the one before it for long.
      VF lo = hn::MulAdd(v0, hn::LoadU(df, x), hn::LoadU(df, s + o));
      VF hi = hn::MulAdd(v2, hn::LoadU(df, x + 2 * period), hn::LoadU(df, s + kMarlinTileWords + o));
      VF lo2 = hn::Mul(v1, hn::LoadU(df, x + period));
      VF hi2 = hn::Mul(v3, hn::LoadU(df, x + 3 * period));
      lo = hn::MulAdd(v4, hn::LoadU(df, x + 4 * period), lo);
      lo2 = hn::MulAdd(v5, hn::LoadU(df, x + 5 * period), lo2);
      hi = hn::MulAdd(v6, hn::LoadU(df, x + 6 * period), hi);
      hi2 = hn::MulAdd(v7, hn::LoadU(df, x + 7 * period), hi2);
      hn::StoreU(hn::Add(lo, lo2), df, s + o);
      hn::StoreU(hn::Add(hi, hi2), df, s + kMarlinTileWords + o);
    }
  }
}

/// c[rows, tiles] for Marlin-format 4-bit weights over the 16-row blocks [block_begin,
/// block_end) of K; see the top of this file. With `partial` (float32 [M, N]) the sums of those
/// blocks go there instead of to c, for a caller that splits K and adds the parts.
template <typename T>
void MarlinGemm(const host::MarlinGemmParams& p, std::int64_t tile_begin, std::int64_t tile_end,
                std::int64_t block_begin, std::int64_t block_end, float* partial) {
  const DF df;
  const std::size_t period = std::max<std::size_t>(kMarlinPatternWords, hn::Lanes(df));
  const std::int64_t row_words = p.n * marlin::kTileK * 4 / 32;
  const bool channelwise = p.groups == 1;
  const T* scales = static_cast<const T*>(p.scales);
  constexpr std::size_t kSumsStride = kMarlinPanelTiles * 2 * kMarlinTileWords;
  constexpr std::size_t kTotalsStride = kMarlinPanelTiles * marlin::kTileN;
  const std::size_t staged_stride = static_cast<std::size_t>(p.k) + hn::Lanes(df);  // a vector to spare
  auto staged = hwy::AllocateAligned<float>(kMarlinRows * staged_stride);
  auto patterns = hwy::AllocateAligned<float>(kMarlinRows * 8 * period);
  auto sums = hwy::AllocateAligned<float>(kMarlinRows * kSumsStride);
  auto totals = hwy::AllocateAligned<float>(kMarlinRows * kTotalsStride);
  auto panel_scales = hwy::AllocateAligned<float>(kTotalsStride + hn::Lanes(df));
  auto panel_zeros = hwy::AllocateAligned<float>(kTotalsStride);
  float group_sum[kMarlinRows];  // sum of each row of a over the group's rows so far
  std::int64_t ids[marlin::kTileK];
  // Nibble s of a word: its row pattern (0..3: rows 2q, 2q + 1, 2q + 8, 2q + 9) and scale.
  constexpr int kNibbleRow[8] = {0, 2, 0, 2, 1, 3, 1, 3};

  for (std::int64_t m0 = 0; m0 < p.m; m0 += kMarlinRows) {
    const int rows = static_cast<int>(std::min<std::int64_t>(kMarlinRows, p.m - m0));
    for (int r = 0; r < rows; ++r) {
      const T* a = static_cast<const T*>(p.a) + (m0 + r) * p.lda;
      float* dst = staged.get() + r * staged_stride;
      ForEachChunk(df, static_cast<std::size_t>(p.k), [&](std::size_t i, std::size_t count) HWY_ATTR {
        hn::StoreU(Load(df, a + i, count), df, dst + i);
      });
    }
    for (std::int64_t panel = tile_begin; panel < tile_end; panel += kMarlinPanelTiles) {
      const int tiles = static_cast<int>(std::min<std::int64_t>(kMarlinPanelTiles, tile_end - panel));
      std::fill_n(sums.get(), rows * kSumsStride, 0.0f);
      std::fill_n(totals.get(), rows * kTotalsStride, 0.0f);
      std::int64_t group = -1;
      std::fill_n(group_sum, kMarlinRows, 0.0f);
      // Adds the group's sums into the totals with its zero points and scales, and clears them.
      // Totals are kept in the permuted order of a grouped scale row (column c of a tile at
      // 8 (c % 8) + c / 8): for the 16 words 16 u .. 16 u + 15 of a half h, summing the 4 words
      // of each column (q = 0..3, stride 4) gives columns 16 j + u + 8 h for j = 0..3, whose
      // scales sit at 8 u + 2 j + h: the two halves' sums, interleaved, meet 8 consecutive scales.
      const auto close_group = [&]() {
        if (group < 0) return;
        const std::size_t width = static_cast<std::size_t>(tiles) * marlin::kTileN;
        const T* row = scales + group * p.n + panel * marlin::kTileN;
        if (!channelwise) {
          ForEachChunk(df, width, [&](std::size_t i, std::size_t count) HWY_ATTR {
            hn::StoreU(Load(df, row + i, count), df, panel_scales.get() + i);
          });
        } else {
          for (std::size_t i = 0; i < width; ++i) {  // once a call: the channel-wise order to the grouped one
            const std::int64_t n = panel * marlin::kTileN + static_cast<std::int64_t>(i);
            panel_scales[marlin::grouped_scale_pos(n) - panel * marlin::kTileN] =
                hn::GetLane(Load(df, scales + marlin::channel_scale_pos(n), 1));
          }
        }
        for (std::size_t i = 0; i < width; ++i) {
          // Zero point words follow the grouped order: 8 positions a word, interleaved.
          const std::uint32_t word =
              p.zeros != nullptr ? static_cast<std::uint32_t>(p.zeros[group * (p.n / 8) + panel * 8 + i / 8]) : 0u;
          panel_zeros[i] = p.zeros != nullptr ? static_cast<float>(word >> (4 * marlin::slot_of(4, i % 8)) & 0xfu) : 8.0f;
        }
        for (int r = 0; r < rows; ++r) {
          for (int t = 0; t < tiles; ++t) {
            const float* g = sums.get() + r * kSumsStride + t * 2 * kMarlinTileWords;
            float* total = totals.get() + r * kTotalsStride + t * marlin::kTileN;
            const float* scale = panel_scales.get() + t * marlin::kTileN;
            const float* zero = panel_zeros.get() + t * marlin::kTileN;
#if HWY_TARGET == HWY_SCALAR
            for (int u = 0; u < 8; ++u) {
              for (int i = 0; i < 8; ++i) {  // position 8 u + i = 2 j + h
                const float* w = g + (i % 2) * kMarlinTileWords + 16 * u + i / 2;
                const int at = 8 * u + i;
                total[at] += scale[at] * (w[0] + w[4] + w[8] + w[12] - zero[at] * group_sum[r]);
              }
            }
#else
            const D4 d4;
            const auto gs = hn::Set(d4, group_sum[r]);
            for (int u = 0; u < 8; ++u) {
              const float* g0 = g + 16 * u;
              const float* g1 = g0 + kMarlinTileWords;
              const auto h0 = hn::Add(hn::Add(hn::LoadU(d4, g0), hn::LoadU(d4, g0 + 4)),
                                      hn::Add(hn::LoadU(d4, g0 + 8), hn::LoadU(d4, g0 + 12)));
              const auto h1 = hn::Add(hn::Add(hn::LoadU(d4, g1), hn::LoadU(d4, g1 + 4)),
                                      hn::Add(hn::LoadU(d4, g1 + 8), hn::LoadU(d4, g1 + 12)));
              const auto dot_lo = hn::InterleaveLower(d4, h0, h1), dot_hi = hn::InterleaveUpper(d4, h0, h1);
              const int at = 8 * u;
              const auto lo = hn::NegMulAdd(hn::LoadU(d4, zero + at), gs, dot_lo);
              const auto hi = hn::NegMulAdd(hn::LoadU(d4, zero + at + 4), gs, dot_hi);
              hn::StoreU(hn::MulAdd(hn::LoadU(d4, scale + at), lo, hn::LoadU(d4, total + at)), d4, total + at);
              hn::StoreU(hn::MulAdd(hn::LoadU(d4, scale + at + 4), hi, hn::LoadU(d4, total + at + 4)), d4,
                         total + at + 4);
            }
#endif
          }
          std::fill_n(sums.get() + r * kSumsStride, tiles * 2 * kMarlinTileWords, 0.0f);
        }
        std::fill_n(group_sum, kMarlinRows, 0.0f);
      };
      // Accumulates rows [start, end) of one block over the panel (the other rows zeroed).
      const auto add_block = [&](std::int64_t block, int start, int end) {
        for (int r = 0; r < rows; ++r) {
          const float* xs = staged.get() + r * staged_stride + block * marlin::kTileK;
          float x[marlin::kTileK];
          for (int i = 0; i < marlin::kTileK; ++i) {
            x[i] = i >= start && i < end ? xs[i] : 0.0f;
            group_sum[r] += x[i];
          }
          float* pattern = patterns.get() + r * 8 * period;
          for (int s = 0; s < 8; ++s) {
            // Exact (a power of two); the top nibble is shifted down instead (see MarlinTileBlock).
            const float scale = s == 7 ? 1.0f : 1.0f / static_cast<float>(1u << (4 * s));
            const int row = kNibbleRow[s] % 2 + kNibbleRow[s] / 2 * 8;
            for (int i = 0; i < kMarlinPatternWords; ++i) pattern[s * period + i] = x[2 * (i / 4) + row] * scale;
            for (std::size_t i = kMarlinPatternWords; i < period; ++i) pattern[s * period + i] = pattern[s * period + i % kMarlinPatternWords];
          }
        }
        const std::int32_t* words = p.b + block * row_words + panel * kMarlinTileWords;
        for (int t = 0; t < tiles; ++t) {
          MarlinTileBlock(df, words + t * kMarlinTileWords, rows, patterns.get(), period,
                          sums.get() + t * 2 * kMarlinTileWords, kSumsStride);
        }
      };
      for (std::int64_t block = block_begin; block < block_end; ++block) {
        // The panel's slice of a block is a few KiB of its own, far from the last one (rows of
        // the repacked weights are N / 2 bytes apart), which the hardware prefetchers do not
        // follow: fetch a later block's slice now.
        if (block + kMarlinPrefetchBlocks < block_end) {
          const auto* ahead = reinterpret_cast<const char*>(p.b + (block + kMarlinPrefetchBlocks) * row_words +
                                                            panel * kMarlinTileWords);
          for (int line = 0; line < tiles * kMarlinTileWords * 4; line += 64) hwy::Prefetch(ahead + line);
        }
        const std::int64_t k0 = block * marlin::kTileK;
        if (p.g_idx != nullptr) {
          for (int i = 0; i < marlin::kTileK; ++i) ids[i] = std::clamp<std::int64_t>(p.g_idx[k0 + i], 0, p.groups - 1);
        } else {
          // Groups are whole 16-row blocks (group_size is a multiple of 16).
          std::fill_n(ids, marlin::kTileK, k0 / p.group_size);
        }
        // One pass per run of equal group ids (one run unless groups meet inside the block).
        for (int start = 0; start < marlin::kTileK;) {
          int end = start + 1;
          while (end < marlin::kTileK && ids[end] == ids[start]) ++end;
          if (ids[start] != group) close_group(), group = ids[start];
          add_block(block, start, end);
          start = end;
        }
      }
      close_group();
      for (int r = 0; r < rows; ++r) {
        const float* total = totals.get() + r * kTotalsStride;
        float* natural = partial != nullptr ? partial + (m0 + r) * p.n + panel * marlin::kTileN
                                            : panel_scales.get();  // free now: the totals in column order
        for (int i = 0; i < tiles * marlin::kTileN; ++i) natural[i] = total[marlin::grouped_scale_pos(i)];
        if (partial != nullptr) continue;
        T* c = static_cast<T*>(p.c) + (m0 + r) * p.n + panel * marlin::kTileN;
        ForEachChunk(df, static_cast<std::size_t>(tiles) * marlin::kTileN,
                     [&](std::size_t i, std::size_t count) HWY_ATTR { Store(df, hn::LoadU(df, natural + i), c + i, count); });
      }
    }
  }
}

/// c[m, n] = sum over parts of partial[part][m, n] for the columns [col_begin, col_end) of
/// every row (partials float32 [parts, M, N]).
template <typename T>
void MarlinAddParts(const host::MarlinGemmParams& p, const float* partials, std::int64_t parts, std::int64_t col_begin,
                    std::int64_t col_end) {
  const DF df;
  for (std::int64_t m = 0; m < p.m; ++m) {
    T* c = static_cast<T*>(p.c) + m * p.n;
    ForEachChunk(df, static_cast<std::size_t>(col_end - col_begin), [&](std::size_t i, std::size_t count) HWY_ATTR {
      const std::int64_t at = m * p.n + col_begin + static_cast<std::int64_t>(i);
      VF sum = Load(df, partials + at, count);
      for (std::int64_t part = 1; part < parts; ++part) sum = hn::Add(sum, Load(df, partials + part * p.m * p.n + at, count));
      Store(df, sum, c + col_begin + static_cast<std::int64_t>(i), count);
    });
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
