// CUDA create_kv_indices (the flashinfer-style page-table gather of serving engines):
//   kv_indices[kv_indptr[i] + j] = req_to_token[req_pool_indices[i], start_i + j]
// for every request i and j < page_kernel_lens[i] (arguments: kv_indices.hpp). One block per
// request and chunk of 1024 indices copies that part of the request's run, in 16-byte vectors
// when source and destination are aligned alike, else one index a thread. A request that would leave req_to_token or
// kv_indices is skipped; the Python wrapper reports it (that needs the values on the host).
#pragma once

#include <mllm_kernel/kv_indices.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace {

using mllm_kernel::host::KvIndicesParams;

constexpr int kThreads = 256;
/// Indices one block copies: a 16-byte vector a thread.
constexpr int kChunk = kThreads * 4;

/// Block (i, c) copies chunk c of request i: its vectors [c * kThreads, (c + 1) * kThreads)
/// once the destination is 16-byte aligned (chunk 0 also takes the up to three indices before
/// and after them), or indices [c * kChunk, (c + 1) * kChunk) when source and destination are
/// aligned differently.
__global__ void __launch_bounds__(kThreads) create_kv_indices_kernel(const KvIndicesParams p) {
  const std::int64_t i = blockIdx.x, chunk = blockIdx.y;
  mllm_kernel::device::pdl_wait_and_release();  // reads nothing before the previous kernel is done
  if (!mllm_kernel::host::kv_request_in_bounds(p, i)) return;
  const std::int64_t len = p.lens[i];
  if (chunk * kChunk >= len) return;
  const std::int32_t* src = p.req_to_token + p.req_pool_indices[i] * p.row_stride + (p.start ? p.start[i] : 0);
  std::int32_t* dst = p.out + p.indptr[i];
  const std::int64_t misaligned = (reinterpret_cast<std::uintptr_t>(dst) / 4) % 4;
  const std::int64_t head = misaligned == 0 ? 0 : (len < 4 - misaligned ? len : 4 - misaligned);
  if ((reinterpret_cast<std::uintptr_t>(src + head) % 16) != 0) {
    // Four indices a thread, all loaded before any is stored (src and dst may alias as far as
    // the compiler knows, which would otherwise serialise each load behind the previous store).
    std::int32_t values[4];
    const std::int64_t first = chunk * kChunk + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (first + k * kThreads < len) values[k] = src[first + k * kThreads];
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (first + k * kThreads < len) dst[first + k * kThreads] = values[k];
    }
    return;
  }
  const std::int64_t vecs = (len - head) / 4;
  const std::int64_t v = chunk * kThreads + threadIdx.x;
  if (v < vecs) reinterpret_cast<int4*>(dst + head)[v] = reinterpret_cast<const int4*>(src + head)[v];
  if (chunk == 0 && threadIdx.x < 8) {
    // The indices before the first vector and after the last one (at most three each).
    const std::int64_t j = threadIdx.x < 4 ? threadIdx.x : head + vecs * 4 + (threadIdx.x - 4);
    if ((threadIdx.x < 4 && j < head) || (threadIdx.x >= 4 && j < len)) dst[j] = src[j];
  }
}

void create_kv_indices(mllm_kernel::TensorView req_to_token, mllm_kernel::TensorView req_pool_indices,
                       mllm_kernel::TensorView page_kernel_lens, mllm_kernel::TensorView kv_indptr,
                       mllm_kernel::TensorView kv_start_idx, mllm_kernel::TensorView kv_indices, bool enable_pdl) {
  using namespace mllm_kernel::host;
  const KvIndicesParams p = check_kv_indices<kDLCUDA>(req_to_token, req_pool_indices, page_kernel_lens, kv_indptr,
                                                      kv_start_idx, kv_indices);
  if (p.batch == 0) return;
  RuntimeCheck(p.batch <= 0x7fffffff, "batch ", p.batch, " is too large");
  // Chunks enough for the longest run a request can have (the table's width); the blocks past
  // a request's length return at once.
  const std::int64_t chunks = mllm_kernel::host::max_of<std::int64_t>(1, div_ceil(p.max_context_len, kChunk));
  RuntimeCheck(chunks <= 65535, "max_context_len ", p.max_context_len, " is too large");
  LaunchKernel(dim3(static_cast<unsigned>(p.batch), static_cast<unsigned>(chunks)), kThreads, req_to_token.device())
      .enable_pdl(enable_pdl)(create_kv_indices_kernel, p);
}

}  // namespace
