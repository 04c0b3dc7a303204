// CUDA add_constant: dst = src + kConstant on contiguous 1-D int32 tensors, launched on the
// caller's current stream through LaunchKernel.
#pragma once

#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace {

template <int32_t kConstant>
__global__ void add_constant_kernel(int32_t* __restrict__ dst, const int32_t* __restrict__ src, int64_t length) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < length; i += stride) {
    dst[i] = src[i] + kConstant;
  }
}

constexpr int kBlockSize = 256;
// Grid-stride loop beyond this many blocks: plenty to fill any GPU.
constexpr int64_t kMaxBlocks = 65536;

template <int32_t kConstant>
void add_constant(mllm_kernel::TensorView dst, mllm_kernel::TensorView src) {
  using namespace mllm_kernel::host;
  static_assert(kConstant == 1 || kConstant == 2 || kConstant == 4 || kConstant == 8 || kConstant == 16,
                "add_constant supports the constants 1, 2, 4, 8 and 16");
  SymbolicSize n{"num_elements"};
  SymbolicDevice device;
  (void)TensorMatcher({n})  //
      .with_dtype<int32_t>()
      .with_device<kDLCUDA>(device)
      .verify(src, "src")
      .verify(dst, "dst");
  const int64_t length = n.unwrap();
  RuntimeCheck(length > 0, "src must not be empty");
  const int64_t blocks = mllm_kernel::host::min_of<int64_t>(div_ceil(length, kBlockSize), kMaxBlocks);
  LaunchKernel(static_cast<unsigned>(blocks), kBlockSize, device.unwrap())(
      add_constant_kernel<kConstant>, static_cast<int32_t*>(dst.data_ptr()),
      static_cast<const int32_t*>(src.data_ptr()), length);
}

}  // namespace
