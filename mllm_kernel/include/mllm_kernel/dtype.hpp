// DLPack dtypes on the host: the compile-time mapping from C++ element types, and a dtype's
// size, PyTorch name and equality.
//
// `dl_dtype<T>::value` is the DLDataType of T. Plain C++ types are mapped here; each device's
// element types add their own (CUDA's `__half`, `__nv_bfloat16` and fp8 types in type.cuh,
// Highway's float16/bfloat16 types in cpu/types.hpp). For host code that has no such type, the
// storage tags below name those dtypes.
#pragma once

#include <mllm_kernel/host_runtime.hpp>
#include <mllm_kernel/text.hpp>

#include <dlpack/dlpack.h>

#include <cstdint>

namespace mllm_kernel {

/// The float element types under the names `make_cpp_args` spells; each device's header names
/// its half-precision and fp8 types (type.cuh for CUDA, cpu/types.hpp for the CPU).
using fp32_t = float;
using fp64_t = double;

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
MLLM_KERNEL_DEFINE_DL_DTYPE(std::uint16_t, kDLUInt, 16);
MLLM_KERNEL_DEFINE_DL_DTYPE(std::uint32_t, kDLUInt, 32);
MLLM_KERNEL_DEFINE_DL_DTYPE(std::uint64_t, kDLUInt, 64);
MLLM_KERNEL_DEFINE_DL_DTYPE(bool, kDLBool, 8);
MLLM_KERNEL_DEFINE_DL_DTYPE(fp16_storage, kDLFloat, 16);
MLLM_KERNEL_DEFINE_DL_DTYPE(bf16_storage, kDLBfloat, 16);
MLLM_KERNEL_DEFINE_DL_DTYPE(fp8_e4m3_storage, kDLFloat8_e4m3fn, 8);
MLLM_KERNEL_DEFINE_DL_DTYPE(fp8_e5m2_storage, kDLFloat8_e5m2, 8);

}  // namespace mllm_kernel

// Also at global scope, where the JIT's generated export lines name template arguments
// (`MLLM_KERNEL_FFI_EXPORT(run, MyKernel<fp32_t>::run)` follows the kernel's own namespaces).
using mllm_kernel::fp32_t;
using mllm_kernel::fp64_t;

namespace mllm_kernel::host {

/// Bytes one element of `dtype` occupies (lanes included); 1 for bool.
constexpr std::int64_t dtype_bytes(DLDataType dtype) {
  return (static_cast<std::int64_t>(dtype.bits) * dtype.lanes + 7) / 8;
}

/// The PyTorch name of a DLPack dtype ("float32", "bfloat16", "float8_e4m3fn", ...), so
/// messages read like PyTorch's own.
MLLM_KERNEL_HOST_API Text dtype_name(DLDataType dtype);

/// Whether two DLPack dtypes are the same (named, not an operator, to stay clear of the
/// comparison operators other libraries declare for DLPack's structs).
constexpr bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

}  // namespace mllm_kernel::host
