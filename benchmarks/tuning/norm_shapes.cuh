// Launch-shape sweep for RMSNorm rows of 4096 bf16 (benchmarks/tuning/tune_norm.py): the
// library's CTA building block (impl/norm.cuh) run with a fixed block size and items per
// thread, so the sizes between 1 and 16384 tokens can be timed for every shape in one GPU run.
// `pdl`: 0 off, 1 release the next kernel at the end (what the library did first), 2 release
// it right after the wait.
#pragma once

#include <mllm_kernel/impl/norm.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>

#include <cstdint>

namespace {

using mllm_kernel::bf16_t;
constexpr int kVec = 8;

template <int kThreads, int kItems, bool kFused>
__global__ void __launch_bounds__(kThreads) shape_kernel(bf16_t* out, const bf16_t* in, bf16_t* residual,
                                                         const bf16_t* weight, int hidden, float eps, int pdl) {
  using namespace mllm_kernel::device;
  __shared__ float scratch[kThreads / kWarpThreads];
  if (pdl) pdl_wait_primary();
  if (pdl == 2) pdl_launch_dependents();
  const std::int64_t offset = static_cast<std::int64_t>(blockIdx.x) * hidden;
  const norm::Row<bf16_t> row{out + offset, in + offset, kFused ? residual + offset : nullptr, weight, hidden};
  norm::rms_cta_row_bounded<bf16_t, kVec, kItems, kThreads, kFused>(row, eps, scratch);
  if (pdl == 1) pdl_launch_dependents();
}

/// out = rmsnorm(input) * weight (kFused: residual += input first, out may be input), for
/// contiguous [N, kThreads * kItems * 8] bf16 tensors.
template <int kThreads, int kItems, bool kFused>
void run_shape(tvm::ffi::TensorView out, tvm::ffi::TensorView input, tvm::ffi::TensorView residual,
               tvm::ffi::TensorView weight, double eps, std::int64_t pdl) {
  using namespace mllm_kernel::host;
  SymbolicSize N{"num_tokens"}, D{"hidden"};
  SymbolicDevice device;
  (void)TensorMatcher({N, D}).with_dtype<bf16_t>().with_device<kDLCUDA>(device).verify(input, "input");
  (void)TensorMatcher({N, D}).with_dtype<bf16_t>().with_device(device).verify(out, "out");
  (void)TensorMatcher({N, D}).with_dtype<bf16_t>().with_device(device).verify(residual, "residual");
  (void)TensorMatcher({D}).with_dtype<bf16_t>().with_device(device).verify(weight, "weight");
  RuntimeCheck(D.unwrap() == kThreads * kItems * kVec, "hidden must be ", kThreads * kItems * kVec, ", got ",
               D.unwrap());
  RuntimeCheck(pdl >= 0 && pdl <= 2, "pdl must be 0, 1 or 2, got ", pdl);
  LaunchKernel(dim3(static_cast<unsigned>(N.unwrap())), dim3(kThreads), device.unwrap())
      .enable_pdl(pdl != 0)(shape_kernel<kThreads, kItems, kFused>, static_cast<bf16_t*>(out.data_ptr()),
                            static_cast<const bf16_t*>(input.data_ptr()), static_cast<bf16_t*>(residual.data_ptr()),
                            static_cast<const bf16_t*>(weight.data_ptr()), static_cast<int>(D.unwrap()),
                            static_cast<float>(eps), static_cast<int>(pdl));
}

}  // namespace
