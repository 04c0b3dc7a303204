// Tests of ffi_export.hpp: an exported entry point behaves like the wrapped function, except
// that tvm-ffi errors it throws get the op name in front of their message.
#include <mllm_kernel/ffi_export.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace {

using mllm_kernel::host::PanicError;
using mllm_kernel::host::RuntimeCheck;
using mllm_kernel::host::TensorMatcher;

/// " [at test_ffi_export.cpp:<line>]", the suffix every failed check appends.
std::string at(int line) { return " [at test_ffi_export.cpp:" + std::to_string(line) + "]"; }

// Lines of the checks below, for the expected messages.
int g_check_line = 0;
int g_matcher_line = 0;

/// Returns 2 * n; n must be positive.
std::int64_t twice_positive(std::int64_t n) {
  g_check_line = __LINE__; RuntimeCheck(n > 0, "n must be positive, got ", n);
  return 2 * n;
}

/// Throws a RuntimeError, as a failed CUDA call does.
void device_failure() { throw PanicError("RuntimeError", "CUDA error cudaErrorLaunchFailure"); }

/// Throws an exception that is not a tvm-ffi error.
void std_failure() { throw std::runtime_error("not an ffi error"); }

/// Sums a runtime value and a template constant (exported with its template argument).
template <int kConstant>
std::int64_t add_constant(std::int64_t value) {
  return value + kConstant;
}

/// A kernel-like class whose static `run` is exported (the name has commas in it).
template <typename T, int kSize>
struct SizedKernel {
  static std::int64_t run(tvm::ffi::TensorView x) {
    g_matcher_line = __LINE__; TensorMatcher({kSize}).with_dtype<T>().verify(x, "x");
    return kSize;
  }
};

}  // namespace

// Exported through the C ABI exactly as the JIT layer writes it.
MLLM_KERNEL_FFI_EXPORT(twice_positive, twice_positive);
MLLM_KERNEL_FFI_EXPORT(add_three, add_constant<3>);
MLLM_KERNEL_FFI_EXPORT(sized_kernel, SizedKernel<float, 4>::run);
MLLM_KERNEL_FFI_EXPORT(device_failure, device_failure);

namespace {

/// A 1-D contiguous CPU tensor description of `n` elements of `dtype` (data never read).
struct Vector1D {
  std::int64_t shape[1];
  std::int64_t strides[1] = {1};
  DLTensor dl{};
  Vector1D(std::int64_t n, DLDataType dtype) {
    static char storage[1];
    shape[0] = n;
    dl.data = storage;
    dl.device = DLDevice{kDLCPU, 0};
    dl.ndim = 1;
    dl.dtype = dtype;
    dl.shape = shape;
    dl.strides = strides;
  }
};

/// Calls `fn`, which must throw tvm::ffi::Error, and returns the error.
template <typename F>
tvm::ffi::Error expect_ffi_error(F&& fn) {
  try {
    fn();
  } catch (const tvm::ffi::Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected a tvm::ffi::Error";
  return tvm::ffi::Error("None", "", "");
}

TEST(EntryPoint, ReturnsTheFunctionsResult) {
  constexpr auto entry = mllm_kernel::ffi_detail::make_entry_point<"twice_positive", &twice_positive>(&twice_positive);
  EXPECT_EQ(entry(21), 42);
}

TEST(EntryPoint, PrefixesErrorsWithTheOpName) {
  constexpr auto entry = mllm_kernel::ffi_detail::make_entry_point<"twice_positive", &twice_positive>(&twice_positive);
  const tvm::ffi::Error error = expect_ffi_error([&] { entry(-4); });
  EXPECT_EQ(error.kind(), "ValueError");
  EXPECT_EQ(error.message(), "twice_positive: n must be positive, got -4" + at(g_check_line));
}

TEST(EntryPoint, AVariantEntryPointNamesItsOp) {
  constexpr auto entry =
      mllm_kernel::ffi_detail::make_entry_point<"twice_positive__fast", &twice_positive>(&twice_positive);
  const tvm::ffi::Error error = expect_ffi_error([&] { entry(-4); });
  EXPECT_EQ(error.message(), "twice_positive: n must be positive, got -4" + at(g_check_line));
}

TEST(EntryPoint, KeepsTheErrorKind) {
  constexpr auto entry = mllm_kernel::ffi_detail::make_entry_point<"device_failure", &device_failure>(&device_failure);
  const tvm::ffi::Error error = expect_ffi_error([&] { entry(); });
  EXPECT_EQ(error.kind(), "RuntimeError");
  EXPECT_EQ(error.message(), "device_failure: CUDA error cudaErrorLaunchFailure");
}

TEST(EntryPoint, OtherExceptionsPassUnchanged) {
  constexpr auto entry = mllm_kernel::ffi_detail::make_entry_point<"std_failure", &std_failure>(&std_failure);
  try {
    entry();
    FAIL() << "entry point did not throw";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "not an ffi error");
  }
}

/// The function the export macro put behind `__tvm_ffi_<name>`, as Python's loader sees it.
tvm::ffi::Function exported(TVMFFISafeCallType symbol) {
  return tvm::ffi::Function::FromExternC(nullptr, symbol, nullptr);
}

TEST(ExportMacro, CallsThroughTheCAbi) {
  EXPECT_EQ(exported(&__tvm_ffi_twice_positive)(std::int64_t{5}).cast<std::int64_t>(), 10);
  EXPECT_EQ(exported(&__tvm_ffi_add_three)(std::int64_t{4}).cast<std::int64_t>(), 7);
  Vector1D x(4, DLDataType{kDLFloat, 32, 1});
  EXPECT_EQ(exported(&__tvm_ffi_sized_kernel)(tvm::ffi::TensorView(&x.dl)).cast<std::int64_t>(), 4);
}

TEST(ExportMacro, ErrorsCrossTheCAbiWithTheOpName) {
  const tvm::ffi::Error value_error = expect_ffi_error([] { exported(&__tvm_ffi_twice_positive)(std::int64_t{0}); });
  EXPECT_EQ(value_error.kind(), "ValueError");
  EXPECT_EQ(value_error.message(), "twice_positive: n must be positive, got 0" + at(g_check_line));

  Vector1D x(5, DLDataType{kDLFloat, 32, 1});
  const tvm::ffi::Error shape_error =
      expect_ffi_error([&] { exported(&__tvm_ffi_sized_kernel)(tvm::ffi::TensorView(&x.dl)); });
  EXPECT_EQ(shape_error.kind(), "ValueError");
  EXPECT_EQ(shape_error.message(), "sized_kernel: x: dim 0 must be 4, got 5" + at(g_matcher_line));

  Vector1D y(4, DLDataType{kDLInt, 32, 1});
  const tvm::ffi::Error dtype_error =
      expect_ffi_error([&] { exported(&__tvm_ffi_sized_kernel)(tvm::ffi::TensorView(&y.dl)); });
  EXPECT_EQ(dtype_error.message(), "sized_kernel: x: dtype must be float32, got int32" + at(g_matcher_line));

  const tvm::ffi::Error runtime_error = expect_ffi_error([] { exported(&__tvm_ffi_device_failure)(); });
  EXPECT_EQ(runtime_error.kind(), "RuntimeError");
  EXPECT_EQ(runtime_error.message(), "device_failure: CUDA error cudaErrorLaunchFailure");
}

}  // namespace
