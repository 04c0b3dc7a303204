// Marlin's weight-only quantized format (GPTQ / AWQ weights as serving engines prepare them),
// shared by the repack kernels and the GEMMs on both devices: where each packed value comes
// from, where each column's scale and zero point sit, and the argument checks.
//
// Repacked weights are [K / 16, N * 16 * bits / 32] int32: row r holds K rows 16r..16r+15 as
// N / 64 tiles of 16 x 64 values, each tile 1024 * bits / 32 consecutive words. Within a tile
// the values are ordered for the m16n8k16 tensor-core MMA: thread t of a warp owns words
// [t * 32 / per_word, (t + 1) * 32 / per_word), i.e. 32 values: for each 16-column sub-tile j
// and each 8-column half of it, the four B-fragment values of column t / 4 at rows
// 2(t % 4), +1, +8, +9. Inside a word the values are interleaved for the dequantizer:
// 4-bit words hold their 8 values in the order 0, 2, 4, 6, 1, 3, 5, 7 (nibble q holds value
// interleaved(4, q)), 8-bit words hold 4 as 0, 2, 1, 3.
//
// Scales [groups, N] come permuted within each run of 64 columns (column c of the run at
// (c % 8) * 8 + c / 8) when there are several groups, within each run of 32 (column c at
// 8 ((c % 8) / 2) + 2 (c / 8) + c % 2) when there is one (channel-wise). Zero points
// [groups, N * bits / 32] int32 follow the 64-column permutation, then the word interleave.
#pragma once

#include <mllm_kernel/host_device.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace mllm_kernel::marlin {

constexpr int kTileK = 16;
constexpr int kTileN = 64;

/// Words in one 16 x 64 tile.
MLLM_HOST_DEVICE constexpr int tile_words(int bits) { return kTileK * kTileN * bits / 32; }

/// The vLLM ScalarType id: fields packed from the lowest bit, widths 8, 8, 1, 32, 1, 8.
constexpr std::int64_t scalar_type_id(int exponent, int mantissa, bool is_signed, std::int64_t bias,
                                      bool finite_values_only, int nan_repr) {
  return static_cast<std::int64_t>(exponent) | static_cast<std::int64_t>(mantissa) << 8 |
         static_cast<std::int64_t>(is_signed) << 16 | (bias & 0xffffffffLL) << 17 |
         static_cast<std::int64_t>(finite_values_only) << 49 | static_cast<std::int64_t>(nan_repr) << 50;
}
constexpr std::int64_t kUint4 = scalar_type_id(0, 4, false, 0, false, 1);
constexpr std::int64_t kUint4b8 = scalar_type_id(0, 4, false, 8, false, 1);
constexpr std::int64_t kUint8b128 = scalar_type_id(0, 8, false, 128, false, 1);

/// Slot q of a word holds value interleaved(q) of its run (the dequantizer's order): the even
/// values fill the low half of the slots, the odd ones the high half. (Arithmetic rather than a
/// table, which a runtime index would put in local memory.)
MLLM_HOST_DEVICE constexpr int interleaved(int bits, int slot) {
  const int half = 16 / bits;  // slots in half a word
  return 2 * (slot % half) + slot / half;
}
/// The slot of a word that holds value v of its run (the inverse of `interleaved`).
MLLM_HOST_DEVICE constexpr int slot_of(int bits, int v) { return v / 2 + v % 2 * (16 / bits); }
static_assert(interleaved(4, 1) == 2 && interleaved(4, 4) == 1 && interleaved(8, 1) == 2 && interleaved(8, 2) == 1);
static_assert(slot_of(4, 1) == 4 && slot_of(4, 6) == 3 && slot_of(8, 1) == 2 && slot_of(8, 3) == 3);

struct TileCoord {
  int k;  // row in the tile, 0..15
  int n;  // column in the tile, 0..63
};

/// Where slot `slot` of word `word` of a repacked tile comes from.
MLLM_HOST_DEVICE constexpr TileCoord weight_coord(int bits, int word, int slot) {
  const int per_word = 32 / bits;
  const int index = word * per_word;               // the word's first value in tile order
  const int thread = index / 32, j = index % 32 / 8;
  const int v = index % 8 + interleaved(bits, slot);  // 0..7: half (v / 4) and row (v % 4)
  const int r = v % 4;
  return {2 * (thread % 4) + r % 2 + r / 2 * 8, 16 * j + thread / 4 + 8 * (v / 4)};
}

/// Position of column n's scale in a permuted scale row.
MLLM_HOST_DEVICE constexpr std::int64_t grouped_scale_pos(std::int64_t n) {
  const int c = static_cast<int>(n % 64);
  return n - c + c % 8 * 8 + c / 8;
}
MLLM_HOST_DEVICE constexpr std::int64_t channel_scale_pos(std::int64_t n) {
  const int c = static_cast<int>(n % 32);
  return n - c + c % 8 / 2 * 8 + c / 8 * 2 + c % 2;
}
/// Word and slot of column n's zero point in a packed zero-point row.
MLLM_HOST_DEVICE constexpr std::int64_t zero_point_word(int bits, std::int64_t n) {
  return grouped_scale_pos(n) / (32 / bits);
}
MLLM_HOST_DEVICE constexpr int zero_point_slot(int bits, std::int64_t n) {
  return slot_of(bits, static_cast<int>(grouped_scale_pos(n) % (32 / bits)));
}

}  // namespace mllm_kernel::marlin

namespace mllm_kernel::host {

/// The sizes every Marlin-format weight has: 4 or 8 bits, K in whole 16-row tiles, N in whole
/// 64-column tiles.
inline void check_marlin_sizes(std::int64_t bits, std::int64_t size_k, std::int64_t size_n) {
  RuntimeCheck(bits == 4 || bits == 8, "num_bits must be 4 or 8, got ", bits);
  RuntimeCheck(size_n % marlin::kTileN == 0 && size_n > 0, "size_n = ", size_n, " must be a positive multiple of ",
               marlin::kTileN);
  RuntimeCheck(size_k % marlin::kTileK == 0 && size_k > 0, "size_k = ", size_k, " must be a positive multiple of ",
               marlin::kTileK);
}

struct MarlinGemmParams {
  const void* a;
  void* c;
  const std::int32_t* b;
  const void* scales;
  const std::int32_t* zeros;  // nullptr: the type's bias is the zero point
  const std::int32_t* g_idx;  // nullptr: groups of group_size consecutive rows
  std::int64_t m, n, k;
  std::int64_t lda;           // row stride of a
  std::int64_t groups;        // rows of scales
  std::int64_t group_size;    // rows of K per group when g_idx is null and groups > 1
  int bits;
};

/// An act-order group id as a row of the scales: out-of-range ids read a valid row.
MLLM_HOST_DEVICE int valid_group(const MarlinGemmParams& p, int g) {
  return g < 0 ? 0 : (g >= p.groups ? static_cast<int>(p.groups) - 1 : g);
}

/// Checks a Marlin-format weight's tensors (b the repacked weights; scales [groups, N] of T;
/// zeros [groups, N * bits / 32] int32, 4-bit weights only, or empty; g_idx [K] int32 or empty) on
/// `device`, and returns the parameters with the activation and output left unset.
template <DLDeviceType kDevice, typename T>
MarlinGemmParams check_marlin_weights(mllm_kernel::TensorView b, mllm_kernel::TensorView scales, mllm_kernel::TensorView zeros,
                                      mllm_kernel::TensorView g_idx, std::int64_t bits, std::int64_t size_n,
                                      std::int64_t size_k, SymbolicDevice& device) {
  check_marlin_sizes(bits, size_k, size_n);
  SymbolicSize N{"size_n"}, K{"size_k"}, groups{"groups"}, z_rows{"zero-point rows"};
  N.bind(size_n, "size_n");
  K.bind(size_k, "size_k");
  (void)TensorMatcher({size_k / marlin::kTileK, size_n * marlin::kTileK * bits / 32})
      .with_dtype<std::int32_t>()
      .with_device<kDevice>(device)
      .verify(b, "b_q_weight");
  (void)TensorMatcher({groups, N}).template with_dtype<T>().template with_device<kDevice>(device).verify(scales, "b_scales");
  const std::int64_t G = groups.unwrap();
  RuntimeCheck(G >= 1, "b_scales must have at least one row");
  const bool has_zeros = zeros.numel() > 0, has_g_idx = g_idx.numel() > 0;
  if (has_zeros) {
    (void)TensorMatcher({z_rows, size_n * bits / 32})
        .with_dtype<std::int32_t>()
        .with_device<kDevice>(device)
        .verify(zeros, "b_zeros");
    RuntimeCheck(z_rows.unwrap() == G, "b_zeros has ", z_rows.unwrap(), " rows but b_scales has ", G);
    RuntimeCheck(bits == 4, "zero points are supported for 4-bit weights only");
  }
  std::int64_t group_size = size_k;
  if (has_g_idx) {
    (void)TensorMatcher({K}).with_dtype<std::int32_t>().with_device<kDevice>(device).verify(g_idx, "g_idx");
  } else if (G > 1) {
    RuntimeCheck(size_k % G == 0 && size_k / G % marlin::kTileK == 0, "b_scales has ", G,
                 " groups, which do not split size_k = ", size_k, " into multiples of ", marlin::kTileK, " rows");
    group_size = size_k / G;
  }
  return MarlinGemmParams{nullptr, nullptr, static_cast<const std::int32_t*>(b.data_ptr()), scales.data_ptr(),
                          has_zeros ? static_cast<const std::int32_t*>(zeros.data_ptr()) : nullptr,
                          has_g_idx ? static_cast<const std::int32_t*>(g_idx.data_ptr()) : nullptr,
                          0, size_n, size_k, 0, G, group_size, static_cast<int>(bits)};
}

/// Checks a GEMM's tensors against the sizes the caller states and returns the parameters.
/// a [M, K] (rows may be strided) and c [M, N] of T (on CUDA starting 16-byte aligned), and the
/// weight's tensors as for check_marlin_weights.
template <DLDeviceType kDevice, typename T>
MarlinGemmParams check_marlin_gemm(mllm_kernel::TensorView a, mllm_kernel::TensorView c, mllm_kernel::TensorView b,
                                   mllm_kernel::TensorView scales, mllm_kernel::TensorView zeros,
                                   mllm_kernel::TensorView g_idx, std::int64_t bits, std::int64_t size_m,
                                   std::int64_t size_n, std::int64_t size_k) {
  check_marlin_sizes(bits, size_k, size_n);
  SymbolicSize M{"size_m"}, N{"size_n"}, K{"size_k"}, lda{"a row stride"};
  M.bind(size_m, "size_m");
  N.bind(size_n, "size_n");
  K.bind(size_k, "size_k");
  SymbolicDevice device;
  (void)TensorMatcher({M, K}).with_strides({lda, 1}).template with_dtype<T>().template with_device<kDevice>(device).verify(a, "a");
  (void)TensorMatcher({M, N}).template with_dtype<T>().template with_device<kDevice>(device).verify(c, "c");
  if constexpr (kDevice == kDLCUDA) {  // (the CUDA kernels store 16 bytes at once)
    RuntimeCheck(reinterpret_cast<std::uintptr_t>(c.data_ptr()) % 16 == 0, "c: must start 16-byte aligned");
  }
  MarlinGemmParams p = check_marlin_weights<kDevice, T>(b, scales, zeros, g_idx, bits, size_n, size_k, device);
  p.a = a.data_ptr();
  p.c = c.data_ptr();
  p.m = size_m;
  p.lda = lda.unwrap();
  return p;
}

struct MarlinRepackParams {
  const std::int32_t* in;
  const std::int32_t* perm;  // nullptr: rows in order
  std::int32_t* out;
  std::int64_t k, n;
  int bits;
  bool awq;  // in is AWQ's [K, N * bits / 32] (packed along N), else GPTQ's [K * bits / 32, N]
};

/// Checks a repack's tensors: the checkpoint's packed weights, a row permutation (GPTQ
/// act-order; null or empty: none) and the output [K / 16, N * 16 * bits / 32].
template <DLDeviceType kDevice>
MarlinRepackParams check_marlin_repack(mllm_kernel::TensorView in, const mllm_kernel::TensorView* perm,
                                       mllm_kernel::TensorView out, std::int64_t size_k, std::int64_t size_n,
                                       std::int64_t bits, bool awq) {
  check_marlin_sizes(bits, size_k, size_n);
  const std::int64_t per_word = 32 / bits;
  SymbolicDevice device;
  if (awq) {
    (void)TensorMatcher({size_k, size_n / per_word})
        .with_dtype<std::int32_t>()
        .with_device<kDevice>(device)
        .verify(in, "b_q_weight");
  } else {
    (void)TensorMatcher({size_k / per_word, size_n})
        .with_dtype<std::int32_t>()
        .with_device<kDevice>(device)
        .verify(in, "b_q_weight");
  }
  const bool has_perm = perm != nullptr && perm->numel() > 0;
  if (has_perm) {
    (void)TensorMatcher({size_k}).with_dtype<std::int32_t>().with_device<kDevice>(device).verify(*perm, "perm");
  }
  (void)TensorMatcher({size_k / marlin::kTileK, size_n * marlin::kTileK / per_word})
      .with_dtype<std::int32_t>()
      .with_device<kDevice>(device)
      .verify(out, "out");
  return MarlinRepackParams{static_cast<const std::int32_t*>(in.data_ptr()),
                            has_perm ? static_cast<const std::int32_t*>(perm->data_ptr()) : nullptr,
                            static_cast<std::int32_t*>(out.data_ptr()),
                            size_k,
                            size_n,
                            static_cast<int>(bits),
                            awq};
}

/// Word `w` (0 .. N * 16 * bits / 32) of row `r` of the repacked weights.
MLLM_HOST_DEVICE std::int32_t marlin_repacked_word(const MarlinRepackParams& p, std::int64_t r,
                                                          std::int64_t w) {
  const int per_word = 32 / p.bits, words = marlin::tile_words(p.bits);
  const std::uint32_t mask = (1u << p.bits) - 1;
  const std::int64_t tile = w / words;
  std::uint32_t packed = 0;
  for (int slot = 0; slot < per_word; ++slot) {
    const marlin::TileCoord at = marlin::weight_coord(p.bits, static_cast<int>(w % words), slot);
    std::int64_t k = r * marlin::kTileK + at.k;
    if (p.perm) k = p.perm[k];
    if (k < 0 || k >= p.k) continue;  // a bad permutation (the wrappers refuse it) reads nothing
    const std::int64_t n = tile * marlin::kTileN + at.n;
    std::uint32_t value;
    if (p.awq) {
      // AWQ packs along N with the same interleave inside each word.
      const auto word = static_cast<std::uint32_t>(p.in[k * (p.n / per_word) + n / per_word]);
      value = word >> (p.bits * marlin::slot_of(p.bits, static_cast<int>(n % per_word))) & mask;
    } else {
      const auto word = static_cast<std::uint32_t>(p.in[k / per_word * p.n + n]);
      value = word >> (p.bits * (k % per_word)) & mask;
    }
    packed |= value << (p.bits * slot);
  }
  return static_cast<std::int32_t>(packed);
}

}  // namespace mllm_kernel::host
