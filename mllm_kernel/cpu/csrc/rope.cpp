// CPU rotary position embedding (apply_rope) for float32, float16 and bfloat16 q/k, in place,
// NeoX or GPT-J layout, partial rotary; Highway SIMD chosen at run time, tokens split over the
// module's thread pool. Body: mllm_kernel/cpu/rope.hpp.
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <tvm/ffi/container/tensor.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/rope.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/float_dtype.hpp>
#include <mllm_kernel/cpu/rope.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>

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
inline void apply_rope(tvm::ffi::TensorView positions, tvm::ffi::TensorView q, tvm::ffi::TensorView k,
                       tvm::ffi::TensorView cos_sin_cache, bool is_neox, std::int64_t num_threads) {
  using namespace host;
  SymbolicSize T{"num_tokens"}, Hq{"num_q_heads"}, Hk{"num_k_heads"}, D{"head_dim"};
  SymbolicSize Sq{"q_token_stride"}, Shq{"q_head_stride"}, Sk{"k_token_stride"}, Shk{"k_head_stride"};
  SymbolicSize P{"max_position"}, R{"rotary_dim"};
  SymbolicDType dtype, index_dtype;
  SymbolicDevice device;
  (void)TensorMatcher({T, Hq, D})
      .with_strides({Sq, Shq, 1})
      .with_dtype<float, fp16_t, bf16_t>(dtype)
      .with_device<kDLCPU>(device)
      .verify(q, "q");
  (void)TensorMatcher({T, Hk, D}).with_strides({Sk, Shk, 1}).with_dtype(dtype).with_device(device).verify(k, "k");
  (void)TensorMatcher({T})
      .with_dtype<std::int32_t, std::int64_t>(index_dtype)
      .with_device(device)
      .verify(positions, "positions");
  (void)TensorMatcher({P, R}).with_dtype<float>().with_device(device).verify(cos_sin_cache, "cos_sin_cache");
  RuntimeCheck(T.unwrap() > 0 && Hq.unwrap() > 0 && Hk.unwrap() > 0 && D.unwrap() > 0, "q and k must not be empty");
  RuntimeCheck(R.unwrap() > 0 && R.unwrap() % 2 == 0 && R.unwrap() <= D.unwrap(),
               "cos_sin_cache: rotary_dim (dim 1) must be even and in [2, head_dim = ", D.unwrap(), "], got ",
               R.unwrap());
  const bool int64_positions = index_dtype.is_type<std::int64_t>();
  if (int64_positions) {
    detail::check_positions(static_cast<const std::int64_t*>(positions.data_ptr()), T.unwrap(), P.unwrap());
  } else {
    detail::check_positions(static_cast<const std::int32_t*>(positions.data_ptr()), T.unwrap(), P.unwrap());
  }

  const RopeParams p{{q.data_ptr(), Sq.unwrap(), Shq.unwrap(), Hq.unwrap()},
                     {k.data_ptr(), Sk.unwrap(), Shk.unwrap(), Hk.unwrap()},
                     positions.data_ptr(),
                     int64_positions,
                     static_cast<const float*>(cos_sin_cache.data_ptr()),
                     R.unwrap(),
                     is_neox};
  visit_float_dtype(dtype.unwrap(), [&](auto tag) {
    using Elem = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(RopeTokens<Elem>);
    const std::int64_t bytes = (Hq.unwrap() + Hk.unwrap()) * R.unwrap() * 2 * static_cast<std::int64_t>(sizeof(Elem));
    parallel_for(T.unwrap(), bytes, num_threads, [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

}  // namespace mllm_kernel::cpu
