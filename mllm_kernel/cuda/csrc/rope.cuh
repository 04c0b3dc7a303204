// CUDA rotary position embedding, in place on q[T, Hq, D] and k[T, Hk, D], one module per
// element type T (fp32_t, fp16_t, bf16_t):
//   apply_rope<T>(positions, q, k, cos_sin_cache, is_neox, enable_pdl)
// cos_sin_cache is [max_position, rotary_dim] float32 = cat(cos, sin) along the last dim;
// positions is [T] int32 or int64. The first rotary_dim features of every head rotate, the
// rest are left untouched (partial rotary).
//   NeoX layout: pairs (x[i], x[i + rotary_dim / 2]);  GPT-J layout: pairs (x[2i], x[2i + 1]);
//   both use cos[i], sin[i] for pair i:  x' = x * cos - y * sin,  y' = y * cos + x * sin.
//
// Out-of-range positions: a position outside [0, max_position) is never used to index the
// cache. That token's rotary features of q and k are overwritten with NaN instead, so the
// error shows up in the model's output rather than as a silent wrong rotation or a memory
// fault (the host cannot check positions without a device sync, which would break CUDA graphs).
//
// Work split: each thread owns a fixed chunk of kPairs rotation pairs (so it loads its cos/sin
// once) and loops over the heads of q and k of one token; a block covers one or more tokens.
#pragma once

#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/vec.cuh>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cmath>
#include <cstdint>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp32_t;

template <typename T, typename Pos>
struct RopeParams {
  T* q;
  T* k;
  const Pos* positions;
  const float* cache;
  std::int64_t tokens;
  std::int64_t max_position;
  std::int64_t q_s0, q_s1, k_s0, k_s1;
  int q_heads, k_heads;
  int rotary_dim;
  int chunks;           // chunks of kPairs pairs per head
  int heads_per_iter;   // heads one block row covers per loop step (blockDim.x / chunks)
  bool pdl;             // launched with programmatic dependent launch: run the PDL instructions
};

/// Loads n consecutive floats starting at `ptr` with the widest aligned vector (<= 16 bytes).
template <int kN>
__device__ __forceinline__ void load_floats(float (&dst)[kN], const float* ptr) {
  using namespace mllm_kernel::device;
  constexpr int kW = kN >= 4 ? 4 : kN;
#pragma unroll
  for (int i = 0; i < kN; i += kW) {
    AlignedVector<float, kW> v;
    v.load_readonly(ptr + i);
#pragma unroll
    for (int j = 0; j < kW; ++j) dst[i + j] = v[j];
  }
}

/// Rotates one chunk of one head (`x` points at the head's first feature).
/// NeoX: the chunk is kPairs consecutive x's and their partners rotary_dim / 2 further.
/// GPT-J: the chunk is 2 * kPairs consecutive features (kPairs interleaved pairs).
template <typename T, int kPairs, bool kNeox>
__device__ __forceinline__ void rotate(T* x, int chunk, int half, const float (&c)[kPairs], const float (&s)[kPairs],
                                       bool valid) {
  using namespace mllm_kernel::device;
  const float nan = __int_as_float(0x7fc00000);
  if constexpr (kNeox) {
    using Vec = AlignedVector<T, kPairs>;
    Vec a, b;
    a.load(x + chunk * kPairs);
    b.load(x + half + chunk * kPairs);
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const float xa = cast<float>(a[j]);
      const float xb = cast<float>(b[j]);
      a[j] = cast<T>(valid ? xa * c[j] - xb * s[j] : nan);
      b[j] = cast<T>(valid ? xb * c[j] + xa * s[j] : nan);
    }
    a.store(x + chunk * kPairs);
    b.store(x + half + chunk * kPairs);
  } else if constexpr (kPairs == 1) {
    // Scalar path: the pair may be only element-aligned.
    const float xa = cast<float>(x[2 * chunk]);
    const float xb = cast<float>(x[2 * chunk + 1]);
    x[2 * chunk] = cast<T>(valid ? xa * c[0] - xb * s[0] : nan);
    x[2 * chunk + 1] = cast<T>(valid ? xb * c[0] + xa * s[0] : nan);
  } else {
    using Vec = AlignedVector<T, 2 * kPairs>;
    Vec v;
    v.load(x + chunk * 2 * kPairs);
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const float xa = cast<float>(v[2 * j]);
      const float xb = cast<float>(v[2 * j + 1]);
      v[2 * j] = cast<T>(valid ? xa * c[j] - xb * s[j] : nan);
      v[2 * j + 1] = cast<T>(valid ? xb * c[j] + xa * s[j] : nan);
    }
    v.store(x + chunk * 2 * kPairs);
  }
}

/// Block (chunks * heads_per_iter, tokens_per_block): threadIdx.y picks the token, threadIdx.x
/// the chunk (x % chunks) and the first head (x / chunks).
template <typename T, typename Pos, int kPairs, bool kNeox>
__global__ void __launch_bounds__(1024) rope_kernel(const __grid_constant__ RopeParams<T, Pos> p) {
  const std::int64_t token = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (p.pdl) mllm_kernel::device::pdl_wait_and_release();
  if (token < p.tokens && static_cast<int>(threadIdx.x) < p.chunks * p.heads_per_iter) {
    const int chunk = static_cast<int>(threadIdx.x) % p.chunks;
    const int first_head = static_cast<int>(threadIdx.x) / p.chunks;
    const std::int64_t pos = static_cast<std::int64_t>(p.positions[token]);
    const bool valid = pos >= 0 && pos < p.max_position;
    const int half = p.rotary_dim / 2;
    float c[kPairs], s[kPairs];
    if (valid) {
      const float* row = p.cache + pos * p.rotary_dim + chunk * kPairs;
      load_floats<kPairs>(c, row);
      load_floats<kPairs>(s, row + half);
    } else {
#pragma unroll
      for (int j = 0; j < kPairs; ++j) c[j] = s[j] = 0.0f;
    }
    const int total_heads = p.q_heads + p.k_heads;
    for (int h = first_head; h < total_heads; h += p.heads_per_iter) {
      T* x = h < p.q_heads ? p.q + token * p.q_s0 + h * p.q_s1 : p.k + token * p.k_s0 + (h - p.q_heads) * p.k_s1;
      rotate<T, kPairs, kNeox>(x, chunk, half, c, s, valid);
    }
  }
}

/// Target threads per block; a block covers several tokens when one token has less work.
constexpr int kRopeBlockTarget = 256;

template <typename T, typename Pos, int kPairs, bool kNeox>
void launch(RopeParams<T, Pos> p, DLDevice device, bool enable_pdl) {
  using namespace mllm_kernel::host;
  p.chunks = p.rotary_dim / 2 / kPairs;
  p.pdl = enable_pdl;
  const int total_heads = p.q_heads + p.k_heads;
  const int heads_per_iter =
      mllm_kernel::host::max_of(1, mllm_kernel::host::min_of(total_heads, kRopeBlockTarget / p.chunks));
  p.heads_per_iter = heads_per_iter;
  const int x_threads = p.chunks * heads_per_iter;
  RuntimeCheck(x_threads <= 1024, "rotary_dim ", p.rotary_dim, " needs too many threads per head");
  const int tokens_per_block = mllm_kernel::host::max_of(1, kRopeBlockTarget / x_threads);
  const std::int64_t blocks = div_ceil(p.tokens, tokens_per_block);
  RuntimeCheck(blocks <= 0x7fffffff, "too many tokens: ", p.tokens);
  LaunchKernel(dim3(static_cast<unsigned>(blocks)), dim3(x_threads, tokens_per_block), device)
      .enable_pdl(enable_pdl)(rope_kernel<T, Pos, kPairs, kNeox>, p);
}

template <typename T, typename Pos, bool kNeox>
void dispatch_width(const RopeParams<T, Pos>& p, DLDevice device, bool enable_pdl) {
  using namespace mllm_kernel::host;
  constexpr int kVec = mllm_kernel::device::kVecElems<T>;
  // NeoX moves kVec features of each half per access, GPT-J kVec features (kVec / 2 pairs).
  constexpr int kPairs = kNeox ? kVec : kVec / 2;
  const int half = p.rotary_dim / 2;
  VectorizeCheck check(kVec, sizeof(T));
  check.pointer(p.q).pointer(p.k);
  check.stride(p.q_s0, p.tokens).stride(p.k_s0, p.tokens).stride(p.q_s1, p.q_heads).stride(p.k_s1, p.k_heads);
  check.length(kNeox ? half : p.rotary_dim);
  // cos/sin chunks are read as floats from offsets that are multiples of kPairs (and half).
  const int float_vec = kPairs >= 4 ? 4 : kPairs;
  VectorizeCheck cache_check(float_vec, sizeof(float));
  cache_check.pointer(p.cache).length(half).length(p.rotary_dim);
  if (check.ok() && cache_check.ok() && half % kPairs == 0) {
    launch<T, Pos, kPairs, kNeox>(p, device, enable_pdl);
  } else {
    launch<T, Pos, 1, kNeox>(p, device, enable_pdl);
  }
}

/// q[T, Hq, D], k[T, Hk, D] (any token/head strides, unit feature stride) rotated in place.
template <typename T>
void apply_rope(mllm_kernel::TensorView positions, mllm_kernel::TensorView q, mllm_kernel::TensorView k,
                mllm_kernel::TensorView cos_sin_cache, bool is_neox, bool enable_pdl) {
  using namespace mllm_kernel::host;
  RopeArgs a;
  a.verify<kDLCUDA, T>(positions, q, k, cos_sin_cache);
  const std::int64_t rot = a.rotary_dim.unwrap();
  RuntimeCheck(rot <= 2048, "cos_sin_cache: rotary_dim must be at most 2048, got ", rot);
  RuntimeCheck(a.q_heads.unwrap() + a.k_heads.unwrap() <= 0x7fffffff, "too many heads");
  const DLDevice dev = a.device.unwrap();
  auto run = [&](auto pos_tag) {
    using Pos = decltype(pos_tag);
    RopeParams<T, Pos> p{};
    p.q = static_cast<T*>(q.data_ptr());
    p.k = static_cast<T*>(k.data_ptr());
    p.positions = static_cast<const Pos*>(positions.data_ptr());
    p.cache = static_cast<const float*>(cos_sin_cache.data_ptr());
    p.tokens = a.tokens.unwrap();
    p.max_position = a.max_position.unwrap();
    p.q_s0 = a.q_s0.unwrap();
    p.q_s1 = a.q_s1.unwrap();
    p.k_s0 = a.k_s0.unwrap();
    p.k_s1 = a.k_s1.unwrap();
    p.q_heads = static_cast<int>(a.q_heads.unwrap());
    p.k_heads = static_cast<int>(a.k_heads.unwrap());
    p.rotary_dim = static_cast<int>(rot);
    if (is_neox) {
      dispatch_width<T, Pos, true>(p, dev, enable_pdl);
    } else {
      dispatch_width<T, Pos, false>(p, dev, enable_pdl);
    }
  };
  if (a.pos_dtype.is_type<std::int32_t>()) {
    run(std::int32_t{});
  } else {
    run(std::int64_t{});
  }
}

}  // namespace
