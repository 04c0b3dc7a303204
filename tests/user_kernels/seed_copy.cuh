// A user kernel written exactly as the seed guide shows: a kernel template in an anonymous
// namespace, a host run() that checks with TensorMatcher and launches with LaunchKernel, and
// the export naming `SeedCopy<T>::run` with T spelled by make_cpp_args (at global scope).
#pragma once
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>
#include <cstdint>

namespace {

template <typename T>
__global__ void seed_copy_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

template <typename T>
struct SeedCopy {
  static void run(tvm::ffi::TensorView input, tvm::ffi::TensorView output) {
    using namespace mllm_kernel::host;
    SymbolicSize n{"num_elements"};
    SymbolicDevice device;
    (void)TensorMatcher({n}).template with_dtype<T>().template with_device<kDLCUDA>(device).verify(input, "input");
    (void)TensorMatcher({n}).template with_dtype<T>().with_device(device).verify(output, "output");
    RuntimeCheck(n.unwrap() > 0, "num_elements must be positive, got ", n.unwrap());
    constexpr int kBlock = 256;
    LaunchKernel(static_cast<int>(div_ceil(n.unwrap(), kBlock)), kBlock, device.unwrap())(
        seed_copy_kernel<T>, static_cast<T*>(output.data_ptr()), static_cast<const T*>(input.data_ptr()),
        n.unwrap());
  }
};

}  // namespace
