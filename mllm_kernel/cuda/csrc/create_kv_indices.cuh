// CUDA create_kv_indices (the flashinfer-style page-table gather of serving engines):
//   kv_indices[kv_indptr[i] + j] = req_to_token[req_pool_indices[i], start_i + j]
// for every request i and j < page_kernel_lens[i] (arguments: kv_indices.hpp). One block per
// request copies its run of int32 indices, in 16-byte vectors when source and destination are
// aligned alike, else one index a thread. A request that would leave req_to_token or
// kv_indices is skipped; the Python wrapper reports it (that needs the values on the host).
#pragma once

#include <mllm_kernel/kv_indices.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>

#include <cstdint>

namespace {

using mllm_kernel::host::KvIndicesParams;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) create_kv_indices_kernel(const KvIndicesParams p) {
  const std::int64_t i = blockIdx.x;
  mllm_kernel::device::pdl_wait_and_release();  // reads nothing before the previous kernel is done
  if (!mllm_kernel::host::kv_request_in_bounds(p, i)) return;
  const std::int64_t len = p.lens[i];
  const std::int32_t* src = p.req_to_token + p.req_pool_indices[i] * p.row_stride + (p.start ? p.start[i] : 0);
  std::int32_t* dst = p.out + p.indptr[i];
  // Peel up to three indices so that dst is 16-byte aligned; vectors then if src is too.
  const std::int64_t head = min(len, static_cast<std::int64_t>((4 - (reinterpret_cast<std::uintptr_t>(dst) / 4) % 4) % 4));
  const bool vector = (reinterpret_cast<std::uintptr_t>(src + head) % 16) == 0;
  if (!vector) {
    for (std::int64_t j = threadIdx.x; j < len; j += kThreads) dst[j] = src[j];
    return;
  }
  if (threadIdx.x < head) dst[threadIdx.x] = src[threadIdx.x];
  const std::int64_t vecs = (len - head) / 4;
  const int4* src4 = reinterpret_cast<const int4*>(src + head);
  int4* dst4 = reinterpret_cast<int4*>(dst + head);
  for (std::int64_t v = threadIdx.x; v < vecs; v += kThreads) dst4[v] = src4[v];
  for (std::int64_t j = head + vecs * 4 + threadIdx.x; j < len; j += kThreads) dst[j] = src[j];
}

void create_kv_indices(tvm::ffi::TensorView req_to_token, tvm::ffi::TensorView req_pool_indices,
                       tvm::ffi::TensorView page_kernel_lens, tvm::ffi::TensorView kv_indptr,
                       tvm::ffi::TensorView kv_start_idx, tvm::ffi::TensorView kv_indices, bool enable_pdl) {
  using namespace mllm_kernel::host;
  const KvIndicesParams p = check_kv_indices<kDLCUDA>(req_to_token, req_pool_indices, page_kernel_lens, kv_indptr,
                                                      kv_start_idx, kv_indices);
  if (p.batch == 0) return;
  RuntimeCheck(p.batch <= 0x7fffffff, "batch ", p.batch, " is too large");
  LaunchKernel(static_cast<unsigned>(p.batch), kThreads, req_to_token.device())
      .enable_pdl(enable_pdl)(create_kv_indices_kernel, p);
}

}  // namespace
