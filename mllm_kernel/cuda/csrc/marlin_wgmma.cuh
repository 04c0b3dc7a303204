// Hopper (sm_90a) weight-only GEMM on Marlin-format weights, any rows of a in blocks of 32, 64, 128
// or 256 (gptq_marlin routes 17 to 1024 here), one module per activation type T, weight type (as
// for marlin_gemm.cuh) and act-order or not:
//   marlin_wgmma_gemm<T, kBits, kFp8, kActOrder>(a, c, b, scales, zeros, g_idx, partials, locks,
//                                                size_m, size_n, size_k, splits, block_rows, whole,
//                                                enable_pdl)
// c[M, N] = a[M, K] @ ((q - zero) * scale): GPTQ uint4b8 (zero 8), AWQ uint4 (zero points), GPTQ
// uint8b128 (zero 128) or float8_e4m3fn, in groups of a multiple of 64 rows of K or channel-wise,
// or GPTQ act-order (g_idx, a's columns already in the repack's perm order; the general kernel,
// marlin_gemm.cuh, takes every other case). With act-order each stage brings its rows' group
// ids: a stage whose 64 rows all have its first row's group (every stage, for a checkpoint's
// g_idx sorted by the perm and groups of a multiple of 64 rows) runs as a plain group of that
// group's scales; any other scales each weight by its own row's group.
//
// The operands are swapped, c^T = W^T a^T, so the weights are wgmma's register A operand and a's
// rows its shared-memory B operand (K-major, as a's rows are). In a 16 x 64 repacked tile, word
// 4 L + i holds columns 16 i + L / 4 and that + 8 at K rows 2 (L % 4), +1, +8, +9 (marlin.hpp):
// lane L's m64k16 A fragment for warp i of a warpgroup (8-bit weights: words 8 L + 2 i and the
// next). So each warp reads one word a lane a 16-row step (two of 8-bit weights) and dequantizes
// it straight into A registers.
//
// A block is 128 columns by 32, 64, 128 or 256 rows of a, in a loading warpgroup and two
// computing ones. One thread of the loading warpgroup copies each 64-row stage of K (a's rows by
// TMA into the 128-byte swizzle wgmma reads, the weight tiles by bulk copies) onto the stage's
// `full` barrier, so the copies take next to no issue slots from the computing warps; each
// computing warpgroup (64 columns) runs four m64nNk16 wgmmas a stage for each 128 rows (N: the
// block's rows up to 128), one commit group each, and hands the stage back on its `empty`
// barrier once they are done, so no block barrier sits in the loop. Blocks of 256 rows
// dequantize each weight once for twice the products (the dequantization, not the tensor cores,
// bounds a block of 128), at 128 more accumulator registers a thread, which the loading
// warpgroup gives up (setmaxnreg); blocks of 32 or 64 rows, for calls of that many, run as many
// fewer products as their rows. A registers are double-buffered across stages, and the next
// group's scales are loaded a group ahead. Channel-wise scales are applied to the float32 sums
// at the end instead. The sums leave through shared memory (the stages, free by then), so that
// the global stores are whole 16-byte chunks of rows.
//
// The grid is one block a tile for the first `whole` output tiles, then one a split of K for
// each remaining tile (the caller picks both: gptq_marlin.wgmma_plan splits every tile where
// they fill half the SMs or less, else the tiles past the last full wave, up to one wave). Where
// every tile is split, a tile's splits can run as a thread block cluster: each split stages its
// sums in its shared memory, and after the cluster's barrier adds its share of the tile's rows
// from all of them (distributed shared memory), so the tile is added by all its SMs at once and
// no partial sums go through global memory. Otherwise the computing warpgroups of a split
// tile's last block to arrive add the other splits' partial sums to its own, which it keeps on
// chip (take_split_ticket, marlin_split.cuh).
#pragma once

#include <mllm_kernel/cluster.cuh>
#include <mllm_kernel/marlin.hpp>
#include <mllm_kernel/pdl.cuh>
#include <mllm_kernel/runtime.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/tensor_map.cuh>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include "marlin_split.cuh"

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

constexpr int kWgBlockN = 128;                // weight columns a block: two warpgroups of 64
constexpr int kWgStageK = 64;                 // K a stage: one 128-byte swizzled row of a
constexpr int kWgThreads = 384;               // a loading warpgroup and two computing ones
constexpr int kWgComputeThreads = 256;        // the computing warpgroups: threads 128 to 383
constexpr int kWgMaxCluster = 8;              // the cluster size every sm_90 GPU supports

/// A block's rows of a, kRows (32 or 64 for few rows, 128, or 256 where M is large), and what
/// follows from them. wgmma's N is the block's rows up to 128, in m64n128k16 halves beyond: a
/// block of fewer rows runs that many fewer products, where rows past M would only add zeros.
template <int kRows, bool kActOrder = false, int kBits = 4>
struct WgTile {
  static_assert(kRows == 32 || kRows == 64 || kRows == 128 || kRows == 256, "blocks of 32, 64, 128 or 256 rows of a");
  static constexpr int kN = kRows < 128 ? kRows : 128;  // wgmma's N
  static constexpr int kHalves = kRows / kN;            // wgmmas a K step
  static constexpr int kABytes = kRows * kWgStageK * 2;  // 4 to 32 KB
  // A step's two repacked 16 x 64 tiles of weights (1 KB of 4-bit ones, 2 KB of 8-bit), 4 a stage.
  static constexpr int kStepBBytes = 2 * marlin::tile_words(kBits) * 4;
  static constexpr int kBBytes = kWgStageK / marlin::kTileK * kStepBBytes;
  // Act-order: the stage's 64 group ids after the weights (kIdsAt), in 1 KB so that the next
  // stage's rows of a stay 1024-byte aligned.
  static constexpr int kIdsAt = kABytes + kBBytes;
  static constexpr int kIdsBytes = kActOrder ? kWgStageK * 4 : 0;
  static constexpr int kStageBytes = kABytes + kBBytes + (kActOrder ? 1024 : 0);
  // The weights stream from HBM, each block its own: with 4 stages of 128 rows the computing
  // warps waited on them. 256 rows take the 6 that 227 KB of shared memory holds (5 with 8-bit
  // weights); fewer rows 12 (16 to 39, filling 192 KB, were no faster).
  static constexpr int kStages = kRows == 256 ? (kBits == 4 ? 6 : 5) : kRows == 128 ? 8 : 12;
  /// Dynamic shared memory: the stages (1024-byte aligned for the swizzle) and their barriers.
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024 + 2 * kStages * 8;
};

/// The output tiles of a launch (one a block, N / 128 along a row of tiles) and which are split:
/// the first `whole` tiles are computed whole, the rest in MarlinSplit::splits splits of K each,
/// whose partial sums take part_rows (min(kRows, M)) rows of 128 floats a split; with `cluster`
/// (whole 0), a tile's splits are a thread block cluster and add their sums on chip instead.
struct WgTiles {
  int n_blocks;
  int whole;
  int part_rows;
  bool cluster;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLLM_MARLIN_WGMMA 1
#endif

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

#ifdef MLLM_MARLIN_WGMMA
__device__ __forceinline__ void wg_mbar_init(std::uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void wg_mbar_arrive(std::uint64_t* bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void wg_mbar_wait(std::uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
/// Arrives on `bar` and has its phase wait for `bytes` more of bulk copies besides.
__device__ __forceinline__ void wg_mbar_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
/// A box of `map` at (column c0, row c1) into shared `dst`, counted on `bar` (TMA).
__device__ __forceinline__ void wg_tma_load(void* dst, const CUtensorMap* map, int c0, int c1, std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}
/// `bytes` (a multiple of 16) from global `src` into shared `dst`, counted on `bar`.
__device__ __forceinline__ void wg_bulk_load(void* dst, const void* src, std::uint32_t bytes, std::uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

/// wgmma's descriptor of a K-major operand in the 128-byte swizzle: rows of 128 bytes, 8-row
/// groups 1024 bytes apart.
__device__ __forceinline__ std::uint64_t wg_desc(std::uint32_t addr) {
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) | std::uint64_t{1} << 16 |
         static_cast<std::uint64_t>(1024 >> 4) << 32 | std::uint64_t{1} << 62;
}

/// Four m64nNk16 wgmmas, N = kN rows of a (A from registers, B at desc + 32 bytes a step), one
/// commit group; the first adds to d only when `accumulate`.
template <typename T, int kN>
__device__ __forceinline__ void wg_mma4(float (&d)[kN / 2], const std::uint32_t (&a)[4][4], std::uint32_t b_addr,
                                        int accumulate);
// Inline asm takes operands literally, so each N has its lists: d's N / 2 floats (%0 on), then
// a's 16 registers, the 4 descriptors and the flag.
#define MLLM_WG_D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define MLLM_WG_OUT32 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define MLLM_WG_D64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, \
  %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define MLLM_WG_OUT64 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), \
  "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), \
  "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define MLLM_WG_D128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, \
  %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, \
  %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define MLLM_WG_OUT128 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), \
  "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), \
  "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
  "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), \
  "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), \
  "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), \
  "+f"(d[62]), "+f"(d[63])
#define MLLM_WG_IN                                                                                           \
  "r"(a[0][0]), "r"(a[0][1]), "r"(a[0][2]), "r"(a[0][3]), "r"(a[1][0]), "r"(a[1][1]), "r"(a[1][2]), "r"(a[1][3]), \
      "r"(a[2][0]), "r"(a[2][1]), "r"(a[2][2]), "r"(a[2][3]), "r"(a[3][0]), "r"(a[3][1]), "r"(a[3][2]),          \
      "r"(a[3][3]), "l"(desc), "l"(desc + 2), "l"(desc + 4), "l"(desc + 6), "r"(accumulate)
// The four steps' descriptors are the first's plus 32 bytes a step: 2 in its address field, which
// no shared memory address carries out of. A0-A3: a's registers of each step, B0-B3 the
// descriptors, P the flag, as operand numbers.
#define MLLM_WG_MMA4(T, TYPE, N, A0, A1, A2, A3, B0, B1, B2, B3, P)                                              \
  template <>                                                                                                   \
  __device__ __forceinline__ void wg_mma4<T, N>(float (&d)[N / 2], const std::uint32_t (&a)[4][4],              \
                                                std::uint32_t b_addr, int accumulate) {                         \
    const std::uint64_t desc = wg_desc(b_addr);                                                                 \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\nwgmma.fence.sync.aligned;\n"                       \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " MLLM_WG_D##N ", " A0 ", " B0   \
                 ", p, 1, 1, 0;\n"                                                                              \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " MLLM_WG_D##N ", " A1 ", " B1   \
                 ", 1, 1, 1, 0;\n"                                                                              \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " MLLM_WG_D##N ", " A2 ", " B2   \
                 ", 1, 1, 1, 0;\n"                                                                              \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " MLLM_WG_D##N ", " A3 ", " B3   \
                 ", 1, 1, 1, 0;\n"                                                                              \
                 "wgmma.commit_group.sync.aligned;\n}\n"                                                         \
                 : MLLM_WG_OUT##N                                                                               \
                 : MLLM_WG_IN                                                                                   \
                 : "memory");                                                                                   \
  }
#define MLLM_WG_MMA4_BOTH(N, A0, A1, A2, A3, B0, B1, B2, B3, P)  \
  MLLM_WG_MMA4(bf16_t, "bf16", N, A0, A1, A2, A3, B0, B1, B2, B3, P) \
  MLLM_WG_MMA4(fp16_t, "f16", N, A0, A1, A2, A3, B0, B1, B2, B3, P)
MLLM_WG_MMA4_BOTH(32, "{%16, %17, %18, %19}", "{%20, %21, %22, %23}", "{%24, %25, %26, %27}", "{%28, %29, %30, %31}",
                  "%32", "%33", "%34", "%35", "%36")
MLLM_WG_MMA4_BOTH(64, "{%32, %33, %34, %35}", "{%36, %37, %38, %39}", "{%40, %41, %42, %43}", "{%44, %45, %46, %47}",
                  "%48", "%49", "%50", "%51", "%52")
MLLM_WG_MMA4_BOTH(128, "{%64, %65, %66, %67}", "{%68, %69, %70, %71}", "{%72, %73, %74, %75}", "{%76, %77, %78, %79}",
                  "%80", "%81", "%82", "%83", "%84")
#undef MLLM_WG_MMA4_BOTH
#undef MLLM_WG_MMA4
#undef MLLM_WG_IN
#undef MLLM_WG_D32
#undef MLLM_WG_D64
#undef MLLM_WG_D128
#undef MLLM_WG_OUT32
#undef MLLM_WG_OUT64
#undef MLLM_WG_OUT128

template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/// Slots s and s + 4 of `w` (the low nibbles of its halves) as the pair (q - zero) * scale: q
/// under T's exponent is 128 + q (bf16) or 1024 + q (fp16) exactly, and `base` is that plus the
/// zero point.
template <typename T>
__device__ __forceinline__ std::uint32_t wg_dequant(std::uint32_t w, Pair<T> base, Pair<T> scale) {
  return as_bits<T>(__hmul2(__hsub2(as_pair<T>(nibble_pair<T>(w)), base), scale));
}
/// A lane's four A registers of a 16-row step from its kBits / 4 words w: (q - zero) * scale,
/// register r scaled by sc[r] (0: column col, K rows 2q and 2q + 1; 1: col + 8; 2: col, rows
/// 2q + 8 and 2q + 9; 3: col + 8). 4-bit: one word, zero points in z_lo and z_hi (as
/// wg_dequant); 8-bit: dequant_block's 8-column blocks, col's in w[0] and col + 8's in w[1]
/// (integers minus 128, or float8 times a power of two its scales carry).
template <typename T, int kBits, bool kFp8>
__device__ __forceinline__ void wg_dequant_step(const std::uint32_t* w, Pair<T> z_lo, Pair<T> z_hi,
                                                const Pair<T> (&sc)[4], std::uint32_t (&ab)[4]) {
  if constexpr (kBits == 4) {
    ab[0] = wg_dequant<T>(w[0], z_lo, sc[0]);
    ab[1] = wg_dequant<T>(w[0] >> 8, z_hi, sc[1]);
    ab[2] = wg_dequant<T>(w[0] >> 4, z_lo, sc[2]);
    ab[3] = wg_dequant<T>(w[0] >> 12, z_hi, sc[3]);
  } else {
    std::uint32_t lo, hi;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      dequant_block<T, 8, kFp8>(w, h, z_lo, z_hi, lo, hi);
      ab[h] = as_bits<T>(__hmul2(as_pair<T>(lo), sc[h]));
      ab[h + 2] = as_bits<T>(__hmul2(as_pair<T>(hi), sc[h + 2]));
    }
  }
}
/// Gives this warpgroup's registers back to the block's pool down to kCount a thread, or takes
/// them from it up to kCount (waiting until the pool has them).
template <int kCount>
__device__ __forceinline__ void wg_release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kCount));
}
template <int kCount>
__device__ __forceinline__ void wg_claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kCount));
}
/// The two computing warpgroups' barrier (named barrier 1; the loading warpgroup has left).
__device__ __forceinline__ void wg_compute_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kWgComputeThreads) : "memory");
}
/// The two 32-bit words at `addr` (8-byte aligned) in shared memory.
__device__ __forceinline__ void wg_lds2(std::uint32_t addr, std::uint32_t (&v)[2]) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v[0]), "=r"(v[1]) : "r"(addr));
}
/// The 32-bit word at `addr` in shared memory.
__device__ __forceinline__ std::uint32_t wg_lds(std::uint32_t addr) {
  std::uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
/// Row pitch, in bytes, of a 128-column tile of V staged in shared memory: padded by 16 bytes.
template <typename V>
constexpr int kWgStagedPitch = kWgBlockN * static_cast<int>(sizeof(V)) + 16;

/// Writes this thread's sums (d[h][4 j + e]: tile column c + 8 (e / 2), tile row 128 h + 8 j +
/// 2 (lane % 4) + e % 2), times scale_lo or scale_hi by column, as V into the staged tile at smem.
template <typename V, int kHalves, int kN>
__device__ __forceinline__ void stage_tile(unsigned char* smem, const float (&d)[kHalves][kN / 2], std::int64_t c,
                                           int lane, float scale_lo, float scale_hi) {
  using namespace mllm_kernel::device;
  constexpr int kPitch = kWgStagedPitch<V>;
  unsigned char* at = smem + (2 * (lane % 4)) * kPitch + c * static_cast<int>(sizeof(V));
#pragma unroll
  for (int h = 0; h < kHalves; ++h)
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float v = d[h][4 * j + e] * (e / 2 ? scale_hi : scale_lo);
        V* to = reinterpret_cast<V*>(at + (kN * h + 8 * j + e % 2) * kPitch) + (e / 2) * 8;
        if constexpr (std::is_same_v<V, float>) {
          *to = v;
        } else {
          *to = from_float<V>(v);
        }
      }
}

/// Copies the first `rows` rows of the staged tile at smem to dst (rows `pitch` elements apart,
/// 16-byte aligned), a 16-byte chunk a thread at a time over the kWgComputeThreads.
template <typename V>
__device__ __forceinline__ void copy_tile_rows(const unsigned char* smem, V* dst, std::int64_t pitch, int rows,
                                               int thread) {
  constexpr int kChunks = kWgBlockN * static_cast<int>(sizeof(V)) / 16;  // a row's
  for (int i = thread; i < rows * kChunks; i += kWgComputeThreads) {
    const int r = i / kChunks, ch = i % kChunks;
    const int4 v = *reinterpret_cast<const int4*>(smem + r * kWgStagedPitch<V> + ch * 16);
    *reinterpret_cast<int4*>(reinterpret_cast<unsigned char*>(dst + r * pitch) + ch * 16) = v;
  }
}
#endif  // MLLM_MARLIN_WGMMA

template <typename T, int kBits, bool kFp8, int kRows, bool kActOrder>
__global__ void __launch_bounds__(kWgThreads, 1)
    marlin_wgmma_kernel(const __grid_constant__ MarlinGemmParams p, const __grid_constant__ MarlinSplit split,
                        const __grid_constant__ WgTiles tiles, const __grid_constant__ CUtensorMap a_map,
                        const __grid_constant__ CUtensorMap a_tail_map) {
#ifdef MLLM_MARLIN_WGMMA
  using namespace mllm_kernel::device;
  extern __shared__ __align__(1024) unsigned char wg_smem_raw[];
  unsigned char* smem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(wg_smem_raw) + 1023) & ~std::uintptr_t{1023});
  using Tile = WgTile<kRows, kActOrder, kBits>;
  constexpr int kStages = Tile::kStages, kStageBytes = Tile::kStageBytes;
  std::uint64_t* full = reinterpret_cast<std::uint64_t*>(smem + kStages * kStageBytes);
  std::uint64_t* empty = full + kStages;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, role = warp / 4;
  // Blocks of 256 rows move registers from the loading warpgroup to the computing ones, whose
  // accumulators need 128 a thread more, for good: the loading warpgroup has nothing left to do
  // once its copies are issued (the computing ones add the splits). A claim the block's
  // allocation (168 a thread at launch) cannot meet would wait forever.
  constexpr bool kMoveRegisters = kRows == 256;
  constexpr int kLoaderRegs = 56, kComputeRegs = 224;
  static_assert(kLoaderRegs + 2 * kComputeRegs <= 3 * (65536 / kWgThreads / 8 * 8),
                "the computing warpgroups claim what the loading one gives up");
  // This block's output tile and split of K: the first tiles.whole blocks a tile each, whole;
  // then split.splits blocks a tile, in split order.
  const int block = static_cast<int>(blockIdx.x);
  const bool whole = block < tiles.whole;
  const int tile = whole ? block : tiles.whole + (block - tiles.whole) / split.splits;
  const int z = whole ? 0 : (block - tiles.whole) % split.splits;
  const std::int64_t n0 = static_cast<std::int64_t>(tile % tiles.n_blocks) * kWgBlockN;
  const std::int64_t m0 = static_cast<std::int64_t>(tile / tiles.n_blocks) * kRows;
  const int rows = static_cast<int>(p.m - m0 < kRows ? p.m - m0 : kRows);
  // A block of fewer rows than kRows (the last) copies them rounded up to 8 (a_tail_map's box):
  // TMA's zero fill of a box's rows past M is slower than copying real rows (docs/tuning/
  // marlin.md). The rows past the box are zeroed once in every stage below; they meet only the
  // sums of rows past M, never stored.
  const int box_rows = (rows + 7) / 8 * 8;
  const CUtensorMap* const a_box = box_rows == kRows ? &a_map : &a_tail_map;
  const std::uint32_t stage_bytes = box_rows * kWgStageK * 2 + Tile::kBBytes + Tile::kIdsBytes;
  // Its 64-row stages of K [t0, t1): split z of split.splits takes the z-th even share of the
  // pairs of stages (the loop below runs stages in pairs; the wrapper leaves each split a pair
  // or more).
  const int pairs = static_cast<int>(p.k / (2 * kWgStageK));
  const int t0 = whole ? 0 : 2 * (pairs * z / split.splits);
  const int t1 = whole ? 2 * pairs : 2 * (pairs * (z + 1) / split.splits);
  const std::int64_t words_per_step = p.n * marlin::kTileK * kBits / 32;
  const bool channelwise = p.groups == 1;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      wg_mbar_init(&full[s], 1);
      wg_mbar_init(&empty[s], kWgComputeThreads);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (box_rows < kRows) {
    // Zeros, as TMA's fill would leave them: the wgmmas ran slower on stale values there.
    const int chunks = (kRows - box_rows) * (kWgStageK * 2 / 16);  // 16-byte chunks a stage
    for (int i = tid; i < kStages * chunks; i += kWgThreads) {
      *reinterpret_cast<int4*>(smem + i / chunks * kStageBytes + box_rows * kWgStageK * 2 + i % chunks * 16) =
          make_int4(0, 0, 0, 0);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // before wgmma reads them
  }
  __syncthreads();
  pdl_wait_and_release();

  float d[Tile::kHalves][Tile::kN / 2];  // the first stage's first wgmmas write them
  if (role == 0) {
    if constexpr (kMoveRegisters) wg_release_registers<kLoaderRegs>();
    if (tid == 0) {
      // One thread copies each stage: a's rows by TMA (the box of kRows rows x 64 columns at
      // (k0, m0), in the 128-byte swizzle, rows past M zero) and the stage's weights, each step's
      // two tiles (1 KB of 4-bit weights, 2 KB of 8-bit) in a row, by bulk copies (with act-order,
      // its rows' group ids as well); the stage's `full` barrier counts their bytes.
      for (int t = t0; t < t1; ++t) {
        const int slot = (t - t0) % kStages, round = (t - t0) / kStages;
        wg_mbar_wait(&empty[slot], (round & 1) ^ 1);
        unsigned char* base = smem + slot * kStageBytes;
        wg_mbar_expect_tx(&full[slot], stage_bytes);
        wg_tma_load(base, a_box, t * kWgStageK, static_cast<int>(m0), &full[slot]);
#pragma unroll
        for (int step = 0; step < kWgStageK / marlin::kTileK; ++step) {
          const std::int32_t* src = p.b + (static_cast<std::int64_t>(t) * (kWgStageK / marlin::kTileK) + step) *
                                              words_per_step + n0 / marlin::kTileN * marlin::tile_words(kBits);
          wg_bulk_load(base + Tile::kABytes + step * Tile::kStepBBytes, src, Tile::kStepBBytes, &full[slot]);
        }
        if constexpr (kActOrder) {
          wg_bulk_load(base + Tile::kIdsAt, p.g_idx + t * kWgStageK, Tile::kIdsBytes, &full[slot]);
        }
      }
    }
    if (tiles.cluster) {  // every thread of the cluster takes part in its two barriers (below)
      cluster::sync();
      cluster::sync();
    }
  } else {
    if constexpr (kMoveRegisters) wg_claim_registers<kComputeRegs>();
    const int wg = role - 1, wi = warp % 4;
    const std::int64_t col = n0 + wg * 64 + wi * 16 + lane / 4;  // this lane's columns: col, col + 8
    const T* scales = static_cast<const T*>(p.scales);
    // Stages a group spans (none for channel-wise scales or act-order, whose stages carry theirs).
    const int group_stages = channelwise || kActOrder ? 0 : static_cast<int>(p.group_size / kWgStageK);
    // Group g's scales and zero points (AWQ) for this lane's two columns, read a group ahead of
    // use into next_* through pointers stepped a row a group; a zero point's word is turned into
    // the value to subtract only when used, so no read waits where it is issued. GPTQ's zero
    // point is 8 for every value.
    const std::uint32_t gptq_base = std::is_same_v<T, bf16_t> ? 0x43084308u : 0x64086408u;  // 128 + 8, 1024 + 8
    const bool awq = p.zeros != nullptr;
    const int zs_lo = 4 * marlin::zero_point_slot(4, col), zs_hi = 4 * marlin::zero_point_slot(4, col + 8);
    const int group = group_stages == 0 ? 0 : t0 / group_stages;  // the first
    const T* scale_lo_at = scales + (channelwise ? 0 : group * p.n + marlin::grouped_scale_pos(col));
    const T* scale_hi_at = scales + (channelwise ? 0 : group * p.n + marlin::grouped_scale_pos(col + 8));
    // (Act-order: column col + 8's scale follows col's in a row of them (grouped_scale_pos), at an
    // even position, so one 32-bit read from scale_lo_at takes both.)
    const std::int32_t* zero_lo_at = awq ? p.zeros + group * (p.n / 8) + marlin::zero_point_word(4, col) : nullptr;
    const std::int32_t* zero_hi_at = awq ? p.zeros + group * (p.n / 8) + marlin::zero_point_word(4, col + 8) : nullptr;
    const T one = from_float<T>(1.0f);
    T next_lo = one, next_hi = one;
    std::uint32_t next_zlo = 0, next_zhi = 0;
    const auto read_group = [&]() {
      if (!channelwise && !kActOrder) {  // (channel-wise scales are applied to the sums at the end)
        next_lo = *scale_lo_at;
        next_hi = *scale_hi_at;
        scale_lo_at += p.n;
        scale_hi_at += p.n;
      }
      if (awq) {  // AWQ has zero points channel-wise too
        next_zlo = static_cast<std::uint32_t>(*zero_lo_at);
        next_zhi = static_cast<std::uint32_t>(*zero_hi_at);
        zero_lo_at += p.n / 8;
        zero_hi_at += p.n / 8;
      }
    };
    Pair<T> s_lo, s_hi, z_lo, z_hi;
    // The group read last becomes the one in use, and the next one is read.
    const auto start_group = [&](bool read_next) {
      s_lo = pair_of<T>(next_lo, next_lo);
      s_hi = pair_of<T>(next_hi, next_hi);
      z_lo = as_pair<T>(awq ? zero_point_pair<T>(next_zlo >> zs_lo) : gptq_base);
      z_hi = as_pair<T>(awq ? zero_point_pair<T>(next_zhi >> zs_hi) : gptq_base);
      if (read_next) read_group();
    };
    // The stages come in order: the group and the stage that starts the next one are counted,
    // and the slot and its phase stepped, not divided for, every stage.
    int group_end = group_stages == 0 ? t1 : (group + 1) * group_stages;
    read_group();
    start_group(group_end < t1);
    int slot = 0, phase = 0, last_slot = kStages - 1;
    // This lane's words of a step's tile for its warp (step kk's at + kk * kStepBBytes): word 4 L + i
    // of 4-bit weights, words 8 L + 2 i and the next of 8-bit ones.
    constexpr int kLaneWords = kBits / 4;
    const std::uint32_t words_at =
        smem_addr(smem) + Tile::kABytes + (wg * marlin::tile_words(kBits) + kLaneWords * (4 * lane + wi)) * 4;
    std::uint32_t a[2][4][4];
    const auto stage = [&](int t, std::uint32_t (&ab)[4][4]) {
      wg_mbar_wait(&full[slot], phase);
      const std::uint32_t stage_at = slot * kStageBytes;
      std::uint32_t word[4][kLaneWords];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (kBits == 4) {
          word[kk][0] = wg_lds(words_at + stage_at + kk * Tile::kStepBBytes);
        } else {
          wg_lds2(words_at + stage_at + kk * Tile::kStepBBytes, word[kk]);
        }
      }
      if (t == group_end) {
        group_end += group_stages;
        start_group(group_end < t1);
      }
      bool one_group = true;
      if constexpr (kActOrder) {
        // One group when the ids of all the stage's rows (two a lane) equal the first's. A row's
        // two scales (col's, col + 8's) come in one 32-bit read: the plain group's here, where
        // the stage's weights have come (copying the group's row of scales with them, or reading
        // it ahead into L2, was slower or level).
        const std::uint32_t ids_at = smem_addr(smem) + stage_at + Tile::kIdsAt;
        const auto row_scales = [&](std::uint32_t id) {
          const int group = valid_group(p, static_cast<int>(id));
          return __ldg(reinterpret_cast<const std::uint32_t*>(scale_lo_at + group * static_cast<int>(p.n)));
        };
        const std::uint32_t first = wg_lds(ids_at);
        const bool mine = (wg_lds(ids_at + 8 * lane) == first) & (wg_lds(ids_at + 8 * lane + 4) == first);
        one_group = __all_sync(0xffffffffu, mine);
        if (one_group) {
          const std::uint32_t both = row_scales(first);
          s_lo = as_pair<T>(__byte_perm(both, 0, 0x1010));
          s_hi = as_pair<T>(__byte_perm(both, 0, 0x3232));
        } else {
          // Each weight by its own row's group: the lane's K rows 2q, 2q + 1, 2q + 8, 2q + 9 of a
          // step.
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) {
            const std::uint32_t row_at = ids_at + (16 * kk + 2 * (lane % 4)) * 4;
            const std::uint32_t r0 = row_scales(wg_lds(row_at)), r1 = row_scales(wg_lds(row_at + 4));
            const std::uint32_t r8 = row_scales(wg_lds(row_at + 32)), r9 = row_scales(wg_lds(row_at + 36));
            const Pair<T> sc[4] = {as_pair<T>(__byte_perm(r0, r1, 0x5410)), as_pair<T>(__byte_perm(r0, r1, 0x7632)),
                                   as_pair<T>(__byte_perm(r8, r9, 0x5410)), as_pair<T>(__byte_perm(r8, r9, 0x7632))};
            wg_dequant_step<T, kBits, kFp8>(word[kk], z_lo, z_hi, sc, ab[kk]);
          }
        }
      }
      if (one_group) {
        const Pair<T> sc[4] = {s_lo, s_hi, s_lo, s_hi};
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) wg_dequant_step<T, kBits, kFp8>(word[kk], z_lo, z_hi, sc, ab[kk]);
      }
      // One commit group a 128-row half of a's rows (16 KB apart), on the same A registers.
#pragma unroll
      for (int h = 0; h < Tile::kHalves; ++h) {
        wg_mma4<T, Tile::kN>(d[h], ab, smem_addr(smem) + stage_at + h * Tile::kN * 128, t != t0);
      }
      wg_wait<Tile::kHalves>();
      // The previous stage's wgmmas are done: its slot goes back to the loading warpgroup.
      if (t > t0) wg_mbar_arrive(&empty[last_slot]);
      last_slot = slot;
      if (++slot == kStages) {
        slot = 0;
        phase ^= 1;
      }
    };
    // The first two stages outside the loop: inside it every wgmma adds to d, which keeps ptxas
    // from serialising them (an uninitialised d entering a loop whose first wgmma overwrites it
    // also gave wrong sums).
    stage(t0, a[0]);
    stage(t0 + 1, a[1]);
    for (int t = t0 + 2; t + 1 < t1; t += 2) {
      stage(t, a[0]);
      stage(t + 1, a[1]);
    }
    wg_wait<0>();

    // The tile leaves through shared memory, so that global stores are whole 16-byte chunks of its
    // rows: written from d at a row pitch padded by 16 bytes (a warp's four rows of a store, two
    // apart, then start 8 banks apart), read back a chunk a thread. d[h]: row (weight column) col
    // or col + 8, column (row of a) 128 h + 8 j + 2 (lane % 4) + e % 2. Once both computing
    // warpgroups are past their last wgmma, the stages are free.
    const int compute_thread = tid - (kWgThreads - kWgComputeThreads);
    wg_compute_sync();
    if (whole) {
      const float scale_lo = channelwise ? cast<float>(scales[marlin::channel_scale_pos(col)]) : 1.0f;
      const float scale_hi = channelwise ? cast<float>(scales[marlin::channel_scale_pos(col + 8)]) : 1.0f;
      stage_tile<T, Tile::kHalves, Tile::kN>(smem, d, col - n0, lane, scale_lo, scale_hi);
      wg_compute_sync();
      copy_tile_rows<T>(smem, static_cast<T*>(p.c) + m0 * p.n + n0, p.n, rows, compute_thread);
      return;
    }
    if (tiles.cluster) {
      // The tile's splits are this cluster, split z its block z. Once every split's sums are
      // staged, each adds its share of the tile's rows (16-byte items, rows of 32) from all of
      // them in split order; the second barrier keeps every block's sums in place until the
      // others have read them.
      stage_tile<float, Tile::kHalves, Tile::kN>(smem, d, col - n0, lane, 1.0f, 1.0f);
      cluster::sync();
      constexpr int kRowItems = kWgBlockN / 4;
      const int items = rows * kRowItems;
      add_splits<T, kWgComputeThreads, 4, 4>(
          p, split.splits, items * z / split.splits, items * (z + 1) / split.splits, compute_thread, m0, n0,
          kWgBlockN, [&](int j, int i) {
            return cluster::load_shared4(
                cluster::map_shared(smem + i / kRowItems * kWgStagedPitch<float> + i % kRowItems * 16, j));
          });
      cluster::sync();
      return;
    }
    // A split tile's partial sums: [splits, part_rows, 128], the split tiles one after another.
    const std::int64_t split_floats = static_cast<std::int64_t>(tiles.part_rows) * kWgBlockN;
    float* part = split.partials + static_cast<std::int64_t>(tile - tiles.whole) * split.splits * split_floats;
    // The last split to arrive keeps its sums in shared memory and adds the others' to them.
    std::int32_t* lock = split.locks + (tile - tiles.whole);
    const auto sync = [] { wg_compute_sync(); };
    const bool leader = compute_thread == 0;
    const int ticket = take_split_ticket(lock, leader);
    stage_tile<float, Tile::kHalves, Tile::kN>(smem, d, col - n0, lane, 1.0f, 1.0f);
    if (!last_split(ticket, split.splits, leader, sync)) {  // (its barrier also ends the staging)
      copy_tile_rows<float>(smem, part + z * split_floats, kWgBlockN, rows, compute_thread);
      publish_split(lock, split.splits, leader, sync);
      return;
    }
    await_splits(lock, split.splits, leader, sync);
    add_split_partials<T, kWgComputeThreads, 8, 2, true>(p, part, split.splits, split_floats, kWgBlockN,
                                                         compute_thread, m0, rows, n0, kWgBlockN, smem, z,
                                                         kWgStagedPitch<float>);
  }
#endif  // MLLM_MARLIN_WGMMA
}

/// Whether the kernel takes blocks of block_rows rows.
constexpr bool wgmma_block_rows(std::int64_t block_rows) {
  return block_rows == 32 || block_rows == 64 || block_rows == 128 || block_rows == 256;
}

/// f(std::integral_constant<int, kRows>) for the run-time block_rows (one wgmma_block_rows takes).
template <typename F>
auto with_wgmma_rows(std::int64_t block_rows, F&& f) {
  switch (block_rows) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 256: return f(std::integral_constant<int, 256>{});
    default: return f(std::integral_constant<int, 128>{});
  }
}

/// Clusters of `splits` blocks of block_rows rows (32, 64, 128 or 256) that GPU device_id runs at
/// once (the occupancy calculator's count: a cluster's blocks must share a GPC, so this can be
/// fewer than the SMs / splits); the caller runs a plan's splits as clusters only where they all
/// fit.
template <typename T>
std::int64_t marlin_wgmma_clusters_at_once(std::int64_t device_id, std::int64_t splits, std::int64_t block_rows) {
  using namespace mllm_kernel::host;
  RuntimeCheck(splits >= 2 && splits <= kWgMaxCluster, "clusters of 2 to ", kWgMaxCluster, " splits, got ", splits);
  RuntimeCheck(wgmma_block_rows(block_rows), "the wgmma kernel takes blocks of 32, 64, 128 or 256 rows, got ",
               block_rows);
  detail::DeviceGuard guard(static_cast<int>(device_id));
  return with_wgmma_rows(block_rows, [&](auto rows) -> std::int64_t {
    constexpr int kRows = decltype(rows)::value;
    return runtime::get_max_active_clusters(marlin_wgmma_kernel<T, 4, false, kRows, false>, kWgThreads,
                                            WgTile<kRows>::kSmemBytes, static_cast<unsigned>(splits));
  });
}

/// block_rows: 32, 64, 128 or 256 rows of a a block; tiles = N / 128 x ceil(M / block_rows) output
/// tiles, of which the first `whole` (0 to tiles) are computed whole and the rest in `splits`
/// splits of K each (one block a split: the tail of a wave split to fill the SMs, or, with whole
/// 0, every tile). `cluster` (whole 0, 2 to 8 splits): each tile's splits run as a cluster and
/// add their sums on chip. Otherwise, with splits > 1 and whole < tiles: partials float32
/// [(tiles - whole) * splits * min(block_rows, M) * 128]; locks int32, one per split tile, zero,
/// and left zero (else either may be empty). The caller routes here only what the kernel takes
/// (see the file comment); the checks say so for anything else.
template <typename T, int kBits, bool kFp8, bool kActOrder>
void marlin_wgmma_gemm(mllm_kernel::TensorView a, mllm_kernel::TensorView c, mllm_kernel::TensorView b,
                       mllm_kernel::TensorView scales, mllm_kernel::TensorView zeros, mllm_kernel::TensorView g_idx,
                       mllm_kernel::TensorView partials, mllm_kernel::TensorView locks, std::int64_t size_m,
                       std::int64_t size_n, std::int64_t size_k, std::int64_t splits, std::int64_t block_rows,
                       std::int64_t whole, bool cluster, bool enable_pdl) {
  using namespace mllm_kernel::host;
  static_assert(kBits == 4 || kBits == 8, "4- or 8-bit weights");
  static_assert(!kFp8 || kBits == 8, "float8 weights are 8-bit");
  const MarlinGemmParams p =
      check_marlin_gemm<kDLCUDA, T>(a, c, b, scales, zeros, g_idx, kBits, size_m, size_n, size_k);
  const bool act_order = p.g_idx != nullptr && p.groups > 1;
  RuntimeCheck(act_order == kActOrder, "this marlin_wgmma module is built ", kActOrder ? "for" : "without",
               " act-order (g_idx with more than one group); the call ", act_order ? "has it" : "has none");
  RuntimeCheck(!kActOrder || p.zeros == nullptr, "the wgmma kernel takes no zero points with g_idx");
  // (with act-order, stages bring g_idx by bulk copies, and rows of scales are read 4 bytes at a time)
  RuntimeCheck(!kActOrder || (reinterpret_cast<std::uintptr_t>(p.g_idx) % 16 == 0 &&
                              reinterpret_cast<std::uintptr_t>(p.scales) % 4 == 0),
               "g_idx must start 16-byte aligned and b_scales 4-byte aligned");
  RuntimeCheck(kActOrder || p.groups == 1 || p.group_size % kWgStageK == 0,
               "the wgmma kernel needs groups of a multiple of 64 rows or channel-wise scales, got group size ",
               p.group_size);
  RuntimeCheck(size_n % kWgBlockN == 0, "the wgmma kernel needs size_n a multiple of 128, got ", size_n);
  RuntimeCheck(!cluster || (whole == 0 && splits >= 2 && splits <= kWgMaxCluster),
               "the wgmma kernel runs splits as clusters only where every tile is split, in 2 to ", kWgMaxCluster,
               " splits, got whole ", whole, " and ", splits, " splits");
  RuntimeCheck(splits >= 1 && size_k % (2 * kWgStageK) == 0 && size_k >= 2 * kWgStageK * splits,
               "the wgmma kernel needs size_k a multiple of ", 2 * kWgStageK, " and as many rows a split (at least ",
               2 * kWgStageK * splits, " for ", splits, " splits), got ", size_k);
  RuntimeCheck(p.lda % 8 == 0 && reinterpret_cast<std::uintptr_t>(p.a) % 16 == 0,
               "a: rows must start 16-byte aligned (row stride a multiple of 8), got row stride ", p.lda);
  RuntimeCheck(p.lda >= size_k, "a: the wgmma kernel reads rows that do not overlap (row stride at least size_k ",
               size_k, "), got row stride ", p.lda);
  RuntimeCheck(wgmma_block_rows(block_rows), "the wgmma kernel takes blocks of 32, 64, 128 or 256 rows, got ",
               block_rows);
  const std::int64_t tiles = size_n / kWgBlockN * div_ceil(size_m, block_rows);
  RuntimeCheck(whole >= 0 && whole <= tiles, "the wgmma kernel's whole tiles must be 0 to its ", tiles,
               " tiles, got ", whole);
  if (p.m == 0) return;
  if (splits == 1) whole = tiles;
  const std::int64_t part_rows = size_m < block_rows ? size_m : block_rows;
  // (rows_per_split unused: the kernel shares K's pairs of stages out itself, unevenly where need be)
  MarlinSplit split{nullptr, nullptr, 0, static_cast<int>(splits), enable_pdl};
  if (whole < tiles && !cluster) {
    bind_split_buffers(split, a, partials, locks, (tiles - whole) * splits * part_rows * kWgBlockN, tiles - whole);
  }
  const WgTiles wg_tiles{static_cast<int>(size_n / kWgBlockN), static_cast<int>(whole), static_cast<int>(part_rows),
                         cluster};
  const dim3 grid(static_cast<unsigned>(whole + (tiles - whole) * splits));
  const CUtensorMap a_map =
      row_tile_tensor_map<T>(p.a, p.m, p.k, p.lda, static_cast<std::uint32_t>(block_rows), kWgStageK);
  // The last block's rows, rounded up to 8 (the kernel's a_tail_map; a_map again where M is a
  // multiple of block_rows, and no second encoding on the host).
  const std::int64_t tail_rows = p.m % block_rows;
  const CUtensorMap a_tail_map =
      tail_rows == 0 ? a_map
                     : row_tile_tensor_map<T>(p.a, p.m, p.k, p.lda, static_cast<std::uint32_t>((tail_rows + 7) / 8 * 8),
                                              kWgStageK);
  const auto launch = [&](auto rows) {
    constexpr int kRows = decltype(rows)::value;
    LaunchKernel(grid, kWgThreads, a.device(), WgTile<kRows, kActOrder, kBits>::kSmemBytes)
        .enable_pdl(enable_pdl)
        .cluster_blocks(cluster ? static_cast<unsigned>(splits) : 1u)(
            marlin_wgmma_kernel<T, kBits, kFp8, kRows, kActOrder>, p, split, wg_tiles, a_map, a_tail_map);
  };
  with_wgmma_rows(block_rows, launch);
}

}  // namespace
