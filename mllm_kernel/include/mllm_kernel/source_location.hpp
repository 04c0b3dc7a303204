// A portable source location (file, line, function) for error reports.
//
// `mllm_kernel::source_location::current()` used as a default argument captures the *caller's*
// position, which is how RuntimeCheck and TensorMatcher report where a check failed.
#pragma once

#include <cstdint>

#if __has_include(<source_location>)
#include <source_location>
#endif

namespace mllm_kernel {

#if defined(__cpp_lib_source_location) && __cpp_lib_source_location >= 201907L
/// The standard source location where the library provides it.
using source_location = std::source_location;
#else
/// Fallback for toolchains without <source_location>: the same interface, built on the
/// compiler builtins that GCC, Clang and NVCC all provide.
struct source_location {
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           std::uint_least32_t line = __builtin_LINE(),
                                           const char* function = __builtin_FUNCTION()) noexcept {
    source_location loc;
    loc.file_ = file;
    loc.line_ = line;
    loc.function_ = function;
    return loc;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr std::uint_least32_t line() const noexcept { return line_; }
  constexpr std::uint_least32_t column() const noexcept { return 0; }
  constexpr const char* function_name() const noexcept { return function_; }

 private:
  const char* file_ = "unknown";
  std::uint_least32_t line_ = 0;
  const char* function_ = "unknown";
};
#endif

/// The file name without its directories, for short messages.
constexpr const char* short_file_name(const char* path) noexcept {
  const char* last = path;
  for (const char* p = path; *p != '\0'; ++p) {
    if (*p == '/' || *p == '\\') last = p + 1;
  }
  return last;
}

}  // namespace mllm_kernel
