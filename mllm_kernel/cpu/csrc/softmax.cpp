// CPU row softmax over the last dim for float32, float16 and bfloat16 (computed in float32),
// Highway SIMD chosen at run time, rows split over the module's thread pool.
// Body: mllm_kernel/cpu/softmax.hpp.
#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/softmax.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/softmax.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/cpu/types.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

/// out = softmax(input, dim=-1); input and out are [..., hidden] seen as rows (RowsArgs; out may
/// alias input), one dtype.
inline void softmax(mllm_kernel::TensorView out, mllm_kernel::TensorView input, std::int64_t num_threads) {
  host::RowsArgs a;
  a.verify<kDLCPU, float, fp16_t, bf16_t>(out, input);

  const SoftmaxParams p{input.data_ptr(), a.in_stride.unwrap(), out.data_ptr(), a.out_stride.unwrap(), a.hidden.unwrap()};
  visit_float_dtype(a.dtype.unwrap(), [&](auto tag) {
    using T = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(SoftmaxRows<T>);
    parallel_for(a.tokens.unwrap(), 2 * a.hidden.unwrap() * static_cast<std::int64_t>(sizeof(T)), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

}  // namespace mllm_kernel::cpu
