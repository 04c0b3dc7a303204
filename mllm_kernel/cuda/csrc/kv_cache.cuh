// CUDA KV-cache store, one module for every element type:
//   store_kv_cache(k, v, k_cache, v_cache, slot_mapping, enable_pdl)
//       k_cache[slot_mapping[t]] = k[t], v_cache[slot_mapping[t]] = v[t]
//   store_kv_cache_fp8(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale, enable_pdl)
//       the same into float8_e4m3fn caches of k / k_scale and v / v_scale (quantize.cuh)
// k, v: [T, H, D] with free token and head strides (slices of a fused QKV projection need no
// copy); caches: contiguous [num_slots, H, D] of k's dtype (float32, float16, bfloat16,
// float8_e4m3fn, or uint8: store_cache views rows of any dtype as bytes), or float8_e4m3fn for the quantizing store of float32/float16/bfloat16 k;
// k_scale, v_scale: float32 [1] on the device (read by the kernel, so a CUDA graph can update
// them); slot_mapping: contiguous [T] int32 or int64. A negative slot skips its token.
//
// The kernel never writes outside the caches: a slot >= num_slots is skipped like a negative
// one. Reporting such a slot needs its value on the host (a device-to-host sync), so that check
// lives in the Python wrapper (`validate=True`), not here.
//
// The copy is dtype-blind: it moves bytes in the widest unit (16, 8, 4, 2 or 1 bytes) that the
// head size, the pointers and the strides allow. The quantizing store reads 16-byte vectors of k
// and v where those allow it, elements otherwise. A token's units are spread over blocks of up to
// 256 threads (512 for many tokens), about one unit a thread (grid: tokens x blocks per token).
#pragma once

#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/quantize.cuh>
#include <mllm_kernel/runtime.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/vec.cuh>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>
#include <type_traits>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp32_t;
using mllm_kernel::fp8_e4m3_t;
using mllm_kernel::ScaleDivisor;

/// Byte pointers and byte strides of one store.
template <typename Slot>
struct KVParams {
  const std::uint8_t* k;
  const std::uint8_t* v;
  std::uint8_t* k_cache;
  std::uint8_t* v_cache;
  const Slot* slots;
  std::int64_t num_slots;
  // Token strides and slots fit 32 bits (check_index_range): their products with the token and
  // the units a token are one 32 x 32 -> 64-bit multiply each.
  unsigned k_token_stride, v_token_stride;     // bytes
  std::int64_t k_head_stride, v_head_stride;  // bytes
  int heads;
  int head_units;     // copy units per head
  bool packed_heads;  // k's and v's heads are head_units units apart: unit i of a token is at i
  bool pdl;           // launched with programmatic dependent launch: run the PDL instructions
  unsigned tokens;    // tokens of the call (a block may hold several: blockDim.y)
};

/// Threads a block: up to kKVBlock, a token's units spread over several blocks, so that a few
/// tokens still spread over many SMs; up to kKVWideBlock (a whole 32 x 128 token of 16-byte
/// units) once the grid gives every SM kKVWideBlocksPerSM blocks: 512-thread blocks measured
/// faster than 256 on H100 for the FP8 store and the copy ([16384, 32, 128] bf16: about 1.5 us).
constexpr int kKVBlock = 256;
constexpr int kKVWideBlock = 512;
constexpr int kKVWideBlocksPerSM = 4;

/// Units i = blockIdx.y * blockDim.x + threadIdx.x (+ multiples of gridDim.y * blockDim.x) of
/// token blockIdx.x's H * D elements, of k and of v.
__device__ __forceinline__ int token_unit_begin() { return blockIdx.y * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int token_unit_step() { return gridDim.y * blockDim.x; }
/// Moves `i` to this thread's next unit of a token of `units` units; false past the last. A token
/// may hold up to 2^31 - 1 units, so i + step is compared, not computed, near the end.
__device__ __forceinline__ bool next_token_unit(int& i, int units) {
  const int step = token_unit_step();
  if (i >= units - step) return false;
  i += step;
  return true;
}

/// Item i of a token whose heads hold `per_head` items each, `head_stride` items apart (items:
/// copy units or elements). Packed heads, the usual layout (also within a fused QKV output's
/// token), need no division.
template <typename Ptr>
__device__ __forceinline__ Ptr head_element(Ptr token, std::int64_t head_stride, int per_head, bool packed, int i) {
  if (packed) return token + i;
  const int h = i / per_head;
  return token + h * head_stride + (i - h * per_head);
}

/// Item i of a token's k and of its v, both loads issued here; with packed heads (the usual
/// layout) before any head arithmetic: a block's time before its loads is time its SM has fewer
/// bytes in flight (FP8 store on the H100: about 1 us of 138 at [16384, 32, 128]).
template <typename U>
__device__ __forceinline__ void load_token_items(U& kx, U& vx, const U* k_token, const U* v_token,
                                                 std::int64_t k_head_stride, std::int64_t v_head_stride, int per_head,
                                                 bool packed, int i) {
  using mllm_kernel::device::load_issued_here;
  if (packed) {
    kx = load_issued_here(k_token + i);
    vx = load_issued_here(v_token + i);
  } else {
    kx = load_issued_here(head_element(k_token, k_head_stride, per_head, false, i));
    vx = load_issued_here(head_element(v_token, v_head_stride, per_head, false, i));
  }
}

/// Whether a token's slot is written: negative slots are skipped by design, slots past the end
/// to stay in bounds.
template <typename Slot>
__device__ __forceinline__ bool slot_stored(Slot slot, std::int64_t num_slots) {
  return slot >= 0 && static_cast<std::int64_t>(slot) < num_slots;
}

/// a * b for 32-bit factors (token x token stride, slot x units a token): one wide multiply.
__device__ __forceinline__ std::uint64_t wide_product(unsigned a, unsigned b) {
  return static_cast<std::uint64_t>(a) * b;
}

/// Token blockIdx.x, units from token_unit_begin(). The stores are predicated on the slot, not
/// branched on (store_if), so the loads of k and v are issued with the slot's and the three share
/// one round trip to memory; behind a branch on the slot the compiler sank them past its wait.
/// The first loads go out before any head arithmetic (load_token_items).
template <typename Unit, typename Slot>
__global__ void __launch_bounds__(kKVWideBlock) store_kv_cache_kernel(const __grid_constant__ KVParams<Slot> p) {
  using namespace mllm_kernel::device;
  if (p.pdl) pdl_wait_and_release();
  // Tokens of few units share a block (blockDim.y tokens of blockDim.x threads each).
  const unsigned t = blockIdx.x * blockDim.y + threadIdx.y;
  const int units = p.heads * p.head_units;
  int i = token_unit_begin();
  if (i >= units || t >= p.tokens) return;
  // Unit-typed views of the token's k and v, and the head stride in units.
  const auto* k_src = reinterpret_cast<const Unit*>(p.k + wide_product(t, p.k_token_stride));
  const auto* v_src = reinterpret_cast<const Unit*>(p.v + wide_product(t, p.v_token_stride));
  const std::int64_t k_head = p.k_head_stride / static_cast<std::int64_t>(sizeof(Unit));
  const std::int64_t v_head = p.v_head_stride / static_cast<std::int64_t>(sizeof(Unit));
  const Slot slot = load_issued_here(p.slots + t);
  Unit kx, vx;
  load_token_items(kx, vx, k_src, v_src, k_head, v_head, p.head_units, p.packed_heads, i);
  const bool store = slot_stored(slot, p.num_slots);
  const std::uint64_t slot_offset = wide_product(store ? static_cast<unsigned>(slot) : 0u, units);  // a valid address
  Unit* k_dst = reinterpret_cast<Unit*>(p.k_cache) + slot_offset;
  Unit* v_dst = reinterpret_cast<Unit*>(p.v_cache) + slot_offset;
  while (true) {
    store_if(store, k_dst + i, kx);
    store_if(store, v_dst + i, vx);
    if (!next_token_unit(i, units)) break;
    kx = *head_element(k_src, k_head, p.head_units, p.packed_heads, i);
    vx = *head_element(v_src, v_head, p.head_units, p.packed_heads, i);
  }
}

/// A token's `units` spread over grid.y blocks of `threads` so that each thread has about one
/// unit: no thread waits on a second round trip to memory.
inline dim3 kv_grid(std::int64_t tokens, std::int64_t units, int threads) {
  using mllm_kernel::host::div_ceil;
  return dim3(static_cast<unsigned>(tokens),
              static_cast<unsigned>(mllm_kernel::host::min_of<std::int64_t>(div_ceil(units, threads), 65535)));
}

/// Threads a block for `tokens` tokens of `units` units on `device_id` (kKVBlock, or
/// kKVWideBlock for many tokens; fewer where a token has fewer units).
inline int kv_threads(std::int64_t tokens, std::int64_t units, int device_id) {
  using namespace mllm_kernel::host;
  const bool wide = tokens >= static_cast<std::int64_t>(kKVWideBlocksPerSM) * runtime::get_sm_count(device_id);
  return static_cast<int>(
      mllm_kernel::host::min_of<std::int64_t>(wide ? kKVWideBlock : kKVBlock, div_ceil(units, 32) * 32));
}

/// The parameters of a plain store of verified arguments `a` (k's element size `elem` bytes)
/// with slots `slots`; head_units, packed_heads and pdl are filled by launch_kv.
template <typename Slot>
KVParams<Slot> kv_params(const mllm_kernel::host::KVStoreArgs& a, mllm_kernel::TensorView k, mllm_kernel::TensorView v,
                         mllm_kernel::TensorView k_cache, mllm_kernel::TensorView v_cache, const Slot* slots,
                         std::int64_t elem) {
  return KVParams<Slot>{static_cast<const std::uint8_t*>(k.data_ptr()),
                        static_cast<const std::uint8_t*>(v.data_ptr()),
                        static_cast<std::uint8_t*>(k_cache.data_ptr()),
                        static_cast<std::uint8_t*>(v_cache.data_ptr()),
                        slots,
                        a.num_slots.unwrap(),
                        static_cast<unsigned>(a.k_s0.unwrap() * elem),
                        static_cast<unsigned>(a.v_s0.unwrap() * elem),
                        a.k_s1.unwrap() * elem,
                        a.v_s1.unwrap() * elem,
                        static_cast<int>(a.heads.unwrap()),
                        0,
                        false,
                        false,
                        0};
}

/// `threads`: threads a block (a multiple of 32, at most kKVWideBlock), or 0 for kv_threads().
template <typename Unit, typename Slot>
void launch_kv(KVParams<Slot> p, std::int64_t tokens, std::int64_t head_bytes, DLDevice device, bool enable_pdl,
               int threads = 0) {
  using namespace mllm_kernel::host;
  p.head_units = static_cast<int>(head_bytes / static_cast<std::int64_t>(sizeof(Unit)));
  p.packed_heads = p.heads == 1 || (p.k_head_stride == head_bytes && p.v_head_stride == head_bytes);
  p.pdl = enable_pdl;
  p.tokens = static_cast<unsigned>(tokens);
  const std::int64_t units = static_cast<std::int64_t>(p.heads) * p.head_units;
  if (threads == 0) threads = kv_threads(tokens, units, device.device_id);
  // Tokens of at most half a block of units go several to a block of kKVBlock threads: blocks
  // of 32 or 64 threads cap an SM at a quarter of its threads or less, and with PDL the next
  // kernel's waiting blocks take slots too (16384 tokens of 512 bytes on the H100: 21.7 us
  // with PDL, 14.7 without, vs 14.5 for torch.compile).
  const int tokens_per_block = units * 2 <= kKVBlock ? kKVBlock / threads : 1;
  dim3 grid = kv_grid(mllm_kernel::host::div_ceil(tokens, tokens_per_block), units, threads);
  LaunchKernel(grid, dim3(static_cast<unsigned>(threads), static_cast<unsigned>(tokens_per_block)), device)
      .enable_pdl(enable_pdl)(store_kv_cache_kernel<Unit, Slot>, p);
}

/// The widest copy unit every pointer, byte stride and the head size allow.
template <typename Slot>
void dispatch_unit(const KVParams<Slot>& p, std::int64_t tokens, std::int64_t heads, std::int64_t head_bytes,
                   DLDevice device, bool enable_pdl) {
  const auto fits = [&](std::int64_t bytes) {
    using mllm_kernel::device::is_aligned;
    const auto stride_ok = [&](std::int64_t stride, std::int64_t extent) { return extent <= 1 || stride % bytes == 0; };
    return head_bytes % bytes == 0 && is_aligned(p.k, bytes) && is_aligned(p.v, bytes) &&
           is_aligned(p.k_cache, bytes) && is_aligned(p.v_cache, bytes) && stride_ok(p.k_token_stride, tokens) &&
           stride_ok(p.v_token_stride, tokens) && stride_ok(p.k_head_stride, heads) &&
           stride_ok(p.v_head_stride, heads);
  };
  if (fits(16)) return launch_kv<uint4, Slot>(p, tokens, head_bytes, device, enable_pdl);
  if (fits(8)) return launch_kv<uint2, Slot>(p, tokens, head_bytes, device, enable_pdl);
  if (fits(4)) return launch_kv<std::uint32_t, Slot>(p, tokens, head_bytes, device, enable_pdl);
  if (fits(2)) return launch_kv<std::uint16_t, Slot>(p, tokens, head_bytes, device, enable_pdl);
  launch_kv<std::uint8_t, Slot>(p, tokens, head_bytes, device, enable_pdl);
}

/// Both stores index tokens by block, a token's bytes of cache by int, and multiply the token by
/// the token strides and the slot by a token's units in 32-bit factors: all must fit 31 bits.
/// `elem_bytes`: bytes per element of the cache, `src_elem_bytes` of k and v.
void check_index_range(const mllm_kernel::host::KVStoreArgs& a, std::int64_t elem_bytes, std::int64_t src_elem_bytes) {
  using mllm_kernel::host::RuntimeCheck;
  const std::int64_t tokens = a.tokens.unwrap(), heads = a.heads.unwrap(), head_dim = a.head_dim.unwrap();
  constexpr std::int64_t kMax = 0x7fffffff;
  RuntimeCheck(tokens <= kMax, "too many tokens: ", tokens);
  RuntimeCheck(heads * head_dim * elem_bytes <= kMax, "a token's k ([", heads, ", ", head_dim, "]) is too large");
  RuntimeCheck(a.num_slots.unwrap() <= kMax, "too many cache slots: ", a.num_slots.unwrap());
  RuntimeCheck(a.k_s0.unwrap() * src_elem_bytes <= kMax && a.v_s0.unwrap() * src_elem_bytes <= kMax,
               "k and v token strides must be below 2^31 bytes, got ", a.k_s0.unwrap(), " and ", a.v_s0.unwrap(),
               " elements");
}

/// The quantizing store: element strides of k and v, the caches, the scales on the device.
template <typename T, typename Slot>
struct KVQuantParams {
  const T* k;
  const T* v;
  fp8_e4m3_t* k_cache;
  fp8_e4m3_t* v_cache;
  const float* k_scale;
  const float* v_scale;
  const Slot* slots;
  std::int64_t num_slots;
  unsigned k_token_stride, v_token_stride;     // elements; 32 bits as in KVParams
  std::int64_t k_head_stride, v_head_stride;  // elements
  int heads;
  int head_vecs;      // vectors of kVec elements per head
  bool packed_heads;  // k's and v's heads are head_vecs vectors apart: vector i of a token is at i
  bool pdl;           // launched with programmatic dependent launch: run the PDL instructions
};

/// Token blockIdx.x, vectors from token_unit_begin() of the token's H * D elements, of k and v.
/// As in the plain store, the stores are predicated on the slot and the first loads go out before
/// any head arithmetic (load_token_items); every load is issued before the scales' reciprocals,
/// whose slow paths are branches that loads sank past.
template <typename T, int kVec, typename Slot>
__global__ void __launch_bounds__(kKVWideBlock)
    store_kv_cache_fp8_kernel(const __grid_constant__ KVQuantParams<T, Slot> p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<T, kVec>;
  if (p.pdl) pdl_wait_and_release();
  const unsigned t = blockIdx.x;
  const int vecs = p.heads * p.head_vecs;
  int i = token_unit_begin();
  if (i >= vecs) return;
  // Vec-typed views of the token's k and v (strides are multiples of kVec), head strides in vectors.
  const auto* k_src = reinterpret_cast<const Vec*>(p.k + wide_product(t, p.k_token_stride));
  const auto* v_src = reinterpret_cast<const Vec*>(p.v + wide_product(t, p.v_token_stride));
  const std::int64_t k_head = p.k_head_stride / kVec, v_head = p.v_head_stride / kVec;
  const Slot slot = load_issued_here(p.slots + t);
  const float k_scale_value = load_issued_here(p.k_scale), v_scale_value = load_issued_here(p.v_scale);
  Vec kx, vx;
  load_token_items(kx, vx, k_src, v_src, k_head, v_head, p.head_vecs, p.packed_heads, i);
  const ScaleDivisor k_scale(k_scale_value), v_scale(v_scale_value);
  const bool store = slot_stored(slot, p.num_slots);
  // In vectors of the cache (OutVec); slot 0 keeps the address valid for a skipped token.
  const std::uint64_t slot_offset = wide_product(store ? static_cast<unsigned>(slot) : 0u, vecs);
  using OutVec = AlignedVector<fp8_e4m3_t, kVec>;
  auto* k_dst = reinterpret_cast<OutVec*>(p.k_cache) + slot_offset;
  auto* v_dst = reinterpret_cast<OutVec*>(p.v_cache) + slot_offset;
  while (true) {
    store_if(store, k_dst + i, quantize<fp8_e4m3_t>(kx, k_scale));
    store_if(store, v_dst + i, quantize<fp8_e4m3_t>(vx, v_scale));
    if (!next_token_unit(i, vecs)) break;
    kx = *head_element(k_src, k_head, p.head_vecs, p.packed_heads, i);
    vx = *head_element(v_src, v_head, p.head_vecs, p.packed_heads, i);
  }
}

template <typename T, int kVec, typename Slot>
void launch_kv_fp8(KVQuantParams<T, Slot> p, std::int64_t tokens, std::int64_t head_dim, DLDevice device,
                   bool enable_pdl) {
  using namespace mllm_kernel::host;
  p.head_vecs = static_cast<int>(head_dim / kVec);
  p.packed_heads = p.heads == 1 || (p.k_head_stride == head_dim && p.v_head_stride == head_dim);
  p.pdl = enable_pdl;
  const std::int64_t vecs = static_cast<std::int64_t>(p.heads) * p.head_vecs;
  const int threads = kv_threads(tokens, vecs, device.device_id);
  LaunchKernel(kv_grid(tokens, vecs, threads), threads, device)
      .enable_pdl(enable_pdl)(store_kv_cache_fp8_kernel<T, kVec, Slot>, p);
}

/// 16-byte loads of k and v (kVec-byte stores to the caches) where pointers, strides and the
/// head size allow them, one element at a time otherwise.
template <typename T, typename Slot>
void dispatch_fp8(const KVQuantParams<T, Slot>& p, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                  DLDevice device, bool enable_pdl) {
  using namespace mllm_kernel::host;
  constexpr int kVec = mllm_kernel::device::kVecElems<T>;
  VectorizeCheck src(kVec, sizeof(T));
  src.pointer(p.k).pointer(p.v).length(head_dim);
  src.stride(p.k_token_stride, tokens).stride(p.v_token_stride, tokens);
  src.stride(p.k_head_stride, heads).stride(p.v_head_stride, heads);
  VectorizeCheck dst(kVec, sizeof(fp8_e4m3_t));
  dst.pointer(p.k_cache).pointer(p.v_cache);
  if (src.ok() && dst.ok()) {
    launch_kv_fp8<T, kVec, Slot>(p, tokens, head_dim, device, enable_pdl);
  } else {
    launch_kv_fp8<T, 1, Slot>(p, tokens, head_dim, device, enable_pdl);
  }
}

/// k_cache[slot_mapping[t]] = k[t] and v_cache[slot_mapping[t]] = v[t] for every token t whose
/// slot is in [0, num_slots); see the file comment for the layouts.
void store_kv_cache(mllm_kernel::TensorView k, mllm_kernel::TensorView v, mllm_kernel::TensorView k_cache,
                    mllm_kernel::TensorView v_cache, mllm_kernel::TensorView slot_mapping, bool enable_pdl) {
  using namespace mllm_kernel::host;
  KVStoreArgs a;
  a.verify<kDLCUDA, fp32_t, fp16_t, bf16_t, fp8_e4m3_t, std::uint8_t>(k, v, k_cache, v_cache, slot_mapping);
  const std::int64_t tokens = a.tokens.unwrap(), heads = a.heads.unwrap();
  const std::int64_t elem = dtype_bytes(a.dtype.unwrap());
  check_index_range(a, elem, elem);
  const std::int64_t head_bytes = a.head_dim.unwrap() * elem;

  const auto fill = [&](auto* slots) {
    dispatch_unit(kv_params(a, k, v, k_cache, v_cache, slots, elem), tokens, heads, head_bytes, a.device.unwrap(),
                  enable_pdl);
  };
  if (a.index_dtype.is_type<std::int64_t>()) {
    fill(static_cast<const std::int64_t*>(slot_mapping.data_ptr()));
  } else {
    fill(static_cast<const std::int32_t*>(slot_mapping.data_ptr()));
  }
}

/// The quantizing store: k_cache[slot_mapping[t]] = fp8(k[t] / k_scale), and v likewise, for
/// every token t whose slot is in [0, num_slots); see the file comment for the layouts.
void store_kv_cache_fp8(mllm_kernel::TensorView k, mllm_kernel::TensorView v, mllm_kernel::TensorView k_cache,
                        mllm_kernel::TensorView v_cache, mllm_kernel::TensorView slot_mapping, mllm_kernel::TensorView k_scale,
                        mllm_kernel::TensorView v_scale, bool enable_pdl) {
  using namespace mllm_kernel::host;
  KVStoreArgs a;
  a.verify_quantized<kDLCUDA, fp8_e4m3_t, fp32_t, fp16_t, bf16_t>(k, v, k_cache, v_cache, slot_mapping, k_scale,
                                                                   v_scale);
  const std::int64_t tokens = a.tokens.unwrap(), heads = a.heads.unwrap(), head_dim = a.head_dim.unwrap();
  check_index_range(a, 1, dtype_bytes(a.dtype.unwrap()));
  const auto run = [&](auto elem_tag, auto* slots) {
    using T = decltype(elem_tag);
    using Slot = std::remove_const_t<std::remove_pointer_t<decltype(slots)>>;
    KVQuantParams<T, Slot> p{static_cast<const T*>(k.data_ptr()),
                             static_cast<const T*>(v.data_ptr()),
                             static_cast<fp8_e4m3_t*>(k_cache.data_ptr()),
                             static_cast<fp8_e4m3_t*>(v_cache.data_ptr()),
                             static_cast<const float*>(k_scale.data_ptr()),
                             static_cast<const float*>(v_scale.data_ptr()),
                             slots,
                             a.num_slots.unwrap(),
                             static_cast<unsigned>(a.k_s0.unwrap()),
                             static_cast<unsigned>(a.v_s0.unwrap()),
                             a.k_s1.unwrap(),
                             a.v_s1.unwrap(),
                             static_cast<int>(heads),
                             0,
                             false,
                             false};
    dispatch_fp8(p, tokens, heads, head_dim, a.device.unwrap(), enable_pdl);
  };
  const auto with_slots = [&](auto elem_tag) {
    if (a.index_dtype.is_type<std::int64_t>()) {
      run(elem_tag, static_cast<const std::int64_t*>(slot_mapping.data_ptr()));
    } else {
      run(elem_tag, static_cast<const std::int32_t*>(slot_mapping.data_ptr()));
    }
  };
  if (a.dtype.is_type<fp32_t>()) {
    with_slots(fp32_t{});
  } else if (a.dtype.is_type<fp16_t>()) {
    with_slots(fp16_t{});
  } else {
    with_slots(bf16_t{});
  }
}

}  // namespace
