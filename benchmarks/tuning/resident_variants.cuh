// Launch shapes of the library's resident dynamic per-tensor FP8 kernel (cuda/csrc/quant.cuh)
// for contiguous bf16 input (benchmarks/tuning/tune_quant.py): threads a block, 16-byte vectors
// a thread held in registers, blocks an SM, with or without the shared-memory stash; and the
// two-kernel path the library takes below kResidentMinVecs.
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

template <int kThreads, int kRegItems, int kBlocksPerSM, bool kStash>
void run_resident(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);
  mllm_kernel::host::RuntimeCheck(launch_resident<bf16_t, 8, kThreads, kRegItems, kBlocksPerSM>(p, device, kStash),
                                  "the device cannot hold this resident grid");
}

/// The two-kernel path (amax pass, then quantization), whatever the size.
void run_two_pass(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  const auto p = contiguous_params(out, scale, input, &device);
  launch_two_pass<bf16_t, 8>(p, device, true);
}

}  // namespace
