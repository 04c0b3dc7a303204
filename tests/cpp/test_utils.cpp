// Tests of utils.hpp, dtype.hpp and source_location.hpp: checked errors and their messages
// (including the caller's file:line), integer helpers, and dtype/device names.
#include <mllm_kernel/dtype.hpp>
#include <mllm_kernel/source_location.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>
#include "text_printer.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

using mllm_kernel::host::Panic;
using mllm_kernel::host::PanicError;
using mllm_kernel::host::RuntimeCheck;

/// " [at test_utils.cpp:<line>]", the suffix every failed check appends.
std::string at(int line) { return " [at test_utils.cpp:" + std::to_string(line) + "]"; }

/// Runs `fn`, which must throw PanicError, and returns the error.
template <typename F>
PanicError expect_panic(F&& fn) {
  try {
    fn();
  } catch (const PanicError& error) {
    return error;
  }
  ADD_FAILURE() << "expected a PanicError";
  return PanicError("None", "");
}

template <typename T>
std::vector<T> collect(mllm_kernel::host::IntegerRange<T> range) {
  std::vector<T> out;
  for (T value : range) out.push_back(value);
  return out;
}

DLDataType make_dtype(int code, int bits, int lanes = 1) {
  return DLDataType{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits),
                    static_cast<std::uint16_t>(lanes)};
}

// ----------------------------------------------------------------------------------------------
// RuntimeCheck / Panic

TEST(RuntimeCheck, PassingConditionDoesNotThrow) {
  EXPECT_NO_THROW(RuntimeCheck(true, "never shown"));
  EXPECT_NO_THROW(RuntimeCheck(1 + 1 == 2, "a", 1, "b"));
}

TEST(RuntimeCheck, MessageKindAndCallerLocation) {
  const std::int64_t n = -3;
  int line = 0;
  const PanicError error = expect_panic([&] {
    line = __LINE__; RuntimeCheck(n > 0, "n must be positive, got ", n);
  });
  EXPECT_STREQ(error.kind(), "ValueError");
  EXPECT_EQ(error.message(), "n must be positive, got -3" + at(line));
}

TEST(RuntimeCheck, StreamsMixedArguments) {
  const std::string name = "hidden";
  const std::string_view view = "view";
  const double ratio = 0.5;
  int line = 0;
  const PanicError error = expect_panic([&] {
    line = __LINE__; RuntimeCheck(false, name, '/', view, ": ", 7u, ' ', std::int64_t{-9000000000}, ' ', ratio);
  });
  EXPECT_EQ(error.message(), "hidden/view: 7 -9000000000 0.5" + at(line));
}

TEST(RuntimeCheck, EmptyMessageStillNamesTheLocation) {
  int line = 0;
  const PanicError error = expect_panic([&] {
    line = __LINE__; RuntimeCheck(false);
  });
  EXPECT_EQ(error.message(), at(line));
}

TEST(RuntimeCheck, IsAStdExceptionWithItsMessage) {
  // The export layer (ffi_export.hpp) raises it in Python as the exception its kind names.
  static_assert(std::is_base_of_v<std::exception, PanicError>);
  int line = 0;
  try {
    line = __LINE__; RuntimeCheck(false, "via std::exception");
    FAIL() << "RuntimeCheck(false) did not throw";
  } catch (const std::exception& error) {
    EXPECT_EQ(std::string(error.what()), "via std::exception" + at(line));
  }
}

/// What `std::ostringstream() << values...` writes: the reference for concat.
template <typename... Args>
std::string streamed(const Args&... values) {
  std::ostringstream os;
  ((os << values), ...);
  return os.str();
}

enum PlainEnum { kPlainFirst = 3 };
enum class ByteEnum : std::uint8_t { kValue = 65 };

TEST(Concat, FormatsEveryPartAsAnOstream) {
  using mllm_kernel::host::detail::concat;
  const std::string text = "s";
  const std::string_view view = "v";
  const signed char sc = 'x';
  const unsigned char uc = 'y';
  EXPECT_EQ(concat(text, view, "lit", 'c', true, false), streamed(text, view, "lit", 'c', true, false));
  EXPECT_EQ(concat(sc, uc), streamed(sc, uc));
  EXPECT_EQ(concat(std::int8_t{-5}, std::uint8_t{200}), streamed(std::int8_t{-5}, std::uint8_t{200}));
  EXPECT_EQ(concat(short{-7}, 42u, -9000000000LL, std::numeric_limits<std::uint64_t>::max()),
            streamed(short{-7}, 42u, -9000000000LL, std::numeric_limits<std::uint64_t>::max()));
  EXPECT_EQ(concat(kPlainFirst), streamed(kPlainFirst));
  EXPECT_EQ(concat(ByteEnum::kValue), "65");  // an enum class is printed as its number
  for (double v : {0.0, -0.0, 1e-6, 0.5, 1.0 / 3.0, 123456.0, 1234567.0, 1e300, -2.5e-12, 4096.0,
                   std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   std::nan("")}) {
    EXPECT_EQ(concat(v), streamed(v)) << v;
    EXPECT_EQ(concat(static_cast<float>(v)), streamed(static_cast<float>(v))) << v;
  }
  int local = 0;
  EXPECT_EQ(concat(static_cast<const void*>(&local)), streamed(static_cast<const void*>(&local)));
}

TEST(RuntimeCheck, LocationIsTheCallNotAHelper) {
  // Two checks on different lines must report different lines: the location is the caller's.
  int first = 0;
  int second = 0;
  const PanicError a = expect_panic([&] {
    first = __LINE__; RuntimeCheck(false, "first");
  });
  const PanicError b = expect_panic([&] {
    second = __LINE__; RuntimeCheck(false, "second");
  });
  ASSERT_NE(first, second);
  EXPECT_EQ(a.message(), "first" + at(first));
  EXPECT_EQ(b.message(), "second" + at(second));
}

[[noreturn]] void always_panics(int value, int* line) {
  *line = __LINE__; Panic("unsupported value ", value);
}

int returns_or_panics(int value, int* line) {
  if (value > 0) return value;
  // [[noreturn]] lets a function end in Panic without a return statement.
  *line = __LINE__; Panic("value must be positive, got ", value);
}

TEST(Panic, AlwaysThrowsWithMessageAndLocation) {
  int line = 0;
  const PanicError error = expect_panic([&] { always_panics(42, &line); });
  EXPECT_STREQ(error.kind(), "ValueError");
  EXPECT_EQ(error.message(), "unsupported value 42" + at(line));
}

TEST(Panic, NoReturnInValueFunction) {
  int line = 0;
  EXPECT_EQ(returns_or_panics(5, &line), 5);
  const PanicError error = expect_panic([&] { returns_or_panics(-1, &line); });
  EXPECT_EQ(error.message(), "value must be positive, got -1" + at(line));
}

// ----------------------------------------------------------------------------------------------
// Text

TEST(Text, AppendsGrowsAndStaysTerminated) {
  using mllm_kernel::host::Text;
  Text text;
  EXPECT_TRUE(text.empty());
  EXPECT_STREQ(text.c_str(), "");
  std::string expected;
  for (int i = 0; i < 200; ++i) {  // past several reallocations
    const std::string part = std::to_string(i) + ",";
    text.append(part.c_str());
    expected += part;
    ASSERT_EQ(text.size(), expected.size());
    ASSERT_STREQ(text.c_str(), expected.c_str());
  }
  text.append("xyz", 2);
  text += '!';
  text.append(std::string_view("sv"));
  text.append("", 0);
  expected += "xy!sv";
  EXPECT_EQ(std::string(text.data(), text.size()), expected);
  EXPECT_TRUE(text == expected.c_str());
  EXPECT_FALSE(text == "xy!sv");
}

TEST(Text, AppendsItselfAndNull) {
  using mllm_kernel::host::Text;
  Text text("0123456789abcdefghij");  // 20 chars: doubling it needs a larger block
  text.append(text);
  EXPECT_EQ(text, "0123456789abcdefghij0123456789abcdefghij");
  text.append(text.c_str() + 30, 5);  // a part of itself, within the capacity
  EXPECT_EQ(text, "0123456789abcdefghij0123456789abcdefghijabcde");
  for (int i = 0; i < 4; ++i) text.append(text.c_str(), text.size());  // past several blocks
  EXPECT_EQ(text.size(), 45u * 16);
  EXPECT_EQ(std::string(text.c_str()).substr(45 * 15), "0123456789abcdefghij0123456789abcdefghijabcde");
  const char* null_text = nullptr;
  EXPECT_TRUE(Text(null_text).empty());
  EXPECT_TRUE(Text("x").append(null_text) == "x");
  EXPECT_TRUE(Text() == null_text);
}

/// A type whose data() is not characters: not a string to Text.
struct Bytes {
  const void* data() const { return this; }
  std::size_t size() const { return 1; }
};
static_assert(mllm_kernel::host::kCharSpan<std::string> && mllm_kernel::host::kCharSpan<std::string_view>);
static_assert(!mllm_kernel::host::kCharSpan<Bytes> && !mllm_kernel::host::kCharSpan<std::vector<int>>);
static_assert(!std::is_convertible_v<Bytes, mllm_kernel::host::Text>);

TEST(Text, CopiesMovesAndConverts) {
  using mllm_kernel::host::Text;
  const std::string source(100, 'a');
  Text text(source);  // from anything with data() and size()
  Text copy = text;
  EXPECT_TRUE(copy == text);
  copy += 'b';
  EXPECT_EQ(text.size(), 100u);  // the copy owns its characters
  EXPECT_EQ(copy.size(), 101u);
  Text moved = std::move(copy);
  EXPECT_EQ(moved.size(), 101u);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from Text is empty
  EXPECT_STREQ(copy.c_str(), "");
  moved = text;
  EXPECT_TRUE(moved == text);
  moved = Text("short");
  EXPECT_TRUE(moved == "short");
  EXPECT_TRUE(Text("ab", 1) == "a");
  EXPECT_FALSE(Text("ab") == Text("abc"));
  EXPECT_TRUE(Text("ab") != "abc");
  EXPECT_TRUE(Text("ab") != Text("a"));
  EXPECT_FALSE(Text("ab") != Text("ab"));
  const std::string owned = Text("to std::string");  // code that kept names as std::string
  EXPECT_EQ(owned, "to std::string");
  const std::string name = mllm_kernel::host::dtype_name(make_dtype(kDLBfloat, 16));
  EXPECT_EQ(name, "bfloat16");
}

TEST(PanicError, KeepsKindAndMessage) {
  const PanicError error("RuntimeError", "device failed");
  EXPECT_STREQ(error.kind(), "RuntimeError");
  EXPECT_STREQ(error.message(), "device failed");
}

// ----------------------------------------------------------------------------------------------
// source_location helpers

TEST(SourceLocation, ShortFileName) {
  using mllm_kernel::short_file_name;
  static_assert(std::string_view(short_file_name("a/b/c.cpp")) == "c.cpp");
  EXPECT_STREQ(short_file_name("/abs/path/to/kernel.cuh"), "kernel.cuh");
  EXPECT_STREQ(short_file_name("kernel.cuh"), "kernel.cuh");
  EXPECT_STREQ(short_file_name("dir\\win\\file.cpp"), "file.cpp");
  EXPECT_STREQ(short_file_name("dir/"), "");
  EXPECT_STREQ(short_file_name(""), "");
}

TEST(SourceLocation, CurrentNamesThisLine) {
  const int line = __LINE__; const auto loc = mllm_kernel::source_location::current();
  EXPECT_EQ(static_cast<int>(loc.line()), line);
  EXPECT_STREQ(mllm_kernel::short_file_name(loc.file_name()), "test_utils.cpp");
}

// ----------------------------------------------------------------------------------------------
// div_ceil

TEST(DivCeil, SmallValues) {
  using mllm_kernel::host::div_ceil;
  static_assert(div_ceil(0, 4) == 0);
  static_assert(div_ceil(1, 4) == 1);
  static_assert(div_ceil(4, 4) == 1);
  static_assert(div_ceil(5, 4) == 2);
  static_assert(div_ceil(4097, 128) == 33);
  EXPECT_EQ(div_ceil(7, 1), 7);
  EXPECT_EQ(div_ceil(4096, 4096), 1);
  EXPECT_EQ(div_ceil(4095, 4096), 1);
  EXPECT_EQ(div_ceil(8193, 4096), 3);
}

TEST(DivCeil, ResultTypeIsTheCommonType) {
  using mllm_kernel::host::div_ceil;
  static_assert(std::is_same_v<decltype(div_ceil(1, 2)), int>);
  static_assert(std::is_same_v<decltype(div_ceil(std::int64_t{1}, 2)), std::int64_t>);
  static_assert(std::is_same_v<decltype(div_ceil(1, std::int64_t{2})), std::int64_t>);
  static_assert(std::is_same_v<decltype(div_ceil(std::size_t{1}, 2u)), std::size_t>);
}

TEST(DivCeil, LargeInt64) {
  using mllm_kernel::host::div_ceil;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  // Values past 2^31 must not be truncated to int.
  EXPECT_EQ(div_ceil(std::int64_t{1} << 40, 3), ((std::int64_t{1} << 40) + 2) / 3);
  EXPECT_EQ(div_ceil(std::int64_t{5000000000}, 1024), 4882813);
  EXPECT_EQ(div_ceil(std::int64_t{5000000000}, std::int64_t{5000000000}), 1);
  // Near the top of the range a + b - 1 would overflow; the quotient itself does not.
  EXPECT_EQ(div_ceil(kMax, std::int64_t{2}), std::int64_t{1} << 62);
  EXPECT_EQ(div_ceil(kMax, kMax), 1);
  EXPECT_EQ(div_ceil(kMax - 1, kMax), 1);
  EXPECT_EQ(div_ceil(kMax, std::int64_t{1}), kMax);
  EXPECT_EQ(div_ceil(kMax, std::int64_t{1} << 62), 2);
  static_assert(div_ceil(kMax, std::int64_t{2}) == (std::int64_t{1} << 62));
}

TEST(DivCeil, LargeUnsigned) {
  using mllm_kernel::host::div_ceil;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(div_ceil(kMax, std::uint64_t{2}), std::uint64_t{1} << 63);
  EXPECT_EQ(div_ceil(kMax, kMax), 1u);
  EXPECT_EQ(div_ceil(std::uint32_t{0xffffffffu}, std::uint32_t{16}), 0x10000000u);
}

// ----------------------------------------------------------------------------------------------
// irange

TEST(IRange, ZeroToN) {
  using mllm_kernel::host::irange;
  EXPECT_EQ(collect(irange(5)), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(irange(5).size(), 5);
  EXPECT_EQ(collect(irange(1)), (std::vector<int>{0}));
  static_assert(std::is_same_v<decltype(irange(std::int64_t{3})), mllm_kernel::host::IntegerRange<std::int64_t>>);
  EXPECT_EQ(collect(irange(std::int64_t{3})), (std::vector<std::int64_t>{0, 1, 2}));
}

TEST(IRange, EmptyAndNegativeN) {
  using mllm_kernel::host::irange;
  EXPECT_TRUE(collect(irange(0)).empty());
  EXPECT_EQ(irange(0).size(), 0);
  EXPECT_TRUE(collect(irange(-3)).empty());
  EXPECT_EQ(irange(-3).size(), 0);
}

TEST(IRange, BeginEnd) {
  using mllm_kernel::host::irange;
  EXPECT_EQ(collect(irange(2, 6)), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(irange(2, 6).size(), 4);
  EXPECT_EQ(collect(irange(-3, 2)), (std::vector<int>{-3, -2, -1, 0, 1}));
  EXPECT_EQ(collect(irange(-5, -2)), (std::vector<int>{-5, -4, -3}));
  // Mixed argument types use their common type.
  static_assert(std::is_same_v<decltype(irange(1, std::int64_t{4})), mllm_kernel::host::IntegerRange<std::int64_t>>);
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_EQ(collect(irange(big, big + 2)), (std::vector<std::int64_t>{big, big + 1}));
}

TEST(IRange, EmptyBeginEndRanges) {
  using mllm_kernel::host::irange;
  EXPECT_TRUE(collect(irange(4, 4)).empty());
  EXPECT_EQ(irange(4, 4).size(), 0);
  EXPECT_TRUE(collect(irange(6, 2)).empty());  // end before begin: empty, not a long walk
  EXPECT_EQ(irange(6, 2).size(), 0);
  EXPECT_TRUE(collect(irange(-1, -7)).empty());
  EXPECT_EQ(irange(-1, -7).size(), 0);
}

constexpr int constexpr_sum(int n) {
  int total = 0;
  for (int i : mllm_kernel::host::irange(n)) total += i;
  return total;
}

TEST(IRange, UsableInConstantExpressions) {
  static_assert(constexpr_sum(5) == 10);
  static_assert(constexpr_sum(0) == 0);
  static_assert(mllm_kernel::host::irange(3, 10).size() == 7);
}

// ----------------------------------------------------------------------------------------------
// dtype.hpp and dtype_bytes / dtype_name

template <typename T>
void expect_dtype(int code, int bits, std::int64_t bytes, const std::string& name) {
  constexpr DLDataType dtype = mllm_kernel::dl_dtype<T>::value;
  EXPECT_EQ(dtype.code, code) << name;
  EXPECT_EQ(dtype.bits, bits) << name;
  EXPECT_EQ(dtype.lanes, 1) << name;
  EXPECT_EQ(mllm_kernel::host::dtype_bytes(dtype), bytes) << name;
  EXPECT_EQ(mllm_kernel::host::dtype_name(dtype), name);
}

TEST(DType, EverySupportedType) {
  expect_dtype<float>(kDLFloat, 32, 4, "float32");
  expect_dtype<double>(kDLFloat, 64, 8, "float64");
  expect_dtype<mllm_kernel::fp16_storage>(kDLFloat, 16, 2, "float16");
  expect_dtype<mllm_kernel::bf16_storage>(kDLBfloat, 16, 2, "bfloat16");
  expect_dtype<mllm_kernel::fp8_e4m3_storage>(kDLFloat8_e4m3fn, 8, 1, "float8_e4m3fn");
  expect_dtype<mllm_kernel::fp8_e5m2_storage>(kDLFloat8_e5m2, 8, 1, "float8_e5m2");
  expect_dtype<std::int8_t>(kDLInt, 8, 1, "int8");
  expect_dtype<std::int16_t>(kDLInt, 16, 2, "int16");
  expect_dtype<std::int32_t>(kDLInt, 32, 4, "int32");
  expect_dtype<std::int64_t>(kDLInt, 64, 8, "int64");
  expect_dtype<std::uint8_t>(kDLUInt, 8, 1, "uint8");
  expect_dtype<bool>(kDLBool, 8, 1, "bool");
}

TEST(DType, BytesIncludeLanes) {
  using mllm_kernel::host::dtype_bytes;
  static_assert(dtype_bytes(DLDataType{kDLFloat, 32, 4}) == 16);
  EXPECT_EQ(dtype_bytes(make_dtype(kDLFloat, 16, 2)), 4);
  EXPECT_EQ(dtype_bytes(make_dtype(kDLBfloat, 16, 8)), 16);
  EXPECT_EQ(dtype_bytes(make_dtype(kDLInt, 64, 2)), 16);
  EXPECT_EQ(dtype_bytes(make_dtype(kDLFloat8_e4m3fn, 8, 4)), 4);
  // Sub-byte elements round up to whole bytes.
  EXPECT_EQ(dtype_bytes(make_dtype(kDLInt, 4, 1)), 1);
  EXPECT_EQ(dtype_bytes(make_dtype(kDLInt, 4, 2)), 1);
  EXPECT_EQ(dtype_bytes(make_dtype(kDLInt, 4, 3)), 2);
  EXPECT_EQ(dtype_bytes(make_dtype(kDLUInt, 1, 1)), 1);
  EXPECT_EQ(dtype_bytes(make_dtype(kDLFloat, 32, 65535)), std::int64_t{4} * 65535);
}

TEST(DType, NamesOfOtherCodes) {
  using mllm_kernel::host::dtype_name;
  EXPECT_EQ(dtype_name(make_dtype(kDLFloat, 32, 4)), "float32x4");
  EXPECT_EQ(dtype_name(make_dtype(kDLBfloat, 16, 2)), "bfloat16x2");
  EXPECT_EQ(dtype_name(make_dtype(kDLBfloat, 32)), "bfloat32");
  EXPECT_EQ(dtype_name(make_dtype(kDLUInt, 16)), "uint16");
  EXPECT_EQ(dtype_name(make_dtype(kDLUInt, 32)), "uint32");
  EXPECT_EQ(dtype_name(make_dtype(kDLComplex, 64)), "complex64");
  EXPECT_EQ(dtype_name(make_dtype(kDLFloat8_e4m3fnuz, 8)), "float8_e4m3fnuz");
  EXPECT_EQ(dtype_name(make_dtype(kDLFloat8_e5m2fnuz, 8)), "float8_e5m2fnuz");
  EXPECT_EQ(dtype_name(make_dtype(kDLFloat8_e8m0fnu, 8)), "float8_e8m0fnu");
  EXPECT_EQ(dtype_name(make_dtype(200, 8)), "dtype(code=200, bits=8)");
  EXPECT_EQ(dtype_name(make_dtype(200, 8, 2)), "dtype(code=200, bits=8)x2");
}

TEST(DType, SameDType) {
  using mllm_kernel::host::same_dtype;
  static_assert(same_dtype(DLDataType{kDLFloat, 32, 1}, mllm_kernel::dl_dtype<float>::value));
  EXPECT_FALSE(same_dtype(make_dtype(kDLFloat, 16), make_dtype(kDLBfloat, 16)));
  EXPECT_FALSE(same_dtype(make_dtype(kDLFloat, 32), make_dtype(kDLFloat, 64)));
  EXPECT_FALSE(same_dtype(make_dtype(kDLFloat, 32), make_dtype(kDLFloat, 32, 2)));
  EXPECT_FALSE(same_dtype(make_dtype(kDLInt, 8), make_dtype(kDLUInt, 8)));
}

// ----------------------------------------------------------------------------------------------
// Device names

TEST(Device, Names) {
  using mllm_kernel::host::device_name;
  EXPECT_EQ(device_name(DLDevice{kDLCPU, 0}), "cpu");
  EXPECT_EQ(device_name(DLDevice{kDLCPU, 3}), "cpu");  // PyTorch has a single cpu device
  EXPECT_EQ(device_name(DLDevice{kDLCUDA, 0}), "cuda:0");
  EXPECT_EQ(device_name(DLDevice{kDLCUDA, 1}), "cuda:1");
  EXPECT_EQ(device_name(DLDevice{kDLCUDAHost, 0}), "cuda_host:0");
  EXPECT_EQ(device_name(DLDevice{kDLCUDAManaged, 2}), "cuda_managed:2");
  EXPECT_EQ(device_name(DLDevice{kDLROCM, 7}), "rocm:7");
  EXPECT_EQ(device_name(DLDevice{static_cast<DLDeviceType>(99), 1}), "device_type(99):1");
}

TEST(Device, TypeNames) {
  using mllm_kernel::host::device_type_name;
  EXPECT_EQ(device_type_name(kDLCPU), "cpu");
  EXPECT_EQ(device_type_name(kDLCUDA), "cuda");
  EXPECT_EQ(device_type_name(kDLCUDAHost), "cuda_host");
  EXPECT_EQ(device_type_name(kDLCUDAManaged), "cuda_managed");
  EXPECT_EQ(device_type_name(kDLROCM), "rocm");
  EXPECT_EQ(device_type_name(kDLROCMHost), "rocm_host");
  EXPECT_EQ(device_type_name(kDLOpenCL), "opencl");
  EXPECT_EQ(device_type_name(kDLVulkan), "vulkan");
  EXPECT_EQ(device_type_name(kDLMetal), "metal");
  EXPECT_EQ(device_type_name(kDLOneAPI), "oneapi");
  EXPECT_EQ(device_type_name(99), "device_type(99)");
}

TEST(Device, SameDevice) {
  using mllm_kernel::host::same_device;
  static_assert(same_device(DLDevice{kDLCUDA, 1}, DLDevice{kDLCUDA, 1}));
  EXPECT_FALSE(same_device(DLDevice{kDLCUDA, 0}, DLDevice{kDLCUDA, 1}));
  EXPECT_FALSE(same_device(DLDevice{kDLCPU, 0}, DLDevice{kDLCUDA, 0}));
}

}  // namespace
