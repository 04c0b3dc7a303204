// RowsView: a tensor [..., last] seen as the 2-D rows [rows, last] a row kernel walks, without a
// copy: leading dims merged (they must share one stride), a 1-D tensor as one row. The row ops
// take N-D tensors straight from Python this way, so their wrappers read no shapes.
//
//   TensorMatcher({N, D}).with_strides({row_stride, 1}).verify_rows(input, "input");
//
// (TensorMatcher::verify_rows builds the view; kernels read N, D and row_stride as usual.)
#pragma once

#include <mllm_kernel/host_runtime.hpp>
#include <mllm_kernel/source_location.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace mllm_kernel::host {

/// The 2-D view of a tensor's rows. It owns the view's shape and strides, so it is neither
/// copied nor moved; keep it alive while its view() is used.
class RowsView {
 public:
  /// Views `tensor` as rows, or throws ValueError naming `name`: a 0-dim tensor, or leading
  /// dims that no single row stride describes (such as a transposed [T, B, D]).
  MLLM_KERNEL_HOST_API RowsView(mllm_kernel::TensorView tensor, const char* name,
                                source_location loc = source_location::current());
  RowsView(const RowsView&) = delete;
  RowsView& operator=(const RowsView&) = delete;

  /// The [rows, last] view (same data, dtype and device as the tensor).
  mllm_kernel::TensorView view() const { return mllm_kernel::TensorView(&tensor_); }

 private:
  std::int64_t shape_[2];
  std::int64_t strides_[2];
  DLTensor tensor_;  // points at shape_ and strides_
};

}  // namespace mllm_kernel::host
