// CPU gated DeltaNet (recurrence, shapes and padding rule: mllm_kernel/gdn.hpp):
//   gdn_decode(q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, out, num_threads)
//   gdn_extend(q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, cu_seqlens, out, num_threads)
// float32, float16 or bfloat16 inputs, float32 state. Every cache index and the sequence bounds
// are checked before anything is written; (sequence, value head) tasks split over the module's
// thread pool (Highway body: mllm_kernel/cpu/gdn.hpp, chosen at run time).
#include <mllm_kernel/gdn.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/gdn.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/gdn.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/cpu/types.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

namespace detail {

/// Checks the values the kernel indexes with: cache indices below the pool (negative: padding)
/// and sequences inside [0, tokens), starting at 0, never going back, ending at tokens.
inline void check_gdn_values(const host::GdnParams& p) {
  using host::RuntimeCheck;
  for (std::int64_t s = 0; s < p.num_seqs; ++s) {
    RuntimeCheck(p.cache_indices[s] < p.pool_size, "cache_indices[", s, "] = ", p.cache_indices[s],
                 " is out of range for a state pool of ", p.pool_size, " slots");
  }
  if (!p.cu_seqlens) return;
  RuntimeCheck(p.cu_seqlens[0] == 0, "cu_seqlens must start at 0, got ", p.cu_seqlens[0]);
  for (std::int64_t s = 1; s <= p.num_seqs; ++s) {
    RuntimeCheck(p.cu_seqlens[s] >= p.cu_seqlens[s - 1], "cu_seqlens must not decrease, got cu_seqlens[", s,
                 "] = ", p.cu_seqlens[s], " after ", p.cu_seqlens[s - 1]);
  }
  RuntimeCheck(p.cu_seqlens[p.num_seqs] == p.tokens, "cu_seqlens must end at the number of tokens (", p.tokens,
               "), got ", p.cu_seqlens[p.num_seqs]);
}

inline void run_gdn(const host::GdnParams& p, DLDataType dtype, std::int64_t num_threads) {
  check_gdn_values(p);
  const std::int64_t state_bytes = 8 * static_cast<std::int64_t>(p.head_v_dim) * p.head_k_dim;
  const std::int64_t tokens_per_seq = p.num_seqs > 0 ? p.tokens / p.num_seqs + 1 : 1;
  visit_float_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(GdnTasks<T>);
    parallel_for(p.num_seqs * p.num_v_heads, state_bytes * tokens_per_seq, num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

}  // namespace detail

/// One decode step: token s of q, k, v, a, b is sequence s.
inline void gdn_decode(mllm_kernel::TensorView q, mllm_kernel::TensorView k, mllm_kernel::TensorView v,
                       mllm_kernel::TensorView a, mllm_kernel::TensorView b, mllm_kernel::TensorView A_log,
                       mllm_kernel::TensorView dt_bias, mllm_kernel::TensorView state_pool,
                       mllm_kernel::TensorView cache_indices, mllm_kernel::TensorView out, std::int64_t num_threads) {
  DLDataType dtype;
  DLDevice device;
  const host::GdnParams p = host::check_gdn<kDLCPU, float, fp16_t, bf16_t>(
      q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, nullptr, out, dtype, device);
  detail::run_gdn(p, dtype, num_threads);
}

/// The sequences of cu_seqlens, each from and back to its pool state.
inline void gdn_extend(mllm_kernel::TensorView q, mllm_kernel::TensorView k, mllm_kernel::TensorView v,
                       mllm_kernel::TensorView a, mllm_kernel::TensorView b, mllm_kernel::TensorView A_log,
                       mllm_kernel::TensorView dt_bias, mllm_kernel::TensorView state_pool,
                       mllm_kernel::TensorView cache_indices, mllm_kernel::TensorView cu_seqlens, mllm_kernel::TensorView out,
                       std::int64_t num_threads) {
  DLDataType dtype;
  DLDevice device;
  const host::GdnParams p = host::check_gdn<kDLCPU, float, fp16_t, bf16_t>(
      q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, &cu_seqlens, out, dtype, device);
  detail::run_gdn(p, dtype, num_threads);
}

}  // namespace mllm_kernel::cpu
