// Tests of ffi_export.hpp: an exported entry point behaves like the wrapped function, except
// that errors it throws reach the caller as tvm-ffi errors with the op name in front of their
// message, and arguments that do not convert are a TypeError in tvm-ffi's words. This file
// includes tvm-ffi's C++ headers (to call the symbols as Python's loader does), so it also
// covers the export of a function with tvm-ffi parameter types.
// tvm-ffi's C++ headers come first, as a kernel source's do in a JIT translation unit.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <mllm_kernel/ffi_export.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

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

/// Throws an exception that is neither a PanicError nor a tvm-ffi error.
void std_failure() { throw std::runtime_error("not an ffi error"); }

/// Every scalar parameter type the export reads, and a std::string result.
std::string describe(bool flag, std::int32_t small, std::int64_t big, double real, float single) {
  return std::string(flag ? "true" : "false") + " " + std::to_string(small) + " " + std::to_string(big) + " " +
         mllm_kernel::host::detail::concat(real, " ", single).c_str();
}

/// A floating-point and a bool result.
double half(double x) { return x / 2; }
bool is_positive(std::int64_t x) { return x > 0; }

/// A tensor read through mllm_kernel::TensorView: its element count.
std::int64_t numel(mllm_kernel::TensorView x) { return x.numel(); }

/// Tensors and numbers by const reference: each bound to the value read for the whole call (the
/// stack is overwritten first, so a reference to a value gone before the call reads garbage).
std::int64_t by_reference(const mllm_kernel::TensorView& x, const tvm::ffi::TensorView& y, const std::int64_t& scale) {
  volatile char scrub[4096];
  for (int i = 0; i < 4096; ++i) scrub[i] = static_cast<char>(i);
  (void)scrub[0];
  return (x.numel() * 1000 + y.numel()) * scale;
}

/// A parameter type only tvm-ffi's C++ unpacking reads (an optional tensor).
std::int64_t optional_numel(tvm::ffi::Optional<tvm::ffi::TensorView> x) { return x.has_value() ? x.value().numel() : -1; }

/// A tvm-ffi error thrown by a kernel that uses tvm-ffi's C++ API.
void ffi_failure(std::int64_t) { TVM_FFI_THROW(IndexError) << "index out of range"; }

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
MLLM_KERNEL_FFI_EXPORT(std_failure, std_failure);
MLLM_KERNEL_FFI_EXPORT(describe, describe);
MLLM_KERNEL_FFI_EXPORT(half, half);
MLLM_KERNEL_FFI_EXPORT(is_positive, is_positive);
MLLM_KERNEL_FFI_EXPORT(numel, numel);
MLLM_KERNEL_FFI_EXPORT(by_reference, by_reference);
MLLM_KERNEL_FFI_EXPORT(optional_numel, optional_numel);
MLLM_KERNEL_FFI_EXPORT(ffi_failure, ffi_failure);
MLLM_KERNEL_FFI_EXPORT(twice_positive__fast, twice_positive);

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

/// The function the export macro put behind `__tvm_ffi_<name>`, as Python's loader sees it.
tvm::ffi::Function exported(TVMFFISafeCallType symbol) {
  return tvm::ffi::Function::FromExternC(nullptr, symbol, nullptr);
}

TEST(ExportMacro, CallsThroughTheCAbi) {
  EXPECT_EQ(exported(&__tvm_ffi_twice_positive)(std::int64_t{5}).cast<std::int64_t>(), 10);
  EXPECT_EQ(exported(&__tvm_ffi_twice_positive__fast)(std::int64_t{21}).cast<std::int64_t>(), 42);
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

TEST(ExportMacro, ConvertsScalarsAsTvmFfiDoes) {
  // bool and integers from int or bool, floating point from float, int or bool.
  EXPECT_EQ(exported(&__tvm_ffi_describe)(true, std::int64_t{-3}, std::int64_t{9000000000}, 0.25, 1.5)
                .cast<std::string>(),
            "true -3 9000000000 0.25 1.5");
  EXPECT_EQ(exported(&__tvm_ffi_describe)(std::int64_t{0}, false, true, std::int64_t{2}, false).cast<std::string>(),
            "false 0 1 2 0");
  EXPECT_DOUBLE_EQ(exported(&__tvm_ffi_half)(3.0).cast<double>(), 1.5);
  EXPECT_DOUBLE_EQ(exported(&__tvm_ffi_half)(std::int64_t{3}).cast<double>(), 1.5);
  EXPECT_TRUE(exported(&__tvm_ffi_is_positive)(std::int64_t{2}).cast<bool>());
  EXPECT_FALSE(exported(&__tvm_ffi_is_positive)(std::int64_t{-2}).cast<bool>());
}

// A non-const reference could not bind to the value read: such a parameter is left to tvm-ffi's
// unpacking (or refused where <tvm/ffi/function.h> is not included).
static_assert(mllm_kernel::ffi_detail::kLightParam<const mllm_kernel::TensorView&> &&
              mllm_kernel::ffi_detail::kLightParam<const std::int64_t&> &&
              !mllm_kernel::ffi_detail::kLightParam<mllm_kernel::TensorView&> &&
              !mllm_kernel::ffi_detail::kLightParam<std::int64_t&>);

TEST(ExportMacro, ReadsTensorsAsViewsOrTvmFfiTypes) {
  Vector1D x(6, DLDataType{kDLFloat, 32, 1});
  EXPECT_EQ(exported(&__tvm_ffi_numel)(tvm::ffi::TensorView(&x.dl)).cast<std::int64_t>(), 6);
  EXPECT_EQ(exported(&__tvm_ffi_optional_numel)(tvm::ffi::TensorView(&x.dl)).cast<std::int64_t>(), 6);
  EXPECT_EQ(exported(&__tvm_ffi_optional_numel)(nullptr).cast<std::int64_t>(), -1);
  Vector1D y(7, DLDataType{kDLFloat, 32, 1});
  EXPECT_EQ(exported(&__tvm_ffi_by_reference)(tvm::ffi::TensorView(&x.dl), tvm::ffi::TensorView(&y.dl), std::int64_t{3})
                .cast<std::int64_t>(),
            18021);
}

TEST(ExportMacro, ArgumentsThatDoNotConvertAreTypeErrors) {
  const tvm::ffi::Error float_for_int = expect_ffi_error([] { exported(&__tvm_ffi_twice_positive)(1.5); });
  EXPECT_EQ(float_for_int.kind(), "TypeError");
  EXPECT_EQ(float_for_int.message(),
            "Mismatched type on argument #0 when calling: `twice_positive`. Expected `int` but got `float`");
  const tvm::ffi::Error text_for_float =
      expect_ffi_error([] { exported(&__tvm_ffi_half)(tvm::ffi::String("1e-6")); });
  EXPECT_EQ(text_for_float.kind(), "TypeError");
  EXPECT_EQ(text_for_float.message().rfind("Mismatched type on argument #0 when calling: `half`. Expected `float`", 0),
            0u)
      << text_for_float.message();
  const tvm::ffi::Error int_for_tensor = expect_ffi_error([] { exported(&__tvm_ffi_numel)(std::int64_t{1}); });
  EXPECT_EQ(int_for_tensor.message(),
            "Mismatched type on argument #0 when calling: `numel`. Expected `Tensor` but got `int`");
  const tvm::ffi::Error text_for_bool =
      expect_ffi_error([] { exported(&__tvm_ffi_describe)("yes", 1, 2, 3.0, 4.0); });
  EXPECT_EQ(text_for_bool.kind(), "TypeError");
  EXPECT_EQ(text_for_bool.message().rfind("Mismatched type on argument #0 when calling: `describe`. Expected `bool`", 0),
            0u)
      << text_for_bool.message();
  const tvm::ffi::Error arity = expect_ffi_error([] { exported(&__tvm_ffi_twice_positive)(); });
  EXPECT_EQ(arity.kind(), "TypeError");
  EXPECT_EQ(arity.message(), "Mismatched number of arguments when calling: `twice_positive`. Expected 1 but got 0 arguments");
}

TEST(ExportMacro, AVariantEntryPointNamesItsOp) {
  const tvm::ffi::Error error = expect_ffi_error([] { exported(&__tvm_ffi_twice_positive__fast)(std::int64_t{-4}); });
  EXPECT_EQ(error.message(), "twice_positive: n must be positive, got -4" + at(g_check_line));
}

TEST(ExportMacro, OtherExceptionsBecomeRuntimeErrorsWithTheOpName) {
  const tvm::ffi::Error error = expect_ffi_error([] { exported(&__tvm_ffi_std_failure)(); });
  EXPECT_EQ(error.kind(), "RuntimeError");
  EXPECT_EQ(error.message(), "std_failure: not an ffi error");
}

TEST(ExportMacro, TvmFfiErrorsKeepTheirKindAndGetTheOpName) {
  const tvm::ffi::Error error = expect_ffi_error([] { exported(&__tvm_ffi_ffi_failure)(std::int64_t{1}); });
  EXPECT_EQ(error.kind(), "IndexError");
  EXPECT_EQ(error.message(), "ffi_failure: index out of range");
}

}  // namespace
