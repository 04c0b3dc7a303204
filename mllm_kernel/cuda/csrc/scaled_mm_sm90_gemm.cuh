// A Hopper (sm_90a) GEMM with scaled output, built from CUTLASS's collective builders:
//
//   D[m, n] = round(scale_rows[m] * (scale_cols[n] * acc[m, n]) + bias(m, n))
//
// acc is the int8 (int32 accumulator) or float8_e4m3 (float32 accumulator) product of A [M, K]
// and B [K, N], both K-major (A row-major, B column-major: the only layout the 8-bit warpgroup
// MMAs take). Each scale is a vector or a single value, chosen at run time (CUTLASS's dynamic
// broadcast strides), so per-tensor, per-token and per-channel scales share one kernel. The bias
// is a vector along the columns, or absent (a null pointer reads zeros).
//
// Small M runs the transposed problem (Dᵀ = Bᵀ Aᵀ, the weight in the MMA's M position, where
// tiles are at least 64 wide) and stores Dᵀ column-major, which is D row-major:
// `GemmSm90<..., kColumnMajorD = true>`, with the caller swapping the operands
// (csrc/scaled_mm_sm90.cuh) and the epilogue the roles of rows and columns.
#pragma once

#include <mllm_kernel/errors.hpp>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

#include <cstdint>
#include <type_traits>

namespace mllm_kernel::device::gemm_sm90 {

using cute::_0;
using cute::_1;
using cute::Int;
using cute::Shape;
using cute::Stride;

/// One kernel configuration: CTA tile, cluster, and whether the mainloop runs ping-pong (two
/// consumer warpgroups on alternate tiles; small tiles) or cooperative (both on one tile).
/// Tiles are handed out by CUTLASS's persistent scheduler (the order is a run-time argument).
template <int kTileM, int kTileN, int kTileK, int kClusterM, int kClusterN, bool kPingpong>
struct TileConfig {
  using TileShape = Shape<Int<kTileM>, Int<kTileN>, Int<kTileK>>;
  using ClusterShape = Shape<Int<kClusterM>, Int<kClusterN>, _1>;
  static constexpr bool pingpong = kPingpong;
};

/// The device-level GEMM of a mainloop and an epilogue, its tiles handed out by CUTLASS's
/// persistent scheduler.
template <class Mainloop, class Epilogue>
using PersistentGemm = cutlass::gemm::device::GemmUniversalAdapter<cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, Mainloop, Epilogue, cutlass::gemm::PersistentScheduler>>;

/// A tile order's arguments: swizzle 1, 2, 4 or 8, raster 0, 1 or 2 (set_tile_order).
inline void check_tile_order(std::int64_t swizzle, std::int64_t raster) {
  using mllm_kernel::host::RuntimeCheck;
  RuntimeCheck(swizzle == 1 || swizzle == 2 || swizzle == 4 || swizzle == 8, "swizzle must be 1, 2, 4 or 8, got ",
               swizzle);
  RuntimeCheck(raster >= 0 && raster <= 2, "raster must be 0, 1 or 2, got ", raster);
}

/// Sets the persistent scheduler's tile order (checked): groups of `swizzle` (1, 2, 4, 8) tiles,
/// rastered by CUTLASS's heuristic (raster 0), along M (1) or along N (2).
template <class SchedulerArguments>
void set_tile_order(SchedulerArguments& scheduler, std::int64_t swizzle, std::int64_t raster) {
  check_tile_order(swizzle, raster);
  using Raster = cutlass::gemm::kernel::detail::RasterOrderOptions;
  scheduler.max_swizzle_size = static_cast<int>(swizzle);
  scheduler.raster_order = raster == 1 ? Raster::AlongM : raster == 2 ? Raster::AlongN : Raster::Heuristic;
}

/// The epilogue tree: fma(outer, mul(inner, acc), bias). `outer` (scales_a) is per GEMM row,
/// `inner` (scales_b) and the bias per GEMM column; kTransposed (the Dᵀ = Bᵀ Aᵀ problem) swaps
/// rows and columns for all three.
template <class TileShape, class ElementD, bool kTransposed>
struct ScaledEpilogue {
  // A per-row vector (or scalar: stride false) and a per-column one.
  using RowVector = cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, float, float, Stride<bool, _0, std::int64_t>>;
  using ColVector = cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float, float, Stride<_0, bool, std::int64_t>>;
  using Outer = std::conditional_t<kTransposed, ColVector, RowVector>;
  using Inner = std::conditional_t<kTransposed, RowVector, ColVector>;
  using Bias = std::conditional_t<
      kTransposed, cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, ElementD, ElementD, Stride<_1, _0, std::int64_t>>,
      cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, ElementD, ElementD, Stride<_0, _1, std::int64_t>>>;
  using Mul = cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float,
                                                     cutlass::FloatRoundStyle::round_to_nearest>;
  using Fma = cutlass::epilogue::fusion::Sm90Compute<cutlass::multiply_add, ElementD, float,
                                                     cutlass::FloatRoundStyle::round_to_nearest>;
  using Scaled = cutlass::epilogue::fusion::Sm90EVT<Mul, Inner, cutlass::epilogue::fusion::Sm90AccFetch>;
  using Tree = cutlass::epilogue::fusion::Sm90EVT<Fma, Outer, Scaled, Bias>;

  /// The tree's arguments: outer/inner point at float scales, a vector when the flag is set;
  /// bias may be null.
  static typename Tree::Arguments arguments(const float* outer, bool outer_is_vector, const float* inner,
                                            bool inner_is_vector, const ElementD* bias) {
    return typename Tree::Arguments{
        vector_args<Outer>(outer, outer_is_vector),
        {vector_args<Inner>(inner, inner_is_vector), {}, {}},
        {bias},
        {},
    };
  }

 private:
  template <class Node>
  static typename Node::Arguments vector_args(const float* ptr, bool is_vector) {
    if constexpr (std::is_same_v<Node, RowVector>) {
      return {ptr, 0.0f, cute::make_stride(is_vector, _0{}, std::int64_t{0})};
    } else {
      return {ptr, 0.0f, cute::make_stride(_0{}, is_vector, std::int64_t{0})};
    }
  }
};

/// The CUTLASS GEMM of one configuration. ElementAB is int8_t or cutlass::float_e4m3_t,
/// ElementD cutlass::half_t or cutlass::bfloat16_t; kColumnMajorD stores D transposed.
template <class ElementAB, class ElementD, class Config, bool kColumnMajorD>
struct GemmSm90 {
  static constexpr bool kFp8 = !std::is_same_v<ElementAB, std::int8_t>;
  using ElementAcc = std::conditional_t<kFp8, float, std::int32_t>;
  using LayoutD = std::conditional_t<kColumnMajorD, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  static constexpr int kAlignAB = 16;  // 16 bytes of 8-bit elements: K a multiple of 16
  static constexpr int kAlignD = 8;    // 16 bytes of 16-bit outputs

  using Epilogue = ScaledEpilogue<typename Config::TileShape, ElementD, kColumnMajorD>;
  using EpilogueSchedule = std::conditional_t<Config::pingpong, cutlass::epilogue::TmaWarpSpecialized,
                                              cutlass::epilogue::TmaWarpSpecializedCooperative>;
  // Fast accumulation (no periodic promotion into float32 registers) is what cuBLASLt and
  // every FP8 inference GEMM use; its error is far below the e4m3 inputs'.
  using KernelSchedule = std::conditional_t<
      kFp8,
      std::conditional_t<Config::pingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum,
                         cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum>,
      std::conditional_t<Config::pingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                         cutlass::gemm::KernelTmaWarpSpecializedCooperative>>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Config::TileShape, typename Config::ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, float, void, LayoutD, kAlignD, ElementD, LayoutD,
      kAlignD, EpilogueSchedule, typename Epilogue::Tree>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, cutlass::layout::RowMajor, kAlignAB, ElementAB,
      cutlass::layout::ColumnMajor, kAlignAB, ElementAcc, typename Config::TileShape, typename Config::ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;

  using Gemm = PersistentGemm<CollectiveMainloop, CollectiveEpilogue>;
};

}  // namespace mllm_kernel::device::gemm_sm90
