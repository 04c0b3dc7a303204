// Checked errors with the caller's location.
//
// Every check in the library throws `PanicError`; an entry point (ffi_export.hpp) turns it into
// a Python exception of its kind (ValueError unless said otherwise) that carries the message and
// the file:line of the check. Messages are built with `concat`, which formats its parts as an
// ostream would (numbers as `<<` prints them) into a Text (text.hpp), without <sstream> or
// <string>: this header is in every kernel's translation unit, and each of nvcc's front ends
// would otherwise parse them.
//
//   RuntimeCheck(n > 0, "input must not be empty, got ", n);
//   Panic("unsupported dtype ", dtype_name(dtype));
#pragma once

#include <mllm_kernel/host_runtime.hpp>
#include <mllm_kernel/source_location.hpp>
#include <mllm_kernel/text.hpp>

#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

namespace mllm_kernel::host {

/// The exception every mllm-kernel check throws. Its kind names the Python exception it
/// becomes at the FFI boundary: `ValueError` (bad arguments) or `RuntimeError` (device
/// failures).
class MLLM_KERNEL_HOST_API PanicError : public std::exception {
 public:
  PanicError(Text kind, Text message) : kind_(std::move(kind)), message_(std::move(message)) {}
  const char* kind() const noexcept { return kind_.c_str(); }
  const char* message() const noexcept { return message_.c_str(); }
  /// The message. Defined in the host runtime, so the class's type information lives there
  /// once and an error thrown in one library is caught by type in another.
  const char* what() const noexcept override;

 private:
  Text kind_;
  Text message_;
};

namespace detail {

template <typename T>
inline constexpr bool kAlwaysFalse = false;

// Number formatting, out of line in the host runtime (no <charconv> or <cstdio> here).
MLLM_KERNEL_HOST_API void append_signed(Text& out, long long value);
MLLM_KERNEL_HOST_API void append_unsigned(Text& out, unsigned long long value);
/// "%g": 6 significant digits, as an ostream prints a double by default.
MLLM_KERNEL_HOST_API void append_floating(Text& out, double value);
MLLM_KERNEL_HOST_API void append_pointer(Text& out, const void* value);

/// Appends `value` to `out` as `std::ostream << value` writes it with default flags: strings as
/// they are, characters as characters, bool as 1/0, integers and enums in decimal, floating
/// point as "%g" (6 significant digits), pointers in hex.
template <typename T>
void append(Text& out, const T& value) {
  using U = std::decay_t<T>;
  if constexpr (std::is_convertible_v<const T&, const char*>) {
    out.append(static_cast<const char*>(value));
  } else if constexpr (kCharSpan<T>) {
    out.append(value.data(), value.size());
  } else if constexpr (std::is_same_v<U, char> || std::is_same_v<U, signed char> || std::is_same_v<U, unsigned char>) {
    out += static_cast<char>(value);
  } else if constexpr (std::is_same_v<U, bool>) {
    out += value ? '1' : '0';
  } else if constexpr (std::is_enum_v<U>) {
    append(out, +static_cast<std::underlying_type_t<U>>(value));  // promoted: printed as a number
  } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
    append_signed(out, value);
  } else if constexpr (std::is_integral_v<U>) {
    append_unsigned(out, value);
  } else if constexpr (std::is_floating_point_v<U>) {
    append_floating(out, static_cast<double>(value));
  } else if constexpr (std::is_pointer_v<U>) {
    append_pointer(out, static_cast<const void*>(value));
  } else {
    static_assert(kAlwaysFalse<T>, "concat: a message part must be a string, character, number, enum or pointer");
  }
}

/// The parts streamed into one text, as `std::ostringstream() << args...` would.
template <typename... Args>
Text concat(const Args&... args) {
  Text out;
  (append(out, args), ...);
  return out;
}

/// "[a, b, c]": a shape or strides in messages.
MLLM_KERNEL_HOST_API Text list_text(const std::int64_t* values, int n);

/// Throws PanicError(kind, message) with " [at file:line]" appended to the message, so it says
/// where the failed check lives.
[[noreturn]] MLLM_KERNEL_HOST_API void throw_panic_at(const char* kind, Text message, const char* file,
                                                      std::uint_least32_t line);

[[noreturn]] inline void throw_panic(const char* kind, Text message, const source_location& loc) {
  throw_panic_at(kind, std::move(message), loc.file_name(), loc.line());
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
