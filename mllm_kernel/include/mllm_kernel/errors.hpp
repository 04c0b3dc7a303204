// Checked errors with the caller's location.
//
// Every check in the library throws `PanicError`, which tvm-ffi turns into a Python exception
// (ValueError unless said otherwise) that carries the message and the file:line of the check.
//
//   RuntimeCheck(n > 0, "input must not be empty, got ", n);
//   Panic("unsupported dtype ", dtype_name(dtype));
#pragma once

#include <mllm_kernel/source_location.hpp>

#include <tvm/ffi/error.h>

#include <cstdint>
#include <sstream>
#include <string>
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

}  // namespace mllm_kernel::host
