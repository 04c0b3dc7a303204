// Tests of TensorMatcher (tensor.hpp) on hand-built DLPack tensors: every rule, every error
// path, and the exact text of every message.
#include <mllm_kernel/dtype.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>
#include "text_printer.hpp"
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using mllm_kernel::bf16_storage;
using mllm_kernel::fp16_storage;
using mllm_kernel::fp8_e4m3_storage;
using mllm_kernel::fp8_e5m2_storage;
using mllm_kernel::host::PanicError;
using mllm_kernel::host::SymbolicDevice;
using mllm_kernel::host::SymbolicDType;
using mllm_kernel::host::SymbolicSize;
using mllm_kernel::host::TensorMatcher;

constexpr DLDevice kCPU{kDLCPU, 0};
constexpr DLDevice kCUDA0{kDLCUDA, 0};
constexpr DLDevice kCUDA1{kDLCUDA, 1};

template <typename T>
constexpr DLDataType dtype_of = mllm_kernel::dl_dtype<T>::value;

/// " [at test_tensor_matcher.cpp:<line>]", the suffix every failed check appends.
std::string at(int line) { return " [at test_tensor_matcher.cpp:" + std::to_string(line) + "]"; }

/// A DLPack tensor description that owns its shape and strides. Contiguous float32 on the CPU
/// unless told otherwise; the data pointer is never read.
class FakeTensor {
 public:
  explicit FakeTensor(std::vector<std::int64_t> shape) : shape_(std::move(shape)) {
    strides_.assign(shape_.size(), 1);
    for (int i = static_cast<int>(shape_.size()) - 2; i >= 0; --i) strides_[i] = strides_[i + 1] * shape_[i + 1];
  }
  FakeTensor& strides(std::vector<std::int64_t> strides) {
    strides_ = std::move(strides);
    return *this;
  }
  FakeTensor& dtype(DLDataType dtype) {
    dtype_ = dtype;
    return *this;
  }
  FakeTensor& device(DLDevice device) {
    device_ = device;
    return *this;
  }
  FakeTensor& byte_offset(std::uint64_t offset) {
    byte_offset_ = offset;
    return *this;
  }

  /// This tensor's DLTensor (it borrows shape and strides, so keep the FakeTensor alive).
  const DLTensor* dl() const {
    dl_ = DLTensor{};
    dl_.data = const_cast<char*>(storage_);
    dl_.device = device_;
    dl_.ndim = static_cast<std::int32_t>(shape_.size());
    dl_.dtype = dtype_;
    dl_.shape = const_cast<std::int64_t*>(shape_.data());
    dl_.strides = const_cast<std::int64_t*>(strides_.data());
    dl_.byte_offset = byte_offset_;
    return &dl_;
  }
  /// A view of this tensor, as a kernel entry point receives it.
  mllm_kernel::TensorView view() const { return mllm_kernel::TensorView(dl()); }
  operator mllm_kernel::TensorView() const { return view(); }  // NOLINT(google-explicit-constructor)

 private:
  static constexpr char storage_[1] = {0};
  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> strides_;
  DLDataType dtype_ = dtype_of<float>;
  DLDevice device_ = kCPU;
  std::uint64_t byte_offset_ = 0;
  mutable DLTensor dl_{};
};

/// Runs `fn(line)`, which must set `line` to its own __LINE__ and then throw a ValueError whose
/// message is `expected` followed by " [at test_tensor_matcher.cpp:<line>]".
template <typename F>
void expect_panic(const std::string& expected, F&& fn) {
  int line = 0;
  try {
    fn(line);
  } catch (const PanicError& error) {
    SCOPED_TRACE("check at test_tensor_matcher.cpp:" + std::to_string(line));
    EXPECT_STREQ(error.kind(), "ValueError");
    EXPECT_EQ(error.message(), expected + at(line));
    return;
  }
  ADD_FAILURE_AT(__FILE__, line) << "expected a PanicError: " << expected;
}

/// Runs `fn`, which must throw a ValueError, and returns its message.
template <typename F>
std::string panic_message(F&& fn) {
  try {
    fn();
  } catch (const PanicError& error) {
    EXPECT_STREQ(error.kind(), "ValueError");
    return error.message();
  }
  ADD_FAILURE() << "expected a PanicError";
  return "";
}

// ----------------------------------------------------------------------------------------------
// Shapes

TEST(TensorMatcher, AcceptsAndBindsSymbols) {
  SymbolicSize T{"num_tokens"}, D{"hidden"};
  SymbolicDType dtype;
  SymbolicDevice device;
  const FakeTensor input = FakeTensor({16, 4096}).dtype(dtype_of<bf16_storage>).device(kCUDA1);
  const FakeTensor out = FakeTensor({16, 4096}).dtype(dtype_of<bf16_storage>).device(kCUDA1);
  TensorMatcher({T, D})
      .with_dtype<float, fp16_storage, bf16_storage>(dtype)
      .with_device<kDLCUDA>(device)
      .verify(input, "input")
      .verify(out, "out");
  EXPECT_EQ(T.unwrap(), 16);
  EXPECT_EQ(D.unwrap(), 4096);
  EXPECT_EQ(T.origin(), "input");
  EXPECT_EQ(D.origin(), "input");
  EXPECT_TRUE(dtype.is_type<bf16_storage>());
  EXPECT_FALSE(dtype.is_type<fp16_storage>());
  EXPECT_EQ(mllm_kernel::host::dtype_name(dtype.unwrap()), "bfloat16");
  EXPECT_EQ(dtype.origin(), "input");
  EXPECT_EQ(mllm_kernel::host::device_name(device.unwrap()), "cuda:1");
  EXPECT_EQ(device.origin(), "input");
}

TEST(TensorMatcher, NdimMismatch) {
  SymbolicSize T{"num_tokens"}, D{"hidden"};
  const FakeTensor x({2, 3, 4});
  expect_panic("x: must have 2 dims [num_tokens, hidden], got 3 dims [2, 3, 4]",
               [&](int& line) { line = __LINE__; TensorMatcher({T, D}).verify(x, "x"); });
  // Fixed sizes, wildcards and unnamed symbols in the expected shape.
  SymbolicSize unnamed;
  expect_panic("y: must have 3 dims [4, *, ?], got 1 dims [4]",
               [&](int& line) { line = __LINE__; TensorMatcher({4, -1, unnamed}).verify(FakeTensor({4}), "y"); });
  expect_panic("s: must have 1 dims [8], got 0 dims []",
               [&](int& line) { line = __LINE__; TensorMatcher({8}).verify(FakeTensor({}), "s"); });
  // A failed check binds nothing it had not reached.
  EXPECT_FALSE(T.has_value());
  EXPECT_FALSE(D.has_value());
}

TEST(TensorMatcher, ZeroDimTensor) {
  SymbolicDType dtype;
  TensorMatcher({}).with_dtype<float>(dtype).verify(FakeTensor({}), "scalar");
  EXPECT_TRUE(dtype.is_type<float>());
}

TEST(TensorMatcher, FixedSizeMismatch) {
  TensorMatcher({4, 8}).verify(FakeTensor({4, 8}), "x");
  expect_panic("x: dim 1 must be 8, got 7",
               [&](int& line) { line = __LINE__; TensorMatcher({4, 8}).verify(FakeTensor({4, 7}), "x"); });
  expect_panic("x: dim 0 must be 3, got 4", [&](int& line) {
    line = __LINE__; TensorMatcher({std::int64_t{3}, 8}).verify(FakeTensor({4, 8}), "x");
  });
}

TEST(TensorMatcher, SymbolBoundThenMismatched) {
  SymbolicSize T{"num_tokens"}, D{"hidden"};
  const FakeTensor input({16, 4096});
  const FakeTensor residual({16, 4095});
  expect_panic("residual: dim 1 (hidden) must be 4096 as bound by input, got 4095", [&](int& line) {
    line = __LINE__; TensorMatcher({T, D}).verify(input, "input").verify(residual, "residual");
  });
}

TEST(TensorMatcher, SymbolSharedAcrossMatchers) {
  SymbolicSize T{"num_tokens"}, D{"hidden"};
  TensorMatcher({T, D}).verify(FakeTensor({16, 4096}), "input");
  TensorMatcher({D}).verify(FakeTensor({4096}), "weight");
  expect_panic("bias: dim 0 (hidden) must be 4096 as bound by input, got 1024",
               [&](int& line) { line = __LINE__; TensorMatcher({D}).verify(FakeTensor({1024}), "bias"); });
}

TEST(TensorMatcher, SymbolRepeatedWithinOneShape) {
  SymbolicSize N{"n"};
  TensorMatcher({N, N}).verify(FakeTensor({3, 3}), "square");
  EXPECT_EQ(N.unwrap(), 3);
  SymbolicSize M{"n"};
  expect_panic("x: dim 1 (n) must be 3 as bound by x, got 4",
               [&](int& line) { line = __LINE__; TensorMatcher({M, M}).verify(FakeTensor({3, 4}), "x"); });
}

TEST(TensorMatcher, WildcardAcceptsAnySize) {
  SymbolicSize D{"hidden"};
  TensorMatcher({-1, D}).verify(FakeTensor({1, 8}), "a").verify(FakeTensor({100, 8}), "b");
  TensorMatcher({std::int64_t{-1}, -1}).verify(FakeTensor({7, 9}), "c");
  EXPECT_EQ(D.unwrap(), 8);
  expect_panic("d: dim 1 (hidden) must be 8 as bound by a, got 9",
               [&](int& line) { line = __LINE__; TensorMatcher({-1, D}).verify(FakeTensor({5, 9}), "d"); });
}

// ----------------------------------------------------------------------------------------------
// Strides and contiguity

TEST(TensorMatcher, StridesWithSymbols) {
  SymbolicSize T{"num_tokens"}, D{"hidden"}, S{"row_stride"};
  const FakeTensor x = FakeTensor({4, 8}).strides({16, 1});
  const FakeTensor y = FakeTensor({4, 8}).strides({32, 1});
  TensorMatcher({T, D}).with_strides({S, 1}).verify(x, "x");
  EXPECT_EQ(S.unwrap(), 16);
  EXPECT_EQ(S.origin(), "x");
  expect_panic("y: stride 0 (row_stride) must be 16 as bound by x, got 32",
               [&](int& line) { line = __LINE__; TensorMatcher({T, D}).with_strides({S, 1}).verify(y, "y"); });
}

TEST(TensorMatcher, StridesWithValues) {
  TensorMatcher({4, 8}).with_strides({16, 1}).verify(FakeTensor({4, 8}).strides({16, 1}), "x");
  const FakeTensor x = FakeTensor({4, 8}).strides({8, 1});
  expect_panic("x: stride 0 must be 16, got 8",
               [&](int& line) { line = __LINE__; TensorMatcher({4, 8}).with_strides({16, 1}).verify(x, "x"); });
}

TEST(TensorMatcher, StridesWithWildcard) {
  // -1 accepts any stride, and an explicit stride list replaces the contiguity rule.
  TensorMatcher({4, 8}).with_strides({-1, 1}).verify(FakeTensor({4, 8}).strides({123, 1}), "x");
  TensorMatcher({4, 8}).with_strides({-1, -1}).verify(FakeTensor({4, 8}).strides({1, 4}), "transposed");
  const FakeTensor x = FakeTensor({4, 8}).strides({16, 2});
  expect_panic("x: stride 1 must be 1, got 2",
               [&](int& line) { line = __LINE__; TensorMatcher({4, 8}).with_strides({-1, 1}).verify(x, "x"); });
}

TEST(TensorMatcher, StrideCountMismatch) {
  expect_panic("x: the matcher gives 1 strides for 2 dims", [&](int& line) {
    line = __LINE__; TensorMatcher({4, 8}).with_strides({1}).verify(FakeTensor({4, 8}), "x");
  });
}

TEST(TensorMatcher, ContiguityRequiredByDefault) {
  TensorMatcher({4, 8}).verify(FakeTensor({4, 8}), "x");
  TensorMatcher({2, 3, 4}).verify(FakeTensor({2, 3, 4}).strides({12, 4, 1}), "x3");
  expect_panic("x: must be contiguous (strides [8, 1]), got strides [16, 1]", [&](int& line) {
    line = __LINE__; TensorMatcher({4, 8}).verify(FakeTensor({4, 8}).strides({16, 1}), "x");
  });
  expect_panic("t: must be contiguous (strides [8, 1]), got strides [1, 4]", [&](int& line) {
    line = __LINE__; TensorMatcher({4, 8}).verify(FakeTensor({4, 8}).strides({1, 4}), "t");
  });
  expect_panic("v: must be contiguous (strides [1]), got strides [2]",
               [&](int& line) { line = __LINE__; TensorMatcher({8}).verify(FakeTensor({8}).strides({2}), "v"); });
  expect_panic("x3: must be contiguous (strides [12, 4, 1]), got strides [24, 4, 1]", [&](int& line) {
    line = __LINE__; TensorMatcher({2, 3, 4}).verify(FakeTensor({2, 3, 4}).strides({24, 4, 1}), "x3");
  });
}

TEST(TensorMatcher, ContiguityIgnoresStridesOfSizeOneDims) {
  // PyTorch never reads the stride of a size-1 dimension, so any value is contiguous.
  TensorMatcher({1, 8}).verify(FakeTensor({1, 8}).strides({999, 1}), "row");
  TensorMatcher({4, 1, 8}).verify(FakeTensor({4, 1, 8}).strides({8, 0, 1}), "middle");
  TensorMatcher({4, 1}).verify(FakeTensor({4, 1}).strides({1, 7}), "column");
  TensorMatcher({1}).verify(FakeTensor({1}).strides({5}), "single");
  // ... but a size-1 dimension does not excuse the others.
  expect_panic("x: must be contiguous (strides [1, 1]), got strides [2, 1]", [&](int& line) {
    line = __LINE__; TensorMatcher({4, 1}).verify(FakeTensor({4, 1}).strides({2, 1}), "x");
  });
}

TEST(TensorMatcher, ContiguityOfEmptyTensors) {
  // A tensor with no elements is contiguous whatever its strides (torch.empty(5, 8)[:, :0]),
  // so a kernel's own "must not be empty" check is the one that reports it.
  TensorMatcher({5, 0}).verify(FakeTensor({5, 0}).strides({8, 1}), "sliced");
  TensorMatcher({0, 8}).verify(FakeTensor({0, 8}).strides({1, 0}), "odd");
}

// ----------------------------------------------------------------------------------------------
// Rows (verify_rows, RowsView)

/// Binds [rows, last] with the row stride through verify_rows and returns {rows, last, stride}.
std::vector<std::int64_t> rows_of(const FakeTensor& t) {
  SymbolicSize R{"num_rows"}, D{"hidden"}, S{"row_stride"};
  TensorMatcher({R, D}).with_strides({S, 1}).verify_rows(t, "x");
  return {R.unwrap(), D.unwrap(), S.unwrap()};
}

TEST(TensorMatcher, VerifyRowsMergesLeadingDims) {
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(rows_of(FakeTensor({6, 8})), (V{6, 8, 8}));
  EXPECT_EQ(rows_of(FakeTensor({6, 8}).strides({24, 1})), (V{6, 8, 24}));  // a slice of wider rows
  EXPECT_EQ(rows_of(FakeTensor({2, 3, 8})), (V{6, 8, 8}));
  EXPECT_EQ(rows_of(FakeTensor({2, 3, 8}).strides({72, 24, 1})), (V{6, 8, 24}));
  EXPECT_EQ(rows_of(FakeTensor({2, 1, 3, 1, 8}).strides({72, 5, 24, 9, 1})), (V{6, 8, 24}));  // size-1 dims skipped
  // A 1-D tensor, or leading dims of size 1, is one row with the stride of a dense row.
  EXPECT_EQ(rows_of(FakeTensor({8})), (V{1, 8, 8}));
  EXPECT_EQ(rows_of(FakeTensor({1, 1, 8}).strides({3, 5, 1})), (V{1, 8, 8}));
  // No rows: nothing to misplace, whatever the strides (the op's empty check reports it).
  EXPECT_EQ(rows_of(FakeTensor({0, 3, 8}).strides({1, 99, 1})), (V{0, 8, 8}));
}

TEST(TensorMatcher, VerifyRowsChecksTheRowsView) {
  SymbolicSize R{"num_rows"}, D{"hidden"};
  const FakeTensor x3 = FakeTensor({2, 3, 8}).dtype(dtype_of<fp16_storage>);
  TensorMatcher({R, D}).verify_rows(FakeTensor({2, 3, 8}), "x");
  expect_panic("y: dim 1 (hidden) must be 8 as bound by x, got 9", [&](int& line) {
    line = __LINE__; TensorMatcher({R, D}).verify_rows(FakeTensor({6, 9}), "y");
  });
  expect_panic("y: dim 0 (num_rows) must be 6 as bound by x, got 4", [&](int& line) {
    line = __LINE__; TensorMatcher({R, D}).verify_rows(FakeTensor({2, 2, 8}), "y");
  });
  expect_panic("z: dtype must be float32, got float16", [&](int& line) {
    line = __LINE__; TensorMatcher({R, D}).with_dtype<float>().verify_rows(x3, "z");
  });
  expect_panic("w: must be contiguous (strides [8, 1]), got strides [16, 1]", [&](int& line) {
    line = __LINE__; TensorMatcher({R, D}).verify_rows(FakeTensor({2, 3, 8}).strides({48, 16, 1}), "w");
  });
}

TEST(TensorMatcher, VerifyRowsRejectsWhatRowsCannotDescribe) {
  SymbolicSize R, D;
  expect_panic("x: must have at least 1 dim, got a 0-dim tensor", [&](int& line) {
    line = __LINE__; TensorMatcher({R, D}).verify_rows(FakeTensor({}), "x");
  });
  // A transposed [T, B, D]: its leading dims share no single stride.
  const FakeTensor t = FakeTensor({6, 4, 8}).strides({8, 48, 1});
  expect_panic("t: leading dims of shape [6, 4, 8] with strides [8, 48, 1] cannot be flattened into rows without a copy",
               [&](int& line) { line = __LINE__; TensorMatcher({R, D}).verify_rows(t, "t"); });
  expect_panic("verify_rows needs a 2-D matcher, got 3 dims", [&](int& line) {
    line = __LINE__; TensorMatcher({R, D, -1}).verify_rows(FakeTensor({2, 3, 8}), "x");
  });
  EXPECT_FALSE(R.has_value());
}

TEST(TensorMatcher, VerifyRowsKeepsDataDtypeDeviceAndOffset) {
  SymbolicDType dtype;
  SymbolicDevice device;
  const FakeTensor x = FakeTensor({2, 3, 8}).dtype(dtype_of<bf16_storage>).device(kCUDA1);
  TensorMatcher({-1, -1}).with_dtype<bf16_storage>(dtype).with_device<kDLCUDA>(device).verify_rows(x, "x");
  EXPECT_EQ(mllm_kernel::host::device_name(device.unwrap()), "cuda:1");
  const mllm_kernel::host::RowsView rows(x.view(), "x");
  EXPECT_EQ(rows.view().data_ptr(), x.view().data_ptr());
  EXPECT_EQ(rows.view().ndim(), 2);
  expect_panic("o: byte_offset must be 0, got 4", [&](int& line) {
    line = __LINE__; TensorMatcher({-1, -1}).verify_rows(FakeTensor({2, 3, 8}).byte_offset(4), "o");
  });
}

// ----------------------------------------------------------------------------------------------
// Dtypes

/// with_dtype<T>() accepts T's dtype and rejects `other`, naming both in PyTorch's words.
template <typename T>
void expect_dtype_restriction(const std::string& name, DLDataType other, const std::string& other_name) {
  SCOPED_TRACE(name);
  TensorMatcher({4}).with_dtype<T>().verify(FakeTensor({4}).dtype(dtype_of<T>), "x");
  expect_panic("x: dtype must be " + name + ", got " + other_name, [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_dtype<T>().verify(FakeTensor({4}).dtype(other), "x");
  });
  // The same restriction through a dtype symbol binds T's dtype.
  SymbolicDType symbol;
  TensorMatcher({4}).with_dtype<T>(symbol).verify(FakeTensor({4}).dtype(dtype_of<T>), "x");
  EXPECT_TRUE(symbol.template is_type<T>());
}

TEST(TensorMatcher, DTypeRestrictionEachSupportedType) {
  const DLDataType f32 = dtype_of<float>;
  const DLDataType i32 = dtype_of<std::int32_t>;
  expect_dtype_restriction<float>("float32", dtype_of<double>, "float64");
  expect_dtype_restriction<double>("float64", f32, "float32");
  expect_dtype_restriction<fp16_storage>("float16", dtype_of<bf16_storage>, "bfloat16");
  expect_dtype_restriction<bf16_storage>("bfloat16", dtype_of<fp16_storage>, "float16");
  expect_dtype_restriction<fp8_e4m3_storage>("float8_e4m3fn", dtype_of<fp8_e5m2_storage>, "float8_e5m2");
  expect_dtype_restriction<fp8_e5m2_storage>("float8_e5m2", dtype_of<fp8_e4m3_storage>, "float8_e4m3fn");
  expect_dtype_restriction<std::int8_t>("int8", dtype_of<std::uint8_t>, "uint8");
  expect_dtype_restriction<std::int16_t>("int16", i32, "int32");
  expect_dtype_restriction<std::int32_t>("int32", f32, "float32");
  expect_dtype_restriction<std::int64_t>("int64", i32, "int32");
  expect_dtype_restriction<std::uint8_t>("uint8", dtype_of<bool>, "bool");
  expect_dtype_restriction<bool>("bool", dtype_of<std::uint8_t>, "uint8");
}

TEST(TensorMatcher, DTypeOneOfSeveral) {
  for (DLDataType ok : {dtype_of<float>, dtype_of<fp16_storage>, dtype_of<bf16_storage>}) {
    TensorMatcher({4}).with_dtype<float, fp16_storage, bf16_storage>().verify(FakeTensor({4}).dtype(ok), "x");
  }
  const FakeTensor x = FakeTensor({4}).dtype(dtype_of<std::int32_t>);
  expect_panic("x: dtype must be one of float32, float16, bfloat16, got int32", [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_dtype<float, fp16_storage, bf16_storage>().verify(x, "x");
  });
}

TEST(TensorMatcher, DTypeLanesMustMatch) {
  const FakeTensor x = FakeTensor({4}).dtype(DLDataType{kDLFloat, 32, 4});
  expect_panic("x: dtype must be float32, got float32x4",
               [&](int& line) { line = __LINE__; TensorMatcher({4}).with_dtype<float>().verify(x, "x"); });
}

TEST(TensorMatcher, DTypeSymbolBindingMismatch) {
  SymbolicDType dtype;
  const FakeTensor x = FakeTensor({4}).dtype(dtype_of<fp16_storage>);
  const FakeTensor y = FakeTensor({4}).dtype(dtype_of<float>);
  expect_panic("y: dtype must be float16 as bound by x, got float32", [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_dtype<float, fp16_storage>(dtype).verify(x, "x").verify(y, "y");
  });
  // Another matcher using the same symbol without a restriction of its own.
  expect_panic("weight: dtype must be float16 as bound by x, got float32",
               [&](int& line) { line = __LINE__; TensorMatcher({4}).with_dtype(dtype).verify(y, "weight"); });
}

TEST(TensorMatcher, DTypeSymbolWithoutRestrictionBindsAnything) {
  SymbolicDType dtype;
  TensorMatcher({4}).with_dtype(dtype).verify(FakeTensor({4}).dtype(dtype_of<std::int16_t>), "x");
  EXPECT_TRUE(dtype.is_type<std::int16_t>());
  EXPECT_EQ(dtype.origin(), "x");
}

TEST(TensorMatcher, DTypeCheckedBeforeSizes) {
  // A wrong dtype is reported even when the sizes are also wrong; the dims count comes first.
  const FakeTensor x = FakeTensor({5}).dtype(dtype_of<std::int8_t>);
  const FakeTensor y = FakeTensor({5, 1}).dtype(dtype_of<std::int8_t>);
  expect_panic("x: dtype must be float32, got int8",
               [&](int& line) { line = __LINE__; TensorMatcher({4}).with_dtype<float>().verify(x, "x"); });
  expect_panic("y: must have 1 dims [4], got 2 dims [5, 1]",
               [&](int& line) { line = __LINE__; TensorMatcher({4}).with_dtype<float>().verify(y, "y"); });
}

// ----------------------------------------------------------------------------------------------
// Devices

TEST(TensorMatcher, DeviceRestriction) {
  TensorMatcher({4}).with_device<kDLCUDA>().verify(FakeTensor({4}).device(kCUDA1), "x");
  expect_panic("x: device must be cuda, got cpu", [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_device<kDLCUDA>().verify(FakeTensor({4}), "x");
  });
  expect_panic("x: device must be cpu, got cuda:0", [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_device<kDLCPU>().verify(FakeTensor({4}).device(kCUDA0), "x");
  });
  TensorMatcher({4}).with_device<kDLCPU, kDLCUDA>().verify(FakeTensor({4}), "cpu_ok");
  TensorMatcher({4}).with_device<kDLCPU, kDLCUDA>().verify(FakeTensor({4}).device(kCUDA0), "cuda_ok");
  const FakeTensor pinned = FakeTensor({4}).device(DLDevice{kDLCUDAHost, 0});
  expect_panic("x: device must be cpu or cuda, got cuda_host:0", [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_device<kDLCPU, kDLCUDA>().verify(pinned, "x");
  });
}

TEST(TensorMatcher, DeviceSymbolMismatch) {
  SymbolicDevice device;
  const FakeTensor x = FakeTensor({4}).device(kCUDA1);
  const FakeTensor y = FakeTensor({4}).device(kCUDA0);
  expect_panic("y: device must be cuda:1 as bound by x, got cuda:0", [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_device<kDLCUDA>(device).verify(x, "x").verify(y, "y");
  });
  expect_panic("z: device must be cuda:1 as bound by x, got cpu", [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_device(device).verify(FakeTensor({4}), "z");
  });
}

TEST(TensorMatcher, DeviceCheckedAfterDType) {
  const FakeTensor x = FakeTensor({4}).dtype(dtype_of<std::int8_t>);  // and on the CPU
  expect_panic("x: dtype must be float32, got int8", [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_dtype<float>().with_device<kDLCUDA>().verify(x, "x");
  });
}

// ----------------------------------------------------------------------------------------------
// Other rules

TEST(TensorMatcher, UnnamedVerifyNamesTheLocation) {
  int line = 0;
  const std::string message = panic_message([&] { line = __LINE__; TensorMatcher({4}).verify(FakeTensor({5})); });
  const std::string name = "tensor verified at test_tensor_matcher.cpp:" + std::to_string(line);
  EXPECT_EQ(message, name + ": dim 0 must be 4, got 5" + at(line));
  // A symbol bound by an unnamed tensor names the same place as its origin.
  SymbolicSize N{"n"};
  int bound_line = 0;
  bound_line = __LINE__; TensorMatcher({N}).verify(FakeTensor({4}));
  EXPECT_EQ(N.origin(), "tensor verified at test_tensor_matcher.cpp:" + std::to_string(bound_line));
  expect_panic("x: dim 0 (n) must be 4 as bound by tensor verified at test_tensor_matcher.cpp:" +
                std::to_string(bound_line) + ", got 6",
               [&](int& line) { line = __LINE__; TensorMatcher({N}).verify(FakeTensor({6}), "x"); });
}

TEST(TensorMatcher, ByteOffsetMustBeZero) {
  expect_panic("x: byte_offset must be 0, got 16",
               [&](int& line) { line = __LINE__; TensorMatcher({4}).verify(FakeTensor({4}).byte_offset(16), "x"); });
}

TEST(TensorMatcher, UnwrapOfUnboundSymbols) {
  SymbolicSize D{"hidden"};
  SymbolicDType dtype;
  SymbolicDevice device;
  EXPECT_FALSE(D.has_value());
  EXPECT_FALSE(dtype.has_value());
  EXPECT_FALSE(device.has_value());
  expect_panic("symbol 'hidden' was never bound by a verified tensor",
               [&](int& line) { line = __LINE__; (void)D.unwrap(); });
  expect_panic("dtype symbol was never bound by a verified tensor",
               [&](int& line) { line = __LINE__; (void)dtype.unwrap(); });
  expect_panic("device symbol was never bound by a verified tensor",
               [&](int& line) { line = __LINE__; (void)device.unwrap(); });
  // A symbol the matcher never reached (it failed first) stays unbound.
  SymbolicSize T{"num_tokens"};
  expect_panic("x: dim 0 must be 4, got 5",
               [&](int& line) { line = __LINE__; TensorMatcher({4, T}).verify(FakeTensor({5, 3}), "x"); });
  EXPECT_FALSE(T.has_value());
}

TEST(TensorMatcher, SymbolBindBeforeVerify) {
  SymbolicSize D{"hidden"};
  D.bind(4096);
  EXPECT_EQ(D.unwrap(), 4096);
  EXPECT_EQ(D.origin(), "the caller");
  TensorMatcher({-1, D}).verify(FakeTensor({2, 4096}), "input");
  expect_panic("x: dim 1 (hidden) must be 4096 as bound by the caller, got 4095",
               [&](int& line) { line = __LINE__; TensorMatcher({-1, D}).verify(FakeTensor({2, 4095}), "x"); });

  SymbolicSize G{"group_size"};
  G.bind(128, "argument group_size");
  expect_panic("scales: dim 0 (group_size) must be 128 as bound by argument group_size, got 64",
               [&](int& line) { line = __LINE__; TensorMatcher({G}).verify(FakeTensor({64}), "scales"); });

  SymbolicDType dtype;
  dtype.bind(dtype_of<bf16_storage>, "the caller");
  expect_panic("x: dtype must be bfloat16 as bound by the caller, got float32",
               [&](int& line) { line = __LINE__; TensorMatcher({4}).with_dtype(dtype).verify(FakeTensor({4}), "x"); });

  SymbolicDevice device;
  device.bind(kCUDA1, "the caller");
  expect_panic("x: device must be cuda:1 as bound by the caller, got cuda:0", [&](int& line) {
    line = __LINE__; TensorMatcher({4}).with_device(device).verify(FakeTensor({4}).device(kCUDA0), "x");
  });
}

TEST(TensorMatcher, ChainedVerifyCalls) {
  SymbolicSize T{"num_tokens"}, D{"hidden"};
  SymbolicDType dtype;
  SymbolicDevice device;
  const FakeTensor a = FakeTensor({3, 64}).dtype(dtype_of<fp16_storage>).device(kCUDA0);
  const FakeTensor b = FakeTensor({3, 64}).dtype(dtype_of<fp16_storage>).device(kCUDA0);
  const FakeTensor c = FakeTensor({3, 64}).dtype(dtype_of<fp16_storage>).device(kCUDA0);
  const FakeTensor bad = FakeTensor({3, 65}).dtype(dtype_of<fp16_storage>).device(kCUDA0);
  TensorMatcher({T, D})
      .with_dtype<fp16_storage, bf16_storage>(dtype)
      .with_device<kDLCUDA>(device)
      .verify(a, "a")
      .verify(b, "b")
      .verify(c, "c");
  EXPECT_EQ(T.unwrap(), 3);
  EXPECT_EQ(D.unwrap(), 64);
  EXPECT_TRUE(dtype.is_type<fp16_storage>());
  EXPECT_EQ(device.unwrap().device_id, 0);
  // The first tensor binds, so a later one in the chain is the one named in the message.
  SymbolicSize T2{"num_tokens"}, D2{"hidden"};
  SymbolicDType dtype2;
  expect_panic("bad: dim 1 (hidden) must be 64 as bound by a, got 65", [&](int& line) {
    line = __LINE__; TensorMatcher({T2, D2}).with_dtype(dtype2).verify(a, "a").verify(b, "b").verify(bad, "bad");
  });
}

TEST(TensorMatcher, ErrorsArePanicErrorsOfKindValueError) {
  try {
    TensorMatcher({4}).verify(FakeTensor({5}), "x");
    FAIL() << "verify did not throw";
  } catch (const PanicError& error) {
    EXPECT_STREQ(error.kind(), "ValueError");
    EXPECT_EQ(std::string(error.message()).rfind("x: dim 0 must be 4, got 5 [at test_tensor_matcher.cpp:", 0), 0u);
  }
}

TEST(TensorMatcher, AcceptsTvmFfiTensorViews) {
  // Kernels written against tvm-ffi's own view type (the seed guide's style) check it as is.
  const FakeTensor x({3, 8});
  const tvm::ffi::TensorView view(x.dl());
  SymbolicSize T{"num_tokens"}, D{"hidden"};
  TensorMatcher({T, D}).with_dtype<float>().verify(view, "x");
  EXPECT_EQ(T.unwrap(), 3);
  EXPECT_EQ(D.unwrap(), 8);
  expect_panic("x: dim 1 must be 9, got 8", [&](int& line) {
    line = __LINE__; TensorMatcher({3, 9}).verify(view, "x");
  });
}

}  // namespace
