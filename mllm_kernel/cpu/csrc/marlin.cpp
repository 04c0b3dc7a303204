// CPU side of the Marlin-format weight-only GEMM (format and checks: mllm_kernel/marlin.hpp):
//   marlin_gemm(a, c, b, scales, zeros, g_idx, size_m, size_n, size_k, num_bits, num_threads)
//       4- or 8-bit weights; body in
//       mllm_kernel/cpu/marlin_gemm.hpp, Highway SIMD chosen at run time, on the module's thread
//       pool: K split across threads for decode, the 64-column tiles otherwise
//   gptq_marlin_repack(b_q_weight, perm, out, size_k, size_n, num_bits, num_threads)
//   awq_marlin_repack(b_q_weight, out, size_k, size_n, num_bits, num_threads)
// The repacks gather each output word from the checkpoint, as the CUDA ones do.
#include <mllm_kernel/integer.hpp>
#include <mllm_kernel/marlin.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/marlin_gemm.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/marlin_gemm.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/cpu/types.hpp>

#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <cstdint>

namespace mllm_kernel::cpu {

namespace detail {

template <typename T>
void run_marlin_gemm(mllm_kernel::TensorView a, mllm_kernel::TensorView c, mllm_kernel::TensorView b,
                     mllm_kernel::TensorView scales, mllm_kernel::TensorView zeros, mllm_kernel::TensorView g_idx,
                     std::int64_t size_m, std::int64_t size_n, std::int64_t size_k, std::int64_t num_bits,
                     std::int64_t num_threads) {
  const host::MarlinGemmParams p =
      host::check_marlin_gemm<kDLCPU, T>(a, c, b, scales, zeros, g_idx, num_bits, size_m, size_n, size_k);
  if (p.m == 0) return;
  auto* fn = MLLM_KERNEL_CPU_DISPATCH(MarlinGemm<T>);
  const std::int64_t tiles = p.n / marlin::kTileN, blocks = p.k / marlin::kTileK;
  // Decode (one pass over the weights): K is split, so that each thread streams one contiguous
  // run of whole rows of the repacked weights, and the parts are added after. More rows of a:
  // the tiles are split, each thread reading its columns of every row.
  const std::int64_t weight_bytes = p.k * p.n * p.bits / 8;
  const std::int64_t parts =
      std::min({num_threads, blocks, weight_bytes / kMinBytesPerThread, std::int64_t{kMaxThreads}});
  if (p.m <= kMarlinRows && parts > 1) {
    // Every part writes all of its [M, N] sums: no need to clear them first.
    auto partials = hwy::AllocateAligned<float>(static_cast<std::size_t>(parts * p.m * p.n));
    host::RuntimeCheck(partials != nullptr, "out of memory for ", parts, " partial sums of [", p.m, ", ", p.n, "]");
    parallel_for(parts, kMinBytesPerThread, parts, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t part = begin; part < end; ++part) {
        fn(p, 0, tiles, blocks * part / parts, blocks * (part + 1) / parts, partials.get() + part * p.m * p.n);
      }
    });
    auto* add = MLLM_KERNEL_CPU_DISPATCH(MarlinAddParts<T>);
    parallel_for(tiles, p.m * marlin::kTileN * 4 * (parts + 1), num_threads, [&](std::int64_t begin, std::int64_t end) {
      add(p, partials.get(), parts, begin * marlin::kTileN, end * marlin::kTileN);
    });
    return;
  }
  // A tile streams K / 16 blocks of 128 x bits bytes for every 4 rows of a.
  parallel_for(tiles, p.k * 8 * p.bits * host::div_ceil(p.m, std::int64_t{kMarlinRows}), num_threads,
               [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end, 0, blocks, nullptr); });
}

inline void repack(const host::MarlinRepackParams& p, std::int64_t num_threads) {
  const std::int64_t rows = p.k / marlin::kTileK, row_words = p.n * marlin::kTileK * p.bits / 32;
  parallel_for(rows, row_words * 4 * 2, num_threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      for (std::int64_t w = 0; w < row_words; ++w) p.out[r * row_words + w] = host::marlin_repacked_word(p, r, w);
    }
  });
}

}  // namespace detail

/// c [M, N] = a [M, K] @ dequant(b) for Marlin-format weights of num_bits bits: 4 (uint4b8
/// when zeros is empty, uint4 with zero points otherwise) or 8 (uint8b128); a, c and scales
/// float16, bfloat16 or float32 alike.
inline void marlin_gemm(mllm_kernel::TensorView a, mllm_kernel::TensorView c, mllm_kernel::TensorView b,
                        mllm_kernel::TensorView scales, mllm_kernel::TensorView zeros, mllm_kernel::TensorView g_idx,
                        std::int64_t size_m, std::int64_t size_n, std::int64_t size_k, std::int64_t num_bits,
                        std::int64_t num_threads) {
  visit_float_dtype(a.dtype(), [&](auto tag) {
    detail::run_marlin_gemm<decltype(tag)>(a, c, b, scales, zeros, g_idx, size_m, size_n, size_k, num_bits,
                                           num_threads);
  });
}

inline void gptq_marlin_repack(mllm_kernel::TensorView b_q_weight, mllm_kernel::TensorView perm, mllm_kernel::TensorView out,
                               std::int64_t size_k, std::int64_t size_n, std::int64_t num_bits,
                               std::int64_t num_threads) {
  const host::MarlinRepackParams p =
      host::check_marlin_repack<kDLCPU>(b_q_weight, &perm, out, size_k, size_n, num_bits, false);
  for (std::int64_t k = 0; p.perm != nullptr && k < size_k; ++k) {
    host::RuntimeCheck(p.perm[k] >= 0 && p.perm[k] < size_k, "perm: values must lie in [0, ", size_k, "), got ",
                       p.perm[k], " at ", k);
  }
  detail::repack(p, num_threads);
}

inline void awq_marlin_repack(mllm_kernel::TensorView b_q_weight, mllm_kernel::TensorView out, std::int64_t size_k,
                              std::int64_t size_n, std::int64_t num_bits, std::int64_t num_threads) {
  detail::repack(host::check_marlin_repack<kDLCPU>(b_q_weight, nullptr, out, size_k, size_n, num_bits, true),
                 num_threads);
}

}  // namespace mllm_kernel::cpu
