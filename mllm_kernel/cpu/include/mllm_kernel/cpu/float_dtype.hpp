// Run-time dtype switch for the CPU kernels that accept float32, float16 and bfloat16.
//
//   visit_float_dtype(dtype.unwrap(), [&](auto tag) {
//     using T = decltype(tag);           // float, fp16_t or bf16_t
//     ...MLLM_KERNEL_CPU_DISPATCH(MyKernel<T>)...
//   });
//
// One module then serves all three dtypes, so each op family compiles once.
#pragma once

#include <mllm_kernel/cpu/types.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>

namespace mllm_kernel::cpu {

/// Calls fn(T{}) with T the C++ type of `dtype` (float, fp16_t or bf16_t); a ValueError for
/// any other dtype (TensorMatcher normally rejects those first).
template <typename Fn>
void visit_float_dtype(DLDataType dtype, Fn&& fn) {
  if (host::same_dtype(dtype, dl_dtype<float>::value)) return fn(float{});
  if (host::same_dtype(dtype, dl_dtype<fp16_t>::value)) return fn(fp16_t{});
  if (host::same_dtype(dtype, dl_dtype<bf16_t>::value)) return fn(bf16_t{});
  host::Panic("unsupported dtype ", host::dtype_name(dtype));
}

}  // namespace mllm_kernel::cpu
