// The chunked gated DeltaNet's prepare pass: for every chunk of every long sequence at once, the
// parts of the chunk's step that do not depend on the state (see impl/gdn_chunk.cuh): the L2
// norms of k and q, the gates and their running sum G, A, T = (I + A)^-1 and P. It writes T, P
// and the per-token factors to the chunk's workspace slot, from which the state pass reads them.
//
// A block takes one (slot, value head). The products are TF32 m16n8k8 MMAs (mllm_kernel/mma.cuh)
// whose tiles the warps share evenly; T is found in float32: the four 16x16 diagonal blocks by forward
// substitution (a thread a column), then the off-diagonal blocks block row by block row. A last
// partial chunk is padded with tokens whose k, q, g and beta are zero; their rows of A and P are
// zero and of T the identity's, so they leave the state and the other tokens alone.
#pragma once

#include <mllm_kernel/gdn.hpp>
#include <mllm_kernel/impl/gdn.cuh>
#include <mllm_kernel/impl/gdn_chunk.cuh>
#include <mllm_kernel/mma.cuh>
#include <mllm_kernel/pdl.cuh>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>

#include <cstdint>

namespace mllm_kernel::device::gdn {

/// The prepare pass's shared memory. Row pitches are a multiple of 32 floats plus 4, so that the
/// eight rows of an ldmatrix fall in different banks.
template <int kDk>
struct alignas(128) PrepareSmem {
  static constexpr int kLdK = kDk + 4;
  float k[kChunk][kLdK];  // raw k; then normalised (TF32)
  float q[kChunk][kLdK];  // raw q; then normalised and scaled (TF32)
  float a[kChunk][kLdC];  // A; then T (float32)
  float p[kChunk][kLdC];  // lower(D) * Q K^T (TF32)
  float y[16][kLdC];      // the sums of one block row of T in the making
  float g[kChunk];        // raw a; then G, the running sum of the log decays
  float beta[kChunk];     // raw b; then beta
  float k_scale[kChunk];  // 1 / (||k_t|| + eps)
  float q_scale[kChunk];  // head_k_dim^-0.5 / (||q_t|| + eps)
};

/// The sequence whose chunks may hold workspace slot `slot`: the last s with
/// chunk_slot(s, bos_s, 0) <= slot (that first slot grows with s).
MLLM_DEVICE std::int64_t slot_sequence(const GdnParams& p, std::int64_t slot) {
  std::int64_t lo = 0, hi = p.num_seqs - 1;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (chunk_slot(mid, p.cu_seqlens[mid], 0) <= slot) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

/// Loads the chunk's k and q rows, L2-normalises them in registers (the kDk / 8 threads of a
/// row sum their pieces' squares with shuffles), and stores them rounded to TF32 with their norm
/// factors; stages a and b. Tokens past n are zero.
template <typename T, int kDk>
MLLM_DEVICE void stage_normalised(const GdnParams& p, PrepareSmem<kDk>& sm, std::int64_t t0, int n, int h, int hk) {
  using Rows = RowPieces<kDk>;
  const bool aligned = pieces_aligned<T>(p.k, p.k_s0, p.k_s1) && pieces_aligned<T>(p.q, p.q_s0, p.q_s1);
  Piece k[Rows::kPerThread], q[Rows::kPerThread];
  load_pieces<T, kDk>(k, static_cast<const T*>(p.k) + t0 * p.k_s0 + hk * p.k_s1, p.k_s0, n, kDk, aligned);
  load_pieces<T, kDk>(q, static_cast<const T*>(p.q) + t0 * p.q_s0 + hk * p.q_s1, p.q_s0, n, kDk, aligned);
  if (threadIdx.x < 2 * kChunk) {
    const int t = threadIdx.x % kChunk;
    const bool is_a = threadIdx.x < kChunk;
    const float ab =
        t < n ? cast<float>(static_cast<const T*>(is_a ? p.a : p.b)[(t0 + t) * (is_a ? p.a_s0 : p.b_s0) + h]) : 0.0f;
    (is_a ? sm.g : sm.beta)[t] = ab;
  }
  const int c = Rows::column();
#pragma unroll
  for (int j = 0; j < Rows::kPerThread; ++j) {
    const int t = Rows::token(j);
    float kf[8], qf[8];
    piece_floats<T>(k[j], kf);
    piece_floats<T>(q[j], qf);
    float k_scale, q_scale;
    qk_norm_scales<Rows::kPerRow>(kf, qf, p.scale, k_scale, q_scale);
    store_scaled_tf32(&sm.k[t][c], kf, k_scale);
    store_scaled_tf32(&sm.q[t][c], qf, q_scale);
    if (c == 0) sm.k_scale[t] = k_scale, sm.q_scale[t] = q_scale;
  }
}

/// The last warp turns the staged a and b into the gates of the n real tokens (zero for the
/// padding) and G into their running sum, two tokens a lane.
template <int kDk>
MLLM_DEVICE void chunk_gates(const GdnParams& p, PrepareSmem<kDk>& sm, int n, int h) {
  const int lane = threadIdx.x % 32;
  if (static_cast<int>(threadIdx.x) / 32 != kChunkWarps - 1) return;
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

/// `tiles` 16x8 tiles of A (kA) or P from tile `first` of the 16-row strip `strip`: the
/// products of the strip's K or Q rows with the K rows, beta and the decays applied.
template <bool kA, int kDk>
MLLM_DEVICE void gram_tiles(PrepareSmem<kDk>& sm, int strip, int first, int tiles) {
  constexpr int kLd = PrepareSmem<kDk>::kLdK, kMaxTiles = 6;
  const int r0 = strip * 16;
  float acc[kMaxTiles][4] = {};
  mma::mma_strip<false, false>(acc, kA ? &sm.k[r0][0] : &sm.q[r0][0], kLd, &sm.k[first * 8][0], kLd, kDk / 8, tiles);
#pragma unroll
  for (int nt = 0; nt < kMaxTiles; ++nt) {
    if (nt >= tiles) break;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int t = r0 + mma::c_row(e), c = (first + nt) * 8 + mma::c_col(e);
      // The fast exponential's error (a few float32 ulps) is far below TF32's rounding.
      const float decay = c <= t ? __expf(sm.g[t] - sm.g[c]) : 0.0f;
      if constexpr (kA) {
        sm.a[t][c] = c < t ? acc[nt][e] * sm.beta[t] * decay : 0.0f;
      } else {
        sm.p[t][c] = mma::to_tf32(acc[nt][e] * decay);
      }
    }
  }
}

/// A (warps 0..3) and P (warps 4..7), their blocks on and below the diagonal (the others are
/// never read): strip s has 2 (s + 1) tiles, 20 in all, which four warps share as 4, 4, 6 and
/// 4 + 2 tiles.
template <bool kA, int kDk>
MLLM_DEVICE void gram_share(PrepareSmem<kDk>& sm, int part) {
  switch (part) {
    case 0: gram_tiles<kA>(sm, 3, 0, 4); break;
    case 1: gram_tiles<kA>(sm, 3, 4, 4); break;
    case 2: gram_tiles<kA>(sm, 2, 0, 6); break;
    default:
      gram_tiles<kA>(sm, 1, 0, 4);
      gram_tiles<kA>(sm, 0, 0, 2);
  }
}

template <int kDk>
MLLM_DEVICE void chunk_gram(PrepareSmem<kDk>& sm, int warp_id) {
  static_assert(kBlocks == 4 && kChunkWarps == 8, "the tile shares are laid out for four strips and eight warps");
  if (warp_id < kBlocks) {
    gram_share<true>(sm, warp_id);
  } else {
    gram_share<false>(sm, warp_id - kBlocks);
  }
}

/// T = (I + A)^-1 in place of A (unit lower triangular), float32: each 16x16 diagonal block by
/// forward substitution, a thread a column, while the other threads run `others`; then block
/// row I from the rows above it: T_IJ = -T_II sum_{M=J}^{I-1} A_IM T_MJ. Blocks above the
/// diagonal are never read.
template <int kDk, typename Others>
MLLM_DEVICE void invert_unit_lower(PrepareSmem<kDk>& sm, Others&& others) {
  const int tid = threadIdx.x;
  float col[16];
  if (tid < kChunk) {
    const int base = tid / 16 * 16, j = tid % 16;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float sum[2] = {};  // two chains: the substitution is a chain of dependent steps
#pragma unroll
      for (int m = 0; m < i; ++m) sum[m % 2] = fmaf(sm.a[base + i][base + m], col[m], sum[m % 2]);
      col[i] = i < j ? 0.0f : (i == j ? 1.0f : -(sum[0] + sum[1]));
    }
  } else {
    others(tid - kChunk, kChunkThreads - kChunk);
  }
  __syncthreads();
  if (tid < kChunk) {
    const int base = tid / 16 * 16, j = tid % 16;
#pragma unroll
    for (int i = 0; i < 16; ++i) sm.a[base + i][base + j] = col[i];
  }
  __syncthreads();
  // A thread takes four rows and one column of one block: each float4 of a row is read once
  // for four products.
  for (int bi = 1; bi < kBlocks; ++bi) {
    const int row0 = bi * 16;
    for (int e = tid; e < bi * 64; e += kChunkThreads) {
      const int bj = e / 64, r = e / 16 % 4 * 4, cc = bj * 16 + e % 16;
      float sum[4] = {};
      for (int m = bj * 16; m < row0; m += 4) {
        const float col[4] = {sm.a[m][cc], sm.a[m + 1][cc], sm.a[m + 2][cc], sm.a[m + 3][cc]};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float4 row = *reinterpret_cast<const float4*>(&sm.a[row0 + r + i][m]);
          sum[i] = fmaf(row.x, col[0], fmaf(row.y, col[1], fmaf(row.z, col[2], fmaf(row.w, col[3], sum[i]))));
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) sm.y[r + i][cc] = sum[i];
    }
    __syncthreads();
    for (int e = tid; e < bi * 64; e += kChunkThreads) {
      const int bj = e / 64, r = e / 16 % 4 * 4, cc = bj * 16 + e % 16;
      float sum[4] = {};
#pragma unroll
      for (int m = 0; m < 16; m += 4) {
        const float col[4] = {sm.y[m][cc], sm.y[m + 1][cc], sm.y[m + 2][cc], sm.y[m + 3][cc]};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float4 row = *reinterpret_cast<const float4*>(&sm.a[row0 + r + i][row0 + m]);
          sum[i] = fmaf(row.x, col[0], fmaf(row.y, col[1], fmaf(row.z, col[2], fmaf(row.w, col[3], sum[i]))));
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) sm.a[row0 + r + i][cc] = -sum[i];
    }
    __syncthreads();
  }
}

/// Writes the lower blocks of one of T (kT) or P, [kChunk][kChunk], to the slot's workspace, as
/// thread `id` of `count`.
template <bool kT, int kDk>
MLLM_DEVICE void write_lower(const PrepareSmem<kDk>& sm, float* w, int id, int count) {
  constexpr int kQuads = kChunk / 4;
  const float(&src)[kChunk][kLdC] = kT ? sm.a : sm.p;
  for (int e = id; e < kChunk * kQuads; e += count) {
    const int r = e / kQuads, c = e % kQuads * 4;
    if (c / 16 > r / 16) continue;
    *reinterpret_cast<float4*>(w + (kT ? kWorkT : kWorkP) + r * kChunk + c) =
        *reinterpret_cast<const float4*>(&src[r][c]);
  }
}

/// Writes the tokens' factors to the slot's workspace, as thread `id` of `count`.
template <int kDk>
MLLM_DEVICE void write_factors(const PrepareSmem<kDk>& sm, float* w, int id, int count) {
  for (int t = id; t < kChunk; t += count) {
    const float grow = expf(sm.g[t]);
    const TokenFactors f{sm.k_scale[t], sm.q_scale[t] * grow, sm.beta[t], grow, expf(sm.g[kChunk - 1] - sm.g[t]), {}};
    reinterpret_cast<TokenFactors*>(w + kWorkFactors)[t] = f;
  }
}

/// Block (workspace slot x, value head y): one chunk of one head, if the slot holds one.
template <typename T, int kDk>
__global__ void __launch_bounds__(kChunkThreads) gdn_chunk_prepare_kernel(const __grid_constant__ GdnParams p,
                                                                          float* work, std::int64_t min_tokens) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  auto& sm = *reinterpret_cast<PrepareSmem<kDk>*>(smem_bytes);
  pdl_wait_and_release();
  const std::int64_t slot = blockIdx.x;
  const int h = blockIdx.y, hk = h / (p.num_v_heads / p.num_k_heads);
  const std::int64_t s = slot_sequence(p, slot);
  std::int64_t bos, eos;
  if (!chunked_sequence(p, s, min_tokens, bos, eos)) return;
  const std::int64_t t0 = bos + (slot - chunk_slot(s, bos, 0)) * kChunk;
  if (t0 < bos || t0 >= eos) return;  // a slot between two sequences' chunks
  const int n = static_cast<int>(min(static_cast<std::int64_t>(kChunk), eos - t0));

  stage_normalised<T, kDk>(p, sm, t0, n, h, hk);
  __syncthreads();
  chunk_gates(p, sm, n, h);
  __syncthreads();
  chunk_gram(sm, static_cast<int>(threadIdx.x) / 32);
  __syncthreads();
  float* w = chunk_work(work, slot, h, p.num_v_heads);
  invert_unit_lower(sm, [&](int id, int count) {  // P and the factors are final already
    write_lower<false>(sm, w, id, count);
    write_factors(sm, w, id, count);
  });
  write_lower<true>(sm, w, threadIdx.x, kChunkThreads);
}

}  // namespace mllm_kernel::device::gdn
