// Exporting a kernel entry point through tvm-ffi.
//
// The JIT layer writes one `MLLM_KERNEL_FFI_EXPORT(name, function)` line per wrapper; users
// rarely write it by hand. The exported function behaves exactly like `function`, except that
// an error it throws reaches Python with the op name in front of its message:
//   "add_constant: src: dtype must be int32, got float32 [at add_constant.cuh:52]"
// An op with several entry points names them `op__variant` (store_kv_cache__fp8); the message
// then names the op the user called, the part before "__".
#pragma once

#include <mllm_kernel/utils.hpp>

#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace mllm_kernel::ffi_detail {

/// A string usable as a template argument (C++20 class-type non-type parameter).
template <std::size_t N>
struct FixedString {
  constexpr FixedString(const char (&text)[N]) { std::copy_n(text, N, value); }  // NOLINT
  char value[N];
};

/// The op name of an export name: the part before "__", if any.
inline std::string op_name(std::string_view export_name) {
  return std::string(export_name.substr(0, export_name.find("__")));
}

/// Calls kFunction with the same signature and prefixes errors with the op name.
template <FixedString kName, auto kFunction, typename R, typename... Args>
R entry_point(Args... args) {
  try {
    return kFunction(std::forward<Args>(args)...);
  } catch (const tvm::ffi::Error& error) {
    throw tvm::ffi::Error(error.kind(), op_name(kName.value) + ": " + error.message(), std::string());
  }
}

/// The entry point of kFunction; the signature is deduced from the pointer (a function
/// template rather than a partial specialization, which nvcc's front end does not match).
template <FixedString kName, auto kFunction, typename R, typename... Args>
constexpr auto make_entry_point(R (*)(Args...)) {
  return &entry_point<kName, kFunction, R, Args...>;
}

}  // namespace mllm_kernel::ffi_detail

/// Exports `FUNCTION` (a function or static member function, template arguments allowed) to
/// Python as `module.NAME`.
#define MLLM_KERNEL_FFI_EXPORT(NAME, ...) \
  TVM_FFI_DLL_EXPORT_TYPED_FUNC(                  \
      NAME, (::mllm_kernel::ffi_detail::make_entry_point<#NAME, &__VA_ARGS__>(&__VA_ARGS__)))
