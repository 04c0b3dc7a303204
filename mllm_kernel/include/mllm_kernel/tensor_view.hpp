// TensorView: a kernel entry point's view of a tensor argument (a DLPack DLTensor).
//
//   void rmsnorm(mllm_kernel::TensorView out, mllm_kernel::TensorView input, ...);
//
// It holds a copy of the DLTensor the caller passed (shape, strides, dtype, device, data
// pointer) and owns nothing it points to: it is valid for the duration of the call. It depends on DLPack alone, so a
// kernel source that uses it compiles without tvm-ffi's C++ headers, which cost seconds in each
// of nvcc's three front ends (ffi_export.hpp passes tensors through tvm-ffi's C ABI). A
// `mllm_kernel::TensorView` or `tvm::ffi::Tensor` converts to it, so kernels written against
// tvm-ffi's types work with TensorMatcher unchanged.
#pragma once

#include <dlpack/dlpack.h>

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace mllm_kernel {

/// The sizes or strides of a TensorView: a read-only array of int64.
class IntArrayView {
 public:
  constexpr IntArrayView(const std::int64_t* data, std::size_t size) : data_(data), size_(size) {}
  constexpr const std::int64_t* data() const { return data_; }
  constexpr std::size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr std::int64_t operator[](std::size_t i) const { return data_[i]; }
  constexpr const std::int64_t* begin() const { return data_; }
  constexpr const std::int64_t* end() const { return data_ + size_; }

 private:
  const std::int64_t* data_;
  std::size_t size_;
};

/// A non-owning view of a DLTensor; see the file comment.
class TensorView {
 public:
  /// Views `tensor`, whose shape, strides and data must outlive the view.
  TensorView(const DLTensor* tensor) : tensor_(*tensor) {}  // NOLINT(google-explicit-constructor)
  /// Views the tensor of a tvm-ffi TensorView or Tensor (anything with DLTensor's accessors).
  template <typename Other>
    requires requires(const Other& other) {
      { other.data_ptr() } -> std::convertible_to<void*>;
      { other.shape().data() } -> std::convertible_to<const std::int64_t*>;
      { other.strides().data() } -> std::convertible_to<const std::int64_t*>;
      { other.device() } -> std::convertible_to<DLDevice>;
      { other.dtype() } -> std::convertible_to<DLDataType>;
      { other.ndim() } -> std::convertible_to<int>;
      { other.byte_offset() } -> std::convertible_to<std::uint64_t>;
    }
  TensorView(const Other& other)  // NOLINT(google-explicit-constructor)
      : tensor_{other.data_ptr(),
                other.device(),
                static_cast<std::int32_t>(other.ndim()),
                other.dtype(),
                const_cast<std::int64_t*>(other.shape().data()),
                const_cast<std::int64_t*>(other.strides().data()),
                other.byte_offset()} {}

  void* data_ptr() const { return tensor_.data; }
  DLDevice device() const { return tensor_.device; }
  DLDataType dtype() const { return tensor_.dtype; }
  int ndim() const { return tensor_.ndim; }
  std::uint64_t byte_offset() const { return tensor_.byte_offset; }
  IntArrayView shape() const { return {tensor_.shape, static_cast<std::size_t>(tensor_.ndim)}; }
  /// The strides in elements. tvm-ffi fills in a DLPack producer's NULL strides on import, so
  /// they are always present on tensors that came through an entry point.
  IntArrayView strides() const { return {tensor_.strides, static_cast<std::size_t>(tensor_.ndim)}; }
  /// Size of dimension `i`; negative `i` counts from the end, as in PyTorch.
  std::int64_t size(int i) const { return tensor_.shape[i < 0 ? i + tensor_.ndim : i]; }
  /// Stride of dimension `i` in elements; negative `i` counts from the end.
  std::int64_t stride(int i) const { return tensor_.strides[i < 0 ? i + tensor_.ndim : i]; }
  /// The number of elements (1 for a 0-dim tensor).
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < tensor_.ndim; ++i) n *= tensor_.shape[i];
    return n;
  }
  /// The viewed DLTensor (this view's copy of it).
  const DLTensor* GetDLTensorPtr() const { return &tensor_; }

 private:
  DLTensor tensor_;
};

}  // namespace mllm_kernel
