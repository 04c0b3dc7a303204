// Launch shapes of the library's per-tensor FP8 kernels (cuda/csrc/quant.cuh) for contiguous
// bf16 input (benchmarks/tuning/tune_quant.py): static quantization with kItems vectors a
// thread, and the dynamic two-pass path with kAmaxItems loads in flight a thread in the amax
// pass and kItems vectors a thread in the quantization pass.
#pragma once

#include "../../mllm_kernel/cuda/csrc/quant.cuh"

namespace {

/// The library's checks, then contiguous 16-byte vectors required (the variants' only layout).
QuantParams<bf16_t, fp8_e4m3_t> contiguous_params(tvm::ffi::TensorView out, tvm::ffi::TensorView scale,
                                                  tvm::ffi::TensorView input, DLDevice* device) {
  const auto p = check_tensor<bf16_t>(out, scale, input, device);
  mllm_kernel::host::RuntimeCheck(is_flat(p) && can_vectorize(p, 8),
                                  "input and out must be contiguous with 16-byte aligned rows");
  return p;
}

template <int kItems>
void run_static_items(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  launch_static<bf16_t, 8, kItems>(p, device, true);
}

template <int kAmaxItems, int kItems>
void run_two_pass(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);  // fills `device` first
  launch_two_pass<bf16_t, 8, kAmaxItems, kItems>(p, device, true);
}

}  // namespace
