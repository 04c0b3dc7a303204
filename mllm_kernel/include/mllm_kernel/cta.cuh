// Block-wide (CTA) reductions: a warp shuffle reduction, one shared-memory exchange, and a
// second warp reduction that every warp performs, so all threads get the result after a single
// barrier.
//
//   __shared__ float scratch[cta::kScratchSize];
//   const float total = cta::reduce_sum(partial, scratch);
//   // scratch may be reused only after another __syncthreads()
//
// Requirements: blockDim.x * blockDim.y * blockDim.z is a multiple of 32 (at most 1024) and
// every thread of the block calls the function.
#pragma once

#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/warp.cuh>

namespace mllm_kernel::device::cta {

/// Floats of shared memory a reduction needs (one slot per warp of the largest block).
inline constexpr int kScratchSize = 1024 / kWarpThreads;

namespace detail {

MLLM_DEVICE int linear_thread_id() {
  return static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}
MLLM_DEVICE int num_warps() {
  return static_cast<int>(blockDim.x * blockDim.y * blockDim.z) / kWarpThreads;
}

}  // namespace detail

/// Sum of `value` over the whole block; every thread gets it. `scratch` holds kScratchSize
/// floats of shared memory; reuse it only after a later __syncthreads().
MLLM_DEVICE float reduce_sum(float value, float* scratch) {
  const int tid = detail::linear_thread_id();
  const int lane = tid % kWarpThreads;
  value = warp::reduce_sum(value);
  if (lane == 0) scratch[tid / kWarpThreads] = value;
  __syncthreads();
  value = lane < detail::num_warps() ? scratch[lane] : 0.0f;
  return warp::reduce_sum(value);
}

/// Maximum of `value` over the whole block; every thread gets it. Same contract as
/// reduce_sum.
MLLM_DEVICE float reduce_max(float value, float* scratch) {
  const int tid = detail::linear_thread_id();
  const int lane = tid % kWarpThreads;
  value = warp::reduce_max(value);
  if (lane == 0) scratch[tid / kWarpThreads] = value;
  __syncthreads();
  value = lane < detail::num_warps() ? scratch[lane] : -INFINITY;
  return warp::reduce_max(value);
}

}  // namespace mllm_kernel::device::cta
