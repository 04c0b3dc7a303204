// Per-target bodies of the CPU int8 GEMM with per-row and per-column scales (int8_scaled_mm):
//
//   out[m, n] = float(sum_k a[m, k] * w[n, k]) * scales_a[m] * scales_b[n] (+ bias[n])
//
// a is [M, K] int8 rows and w is [N, K] int8 rows (mat_b's columns), both dense along K. The sum
// is exact in int32 (wrapping past it, as int32 GEMMs do); the rest is float32, rounded once to
// the output type. Included once per SIMD target by Highway's foreach_target; the parameter
// struct sits behind a classic include guard.
//
// A call computes a range of output columns (rows of w) for a range of rows of a:
//   - Rows of a are staged a block at a time (up to kInt8MmBlockRows, half the L2 cache) in
//     a per-thread buffer, zero-padded to whole vectors, so only w's side of the K tail needs a
//     mask.
//   - A block of two rows or more goes through register tiles of up to kTileA rows of a (4
//     where the target has 32 vector registers, 2 on AVX2 and SSE) by kTileW = 4 rows of w,
//     each summing int32 vectors over all of K. A w tile stays in L1 while every tile of the
//     block passes over it; the first pass asks for the next w tile (the later ones would only
//     repeat its requests, taking load slots from the products). The taller tile widens each
//     loaded w vector once for 4 rows of a instead of 2.
//   - 2 to 4 rows (one pass over each w tile) wait on memory: on x86 they take the int16
//     engine, whose loop reads w faster there (Int8ScaledMm).
//   - A single row (decode: M = 1) is memory-bound: w is read row by row, one sequential
//     stream, which the hardware prefetchers follow best.
//   - Sums land in an int32 block of kInt8MmChunkCols columns, which the epilogue scales and
//     stores a row at a time.
//
// Products, by the engine the target has (Int8MmEngine): where the build's target has a byte dot
// product, four products into each int32 lane (Int8MmQuads): AVX-512 VNNI's vpdpbusd (a JIT
// build for a CPU that has it, as the compiler's __AVX512VNNI__ says: Highway 1.0 counts Zen 4
// as AVX3, its AVX3_DL asking for AVX-VNNI too) on a staged as a + 128 and w as loaded; Arm's
// SDOT (NEON with the dot-product extension, as -mcpu=native gives on a Cortex-A76 or a Jetson
// Orin's A78AE; SVE) on both as loaded; elsewhere a widened to int16 once when staged, w
// widened per load, and ReorderWidenMulAccumulate (int16 pairs into int32 lanes: vpmaddwd on
// x86; Int8MmWiden).
// Highway 1.0 (the system package this builds against) has no int8 dot product, so these are
// its targets' raw vectors through the intrinsics; SumOfMulQuadAccumulate arrives with 1.2.
#ifndef MLLM_KERNEL_CPU_INT8_SCALED_MM_PARAMS_
#define MLLM_KERNEL_CPU_INT8_SCALED_MM_PARAMS_

#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace mllm_kernel::cpu {

/// Threads get output columns in multiples of this (a multiple of every target's kTileW).
inline constexpr std::int64_t kInt8MmColumnGrain = 16;

/// Bytes of staged rows of a per block: half the core's L2 cache (as the C library reports it;
/// 256 KiB where it reports none), so that a block stays in L2 while a chunk of w passes over
/// it. Every block streams the thread's w once more, so the larger the block the better while
/// it fits.
inline std::size_t Int8MmStageBytes() {
  static const std::size_t bytes = [] {
    long l2 = 0;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return l2 > 0 ? static_cast<std::size_t>(l2) / 2 : std::size_t{256 * 1024};
  }();
  return bytes;
}

/// One GEMM; pointers at element 0, strides in elements.
struct Int8ScaledMmParams {
  const std::int8_t* a;  // [M, K]
  std::int64_t a_stride;
  const std::int8_t* w;  // [N, K]: mat_b's columns
  std::int64_t w_stride;
  const float* scales_a;  // [M], or one for all (sa_stride 0)
  std::int64_t sa_stride;
  const float* scales_b;  // [N], or one for all (sb_stride 0)
  std::int64_t sb_stride;
  const void* bias;       // [N] of the output type, or nullptr
  void* out;              // [M, N] of the output type
  std::int64_t out_stride;
  std::int64_t k;
};

}  // namespace mllm_kernel::cpu

#endif  // MLLM_KERNEL_CPU_INT8_SCALED_MM_PARAMS_

#include <mllm_kernel/cpu/simd_io-inl.hpp>

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>


HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// A tile's w[] holds its 4 rows of w, then the next tile's 4, which are prefetched as the tile
/// goes (one line of each per step of a vector of K), so that the next tile's first pass finds
/// them in cache instead of waiting on memory.
HWY_INLINE void Int8MmPrefetchNext(const std::int8_t* const* w, std::size_t i) {
  for (int t = 4; t < 8; ++t) hwy::Prefetch(w[t] + i);
}


/// Products by ReorderWidenMulAccumulate: a staged as int16, w widened as it is loaded. Every
/// vector is a named variable (no arrays of vectors: SVE's are sizeless), hence the fixed
/// tiles: 4 x 4 sums where 32 vector registers hold them beside the operands, 2 x 4 where there
/// are 16 (x86 below AVX-512, 32-bit Arm, the emulated targets).
struct Int8MmWiden {
  using Staged = std::int16_t;
#if (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3) || HWY_ARCH_ARM_V7 || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
  static constexpr int kTileA = 2;
#else
  static constexpr int kTileA = 4;
#endif
  static constexpr int kTileW = 4;
  using D16 = hn::ScalableTag<std::int16_t>;
  using D32 = hn::Repartition<std::int32_t, D16>;
  using D8 = hn::Rebind<std::int8_t, D16>;
  using V16 = hn::Vec<D16>;

  /// K elements per vector.
  static std::size_t Step() { return hn::Lanes(D16()); }

  /// Loads `count` (1..Step) int8 elements widened to int16; the lanes past them are zero.
  static V16 LoadWide(const std::int8_t* HWY_RESTRICT p, std::size_t count) {
    const D16 d16;
    const D8 d8;
    if (HWY_LIKELY(count == hn::Lanes(d16))) return hn::PromoteTo(d16, hn::LoadU(d8, p));
    alignas(64) std::int8_t buffer[HWY_MAX_BYTES / sizeof(std::int16_t)] = {};
    std::memcpy(buffer, p, count);
    return hn::PromoteTo(d16, hn::LoadU(d8, buffer));
  }

  /// Widens a row of k elements into `staged` (zero-padded to whole vectors).
  static void Stage(const std::int8_t* HWY_RESTRICT src, std::int16_t* HWY_RESTRICT staged, std::size_t k) {
    const D16 d16;
    const std::size_t n = hn::Lanes(d16);
    for (std::size_t i = 0; i < k; i += n) hn::Store(LoadWide(src + i, std::min(n, k - i)), d16, staged + i);
  }

  /// out[0] = sum_k a[k] * w[k] for one row of a, reading w as one sequential stream.
  static void Stream(const std::int16_t* HWY_RESTRICT a, const std::int8_t* HWY_RESTRICT w, std::size_t k,
                     std::int32_t* HWY_RESTRICT out) {
    const D16 d16;
    const D32 d32;
    const D8 d8;
    auto s0 = hn::Zero(d32), c0 = s0, s1 = s0, c1 = s0;
    const std::size_t n = hn::Lanes(d16);
    std::size_t full = k / n * n;
    if (full < k) s1 = hn::ReorderWidenMulAccumulate(d32, hn::Load(d16, a + full), LoadWide(w + full, k - full), s1, c1);
    if (full % (2 * n) != 0) {
      full -= n;
      s1 = hn::ReorderWidenMulAccumulate(d32, hn::Load(d16, a + full), hn::PromoteTo(d16, hn::LoadU(d8, w + full)),
                                         s1, c1);
    }
    for (std::size_t i = 0; i < full; i += 2 * n) {
      s0 = hn::ReorderWidenMulAccumulate(d32, hn::Load(d16, a + i), hn::PromoteTo(d16, hn::LoadU(d8, w + i)), s0, c0);
      s1 = hn::ReorderWidenMulAccumulate(d32, hn::Load(d16, a + i + n), hn::PromoteTo(d16, hn::LoadU(d8, w + i + n)),
                                         s1, c1);
    }
    const auto sum = hn::Add(hn::RearrangeToOddPlusEven(s0, c0), hn::RearrangeToOddPlusEven(s1, c1));
    out[0] = hn::GetLane(hn::SumOfLanes(d32, sum));
  }

  /// out[r * out_stride + t] = sum_k a[r][k] * w[t][k] for 1 to kTileA rows of a and 4 rows of w;
  /// the first pass over a w tile also asks for the next one (prefetch_next).
  template <int kRows>
  static void Tile(const std::int16_t* HWY_RESTRICT a, std::size_t a_stride, const std::int8_t* const* w,
                   std::size_t k, std::int32_t* HWY_RESTRICT out, std::size_t out_stride, bool prefetch_next) {
    static_assert(kRows >= 1 && kRows <= kTileA, "a tile has 1 to kTileA rows of a");
    const D16 d16;
    const D32 d32;
    // sRT: a row R with w row T; cRT: its second half (ReorderWidenMulAccumulate's sum1).
    auto s00 = hn::Zero(d32), s01 = s00, s02 = s00, s03 = s00, c00 = s00, c01 = s00, c02 = s00, c03 = s00;
    auto s10 = s00, s11 = s00, s12 = s00, s13 = s00, c10 = s00, c11 = s00, c12 = s00, c13 = s00;
    auto s20 = s00, s21 = s00, s22 = s00, s23 = s00, c20 = s00, c21 = s00, c22 = s00, c23 = s00;
    auto s30 = s00, s31 = s00, s32 = s00, s33 = s00, c30 = s00, c31 = s00, c32 = s00, c33 = s00;
    const auto step = [&](std::size_t i, std::size_t count) HWY_ATTR {
      if (prefetch_next) Int8MmPrefetchNext(w, i);
      const V16 w0 = LoadWide(w[0] + i, count), w1 = LoadWide(w[1] + i, count);
      const V16 w2 = LoadWide(w[2] + i, count), w3 = LoadWide(w[3] + i, count);
      // One row r of a times the 4 rows of w, into that row's sums.
      const auto row = [&](int r, auto& t0, auto& t1, auto& t2, auto& t3, auto& u0, auto& u1, auto& u2,
                           auto& u3) HWY_ATTR {
        const V16 x = hn::Load(d16, a + r * a_stride + i);
        t0 = hn::ReorderWidenMulAccumulate(d32, x, w0, t0, u0);
        t1 = hn::ReorderWidenMulAccumulate(d32, x, w1, t1, u1);
        t2 = hn::ReorderWidenMulAccumulate(d32, x, w2, t2, u2);
        t3 = hn::ReorderWidenMulAccumulate(d32, x, w3, t3, u3);
      };
      row(0, s00, s01, s02, s03, c00, c01, c02, c03);
      if constexpr (kRows >= 2) row(1, s10, s11, s12, s13, c10, c11, c12, c13);
      if constexpr (kRows >= 3) row(2, s20, s21, s22, s23, c20, c21, c22, c23);
      if constexpr (kRows >= 4) row(3, s30, s31, s32, s33, c30, c31, c32, c33);
    };
    // The partial vector first, so the full-vector loop carries no tail test.
    const std::size_t n = hn::Lanes(d16);
    const std::size_t full = k / n * n;
    if (full < k) step(full, k - full);
    for (std::size_t i = 0; i < full; i += n) step(i, n);
    const auto sum = [&](auto t, auto u) HWY_ATTR {
      return hn::GetLane(hn::SumOfLanes(d32, hn::RearrangeToOddPlusEven(t, u)));
    };
    // Row r's 4 sums into out's row r.
    const auto put = [&](int r, auto t0, auto t1, auto t2, auto t3, auto u0, auto u1, auto u2, auto u3) HWY_ATTR {
      std::int32_t* o = out + r * out_stride;
      o[0] = sum(t0, u0);
      o[1] = sum(t1, u1);
      o[2] = sum(t2, u2);
      o[3] = sum(t3, u3);
    };
    put(0, s00, s01, s02, s03, c00, c01, c02, c03);
    if constexpr (kRows >= 2) put(1, s10, s11, s12, s13, c10, c11, c12, c13);
    if constexpr (kRows >= 3) put(2, s20, s21, s22, s23, c20, c21, c22, c23);
    if constexpr (kRows >= 4) put(3, s30, s31, s32, s33, c30, c31, c32, c33);
  }

  /// Int16 products are the sums themselves: nothing to correct.
  static void Correct(const std::int8_t* const*, std::size_t, std::int32_t*, std::int64_t, std::size_t) {}
};

#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && defined(__AVX512VNNI__)) ||                             \
    (HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON && defined(__ARM_FEATURE_DOTPROD)) ||                    \
    (HWY_ARCH_ARM_A64 && (HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2 || HWY_TARGET == HWY_SVE_256 || \
                          HWY_TARGET == HWY_SVE2_128))
/// Products by a byte dot product, four products into each int32 lane: a quarter of the
/// instructions of widening to int16, and w is not widened. x86's vpdpbusd multiplies unsigned
/// bytes of a by signed ones of w, so a is staged as a + 128 (its sign bit flipped), each sum
/// comes out 128 times its row of w's sum too high, and the same instruction counts w against
/// ones so that the tile takes that off at the end (int32 wrapping arithmetic: exact as before).
/// Arm's SDOT multiplies signed by signed: a is staged as it is and nothing is taken off.
struct Int8MmQuads {
  static constexpr bool kUnsignedA = HWY_ARCH_X86;
  using Staged = std::conditional_t<kUnsignedA, std::uint8_t, std::int8_t>;
  static constexpr int kTileA = 4;
  static constexpr int kTileW = 4;
  using D8 = hn::ScalableTag<std::int8_t>;
  using D32 = hn::Repartition<std::int32_t, D8>;
  using V32 = hn::Vec<D32>;

  /// K elements per vector.
  static std::size_t Step() { return hn::Lanes(D8()); }

  /// sum + the four products of a's and w's bytes of each lane.
  static V32 Dot(V32 sum, V32 a, V32 w) {
#if HWY_ARCH_X86
    return V32{_mm512_dpbusd_epi32(sum.raw, a.raw, w.raw)};
#elif HWY_TARGET == HWY_NEON
    return V32{vdotq_s32(sum.raw, vreinterpretq_s8_s32(a.raw), vreinterpretq_s8_s32(w.raw))};
#else  // SVE: its vectors are the sizeless intrinsic types themselves
    return svdot_s32(sum, svreinterpret_s8_s32(a), svreinterpret_s8_s32(w));
#endif
  }

  /// `count` (1..Step) int8 elements of w as a vector of int32 lanes; the bytes past them are zero.
  static V32 LoadW(const std::int8_t* HWY_RESTRICT p, std::size_t count) {
    const D8 d8;
    if (HWY_LIKELY(count == hn::Lanes(d8))) return hn::BitCast(D32(), hn::LoadU(d8, p));
    alignas(64) std::int8_t buffer[HWY_MAX_BYTES] = {};
    std::memcpy(buffer, p, count);
    return hn::BitCast(D32(), hn::Load(d8, buffer));
  }

  /// A row of k elements (as a + 128 for vpdpbusd) into `staged`, zero-padded to whole vectors
  /// (a zero meets w's zero tail).
  static void Stage(const std::int8_t* HWY_RESTRICT src, Staged* HWY_RESTRICT staged, std::size_t k) {
    const std::size_t n = Step();
    for (std::size_t i = 0; i < k; ++i) {
      staged[i] = kUnsignedA ? static_cast<Staged>(static_cast<std::uint8_t>(src[i]) ^ 0x80u) : src[i];
    }
    for (std::size_t i = k; i < (k + n - 1) / n * n; ++i) staged[i] = 0;
  }

  /// Keeps w's vectors in registers. GCC otherwise folds each load into every product that uses
  /// it (vpdpbusd takes w from memory), four loads of each vector a step instead of one, and the
  /// loads, not the products, bound the loop.
  static void InRegister(V32& w0, V32& w1, V32& w2, V32& w3) {
#if HWY_ARCH_X86
    __asm__("" : "+v"(w0.raw), "+v"(w1.raw), "+v"(w2.raw), "+v"(w3.raw));
#else
    (void)w0, (void)w1, (void)w2, (void)w3;
#endif
  }

  /// The sum of a vector's int32 lanes, wrapping.
  static std::uint32_t LaneSum(V32 v) { return static_cast<std::uint32_t>(hn::GetLane(hn::SumOfLanes(D32(), v))); }

  /// The int32 sum of a and w: the lanes of `sums`, less (a staged as a + 128) 128 times w's sum
  /// (LaneSum of its sums against ones), wrapping.
  static std::int32_t Total(V32 sums, std::uint32_t w_sum) {
    return static_cast<std::int32_t>(LaneSum(sums) - (kUnsignedA ? 128u * w_sum : 0u));
  }

  /// z + w against ones: w's sums, which only a staged as a + 128 needs.
  static V32 CountW(V32 z, V32 ones, V32 w) { return kUnsignedA ? Dot(z, ones, w) : z; }

  /// out[0] = sum_k a[k] * w[k] for one row of a, reading w as one sequential stream.
  static void Stream(const Staged* HWY_RESTRICT a, const std::int8_t* HWY_RESTRICT w, std::size_t k,
                     std::int32_t* HWY_RESTRICT out) {
    const D8 d8;
    const D32 d32;
    const V32 ones = hn::BitCast(d32, hn::Set(d8, 1));
    V32 s0 = hn::Zero(d32), s1 = s0, z0 = s0, z1 = s0;
    const std::size_t n = Step();
    std::size_t full = k / n * n;
    const auto a_at = [&](std::size_t i) HWY_ATTR { return hn::BitCast(d32, hn::Load(d8, reinterpret_cast<const std::int8_t*>(a + i))); };
    if (full < k) {
      const V32 x = LoadW(w + full, k - full);
      s1 = Dot(s1, a_at(full), x);
      z1 = CountW(z1, ones, x);
    }
    if (full % (2 * n) != 0) {
      full -= n;
      const V32 x = LoadW(w + full, n);
      s1 = Dot(s1, a_at(full), x);
      z1 = CountW(z1, ones, x);
    }
    for (std::size_t i = 0; i < full; i += 2 * n) {
      const V32 x0 = LoadW(w + i, n), x1 = LoadW(w + i + n, n);
      s0 = Dot(s0, a_at(i), x0);
      z0 = CountW(z0, ones, x0);
      s1 = Dot(s1, a_at(i + n), x1);
      z1 = CountW(z1, ones, x1);
    }
    out[0] = Total(hn::Add(s0, s1), LaneSum(hn::Add(z0, z1)));
  }

  /// out[r * out_stride + t] = sum_k a[r][k] * w[t][k] for 1 to kTileA rows of a as staged (so
  /// before Correct) and 4 rows of w; the first pass over a w tile also asks for the next one
  /// (prefetch_next).
  template <int kRows>
  static void Tile(const Staged* HWY_RESTRICT a, std::size_t a_stride, const std::int8_t* const* w,
                   std::size_t k, std::int32_t* HWY_RESTRICT out, std::size_t out_stride, bool prefetch_next) {
    static_assert(kRows >= 1 && kRows <= kTileA, "a tile has 1 to kTileA rows of a");
    const D8 d8;
    const D32 d32;
    // sRT: a row R with w row T.
    V32 s00 = hn::Zero(d32), s01 = s00, s02 = s00, s03 = s00, s10 = s00, s11 = s00, s12 = s00, s13 = s00;
    V32 s20 = s00, s21 = s00, s22 = s00, s23 = s00, s30 = s00, s31 = s00, s32 = s00, s33 = s00;
    const auto step = [&](std::size_t i, std::size_t count) HWY_ATTR {
      if (prefetch_next) Int8MmPrefetchNext(w, i);
      V32 w0 = LoadW(w[0] + i, count), w1 = LoadW(w[1] + i, count);
      V32 w2 = LoadW(w[2] + i, count), w3 = LoadW(w[3] + i, count);
      InRegister(w0, w1, w2, w3);
      // One row r of a times the 4 rows of w, into that row's sums.
      const auto row = [&](int r, V32& t0, V32& t1, V32& t2, V32& t3) HWY_ATTR {
        const V32 x = hn::BitCast(d32, hn::Load(d8, reinterpret_cast<const std::int8_t*>(a + r * a_stride + i)));
        t0 = Dot(t0, x, w0);
        t1 = Dot(t1, x, w1);
        t2 = Dot(t2, x, w2);
        t3 = Dot(t3, x, w3);
      };
      row(0, s00, s01, s02, s03);
      if constexpr (kRows >= 2) row(1, s10, s11, s12, s13);
      if constexpr (kRows >= 3) row(2, s20, s21, s22, s23);
      if constexpr (kRows >= 4) row(3, s30, s31, s32, s33);
    };
    // The partial vector first, so the full-vector loop carries no tail test.
    const std::size_t n = Step();
    const std::size_t full = k / n * n;
    if (full < k) step(full, k - full);
    for (std::size_t i = 0; i < full; i += n) step(i, n);
    // Row r's 4 sums (before Correct) into out's row r.
    const auto put = [&](int r, V32 t0, V32 t1, V32 t2, V32 t3) HWY_ATTR {
      std::int32_t* o = out + r * out_stride;
      o[0] = static_cast<std::int32_t>(LaneSum(t0));
      o[1] = static_cast<std::int32_t>(LaneSum(t1));
      o[2] = static_cast<std::int32_t>(LaneSum(t2));
      o[3] = static_cast<std::int32_t>(LaneSum(t3));
    };
    put(0, s00, s01, s02, s03);
    if constexpr (kRows >= 2) put(1, s10, s11, s12, s13);
    if constexpr (kRows >= 3) put(2, s20, s21, s22, s23);
    if constexpr (kRows >= 4) put(3, s30, s31, s32, s33);
  }

  /// Takes 128 times each w row's sum off the `rows` rows of Tile's sums of a w tile (a staged
  /// as a + 128; nothing for a staged as it is). w's sums are counted here once for all the
  /// tiles of a, not in each tile's loop, while the tile's rows of w are still in L1.
  static void Correct(const std::int8_t* const* w, std::size_t k, std::int32_t* HWY_RESTRICT sums, std::int64_t rows,
                      std::size_t sums_stride) {
    if constexpr (kUnsignedA) {
      const D32 d32;
      const V32 ones = hn::BitCast(d32, hn::Set(D8(), 1));
      V32 z0 = hn::Zero(d32), z1 = z0, z2 = z0, z3 = z0;
      const std::size_t n = Step();
      for (std::size_t i = 0; i < k; i += n) {
        const std::size_t count = std::min(n, k - i);
        z0 = Dot(z0, ones, LoadW(w[0] + i, count));
        z1 = Dot(z1, ones, LoadW(w[1] + i, count));
        z2 = Dot(z2, ones, LoadW(w[2] + i, count));
        z3 = Dot(z3, ones, LoadW(w[3] + i, count));
      }
      const std::uint32_t offsets[kTileW] = {128u * LaneSum(z0), 128u * LaneSum(z1), 128u * LaneSum(z2),
                                             128u * LaneSum(z3)};
      for (std::int64_t r = 0; r < rows; ++r) {
        for (int t = 0; t < kTileW; ++t) {
          std::int32_t& s = sums[r * sums_stride + t];
          s = static_cast<std::int32_t>(static_cast<std::uint32_t>(s) - offsets[t]);
        }
      }
    }
  }
};
using Int8MmEngine = Int8MmQuads;
#else
using Int8MmEngine = Int8MmWiden;
#endif

/// Most rows of a staged at once, and columns per int32 block (a multiple of any lane count).
inline constexpr std::int64_t kInt8MmBlockRows = 128;
inline constexpr std::int64_t kInt8MmChunkCols = 64;

/// Engine::Tile<rows> for 1 <= rows <= kRows.
template <class Engine, int kRows, typename... Args>
HWY_INLINE void Int8MmRows(int rows, Args... args) {
  if constexpr (kRows > 1) {
    if (rows < kRows) return Int8MmRows<Engine, kRows - 1>(rows, args...);
  }
  Engine::template Tile<kRows>(args...);
}

/// out[m0 + r, n0 + c] = float(sums[r, c]) * scales_a * scales_b (+ bias), for r < rows, c < cols.
template <typename T>
HWY_INLINE void Int8MmEpilogue(const Int8ScaledMmParams& p, const std::int32_t* HWY_RESTRICT sums, std::int64_t m0,
                               std::int64_t rows, std::int64_t n0, std::size_t cols) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const float* sb = p.scales_b + n0 * p.sb_stride;
  const T* bias = p.bias ? static_cast<const T*>(p.bias) + n0 : nullptr;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t* row = sums + r * kInt8MmChunkCols;
    T* y = static_cast<T*>(p.out) + (m0 + r) * p.out_stride + n0;
    const VF sa = hn::Set(df, p.scales_a[(m0 + r) * p.sa_stride]);
    // Full loads of the block row are in bounds (kInt8MmChunkCols is a multiple of the lanes);
    // lanes past `cols` are never stored.
    ForEachChunk(df, cols, [&](std::size_t i, std::size_t n) HWY_ATTR {
      const VF scale_b = p.sb_stride == 0 ? hn::Set(df, *p.scales_b) : Load(df, sb + i, n);
      VF x = hn::Mul(hn::Mul(hn::ConvertTo(df, hn::Load(di, row + i)), sa), scale_b);
      if (bias) x = hn::Add(x, Load(df, bias + i, n));
      Store(df, x, y + i, n);
    });
  }
}

/// Output rows [m_begin, m_end) x columns [n_begin, n_end), by the products of Engine.
template <class Engine, typename T>
HWY_NOINLINE void Int8ScaledMmBy(const Int8ScaledMmParams& p, std::int64_t m_begin, std::int64_t m_end,
                               std::int64_t n_begin, std::int64_t n_end) {
  using Staged = typename Engine::Staged;
  const auto k = static_cast<std::size_t>(p.k);
  const std::size_t step = Engine::Step();
  const std::size_t kp = (k + step - 1) / step * step;  // staged row length
  const auto fit = static_cast<std::int64_t>(Int8MmStageBytes() / (kp * sizeof(Staged)));
  const std::int64_t block_rows =
      std::clamp<std::int64_t>(fit / Engine::kTileA * Engine::kTileA, Engine::kTileA, kInt8MmBlockRows);

  // Per-thread staging buffer, aligned to 64 bytes for whole-vector loads.
  thread_local std::vector<unsigned char> scratch;
  const std::size_t bytes = static_cast<std::size_t>(block_rows) * kp * sizeof(Staged) + 64;
  if (scratch.size() < bytes) scratch.resize(bytes);
  auto* staged = reinterpret_cast<Staged*>((reinterpret_cast<std::uintptr_t>(scratch.data()) + 63) & ~std::uintptr_t{63});

  alignas(64) std::int32_t sums[kInt8MmBlockRows * kInt8MmChunkCols];
  for (std::int64_t m0 = m_begin; m0 < m_end; m0 += block_rows) {
    const std::int64_t rows = std::min(block_rows, m_end - m0);
    for (std::int64_t r = 0; r < rows; ++r) Engine::Stage(p.a + (m0 + r) * p.a_stride, staged + r * kp, k);
    for (std::int64_t n0 = n_begin; n0 < n_end; n0 += kInt8MmChunkCols) {
      const std::int64_t cols = std::min(kInt8MmChunkCols, n_end - n0);
      if (rows == 1) {
        // One row (decoding): w row by row, as one sequential stream.
        for (std::int64_t c = 0; c < cols; ++c) {
          Engine::Stream(static_cast<const Staged*>(staged), p.w + (n0 + c) * p.w_stride, k, sums + c);
        }
      } else {
        for (std::int64_t c = 0; c < cols; c += Engine::kTileW) {
          // This tile's rows of w, then the next tile's (Int8MmPrefetchNext). Rows past the range
          // repeat its last row; their sums land in unused columns.
          const std::int8_t* w[2 * Engine::kTileW];
          for (int t = 0; t < 2 * Engine::kTileW; ++t) w[t] = p.w + std::min(n0 + c + t, n_end - 1) * p.w_stride;
          for (std::int64_t r = 0; r < rows; r += Engine::kTileA) {
            Int8MmRows<Engine, Engine::kTileA>(static_cast<int>(std::min<std::int64_t>(Engine::kTileA, rows - r)),
                                       static_cast<const Staged*>(staged + r * kp), kp,
                                       static_cast<const std::int8_t* const*>(w), k, sums + r * kInt8MmChunkCols + c,
                                       static_cast<std::size_t>(kInt8MmChunkCols), r == 0);
          }
          Engine::Correct(w, k, sums + c, rows, static_cast<std::size_t>(kInt8MmChunkCols));
        }
      }
      Int8MmEpilogue<T>(p, sums, m0, rows, n0, static_cast<std::size_t>(cols));
    }
  }
}

/// Output rows [m_begin, m_end) x columns [n_begin, n_end).
template <typename T>
HWY_NOINLINE void Int8ScaledMm(const Int8ScaledMmParams& p, std::int64_t m_begin, std::int64_t m_end,
                               std::int64_t n_begin, std::int64_t n_end) {
#if HWY_ARCH_X86
  // 2 to 4 rows pass over each w tile once and wait on memory, where the int16 engine's loop
  // reads w faster than vpdpbusd's (docs/tuning/scaled_mm.md). Each engine's body is its own
  // function: inlined into one, GCC compiled both worse.
  if constexpr (!std::is_same_v<Int8MmEngine, Int8MmWiden>) {
    const std::int64_t rows = m_end - m_begin;
    if (rows >= 2 && rows <= Int8MmWiden::kTileA) {
      return Int8ScaledMmBy<Int8MmWiden, T>(p, m_begin, m_end, n_begin, n_end);
    }
  }
#endif
  Int8ScaledMmBy<Int8MmEngine, T>(p, m_begin, m_end, n_begin, n_end);
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
