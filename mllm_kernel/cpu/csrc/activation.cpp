// CPU gated activations: silu_and_mul, gelu_and_mul and gelu_tanh_and_mul for float32, float16
// and bfloat16, Highway SIMD chosen at run time, rows split over the module's thread pool.
// Bodies: mllm_kernel/cpu/activation.hpp.
#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/activation.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/activation.hpp>
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/cpu/types.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

namespace detail {

/// Checks out [..., d] and input [..., 2 * d] as rows (ActAndMulArgs) and returns the kernel
/// parameters with the dtype and the row count.
inline ActAndMulParams check_act_and_mul(mllm_kernel::TensorView out, mllm_kernel::TensorView input, DLDataType* dtype_out,
                                         std::int64_t* rows_out) {
  host::ActAndMulArgs a;
  a.verify<kDLCPU, float, fp16_t, bf16_t>(out, input);
  *dtype_out = a.dtype.unwrap();
  *rows_out = a.tokens.unwrap();
  return ActAndMulParams{input.data_ptr(), a.in_stride.unwrap(), out.data_ptr(), a.out_stride.unwrap(), a.d.unwrap()};
}

/// Runs one activation body over all rows; the body is chosen per dtype by `pick`.
template <typename Pick>
void run_act_and_mul(mllm_kernel::TensorView out, mllm_kernel::TensorView input, std::int64_t num_threads, Pick pick) {
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
inline void silu_and_mul(mllm_kernel::TensorView out, mllm_kernel::TensorView input, std::int64_t num_threads) {
  detail::run_act_and_mul(out, input, num_threads, [](auto tag) {
    return MLLM_KERNEL_CPU_DISPATCH(SiluAndMulRows<decltype(tag)>);
  });
}

/// out = gelu(input[..., :d]) * input[..., d:] with the exact (erf) GELU.
inline void gelu_and_mul(mllm_kernel::TensorView out, mllm_kernel::TensorView input, std::int64_t num_threads) {
  detail::run_act_and_mul(out, input, num_threads, [](auto tag) {
    return MLLM_KERNEL_CPU_DISPATCH(GeluAndMulRows<decltype(tag)>);
  });
}

/// out = gelu_tanh(input[..., :d]) * input[..., d:] with the tanh approximation of GELU.
inline void gelu_tanh_and_mul(mllm_kernel::TensorView out, mllm_kernel::TensorView input, std::int64_t num_threads) {
  detail::run_act_and_mul(out, input, num_threads, [](auto tag) {
    return MLLM_KERNEL_CPU_DISPATCH(GeluTanhAndMulRows<decltype(tag)>);
  });
}

}  // namespace mllm_kernel::cpu
