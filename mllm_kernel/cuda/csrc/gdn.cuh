// CUDA gated DeltaNet, one module per op and element type T (fp16_t, bf16_t):
//   gdn_decode<T>(q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, out, enable_pdl)
//   gdn_extend<T, kDk, kRows>(q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, cu_seqlens,
//                             out, workspace, chunked_min_tokens, enable_pdl)
// Extend has a module per head_k_dim kDk and kRows (the value rows of a head a block of the
// chunked state pass takes: 64, or 32 for few sequences) too: its three kernels are the slowest
// to compile.
// The recurrence, shapes and padding rule are in mllm_kernel/gdn.hpp.
//
// Decode streams each head's state once (read, update, write): a lane group of head_k_dim / 4
// lanes holds a state row as float4s, so every row is one coalesced 512-byte (or 256-byte)
// access; S k and S q are lane-group sums. Each warp keeps kDecodeRowsPerWarp rows in flight.
//
// Extend runs sequences of chunked_min_tokens or more through the chunked tensor-core kernels
// (mllm_kernel/impl/gdn_chunk.cuh: a prepare pass over every chunk at once, then a state pass
// over each sequence's chunks in order) and shorter ones through the recurrent kernel below,
// which has no per-chunk fixed cost. workspace is float32 [slots, num_v_heads,
// kChunkWorkFloats], slots >= chunk_slots(tokens, num_seqs), when some sequence is chunked;
// it may be empty otherwise. The recurrent kernel keeps a block's rows of the state in
// registers across all tokens of its sequence:
// four threads per row, each holding a quarter of it, so S k and S q are sums over a thread's
// own registers plus two shuffles. Tokens go kTile at a time: their raw q, k, v, a, b are loaded a
// tile ahead into registers, staged in shared memory, normalised by the warps together, and
// then run through the state with no barrier between tokens. The state is read once and
// written once per sequence.
#pragma once

#include <mllm_kernel/async_copy.cuh>
#include <mllm_kernel/gdn.hpp>
#include <mllm_kernel/impl/gdn.cuh>
#include <mllm_kernel/impl/gdn_chunk.cuh>
#include <mllm_kernel/impl/gdn_chunk_prepare.cuh>
#include <mllm_kernel/impl/gdn_chunked.cuh>
#include <mllm_kernel/runtime.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/warp.cuh>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::host::GdnParams;
using mllm_kernel::device::gdn::head_element;
using mllm_kernel::device::gdn::normalise_qk;
using mllm_kernel::device::gdn::state_row;
using mllm_kernel::device::gdn::token_gates;

// ---------------------------------------------------------------------------------------------
// Decode

// Small blocks (2 warps of 4 rows: 4 KB of a 128-wide state) spread a batch's heads over every
// SM: on an H100 they ran faster than one warp of 8 rows or 4 warps of 4, 8 or 16 from batch 1 to
// 256; streaming cache hints on the state (__ldcs/__stcs) were slower.
constexpr int kDecodeThreads = 64;
constexpr int kDecodeRowsPerWarp = 4;
constexpr int kDecodeRowsPerBlock = kDecodeThreads / 32 * kDecodeRowsPerWarp;

/// Block (row block x, value head y, sequence z): kDecodeRowsPerBlock rows of one head's state.
template <typename T, int kDk>
__global__ void __launch_bounds__(kDecodeThreads) gdn_decode_kernel(const __grid_constant__ GdnParams p, bool pdl) {
  using namespace mllm_kernel::device;
  constexpr int kLanes = kDk / 4;           // lanes per state row, a float4 each
  constexpr int kGroups = 32 / kLanes;      // rows a warp touches per step
  constexpr int kSteps = kDecodeRowsPerWarp / kGroups;
  const int s = blockIdx.z, h = blockIdx.y;
  const int hk = h / (p.num_v_heads / p.num_k_heads);
  const int lane = threadIdx.x % 32, group = lane / kLanes, e = lane % kLanes * 4;
  const int first_row = blockIdx.x * kDecodeRowsPerBlock + threadIdx.x / 32 * kDecodeRowsPerWarp + group;
  if (pdl) {
    // The block's state rows are asked of L2 while the previous kernel finishes (docs/pdl.md): a
    // hint, whatever that kernel writes. Its index is read past L1 (so the read after the wait
    // cannot meet a stale line) and only picks the rows to ask for; one lane a 128-byte line.
    const std::int64_t hint = __ldcg(p.cache_indices + s);
    if (hint >= 0 && hint < p.pool_size && e % 32 == 0) {
#pragma unroll
      for (int j = 0; j < kSteps; ++j) {
        const int row = first_row + j * kGroups;
        if (row < p.head_v_dim) prefetch_l2(state_row(p, hint, h, row) + e);
      }
    }
    pdl_wait_and_release();
  }
  // A negative index (padding) or one past the pool (refused by the wrapper's validation) is
  // neither read nor written.
  const std::int64_t index = p.cache_indices[s];
  const bool stateful = index >= 0 && index < p.pool_size;

  // The state rows first: they are the bytes that matter.
  float4 rows[kSteps];
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const int row = first_row + j * kGroups;
    rows[j] = stateful && row < p.head_v_dim ? *reinterpret_cast<const float4*>(state_row(p, index, h, row) + e)
                                               : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float v[kSteps];
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const int row = first_row + j * kGroups;
    v[j] = row < p.head_v_dim ? head_element<T>(p.v, p.v_s0, p.v_s1, s, h, row) : 0.0f;
  }
  float k[4], q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    k[i] = head_element<T>(p.k, p.k_s0, p.k_s1, s, hk, e + i);
    q[i] = head_element<T>(p.q, p.q_s0, p.q_s1, s, hk, e + i);
  }
  float decay, beta;
  token_gates<T>(p, s, h, decay, beta);

  const float kq = normalise_qk<kLanes>(k, q, p.scale);

  T* out = static_cast<T*>(p.out) + (static_cast<std::int64_t>(s) * p.num_v_heads + h) * p.head_v_dim;
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const int row = first_row + j * kGroups;
    float* r = &rows[j].x;
    float sk = 0.f, sq = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sk = fmaf(r[i], k[i], sk);
      sq = fmaf(r[i], q[i], sq);
    }
    sk = warp::reduce_sum<kLanes>(sk);
    sq = warp::reduce_sum<kLanes>(sq);
    // S' = decay S + delta k^T with delta = beta (v - decay S k); o = S' q.
    const float delta = beta * (v[j] - decay * sk);
#pragma unroll
    for (int i = 0; i < 4; ++i) r[i] = fmaf(decay, r[i], delta * k[i]);
    if (row < p.head_v_dim) {
      if (stateful) *reinterpret_cast<float4*>(state_row(p, index, h, row) + e) = rows[j];
      if (e == 0) out[row] = cast<T>(fmaf(decay, sq, delta * kq));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Extend

constexpr int kExtendThreads = 128;
/// Threads sharing a state row. Each token is a chain of dependent steps (S k, the shuffles,
/// the update) that few warps an SM cannot hide, so a quarter row a thread: short chains, about
/// 170 registers (12 warps an SM), and one sequence's 32 heads spread over 128 blocks.
constexpr int kRowThreads = 4;
constexpr int kExtendRowsPerBlock = kExtendThreads / kRowThreads;
/// Tokens staged, normalised and then run through the state together: two barriers a tile.
constexpr int kTile = 8;

/// A block's shared memory: the tile's raw k and q (float), their normalised values (each
/// quarter of a row padded by 4 floats, so the four row threads of a warp read different
/// banks), the gates and k.q of each token.
template <int kDk>
struct alignas(16) ExtendTile {
  float k[kTile][kDk + 4 * kRowThreads];
  float q[kTile][kDk + 4 * kRowThreads];
  float raw[kTile][2][kDk];
  float raw_a[kTile], raw_b[kTile];
  float decay[kTile], beta[kTile], kq[kTile];
};

/// Index in ExtendTile::k / q rows of element e.
template <int kDk>
__device__ __forceinline__ int padded(int e) {
  return e + e / (kDk / kRowThreads) * 4;
}

/// Normalises token j of the tile (one warp): k / (||k|| + eps), q likewise times the scale,
/// k.q, and the gates.
template <int kDk>
__device__ __forceinline__ void normalise_token(const GdnParams& p, ExtendTile<kDk>& tile, int j, int h, int lane) {
  constexpr int kPer = kDk / 32;
  float k[kPer], q[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    k[i] = tile.raw[j][0][lane * kPer + i];
    q[i] = tile.raw[j][1][lane * kPer + i];
  }
  const float kq = normalise_qk<32>(k, q, p.scale);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    tile.k[j][padded<kDk>(lane * kPer + i)] = k[i];
    tile.q[j][padded<kDk>(lane * kPer + i)] = q[i];
  }
  if (lane == 0) {
    mllm_kernel::host::gdn_gates(tile.raw_a[j], tile.raw_b[j], p.A_log[h], p.dt_bias[h], tile.decay[j], tile.beta[j]);
    tile.kq[j] = kq;
  }
}

/// A thread's share of a tile's raw inputs, loaded a tile ahead into registers: kRaw elements
/// of the tile's k and q rows (consecutive threads, consecutive elements), one a or b value
/// (threads below 2 * kTile) and the v of its row for each token.
template <int kDk>
struct RawTile {
  static constexpr int kRaw = kTile * 2 * kDk / kExtendThreads;
  float kq[kRaw];
  float ab;
  float v[kTile];
};

template <typename T, int kDk>
__device__ __forceinline__ void load_tile(const GdnParams& p, RawTile<kDk>& r, std::int64_t t0, int n, int h, int hk,
                                          int row, bool valid) {
#pragma unroll
  for (int m = 0; m < RawTile<kDk>::kRaw; ++m) {
    const int e = threadIdx.x + m * kExtendThreads;
    const int j = e / (2 * kDk), which = e / kDk % 2, d = e % kDk;
    r.kq[m] = j < n ? (which ? head_element<T>(p.q, p.q_s0, p.q_s1, t0 + j, hk, d)
                             : head_element<T>(p.k, p.k_s0, p.k_s1, t0 + j, hk, d))
                    : 0.0f;
  }
  if (threadIdx.x < 2 * kTile) {
    const int j = threadIdx.x % kTile;
    const auto* ab = static_cast<const T*>(threadIdx.x < kTile ? p.a : p.b);
    const std::int64_t stride = threadIdx.x < kTile ? p.a_s0 : p.b_s0;
    r.ab = j < n ? mllm_kernel::device::cast<float>(ab[(t0 + j) * stride + h]) : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kTile; ++j) {
    r.v[j] = j < n && valid ? head_element<T>(p.v, p.v_s0, p.v_s1, t0 + j, h, row) : 0.0f;
  }
}

/// Block (row block x, value head y, sequence z): kExtendRowsPerBlock rows of one head's state,
/// kRowThreads threads a row, through every token of the sequence, kTile tokens at a time.
template <typename T, int kDk>
__global__ void __launch_bounds__(kExtendThreads) gdn_extend_kernel(const __grid_constant__ GdnParams p,
                                                                    std::int64_t max_tokens) {
  using namespace mllm_kernel::device;
  constexpr int kPart = kDk / kRowThreads;  // elements of the row this thread holds
  __shared__ ExtendTile<kDk> tile;
  pdl_wait_and_release();
  const int s = blockIdx.z, h = blockIdx.y;
  const int hk = h / (p.num_v_heads / p.num_k_heads);
  const std::int64_t bos = p.cu_seqlens[s], eos = p.cu_seqlens[s + 1];
  // Empty sequences leave their state alone; bounds the wrapper's validation refuses are skipped;
  // sequences of max_tokens or more are the chunked kernel's.
  if (bos >= eos || eos - bos >= max_tokens || bos < 0 || eos > p.tokens) return;
  const int lane = threadIdx.x % 32, warp_id = threadIdx.x / 32;
  const int row = blockIdx.x * kExtendRowsPerBlock + threadIdx.x / kRowThreads, part = threadIdx.x % kRowThreads;
  const bool valid = row < p.head_v_dim;
  const std::int64_t index = p.cache_indices[s];
  const bool stateful = valid && index >= 0 && index < p.pool_size;

  // This thread's part of a row of the state, in registers for the whole sequence.
  float state[kPart];
  float* global_row = stateful ? state_row(p, index, h, row) + part * kPart : nullptr;
#pragma unroll
  for (int i = 0; i < kPart; i += 4) {
    const float4 x = global_row ? *reinterpret_cast<const float4*>(global_row + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    state[i] = x.x, state[i + 1] = x.y, state[i + 2] = x.z, state[i + 3] = x.w;
  }

  RawTile<kDk> raw;
  load_tile<T, kDk>(p, raw, bos, static_cast<int>(min(static_cast<std::int64_t>(kTile), eos - bos)), h, hk, row,
                    valid);
  T* out = static_cast<T*>(p.out);
  for (std::int64_t t0 = bos; t0 < eos; t0 += kTile) {
    const int n = static_cast<int>(min(static_cast<std::int64_t>(kTile), eos - t0));
    // The staged tile into shared memory (the previous tile's readers passed the last barrier).
#pragma unroll
    for (int m = 0; m < RawTile<kDk>::kRaw; ++m) {
      const int e = threadIdx.x + m * kExtendThreads;
      tile.raw[e / (2 * kDk)][e / kDk % 2][e % kDk] = raw.kq[m];
    }
    if (threadIdx.x < 2 * kTile) (threadIdx.x < kTile ? tile.raw_a : tile.raw_b)[threadIdx.x % kTile] = raw.ab;
    float v[kTile];
#pragma unroll
    for (int j = 0; j < kTile; ++j) v[j] = raw.v[j];
    __syncthreads();
    // The next tile's loads go out now and arrive while this one is computed.
    if (t0 + kTile < eos) {
      load_tile<T, kDk>(p, raw, t0 + kTile, static_cast<int>(min(static_cast<std::int64_t>(kTile), eos - t0 - kTile)),
                        h, hk, row, valid);
    }
    for (int j = warp_id; j < n; j += kExtendThreads / 32) normalise_token<kDk>(p, tile, j, h, lane);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      if (j >= n) break;
      const float* k = tile.k[j] + padded<kDk>(part * kPart);
      const float* q = tile.q[j] + padded<kDk>(part * kPart);
      // Four partial sums each, so the FMA chains are a quarter as long.
      float4 pk = make_float4(0.f, 0.f, 0.f, 0.f), pq = pk;
#pragma unroll
      for (int i = 0; i < kPart; i += 4) {
        const float4 k4 = *reinterpret_cast<const float4*>(k + i), q4 = *reinterpret_cast<const float4*>(q + i);
        pk.x = fmaf(state[i], k4.x, pk.x), pk.y = fmaf(state[i + 1], k4.y, pk.y);
        pk.z = fmaf(state[i + 2], k4.z, pk.z), pk.w = fmaf(state[i + 3], k4.w, pk.w);
        pq.x = fmaf(state[i], q4.x, pq.x), pq.y = fmaf(state[i + 1], q4.y, pq.y);
        pq.z = fmaf(state[i + 2], q4.z, pq.z), pq.w = fmaf(state[i + 3], q4.w, pq.w);
      }
      float sk = (pk.x + pk.y) + (pk.z + pk.w), sq = (pq.x + pq.y) + (pq.z + pq.w);
      sk = warp::reduce_sum<kRowThreads>(sk);
      sq = warp::reduce_sum<kRowThreads>(sq);
      const float decay = tile.decay[j];
      const float delta = tile.beta[j] * (v[j] - decay * sk);
#pragma unroll
      for (int i = 0; i < kPart; i += 4) {
        const float4 k4 = *reinterpret_cast<const float4*>(k + i);
        state[i] = fmaf(decay, state[i], delta * k4.x);
        state[i + 1] = fmaf(decay, state[i + 1], delta * k4.y);
        state[i + 2] = fmaf(decay, state[i + 2], delta * k4.z);
        state[i + 3] = fmaf(decay, state[i + 3], delta * k4.w);
      }
      if (valid && part == 0) {
        out[((t0 + j) * p.num_v_heads + h) * p.head_v_dim + row] = cast<T>(fmaf(decay, sq, delta * tile.kq[j]));
      }
    }
    __syncthreads();
  }
  if (global_row) {
#pragma unroll
    for (int i = 0; i < kPart; i += 4) {
      *reinterpret_cast<float4*>(global_row + i) = make_float4(state[i], state[i + 1], state[i + 2], state[i + 3]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Entry points

/// Decode's kernel for the call's head_k_dim (64 or 128, checked).
template <typename T>
void launch_decode(const GdnParams& p, DLDevice device, bool enable_pdl) {
  const dim3 grid(static_cast<unsigned>(mllm_kernel::host::div_ceil(p.head_v_dim, kDecodeRowsPerBlock)),
                  static_cast<unsigned>(p.num_v_heads), static_cast<unsigned>(p.num_seqs));
  mllm_kernel::host::LaunchKernel(grid, kDecodeThreads, device)
      .enable_pdl(enable_pdl)(p.head_k_dim == 64 ? gdn_decode_kernel<T, 64> : gdn_decode_kernel<T, 128>, p, enable_pdl);
}

template <typename T, int kDk, int kRows>
struct ExtendLaunch {
  /// Sequences of fewer than `chunked_min_tokens` tokens run through the recurrent kernel, the
  /// others through the chunked ones; a kernel with no sequence to run is not launched. A GPU
  /// without the chunked state pass's shared memory (blocks of 64 rows at head_k_dim 128 on an
  /// A100, 187 KB; any on sm_86/89 boards, 99 KB) runs every sequence through the recurrent
  /// kernel.
  static void run(const GdnParams& p, DLDevice device, bool enable_pdl, std::int64_t chunked_min_tokens, float* work) {
    using namespace mllm_kernel::device::gdn;
    if (!chunked_fits(device)) chunked_min_tokens = p.tokens + 1;
    if (chunked_min_tokens > 1) {
      const dim3 grid(static_cast<unsigned>(mllm_kernel::host::div_ceil(p.head_v_dim, kExtendRowsPerBlock)),
                      static_cast<unsigned>(p.num_v_heads), static_cast<unsigned>(p.num_seqs));
      mllm_kernel::host::LaunchKernel(grid, kExtendThreads, device)
          .enable_pdl(enable_pdl)(gdn_extend_kernel<T, kDk>, p, chunked_min_tokens);
    }
    if (chunked_min_tokens <= p.tokens) {
      const dim3 prepare(static_cast<unsigned>(chunk_slots(p.tokens, p.num_seqs)), static_cast<unsigned>(p.num_v_heads));
      mllm_kernel::host::LaunchKernel(prepare, kChunkThreads, device, sizeof(PrepareSmem<kDk>))
          .enable_pdl(enable_pdl)(gdn_chunk_prepare_kernel<T, kDk>, p, work, chunked_min_tokens);
      const dim3 grid(static_cast<unsigned>(mllm_kernel::host::div_ceil(p.head_v_dim, kRows)),
                      static_cast<unsigned>(p.num_v_heads), static_cast<unsigned>(p.num_seqs));
      mllm_kernel::host::LaunchKernel(grid, kChunkThreads, device, sizeof(ChunkSmem<kDk, kRows>))
          .enable_pdl(enable_pdl)(gdn_chunked_kernel<T, kDk, kRows>, p, static_cast<const float*>(work),
                                  chunked_min_tokens);
    }
  }

  static bool chunked_fits(DLDevice device) {
    return mllm_kernel::host::runtime::get_available_dynamic_smem_per_block(device.device_id) >=
           static_cast<int>(sizeof(mllm_kernel::device::gdn::ChunkSmem<kDk, kRows>));
  }
};

/// Grid dims y and z hold heads and sequences: both must fit 65535. The state is read as float4.
void check_grid(const GdnParams& p) {
  mllm_kernel::host::RuntimeCheck(reinterpret_cast<std::uintptr_t>(p.state) % 16 == 0,
                                  "state_pool must be 16-byte aligned");
  mllm_kernel::host::RuntimeCheck(p.num_seqs <= 65535, "at most 65535 sequences a call, got ", p.num_seqs);
  mllm_kernel::host::RuntimeCheck(p.num_v_heads <= 65535, "at most 65535 value heads, got ", p.num_v_heads);
}

/// One decode step of `bs` sequences; see the file comment and mllm_kernel/gdn.hpp.
template <typename T>
void gdn_decode(mllm_kernel::TensorView q, mllm_kernel::TensorView k, mllm_kernel::TensorView v, mllm_kernel::TensorView a,
                mllm_kernel::TensorView b, mllm_kernel::TensorView A_log, mllm_kernel::TensorView dt_bias,
                mllm_kernel::TensorView state_pool, mllm_kernel::TensorView cache_indices, mllm_kernel::TensorView out,
                bool enable_pdl) {
  DLDataType dtype;
  DLDevice device;
  const GdnParams p = mllm_kernel::host::check_gdn<kDLCUDA, T>(q, k, v, a, b, A_log, dt_bias, state_pool,
                                                               cache_indices, nullptr, out, dtype, device);
  check_grid(p);
  if (p.num_seqs == 0) return;
  launch_decode<T>(p, device, enable_pdl);
}

/// Prefill/extend of the sequences of cu_seqlens with head_k_dim kDk, kRows value rows of a head
/// a block of the chunked state pass; see the file comment and mllm_kernel/gdn.hpp.
template <typename T, int kDk, int kRows>
void gdn_extend(mllm_kernel::TensorView q, mllm_kernel::TensorView k, mllm_kernel::TensorView v, mllm_kernel::TensorView a,
                mllm_kernel::TensorView b, mllm_kernel::TensorView A_log, mllm_kernel::TensorView dt_bias,
                mllm_kernel::TensorView state_pool, mllm_kernel::TensorView cache_indices, mllm_kernel::TensorView cu_seqlens,
                mllm_kernel::TensorView out, mllm_kernel::TensorView workspace, std::int64_t chunked_min_tokens,
                bool enable_pdl) {
  using namespace mllm_kernel::host;
  DLDataType dtype;
  DLDevice device;
  const GdnParams p = check_gdn<kDLCUDA, T>(q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, &cu_seqlens, out,
                                            dtype, device);
  check_grid(p);
  RuntimeCheck(p.head_k_dim == kDk, "this gdn_extend module runs head_k_dim ", kDk, ", got ", p.head_k_dim);
  SymbolicSize W{"workspace_slots"};
  SymbolicDevice same_device;
  same_device.bind(device, "q");
  (void)TensorMatcher({W, static_cast<std::int64_t>(p.num_v_heads),
                       static_cast<std::int64_t>(mllm_kernel::device::gdn::kChunkWorkFloats)})
      .with_dtype<float>()
      .with_device<kDLCUDA>(same_device)
      .verify(workspace, "workspace");
  const bool chunked = chunked_min_tokens <= p.tokens;
  const std::int64_t slots = mllm_kernel::device::gdn::chunk_slots(p.tokens, p.num_seqs);
  RuntimeCheck(!chunked || W.unwrap() >= slots, "workspace must have at least ", slots,
               " slots for these tokens and sequences, got ", W.unwrap());
  RuntimeCheck(!chunked || slots <= 0x7fffffff, "too many tokens for one call: ", p.tokens);
  if (p.num_seqs == 0 || p.tokens == 0) return;
  ExtendLaunch<T, kDk, kRows>::run(p, device, enable_pdl, chunked_min_tokens,
                                   static_cast<float*>(workspace.data_ptr()));
}

}  // namespace
