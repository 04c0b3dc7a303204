// RuntimeCheck and Panic under C++17, where source_location.hpp falls back to the compiler's
// __builtin_FILE/__builtin_LINE: the location must still be the caller's line.
#include <mllm_kernel/source_location.hpp>
#include <mllm_kernel/utils.hpp>

#include <gtest/gtest.h>

#include <string>

#if defined(__cpp_lib_source_location)
#error "this test must be compiled without std::source_location (C++17)"
#endif

namespace {

using mllm_kernel::host::Panic;
using mllm_kernel::host::PanicError;
using mllm_kernel::host::RuntimeCheck;

std::string at(int line) { return " [at test_source_location_fallback.cpp:" + std::to_string(line) + "]"; }

TEST(SourceLocationFallback, CurrentNamesThisLine) {
  const int line = __LINE__; const auto loc = mllm_kernel::source_location::current();
  EXPECT_EQ(static_cast<int>(loc.line()), line);
  EXPECT_STREQ(mllm_kernel::short_file_name(loc.file_name()), "test_source_location_fallback.cpp");
}

TEST(SourceLocationFallback, RuntimeCheckNamesTheCaller) {
  int line = 0;
  try {
    line = __LINE__; RuntimeCheck(false, "n must be positive, got ", -1);
    FAIL() << "RuntimeCheck(false) did not throw";
  } catch (const PanicError& error) {
    EXPECT_STREQ(error.kind(), "ValueError");
    EXPECT_EQ(error.message(), "n must be positive, got -1" + at(line));
  }
}

TEST(SourceLocationFallback, PanicNamesTheCaller) {
  int line = 0;
  bool caught = false;
  try {
    line = __LINE__; Panic("unsupported dtype ", "float64");
  } catch (const PanicError& error) {
    caught = true;
    EXPECT_EQ(error.message(), "unsupported dtype float64" + at(line));
  }
  EXPECT_TRUE(caught);
}

}  // namespace
