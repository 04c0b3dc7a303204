// create_kv_indices, shared by the CPU and CUDA kernels: the argument checks, the launch
// parameters, and the bounds rule that keeps every request inside its buffers.
//
//   kv_indices[kv_indptr[i] + j] = req_to_token[req_pool_indices[i], start_i + j]
//   for j < page_kernel_lens[i], start_i = kv_start_idx[i] (0 when kv_start_idx is empty)
//
// All int32. req_to_token [pool_size, max_context_len] may have any row stride; the others are
// contiguous 1-D: req_pool_indices and page_kernel_lens [batch], kv_indptr [>= batch],
// kv_start_idx [batch] or [0], kv_indices [any].
#pragma once

#include <mllm_kernel/host_device.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace mllm_kernel::host {

struct KvIndicesParams {
  const std::int32_t* req_to_token;
  const std::int32_t* req_pool_indices;
  const std::int32_t* lens;
  const std::int32_t* indptr;
  const std::int32_t* start;  // nullptr: every request starts at column 0
  std::int32_t* out;
  std::int64_t row_stride;
  std::int64_t pool_size;
  std::int64_t max_context_len;
  std::int64_t out_size;
  std::int64_t batch;
};

/// Whether request i reads and writes only inside req_to_token and kv_indices. The kernels
/// skip a request that does not (nothing out of bounds is ever touched); the CPU kernel and
/// the CUDA wrapper report it first.
MLLM_HOST_DEVICE bool kv_request_in_bounds(const KvIndicesParams& p, std::int64_t i) {
  const std::int64_t row = p.req_pool_indices[i], len = p.lens[i], first = p.start ? p.start[i] : 0;
  const std::int64_t at = p.indptr[i];
  return row >= 0 && row < p.pool_size && len >= 0 && first >= 0 && first + len <= p.max_context_len && at >= 0 &&
         at + len <= p.out_size;
}

/// Checks the tensors (dtypes, shapes, one device of type kDevice) and returns the parameters.
template <DLDeviceType kDevice>
KvIndicesParams check_kv_indices(mllm_kernel::TensorView req_to_token, mllm_kernel::TensorView req_pool_indices,
                                 mllm_kernel::TensorView page_kernel_lens, mllm_kernel::TensorView kv_indptr,
                                 mllm_kernel::TensorView kv_start_idx, mllm_kernel::TensorView kv_indices) {
  SymbolicSize pool{"pool_size"}, context{"max_context_len"}, stride{"row_stride"}, batch{"batch"};
  SymbolicSize indptr_size{"kv_indptr size"}, start_size{"kv_start_idx size"}, out_size{"kv_indices size"};
  SymbolicDevice device;
  (void)TensorMatcher({pool, context})
      .with_strides({stride, 1})
      .with_dtype<std::int32_t>()
      .with_device<kDevice>(device)
      .verify(req_to_token, "req_to_token");
  (void)TensorMatcher({batch})
      .with_dtype<std::int32_t>()
      .with_device<kDevice>(device)
      .verify(req_pool_indices, "req_pool_indices")
      .verify(page_kernel_lens, "page_kernel_lens");
  (void)TensorMatcher({indptr_size}).with_dtype<std::int32_t>().with_device<kDevice>(device).verify(kv_indptr, "kv_indptr");
  (void)TensorMatcher({start_size})
      .with_dtype<std::int32_t>()
      .with_device<kDevice>(device)
      .verify(kv_start_idx, "kv_start_idx");
  (void)TensorMatcher({out_size}).with_dtype<std::int32_t>().with_device<kDevice>(device).verify(kv_indices, "kv_indices");
  const std::int64_t b = batch.unwrap();
  RuntimeCheck(indptr_size.unwrap() >= b, "kv_indptr must have at least batch (", b, ") entries, got ",
               indptr_size.unwrap());
  RuntimeCheck(start_size.unwrap() == 0 || start_size.unwrap() == b, "kv_start_idx must be empty or have batch (",
               b, ") entries, got ", start_size.unwrap());
  return KvIndicesParams{static_cast<const std::int32_t*>(req_to_token.data_ptr()),
                         static_cast<const std::int32_t*>(req_pool_indices.data_ptr()),
                         static_cast<const std::int32_t*>(page_kernel_lens.data_ptr()),
                         static_cast<const std::int32_t*>(kv_indptr.data_ptr()),
                         start_size.unwrap() == 0 ? nullptr : static_cast<const std::int32_t*>(kv_start_idx.data_ptr()),
                         static_cast<std::int32_t*>(kv_indices.data_ptr()),
                         stride.unwrap(),
                         pool.unwrap(),
                         context.unwrap(),
                         out_size.unwrap(),
                         b};
}

/// ValueError naming the first request that leaves its buffers (host-side values only).
inline void check_kv_requests(const KvIndicesParams& p) {
  for (std::int64_t i = 0; i < p.batch; ++i) {
    if (kv_request_in_bounds(p, i)) continue;
    const std::int64_t row = p.req_pool_indices[i], len = p.lens[i], first = p.start ? p.start[i] : 0;
    const std::int64_t at = p.indptr[i];
    RuntimeCheck(row >= 0 && row < p.pool_size, "req_pool_indices[", i, "] = ", row,
                 " is out of range for req_to_token with ", p.pool_size, " rows");
    RuntimeCheck(len >= 0, "page_kernel_lens[", i, "] = ", len, " is negative");
    RuntimeCheck(first >= 0 && first + len <= p.max_context_len, "request ", i, " reads columns [", first, ", ",
                 first + len, ") of req_to_token, which has ", p.max_context_len);
    Panic("request ", i, " writes kv_indices[", at, ", ", at + len, "), which has ", p.out_size, " entries");
  }
}

}  // namespace mllm_kernel::host
