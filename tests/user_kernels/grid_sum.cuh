// Test kernel for cooperative launches (tests/test_cuda_integration.py): every block sums its
// grid-stride share of `input` into partials[blockIdx.x]; after one grid barrier block 0 adds
// the partials into total[0]. Without the barrier block 0 would read partials not yet written.
#pragma once

#include <mllm_kernel/cta.cuh>
#include <mllm_kernel/runtime.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include <cooperative_groups.h>
#include <tvm/ffi/container/tensor.h>

#include <cstdint>

namespace {

constexpr int kGridSumThreads = 256;

__global__ void grid_sum_kernel(const float* input, std::int64_t n, float* partials, float* total) {
  using namespace mllm_kernel::device;
  __shared__ float scratch[cta::kScratchSize];
  float sum = 0.0f;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kGridSumThreads + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * kGridSumThreads) {
    sum += input[i];
  }
  sum = cta::reduce_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
  cooperative_groups::this_grid().sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float t = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b) t += partials[b];
    *total = t;
  }
}

/// Launches as many blocks as the device holds at once plus `extra_blocks` (a positive number
/// asks for more than a cooperative launch allows). Returns the number of blocks launched.
std::int64_t grid_sum(tvm::ffi::TensorView input, tvm::ffi::TensorView partials, tvm::ffi::TensorView total,
                      std::int64_t extra_blocks) {
  using namespace mllm_kernel::host;
  SymbolicSize n{"n"}, p{"num_partials"};
  SymbolicDevice device;
  (void)TensorMatcher({n}).with_dtype<float>().with_device<kDLCUDA>(device).verify(input, "input");
  (void)TensorMatcher({p}).with_dtype<float>().with_device<kDLCUDA>(device).verify(partials, "partials");
  (void)TensorMatcher({1}).with_dtype<float>().with_device<kDLCUDA>(device).verify(total, "total");
  const int id = device.unwrap().device_id;
  const std::int64_t blocks =
      static_cast<std::int64_t>(runtime::get_sm_count(id)) * runtime::get_blocks_per_sm(grid_sum_kernel, kGridSumThreads) +
      extra_blocks;
  RuntimeCheck(blocks <= p.unwrap(), "partials holds ", p.unwrap(), " blocks, the launch needs ", blocks);
  LaunchKernel(static_cast<unsigned>(blocks), kGridSumThreads, device.unwrap())
      .enable_cooperative()(grid_sum_kernel, static_cast<const float*>(input.data_ptr()), n.unwrap(),
                            static_cast<float*>(partials.data_ptr()), static_cast<float*>(total.data_ptr()));
  return blocks;
}

}  // namespace
