// Launch shapes of the library's per-tensor FP8 kernels (cuda/csrc/quant.cuh) for contiguous
// bf16 input (benchmarks/tuning/tune_quant.py): static quantization with kItems vectors a
// thread, and the dynamic two-pass path with kAmaxItems loads in flight a thread in the amax
// pass and kItems vectors a thread in the quantization pass.
#pragma once

#include "../../mllm_kernel/cuda/csrc/quant.cuh"

namespace {

/// Contiguous bf16 [R, H] input, fp8 out, the float32 [1] scale: the kernels' parameters.
QuantParams<bf16_t, fp8_e4m3_t> contiguous_params(tvm::ffi::TensorView out, tvm::ffi::TensorView scale,
                                                  tvm::ffi::TensorView input, DLDevice* device_out) {
  using namespace mllm_kernel::host;
  SymbolicSize R{"num_tokens"}, H{"hidden"};
  SymbolicDevice device;
  (void)TensorMatcher({R, H}).with_dtype<bf16_t>().with_device<kDLCUDA>(device).verify(input, "input");
  (void)TensorMatcher({R, H}).with_dtype<fp8_e4m3_t>().with_device(device).verify(out, "out");
  (void)TensorMatcher({1}).with_dtype<float>().with_device(device).verify(scale, "scale");
  RuntimeCheck(H.unwrap() % 8 == 0, "hidden must be a multiple of 8, got ", H.unwrap());
  *device_out = device.unwrap();
  return QuantParams<bf16_t, fp8_e4m3_t>{static_cast<const bf16_t*>(input.data_ptr()),
                                          static_cast<fp8_e4m3_t*>(out.data_ptr()),
                                          static_cast<float*>(scale.data_ptr()),
                                          R.unwrap(),
                                          H.unwrap(),
                                          H.unwrap(),
                                          H.unwrap(),
                                          0,
                                          0,
                                          1,
                                          0.0f,
                                          false};
}

template <int kItems>
void run_static_items(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  launch_static<bf16_t, 8, kItems>(contiguous_params(out, scale, input, &device), device, true);
}

template <int kAmaxItems, int kItems>
void run_two_pass(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  launch_two_pass<bf16_t, 8, kAmaxItems, kItems>(contiguous_params(out, scale, input, &device), device, true);
}

}  // namespace
