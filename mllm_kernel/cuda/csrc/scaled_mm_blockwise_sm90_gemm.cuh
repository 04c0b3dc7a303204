// A Hopper (sm_90a) FP8 GEMM with block scales, DeepSeek-V3's format, built from CUTLASS's
// collective builders:
//
//   D[m, n] = round(sum over K blocks kb of scale_a[m, kb] * scale_b[n / 128, kb] * acc_kb[m, n])
//
// acc_kb is the float32 product of A [M, K] and B [K, N] (float8_e4m3, A row-major, B column-
// major) over the 128 values of K block kb. The mainloop is CUTLASS's blockwise one with its
// MMA loop replaced (scaled_mm_blockwise_sm90_mainloop.cuh): each block's partial sums join the
// float32 total, both scales applied, while the next block's MMAs run. Scales, both K-major in
// memory: A's per row and K block (scale_a[m, kb] at m * lda_scale + kb, the row-major [M, K/128]
// tensor per_token_group_quant_fp8 writes by default) or, kScaleAMajorM, M-major (scale_a[m, kb]
// at m + kb * lda_scale: its column_major_scales output), B's per 128 x 128 block (scale_b[nb, kb]
// at nb * ldb_scale + kb, a row-major [N/128, K/128] tensor as checkpoints store it). K-major
// scales of A are read with predicated cp.async, so any M and row stride works; M-major ones by
// TMA, which reads M rounded up to 4 rows of each K block (CUTLASS checks the extent's
// alignment) and needs the K blocks 16 bytes apart.
#pragma once

#include "scaled_mm_blockwise_sm90_mainloop.cuh"
#include "scaled_mm_sm90_gemm.cuh"

#include <cutlass/detail/blockwise_scale_layout.hpp>

#include <type_traits>

namespace mllm_kernel::device::gemm_sm90 {

/// The CUTLASS GEMM of one configuration (TileConfig); ElementD cutlass::half_t or
/// cutlass::bfloat16_t. kScaleBlock: the K block of both scales and the N block of B's.
template <class ElementD, class Config, bool kScaleAMajorM>
struct BlockwiseGemmSm90 {
  static constexpr int kScaleBlock = 128;
  using ElementAB = cutlass::float_e4m3_t;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignAB = 16;
  static constexpr int kAlignD = 8;

  using ScaleConfig =
      cutlass::detail::Sm90BlockwiseScaleConfig<1, kScaleBlock, kScaleBlock,
                                                kScaleAMajorM ? cute::GMMA::Major::MN : cute::GMMA::Major::K,
                                                cute::GMMA::Major::K>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

  using EpilogueSchedule = std::conditional_t<Config::pingpong, cutlass::epilogue::TmaWarpSpecialized,
                                              cutlass::epilogue::TmaWarpSpecializedCooperative>;
  using KernelSchedule = std::conditional_t<Config::pingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8Blockwise,
                                            cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise>;

  // The scales are applied in the mainloop: the epilogue only rounds (D = acc, no source).
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Config::TileShape, typename Config::ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignD, ElementD, LayoutD, kAlignD,
      EpilogueSchedule>::CollectiveOp;

  using CollectiveMainloop = OverlappedBlockwiseMainloop<typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, cute::tuple<cutlass::layout::RowMajor, LayoutSFA>,
      kAlignAB, ElementAB, cute::tuple<cutlass::layout::ColumnMajor, LayoutSFB>, kAlignAB, float,
      typename Config::TileShape, typename Config::ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp>;

  using Gemm = PersistentGemm<CollectiveMainloop, CollectiveEpilogue>;

  /// Rows of A's scales the kernel reads in each K block of an M-row problem: M, or M-major
  /// scales' M rounded up to 4 (16 bytes, TMA's grain).
  static int scale_a_rows(int m) { return kScaleAMajorM ? (m + 3) / 4 * 4 : m; }

  /// A's scale layout for an M x K problem whose scale tensor has rows (K-major) or K blocks
  /// (M-major: scale_a_rows, all of which are read) `ld` floats apart.
  static LayoutSFA scale_a_layout(int m, int n, int k, int ld) {
    constexpr int kStridedMode = kScaleAMajorM ? 1 : 0;  // the mode `ld` steps: K blocks or rows
    auto layout = ScaleConfig::tile_atom_to_shape_SFA(cute::make_shape(scale_a_rows(m), n, k, 1));
    auto stride = layout.stride();
    cute::get<kStridedMode, 1>(stride) = ld;
    return LayoutSFA{layout.shape(), stride};
  }

  /// B's scale layout for an N x K problem whose scale tensor has rows `ld` floats apart.
  static LayoutSFB scale_b_layout(int m, int n, int k, int ld) {
    auto layout = ScaleConfig::tile_atom_to_shape_SFB(cute::make_shape(m, n, k, 1));
    auto stride = layout.stride();
    cute::get<0, 1>(stride) = ld;
    return LayoutSFB{layout.shape(), stride};
  }
};

}  // namespace mllm_kernel::device::gemm_sm90
