// CPU element types under the names `make_cpp_args` produces, and their DLPack dtypes.
#pragma once

#include <mllm_kernel/dtype.hpp>

#include <hwy/base.h>

namespace mllm_kernel {

/// Highway's storage types for half precision: converted with PromoteTo/DemoteTo in kernels.
using fp32_t = float;
using fp16_t = hwy::float16_t;
using bf16_t = hwy::bfloat16_t;

template <>
struct dl_dtype<hwy::float16_t> : dl_dtype<fp16_storage> {};
template <>
struct dl_dtype<hwy::bfloat16_t> : dl_dtype<bf16_storage> {};

}  // namespace mllm_kernel
