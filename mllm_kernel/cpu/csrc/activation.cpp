// CPU gated activations: silu_and_mul, gelu_and_mul and gelu_tanh_and_mul for float32, float16
// and bfloat16, Highway SIMD chosen at run time, rows split over the module's thread pool.
// Bodies: mllm_kernel/cpu/activation.hpp.
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <tvm/ffi/container/tensor.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/activation.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/activation.hpp>
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/float_dtype.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

namespace detail {

/// Checks out [..., d] and input [..., 2*d] as rows (row strides free, one dtype) and returns
/// the kernel parameters with the dtype and the row count.
inline ActAndMulParams check_act_and_mul(tvm::ffi::TensorView out, tvm::ffi::TensorView input, DLDataType* dtype_out,
                                         std::int64_t* rows_out) {
  using namespace host;
  SymbolicSize R{"num_rows"}, H2{"2*d"}, S_in{"input_row_stride"}, S_out{"out_row_stride"};
  SymbolicDType dtype;
  SymbolicDevice device;
  (void)TensorMatcher({R, H2})
      .with_strides({S_in, 1})
      .with_dtype<float, fp16_t, bf16_t>(dtype)
      .with_device<kDLCPU>(device)
      .verify_rows(input, "input");
  RuntimeCheck(H2.unwrap() % 2 == 0, "input: last dim must be even (gate and up halves), got ", H2.unwrap());
  SymbolicSize D{"d"};
  D.bind(H2.unwrap() / 2, "input");
  (void)TensorMatcher({R, D}).with_strides({S_out, 1}).with_dtype(dtype).with_device(device).verify_rows(out, "out");
  RuntimeCheck(R.unwrap() > 0 && D.unwrap() > 0, "input must not be empty");
  *dtype_out = dtype.unwrap();
  *rows_out = R.unwrap();
  return ActAndMulParams{input.data_ptr(), S_in.unwrap(), out.data_ptr(), S_out.unwrap(), D.unwrap()};
}

/// Runs one activation body over all rows; the body is chosen per dtype by `pick`.
template <typename Pick>
void run_act_and_mul(tvm::ffi::TensorView out, tvm::ffi::TensorView input, std::int64_t num_threads, Pick pick) {
  DLDataType dtype;
  std::int64_t rows;
  const ActAndMulParams p = check_act_and_mul(out, input, &dtype, &rows);
  visit_float_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    auto* fn = pick(tag);
    parallel_for(rows, 3 * p.d * static_cast<std::int64_t>(sizeof(T)), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

}  // namespace detail

/// out = silu(input[..., :d]) * input[..., d:]; input [rows, 2d], out [rows, d].
inline void silu_and_mul(tvm::ffi::TensorView out, tvm::ffi::TensorView input, std::int64_t num_threads) {
  detail::run_act_and_mul(out, input, num_threads, [](auto tag) {
    return MLLM_KERNEL_CPU_DISPATCH(SiluAndMulRows<decltype(tag)>);
  });
}

/// out = gelu(input[..., :d]) * input[..., d:] with the exact (erf) GELU.
inline void gelu_and_mul(tvm::ffi::TensorView out, tvm::ffi::TensorView input, std::int64_t num_threads) {
  detail::run_act_and_mul(out, input, num_threads, [](auto tag) {
    return MLLM_KERNEL_CPU_DISPATCH(GeluAndMulRows<decltype(tag)>);
  });
}

/// out = gelu_tanh(input[..., :d]) * input[..., d:] with the tanh approximation of GELU.
inline void gelu_tanh_and_mul(tvm::ffi::TensorView out, tvm::ffi::TensorView input, std::int64_t num_threads) {
  detail::run_act_and_mul(out, input, num_threads, [](auto tag) {
    return MLLM_KERNEL_CPU_DISPATCH(GeluTanhAndMulRows<decltype(tag)>);
  });
}

}  // namespace mllm_kernel::cpu
