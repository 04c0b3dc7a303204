// Chunked gated DeltaNet for long sequences: the delta rule in its WY (UT transform) form, a
// chunk of kChunk tokens at a time, the products on tensor cores (TF32 operands, float32
// accumulation; everything else in float32).
//
// Within a chunk, with G_t the cumulative log decay up to token t (inclusive) and D[t, s] =
// exp(G_t - G_s) for s <= t, the token-by-token recurrence from the chunk's initial state S
// (rows: value dims, columns: key dims) equals
//   A = strictly-lower(beta_t D[t, s] k_t . k_s),  T = (I + A)^-1
//   R = diag(beta) (V - diag(exp(G)) K S^T),       U = T R
//   O = diag(exp(G)) Q S^T + (lower(D) * Q K^T) U
//   S <- exp(G_last) S + U^T diag(exp(G_last - G)) K
// Every exponent is <= 0, so nothing overflows however strong the decay. A and T depend on
// the chunk's k and gates alone; only R, O and the state update touch S.
//
// A block holds kChunkRows value rows of one head's state in shared memory for the whole
// sequence and walks its chunks in order. The next chunk's raw inputs are loaded into
// registers while the current one is computed. Each product is a warp's strip of m16n8k8 MMAs
// with its operands loaded by ldmatrix: every operand is stored the way ldmatrix wants it (R,
// U and the decayed K transposed), rounded to TF32 when it is written, except S and T, which
// stay float32 and are rounded as they are loaded. The gates are applied to the products in
// registers. T is found block-wise in float32: the four 16x16 diagonal blocks by forward
// substitution (a thread a column), then the off-diagonal blocks row by row. A last partial
// chunk is padded with tokens whose k, q, v, g and beta are zero, which leave the state and the
// other tokens alone.
#pragma once

#include <mllm_kernel/gdn.hpp>
#include <mllm_kernel/impl/gdn.cuh>
#include <mllm_kernel/mma.cuh>
#include <mllm_kernel/pdl.cuh>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/warp.cuh>

#include <cstdint>

namespace mllm_kernel::device::gdn {

constexpr int kChunk = 64;          // tokens a chunk
constexpr int kChunkRows = 64;      // value rows of the state a block holds
constexpr int kChunkThreads = 256;  // eight warps
constexpr int kChunkWarps = kChunkThreads / 32;
constexpr int kBlocks = kChunk / 16;  // 16-row strips of a chunk
static_assert(kChunkRows == kChunk && kChunkWarps == 2 * kBlocks,
              "a warp a strip of K or Q in the products, a strip and half the columns afterwards");

/// A block's shared memory. Row pitches are a multiple of 32 floats plus 4, so that the eight
/// rows of an ldmatrix fall in different banks.
template <int kDk>
struct alignas(128) ChunkSmem {
  static constexpr int kLdK = kDk + 4;     // [*, kDk] arrays
  static constexpr int kLdC = kChunk + 4;  // [*, kChunk] arrays
  float s[kChunkRows][kLdK];  // the block's rows of the state (float32)
  float k[kChunk][kLdK];      // raw k; then normalised (TF32)
  union {
    float q[kChunk][kLdK];  // raw q; then normalised and scaled (TF32)
    float kt[kDk][kLdC];    // after the products: (exp(G_last - G_t) k_t)^T (TF32)
  };
  float a[kChunk][kLdC];       // A; then T (float32)
  float p[kChunk][kLdC];       // lower(D) * Q K^T (TF32)
  float vt[kChunkRows][kLdC];  // v^T; then R^T (TF32)
  float ut[kChunkRows][kLdC];  // U^T (TF32)
  float o[kChunk][kLdC];       // O (float32)
  float y[16][kLdC];           // the sums of one block row of T in the making
  float g[kChunk];             // raw a; then G, the running sum of the log decays
  float beta[kChunk];          // raw b; then beta
};

/// Row (value dim) r of the block's rows, as a row of the head's state.
MLLM_DEVICE int chunk_state_row(int r) { return static_cast<int>(blockIdx.x) * kChunkRows + r; }

/// A thread's share of a chunk's raw inputs, loaded a chunk ahead and kept as element pairs
/// (one register each): consecutive threads read consecutive pairs of k and q rows and of the
/// block's v columns; threads below 2 kChunk one a or b.
template <typename T, int kDk>
struct RawChunk {
  static constexpr int kKQ = kChunk * kDk / 2 / kChunkThreads;
  static constexpr int kV = kChunk * kChunkRows / 2 / kChunkThreads;
  packed_t<T> k[kKQ], q[kKQ], v[kV];
  float ab;
};

/// This thread's element pairs of a [kChunk, kWidth] array: column c (and c + 1) of tokens
/// t0 + m * step(), consecutive threads on consecutive pairs.
template <int kWidth>
struct PairSlot {
  static constexpr int kPairs = kWidth / 2;
  static constexpr int step() { return kChunkThreads / kPairs; }
  static MLLM_DEVICE int token() { return static_cast<int>(threadIdx.x) / kPairs; }
  static MLLM_DEVICE int column() { return static_cast<int>(threadIdx.x) % kPairs * 2; }
};

template <typename T, int kDk>
MLLM_DEVICE void load_raw(const GdnParams& p, RawChunk<T, kDk>& raw, std::int64_t t0, int n, int h, int hk) {
  using KQ = PairSlot<kDk>;
  using V = PairSlot<kChunkRows>;
  const T zero = cast<T>(0.0f);
  const int tk = KQ::token(), tv = V::token(), row = chunk_state_row(V::column());
  const T* k = static_cast<const T*>(p.k) + (t0 + tk) * p.k_s0 + hk * p.k_s1 + KQ::column();
  const T* q = static_cast<const T*>(p.q) + (t0 + tk) * p.q_s0 + hk * p.q_s1 + KQ::column();
  const T* v = static_cast<const T*>(p.v) + (t0 + tv) * p.v_s0 + h * p.v_s1 + row;
#pragma unroll
  for (int m = 0; m < RawChunk<T, kDk>::kKQ; ++m) {
    const bool real = tk + m * KQ::step() < n;
    const std::int64_t ko = m * KQ::step() * p.k_s0, qo = m * KQ::step() * p.q_s0;
    raw.k[m].x = real ? k[ko] : zero, raw.k[m].y = real ? k[ko + 1] : zero;
    raw.q[m].x = real ? q[qo] : zero, raw.q[m].y = real ? q[qo + 1] : zero;
  }
#pragma unroll
  for (int m = 0; m < RawChunk<T, kDk>::kV; ++m) {
    const bool real = tv + m * V::step() < n;
    const std::int64_t vo = m * V::step() * p.v_s0;
    raw.v[m].x = real && row < p.head_v_dim ? v[vo] : zero;
    raw.v[m].y = real && row + 1 < p.head_v_dim ? v[vo + 1] : zero;
  }
  if (threadIdx.x < 2 * kChunk) {
    const int t = threadIdx.x % kChunk;
    const bool is_a = threadIdx.x < kChunk;
    raw.ab = t < n ? cast<float>(static_cast<const T*>(is_a ? p.a : p.b)[(t0 + t) * (is_a ? p.a_s0 : p.b_s0) + h])
                   : 0.0f;
  }
}

template <typename T, int kDk>
MLLM_DEVICE void stage_raw(ChunkSmem<kDk>& sm, const RawChunk<T, kDk>& raw) {
  using KQ = PairSlot<kDk>;
  using V = PairSlot<kChunkRows>;
#pragma unroll
  for (int m = 0; m < RawChunk<T, kDk>::kKQ; ++m) {
    const int t = KQ::token() + m * KQ::step(), d = KQ::column();
    const float2 k = cast<float2>(raw.k[m]), q = cast<float2>(raw.q[m]);
    sm.k[t][d] = k.x, sm.k[t][d + 1] = k.y;
    sm.q[t][d] = q.x, sm.q[t][d + 1] = q.y;
  }
#pragma unroll
  for (int m = 0; m < RawChunk<T, kDk>::kV; ++m) {
    const int t = V::token() + m * V::step(), c = V::column();
    const float2 v = cast<float2>(raw.v[m]);
    sm.vt[c][t] = v.x, sm.vt[c + 1][t] = v.y;
  }
  if (threadIdx.x < 2 * kChunk) (threadIdx.x < kChunk ? sm.g : sm.beta)[threadIdx.x % kChunk] = raw.ab;
}

/// L2-normalises the staged k and q rows (a warp kChunk / kChunkWarps rows) and rounds them to
/// TF32; the last warp also turns a and b into the gates of the n real tokens (zero for the
/// padding) and G into their running sum, two tokens a lane.
template <int kDk>
MLLM_DEVICE void normalise_chunk(const GdnParams& p, ChunkSmem<kDk>& sm, int n, int h) {
  constexpr int kPer = kDk / 32, kRows = kChunk / kChunkWarps;
  const int lane = threadIdx.x % 32, warp_id = threadIdx.x / 32;
  for (int t = warp_id * kRows; t < (warp_id + 1) * kRows; ++t) {
    float k[kPer], q[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) k[i] = sm.k[t][lane + 32 * i], q[i] = sm.q[t][lane + 32 * i];
    (void)normalise_qk<32>(k, q, p.scale);
#pragma unroll
    for (int i = 0; i < kPer; ++i) sm.k[t][lane + 32 * i] = mma::to_tf32(k[i]), sm.q[t][lane + 32 * i] = mma::to_tf32(q[i]);
  }
  if (warp_id == kChunkWarps - 1) {
    const float A_log = p.A_log[h], dt_bias = p.dt_bias[h];
    float g[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int t = 2 * lane + j;
      g[j] = t < n ? host::gdn_log_decay(sm.g[t], A_log, dt_bias) : 0.0f;
      sm.beta[t] = t < n ? host::gdn_beta(sm.beta[t]) : 0.0f;
    }
    float sum = g[0] + g[1];
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const float other = __shfl_up_sync(0xffffffffu, sum, offset);
      if (lane >= offset) sum += other;
    }
    sm.g[2 * lane] = sum - g[1];
    sm.g[2 * lane + 1] = sum;
  }
}

/// The products with the chunk's initial state and among its tokens, gates applied on the way
/// out. Warp w takes the 16-row strip w % kBlocks of K (w < kBlocks) or Q: with K it makes A
/// (lower blocks) and R^T = (beta (v - exp(G) K S^T))^T; with Q it makes P (lower blocks) and
/// O = exp(G) Q S^T. Two passes, so that only one set of accumulators is live at a time.
template <int kDk>
MLLM_DEVICE void chunk_products(ChunkSmem<kDk>& sm, int warp_id) {
  constexpr int kLd = ChunkSmem<kDk>::kLdK;
  const bool is_k = warp_id < kBlocks;
  const int i = warp_id % kBlocks, r0 = i * 16;
  const float* lhs = is_k ? &sm.k[r0][0] : &sm.q[r0][0];
  {
    float acc[2 * kBlocks][4] = {};
    mma::mma_strip<false, false>(acc, lhs, kLd, &sm.k[0][0], kLd, kDk / 8, 2 * (i + 1));
#pragma unroll
    for (int nt = 0; nt < 2 * kBlocks; ++nt) {
      if (nt >= 2 * (i + 1)) break;  // blocks above the diagonal: never computed nor read
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = r0 + mma::c_row(e), c = nt * 8 + mma::c_col(e);
        const float decay = c <= t ? expf(sm.g[t] - sm.g[c]) : 0.0f;
        if (is_k) {
          sm.a[t][c] = c < t ? acc[nt][e] * sm.beta[t] * decay : 0.0f;
        } else {
          sm.p[t][c] = mma::to_tf32(acc[nt][e] * decay);
        }
      }
    }
  }
  {
    float acc[kChunkRows / 8][4] = {};
    mma::mma_strip<false, true>(acc, lhs, kLd, &sm.s[0][0], kLd, kDk / 8);
#pragma unroll
    for (int nt = 0; nt < kChunkRows / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = r0 + mma::c_row(e), c = nt * 8 + mma::c_col(e);
        const float grow = expf(sm.g[t]);
        if (is_k) {
          sm.vt[c][t] = mma::to_tf32(sm.beta[t] * (sm.vt[c][t] - grow * acc[nt][e]));
        } else {
          sm.o[t][c] = grow * acc[nt][e];
        }
      }
    }
  }
}

/// kt = (exp(G_last - G_t) k_t)^T, the keys of the state update.
template <int kDk>
MLLM_DEVICE void decayed_keys(ChunkSmem<kDk>& sm) {
  const float last = sm.g[kChunk - 1];
  for (int e = threadIdx.x; e < kChunk * kDk; e += kChunkThreads) {
    const int t = e % kChunk, d = e / kChunk;
    sm.kt[d][t] = mma::to_tf32(sm.k[t][d] * expf(last - sm.g[t]));
  }
}

/// T = (I + A)^-1 in place of A (unit lower triangular), float32: each 16x16 diagonal block by
/// forward substitution, a thread a column; then block row I from the rows above it:
/// T_IJ = -T_II sum_{M=J}^{I-1} A_IM T_MJ. Blocks above the diagonal are never read.
template <int kDk>
MLLM_DEVICE void invert_unit_lower(ChunkSmem<kDk>& sm) {
  const int tid = threadIdx.x;
  float col[16];
  if (tid < kChunk) {
    const int base = tid / 16 * 16, j = tid % 16;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float sum = 0.0f;
#pragma unroll
      for (int m = 0; m < i; ++m) sum = fmaf(sm.a[base + i][base + m], col[m], sum);
      col[i] = i < j ? 0.0f : (i == j ? 1.0f : -sum);
    }
  }
  __syncthreads();
  if (tid < kChunk) {
    const int base = tid / 16 * 16, j = tid % 16;
#pragma unroll
    for (int i = 0; i < 16; ++i) sm.a[base + i][base + j] = col[i];
  }
  __syncthreads();
  for (int bi = 1; bi < kBlocks; ++bi) {
    const int row0 = bi * 16;
    for (int e = tid; e < bi * 256; e += kChunkThreads) {
      const int bj = e / 256, rr = e / 16 % 16, cc = e % 16;
      float sum0 = 0.0f, sum1 = 0.0f;
      for (int mb = bj; mb < bi; ++mb) {
#pragma unroll
        for (int m = 0; m < 16; m += 2) {
          sum0 = fmaf(sm.a[row0 + rr][mb * 16 + m], sm.a[mb * 16 + m][bj * 16 + cc], sum0);
          sum1 = fmaf(sm.a[row0 + rr][mb * 16 + m + 1], sm.a[mb * 16 + m + 1][bj * 16 + cc], sum1);
        }
      }
      sm.y[rr][bj * 16 + cc] = sum0 + sum1;
    }
    __syncthreads();
    for (int e = tid; e < bi * 256; e += kChunkThreads) {
      const int bj = e / 256, rr = e / 16 % 16, cc = e % 16;
      float sum = 0.0f;
#pragma unroll
      for (int m = 0; m < 16; ++m) sum = fmaf(sm.a[row0 + rr][row0 + m], sm.y[m][bj * 16 + cc], sum);
      sm.a[row0 + rr][bj * 16 + cc] = -sum;
    }
    __syncthreads();
  }
}

/// U^T = (T R)^T. Warp w: the 16-row strip w % kBlocks of T (blocks 0..strip: T is lower
/// triangular), half w / kBlocks of the value columns.
template <int kDk>
MLLM_DEVICE void solve_u(ChunkSmem<kDk>& sm, int warp_id) {
  constexpr int kLdC = ChunkSmem<kDk>::kLdC, kHalf = kChunkRows / 2;
  const int i = warp_id % kBlocks, c0 = warp_id / kBlocks * kHalf;
  float acc[kHalf / 8][4] = {};
  mma::mma_strip<true, false>(acc, &sm.a[i * 16][0], kLdC, &sm.vt[c0][0], kLdC, 2 * (i + 1));
#pragma unroll
  for (int nt = 0; nt < kHalf / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) sm.ut[c0 + nt * 8 + mma::c_col(e)][i * 16 + mma::c_row(e)] = mma::to_tf32(acc[nt][e]);
  }
}

/// O += P U (warp w: strip w % kBlocks of P, half w / kBlocks of the value columns) and
/// S <- exp(G_last) S + U^T K~ (warp w: 16 state rows, half w / kBlocks of the key columns).
template <int kDk>
MLLM_DEVICE void output_and_state(ChunkSmem<kDk>& sm, int warp_id) {
  constexpr int kLd = ChunkSmem<kDk>::kLdK, kLdC = ChunkSmem<kDk>::kLdC;
  constexpr int kHalfV = kChunkRows / 2, kHalfK = kDk / 2;
  const int i = warp_id % kBlocks, half = warp_id / kBlocks;
  float o[kHalfV / 8][4];
  float* o_tile = &sm.o[i * 16][half * kHalfV];
  mma::load_c(o, o_tile, kLdC);
  mma::mma_strip<false, false>(o, &sm.p[i * 16][0], kLdC, &sm.ut[half * kHalfV][0], kLdC, 2 * (i + 1));
  mma::store_c(o, o_tile, kLdC);

  float s[kHalfK / 8][4];
  float* s_tile = &sm.s[i * 16][half * kHalfK];
  mma::load_c(s, s_tile, kLd, expf(sm.g[kChunk - 1]));
  mma::mma_strip<false, false>(s, &sm.ut[i * 16][0], kLdC, &sm.kt[half * kHalfK][0], kLdC, kChunk / 8);
  mma::store_c(s, s_tile, kLd);
}

/// Block (row block x, value head y, sequence z): kChunkRows rows of one head's state through
/// the sequence's chunks. Sequences of fewer than `min_tokens` tokens are left to the recurrent
/// kernel.
template <typename T, int kDk>
__global__ void __launch_bounds__(kChunkThreads) gdn_chunked_kernel(const __grid_constant__ GdnParams p,
                                                                    std::int64_t min_tokens) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  auto& sm = *reinterpret_cast<ChunkSmem<kDk>*>(smem_bytes);
  pdl_wait_and_release();
  const int s = blockIdx.z, h = blockIdx.y;
  const int hk = h / (p.num_v_heads / p.num_k_heads);
  const std::int64_t bos = p.cu_seqlens[s], eos = p.cu_seqlens[s + 1];
  // Empty and short sequences, and bounds the wrapper's validation refuses, are not this
  // kernel's.
  if (eos - bos < min_tokens || eos - bos <= 0 || bos < 0 || eos > p.tokens) return;
  const int warp_id = threadIdx.x / 32;
  const std::int64_t index = p.cache_indices[s];
  const bool stateful = index >= 0 && index < p.pool_size;

  RawChunk<T, kDk> raw;
  load_raw<T, kDk>(p, raw, bos, static_cast<int>(min(static_cast<std::int64_t>(kChunk), eos - bos)), h, hk);
  for (int e = threadIdx.x; e < kChunkRows * kDk / 4; e += kChunkThreads) {
    const int r = e / (kDk / 4), d = e % (kDk / 4) * 4, row = chunk_state_row(r);
    const float4 v = stateful && row < p.head_v_dim
                         ? *reinterpret_cast<const float4*>(state_row(p, index, h, row) + d)
                         : make_float4(0.f, 0.f, 0.f, 0.f);
    sm.s[r][d] = v.x, sm.s[r][d + 1] = v.y, sm.s[r][d + 2] = v.z, sm.s[r][d + 3] = v.w;
  }

  T* out = static_cast<T*>(p.out);
  for (std::int64_t t0 = bos; t0 < eos; t0 += kChunk) {
    const int n = static_cast<int>(min(static_cast<std::int64_t>(kChunk), eos - t0));
    stage_raw(sm, raw);
    __syncthreads();
    normalise_chunk(p, sm, n, h);
    __syncthreads();
    chunk_products(sm, warp_id);
    __syncthreads();
    // The next chunk's loads go out now and arrive while this one is finished (not earlier:
    // their registers would be live across the products' accumulators).
    if (t0 + kChunk < eos) {
      load_raw<T, kDk>(p, raw, t0 + kChunk, static_cast<int>(min(static_cast<std::int64_t>(kChunk), eos - t0 - kChunk)),
                       h, hk);
    }
    decayed_keys(sm);
    invert_unit_lower(sm);
    solve_u(sm, warp_id);
    __syncthreads();
    output_and_state(sm, warp_id);
    __syncthreads();
    for (int e = threadIdx.x; e < n * kChunkRows; e += kChunkThreads) {
      const int t = e / kChunkRows, c = e % kChunkRows, row = chunk_state_row(c);
      if (row < p.head_v_dim) out[((t0 + t) * p.num_v_heads + h) * p.head_v_dim + row] = cast<T>(sm.o[t][c]);
    }
  }

  if (stateful) {
    for (int e = threadIdx.x; e < kChunkRows * kDk / 4; e += kChunkThreads) {
      const int r = e / (kDk / 4), d = e % (kDk / 4) * 4, row = chunk_state_row(r);
      if (row < p.head_v_dim) {
        *reinterpret_cast<float4*>(state_row(p, index, h, row) + d) =
            make_float4(sm.s[r][d], sm.s[r][d + 1], sm.s[r][d + 2], sm.s[r][d + 3]);
      }
    }
  }
}

}  // namespace mllm_kernel::device::gdn
