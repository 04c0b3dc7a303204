// RowsView: a tensor [..., last] seen as the 2-D rows [rows, last] a row kernel walks, without a
// copy: leading dims merged (they must share one stride), a 1-D tensor as one row. The row ops
// take N-D tensors straight from Python this way, so their wrappers read no shapes.
//
//   TensorMatcher({N, D}).with_strides({row_stride, 1}).verify_rows(input, "input");
//
// (TensorMatcher::verify_rows builds the view; kernels read N, D and row_stride as usual.)
#pragma once

#include <mllm_kernel/source_location.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace mllm_kernel::host {

/// The 2-D view of a tensor's rows. It owns the view's shape and strides, so it is neither
/// copied nor moved; keep it alive while its view() is used.
class RowsView {
 public:
  /// Views `tensor` as rows, or throws ValueError naming `name`: a 0-dim tensor, or leading
  /// dims that no single row stride describes (such as a transposed [T, B, D]).
  RowsView(mllm_kernel::TensorView tensor, std::string_view name, source_location loc = source_location::current())
      : tensor_{tensor.data_ptr(), tensor.device(), 2, tensor.dtype(), shape_, strides_, tensor.byte_offset()} {
    const int ndim = tensor.ndim();
    if (ndim == 0) {
      detail::throw_panic("ValueError", detail::concat(name, ": must have at least 1 dim, got a 0-dim tensor"), loc);
    }
    const std::int64_t* shape = tensor.shape().data();
    const std::int64_t* strides = tensor.strides().data();
    shape_[1] = shape[ndim - 1];
    strides_[1] = strides[ndim - 1];
    // Like PyTorch's unsqueeze(0) (1-D) and view(-1, last): the stride of a row made of size-1
    // dims is the length of a dense row.
    shape_[0] = 1;
    strides_[0] = shape_[1] * strides_[1];
    bool mergeable = true;
    bool strided = false;  // a leading dim of size > 1 has set the row stride
    std::int64_t next = 0;  // the stride the next outer dim of size > 1 must have
    for (int i = ndim - 2; i >= 0; --i) {
      shape_[0] *= shape[i];
      if (shape[i] == 1) continue;
      if (!strided) {
        strides_[0] = strides[i];
        strided = true;
      } else if (strides[i] != next) {
        mergeable = false;
      }
      next = strides[i] * shape[i];
    }
    // An empty tensor has no rows to misplace (the row ops reject it as empty): any strides.
    if (shape_[0] == 0) {
      strides_[0] = shape_[1] * strides_[1];
    } else if (!mergeable) {
      detail::throw_panic("ValueError",
                          detail::concat(name, ": leading dims of shape ", detail::list_text(shape, ndim), " with strides ",
                                         detail::list_text(strides, ndim),
                                         " cannot be flattened into rows without a copy"),
                          loc);
    }
  }
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
