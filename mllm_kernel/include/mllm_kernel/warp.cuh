// Warps: their size, and reductions with register shuffles (no shared memory, no barriers).
//
//   float total = warp::reduce_sum(partial);         // every lane gets the warp's sum
//   float m = warp::reduce_max<16>(x);               // over aligned groups of 16 lanes
//
// Every lane named by `mask` must call the function (the default is the full warp).
#pragma once

#include <mllm_kernel/host_device.hpp>

namespace mllm_kernel::device {

/// Threads in a warp.
inline constexpr int kWarpThreads = 32;
/// Shuffle mask with every lane of a warp taking part.
inline constexpr unsigned kFullMask = 0xffffffffu;

}  // namespace mllm_kernel::device

namespace mllm_kernel::device::warp {

/// Sum of `value` over groups of kWidth consecutive lanes (a power of two <= 32); every lane
/// of a group gets the group's sum (butterfly reduction via __shfl_xor_sync).
template <int kWidth = kWarpThreads, typename T>
MLLM_DEVICE T reduce_sum(T value, unsigned mask = kFullMask) {
  static_assert(kWidth > 0 && kWidth <= kWarpThreads && (kWidth & (kWidth - 1)) == 0,
                "warp::reduce_sum: kWidth must be a power of two <= 32");
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(mask, value, offset, kWidth);
  }
  return value;
}

/// Maximum of `value` over groups of kWidth consecutive lanes; every lane of a group gets it.
template <int kWidth = kWarpThreads, typename T>
MLLM_DEVICE T reduce_max(T value, unsigned mask = kFullMask) {
  static_assert(kWidth > 0 && kWidth <= kWarpThreads && (kWidth & (kWidth - 1)) == 0,
                "warp::reduce_max: kWidth must be a power of two <= 32");
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    const T other = __shfl_xor_sync(mask, value, offset, kWidth);
    value = other > value ? other : value;
  }
  return value;
}

}  // namespace mllm_kernel::device::warp
