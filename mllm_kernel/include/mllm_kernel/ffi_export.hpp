// Exporting a kernel entry point through tvm-ffi's C ABI.
//
// The JIT layer writes one `MLLM_KERNEL_FFI_EXPORT(name, function)` line per wrapper; users
// rarely write it by hand. It defines `__tvm_ffi_<name>`, the symbol tvm-ffi's module loader
// calls, which reads the arguments straight from tvm-ffi's C structs into the function's
// parameters (tensors as TensorView, integers, bool, floating point), calls the function, and
// turns an exception into a raised tvm-ffi error with the op name in front of its message:
//   "add_constant: src: dtype must be int32, got float32 [at add_constant.cuh:52]"
// An op with several entry points names them `op__variant` (store_kv_cache__fp8); the message
// then names the op the user called, the part before "__".
//
// Only tvm-ffi's C header is needed: a kernel's translation unit never parses tvm-ffi's C++
// headers, which cost seconds per build in each of nvcc's front ends. A kernel source that does
// include them before this header (the JIT includes kernel sources first) gets more: its
// tvm::ffi::Error keeps its kind, and with <tvm/ffi/function.h> a function with other parameter
// types (tvm-ffi's containers, Optional, String) is exported through tvm-ffi's own unpacking.
#pragma once

#include <mllm_kernel/errors.hpp>
#include <mllm_kernel/tensor_view.hpp>
#include <mllm_kernel/text.hpp>

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

namespace mllm_kernel::ffi_detail {

/// A string usable as a template argument (C++20 class-type non-type parameter).
template <std::size_t N>
struct FixedString {
  constexpr FixedString(const char (&text)[N]) {  // NOLINT(google-explicit-constructor)
    for (std::size_t i = 0; i < N; ++i) value[i] = text[i];
  }
  char value[N];
};

/// `message` with the op name of an export name (the part before "__", if any) in front:
/// "rmsnorm: ...".
inline host::Text with_op_name(const char* export_name, const char* message) {
  std::size_t op = 0;
  while (export_name[op] != '\0' && !(export_name[op] == '_' && export_name[op + 1] == '_')) ++op;
  host::Text out(export_name, op);
  out.append(": ");
  out.append(message);
  return out;
}

/// Raises `kind: message` as the error of the current call (returned -1 to tvm-ffi).
inline int raise(const char* kind, const host::Text& message) {
  TVMFFIErrorSetRaisedFromCStr(kind, message.c_str());
  return -1;
}

/// tvm-ffi's name of the type an argument holds ("int", "float", "ffi.String", ...).
inline host::Text type_key(const TVMFFIAny& any) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(any.type_index);
  if (info == nullptr) return host::detail::concat("type_index(", any.type_index, ")");
  return host::Text(info->type_key.data, info->type_key.size);
}

/// The TypeError of an argument that does not convert, in tvm-ffi's own words.
class ArgumentTypeError : public std::exception {
 public:
  ArgumentTypeError(int index, const char* expected, host::Text got)
      : index_(index), expected_(expected), got_(std::move(got)) {}
  host::Text message(const char* function) const {
    return host::detail::concat("Mismatched type on argument #", index_, " when calling: `", function,
                                "`. Expected `", expected_, "` but got `", got_, "`");
  }

 private:
  int index_;
  const char* expected_;
  host::Text got_;
};

/// A std::string-like result type (characters at data() for size(), with char traits), returned
/// to Python as a str; std::string itself needs no <string> here.
template <typename R>
concept StringResult = host::kCharSpan<R> && requires { typename R::traits_type; };

/// Whether parameters of type P are read by this header (else tvm-ffi's C++ unpacking is needed):
/// numbers and tensors, by value or by const reference (bound to the value read for the call).
template <typename P>
inline constexpr bool kLightParam =
    (std::is_arithmetic_v<std::remove_cvref_t<P>> || std::is_constructible_v<std::remove_cvref_t<P>, const DLTensor*>) &&
    (!std::is_reference_v<P> || std::is_const_v<std::remove_reference_t<P>>);

/// Whether results of type R are written by this header.
template <typename R>
inline constexpr bool kLightResult = std::is_void_v<R> || std::is_arithmetic_v<R> || StringResult<R>;

/// Argument `index` as a value of type T, converted as tvm-ffi converts it: bool and integers
/// from int or bool, floating point from float, int or bool, tensors from a tensor object or a
/// DLTensor pointer.
template <typename T>
T read_arg(const TVMFFIAny& any, int index) {
  const std::int32_t type = any.type_index;
  if constexpr (std::is_same_v<T, bool>) {
    if (type == kTVMFFIBool || type == kTVMFFIInt) return any.v_int64 != 0;
    throw ArgumentTypeError(index, "bool", type_key(any));
  } else if constexpr (std::is_integral_v<T>) {
    if (type == kTVMFFIInt || type == kTVMFFIBool) return static_cast<T>(any.v_int64);
    throw ArgumentTypeError(index, "int", type_key(any));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (type == kTVMFFIFloat) return static_cast<T>(any.v_float64);
    if (type == kTVMFFIInt || type == kTVMFFIBool) return static_cast<T>(any.v_int64);
    throw ArgumentTypeError(index, "float", type_key(any));
  } else {
    if (type == kTVMFFITensor) return T(static_cast<const DLTensor*>(TVMFFITensorGetDLTensorPtr(any.v_obj)));
    if (type == kTVMFFIDLTensorPtr) return T(static_cast<const DLTensor*>(any.v_ptr));
    throw ArgumentTypeError(index, "Tensor", type_key(any));
  }
}

/// Stores `value` as the call's result.
template <typename R>
void write_result(R&& value, TVMFFIAny* result) {
  using T = std::remove_cvref_t<R>;
  result->zero_padding = 0;
  if constexpr (std::is_same_v<T, bool>) {
    result->type_index = kTVMFFIBool;
    result->v_int64 = value ? 1 : 0;
  } else if constexpr (std::is_integral_v<T>) {
    result->type_index = kTVMFFIInt;
    result->v_int64 = static_cast<std::int64_t>(value);
  } else if constexpr (std::is_floating_point_v<T>) {
    result->type_index = kTVMFFIFloat;
    result->v_float64 = static_cast<double>(value);
  } else {
    const TVMFFIByteArray bytes{value.data(), value.size()};
    if (TVMFFIStringFromByteArray(&bytes, result) != 0) throw host::PanicError("RuntimeError", "cannot return a string");
  }
}

/// Calls `function` with the arguments of a tvm-ffi call; the exported symbol's body.
template <FixedString kName, typename R, typename... Args>
int safe_call(R (*function)(Args...), const TVMFFIAny* args, std::int32_t num_args, TVMFFIAny* result) {
  try {
    if (num_args != static_cast<std::int32_t>(sizeof...(Args))) {
      return raise("TypeError", host::detail::concat("Mismatched number of arguments when calling: `", kName.value,
                                                     "`. Expected ", sizeof...(Args), " but got ", num_args,
                                                     " arguments"));
    }
    const auto call = [&]<std::size_t... I>(std::index_sequence<I...>) -> R {
      // Values, not Args: a const reference parameter binds to the value for the whole call.
      return function(read_arg<std::remove_cvref_t<Args>>(args[I], static_cast<int>(I))...);
    };
    if constexpr (std::is_void_v<R>) {
      call(std::index_sequence_for<Args...>{});
    } else {
      write_result(call(std::index_sequence_for<Args...>{}), result);
    }
    return 0;
  } catch (const ArgumentTypeError& error) {
    return raise("TypeError", error.message(kName.value));
  } catch (const host::PanicError& error) {
    return raise(error.kind(), with_op_name(kName.value, error.message()));
#ifdef TVM_FFI_ERROR_H_
  } catch (const tvm::ffi::Error& error) {
    return raise(error.kind().c_str(), with_op_name(kName.value, error.message().c_str()));
#endif
  } catch (const std::exception& error) {
    return raise("RuntimeError", with_op_name(kName.value, error.what()));
  }
}

}  // namespace mllm_kernel::ffi_detail

#ifdef TVM_FFI_FUNCTION_H_
namespace mllm_kernel::ffi_detail {

/// Calls kFunction with the same signature and prefixes errors with the op name (the entry
/// point of a function whose parameters tvm-ffi's C++ unpacking reads).
template <FixedString kName, auto kFunction, typename R, typename... Args>
R entry_point(Args... args) {
  try {
    return kFunction(std::forward<Args>(args)...);
  } catch (const host::PanicError& error) {
    throw tvm::ffi::Error(error.kind(), with_op_name(kName.value, error.message()).c_str(), std::string());
  } catch (const tvm::ffi::Error& error) {
    throw tvm::ffi::Error(error.kind(), with_op_name(kName.value, error.message().c_str()).c_str(), std::string());
  }
}

template <FixedString kName, auto kFunction, typename R, typename... Args>
constexpr auto make_entry_point(R (*)(Args...)) {
  return &entry_point<kName, kFunction, R, Args...>;
}

}  // namespace mllm_kernel::ffi_detail
#endif

namespace mllm_kernel::ffi_detail {

/// Whether every parameter and the result of `R(Args...)` are read and written by this header.
template <typename R, typename... Args>
constexpr bool light_signature(R (*)(Args...)) {
  return kLightResult<R> && (kLightParam<Args> && ...);
}

/// The exported symbol's body for kFunction.
template <FixedString kName, auto kFunction>
int export_call(const TVMFFIAny* args, std::int32_t num_args, TVMFFIAny* result) {
  if constexpr (light_signature(kFunction)) {
    return safe_call<kName>(kFunction, args, num_args, result);
  } else {
#ifdef TVM_FFI_FUNCTION_H_
    TVM_FFI_SAFE_CALL_BEGIN();
    constexpr auto entry = make_entry_point<kName, kFunction>(kFunction);
    using FuncInfo = ::tvm::ffi::detail::FunctionInfo<std::decay_t<decltype(entry)>>;
    static const std::string name = kName.value;
    ::tvm::ffi::detail::unpack_call<typename FuncInfo::RetType>(
        std::make_index_sequence<FuncInfo::num_args>{}, &name, entry,
        reinterpret_cast<const ::tvm::ffi::AnyView*>(args), num_args, reinterpret_cast<::tvm::ffi::Any*>(result));
    TVM_FFI_SAFE_CALL_END();
#else
    static_assert(light_signature(kFunction),
                  "MLLM_KERNEL_FFI_EXPORT: parameters must be tensors (mllm_kernel::TensorView), integers, bool or "
                  "floating point, by value or const reference, and the result void, a number or std::string; "
                  "include <tvm/ffi/function.h> in the kernel source to export other tvm-ffi types");
    return -1;
#endif
  }
}

}  // namespace mllm_kernel::ffi_detail

/// Exports `FUNCTION` (a function or static member function, template arguments allowed) to
/// Python as `module.NAME`.
#define MLLM_KERNEL_FFI_EXPORT(NAME, ...)                                                             \
  extern "C" __attribute__((visibility("default"))) int __tvm_ffi_##NAME(                             \
      void*, const TVMFFIAny* args, std::int32_t num_args, TVMFFIAny* result) {                       \
    return ::mllm_kernel::ffi_detail::export_call<#NAME, &__VA_ARGS__>(args, num_args, result);       \
  }
