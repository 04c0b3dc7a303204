// The W8A8 scaled GEMM for a few rows of activations (decoding), one module per operand and
// output type:
//   scaled_mm_gemv<AB, Out>(out, mat_a, mat_b, scales_a, scales_b, bias, has_bias, warps, blocks_per_sm,
//                           enable_pdl)
// out [M, N] = (mat_a @ mat_b) * scales_a[m] * scales_b[n] (+ bias[n]) for M <= 16, with the
// operands, scales and bias of scaled_mm_operands.cuh (AB int8_t or fp8_e4m3_t; fp8 needs sm_89+).
//
// Decoding reads each weight byte once and does little arithmetic per byte, so its speed is the
// bytes it keeps in flight. The weight ([N, K] row-major: mat_b's transpose) is the MMA's A
// operand, 16 of its rows a tile; the activations are B, 8 rows an MMA. A lane loads 16
// contiguous bytes of K from each of its two weight rows (g and g + 8) and from its activation
// row, straight from global memory into registers: four lanes cover 64 bytes of K, two m16n8k32
// MMAs. Inside those 64 bytes the lane's bytes 0-7 play the MMA's K positions 4t..4t+3 and
// 4t+16..4t+19 of the first MMA, bytes 8-15 those of the second: the same order for both
// operands, so the sums are those of the true products (exact int32 for int8).
//
// A block of kWarps warps takes one tile of 16 weight rows over all of K: warp w the 64-byte steps
// w, w + kWarps, ..., kGemvBatch steps (4 KB of weights a warp) loaded at once; the warps' sums meet
// in shared memory, and the scales and bias apply to the total. A layer is N / 16 such tiles over
// all of K, so how they fill the SMs' waves is what the block shape (kWarps warps, kMinBlocks
// resident an SM) trades: the caller picks it (scaled_mm_gemv.block_shape). Launched with PDL, a
// warp asks L2 for its first batch of weights before it waits for the previous kernel
// (docs/pdl.md: a hint that is safe whatever that kernel writes), so the weights' first trip from
// memory overlaps the previous kernel (the activations' quantizer, say).
#pragma once

#include <mllm_kernel/async_copy.cuh>
#include <mllm_kernel/cache_hint.cuh>
#include <mllm_kernel/mma.cuh>
#include <mllm_kernel/pdl.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/tensor_view.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include "scaled_mm_operands.cuh"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <type_traits>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp8_e4m3_t;

constexpr int kGemvTileRows = 16;  // weight rows (output columns) of a block
constexpr int kGemvStepBytes = 64;  // K bytes of a warp's step: two k32 MMAs
constexpr int kGemvBatch = 4;       // steps a warp loads at once
constexpr int kGemvMaxRows = 16;    // activation rows: two 8-row MMA operands

struct ScaledGemvParams {
  void* out;
  const void* a;
  const void* b;
  const float* scales_a;
  const float* scales_b;
  const void* bias;  // nullptr: none
  std::int64_t m, n, k, lda, ldb, ldo;
  bool a_vector, b_vector, pdl;
};

/// kBlocks 8-row activation blocks (1 for M <= 8, 2 for M <= 16); kWarps warps a block, at least
/// kMinBlocks of them resident an SM (which caps the registers a thread).
template <typename AB, typename Out, int kBlocks, int kWarps, int kMinBlocks>
__global__ void __launch_bounds__(32 * kWarps, kMinBlocks) scaled_mm_gemv_kernel(const __grid_constant__ ScaledGemvParams p) {
  using namespace mllm_kernel::device;
  using Acc = std::conditional_t<std::is_same_v<AB, std::int8_t>, int, float>;
  __shared__ Acc partial[kWarps][kBlocks][4][32];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kGemvTileRows;
  // Rows past N read row N - 1 (their sums are not stored).
  const std::int64_t last_row = p.n - 1;
  const auto* b = static_cast<const std::uint8_t*>(p.b);
  const int4* w_lo = reinterpret_cast<const int4*>(b + min(row0 + g, last_row) * p.ldb) + t;
  const int4* w_hi = reinterpret_cast<const int4*>(b + min(row0 + g + 8, last_row) * p.ldb) + t;
  // The lane's activation rows g and g + 8; rows past M read as zeros.
  const auto* a = static_cast<const std::uint8_t*>(p.a);
  const int4* x_row[kBlocks];
  bool x_ok[kBlocks];
#pragma unroll
  for (int mb = 0; mb < kBlocks; ++mb) {
    const int row = mb * 8 + g;
    x_ok[mb] = row < p.m;
    x_row[mb] = reinterpret_cast<const int4*>(a + (x_ok[mb] ? row : 0) * p.lda) + t;
  }
  const std::int64_t chunks = p.k / 16;  // 16-byte chunks of a row (K is a multiple of 16)
  const std::int64_t steps = (p.k + kGemvStepBytes - 1) / kGemvStepBytes;
  // Whether the lane's chunk of step s lies inside K (a step past the last is past it for every t).
  const auto in_k = [&](std::int64_t s) { return s * 4 + t < chunks; };

  if (p.pdl) {
#pragma unroll
    for (int u = 0; u < kGemvBatch; ++u) {
      const std::int64_t s = warp + u * kWarps;
      if (in_k(s)) prefetch_l2(w_lo + s * 4), prefetch_l2(w_hi + s * 4);
    }
    pdl_wait_and_release();
  }

  Acc acc[kBlocks][4] = {};
  for (std::int64_t s0 = warp; s0 < steps; s0 += kWarps * kGemvBatch) {
    int4 lo[kGemvBatch], hi[kGemvBatch], x[kGemvBatch][kBlocks];
#pragma unroll
    for (int u = 0; u < kGemvBatch; ++u) {
      const std::int64_t s = s0 + u * kWarps;
      const bool ok = in_k(s);
      const std::int64_t at = s * 4;  // the step's offset from the lane's rows, in 16-byte chunks
      lo[u] = ok ? load_streaming(w_lo + at) : make_int4(0, 0, 0, 0);
      hi[u] = ok ? load_streaming(w_hi + at) : make_int4(0, 0, 0, 0);
#pragma unroll
      for (int mb = 0; mb < kBlocks; ++mb) x[u][mb] = ok && x_ok[mb] ? __ldg(x_row[mb] + at) : make_int4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kGemvBatch; ++u) {
      const std::uint32_t first[4] = {static_cast<std::uint32_t>(lo[u].x), static_cast<std::uint32_t>(hi[u].x),
                                       static_cast<std::uint32_t>(lo[u].y), static_cast<std::uint32_t>(hi[u].y)};
      const std::uint32_t second[4] = {static_cast<std::uint32_t>(lo[u].z), static_cast<std::uint32_t>(hi[u].z),
                                        static_cast<std::uint32_t>(lo[u].w), static_cast<std::uint32_t>(hi[u].w)};
#pragma unroll
      for (int mb = 0; mb < kBlocks; ++mb) {
        mma::mma_m16n8k32(acc[mb], first, static_cast<std::uint32_t>(x[u][mb].x), static_cast<std::uint32_t>(x[u][mb].y));
        mma::mma_m16n8k32(acc[mb], second, static_cast<std::uint32_t>(x[u][mb].z),
                          static_cast<std::uint32_t>(x[u][mb].w));
      }
    }
  }

#pragma unroll
  for (int mb = 0; mb < kBlocks; ++mb)
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][mb][e][lane] = acc[mb][e];
  __syncthreads();
  // Item j = mb * 4 + e (a warp each, in turn) adds up accumulator e of block mb over the warps
  // and stores it: C element (row g + 8 (e / 2), column 2t + e % 2) is
  // out[m = 8 mb + 2t + e % 2, n = row0 + g + 8 (e / 2)].
  for (int j = warp; j < kBlocks * 4; j += kWarps) {
    const int mb = j / 4, e = j % 4;
    Acc sum = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][mb][e][lane];
    const std::int64_t m = mb * 8 + 2 * t + e % 2, n = row0 + g + 8 * (e / 2);
    if (m >= p.m || n >= p.n) continue;
    float value = static_cast<float>(sum) * p.scales_a[p.a_vector ? m : 0] * p.scales_b[p.b_vector ? n : 0];
    if (p.bias != nullptr) value += cast<float>(static_cast<const Out*>(p.bias)[n]);
    static_cast<Out*>(p.out)[m * p.ldo + n] = cast<Out>(value);
  }
}

/// Runs the GEMV on checked operands (the same checks as every scaled GEMM module, and M <= 16).
template <typename AB, typename Out>
void scaled_mm_gemv(mllm_kernel::TensorView out, mllm_kernel::TensorView mat_a, mllm_kernel::TensorView mat_b,
                    mllm_kernel::TensorView scales_a, mllm_kernel::TensorView scales_b, mllm_kernel::TensorView bias,
                    bool has_bias, std::int64_t warps, std::int64_t blocks_per_sm, bool enable_pdl) {
  using namespace mllm_kernel::host;
  using namespace mllm_kernel::device::scaled_mm;

  SymbolicDevice device;
  const MmShape shape = check_mm_operands<AB, Out>(out, mat_a, mat_b, device);
  ScaledGemvParams p{out.data_ptr(), mat_a.data_ptr(), mat_b.data_ptr(),
                     static_cast<const float*>(scales_a.data_ptr()), static_cast<const float*>(scales_b.data_ptr()),
                     nullptr, shape.m, shape.n, shape.k, shape.lda, shape.ldb, shape.ldo, false, false, enable_pdl};
  p.a_vector = scales_are_vector(scales_a, device, shape.m, "M", "mat_a", "scales_a");
  p.b_vector = scales_are_vector(scales_b, device, shape.n, "N", "mat_b", "scales_b");
  if (has_bias) {
    (void)TensorMatcher({shape.n}).template with_dtype<Out>().with_device(device).verify(bias, "bias");
    p.bias = bias.data_ptr();
  }
  RuntimeCheck(shape.m <= kGemvMaxRows, "at most ", kGemvMaxRows, " rows of mat_a, got ", shape.m);
  if (shape.m == 0) return;
  // The block shapes built (scaled_mm_gemv.BLOCK_SHAPES): three-block SMs up to 8 rows only, where
  // 80 registers a thread hold one activation block; four-warp blocks from 9 rows only.
  const bool few = shape.m <= 8;
  void (*kernel)(ScaledGemvParams) = nullptr;
  if (warps == 8 && blocks_per_sm == 2) {
    kernel = few ? scaled_mm_gemv_kernel<AB, Out, 1, 8, 2> : scaled_mm_gemv_kernel<AB, Out, 2, 8, 2>;
  } else if (warps == 8 && blocks_per_sm == 3 && few) {
    kernel = scaled_mm_gemv_kernel<AB, Out, 1, 8, 3>;
  } else if (warps == 4 && blocks_per_sm == 4 && !few) {
    kernel = scaled_mm_gemv_kernel<AB, Out, 2, 4, 4>;
  }
  RuntimeCheck(kernel != nullptr, "no block of ", warps, " warps, ", blocks_per_sm, " an SM, for ", shape.m,
               " rows of mat_a");
  LaunchKernel(static_cast<unsigned>(div_ceil(shape.n, kGemvTileRows)), static_cast<unsigned>(32 * warps),
               device.unwrap())
      .enable_pdl(enable_pdl)(kernel, p);
}

}  // namespace
