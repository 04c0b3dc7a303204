// Compile-time mapping from C++ element types to DLPack dtypes.
//
// `dl_dtype<T>::value` is the DLDataType of T. Plain C++ types are mapped here; the device
// headers add CUDA's `__half`, `__nv_bfloat16` and fp8 types (utils.cuh), and the CPU headers
// add Highway's float16/bfloat16 types. For host code that has no such type, the storage tags
// below name those dtypes.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>

namespace mllm_kernel {

/// Storage tags for dtypes with no portable host C++ type (usable in `with_dtype<...>()`).
struct fp16_storage {};
struct bf16_storage {};
struct fp8_e4m3_storage {};
struct fp8_e5m2_storage {};

/// Primary template: left undefined so an unsupported element type fails to compile.
template <typename T>
struct dl_dtype;

#define MLLM_KERNEL_DEFINE_DL_DTYPE(TYPE, CODE, BITS) \
  template <>                                         \
  struct dl_dtype<TYPE> {                             \
    static constexpr DLDataType value{static_cast<std::uint8_t>(CODE), BITS, 1}; \
  }

MLLM_KERNEL_DEFINE_DL_DTYPE(float, kDLFloat, 32);
MLLM_KERNEL_DEFINE_DL_DTYPE(double, kDLFloat, 64);
MLLM_KERNEL_DEFINE_DL_DTYPE(std::int8_t, kDLInt, 8);
MLLM_KERNEL_DEFINE_DL_DTYPE(std::int16_t, kDLInt, 16);
MLLM_KERNEL_DEFINE_DL_DTYPE(std::int32_t, kDLInt, 32);
MLLM_KERNEL_DEFINE_DL_DTYPE(std::int64_t, kDLInt, 64);
MLLM_KERNEL_DEFINE_DL_DTYPE(std::uint8_t, kDLUInt, 8);
MLLM_KERNEL_DEFINE_DL_DTYPE(bool, kDLBool, 8);
MLLM_KERNEL_DEFINE_DL_DTYPE(fp16_storage, kDLFloat, 16);
MLLM_KERNEL_DEFINE_DL_DTYPE(bf16_storage, kDLBfloat, 16);
MLLM_KERNEL_DEFINE_DL_DTYPE(fp8_e4m3_storage, kDLFloat8_e4m3fn, 8);
MLLM_KERNEL_DEFINE_DL_DTYPE(fp8_e5m2_storage, kDLFloat8_e5m2, 8);

}  // namespace mllm_kernel
