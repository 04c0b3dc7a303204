// CUDA dequantization of Marlin-format weights into a dense [N, K] matrix of the activation
// type T (a linear layer's weight layout), for the large-M path of gptq_marlin_gemm (the caller
// then runs a dense GEMM with its transpose, as for an unquantized layer):
//   marlin_dequant<T, kBits>(b, scales, zeros, g_idx, out, size_n, size_k)
// out[n, k] = (q - zero) * scale, rounded to T once: with group scales exactly the values the
// Marlin GEMM kernel feeds its tensor cores from 9 rows of a on (with one channel-wise scale, or
// up to 8 rows, that kernel scales its float32 sums instead, so the two paths then differ by the
// rounding of the product). One block per 16 x 64 tile: each thread dequantizes one repacked word
// into a shared-memory tile (mllm_kernel/marlin.hpp says where each value goes), then the tile
// is written out as 64 runs of 32 contiguous bytes.
#pragma once

#include <mllm_kernel/marlin.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace {

namespace marlin_dq = mllm_kernel::marlin;

constexpr int kDequantThreads = 128;
constexpr int kDequantPad = 2;  // a tile row of 18 values (9 banks): few bank conflicts

template <typename T, int kBits>
__global__ void __launch_bounds__(kDequantThreads)
    marlin_dequant_kernel(const __grid_constant__ mllm_kernel::host::MarlinGemmParams p, T* __restrict__ out) {
  using namespace mllm_kernel::device;
  constexpr int kPerWord = 32 / kBits;
  constexpr int kWords = marlin_dq::tile_words(kBits);
  constexpr std::uint32_t kMask = (1u << kBits) - 1;
  __shared__ alignas(16) T tile[marlin_dq::kTileN][marlin_dq::kTileK + kDequantPad];

  const std::int64_t tile_n = blockIdx.x, step = blockIdx.y;
  const std::int32_t* words = p.b + step * (p.n * marlin_dq::kTileK * kBits / 32) + tile_n * kWords;
  const T* scales = static_cast<const T*>(p.scales);
  const bool channelwise = p.groups == 1, per_row = p.g_idx != nullptr;
  // The group of each of the tile's rows; without g_idx one group (group_size is a multiple of
  // 16), whose scales and zero points for the tile's columns are read once, here.
  __shared__ std::int32_t row_group[marlin_dq::kTileK];
  __shared__ float tile_scale[marlin_dq::kTileN], tile_zero[marlin_dq::kTileN];
  const auto scale_of = [&](std::int64_t group, std::int64_t n) {
    return cast<float>(
        scales[group * p.n + (channelwise ? marlin_dq::channel_scale_pos(n) : marlin_dq::grouped_scale_pos(n))]);
  };
  const auto zero_of = [&](std::int64_t group, std::int64_t n) {
    if (p.zeros == nullptr) return kBits == 4 ? 8.0f : 128.0f;
    const auto z = static_cast<std::uint32_t>(
        __ldg(p.zeros + group * (p.n * kBits / 32) + marlin_dq::zero_point_word(kBits, n)));
    return static_cast<float>(z >> (kBits * marlin_dq::zero_point_slot(kBits, n)) & kMask);
  };
  const std::int64_t block_group = per_row || channelwise ? 0 : step * marlin_dq::kTileK / p.group_size;
  if (threadIdx.x < marlin_dq::kTileK && per_row) {
    const std::int64_t id = __ldg(p.g_idx + step * marlin_dq::kTileK + threadIdx.x);
    row_group[threadIdx.x] = static_cast<std::int32_t>(id < 0 ? 0 : (id >= p.groups ? p.groups - 1 : id));
  }
  if (threadIdx.x < marlin_dq::kTileN && !per_row) {
    const std::int64_t n = tile_n * marlin_dq::kTileN + threadIdx.x;
    tile_scale[threadIdx.x] = scale_of(block_group, n);
    tile_zero[threadIdx.x] = zero_of(block_group, n);
  }
  __syncthreads();
  for (int w = threadIdx.x; w < kWords; w += kDequantThreads) {
    const auto word = static_cast<std::uint32_t>(__ldg(words + w));
    // A word's values lie in column `first` and, for 4 bits, first + 8 (first is at most 55).
    const int first = marlin_dq::weight_coord(kBits, w, 0).n;
    const int second = kBits == 4 ? first + 8 : first;
    const float scale0 = per_row ? 0.0f : tile_scale[first], zero0 = per_row ? 0.0f : tile_zero[first];
    const float scale1 = per_row ? 0.0f : tile_scale[second], zero1 = per_row ? 0.0f : tile_zero[second];
#pragma unroll
    for (int slot = 0; slot < kPerWord; ++slot) {
      const marlin_dq::TileCoord at = marlin_dq::weight_coord(kBits, w, slot);
      float scale = at.n == first ? scale0 : scale1, zero = at.n == first ? zero0 : zero1;
      if (per_row) {  // out-of-range ids read a valid row (clamped above)
        const std::int64_t n = tile_n * marlin_dq::kTileN + at.n;
        scale = scale_of(row_group[at.k], n);
        zero = zero_of(row_group[at.k], n);
      }
      const float q = static_cast<float>(word >> (kBits * slot) & kMask);
      tile[at.n][at.k] = cast<T>((q - zero) * scale);
    }
  }
  __syncthreads();
  // Pairs of values (4 bytes: the padded rows are 4-byte aligned), 8 threads writing a column's 32 bytes.
  constexpr int kColumnPairs = marlin_dq::kTileK / 2;
  for (int v = threadIdx.x; v < marlin_dq::kTileN * kColumnPairs; v += kDequantThreads) {
    const int n = v / kColumnPairs, c = v % kColumnPairs;
    *reinterpret_cast<std::uint32_t*>(out + (tile_n * marlin_dq::kTileN + n) * p.k + step * marlin_dq::kTileK + c * 2) =
        *reinterpret_cast<const std::uint32_t*>(&tile[n][c * 2]);
  }
}

/// out: [size_n, size_k] of T, contiguous; the other arguments as for marlin_gemm.
template <typename T, int kBits>
void marlin_dequant(mllm_kernel::TensorView b, mllm_kernel::TensorView scales, mllm_kernel::TensorView zeros,
                    mllm_kernel::TensorView g_idx, mllm_kernel::TensorView out, std::int64_t size_n, std::int64_t size_k) {
  using namespace mllm_kernel::host;
  SymbolicDevice device;
  const MarlinGemmParams p = check_marlin_weights<kDLCUDA, T>(b, scales, zeros, g_idx, kBits, size_n, size_k, device);
  (void)TensorMatcher({size_n, size_k}).template with_dtype<T>().template with_device<kDLCUDA>(device).verify(out, "out");
  RuntimeCheck(p.zeros == nullptr || kBits == 4, "zero points are supported for 4-bit weights only");
  RuntimeCheck(reinterpret_cast<std::uintptr_t>(out.data_ptr()) % 16 == 0, "out must start 16-byte aligned");
  const dim3 grid(static_cast<unsigned>(size_n / marlin_dq::kTileN), static_cast<unsigned>(size_k / marlin_dq::kTileK));
  LaunchKernel(grid, kDequantThreads, out.device())(marlin_dequant_kernel<T, kBits>, p, static_cast<T*>(out.data_ptr()));
}

}  // namespace
