// A barrier across every block of a cooperative launch (all blocks resident at once:
// `LaunchKernel(...).enable_cooperative()`), on a 32-bit counter in global memory:
//
//   __device__ std::uint32_t my_barrier = 0;   // the module's: zero when it loads
//   grid_barrier(&my_barrier);                 // every thread of every block calls it
//
// The counter must be zero when first used and is then never reset: each block adds 1, except
// block 0, which adds 2^31 - (blocks - 1), so the arrivals sum to 2^31. The top bit therefore
// flips exactly when the last block arrives, and the low bits return to zero for the next
// launch; each block waits until the top bit differs from what its own add found. Two launches
// may share a counter only if they can never be resident at once (a grid that fills every SM,
// as a cooperative launch sized by the occupancy does): arrivals of both would mix.
#pragma once

#include <mllm_kernel/host_device.hpp>

#include <cstdint>

namespace mllm_kernel::device {

/// Waits until every block of the grid has called it; what each block wrote before is visible
/// to all after (a GPU-scope release by each block's arrival, an acquire by its wait).
MLLM_DEVICE void grid_barrier(std::uint32_t* counter) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
    const bool first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const std::uint32_t add = first ? 0x80000000u - (blocks - 1) : 1u;
    std::uint32_t old, now;
    asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(counter), "r"(add) : "memory");
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(counter) : "memory");
    } while (((old ^ now) & 0x80000000u) == 0);
  }
  __syncthreads();
}

}  // namespace mllm_kernel::device
