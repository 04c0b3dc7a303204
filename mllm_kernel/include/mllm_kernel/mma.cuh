// Warp-level tensor-core primitives (sm_80+) for float32 data in shared memory, multiplied as
// TF32 with float32 accumulation: the PTX m16n8k8 TF32 MMA and ldmatrix loads of its fragments.
//
// Fragments (g = lane / 4, t = lane % 4), as the PTX ISA fixes them:
//   A, 16x8 row-major:  a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//   B, 8x8 (k x n):     b0 (k = t, n = g), b1 (k = t + 4, n = g)
//   C, 16x8:            c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
// ldmatrix moves 8x8 matrices of 16-bit elements; read as 32-bit elements, an 8-row x 4-column
// float matrix lands with lane l holding row l / 4, column l % 4: A's layout, and B's when B is
// stored n-major (row n holds B[., n]). Rows must be 16-byte aligned; a row pitch of 4 floats
// more than a multiple of 32 keeps the eight rows of a matrix in different banks.
#pragma once

#include <mllm_kernel/host_device.hpp>

#include <cstdint>

namespace mllm_kernel::device::mma {

/// x rounded to the nearest TF32 value (kept in a float).
MLLM_DEVICE float to_tf32(float x) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

/// Rounds loaded fragment registers holding float32 to TF32.
template <int N>
MLLM_DEVICE void round_tf32(std::uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = __float_as_uint(to_tf32(__uint_as_float(r[i])));
}

MLLM_DEVICE void ldmatrix_x4(std::uint32_t (&r)[4], const float* row) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

/// The A fragment of the 16x8 tile at `tile` (row-major, row pitch `ld` floats).
MLLM_DEVICE void load_a(std::uint32_t (&a)[4], const float* tile, int ld) {
  const int lane = threadIdx.x % 32, matrix = lane / 8;
  ldmatrix_x4(a, tile + (matrix % 2 * 8 + lane % 8) * ld + matrix / 2 * 4);
}

/// The B fragments of two 8x8 tiles side by side, n = 0..7 and 8..15, from n-major storage:
/// row n of `tile` (pitch `ld` floats) holds B[0..7, n]. b[0], b[1]: first tile; b[2], b[3]:
/// second.
MLLM_DEVICE void load_b2(std::uint32_t (&b)[4], const float* tile, int ld) {
  const int lane = threadIdx.x % 32, matrix = lane / 8;
  ldmatrix_x4(b, tile + (matrix / 2 * 8 + lane % 8) * ld + matrix % 2 * 4);
}

/// c += a b, one m16n8k8 TF32 MMA.
MLLM_DEVICE void mma_tf32(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// acc[j] += A B_j for the first `tiles` (even) 16x8 tiles, over `steps` k-steps of 8: A is the
/// 16-row strip at `a` (row-major, pitch lda); B is stored n-major at `b` (pitch ldb), tile j's
/// columns in its rows 8j..8j+7. kRoundA / kRoundB: that operand is float32 in memory and is
/// rounded to TF32 as it is loaded (otherwise it was stored rounded).
template <bool kRoundA, bool kRoundB, int kTiles>
MLLM_DEVICE void mma_strip(float (&acc)[kTiles][4], const float* a, int lda, const float* b, int ldb, int steps,
                           int tiles = kTiles) {
#pragma unroll 2
  for (int ks = 0; ks < steps; ++ks) {
    std::uint32_t fa[4];
    load_a(fa, a + ks * 8, lda);
    if constexpr (kRoundA) round_tf32(fa);
#pragma unroll
    for (int j = 0; j < kTiles / 2; ++j) {
      if (2 * j >= tiles) break;
      std::uint32_t fb[4];
      load_b2(fb, b + j * 16 * ldb + ks * 8, ldb);
      if constexpr (kRoundB) round_tf32(fb);
      mma_tf32(acc[2 * j], fa, fb[0], fb[1]);
      mma_tf32(acc[2 * j + 1], fa, fb[2], fb[3]);
    }
  }
}

/// Four 8x8 matrices of 16-bit elements from shared memory: lane l gives the address of row
/// l % 8 of matrix l / 8 and receives, of each matrix, row l / 4, elements 2 (l % 4), +1.
MLLM_DEVICE void ldmatrix_x4_b16(std::uint32_t (&r)[4], const void* row) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

/// c += a b, one m16n8k16 MMA on float16 (kBf16 = false) or bfloat16 operands with float32
/// accumulation. A 16x16 row-major: a0 (g, 2t..2t+1), a1 (g + 8, ..), a2 (g, 2t + 8..), a3
/// (g + 8, 2t + 8..); B 16x8: b0 (k = 2t..2t+1, n = g), b1 (k = 2t + 8.., n = g); the lower
/// half of each register holds the lower k (or column).
template <bool kBf16>
MLLM_DEVICE void mma_m16n8k16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// c += a b, one m16n8k32 MMA on 8-bit operands. A 16x32 row-major: a0 (g, 4t..4t+3), a1
/// (g + 8, ..), a2 (g, 4t + 16..), a3 (g + 8, 4t + 16..); B 32x8: b0 (k = 4t..4t+3, n = g), b1
/// (k = 4t + 16.., n = g); the lowest byte of each register holds the lowest k. int8 operands
/// accumulate exactly in int32.
MLLM_DEVICE void mma_m16n8k32(int (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// The same on float8 e4m3 operands with float32 accumulation (sm_89+; traps on older GPUs).
MLLM_DEVICE void mma_m16n8k32(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/// Row and column within a 16x8 C tile of accumulator element i (0..3) of this lane.
MLLM_DEVICE int c_row(int i) { return threadIdx.x % 32 / 4 + (i / 2) * 8; }
MLLM_DEVICE int c_col(int i) { return threadIdx.x % 4 * 2 + i % 2; }

/// Loads the accumulators of kTiles 16x8 tiles side by side at `tile` (pitch ld), times `scale`.
template <int kTiles>
MLLM_DEVICE void load_c(float (&acc)[kTiles][4], const float* tile, int ld, float scale = 1.0f) {
#pragma unroll
  for (int nt = 0; nt < kTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = scale * tile[c_row(e) * ld + nt * 8 + c_col(e)];
  }
}

/// Stores the accumulators of kTiles 16x8 tiles side by side at `tile` (pitch ld).
template <int kTiles>
MLLM_DEVICE void store_c(const float (&acc)[kTiles][4], float* tile, int ld) {
#pragma unroll
  for (int nt = 0; nt < kTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) tile[c_row(e) * ld + nt * 8 + c_col(e)] = acc[nt][e];
  }
}

}  // namespace mllm_kernel::device::mma
