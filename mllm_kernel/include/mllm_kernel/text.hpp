// Text: the owned character string that error messages, dtype and device names are built in.
//
// Its storage is managed out of line by the host runtime (host_runtime.hpp), so this header
// needs no <string>: every kernel's translation unit includes it, and <string> (with the
// <string_view>, <charconv> and <optional> that came with it) cost nvcc's front ends and the host
// compiler a few tenths of a second per build. Anything with `data()` and `size()` of chars
// (std::string, std::string_view, tvm::ffi::String) converts to a Text and appends to one.
//
//   Text text("dim ");
//   text.append(name);          // a C string, or any string-like type
//   throw PanicError("ValueError", std::move(text));
#pragma once

#include <mllm_kernel/host_runtime.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace mllm_kernel::host {

/// Whether S's characters are at `data()` for `size()` chars (std::string, std::string_view):
/// `data()` points at char. A trait, not a concept: errors.hpp, which uses it, also compiles as
/// C++17.
template <typename S, typename = void>
inline constexpr bool kCharSpan = false;
template <typename S>
inline constexpr bool kCharSpan<S, std::void_t<decltype(std::declval<const S&>().data()),
                                               decltype(static_cast<std::size_t>(std::declval<const S&>().size()))>> =
    std::is_same_v<std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<const S&>().data())>>, char>;

/// Whether S is an owning string type (std::string): it has char traits and an allocator.
template <typename S, typename = void>
inline constexpr bool kOwningString = false;
template <typename S>
inline constexpr bool kOwningString<S, std::void_t<typename S::traits_type, typename S::allocator_type>> =
    std::is_constructible_v<S, const char*, std::size_t>;

/// An owned, NUL-terminated character string; see the file comment.
class MLLM_KERNEL_HOST_API Text {
 public:
  Text() noexcept = default;
  Text(const char* text) { append(text); }  // NOLINT(google-explicit-constructor)
  Text(const char* data, std::size_t size) { append(data, size); }
  template <typename S, std::enable_if_t<kCharSpan<S>, int> = 0>
  Text(const S& text) {  // NOLINT(google-explicit-constructor)
    append(text.data(), text.size());
  }
  Text(const Text& other) { append(other.data_, other.size_); }
  Text(Text&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  Text& operator=(Text other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }
  ~Text();

  /// A copy as std::string (or another owning string type), for code that keeps names and
  /// messages in one: `std::string name = dtype_name(dtype);`. (There is no operator+: build
  /// messages with `detail::concat`, or convert first.)
  template <typename S, std::enable_if_t<kOwningString<S>, int> = 0>
  operator S() const {  // NOLINT(google-explicit-constructor)
    return S(c_str(), size_);
  }

  /// The characters, NUL-terminated ("" when empty).
  const char* c_str() const noexcept { return data_ ? data_ : ""; }
  const char* data() const noexcept { return c_str(); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  /// Appends `size` chars at `data`, which may lie in this Text itself.
  Text& append(const char* data, std::size_t size);
  /// Appends a C string; a null pointer appends nothing.
  Text& append(const char* text);
  template <typename S, std::enable_if_t<kCharSpan<S>, int> = 0>
  Text& append(const S& text) {
    return append(text.data(), text.size());
  }
  Text& operator+=(char c) { return append(&c, 1); }

  friend bool operator==(const Text& a, const Text& b) noexcept { return a.equals(b.c_str(), b.size_); }
  friend bool operator==(const Text& a, const char* b) noexcept { return a.equals(b); }
  friend bool operator!=(const Text& a, const Text& b) noexcept { return !(a == b); }
  friend bool operator!=(const Text& a, const char* b) noexcept { return !(a == b); }

 private:
  bool equals(const char* data, std::size_t size) const noexcept;
  bool equals(const char* text) const noexcept;

  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace mllm_kernel::host
