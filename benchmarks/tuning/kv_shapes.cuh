// Launch-shape sweep for the KV-cache store on bf16 [T, H, D] k and v with packed heads and
// contiguous caches (benchmarks/tuning/tune_kv.py), so every shape can be timed at 1 to 16384
// tokens in one GPU run:
// - run_kv_shape<kThreads>: the library's kernel (cuda/csrc/kv_cache.cuh) with 16-byte units
//   and a fixed number of threads a block;
// - run_kv_lean<kUnitBytes, kSplit>: a minimal kernel for this one layout (32-bit unit indices,
//   no head strides, no loop: a thread stores one unit of k and one of v, or with kSplit one
//   unit of either, k and v in alternate blocks; blocks sized as the library's), 16- or 8-byte
//   units: how much of the library's time is its generality.
// - run_kv_fp8_lean<kThreads, kItems>: the quantizing store into float8_e4m3fn caches for the
//   same layout, kItems 16-byte vectors of k and of v a thread (all loaded before any store),
//   kThreads threads a block, with kStream cache-streaming (evict-first) loads and stores:
//   does more memory in flight per thread, or keeping the streamed data out of L2's way, close
//   its gap at 16384 tokens?
// - run_kv_fp8_tokens<kThreads>: the lean store with kThreads / (vectors a token) whole tokens a
//   block (1024 threads: two 32 x 128 tokens), one vector of k and of v a thread;
// - run_kv_fp8_split<kThreads, kHalves>: the same store with a block for k or for v of a token,
//   one vector a thread: k and v in alternate blocks, or (kHalves) every token's k, then every
//   token's v, as two kernels of one tensor each would;
// - run_kv_fp8_persistent<kThreads, kBlocksPerSM>: the lean store as a persistent grid, each
//   block walking tokens with the next token's loads issued before the current token's stores.
#pragma once

#include "../../mllm_kernel/cuda/csrc/kv_cache.cuh"

namespace {

/// The library's checks, then the sweep's one layout: bf16, int64 slots, packed heads of a
/// multiple of 8 elements.
void verify_sweep_layout(mllm_kernel::host::KVStoreArgs& a, tvm::ffi::TensorView k, tvm::ffi::TensorView v,
                         tvm::ffi::TensorView k_cache, tvm::ffi::TensorView v_cache,
                         tvm::ffi::TensorView slot_mapping) {
  using namespace mllm_kernel::host;
  a.verify<kDLCUDA, bf16_t>(k, v, k_cache, v_cache, slot_mapping);
  check_index_range(a, sizeof(bf16_t), sizeof(bf16_t));
  RuntimeCheck(a.index_dtype.is_type<std::int64_t>(), "slot_mapping must be int64");
  const std::int64_t head_dim = a.head_dim.unwrap();
  RuntimeCheck(a.k_s1.unwrap() == head_dim && a.v_s1.unwrap() == head_dim && head_dim % 8 == 0,
               "k and v must have packed heads of a multiple of 8 elements");
}

template <int kThreads>
void run_kv_shape(tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView k_cache,
                  tvm::ffi::TensorView v_cache, tvm::ffi::TensorView slot_mapping) {
  using namespace mllm_kernel::host;
  KVStoreArgs a;
  verify_sweep_layout(a, k, v, k_cache, v_cache, slot_mapping);
  const std::int64_t tokens = a.tokens.unwrap(), head_dim = a.head_dim.unwrap();
  constexpr std::int64_t elem = sizeof(bf16_t);
  const auto* slots = static_cast<const std::int64_t*>(slot_mapping.data_ptr());
  const auto p = kv_params(a, k, v, k_cache, v_cache, slots, elem);
  launch_kv<uint4, std::int64_t>(p, tokens, head_dim * elem, a.device.unwrap(), false, kThreads);
}

struct LeanKVParams {
  const std::uint8_t* k;
  const std::uint8_t* v;
  std::uint8_t* k_cache;
  std::uint8_t* v_cache;
  const std::int64_t* slots;
  std::int64_t num_slots;
  unsigned k_token_stride, v_token_stride;  // bytes
  unsigned units;                           // units a token
};

template <typename Unit, bool kSplit>
__global__ void __launch_bounds__(kKVWideBlock) lean_kv_kernel(const __grid_constant__ LeanKVParams p) {
  using mllm_kernel::device::store_if;
  const unsigned t = kSplit ? blockIdx.x >> 1 : blockIdx.x;
  const unsigned i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= p.units) return;
  const std::int64_t slot = p.slots[t];
  const bool store = slot_stored(slot, p.num_slots);
  // slot < num_slots < 2^31 (check_index_range): one 32 x 32 -> 64-bit multiply.
  const std::uint64_t dst = wide_product(store ? static_cast<unsigned>(slot) : 0u, p.units) + i;
  if constexpr (kSplit) {
    const bool is_v = blockIdx.x & 1;
    const std::uint8_t* src = is_v ? p.v + wide_product(t, p.v_token_stride) : p.k + wide_product(t, p.k_token_stride);
    const Unit x = reinterpret_cast<const Unit*>(src)[i];
    store_if(store, reinterpret_cast<Unit*>(is_v ? p.v_cache : p.k_cache) + dst, x);
  } else {
    const Unit kx = reinterpret_cast<const Unit*>(p.k + wide_product(t, p.k_token_stride))[i];
    const Unit vx = reinterpret_cast<const Unit*>(p.v + wide_product(t, p.v_token_stride))[i];
    store_if(store, reinterpret_cast<Unit*>(p.k_cache) + dst, kx);
    store_if(store, reinterpret_cast<Unit*>(p.v_cache) + dst, vx);
  }
}

template <int kUnitBytes, bool kSplit>
void run_kv_lean(tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView k_cache,
                 tvm::ffi::TensorView v_cache, tvm::ffi::TensorView slot_mapping) {
  using namespace mllm_kernel::host;
  using Unit = std::conditional_t<kUnitBytes == 16, uint4, uint2>;
  KVStoreArgs a;
  verify_sweep_layout(a, k, v, k_cache, v_cache, slot_mapping);
  const std::int64_t tokens = a.tokens.unwrap(), heads = a.heads.unwrap(), head_dim = a.head_dim.unwrap();
  constexpr std::int64_t elem = sizeof(bf16_t);
  const auto units = static_cast<unsigned>(heads * head_dim * elem / kUnitBytes);
  const LeanKVParams p{static_cast<const std::uint8_t*>(k.data_ptr()),
                       static_cast<const std::uint8_t*>(v.data_ptr()),
                       static_cast<std::uint8_t*>(k_cache.data_ptr()),
                       static_cast<std::uint8_t*>(v_cache.data_ptr()),
                       static_cast<const std::int64_t*>(slot_mapping.data_ptr()),
                       a.num_slots.unwrap(),
                       static_cast<unsigned>(a.k_s0.unwrap() * elem),
                       static_cast<unsigned>(a.v_s0.unwrap() * elem),
                       units};
  const int threads = kv_threads(tokens, units, a.device.unwrap().device_id);
  const dim3 grid(static_cast<unsigned>(tokens * (kSplit ? 2 : 1)), static_cast<unsigned>(div_ceil(units, threads)));
  LaunchKernel(grid, threads, a.device.unwrap())(lean_kv_kernel<Unit, kSplit>, p);
}

struct LeanKVFp8Params {
  const bf16_t* k;
  const bf16_t* v;
  fp8_e4m3_t* k_cache;
  fp8_e4m3_t* v_cache;
  const float* k_scale;
  const float* v_scale;
  const std::int64_t* slots;
  std::int64_t num_slots;
  unsigned k_token_stride, v_token_stride;  // elements
  unsigned vecs;                            // 8-element vectors a token
};

/// Streaming (.cs: evict first) 16-byte load, and 8-byte store predicated like store_if.
template <typename V>
__device__ __forceinline__ V load_streaming(const V* ptr) {
  static_assert(sizeof(V) == 16);
  const uint4 raw = __ldcs(reinterpret_cast<const uint4*>(ptr));
  V v;
  __builtin_memcpy(&v, &raw, 16);
  return v;
}
template <typename V>
__device__ __forceinline__ void store_streaming_if(bool pred, V* ptr, const V& value) {
  static_assert(sizeof(V) == 8);
  uint2 raw;
  __builtin_memcpy(&raw, &value, 8);
  asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.global.cs.v2.u32 [%1], {%2, %3}; }" ::"r"(
                   static_cast<unsigned>(pred)),
               "l"(ptr), "r"(raw.x), "r"(raw.y)
               : "memory");
}

template <int kThreads, int kItems, bool kStream>
__global__ void __launch_bounds__(kThreads) lean_kv_fp8_kernel(const __grid_constant__ LeanKVFp8Params p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<bf16_t, 8>;
  using OutVec = AlignedVector<fp8_e4m3_t, 8>;
  const unsigned t = blockIdx.x;
  const unsigned first = blockIdx.y * kThreads * kItems + threadIdx.x;
  const auto* k_src = reinterpret_cast<const Vec*>(p.k + wide_product(t, p.k_token_stride));
  const auto* v_src = reinterpret_cast<const Vec*>(p.v + wide_product(t, p.v_token_stride));
  Vec kx[kItems], vx[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const unsigned i = first + j * kThreads;
    if (i < p.vecs) {
      kx[j] = kStream ? load_streaming(k_src + i) : load_issued_here(k_src + i);
      vx[j] = kStream ? load_streaming(v_src + i) : load_issued_here(v_src + i);
    }
  }
  const std::int64_t slot = load_issued_here(p.slots + t);
  const ScaleDivisor k_scale(load_issued_here(p.k_scale)), v_scale(load_issued_here(p.v_scale));
  const bool store = slot_stored(slot, p.num_slots);
  const std::uint64_t slot_offset = wide_product(store ? static_cast<unsigned>(slot) : 0u, p.vecs);
  auto* k_dst = reinterpret_cast<OutVec*>(p.k_cache) + slot_offset;
  auto* v_dst = reinterpret_cast<OutVec*>(p.v_cache) + slot_offset;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const unsigned i = first + j * kThreads;
    if (i < p.vecs) {
      if constexpr (kStream) {
        store_streaming_if(store, k_dst + i, quantize<fp8_e4m3_t>(kx[j], k_scale));
        store_streaming_if(store, v_dst + i, quantize<fp8_e4m3_t>(vx[j], v_scale));
      } else {
        store_if(store, k_dst + i, quantize<fp8_e4m3_t>(kx[j], k_scale));
        store_if(store, v_dst + i, quantize<fp8_e4m3_t>(vx[j], v_scale));
      }
    }
  }
}

/// A lean FP8 store's launch: its parameters, tokens and device.
struct LeanFp8Launch {
  LeanKVFp8Params p;
  std::int64_t tokens;
  DLDevice device;
};

/// The lean FP8 stores' launch, after the library's checks and the sweep's layout's (bf16, int64
/// slots, packed heads of a multiple of 8 elements).
LeanFp8Launch lean_fp8_launch(tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView k_cache,
                              tvm::ffi::TensorView v_cache, tvm::ffi::TensorView slot_mapping,
                              tvm::ffi::TensorView k_scale, tvm::ffi::TensorView v_scale) {
  using namespace mllm_kernel::host;
  KVStoreArgs a;
  a.verify_quantized<kDLCUDA, fp8_e4m3_t, bf16_t>(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale);
  check_index_range(a, 1, sizeof(bf16_t));
  RuntimeCheck(a.index_dtype.is_type<std::int64_t>(), "slot_mapping must be int64");
  const std::int64_t heads = a.heads.unwrap(), head_dim = a.head_dim.unwrap();
  RuntimeCheck(a.k_s1.unwrap() == head_dim && a.v_s1.unwrap() == head_dim && head_dim % 8 == 0,
               "k and v must have packed heads of a multiple of 8 elements");
  const LeanKVFp8Params p{static_cast<const bf16_t*>(k.data_ptr()),
                          static_cast<const bf16_t*>(v.data_ptr()),
                          static_cast<fp8_e4m3_t*>(k_cache.data_ptr()),
                          static_cast<fp8_e4m3_t*>(v_cache.data_ptr()),
                          static_cast<const float*>(k_scale.data_ptr()),
                          static_cast<const float*>(v_scale.data_ptr()),
                          static_cast<const std::int64_t*>(slot_mapping.data_ptr()),
                          a.num_slots.unwrap(),
                          static_cast<unsigned>(a.k_s0.unwrap()),
                          static_cast<unsigned>(a.v_s0.unwrap()),
                          static_cast<unsigned>(heads * head_dim / 8)};
  return LeanFp8Launch{p, a.tokens.unwrap(), a.device.unwrap()};
}

template <int kThreads, int kItems, bool kStream>
void run_kv_fp8_lean(tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView k_cache,
                     tvm::ffi::TensorView v_cache, tvm::ffi::TensorView slot_mapping, tvm::ffi::TensorView k_scale,
                     tvm::ffi::TensorView v_scale) {
  using namespace mllm_kernel::host;
  const LeanFp8Launch l = lean_fp8_launch(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale);
  const dim3 grid(static_cast<unsigned>(l.tokens), static_cast<unsigned>(div_ceil(l.p.vecs, kThreads * kItems)));
  LaunchKernel(grid, kThreads, l.device)(lean_kv_fp8_kernel<kThreads, kItems, kStream>, l.p);
}

template <int kThreads, bool kHalves>
__global__ void __launch_bounds__(kThreads) lean_kv_fp8_split_kernel(const __grid_constant__ LeanKVFp8Params p,
                                                                     unsigned tokens) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<bf16_t, 8>;
  using OutVec = AlignedVector<fp8_e4m3_t, 8>;
  const bool is_v = kHalves ? blockIdx.x >= tokens : (blockIdx.x & 1u);
  const unsigned t = kHalves ? blockIdx.x - (is_v ? tokens : 0u) : blockIdx.x >> 1;
  const unsigned i = blockIdx.y * kThreads + threadIdx.x;
  if (i >= p.vecs) return;
  const auto* src = reinterpret_cast<const Vec*>(is_v ? p.v + wide_product(t, p.v_token_stride)
                                                      : p.k + wide_product(t, p.k_token_stride));
  const Vec x = load_issued_here(src + i);
  const std::int64_t slot = load_issued_here(p.slots + t);
  const ScaleDivisor scale(load_issued_here(is_v ? p.v_scale : p.k_scale));
  const bool store = slot_stored(slot, p.num_slots);
  const std::uint64_t slot_offset = wide_product(store ? static_cast<unsigned>(slot) : 0u, p.vecs);
  auto* dst = reinterpret_cast<OutVec*>(is_v ? p.v_cache : p.k_cache) + slot_offset;
  store_if(store, dst + i, quantize<fp8_e4m3_t>(x, scale));
}

template <int kThreads, bool kHalves>
void run_kv_fp8_split(tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView k_cache,
                      tvm::ffi::TensorView v_cache, tvm::ffi::TensorView slot_mapping, tvm::ffi::TensorView k_scale,
                      tvm::ffi::TensorView v_scale) {
  using namespace mllm_kernel::host;
  const LeanFp8Launch l = lean_fp8_launch(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale);
  const dim3 grid(static_cast<unsigned>(2 * l.tokens), static_cast<unsigned>(div_ceil(l.p.vecs, kThreads)));
  LaunchKernel(grid, kThreads, l.device)(lean_kv_fp8_split_kernel<kThreads, kHalves>, l.p,
                                         static_cast<unsigned>(l.tokens));
}

/// Vector i of a token's k and v, quantized into the caches at `slot` (written only where
/// slot_stored; slot 0 keeps the address valid).
template <typename Vec>
__device__ __forceinline__ void put_token_fp8(const LeanKVFp8Params& p, std::int64_t slot, unsigned i, const Vec& kx,
                                              const Vec& vx, const ScaleDivisor& k_scale,
                                              const ScaleDivisor& v_scale) {
  using namespace mllm_kernel::device;
  using OutVec = AlignedVector<fp8_e4m3_t, 8>;
  const bool store = slot_stored(slot, p.num_slots);
  const std::uint64_t slot_offset = wide_product(store ? static_cast<unsigned>(slot) : 0u, p.vecs);
  store_if(store, reinterpret_cast<OutVec*>(p.k_cache) + slot_offset + i, quantize<fp8_e4m3_t>(kx, k_scale));
  store_if(store, reinterpret_cast<OutVec*>(p.v_cache) + slot_offset + i, quantize<fp8_e4m3_t>(vx, v_scale));
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads) lean_kv_fp8_tokens_kernel(const __grid_constant__ LeanKVFp8Params p,
                                                                      unsigned tokens) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<bf16_t, 8>;
  const unsigned per_block = kThreads / p.vecs;
  const unsigned t = blockIdx.x * per_block + threadIdx.x / p.vecs, i = threadIdx.x % p.vecs;
  if (t >= tokens || threadIdx.x >= per_block * p.vecs) return;
  const Vec kx = load_issued_here(reinterpret_cast<const Vec*>(p.k + wide_product(t, p.k_token_stride)) + i);
  const Vec vx = load_issued_here(reinterpret_cast<const Vec*>(p.v + wide_product(t, p.v_token_stride)) + i);
  const std::int64_t slot = load_issued_here(p.slots + t);
  const ScaleDivisor k_scale(load_issued_here(p.k_scale)), v_scale(load_issued_here(p.v_scale));
  put_token_fp8(p, slot, i, kx, vx, k_scale, v_scale);
}

template <int kThreads>
void run_kv_fp8_tokens(tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView k_cache,
                       tvm::ffi::TensorView v_cache, tvm::ffi::TensorView slot_mapping, tvm::ffi::TensorView k_scale,
                       tvm::ffi::TensorView v_scale) {
  using namespace mllm_kernel::host;
  const LeanFp8Launch l = lean_fp8_launch(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale);
  RuntimeCheck(l.p.vecs <= kThreads, "a token must fit a block");
  const std::int64_t per_block = kThreads / l.p.vecs;
  LaunchKernel(static_cast<unsigned>(div_ceil(l.tokens, per_block)), kThreads, l.device)(
      lean_kv_fp8_tokens_kernel<kThreads>, l.p, static_cast<unsigned>(l.tokens));
}

/// The lean store as a persistent grid: kBlocksPerSM blocks of one token's vectors on every SM,
/// each walking tokens blockIdx.x, + gridDim.x, ..., with the next token's k, v and slot loaded
/// before the current one is stored (two tokens in flight a thread, no block launched a token).
template <int kThreads, int kBlocksPerSM>
__global__ void __launch_bounds__(kThreads, kBlocksPerSM)
    lean_kv_fp8_persistent_kernel(const __grid_constant__ LeanKVFp8Params p, unsigned tokens) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<bf16_t, 8>;
  const unsigned i = threadIdx.x;
  unsigned t = blockIdx.x;
  const auto k_at = [&](unsigned t) {
    return load_issued_here(reinterpret_cast<const Vec*>(p.k + wide_product(t, p.k_token_stride)) + i);
  };
  const auto v_at = [&](unsigned t) {
    return load_issued_here(reinterpret_cast<const Vec*>(p.v + wide_product(t, p.v_token_stride)) + i);
  };
  Vec kx = k_at(t), vx = v_at(t);
  std::int64_t slot = load_issued_here(p.slots + t);
  const ScaleDivisor k_scale(load_issued_here(p.k_scale)), v_scale(load_issued_here(p.v_scale));
  for (;;) {
    const unsigned next = t + gridDim.x;
    const bool more = next < tokens;
    Vec kn, vn;
    std::int64_t next_slot = -1;
    if (more) {
      kn = k_at(next);
      vn = v_at(next);
      next_slot = load_issued_here(p.slots + next);
    }
    put_token_fp8(p, slot, i, kx, vx, k_scale, v_scale);
    if (!more) break;
    t = next;
    kx = kn;
    vx = vn;
    slot = next_slot;
  }
}

template <int kThreads, int kBlocksPerSM>
void run_kv_fp8_persistent(tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView k_cache,
                           tvm::ffi::TensorView v_cache, tvm::ffi::TensorView slot_mapping,
                           tvm::ffi::TensorView k_scale, tvm::ffi::TensorView v_scale) {
  using namespace mllm_kernel::host;
  const LeanFp8Launch l = lean_fp8_launch(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale);
  RuntimeCheck(l.p.vecs == kThreads, "a token must be one vector of k and of v a thread");
  const auto kernel = lean_kv_fp8_persistent_kernel<kThreads, kBlocksPerSM>;
  const std::int64_t blocks = std::min<std::int64_t>(
      l.tokens, static_cast<std::int64_t>(runtime::get_sm_count(l.device.device_id)) *
                    runtime::get_blocks_per_sm(kernel, kThreads));
  LaunchKernel(static_cast<unsigned>(blocks), kThreads, l.device)(kernel, l.p, static_cast<unsigned>(l.tokens));
}

}  // namespace
