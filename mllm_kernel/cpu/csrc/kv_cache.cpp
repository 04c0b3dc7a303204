// CPU store_kv_cache: copies each token's k and v heads into the paged caches at its slot
// (memcpy per token), or, for a float8_e4m3fn cache of float32/float16/bfloat16 k and v,
// quantizes them with a per-tensor scale on the way (Highway body: mllm_kernel/cpu/kv_cache.hpp,
// chosen at run time). Tokens split over the module's thread pool.
#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/kv_cache.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/kv_cache.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/cpu/types.hpp>

#include <cstdint>
#include <cstring>

namespace mllm_kernel::cpu {

namespace detail {

/// Reads slot_mapping as int64 and checks every slot is negative (skip) or below num_slots.
template <typename Index>
void check_slots(const Index* slots, std::int64_t count, std::int64_t num_slots) {
  for (std::int64_t i = 0; i < count; ++i) {
    host::RuntimeCheck(slots[i] < num_slots, "slot_mapping[", i, "] = ", static_cast<std::int64_t>(slots[i]),
                       " is out of range for a cache of ", num_slots, " slots");
  }
}

/// Checks the verified slot_mapping of `a` (int32 or int64) before anything is written;
/// returns whether it is int64.
inline bool check_slot_mapping(const host::KVStoreArgs& a, mllm_kernel::TensorView slot_mapping) {
  const std::int64_t count = a.tokens.unwrap(), num_slots = a.num_slots.unwrap();
  const bool int64_slots = a.index_dtype.is_type<std::int64_t>();
  if (int64_slots) {
    check_slots(static_cast<const std::int64_t*>(slot_mapping.data_ptr()), count, num_slots);
  } else {
    check_slots(static_cast<const std::int32_t*>(slot_mapping.data_ptr()), count, num_slots);
  }
  return int64_slots;
}

/// One token's heads ([H, D], heads `head_stride` bytes apart) into a dense cache slot.
inline void copy_heads(std::uint8_t* dst, const std::uint8_t* src, std::int64_t heads, std::int64_t head_stride,
                       std::int64_t head_bytes) {
  if (head_stride == head_bytes) {
    std::memcpy(dst, src, heads * head_bytes);
    return;
  }
  for (std::int64_t h = 0; h < heads; ++h) std::memcpy(dst + h * head_bytes, src + h * head_stride, head_bytes);
}

}  // namespace detail

/// k_cache[slot_mapping[t]] = k[t] and v_cache[slot_mapping[t]] = v[t] for every token t with a
/// non-negative slot. k, v: [T, H, D] (token and head strides free); caches: [num_slots, H, D]
/// contiguous, same dtype (float32, float16, bfloat16, or uint8: store_cache views rows of any
/// dtype as bytes); slot_mapping: [T] int32 or int64.
inline void store_kv_cache(mllm_kernel::TensorView k, mllm_kernel::TensorView v, mllm_kernel::TensorView k_cache,
                           mllm_kernel::TensorView v_cache, mllm_kernel::TensorView slot_mapping, std::int64_t num_threads) {
  using namespace host;
  KVStoreArgs a;
  a.verify<kDLCPU, float, fp16_t, bf16_t, std::uint8_t>(k, v, k_cache, v_cache, slot_mapping);
  const std::int64_t T = a.tokens.unwrap();
  const bool int64_slots = detail::check_slot_mapping(a, slot_mapping);

  const std::int64_t elem = dtype_bytes(a.dtype.unwrap());
  const std::int64_t heads = a.heads.unwrap(), head_bytes = a.head_dim.unwrap() * elem, slot_bytes = heads * head_bytes;
  const auto* k_src = static_cast<const std::uint8_t*>(k.data_ptr());
  const auto* v_src = static_cast<const std::uint8_t*>(v.data_ptr());
  auto* k_dst = static_cast<std::uint8_t*>(k_cache.data_ptr());
  auto* v_dst = static_cast<std::uint8_t*>(v_cache.data_ptr());
  const void* slots = slot_mapping.data_ptr();
  const std::int64_t k_tok = a.k_s0.unwrap() * elem, k_head = a.k_s1.unwrap() * elem;
  const std::int64_t v_tok = a.v_s0.unwrap() * elem, v_head = a.v_s1.unwrap() * elem;
  parallel_for(T, 4 * slot_bytes, num_threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      const std::int64_t slot = int64_slots ? static_cast<const std::int64_t*>(slots)[t]
                                            : static_cast<const std::int32_t*>(slots)[t];
      if (slot < 0) continue;
      detail::copy_heads(k_dst + slot * slot_bytes, k_src + t * k_tok, heads, k_head, head_bytes);
      detail::copy_heads(v_dst + slot * slot_bytes, v_src + t * v_tok, heads, v_head, head_bytes);
    }
  });
}

/// k_cache[slot_mapping[t]] = fp8(k[t] / k_scale), v_cache[slot_mapping[t]] = fp8(v[t] / v_scale)
/// for every token with a non-negative slot: k, v as above in float32, float16 or bfloat16;
/// caches contiguous [num_slots, H, D] float8_e4m3fn; k_scale, v_scale float32 [1].
inline void store_kv_cache_fp8(mllm_kernel::TensorView k, mllm_kernel::TensorView v, mllm_kernel::TensorView k_cache,
                               mllm_kernel::TensorView v_cache, mllm_kernel::TensorView slot_mapping,
                               mllm_kernel::TensorView k_scale, mllm_kernel::TensorView v_scale, std::int64_t num_threads) {
  using namespace host;
  KVStoreArgs a;
  a.verify_quantized<kDLCPU, fp8_e4m3_storage, float, fp16_t, bf16_t>(k, v, k_cache, v_cache, slot_mapping, k_scale,
                                                                      v_scale);
  const std::int64_t T = a.tokens.unwrap();
  const bool int64_slots = detail::check_slot_mapping(a, slot_mapping);
  const KVQuantParams p{{k.data_ptr(), a.k_s0.unwrap(), a.k_s1.unwrap(), static_cast<std::uint8_t*>(k_cache.data_ptr()),
                         *static_cast<const float*>(k_scale.data_ptr())},
                        {v.data_ptr(), a.v_s0.unwrap(), a.v_s1.unwrap(), static_cast<std::uint8_t*>(v_cache.data_ptr()),
                         *static_cast<const float*>(v_scale.data_ptr())},
                        slot_mapping.data_ptr(),
                        int64_slots,
                        a.heads.unwrap(),
                        a.head_dim.unwrap()};
  visit_float_dtype(a.dtype.unwrap(), [&](auto tag) {
    using Elem = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(StoreKVFp8Tokens<Elem>);
    // Bytes per token: k and v read in Elem, written as one byte each.
    const std::int64_t bytes = 2 * a.heads.unwrap() * a.head_dim.unwrap() * (static_cast<std::int64_t>(sizeof(Elem)) + 1);
    parallel_for(T, bytes, num_threads, [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

}  // namespace mllm_kernel::cpu
