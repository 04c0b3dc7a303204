// Block-size sweep for the KV-cache store on bf16 [T, H, D] k and v with packed heads and
// contiguous caches (benchmarks/tuning/tune_kv.py): the library's kernel
// (cuda/csrc/kv_cache.cuh) with 16-byte units and a fixed number of threads a block, so every
// shape can be timed at 1 to 16384 tokens in one GPU run.
#pragma once

#include "../../mllm_kernel/cuda/csrc/kv_cache.cuh"

namespace {

template <int kThreads>
void run_kv_shape(tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView k_cache,
                  tvm::ffi::TensorView v_cache, tvm::ffi::TensorView slot_mapping) {
  using namespace mllm_kernel::host;
  KVStoreArgs a;
  a.verify<kDLCUDA, bf16_t>(k, v, k_cache, v_cache, slot_mapping);
  RuntimeCheck(a.index_dtype.is_type<std::int64_t>(), "slot_mapping must be int64");
  const std::int64_t tokens = a.tokens.unwrap(), head_dim = a.head_dim.unwrap();
  RuntimeCheck(a.k_s1.unwrap() == head_dim && a.v_s1.unwrap() == head_dim && head_dim % 8 == 0,
               "k and v must have packed heads of a multiple of 8 elements");
  constexpr std::int64_t elem = sizeof(bf16_t);
  const auto* slots = static_cast<const std::int64_t*>(slot_mapping.data_ptr());
  const auto p = kv_params(a, k, v, k_cache, v_cache, slots, elem);
  launch_kv<uint4, std::int64_t>(p, tokens, head_dim * elem, a.device.unwrap(), false, kThreads);
}

}  // namespace
