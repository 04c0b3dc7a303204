// CPU create_kv_indices (arguments: kv_indices.hpp): checks every request against its buffers,
// then copies each request's run of indices (memcpy), requests split over the module's thread
// pool.
#include <mllm_kernel/kv_indices.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#include <mllm_kernel/cpu/thread_pool.hpp>

#include <cstdint>
#include <cstring>

namespace mllm_kernel::cpu {

inline void create_kv_indices(mllm_kernel::TensorView req_to_token, mllm_kernel::TensorView req_pool_indices,
                              mllm_kernel::TensorView page_kernel_lens, mllm_kernel::TensorView kv_indptr,
                              mllm_kernel::TensorView kv_start_idx, mllm_kernel::TensorView kv_indices,
                              std::int64_t num_threads) {
  using namespace host;
  const KvIndicesParams p = check_kv_indices<kDLCPU>(req_to_token, req_pool_indices, page_kernel_lens, kv_indptr,
                                                     kv_start_idx, kv_indices);
  check_kv_requests(p);  // nothing is written when a request is out of bounds
  const std::int64_t mean_bytes = p.out_size * 4 / (p.batch > 0 ? p.batch : 1);
  parallel_for(p.batch, 2 * mean_bytes, num_threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int32_t* src = p.req_to_token + p.req_pool_indices[i] * p.row_stride + (p.start ? p.start[i] : 0);
      std::memcpy(p.out + p.indptr[i], src, static_cast<std::size_t>(p.lens[i]) * sizeof(std::int32_t));
    }
  });
}

}  // namespace mllm_kernel::cpu
