// CPU element types: their names (the ones `make_cpp_args` produces), their DLPack dtypes, and
// the run-time switch from a DLPack dtype to one of them:
//
//   visit_float_dtype(dtype.unwrap(), [&](auto tag) {
//     using T = decltype(tag);           // float, fp16_t or bf16_t
//     ...MLLM_KERNEL_CPU_DISPATCH(MyKernel<T>)...
//   });
//
// One module then serves all three dtypes, so each op family compiles once.
#pragma once

#include <mllm_kernel/dtype.hpp>
#include <mllm_kernel/errors.hpp>

#include <dlpack/dlpack.h>
#include <hwy/base.h>

namespace mllm_kernel {

/// Highway's storage types for half precision: converted with PromoteTo/DemoteTo in kernels.
using fp16_t = hwy::float16_t;
using bf16_t = hwy::bfloat16_t;
/// fp8 has no CPU arithmetic type: the names are dtype.hpp's storage tags (for `with_dtype`).
using fp8_e4m3_t = fp8_e4m3_storage;
using fp8_e5m2_t = fp8_e5m2_storage;

template <>
struct dl_dtype<hwy::float16_t> : dl_dtype<fp16_storage> {};
template <>
struct dl_dtype<hwy::bfloat16_t> : dl_dtype<bf16_storage> {};

}  // namespace mllm_kernel

// At global scope too, for the generated export lines (see dtype.hpp).
using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp8_e4m3_t;
using mllm_kernel::fp8_e5m2_t;

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
