// CPU rotary position embedding (apply_rope) for float32, float16 and bfloat16 q/k, in place,
// NeoX or GPT-J layout, partial rotary; Highway SIMD chosen at run time, tokens split over the
// module's thread pool. Body: mllm_kernel/cpu/rope.hpp.
#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/rope.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/rope.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/cpu/types.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

namespace detail {

/// Every position must index a row of the cache: a ValueError names the first one that does not.
template <typename Index>
void check_positions(const Index* positions, std::int64_t count, std::int64_t max_pos) {
  for (std::int64_t i = 0; i < count; ++i) {
    host::RuntimeCheck(positions[i] >= 0 && positions[i] < max_pos, "positions[", i, "] = ",
                       static_cast<std::int64_t>(positions[i]), " is out of range for cos_sin_cache with ",
                       max_pos, " positions");
  }
}

}  // namespace detail

/// Rotates q [T, Hq, D] and k [T, Hk, D] in place by cos_sin_cache[positions] (float32
/// [max_pos, rotary_dim], cos then sin). positions is [T] int32 or int64.
inline void apply_rope(mllm_kernel::TensorView positions, mllm_kernel::TensorView q, mllm_kernel::TensorView k,
                       mllm_kernel::TensorView cos_sin_cache, bool is_neox, std::int64_t num_threads) {
  using namespace host;
  RopeArgs a;
  a.verify<kDLCPU, float, fp16_t, bf16_t>(positions, q, k, cos_sin_cache);
  const std::int64_t T = a.tokens.unwrap(), P = a.max_position.unwrap(), R = a.rotary_dim.unwrap();
  const bool int64_positions = a.pos_dtype.is_type<std::int64_t>();
  if (int64_positions) {
    detail::check_positions(static_cast<const std::int64_t*>(positions.data_ptr()), T, P);
  } else {
    detail::check_positions(static_cast<const std::int32_t*>(positions.data_ptr()), T, P);
  }

  const RopeParams p{{q.data_ptr(), a.q_s0.unwrap(), a.q_s1.unwrap(), a.q_heads.unwrap()},
                     {k.data_ptr(), a.k_s0.unwrap(), a.k_s1.unwrap(), a.k_heads.unwrap()},
                     positions.data_ptr(),
                     int64_positions,
                     static_cast<const float*>(cos_sin_cache.data_ptr()),
                     R,
                     is_neox};
  visit_float_dtype(a.dtype.unwrap(), [&](auto tag) {
    using Elem = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(RopeTokens<Elem>);
    const std::int64_t heads = a.q_heads.unwrap() + a.k_heads.unwrap();
    const std::int64_t bytes = heads * R * 2 * static_cast<std::int64_t>(sizeof(Elem));
    parallel_for(T, bytes, num_threads, [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

}  // namespace mllm_kernel::cpu
