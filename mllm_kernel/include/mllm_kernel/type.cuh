// CUDA element types: their names (fp32_t, fp16_t, bf16_t, fp8_e4m3_t, fp8_e5m2_t, the ones
// `make_cpp_args` produces), their DLPack dtypes, and traits and conversions for device code.
//
//   dtype_trait<bf16_t>::packed_t      -> nv_bfloat162 (two lanes in one register)
//   packed_t<fp16_t>                   -> half2
//   device::cast<float>(x)             -> x widened to fp32
//   device::cast<fp8_e4m3_t>(1.5f)     -> saturating fp8 conversion
//   device::cast<float2>(bf16x2)       -> both lanes widened at once
//
// Every cast between two scalar types goes through fp32 unless a direct intrinsic exists, so
// adding a new element type only needs its conversions to and from float.
#pragma once

#include <mllm_kernel/dtype.hpp>
#include <mllm_kernel/host_device.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

namespace mllm_kernel {

/// CUDA's element types under the names the kernels and `make_cpp_args` use (fp32_t and
/// fp64_t: dtype.hpp).
using fp16_t = __half;
using bf16_t = __nv_bfloat16;
using fp8_e4m3_t = __nv_fp8_e4m3;
using fp8_e5m2_t = __nv_fp8_e5m2;

template <>
struct dl_dtype<__half> : dl_dtype<fp16_storage> {};
template <>
struct dl_dtype<__nv_bfloat16> : dl_dtype<bf16_storage> {};
template <>
struct dl_dtype<__nv_fp8_e4m3> : dl_dtype<fp8_e4m3_storage> {};
template <>
struct dl_dtype<__nv_fp8_e5m2> : dl_dtype<fp8_e5m2_storage> {};

}  // namespace mllm_kernel

// At global scope too, for the generated export lines (see dtype.hpp).
using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp8_e4m3_t;
using mllm_kernel::fp8_e5m2_t;

namespace mllm_kernel::device {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp32_t;
using mllm_kernel::fp8_e4m3_t;
using mllm_kernel::fp8_e5m2_t;

/// Per-element-type facts: `packed_t` holds two lanes (the unit of paired arithmetic
/// intrinsics), `kBytes` is the element size. Undefined for unsupported types.
template <typename T>
struct dtype_trait;

template <>
struct dtype_trait<float> {
  using packed_t = float2;
  static constexpr int kBytes = 4;
};
template <>
struct dtype_trait<fp16_t> {
  using packed_t = half2;
  static constexpr int kBytes = 2;
};
template <>
struct dtype_trait<bf16_t> {
  using packed_t = nv_bfloat162;
  static constexpr int kBytes = 2;
};
template <>
struct dtype_trait<fp8_e4m3_t> {
  using packed_t = __nv_fp8x2_e4m3;
  static constexpr int kBytes = 1;
};

/// The two-lane type of T (half2 for fp16_t, nv_bfloat162 for bf16_t, float2 for float).
template <typename T>
using packed_t = typename dtype_trait<T>::packed_t;

namespace detail {

template <typename T>
inline constexpr bool is_scalar_float_v = std::is_same_v<T, float> || std::is_same_v<T, fp16_t> ||
                                          std::is_same_v<T, bf16_t> || std::is_same_v<T, fp8_e4m3_t>;

/// Scalar to fp32.
template <typename From>
MLLM_DEVICE float to_float(From x) {
  if constexpr (std::is_same_v<From, float>) {
    return x;
  } else if constexpr (std::is_same_v<From, fp16_t>) {
    return __half2float(x);
  } else if constexpr (std::is_same_v<From, bf16_t>) {
    return __bfloat162float(x);
  } else if constexpr (std::is_same_v<From, fp8_e4m3_t>) {
    return static_cast<float>(x);
  } else {
    return static_cast<float>(x);  // integers and double
  }
}

/// fp32 to scalar, rounding to nearest even (fp8 saturates to the finite range).
template <typename To>
MLLM_DEVICE To from_float(float x) {
  if constexpr (std::is_same_v<To, float>) {
    return x;
  } else if constexpr (std::is_same_v<To, fp16_t>) {
    return __float2half_rn(x);
  } else if constexpr (std::is_same_v<To, bf16_t>) {
    return __float2bfloat16_rn(x);
  } else if constexpr (std::is_same_v<To, fp8_e4m3_t>) {
    return fp8_e4m3_t(x);  // __NV_SATFINITE conversion
  } else {
    return static_cast<To>(x);
  }
}

}  // namespace detail

/// Converts one value (or one packed pair) to `To`. Same-type casts are free; pairs convert
/// both lanes with the paired intrinsics; anything else goes through fp32.
template <typename To, typename From>
MLLM_DEVICE To cast(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, float2> && std::is_same_v<From, half2>) {
    return __half22float2(x);
  } else if constexpr (std::is_same_v<To, float2> && std::is_same_v<From, nv_bfloat162>) {
    return __bfloat1622float2(x);
  } else if constexpr (std::is_same_v<To, half2> && std::is_same_v<From, float2>) {
    return __float22half2_rn(x);
  } else if constexpr (std::is_same_v<To, nv_bfloat162> && std::is_same_v<From, float2>) {
    return __float22bfloat162_rn(x);
  } else if constexpr (std::is_same_v<To, float2> && std::is_same_v<From, __nv_fp8x2_e4m3>) {
    return static_cast<float2>(x);
  } else if constexpr (std::is_same_v<To, __nv_fp8x2_e4m3> && std::is_same_v<From, float2>) {
    return __nv_fp8x2_e4m3(x);
  } else if constexpr (std::is_same_v<To, fp16_t> && std::is_same_v<From, fp8_e4m3_t>) {
    return static_cast<__half>(x);  // exact: every e4m3 value is a half
  } else {
    static_assert(detail::is_scalar_float_v<To> || std::is_arithmetic_v<To>, "cast: unsupported target type");
    return detail::from_float<To>(detail::to_float(x));
  }
}

}  // namespace mllm_kernel::device
