// Per-target body of the CPU weight-only GEMM on Marlin-format 4- and 8-bit weights (format:
// mllm_kernel/marlin.hpp), the CPU side of gptq_marlin_gemm:
//
//   c[m, n] = sum_k a[m, k] * (q[k, n] - zero[g, n]) * scale[g, n],   g the group of row k
//
// The repacked words are read in their stored order, never unpacked into a matrix: within a
// 16 x 64 tile, a 4-bit word w (of 128) holds 8 values of columns 16 (w % 4) + w / 16 and
// that + 8, at rows 2 q, 2 q + 1, 2 q + 8, 2 q + 9 with q = w % 16 / 4; an 8-bit word w (of 256)
// holds 4 values of column 16 (w % 8 / 2) + w / 32 + 8 (w % 2), at those rows with
// q = w % 32 / 8. A vector of words therefore meets a fixed pattern of rows, and each of its
// values is one multiply-add with the activation pattern for that value's row:
// sum_k a[k] * q[k, n] accumulates per word (and half of a 4-bit word) in float32, and the zero
// point and scale come in once a group, when the group ends:
//   total[n] += scale[g, n] * (sum over the group of a * q - zero[g, n] * sum over the group of a)
// (each column's 4 words, one per q, are added then); with bf16 activations on 4-bit weights,
// where the CPU has AVX-512 BF16, pairs of values go through its bf16 dot product instead
// (MarlinTileBlocksBf16). Groups are runs of K rows with one group
// id (g_idx, or consecutive rows of group_size); a group that changes inside a 16-row block
// splits that block by masking rows, so any g_idx gives the right sum, and sorted ids (serving
// code sorts them) cost one pass a block.
//
// A call computes a range of 64-column tiles over a range of 16-row blocks, for up to 4 rows of
// a at a time (the values are converted once for them), in panels of up to 128 tiles whose sums
// (1 KiB a tile and row) stay in L2 while the panel's slice of every block streams past. Two
// blocks of one group go through the sums in one pass. The caller splits K across threads for
// decode (each thread then streams one contiguous run of whole rows; marlin.cpp adds the parts)
// and the tiles otherwise. Rows of a are staged in float32 first. Included once per SIMD target
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
#include <cstring>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

#if HWY_TARGET != HWY_SCALAR
using D4 = hn::FixedTag<float, 4>;  // one group's column sums, four at a time
#endif

/// A tile's partial sums: a 4-bit tile's 128 words x 2 halves, an 8-bit tile's 256 words.
inline constexpr int kMarlinTileSums = 256;

/// What differs between the weight widths: words a tile, values a word, the period (in words) of
/// the words' row pattern, the row (in a 16-row block, for q = 0) of each value of a word, and
/// the sum (half) it goes to.
template <int kBits>
struct MarlinWidth {
  static constexpr int kWords = marlin::tile_words(kBits);
  static constexpr int kValues = 32 / kBits;
  static constexpr int kPatternWords = kWords / 8;
  static constexpr int row(int value) {
    const int r = marlin::interleaved(kBits, value) % 4;  // rows 2q, 2q + 1, 2q + 8, 2q + 9
    return r % 2 + r / 2 * 8;
  }
};
/// How many 16-row blocks ahead the weights are prefetched.
inline constexpr std::int64_t kMarlinPrefetchBlocks = 2;

/// body(v0, ..., v7): the 8 nibbles of each word of a vector, as floats (kBits 4), or body(v0,
/// ..., v3): its 4 bytes (kBits 8). Value s is converted in place, as (word & mask << kBits s),
/// which is its value times 2^(kBits s) exactly, so no shift is needed (the top one, which would
/// read as negative, is shifted down instead).
template <int kBits, class Body>
HWY_INLINE void MarlinValues(DF df, const std::int32_t* HWY_RESTRICT words, const Body& body) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto w = hn::BitCast(du, hn::LoadU(di, words));
  const auto value = [&](std::uint32_t mask) HWY_ATTR {
    return hn::ConvertTo(df, hn::BitCast(di, hn::And(w, hn::Set(du, mask))));
  };
  // Vectors are passed as arguments, not kept in a struct: SVE's vectors are sizeless.
  if constexpr (kBits == 4) {
    body(value(0xfu), value(0xf0u), value(0xf00u), value(0xf000u), value(0xf0000u), value(0xf00000u),
         value(0xf000000u), hn::ConvertTo(df, hn::BitCast(di, hn::ShiftRight<28>(w))));
  } else {
    body(value(0xffu), value(0xff00u), value(0xff0000u), hn::ConvertTo(df, hn::BitCast(di, hn::ShiftRight<24>(w))));
  }
}

/// Adds the products of kBlocks (1 or 2) consecutive 16-row blocks of a tile into `sums` for
/// `rows` rows of a: block i's words at words[i], row r's sums at sums + r * sums_stride (4 bits:
/// [2][128], the low and high half of each word; 8 bits: [256], one a word). patterns[i] +
/// r * kValues * period holds row r's activations as value s of each word position of block i
/// meets them, scaled by 2^(-kBits s) to match MarlinValues (unscaled for the top value): the
/// products are exact as with converted values. Two blocks a pass load and store the sums once
/// for both.
template <int kBits, int kBlocks>
HWY_INLINE void MarlinTileBlocks(DF df, const std::int32_t* const* words, int rows, const float* const* patterns,
                                 std::size_t period, float* HWY_RESTRICT sums, std::size_t sums_stride) {
  using W = MarlinWidth<kBits>;
  const std::size_t lanes = hn::Lanes(df);
  const std::size_t row_patterns = W::kValues * period;
  for (std::size_t o = 0; o < static_cast<std::size_t>(W::kWords); o += lanes) {
    if constexpr (kBits == 4) {
      // The rows of a, with the nibbles of block 0 (a*) and, for two blocks, of block 1 (b*).
      const auto pass = [&](VF a0, VF a1, VF a2, VF a3, VF a4, VF a5, VF a6, VF a7, VF b0, VF b1, VF b2, VF b3, VF b4,
                            VF b5, VF b6, VF b7) HWY_ATTR {
        for (int r = 0; r < rows; ++r) {
          float* s = sums + r * sums_stride;
          // Nibble s holds value 0, 2, 4, 6, 1, 3, 5, 7 of the word: value v is in half v / 4.
          // Two chains a half, so that no multiply-add waits on the one before it for long.
          VF lo = hn::LoadU(df, s + o), hi = hn::LoadU(df, s + W::kWords + o);
          VF lo2 = hn::Zero(df), hi2 = hn::Zero(df);
          const auto add = [&](VF v0, VF v1, VF v2, VF v3, VF v4, VF v5, VF v6, VF v7, const float* x) HWY_ATTR {
            lo = hn::MulAdd(v0, hn::LoadU(df, x), lo);
            lo2 = hn::MulAdd(v1, hn::LoadU(df, x + period), lo2);
            hi = hn::MulAdd(v2, hn::LoadU(df, x + 2 * period), hi);
            hi2 = hn::MulAdd(v3, hn::LoadU(df, x + 3 * period), hi2);
            lo = hn::MulAdd(v4, hn::LoadU(df, x + 4 * period), lo);
            lo2 = hn::MulAdd(v5, hn::LoadU(df, x + 5 * period), lo2);
            hi = hn::MulAdd(v6, hn::LoadU(df, x + 6 * period), hi);
            hi2 = hn::MulAdd(v7, hn::LoadU(df, x + 7 * period), hi2);
          };
          add(a0, a1, a2, a3, a4, a5, a6, a7, patterns[0] + r * row_patterns + o % period);
          if constexpr (kBlocks == 2) add(b0, b1, b2, b3, b4, b5, b6, b7, patterns[1] + r * row_patterns + o % period);
          hn::StoreU(hn::Add(lo, lo2), df, s + o);
          hn::StoreU(hn::Add(hi, hi2), df, s + W::kWords + o);
        }
      };
      MarlinValues<4>(df, words[0] + o, [&](VF a0, VF a1, VF a2, VF a3, VF a4, VF a5, VF a6, VF a7) HWY_ATTR {
        if constexpr (kBlocks == 2) {
          MarlinValues<4>(df, words[1] + o, [&](VF b0, VF b1, VF b2, VF b3, VF b4, VF b5, VF b6, VF b7) HWY_ATTR {
            pass(a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7);
          });
        } else {
          pass(a0, a1, a2, a3, a4, a5, a6, a7, a0, a1, a2, a3, a4, a5, a6, a7);  // the b* go unused
        }
      });
    } else {
      // An 8-bit word is one column: its 4 bytes go to one sum, in two chains.
      const auto pass = [&](VF a0, VF a1, VF a2, VF a3, VF b0, VF b1, VF b2, VF b3) HWY_ATTR {
        for (int r = 0; r < rows; ++r) {
          float* s = sums + r * sums_stride;
          VF sum = hn::LoadU(df, s + o), sum2 = hn::Zero(df);
          const auto add = [&](VF v0, VF v1, VF v2, VF v3, const float* x) HWY_ATTR {
            sum = hn::MulAdd(v0, hn::LoadU(df, x), sum);
            sum2 = hn::MulAdd(v1, hn::LoadU(df, x + period), sum2);
            sum = hn::MulAdd(v2, hn::LoadU(df, x + 2 * period), sum);
            sum2 = hn::MulAdd(v3, hn::LoadU(df, x + 3 * period), sum2);
          };
          add(a0, a1, a2, a3, patterns[0] + r * row_patterns + o % period);
          if constexpr (kBlocks == 2) add(b0, b1, b2, b3, patterns[1] + r * row_patterns + o % period);
          hn::StoreU(hn::Add(sum, sum2), df, s + o);
        }
      };
      MarlinValues<8>(df, words[0] + o, [&](VF a0, VF a1, VF a2, VF a3) HWY_ATTR {
        if constexpr (kBlocks == 2) {
          MarlinValues<8>(df, words[1] + o,
                          [&](VF b0, VF b1, VF b2, VF b3) HWY_ATTR { pass(a0, a1, a2, a3, b0, b1, b2, b3); });
        } else {
          pass(a0, a1, a2, a3, a0, a1, a2, a3);  // the b* go unused
        }
      });
    }
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && defined(__AVX512BF16__)
/// Whether 4-bit weights with bf16 activations take MarlinTileBlocksBf16: where the CPU has
/// AVX-512 BF16's dot product of bf16 pairs (a JIT build for the running CPU), which Highway 1.0.3
/// does not offer.
inline constexpr bool kMarlinBf16Dot = true;
/// sum + x.lo * y.lo + x.hi * y.hi in each 32-bit lane, x and y pairs of bf16 values (vdpbf16ps).
HWY_INLINE VF DotBf16Pairs(VF sum, hn::Vec<hn::RebindToUnsigned<DF>> x, VF y) {
  return VF{_mm512_dpbf16_ps(sum.raw, reinterpret_cast<__m512bh>(x.raw), reinterpret_cast<__m512bh>(y.raw))};
}
/// MarlinTileBlocks for 4-bit weights with bf16 activations, through bf16 dot products: the
/// nibbles of a word (values 0, 2, 4, 6, 1, 3, 5, 7, MarlinValues) pair up as rows 2q and 2q + 1
/// (nibbles 0 and 4 for the word's first column, 2 and 6 for its second) and 2q + 8, 2q + 9
/// (nibbles 1 and 5, 3 and 7), each pair made 128 + q in a 32-bit lane by one AND and OR under
/// bf16's exponent, exactly; `pairs[i]` holds the activations of block i as
/// the bf16 pairs (rows 2q, 2q + 1), then (2q + 8, 2q + 9), of each word position. The sums come
/// out 128 times the group's sum of a too high, which the group's close takes off with the zero
/// point (kMarlinBf16Bias), every kMarlinBf16CloseBlocks blocks at least, since the offset
/// costs the float32 sums bits in proportion to their length. Half the instructions of
/// converting each value to float. The pairs
/// of row r start at pairs[i] + r * 8 * period, where MarlinTileBlocks's patterns of the row do.
template <int kBlocks>
HWY_INLINE void MarlinTileBlocksBf16(DF df, const std::int32_t* const* words, int rows, const float* const* pairs,
                                     std::size_t period, float* HWY_RESTRICT sums, std::size_t sums_stride) {
  using W = MarlinWidth<4>;
  const hn::RebindToUnsigned<DF> du;
  const std::size_t lanes = hn::Lanes(df);
  const std::size_t row_patterns = W::kValues * period;
  const auto mask = hn::Set(du, 0x000f000fu), exponent = hn::Set(du, 0x43004300u);
  const auto pair = [&](auto w) HWY_ATTR { return hn::Or(hn::And(w, mask), exponent); };
  for (std::size_t o = 0; o < static_cast<std::size_t>(W::kWords); o += lanes) {
    const auto w0 = hn::BitCast(du, hn::LoadU(hn::RebindToSigned<DF>(), words[0] + o));
    const auto w1 = hn::BitCast(du, hn::LoadU(hn::RebindToSigned<DF>(), words[kBlocks - 1] + o));
    const auto a0 = pair(w0), a1 = pair(hn::ShiftRight<4>(w0)), a2 = pair(hn::ShiftRight<8>(w0)),
               a3 = pair(hn::ShiftRight<12>(w0));
    const auto b0 = pair(w1), b1 = pair(hn::ShiftRight<4>(w1)), b2 = pair(hn::ShiftRight<8>(w1)),
               b3 = pair(hn::ShiftRight<12>(w1));
    for (int r = 0; r < rows; ++r) {
      float* s = sums + r * sums_stride;
      VF lo = hn::LoadU(df, s + o), hi = hn::LoadU(df, s + W::kWords + o);
      VF lo2 = hn::Zero(df), hi2 = hn::Zero(df);
      const float* x = pairs[0] + r * row_patterns + o % period;
      lo = DotBf16Pairs(lo, a0, hn::LoadU(df, x));
      lo2 = DotBf16Pairs(lo2, a1, hn::LoadU(df, x + period));
      hi = DotBf16Pairs(hi, a2, hn::LoadU(df, x));
      hi2 = DotBf16Pairs(hi2, a3, hn::LoadU(df, x + period));
      if constexpr (kBlocks == 2) {
        const float* y = pairs[1] + r * row_patterns + o % period;
        lo = DotBf16Pairs(lo, b0, hn::LoadU(df, y));
        lo2 = DotBf16Pairs(lo2, b1, hn::LoadU(df, y + period));
        hi = DotBf16Pairs(hi, b2, hn::LoadU(df, y));
        hi2 = DotBf16Pairs(hi2, b3, hn::LoadU(df, y + period));
      }
      hn::StoreU(hn::Add(lo, lo2), df, s + o);
      hn::StoreU(hn::Add(hi, hi2), df, s + W::kWords + o);
    }
  }
}
#else
inline constexpr bool kMarlinBf16Dot = false;
#endif
/// What MarlinTileBlocksBf16's sums carry besides the weights' values: 128 (bf16's exponent
/// pattern 0x4300) for every value.
inline constexpr float kMarlinBf16Bias = 128.0f;
/// 16-row blocks after which MarlinTileBlocksBf16's sums are closed into the totals even within
/// a group (channel-wise scales: all of K), so that the offset's float32 sums stay short: 128
/// rows, a common group.
inline constexpr int kMarlinBf16CloseBlocks = 8;

/// c[rows, tiles] for Marlin-format kBits-bit weights over the 16-row blocks [block_begin,
/// block_end) of K; see the top of this file. With `partial` (float32 [M, N]) the sums of those
/// blocks go there instead of to c, for a caller that splits K and adds the parts.
template <typename T, int kBits>
void MarlinGemmBits(const host::MarlinGemmParams& p, std::int64_t tile_begin, std::int64_t tile_end,
                    std::int64_t block_begin, std::int64_t block_end, float* partial) {
  using W = MarlinWidth<kBits>;
  constexpr bool kDot = kMarlinBf16Dot && kBits == 4 && std::is_same_v<T, bf16_t>;
  const DF df;
  const std::size_t period = std::max<std::size_t>(W::kPatternWords, hn::Lanes(df));
  const std::size_t row_patterns = W::kValues * period;
  const std::int64_t row_words = p.n * marlin::kTileK * kBits / 32;
  const bool channelwise = p.groups == 1;
  const T* scales = static_cast<const T*>(p.scales);
  // Scratch sized to this call (rows of a, tiles of a panel), carved from a per-thread buffer
  // that later calls reuse: a call allocates nothing once the buffer has grown.
  const std::size_t lanes = hn::Lanes(df);
  const std::size_t max_rows = static_cast<std::size_t>(std::min<std::int64_t>(kMarlinRows, p.m));
  const std::size_t panel_tiles = static_cast<std::size_t>(std::min(kMarlinPanelTiles, tile_end - tile_begin));
  const std::size_t sums_stride = panel_tiles * kMarlinTileSums, totals_stride = panel_tiles * marlin::kTileN;
  const std::size_t staged_stride = static_cast<std::size_t>(p.k) + lanes;  // a vector to spare
  const auto whole = [&](std::size_t n) { return (n + lanes - 1) / lanes * lanes; };  // keeps vectors aligned
  const std::size_t sizes[] = {whole(max_rows * staged_stride), whole(2 * max_rows * row_patterns),
                               whole(max_rows * sums_stride), whole(max_rows * totals_stride),
                               whole(totals_stride + lanes), whole(totals_stride)};
  std::size_t total_size = 0;
  for (std::size_t size : sizes) total_size += size;
  thread_local hwy::AlignedFreeUniquePtr<float[]> scratch;
  thread_local std::size_t scratch_size = 0;
  if (scratch_size < total_size) {
    scratch = hwy::AllocateAligned<float>(total_size);
    HWY_ASSERT(scratch != nullptr);  // out of memory: a few hundred KiB a thread
    scratch_size = total_size;
  }
  float* staged = scratch.get();
  float* patterns = staged + sizes[0];
  float* sums = patterns + sizes[1];
  float* totals = sums + sizes[2];
  float* panel_scales = totals + sizes[3];
  float* panel_zeros = panel_scales + sizes[4];
  float group_sum[kMarlinRows];  // sum of each row of a over the group's rows so far
  std::int64_t ids[marlin::kTileK];

  for (std::int64_t m0 = 0; m0 < p.m; m0 += kMarlinRows) {
    const int rows = static_cast<int>(std::min<std::int64_t>(kMarlinRows, p.m - m0));
    for (int r = 0; r < rows; ++r) {
      const T* a = static_cast<const T*>(p.a) + (m0 + r) * p.lda;
      float* dst = staged + r * staged_stride;
      ForEachChunk(df, static_cast<std::size_t>(p.k), [&](std::size_t i, std::size_t count) HWY_ATTR {
        hn::StoreU(Load(df, a + i, count), df, dst + i);
      });
    }
    for (std::int64_t panel = tile_begin; panel < tile_end; panel += kMarlinPanelTiles) {
      const int tiles = static_cast<int>(std::min<std::int64_t>(kMarlinPanelTiles, tile_end - panel));
      std::fill_n(sums, rows * sums_stride, 0.0f);
      std::fill_n(totals, rows * totals_stride, 0.0f);
      std::int64_t group = -1;
      std::fill_n(group_sum, kMarlinRows, 0.0f);
      // Adds the group's sums into the totals with its zero points and scales, and clears them.
      // Totals are kept in the permuted order of a grouped scale row (column c of a tile at
      // 8 (c % 8) + c / 8). 4 bits: for the 16 words 16 u .. 16 u + 15 of a half h, summing the
      // 4 words of each column (q = 0..3, stride 4) gives columns 16 j + u + 8 h for j = 0..3,
      // whose scales sit at 8 u + 2 j + h: the two halves' sums, interleaved, meet 8 consecutive
      // scales. 8 bits: the 32 words 32 u .. 32 u + 31 hold columns 16 j + u + 8 h at word
      // 32 u + 8 q + 2 j + h, so summing the four runs of 8 (q = 0..3) meets them in scale order.
      // The scales and zero points in panel_scales and panel_zeros are those of group `loaded`.
      std::int64_t loaded = -1;
      // Blocks added since the sums were last closed (MarlinTileBlocksBf16's sums are closed
      // every kMarlinBf16CloseBlocks, whatever the group).
      int since_close = 0;
      const auto close_group = [&]() {
        since_close = 0;
        if (group < 0) return;
        const std::size_t width = static_cast<std::size_t>(tiles) * marlin::kTileN;
        const T* row = scales + group * p.n + panel * marlin::kTileN;
        if (group != loaded) {  // the group's scales and zero points, read once a group
          if (!channelwise) {
            ForEachChunk(df, width, [&](std::size_t i, std::size_t count) HWY_ATTR {
              hn::StoreU(Load(df, row + i, count), df, panel_scales + i);
            });
          } else {
            for (std::size_t i = 0; i < width; ++i) {  // one group only: the channel-wise order to the grouped one
              const std::int64_t n = panel * marlin::kTileN + static_cast<std::int64_t>(i);
              panel_scales[marlin::grouped_scale_pos(n) - panel * marlin::kTileN] =
                  hn::GetLane(Load(df, scales + marlin::channel_scale_pos(n), 1));
            }
          }
          for (std::size_t i = 0; i < width; ++i) {
            // Zero point words follow the grouped order: 8 positions a word, interleaved.
            const std::uint32_t word =
                p.zeros != nullptr ? static_cast<std::uint32_t>(p.zeros[group * (p.n / 8) + panel * 8 + i / 8]) : 0u;
            panel_zeros[i] = (p.zeros != nullptr ? static_cast<float>(word >> (4 * marlin::slot_of(4, i % 8)) & 0xfu)
                                                 : static_cast<float>(1 << (kBits - 1))) +
                             (kDot ? kMarlinBf16Bias : 0.0f);
          }
          loaded = group;
        }
        for (int r = 0; r < rows; ++r) {
          for (int t = 0; t < tiles; ++t) {
            const float* g = sums + r * sums_stride + t * kMarlinTileSums;
            float* total = totals + r * totals_stride + t * marlin::kTileN;
            const float* scale = panel_scales + t * marlin::kTileN;
            const float* zero = panel_zeros + t * marlin::kTileN;
#if HWY_TARGET == HWY_SCALAR
            for (int u = 0; u < 8; ++u) {
              for (int i = 0; i < 8; ++i) {  // position 8 u + i = 2 j + h
                const int at = 8 * u + i;
                if constexpr (kBits == 4) {
                  const float* w = g + (i % 2) * W::kWords + 16 * u + i / 2;
                  total[at] += scale[at] * (w[0] + w[4] + w[8] + w[12] - zero[at] * group_sum[r]);
                } else {
                  const float* w = g + 32 * u + i;
                  total[at] += scale[at] * (w[0] + w[8] + w[16] + w[24] - zero[at] * group_sum[r]);
                }
              }
            }
#else
            const D4 d4;
            const auto gs = hn::Set(d4, group_sum[r]);
            for (int u = 0; u < 8; ++u) {
              auto dot_lo = hn::Zero(d4), dot_hi = dot_lo;  // positions 8 u .. 8 u + 3, 8 u + 4 .. 8 u + 7
              if constexpr (kBits == 4) {
                const float* g0 = g + 16 * u;
                const float* g1 = g0 + W::kWords;
                const auto h0 = hn::Add(hn::Add(hn::LoadU(d4, g0), hn::LoadU(d4, g0 + 4)),
                                        hn::Add(hn::LoadU(d4, g0 + 8), hn::LoadU(d4, g0 + 12)));
                const auto h1 = hn::Add(hn::Add(hn::LoadU(d4, g1), hn::LoadU(d4, g1 + 4)),
                                        hn::Add(hn::LoadU(d4, g1 + 8), hn::LoadU(d4, g1 + 12)));
                dot_lo = hn::InterleaveLower(d4, h0, h1), dot_hi = hn::InterleaveUpper(d4, h0, h1);
              } else {
                const float* g0 = g + 32 * u;
                dot_lo = hn::Add(hn::Add(hn::LoadU(d4, g0), hn::LoadU(d4, g0 + 8)),
                                 hn::Add(hn::LoadU(d4, g0 + 16), hn::LoadU(d4, g0 + 24)));
                dot_hi = hn::Add(hn::Add(hn::LoadU(d4, g0 + 4), hn::LoadU(d4, g0 + 12)),
                                 hn::Add(hn::LoadU(d4, g0 + 20), hn::LoadU(d4, g0 + 28)));
              }
              const int at = 8 * u;
              const auto lo = hn::NegMulAdd(hn::LoadU(d4, zero + at), gs, dot_lo);
              const auto hi = hn::NegMulAdd(hn::LoadU(d4, zero + at + 4), gs, dot_hi);
              hn::StoreU(hn::MulAdd(hn::LoadU(d4, scale + at), lo, hn::LoadU(d4, total + at)), d4, total + at);
              hn::StoreU(hn::MulAdd(hn::LoadU(d4, scale + at + 4), hi, hn::LoadU(d4, total + at + 4)), d4,
                         total + at + 4);
            }
#endif
          }
          std::fill_n(sums + r * sums_stride, tiles * kMarlinTileSums, 0.0f);
        }
        std::fill_n(group_sum, kMarlinRows, 0.0f);
      };
      // The activation patterns of rows [start, end) of a block (the other rows zeroed), into
      // pattern set `set`; adds those rows to the group sums.
      const auto build_patterns = [&](std::int64_t block, int start, int end, int set) {
        for (int r = 0; r < rows; ++r) {
          const float* xs = staged + r * staged_stride + block * marlin::kTileK;
          float x[marlin::kTileK];
          for (int i = 0; i < marlin::kTileK; ++i) {
            x[i] = i >= start && i < end ? xs[i] : 0.0f;
            group_sum[r] += x[i];
          }
          float* pattern = patterns + (set * max_rows + r) * row_patterns;
          if constexpr (kDot) {
            // Word position i meets rows 2q, 2q + 1 and 2q + 8, 2q + 9, q = i / 4: as bf16 pairs
            // (a's values are bf16, so their float32 copies' top halves are them exactly).
            const auto bf16_bits = [](float v) {
              std::uint32_t bits;
              std::memcpy(&bits, &v, sizeof(bits));
              return bits >> 16;
            };
            auto* pair_words = reinterpret_cast<std::uint32_t*>(pattern);
            for (std::size_t i = 0; i < period; ++i) {
              const int q = static_cast<int>(i % W::kPatternWords) / 4;
              pair_words[i] = bf16_bits(x[2 * q]) | bf16_bits(x[2 * q + 1]) << 16;
              pair_words[period + i] = bf16_bits(x[2 * q + 8]) | bf16_bits(x[2 * q + 9]) << 16;
            }
            continue;
          }
          for (int s = 0; s < W::kValues; ++s) {
            // Exact (a power of two); the top value is shifted down instead (MarlinValues).
            const float scale = s == W::kValues - 1 ? 1.0f : 1.0f / static_cast<float>(1u << (kBits * s));
            const int row = W::row(s);
            // Word i of the pattern meets rows 2 q + row, q = i / (kPatternWords / 4).
            for (int i = 0; i < W::kPatternWords; ++i) {
              pattern[s * period + i] = x[2 * (i / (W::kPatternWords / 4)) + row] * scale;
            }
            for (std::size_t i = W::kPatternWords; i < period; ++i) pattern[s * period + i] = pattern[s * period + i % W::kPatternWords];
          }
        }
      };
      // Accumulates `count` (1 or 2) blocks from `block` over the panel, their patterns built.
      const auto add_blocks = [&](std::int64_t block, int count) {
        const std::int32_t* first = p.b + block * row_words + panel * W::kWords;
        const float* pattern_sets[2] = {patterns, patterns + max_rows * row_patterns};
        // Each tile's slice a few blocks ahead is fetched as the tile goes, spread evenly so the
        // prefetches never queue up (the hardware prefetchers alone fall behind here). With one
        // row of a, into L2 only (prefetcht1 on x86; Highway's Prefetch has no level): that far
        // ahead is more than L1 holds, and lines brought into L1 too slowed the short pass of
        // one row, where the longer passes of more rows found them there and ran faster.
        const bool prefetch = block + count - 1 + kMarlinPrefetchBlocks < block_end;
        const bool into_l2 = rows == 1;
        for (int t = 0; t < tiles; ++t) {
          const std::int32_t* words[2] = {first + t * W::kWords, first + row_words + t * W::kWords};
          if (prefetch) {
            for (int i = 0; i < count; ++i) {
              const auto* ahead = reinterpret_cast<const char*>(words[i] + kMarlinPrefetchBlocks * row_words);
              for (int line = 0; line < W::kWords * 4; line += 64) {
                if (into_l2) {
                  __builtin_prefetch(ahead + line, 0, 2);
                } else {
                  hwy::Prefetch(ahead + line);
                }
              }
            }
          }
          float* tile_sums = sums + t * kMarlinTileSums;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && defined(__AVX512BF16__)
          if constexpr (kDot) {
            const float* pair_sets[2] = {pattern_sets[0], pattern_sets[1]};
            if (count == 2) {
              MarlinTileBlocksBf16<2>(df, words, rows, pair_sets, period, tile_sums, sums_stride);
            } else {
              MarlinTileBlocksBf16<1>(df, words, rows, pair_sets, period, tile_sums, sums_stride);
            }
            continue;
          }
#endif
          if (count == 2) {
            MarlinTileBlocks<kBits, 2>(df, words, rows, pattern_sets, period, tile_sums, sums_stride);
          } else {
            MarlinTileBlocks<kBits, 1>(df, words, rows, pattern_sets, period, tile_sums, sums_stride);
          }
        }
      };
      // The group of each row of a block, and whether they are all one.
      const auto block_ids = [&](std::int64_t block, std::int64_t* out) {
        const std::int64_t k0 = block * marlin::kTileK;
        if (p.g_idx == nullptr) {  // groups are whole 16-row blocks (group_size is a multiple of 16)
          std::fill_n(out, marlin::kTileK, k0 / p.group_size);
          return true;
        }
        bool uniform = true;
        for (int i = 0; i < marlin::kTileK; ++i) {
          out[i] = std::clamp<std::int64_t>(p.g_idx[k0 + i], 0, p.groups - 1);
          uniform = uniform && out[i] == out[0];
        }
        return uniform;
      };
      std::int64_t next_ids[marlin::kTileK];
      for (std::int64_t block = block_begin; block < block_end; ++block) {
        const bool uniform = block_ids(block, ids);
        if (uniform && ids[0] != group) close_group(), group = ids[0];
        if (kDot && since_close >= kMarlinBf16CloseBlocks) close_group();
        // Two blocks of the current group at once when the next one is all in it too.
        if (uniform && block + 1 < block_end && block_ids(block + 1, next_ids) && next_ids[0] == group) {
          build_patterns(block, 0, marlin::kTileK, 0);
          build_patterns(block + 1, 0, marlin::kTileK, 1);
          add_blocks(block, 2);
          since_close += 2;
          ++block;
          continue;
        }
        // One pass per run of equal group ids (one run unless groups meet inside the block).
        for (int start = 0; start < marlin::kTileK;) {
          int end = start + 1;
          while (end < marlin::kTileK && ids[end] == ids[start]) ++end;
          if (ids[start] != group) close_group(), group = ids[start];
          build_patterns(block, start, end, 0);
          add_blocks(block, 1);
          start = end;
        }
        ++since_close;
      }
      close_group();
      for (int r = 0; r < rows; ++r) {
        const float* total = totals + r * totals_stride;
        float* natural = partial != nullptr ? partial + (m0 + r) * p.n + panel * marlin::kTileN
                                            : panel_scales;  // free now: the totals in column order
        for (int i = 0; i < tiles * marlin::kTileN; ++i) natural[i] = total[marlin::grouped_scale_pos(i)];
        if (partial != nullptr) continue;
        T* c = static_cast<T*>(p.c) + (m0 + r) * p.n + panel * marlin::kTileN;
        ForEachChunk(df, static_cast<std::size_t>(tiles) * marlin::kTileN,
                     [&](std::size_t i, std::size_t count) HWY_ATTR { Store(df, hn::LoadU(df, natural + i), c + i, count); });
      }
    }
  }
}

/// MarlinGemmBits for the weights' width (p.bits, 4 or 8).
template <typename T>
void MarlinGemm(const host::MarlinGemmParams& p, std::int64_t tile_begin, std::int64_t tile_end,
                std::int64_t block_begin, std::int64_t block_end, float* partial) {
  if (p.bits == 8) {
    MarlinGemmBits<T, 8>(p, tile_begin, tile_end, block_begin, block_end, partial);
  } else {
    MarlinGemmBits<T, 4>(p, tile_begin, tile_end, block_begin, block_end, partial);
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
