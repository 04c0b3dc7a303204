// Launch-shape sweep for the gated activations on bf16 [T, 2 x 11008]
// (benchmarks/tuning/tune_act.py): the library's kernel (cuda/csrc/activation.cuh) launched with
// a fixed vector width and block size, so every shape can be timed at 1 to 16384 tokens in one
// GPU run. `act`: 0 silu, 1 tanh-approximated gelu.
#pragma once

#include "../../mllm_kernel/cuda/csrc/activation.cuh"

namespace {

template <int kVec, int kThreads>
void run_act_shape(tvm::ffi::TensorView out, tvm::ffi::TensorView input, std::int64_t act) {
  using namespace mllm_kernel::host;
  SymbolicSize N{"num_tokens"}, D{"d"};
  SymbolicDevice device;
  (void)TensorMatcher({N, D}).with_dtype<bf16_t>().with_device<kDLCUDA>(device).verify(out, "out");
  RuntimeCheck(D.unwrap() % kVec == 0, "d must be a multiple of ", kVec, ", got ", D.unwrap());
  (void)TensorMatcher({N, 2 * D.unwrap()}).with_dtype<bf16_t>().with_device(device).verify(input, "input");
  const ActParams<bf16_t> p{static_cast<bf16_t*>(out.data_ptr()), static_cast<const bf16_t*>(input.data_ptr()),
                            N.unwrap(), 0, 2 * D.unwrap(), D.unwrap(), D.unwrap(), false};
  if (act == 0) {
    launch_act<bf16_t, kVec, kThreads, SiLU>(p, device.unwrap(), false);
  } else {
    launch_act<bf16_t, kVec, kThreads, GeLUTanh>(p, device.unwrap(), false);
  }
}

}  // namespace
