// Host-side essentials: checked errors with the caller's location, integer helpers and
// readable names of DLPack dtypes and devices.
//
// Every check in the library throws `PanicError`, which tvm-ffi turns into a Python exception
// (ValueError unless said otherwise) that carries the message and the file:line of the check.
#pragma once

#include <mllm_kernel/source_location.hpp>

#include <dlpack/dlpack.h>
#include <tvm/ffi/error.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace mllm_kernel::host {

/// The exception every mllm-kernel check throws. It is a tvm-ffi error, so crossing the FFI
/// boundary keeps its kind: `ValueError` (bad arguments) or `RuntimeError` (device failures).
class PanicError : public tvm::ffi::Error {
 public:
  PanicError(std::string kind, std::string message)
      : tvm::ffi::Error(std::move(kind), std::move(message), std::string()) {}
};

namespace detail {

template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  ((os << std::forward<Args>(args)), ...);
  return os.str();
}

/// "[a, b, c]": a shape or strides in messages.
inline std::string list_text(const std::int64_t* values, int n) {
  std::string out = "[";
  for (int i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

/// Appends " [at file:line]" so a message says where the failed check lives.
inline std::string with_location(std::string message, const source_location& loc) {
  message += " [at ";
  message += short_file_name(loc.file_name());
  message += ':';
  message += std::to_string(loc.line());
  message += ']';
  return message;
}

[[noreturn]] inline void throw_panic(std::string kind, std::string message,
                                     const source_location& loc) {
  throw PanicError(std::move(kind), with_location(std::move(message), loc));
}

}  // namespace detail

/// `RuntimeCheck(cond, parts...)`: throws a ValueError whose message is `parts...` streamed
/// together, followed by the caller's file:line, when `cond` is false.
template <typename... Args>
struct RuntimeCheck {
  explicit RuntimeCheck(bool condition, Args&&... args,
                        source_location loc = source_location::current()) {
    if (!condition) [[unlikely]] {
      detail::throw_panic("ValueError", detail::concat(std::forward<Args>(args)...), loc);
    }
  }
};
template <typename... Args>
RuntimeCheck(bool, Args&&...) -> RuntimeCheck<Args...>;

/// `Panic(parts...)`: always throws a ValueError with the streamed message and the caller's
/// file:line. Use it for unsupported cases (an unknown dtype, a constant out of range).
template <typename... Args>
struct Panic {
  [[noreturn]] explicit Panic(Args&&... args, source_location loc = source_location::current()) {
    detail::throw_panic("ValueError", detail::concat(std::forward<Args>(args)...), loc);
  }
};
template <typename... Args>
Panic(Args&&...) -> Panic<Args...>;

/// Ceiling of `a / b` for non-negative integers.
template <typename A, typename B>
constexpr auto div_ceil(A a, B b) -> std::common_type_t<A, B> {
  using T = std::common_type_t<A, B>;
  // Quotient plus one for a remainder: `(a + b - 1) / b` overflows near T's maximum.
  const T quotient = static_cast<T>(a) / static_cast<T>(b);
  return static_cast<T>(quotient + (static_cast<T>(a) % static_cast<T>(b) != 0 ? 1 : 0));
}

/// A half-open integer range [begin, end) for range-for loops: `for (auto i : irange(n))`.
template <typename T>
class IntegerRange {
 public:
  class iterator {
   public:
    constexpr explicit iterator(T value) : value_(value) {}
    constexpr T operator*() const { return value_; }
    constexpr iterator& operator++() {
      ++value_;
      return *this;
    }
    constexpr bool operator!=(const iterator& other) const { return value_ != other.value_; }
    constexpr bool operator==(const iterator& other) const { return value_ == other.value_; }

   private:
    T value_;
  };
  constexpr IntegerRange(T begin, T end) : begin_(begin), end_(end < begin ? begin : end) {}
  constexpr iterator begin() const { return iterator(begin_); }
  constexpr iterator end() const { return iterator(end_); }
  constexpr T size() const { return end_ - begin_; }

 private:
  T begin_;
  T end_;
};

/// [0, end)
template <typename T>
constexpr IntegerRange<T> irange(T end) {
  return IntegerRange<T>(T{0}, end);
}

/// [begin, end); an empty range when end <= begin.
template <typename T, typename U>
constexpr IntegerRange<std::common_type_t<T, U>> irange(T begin, U end) {
  using C = std::common_type_t<T, U>;
  return IntegerRange<C>(static_cast<C>(begin), static_cast<C>(end));
}

/// Bytes one element of `dtype` occupies (lanes included); 1 for bool.
constexpr std::int64_t dtype_bytes(DLDataType dtype) {
  return (static_cast<std::int64_t>(dtype.bits) * dtype.lanes + 7) / 8;
}

/// The PyTorch name of a DLPack dtype ("float32", "bfloat16", "float8_e4m3fn", ...), so
/// messages read like PyTorch's own.
inline std::string dtype_name(DLDataType dtype) {
  std::string base;
  switch (dtype.code) {
    case kDLFloat: base = "float" + std::to_string(dtype.bits); break;
    case kDLInt: base = "int" + std::to_string(dtype.bits); break;
    case kDLUInt: base = "uint" + std::to_string(dtype.bits); break;
    case kDLBfloat: base = dtype.bits == 16 ? "bfloat16" : "bfloat" + std::to_string(dtype.bits); break;
    case kDLBool: base = "bool"; break;
    case kDLFloat8_e4m3fn: base = "float8_e4m3fn"; break;
    case kDLFloat8_e4m3fnuz: base = "float8_e4m3fnuz"; break;
    case kDLFloat8_e5m2: base = "float8_e5m2"; break;
    case kDLFloat8_e5m2fnuz: base = "float8_e5m2fnuz"; break;
    case kDLFloat8_e8m0fnu: base = "float8_e8m0fnu"; break;
    case kDLComplex: base = "complex" + std::to_string(dtype.bits); break;
    default: base = "dtype(code=" + std::to_string(dtype.code) + ", bits=" + std::to_string(dtype.bits) + ")";
  }
  if (dtype.lanes != 1) base += "x" + std::to_string(dtype.lanes);
  return base;
}

/// The PyTorch-style name of a device type: "cpu", "cuda", "cuda_host", ...
inline std::string device_type_name(int device_type) {
  switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLROCM: return "rocm";
    case kDLROCMHost: return "rocm_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLOneAPI: return "oneapi";
    default: return "device_type(" + std::to_string(device_type) + ")";
  }
}

/// "cpu" for the host, "cuda:1" for an accelerator.
inline std::string device_name(DLDevice device) {
  if (device.device_type == kDLCPU) return "cpu";
  return device_type_name(device.device_type) + ":" + std::to_string(device.device_id);
}

/// Whether two DLPack dtypes are the same (named, not an operator, to stay clear of the
/// comparison operators other libraries declare for DLPack's structs).
constexpr bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
/// Whether two DLPack devices are the same.
constexpr bool same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

}  // namespace mllm_kernel::host
