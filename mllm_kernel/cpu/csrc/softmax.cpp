// CPU row softmax over the last dim for float32, float16 and bfloat16 (computed in float32),
// Highway SIMD chosen at run time, rows split over the module's thread pool.
// Body: mllm_kernel/cpu/softmax.hpp.
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <tvm/ffi/container/tensor.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/softmax.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/float_dtype.hpp>
#include <mllm_kernel/cpu/softmax.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

/// out = softmax(input, dim=-1); input and out are [..., cols] seen as rows [rows, cols] with
/// free row strides (out may alias input), one dtype.
inline void softmax(tvm::ffi::TensorView out, tvm::ffi::TensorView input, std::int64_t num_threads) {
  using namespace host;
  SymbolicSize R{"num_rows"}, C{"cols"}, S_in{"input_row_stride"}, S_out{"out_row_stride"};
  SymbolicDType dtype;
  SymbolicDevice device;
  (void)TensorMatcher({R, C})
      .with_strides({S_in, 1})
      .with_dtype<float, fp16_t, bf16_t>(dtype)
      .with_device<kDLCPU>(device)
      .verify_rows(input, "input");
  (void)TensorMatcher({R, C}).with_strides({S_out, 1}).with_dtype(dtype).with_device(device).verify_rows(out, "out");
  RuntimeCheck(R.unwrap() > 0 && C.unwrap() > 0, "input must not be empty");

  const SoftmaxParams p{input.data_ptr(), S_in.unwrap(), out.data_ptr(), S_out.unwrap(), C.unwrap()};
  visit_float_dtype(dtype.unwrap(), [&](auto tag) {
    using T = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(SoftmaxRows<T>);
    parallel_for(R.unwrap(), 2 * C.unwrap() * static_cast<std::int64_t>(sizeof(T)), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

}  // namespace mllm_kernel::cpu
