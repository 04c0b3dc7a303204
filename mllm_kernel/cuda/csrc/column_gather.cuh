// CUDA gather of a matrix's columns, out[m, j] = a[m, index[j]] (GPTQ act-order: the activations'
// columns in the order the repacked weight's rows were permuted), one module per 16-bit element
// type T (fp16_t, bf16_t):
//   column_gather<T>(a, index, out, enable_pdl)
// a [M, K] with 16-byte aligned rows (a row stride that is a multiple of 8), index int32 [K]
// (16-byte aligned; values out of [0, K) read the nearest column in range), out [M, K]
// contiguous; K a multiple of 8, at most what a block's shared memory holds. A block takes a row
// and a chunk of its output: the row comes into shared memory in 16-byte loads and its chunk
// leaves in index order in 16-byte stores, both coalesced, where gathering from global memory
// reads a 32-byte sector for each element. Few rows (decoding) split each row's output in
// chunks of one vector a thread, so that a thread's index loads are not a chain of round trips.
#pragma once

#include <mllm_kernel/runtime.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int kGatherThreads = 256;
constexpr int kGatherVec = 8;  // 16-bit elements in 16 bytes

template <typename T>
__global__ void __launch_bounds__(kGatherThreads)
    column_gather_kernel(const T* __restrict__ a, std::int64_t lda, const std::int32_t* __restrict__ index,
                         T* __restrict__ out, int k) {
  static_assert(sizeof(T) * kGatherVec == 16);
  extern __shared__ int4 row_vecs[];
  mllm_kernel::device::pdl_wait_and_release();  // reads nothing before the previous kernel is done
  const int vecs = k / kGatherVec;
  const int4* src = reinterpret_cast<const int4*>(a + static_cast<std::int64_t>(blockIdx.x) * lda);
  for (int v = threadIdx.x; v < vecs; v += kGatherThreads) row_vecs[v] = src[v];
  __syncthreads();
  const T* row = reinterpret_cast<const T*>(row_vecs);
  int4* dst = reinterpret_cast<int4*>(out + static_cast<std::int64_t>(blockIdx.x) * k);
  const int4* idx = reinterpret_cast<const int4*>(index);
  // The chunk: vectors blockIdx.y, blockIdx.y + gridDim.y, ... of kGatherThreads each.
  const int stride = kGatherThreads * static_cast<int>(gridDim.y);
  for (int v = static_cast<int>(blockIdx.y) * kGatherThreads + threadIdx.x; v < vecs; v += stride) {
    const int4 lo = __ldg(idx + 2 * v), hi = __ldg(idx + 2 * v + 1);
    const int from[kGatherVec] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    alignas(16) T values[kGatherVec];
#pragma unroll
    for (int e = 0; e < kGatherVec; ++e) values[e] = row[min(max(from[e], 0), k - 1)];
    dst[v] = *reinterpret_cast<const int4*>(values);
  }
}

/// enable_pdl: launch with programmatic dependent launch where the GPU has it (docs/pdl.md).
template <typename T>
void column_gather(mllm_kernel::TensorView a, mllm_kernel::TensorView index, mllm_kernel::TensorView out,
                   bool enable_pdl) {
  using namespace mllm_kernel::host;
  SymbolicSize M{"M"}, K{"K"}, lda{"a row stride"};
  SymbolicDevice device;
  (void)TensorMatcher({M, K}).with_strides({lda, 1}).template with_dtype<T>().template with_device<kDLCUDA>(device).verify(
      a, "a");
  (void)TensorMatcher({K}).with_dtype<std::int32_t>().template with_device<kDLCUDA>(device).verify(index, "index");
  (void)TensorMatcher({M, K}).template with_dtype<T>().template with_device<kDLCUDA>(device).verify(out, "out");
  const std::int64_t m = M.unwrap(), k = K.unwrap();
  RuntimeCheck(k % kGatherVec == 0, "K must be a multiple of ", kGatherVec, ", got ", k);
  RuntimeCheck(lda.unwrap() % kGatherVec == 0 && reinterpret_cast<std::uintptr_t>(a.data_ptr()) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(index.data_ptr()) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(out.data_ptr()) % 16 == 0,
               "a's rows, index and out must start 16-byte aligned (a's row stride a multiple of ", kGatherVec,
               "), got a row stride of ", lda.unwrap());
  if (m == 0 || k == 0) return;
  const DLDevice dl = device.unwrap();
  const std::size_t smem = static_cast<std::size_t>(k) * sizeof(T);
  RuntimeCheck(static_cast<std::int64_t>(smem) <= runtime::get_available_dynamic_smem_per_block(dl.device_id),
               "K = ", k, " does not fit a block's shared memory");
  RuntimeCheck(m <= 0x7fffffff, "M = ", m, " is too large");
  // Chunks a row: enough blocks for two an SM, at most one vector a thread.
  const std::int64_t vec_chunks = div_ceil(k / kGatherVec, kGatherThreads);
  const std::int64_t chunks = std::max<std::int64_t>(1, std::min(vec_chunks, div_ceil(2 * runtime::get_sm_count(dl.device_id), m)));
  LaunchKernel(dim3(static_cast<unsigned>(m), static_cast<unsigned>(chunks)), kGatherThreads, dl, smem)
      .enable_pdl(enable_pdl)(column_gather_kernel<T>, static_cast<const T*>(a.data_ptr()), lda.unwrap(),
                              static_cast<const std::int32_t*>(index.data_ptr()), static_cast<T*>(out.data_ptr()),
                              static_cast<int>(k));
}

}  // namespace
