// A stand-in for tvm-ffi's <tvm/ffi/container/tensor.h>, for kernel sources whose only use of
// tvm-ffi's C++ API is tvm::ffi::TensorView (and ShapeView), as the seed guide writes them.
//
// The real header brings tvm-ffi's object system and the standard library's strings, streams
// and containers, which nvcc parses three times (cudafe++, cicc, the host compile): seconds of
// every first build. A TensorView is a DLTensor read through accessors, so the JIT puts this
// folder ahead of tvm-ffi's own when a source passes jit_utils/standin.py's test, and builds it
// with the real header when it does not or when the build fails here.
//
// The classes have the real ones' public interface for views: the same names, parameter and
// result types, and an IndexError where the real ones raise one. tvm::ffi::Tensor (an owning
// tensor), as_strided and tvm-ffi's free functions are not here: a source that names them builds
// against the real header.
#ifndef MLLM_KERNEL_STANDIN_TVM_FFI_CONTAINER_TENSOR_H_
#define MLLM_KERNEL_STANDIN_TVM_FFI_CONTAINER_TENSOR_H_

#include <mllm_kernel/errors.hpp>

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace tvm::ffi {

/// A borrowed array of int64 (a shape or strides).
class ShapeView {
 public:
  ShapeView() = default;
  ShapeView(const std::int64_t* data, std::size_t size) : data_(data), size_(size) {}
  ShapeView(const std::initializer_list<std::int64_t>& values) : data_(values.begin()), size_(values.size()) {}

  const std::int64_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::int64_t operator[](std::size_t idx) const { return data_[idx]; }
  const std::int64_t* begin() const { return data_; }
  const std::int64_t* end() const { return data_ + size_; }
  std::int64_t at(std::size_t idx) const {
    if (idx >= size_) {
      throw ::mllm_kernel::host::PanicError(
          "IndexError", ::mllm_kernel::host::detail::concat("indexing ", idx, " on a Shape of size ", size_));
    }
    return data_[idx];
  }
  std::int64_t front() const { return at(0); }
  std::int64_t back() const { return at(size_ - 1); }
  std::int64_t Product() const {
    std::int64_t product = 1;
    for (std::size_t i = 0; i < size_; ++i) product *= data_[i];
    return product;
  }

 private:
  const std::int64_t* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A borrowed tensor: its DLTensor, copied.
class TensorView {
 public:
  TensorView(const DLTensor* tensor) {  // NOLINT(google-explicit-constructor)
    if (tensor == nullptr) throw ::mllm_kernel::host::PanicError("InternalError", "TensorView of a null DLTensor");
    tensor_ = *tensor;
  }

  void* data_ptr() const { return tensor_.data; }
  DLDevice device() const { return tensor_.device; }
  std::int32_t ndim() const { return tensor_.ndim; }
  std::int32_t dim() const { return tensor_.ndim; }
  DLDataType dtype() const { return tensor_.dtype; }
  std::uint64_t byte_offset() const { return tensor_.byte_offset; }
  ShapeView shape() const { return {tensor_.shape, static_cast<std::size_t>(tensor_.ndim)}; }
  ShapeView sizes() const { return shape(); }
  ShapeView strides() const {
    if (tensor_.strides == nullptr && tensor_.ndim != 0) {
      throw ::mllm_kernel::host::PanicError("InternalError", "TensorView: the tensor has no strides");
    }
    return {tensor_.strides, static_cast<std::size_t>(tensor_.ndim)};
  }
  std::int64_t numel() const { return shape().Product(); }
  std::int64_t size(std::int64_t idx) const { return tensor_.shape[checked(idx)]; }
  std::int64_t stride(std::int64_t idx) const { return tensor_.strides[checked(idx)]; }

  /// Row-major without gaps; dimensions of size 1 may have any stride, and a tensor with no
  /// elements is contiguous.
  bool IsContiguous() const {
    if (tensor_.strides == nullptr) return true;
    for (std::int32_t i = 0; i < tensor_.ndim; ++i) {
      if (tensor_.shape[i] == 0) return true;
    }
    std::int64_t expected = 1;
    for (std::int32_t i = tensor_.ndim - 1; i >= 0; --i) {
      if (tensor_.shape[i] == 1) continue;
      if (tensor_.strides[i] != expected) return false;
      expected *= tensor_.shape[i];
    }
    return true;
  }
  bool is_contiguous() const { return IsContiguous(); }

 private:
  /// idx as a dimension (negative counts from the end).
  std::int64_t checked(std::int64_t idx) const {
    const std::int64_t dim = idx >= 0 ? idx : tensor_.ndim + idx;
    if (dim < 0 || dim >= tensor_.ndim) {
      throw ::mllm_kernel::host::PanicError(
          "IndexError", ::mllm_kernel::host::detail::concat("Index ", idx, " out of bounds for tensor with ",
                                                            tensor_.ndim, " dimensions"));
    }
    return dim;
  }

  DLTensor tensor_;
};

}  // namespace tvm::ffi

#endif  // MLLM_KERNEL_STANDIN_TVM_FFI_CONTAINER_TENSOR_H_
