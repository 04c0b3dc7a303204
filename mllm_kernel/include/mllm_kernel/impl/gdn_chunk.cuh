// The chunked gated DeltaNet's shared pieces: chunk geometry, the workspace through which the
// prepare pass (impl/gdn_chunk_prepare.cuh) hands each chunk to the state pass
// (impl/gdn_chunked.cuh), and the loads of a chunk's raw inputs.
//
// Within a chunk of kChunk tokens, with G_t the cumulative log decay up to token t (inclusive),
// D[t, s] = exp(G_t - G_s) for s <= t, K and Q the L2-normalised keys and (scaled) queries, the
// token-by-token recurrence from the chunk's initial state S (rows: value dims, columns: key
// dims) equals
//   A = strictly-lower(beta_t D[t, s] k_t . k_s),  T = (I + A)^-1,  P = lower(D) * Q K^T
//   R = diag(beta) (V - diag(exp(G)) K S^T),       U = T R
//   O = diag(exp(G)) Q S^T + P U
//   S <- exp(G_last) S + U^T diag(exp(G_last - G)) K
// Every exponent is <= 0, so nothing overflows however strong the decay. T, P and the per-token
// factors depend on the chunk's inputs alone: the prepare pass finds them for every chunk at
// once; the state pass walks a sequence's chunks in order and does only the products with S.
//
// A chunk's slot in the workspace is seq + bos / kChunk + chunk (bos: the sequence's first
// token): distinct for every chunk of every sequence, below num_seqs + tokens / kChunk + 1,
// and found without a prefix sum over the sequences.
#pragma once

#include <mllm_kernel/gdn.hpp>
#include <mllm_kernel/host_device.hpp>
#include <mllm_kernel/mma.cuh>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/vec.cuh>

#include <cstdint>

namespace mllm_kernel::device::gdn {

constexpr int kChunk = 64;          // tokens a chunk
constexpr int kChunkThreads = 256;  // eight warps
constexpr int kChunkWarps = kChunkThreads / 32;
constexpr int kBlocks = kChunk / 16;  // 16-row strips of a chunk
constexpr int kLdC = kChunk + 4;      // pitch of [*, kChunk] arrays in shared memory
static_assert(kChunkWarps == 2 * kBlocks, "a warp a strip of K or Q in the products");

/// The per-token factors of a chunk: the key's norm scale; the query's norm scale times
/// exp(G_t); beta; exp(G_t); exp(G_last - G_t). Padded to 8 floats (two 16-byte copies).
struct TokenFactors {
  float k_scale, q_factor, beta, grow, key_decay, pad[3];
};

/// One (slot, value head) of the workspace, in floats: T (float32) and P (TF32), [kChunk][kChunk]
/// each, then the kChunk tokens' factors.
constexpr int kWorkT = 0;
constexpr int kWorkP = kChunk * kChunk;
constexpr int kWorkFactors = 2 * kChunk * kChunk;
constexpr int kChunkWorkFloats = kWorkFactors + kChunk * static_cast<int>(sizeof(TokenFactors) / sizeof(float));

/// Workspace slots a call needs: one more than the last slot any chunk can take.
MLLM_HOST_DEVICE constexpr std::int64_t chunk_slots(std::int64_t tokens, std::int64_t num_seqs) {
  return num_seqs + tokens / kChunk + 1;
}

/// The slot of chunk `chunk` of sequence `seq`, whose first token is `bos`.
MLLM_HOST_DEVICE constexpr std::int64_t chunk_slot(std::int64_t seq, std::int64_t bos, std::int64_t chunk) {
  return seq + bos / kChunk + chunk;
}

/// The workspace floats of (slot, value head h).
MLLM_DEVICE float* chunk_work(float* work, std::int64_t slot, int h, int num_v_heads) {
  return work + (slot * num_v_heads + h) * static_cast<std::int64_t>(kChunkWorkFloats);
}

/// Whether sequence s is the chunked kernels' (at least min_tokens tokens, bounds that the
/// wrapper's validation accepts); sets its first and last-plus-one tokens.
MLLM_DEVICE bool chunked_sequence(const host::GdnParams& p, std::int64_t s, std::int64_t min_tokens,
                                  std::int64_t& bos, std::int64_t& eos) {
  bos = p.cu_seqlens[s], eos = p.cu_seqlens[s + 1];
  return eos - bos >= min_tokens && eos - bos > 0 && bos >= 0 && eos <= p.tokens;
}

/// This thread's pieces of a [kChunk, kWidth] array, 8 elements each: piece j is columns
/// column() .. + 8 of token token(j); kWidth / 8 consecutive threads share a token.
template <int kWidth>
struct RowPieces {
  static constexpr int kPerRow = kWidth / 8;
  static constexpr int kPerThread = kChunk * kPerRow / kChunkThreads;
  static_assert(kChunkThreads % kPerRow == 0 && kPerThread > 0, "whole rows a pass of the block");
  static MLLM_DEVICE int token(int j) { return (static_cast<int>(threadIdx.x) + j * kChunkThreads) / kPerRow; }
  static MLLM_DEVICE int column() { return static_cast<int>(threadIdx.x) % kPerRow * 8; }
};

/// Eight elements of T (16 bytes), kept as four 32-bit registers: what a 16-byte load gives, so
/// that loads that take the element-wise path join the vector ones without repacking (which
/// would wait for the loads where they are issued).
using Piece = uint4;

/// The eight elements of a piece of T, as floats.
template <typename T>
MLLM_DEVICE void piece_floats(const Piece& piece, float (&out)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) out[e] = cast<float>(reinterpret_cast<const T*>(&piece)[e]);
}

/// Stores x * scale rounded to TF32 at dst (eight floats, 16-byte aligned), as two float4s.
MLLM_DEVICE void store_scaled_tf32(float* dst, const float (&x)[8], float scale) {
#pragma unroll
  for (int e = 0; e < 8; e += 4) {
    *reinterpret_cast<float4*>(dst + e) = make_float4(mma::to_tf32(x[e] * scale), mma::to_tf32(x[e + 1] * scale),
                                                      mma::to_tf32(x[e + 2] * scale), mma::to_tf32(x[e + 3] * scale));
  }
}

/// Whether rows of a [tokens, heads, dim] tensor at `base` with these strides start 16-byte
/// aligned at every multiple of 8 columns: then pieces load as one vector each.
template <typename T>
MLLM_DEVICE bool pieces_aligned(const void* base, std::int64_t s0, std::int64_t s1) {
  return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && (s0 * sizeof(T)) % 16 == 0 && (s1 * sizeof(T)) % 16 == 0;
}

/// Loads this thread's pieces of a [kChunk, kWidth] slice of a [tokens, heads, dim] tensor:
/// `base` points at the slice's first token and column, `stride` is the token stride; elements
/// of tokens past n, or of columns at or past `columns`, are zero. `aligned`: see pieces_aligned.
template <typename T, int kWidth>
MLLM_DEVICE void load_pieces(Piece (&out)[RowPieces<kWidth>::kPerThread], const T* base, std::int64_t stride, int n,
                             int columns, bool aligned) {
  using Rows = RowPieces<kWidth>;
  const int c = Rows::column();
#pragma unroll
  for (int j = 0; j < Rows::kPerThread; ++j) {
    const int t = Rows::token(j);
    const T* at = base + t * stride + c;
    if (t < n && aligned && c + 8 <= columns) {
      out[j] = *reinterpret_cast<const Piece*>(at);
    } else {
      AlignedVector<T, 8> v;
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = t < n && c + e < columns ? at[e] : cast<T>(0.0f);
      out[j] = *reinterpret_cast<const Piece*>(&v);
    }
  }
}

}  // namespace mllm_kernel::device::gdn
