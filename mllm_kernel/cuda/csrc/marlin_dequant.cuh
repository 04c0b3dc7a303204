// CUDA dequantization of Marlin-format weights into a dense [N, K] matrix of the activation
// type T (a linear layer's weight layout), for the large-M path of gptq_marlin_gemm (the caller
// then runs a dense GEMM with its transpose, as for an unquantized layer):
//   marlin_dequant<T, kBits, kFp8>(b, scales, zeros, g_idx, out, size_n, size_k)
// out[n, k] = (q - zero) * scale (float8 weights: q * scale, q with float8's exponent bias, as the
// GEMM kernel takes it), rounded to T once: with group scales exactly the values the
// Marlin GEMM kernel feeds its tensor cores from 9 rows of a on (with one channel-wise scale, or
// up to 8 rows, that kernel scales its float32 sums instead, so the two paths then differ by the
// rounding of the product). One block per 128 x 64 tile (eight repacked 16 x 64 tiles): each
// thread dequantizes repacked words into a shared-memory tile (mllm_kernel/marlin.hpp says where
// each value goes), then the tile is written out as 64 runs of 256 contiguous bytes.
#pragma once

#include <mllm_kernel/marlin.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include "marlin_values.cuh"

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace {

namespace marlin_dq = mllm_kernel::marlin;

constexpr int kDequantThreads = 256;
constexpr int kDequantSteps = 8;  // 16-row steps of K a block takes: 256-byte runs of each output row
constexpr int kDequantPad = 8;  // a tile row of 136 values: 16-byte aligned, rows 4 banks apart

/// A float8_e4m3fn byte (the low byte of `byte`) as the GEMM kernel dequantizes it, to float.
template <typename T>
__device__ __forceinline__ float fp8_value(std::uint32_t byte) {
  return mllm_kernel::device::cast<float>(as_pair<T>(fp8_pair<T>(byte, 0, 0)).x);
}

template <typename T, int kBits, bool kFp8>
__global__ void __launch_bounds__(kDequantThreads)
    marlin_dequant_kernel(const __grid_constant__ mllm_kernel::host::MarlinGemmParams p, T* __restrict__ out) {
  using namespace mllm_kernel::device;
  constexpr int kPerWord = 32 / kBits;
  constexpr int kWords = marlin_dq::tile_words(kBits);
  constexpr std::uint32_t kMask = (1u << kBits) - 1;
  constexpr int kCols = kDequantSteps * marlin_dq::kTileK;
  __shared__ alignas(16) T tile[marlin_dq::kTileN][kCols + kDequantPad];
  // The group of each row of K the block covers: one per step without g_idx (group sizes are
  // multiples of 16), one per row with it (out-of-range ids read a valid row).
  __shared__ std::int32_t row_group[kCols];

  const std::int64_t tile_n = blockIdx.x, step0 = static_cast<std::int64_t>(blockIdx.y) * kDequantSteps;
  const int steps = static_cast<int>(min(static_cast<std::int64_t>(kDequantSteps), p.k / marlin_dq::kTileK - step0));
  const std::int64_t row_words = p.n * marlin_dq::kTileK * kBits / 32;
  const std::int32_t* words = p.b + step0 * row_words + tile_n * kWords;
  const T* scales = static_cast<const T*>(p.scales);
  const bool channelwise = p.groups == 1, per_row = p.g_idx != nullptr;
  if (threadIdx.x < steps * marlin_dq::kTileK) {
    const std::int64_t k = step0 * marlin_dq::kTileK + threadIdx.x;
    std::int64_t group = 0;
    if (per_row) {
      const std::int64_t id = __ldg(p.g_idx + k);
      group = id < 0 ? 0 : (id >= p.groups ? p.groups - 1 : id);
    } else if (!channelwise) {
      group = k / p.group_size;
    }
    row_group[threadIdx.x] = static_cast<std::int32_t>(group);
  }
  __syncthreads();
  // Whether each step's 16 rows share one group: always without g_idx, and with a sorted g_idx
  // (the caller's perm) every step inside a group. Such a step reads its scales once.
  __shared__ bool step_shared[kDequantSteps];
  if (threadIdx.x < steps) {
    const std::int32_t* rows = row_group + threadIdx.x * marlin_dq::kTileK;
    bool shared = true;
#pragma unroll
    for (int r = 1; r < marlin_dq::kTileK; ++r) shared &= rows[r] == rows[0];
    step_shared[threadIdx.x] = shared;
  }
  const auto scale_of = [&](std::int64_t group, std::int64_t n) {
    return cast<float>(
        scales[group * p.n + (channelwise ? marlin_dq::channel_scale_pos(n) : marlin_dq::grouped_scale_pos(n))]);
  };
  const auto zero_of = [&](std::int64_t group, std::int64_t n) {
    if (p.zeros == nullptr) return kFp8 ? 0.0f : kBits == 4 ? 8.0f : 128.0f;
    const auto z = static_cast<std::uint32_t>(
        __ldg(p.zeros + group * (p.n * kBits / 32) + marlin_dq::zero_point_word(kBits, n)));
    return static_cast<float>(z >> (kBits * marlin_dq::zero_point_slot(kBits, n)) & kMask);
  };
  // Each step's scales and zero points for the tile's columns (its first row's group), read once.
  __shared__ float step_scale[kDequantSteps][marlin_dq::kTileN], step_zero[kDequantSteps][marlin_dq::kTileN];
  const std::int64_t n0 = tile_n * marlin_dq::kTileN;
  for (int i = threadIdx.x; i < steps * marlin_dq::kTileN; i += kDequantThreads) {
    const int j = i / marlin_dq::kTileN, n = i % marlin_dq::kTileN;
    const std::int64_t group = row_group[j * marlin_dq::kTileK];
    step_scale[j][n] = scale_of(group, n0 + n);
    step_zero[j][n] = zero_of(group, n0 + n);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < steps * kWords; i += kDequantThreads) {
    const int j = i / kWords, w = i % kWords;
    const auto word = static_cast<std::uint32_t>(__ldg(words + j * row_words + w));
    const bool by_row = per_row && !step_shared[j];  // the step's rows span groups
    // A word's values lie in column `first` and, for 4 bits, first + 8 (first is at most 55).
    const int first = marlin_dq::weight_coord(kBits, w, 0).n;
    const int second = kBits == 4 ? first + 8 : first;
    const float scale0 = step_scale[j][first], zero0 = step_zero[j][first];
    const float scale1 = step_scale[j][second], zero1 = step_zero[j][second];
#pragma unroll
    for (int slot = 0; slot < kPerWord; ++slot) {
      const marlin_dq::TileCoord at = marlin_dq::weight_coord(kBits, w, slot);
      const int col = j * marlin_dq::kTileK + at.k;
      float scale = at.n == first ? scale0 : scale1, zero = at.n == first ? zero0 : zero1;
      if (by_row) {  // out-of-range ids read a valid row (clamped above)
        scale = scale_of(row_group[col], n0 + at.n);
        zero = zero_of(row_group[col], n0 + at.n);
      }
      const std::uint32_t bits = word >> (kBits * slot) & kMask;
      const float q = kFp8 ? fp8_value<T>(bits) : static_cast<float>(bits);
      tile[at.n][col] = cast<T>((q - zero) * scale);
    }
  }
  __syncthreads();
  // Each output row's run of the block's columns, 16 bytes a thread.
  const int row_vecs = steps * marlin_dq::kTileK / 8;
  for (int v = threadIdx.x; v < marlin_dq::kTileN * row_vecs; v += kDequantThreads) {
    const int n = v / row_vecs, c = v % row_vecs;
    *reinterpret_cast<int4*>(out + (tile_n * marlin_dq::kTileN + n) * p.k + step0 * marlin_dq::kTileK + c * 8) =
        *reinterpret_cast<const int4*>(&tile[n][c * 8]);
  }
}

/// out: [size_n, size_k] of T, contiguous; the other arguments as for marlin_gemm.
template <typename T, int kBits, bool kFp8>
void marlin_dequant(mllm_kernel::TensorView b, mllm_kernel::TensorView scales, mllm_kernel::TensorView zeros,
                    mllm_kernel::TensorView g_idx, mllm_kernel::TensorView out, std::int64_t size_n, std::int64_t size_k) {
  using namespace mllm_kernel::host;
  SymbolicDevice device;
  const MarlinGemmParams p = check_marlin_weights<kDLCUDA, T>(b, scales, zeros, g_idx, kBits, size_n, size_k, device);
  (void)TensorMatcher({size_n, size_k}).template with_dtype<T>().template with_device<kDLCUDA>(device).verify(out, "out");
  RuntimeCheck(reinterpret_cast<std::uintptr_t>(out.data_ptr()) % 16 == 0, "out must start 16-byte aligned");
  const dim3 grid(static_cast<unsigned>(size_n / marlin_dq::kTileN),
                  static_cast<unsigned>(div_ceil(size_k / marlin_dq::kTileK, kDequantSteps)));
  LaunchKernel(grid, kDequantThreads, out.device())(marlin_dequant_kernel<T, kBits, kFp8>, p, static_cast<T*>(out.data_ptr()));
}

}  // namespace
