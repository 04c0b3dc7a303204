// The chunked gated DeltaNet's state pass: the products of each chunk with the state, the
// chunks of a sequence in order (the math is in impl/gdn_chunk.cuh). T, P and the per-token
// factors come from the prepare pass's workspace (impl/gdn_chunk_prepare.cuh), so a chunk's
// step here is matrix products and elementwise scaling: no norms, exponentials or solves.
//
// A block holds kRows value rows of one head's state for the whole sequence: float32 in the
// registers of the warps that update it (warp w: 16 rows, a part of the key columns), and a TF32
// copy in shared memory, the operand of the products. Each product is a warp's strip of m16n8k8
// TF32 MMAs with its operands loaded by ldmatrix, every operand stored the way ldmatrix wants it
// (R, U and the decayed K transposed) and rounded when it is written, except T, which stays
// float32 and is rounded as it is loaded. The next chunk's k, q and v are loaded into registers,
// and its workspace copied into shared memory, while the current chunk is finished.
#pragma once

#include <mllm_kernel/async_copy.cuh>
#include <mllm_kernel/gdn.hpp>
#include <mllm_kernel/impl/gdn.cuh>
#include <mllm_kernel/impl/gdn_chunk.cuh>
#include <mllm_kernel/mma.cuh>
#include <mllm_kernel/pdl.cuh>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>

#include <cstdint>

namespace mllm_kernel::device::gdn {

/// The value rows of the state a block holds, kRows: 64, or 32 where blocks of 64 rows would
/// leave SMs idle (few sequences), at twice the blocks and about half the work a chunk each.
/// The warps over the block's state in registers: strips of 16 rows, each strip's key columns in
/// state_col_parts(kRows) parts.
constexpr int state_row_strips(int rows) { return rows / 16; }
constexpr int state_col_parts(int rows) { return kChunkWarps / state_row_strips(rows); }
constexpr bool valid_chunk_rows(int rows) {
  return rows % 32 == 0 && rows <= kChunk && kChunkWarps % state_row_strips(rows) == 0;
}

/// The state pass's shared memory. Row pitches are a multiple of 32 floats plus 4, so that the
/// eight rows of an ldmatrix fall in different banks.
template <int kDk, int kRows>
struct alignas(128) ChunkSmem {
  static_assert(valid_chunk_rows(kRows), "whole 16-row strips, an even number of 8-column tiles a warp");
  static constexpr int kLdK = kDk + 4;  // [*, kDk] arrays
  float s[kRows][kLdK];                 // the block's rows of the state (TF32)
  float k[kChunk][kLdK];                // normalised k (TF32)
  union {
    float q[kChunk][kLdK];  // normalised q, scaled and times exp(G) (TF32)
    float kt[kDk][kLdC];    // after the products: (exp(G_last - G_t) k_t)^T (TF32)
  };
  float t[kChunk][kLdC];       // T (float32)
  float p[kChunk][kLdC];       // P (TF32)
  float vt[kRows][kLdC];  // v^T; then R^T (TF32)
  float ut[kRows][kLdC];  // U^T (TF32)
  float o[kChunk][kLdC];       // O (float32)
  TokenFactors f[kChunk];
};

/// Row (value dim) r of the block's rows, as a row of the head's state.
template <int kRows>
MLLM_DEVICE int chunk_state_row(int r) { return static_cast<int>(blockIdx.x) * kRows + r; }

/// A thread's pieces of a chunk's raw k, q and v (the block's value columns), loaded a chunk
/// ahead into registers.
template <typename T, int kDk, int kRows>
struct RawChunk {
  Piece k[RowPieces<kDk>::kPerThread], q[RowPieces<kDk>::kPerThread], v[RowPieces<kRows>::kPerThread];
};

template <typename T, int kDk, int kRows>
MLLM_DEVICE void load_raw(const GdnParams& p, RawChunk<T, kDk, kRows>& raw, std::int64_t t0, int n, int h, int hk,
                          bool kq_aligned, bool v_aligned) {
  const int row0 = chunk_state_row<kRows>(0);
  load_pieces<T, kDk>(raw.k, static_cast<const T*>(p.k) + t0 * p.k_s0 + hk * p.k_s1, p.k_s0, n, kDk, kq_aligned);
  load_pieces<T, kDk>(raw.q, static_cast<const T*>(p.q) + t0 * p.q_s0 + hk * p.q_s1, p.q_s0, n, kDk, kq_aligned);
  load_pieces<T, kRows>(raw.v, static_cast<const T*>(p.v) + t0 * p.v_s0 + h * p.v_s1 + row0, p.v_s0, n,
                             p.head_v_dim - row0, v_aligned);
}

/// Copies T, P and the tokens' factors of a chunk from its workspace slot (T and P: the blocks on
/// and below the diagonal, the only ones read).
template <int kDk, int kRows>
MLLM_DEVICE void fetch_work(ChunkSmem<kDk, kRows>& sm, const float* w, bool t_part) {
  constexpr int kQuads = kChunk / 4;
  float(*dst)[kLdC] = t_part ? sm.t : sm.p;
  const float* src = w + (t_part ? kWorkT : kWorkP);
  for (int e = threadIdx.x; e < kChunk * kQuads; e += kChunkThreads) {
    const int r = e / kQuads, c = e % kQuads * 4;
    if (c / 16 <= r / 16) cp_async16(&dst[r][c], src + r * kChunk + c);
  }
  if (!t_part) {
    constexpr int kFactorQuads = kChunk * static_cast<int>(sizeof(TokenFactors)) / 16;
    for (int e = threadIdx.x; e < kFactorQuads; e += kChunkThreads) {
      cp_async16(reinterpret_cast<float4*>(sm.f) + e, reinterpret_cast<const float4*>(w + kWorkFactors) + e);
    }
  }
}

/// Stages the raw chunk: k times its norm factor, q times its factor (TF32), and v transposed.
template <typename T, int kDk, int kRows>
MLLM_DEVICE void stage_raw(ChunkSmem<kDk, kRows>& sm, const RawChunk<T, kDk, kRows>& raw) {
  using KQ = RowPieces<kDk>;
  using V = RowPieces<kRows>;
#pragma unroll
  for (int j = 0; j < KQ::kPerThread; ++j) {
    const int t = KQ::token(j), c = KQ::column();
    const float ks = sm.f[t].k_scale, qs = sm.f[t].q_factor;
    float k[8], q[8];
    piece_floats<T>(raw.k[j], k);
    piece_floats<T>(raw.q[j], q);
    store_scaled_tf32(&sm.k[t][c], k, ks);
    store_scaled_tf32(&sm.q[t][c], q, qs);
  }
#pragma unroll
  for (int j = 0; j < V::kPerThread; ++j) {
    const int t = V::token(j), c = V::column();
    float v[8];
    piece_floats<T>(raw.v[j], v);
#pragma unroll
    for (int e = 0; e < 8; ++e) sm.vt[c + e][t] = v[e];
  }
}

/// The products with the chunk's initial state: warp w takes the 16-row strip w % kBlocks of K
/// (w < kBlocks), making R^T = (beta (v - exp(G) K S^T))^T, or of Q, making O = Q S^T (Q carries
/// exp(G) already).
template <int kDk, int kRows>
MLLM_DEVICE void state_products(ChunkSmem<kDk, kRows>& sm, int warp_id) {
  constexpr int kLd = ChunkSmem<kDk, kRows>::kLdK;
  const bool is_k = warp_id < kBlocks;
  const int r0 = warp_id % kBlocks * 16;
  float acc[kRows / 8][4] = {};
  mma::mma_strip<false, false>(acc, is_k ? &sm.k[r0][0] : &sm.q[r0][0], kLd, &sm.s[0][0], kLd, kDk / 8);
  if (is_k) {
    const int t_lo = r0 + mma::c_row(0), t_hi = r0 + mma::c_row(2);
    const float beta[2] = {sm.f[t_lo].beta, sm.f[t_hi].beta}, grow[2] = {sm.f[t_lo].grow, sm.f[t_hi].grow};
#pragma unroll
    for (int nt = 0; nt < kRows / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = r0 + mma::c_row(e), c = nt * 8 + mma::c_col(e);
        sm.vt[c][t] = mma::to_tf32(beta[e / 2] * (sm.vt[c][t] - grow[e / 2] * acc[nt][e]));
      }
    }
  } else {
    mma::store_c(acc, &sm.o[r0][0], kLdC);
  }
}

/// kt = (exp(G_last - G_t) k_t)^T, the keys of the state update: a thread takes one token and
/// float4s of its row (conflict-free reads), consecutive threads consecutive tokens (writes).
template <int kDk, int kRows>
MLLM_DEVICE void decayed_keys(ChunkSmem<kDk, kRows>& sm) {
  constexpr int kStep = kChunkThreads / kChunk * 4;
  const int t = threadIdx.x % kChunk;
  const float decay = sm.f[t].key_decay;
#pragma unroll
  for (int d = threadIdx.x / kChunk * 4; d < kDk; d += kStep) {
    const float4 k = *reinterpret_cast<const float4*>(&sm.k[t][d]);
    sm.kt[d][t] = mma::to_tf32(k.x * decay);
    sm.kt[d + 1][t] = mma::to_tf32(k.y * decay);
    sm.kt[d + 2][t] = mma::to_tf32(k.z * decay);
    sm.kt[d + 3][t] = mma::to_tf32(k.w * decay);
  }
}

/// U^T = (T R)^T. Warp w: the 16-row strip w % kBlocks of T (blocks 0..strip: T is lower
/// triangular), half w / kBlocks of the value columns.
template <int kDk, int kRows>
MLLM_DEVICE void solve_u(ChunkSmem<kDk, kRows>& sm, int warp_id) {
  constexpr int kHalf = kRows / 2;
  const int i = warp_id % kBlocks, c0 = warp_id / kBlocks * kHalf;
  float acc[kHalf / 8][4] = {};
  mma::mma_strip<true, false>(acc, &sm.t[i * 16][0], kLdC, &sm.vt[c0][0], kLdC, 2 * (i + 1));
#pragma unroll
  for (int nt = 0; nt < kHalf / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) sm.ut[c0 + nt * 8 + mma::c_col(e)][i * 16 + mma::c_row(e)] = mma::to_tf32(acc[nt][e]);
  }
}

/// This warp's tile of the state in registers: rows 16 (w % kStrips) .. +16 of the block's
/// rows, key columns kCols (w / kStrips) .. + kCols, as kCols / 8 MMA accumulator tiles.
template <int kDk, int kRows>
struct StateTile {
  static constexpr int kStrips = state_row_strips(kRows);
  static constexpr int kCols = kDk / state_col_parts(kRows);
  static constexpr int kTiles = kCols / 8;
  float c[kTiles][4];
  static MLLM_DEVICE int row(int warp_id, int e) { return warp_id % kStrips * 16 + mma::c_row(e); }
  static MLLM_DEVICE int column(int warp_id, int nt, int e) { return warp_id / kStrips * kCols + nt * 8 + mma::c_col(e); }
};

/// Writes the TF32 copy of the warp's state tile to shared memory: the next products' operand.
template <int kDk, int kRows>
MLLM_DEVICE void copy_state_tile(ChunkSmem<kDk, kRows>& sm, const StateTile<kDk, kRows>& state, int warp_id) {
  using Tile = StateTile<kDk, kRows>;
#pragma unroll
  for (int nt = 0; nt < Tile::kTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sm.s[Tile::row(warp_id, e)][Tile::column(warp_id, nt, e)] = mma::to_tf32(state.c[nt][e]);
    }
  }
}

/// O += P U (warp w: strip w % kBlocks of P, half w / kBlocks of the value columns) and
/// S <- exp(G_last) S + U^T K~ on the warp's state tile, whose TF32 copy then goes to shared
/// memory for the next chunk's products.
template <int kDk, int kRows>
MLLM_DEVICE void output_and_state(ChunkSmem<kDk, kRows>& sm, StateTile<kDk, kRows>& state, int warp_id) {
  using Tile = StateTile<kDk, kRows>;
  constexpr int kHalfV = kRows / 2;
  const int i = warp_id % kBlocks, half = warp_id / kBlocks;
  float o[kHalfV / 8][4];
  float* o_tile = &sm.o[i * 16][half * kHalfV];
  mma::load_c(o, o_tile, kLdC);
  mma::mma_strip<false, false>(o, &sm.p[i * 16][0], kLdC, &sm.ut[half * kHalfV][0], kLdC, 2 * (i + 1));
  mma::store_c(o, o_tile, kLdC);

  const float last = sm.f[kChunk - 1].grow;
#pragma unroll
  for (int nt = 0; nt < Tile::kTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) state.c[nt][e] *= last;
  }
  const int strip = warp_id % Tile::kStrips, part = warp_id / Tile::kStrips;
  mma::mma_strip<false, false>(state.c, &sm.ut[strip * 16][0], kLdC, &sm.kt[part * Tile::kCols][0], kLdC, kChunk / 8);
  copy_state_tile(sm, state, warp_id);
}

/// Reads (kRead) or writes the warp's state tile from or to the pool; rows past head_v_dim read
/// as zero and are not written, and so is everything of a padding entry.
template <bool kRead, int kDk, int kRows>
MLLM_DEVICE void state_io(const GdnParams& p, StateTile<kDk, kRows>& state, int warp_id, std::int64_t index, int h,
                          bool stateful) {
  using Tile = StateTile<kDk, kRows>;
#pragma unroll
  for (int half_row = 0; half_row < 2; ++half_row) {  // accumulator elements 0, 1 and 2, 3
    const int row = chunk_state_row<kRows>(Tile::row(warp_id, 2 * half_row));
    const bool real = stateful && row < p.head_v_dim;
#pragma unroll
    for (int nt = 0; nt < Tile::kTiles; ++nt) {
      float(&c)[4] = state.c[nt];
      if (!real) {
        if constexpr (kRead) c[2 * half_row] = c[2 * half_row + 1] = 0.0f;
        continue;
      }
      auto* at = reinterpret_cast<float2*>(state_row(p, index, h, row) + Tile::column(warp_id, nt, 0));
      if constexpr (kRead) {
        const float2 v = *at;
        c[2 * half_row] = v.x, c[2 * half_row + 1] = v.y;
      } else {
        *at = make_float2(c[2 * half_row], c[2 * half_row + 1]);
      }
    }
  }
}

/// Writes the chunk's n output rows (the block's value columns): a thread takes a pair of
/// columns and every (kChunkThreads / kPairs)-th token.
template <typename T, int kRows>
MLLM_DEVICE void store_output(const GdnParams& p, const float (&o)[kChunk][kLdC], std::int64_t t0, int n, int h) {
  constexpr int kPairs = kRows / 2, kStep = kChunkThreads / kPairs;
  const int c = threadIdx.x % kPairs * 2, row = chunk_state_row<kRows>(c);
  if (row >= p.head_v_dim) return;
  const std::int64_t token_stride = static_cast<std::int64_t>(p.num_v_heads) * p.head_v_dim;
  const bool pair = p.head_v_dim % 2 == 0;  // then row + 1 is real too, and the pair is aligned
  T* at = static_cast<T*>(p.out) + (t0 * p.num_v_heads + h) * static_cast<std::int64_t>(p.head_v_dim) + row;
  for (int t = threadIdx.x / kPairs; t < n; t += kStep) {
    T* dst = at + t * token_stride;
    if (pair) {
      *reinterpret_cast<packed_t<T>*>(dst) = cast<packed_t<T>>(make_float2(o[t][c], o[t][c + 1]));
    } else {
      dst[0] = cast<T>(o[t][c]);
      if (row + 1 < p.head_v_dim) dst[1] = cast<T>(o[t][c + 1]);
    }
  }
}

/// Block (row block x, value head y, sequence z): kRows rows of one head's state through the
/// sequence's chunks. Sequences of fewer than `min_tokens` tokens are left to the recurrent
/// kernel.
template <typename T, int kDk, int kRows>
__global__ void __launch_bounds__(kChunkThreads) gdn_chunked_kernel(const __grid_constant__ GdnParams p,
                                                                    const float* work, std::int64_t min_tokens) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  auto& sm = *reinterpret_cast<ChunkSmem<kDk, kRows>*>(smem_bytes);
  pdl_wait_and_release();
  const int s = blockIdx.z, h = blockIdx.y;
  const int hk = h / (p.num_v_heads / p.num_k_heads);
  std::int64_t bos, eos;
  if (!chunked_sequence(p, s, min_tokens, bos, eos)) return;
  const int warp_id = threadIdx.x / 32;
  const std::int64_t index = p.cache_indices[s];
  const bool stateful = index >= 0 && index < p.pool_size;
  auto slot_work = [&](std::int64_t t0) {
    return chunk_work(const_cast<float*>(work), chunk_slot(s, bos, (t0 - bos) / kChunk), h, p.num_v_heads);
  };
  auto chunk_tokens = [&](std::int64_t t0) { return static_cast<int>(min(static_cast<std::int64_t>(kChunk), eos - t0)); };

  fetch_work(sm, slot_work(bos), true);
  fetch_work(sm, slot_work(bos), false);
  cp_async_commit();
  const bool kq_aligned = pieces_aligned<T>(p.k, p.k_s0, p.k_s1) && pieces_aligned<T>(p.q, p.q_s0, p.q_s1);
  const bool v_aligned = pieces_aligned<T>(p.v, p.v_s0, p.v_s1);
  RawChunk<T, kDk, kRows> raw;
  load_raw(p, raw, bos, chunk_tokens(bos), h, hk, kq_aligned, v_aligned);
  StateTile<kDk, kRows> state;
  state_io<true>(p, state, warp_id, index, h, stateful);
  copy_state_tile(sm, state, warp_id);

  for (std::int64_t t0 = bos; t0 < eos; t0 += kChunk) {
    const int n = chunk_tokens(t0);
    const bool more = t0 + kChunk < eos;
    cp_async_wait<0>();
    __syncthreads();
    stage_raw(sm, raw);
    __syncthreads();
    state_products(sm, warp_id);
    __syncthreads();
    // The next chunk's loads go out now and arrive while this one is finished (not earlier:
    // their registers would be live across the products' accumulators).
    if (more) load_raw(p, raw, t0 + kChunk, chunk_tokens(t0 + kChunk), h, hk, kq_aligned, v_aligned);
    decayed_keys(sm);
    solve_u(sm, warp_id);
    __syncthreads();
    if (more) fetch_work(sm, slot_work(t0 + kChunk), true);  // T is read no more
    output_and_state(sm, state, warp_id);
    __syncthreads();
    if (more) fetch_work(sm, slot_work(t0 + kChunk), false);  // nor P and the factors
    cp_async_commit();
    store_output<T, kRows>(p, sm.o, t0, n, h);
  }
  state_io<false>(p, state, warp_id, index, h, stateful);
}

}  // namespace mllm_kernel::device::gdn
