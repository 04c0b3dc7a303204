// An Ampere/Ada (sm_80 to sm_89) GEMM with scaled output, on CUTLASS 2.x's warp-level MMAs
// (mma.sync) and its epilogue visitor tree:
//
//   D[m, n] = round(scale_a[m] * (scale_b[n] * acc[m, n]) + bias[n])
//
// acc is the int8 (int32 accumulator, sm_80 and later) or float8_e4m3 (float32 accumulator,
// sm_89 and later) product of A [M, K] row-major and B [K, N] column-major. scale_a is a
// vector or one value (a run-time stride of 0); scale_b and the bias are vectors (the
// caller expands a single scale_b), the bias may be absent (a null pointer reads zeros).
#pragma once

// The visitor headers need the GEMM's first (they are not self-contained).
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/default_gemm_universal_with_visitor.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle.h>
#include <cutlass/numeric_conversion.h>
// clang-format off
#include <cutlass/epilogue/threadblock/fusion/visitors.hpp>
// clang-format on

#include <cstdint>
#include <type_traits>

namespace mllm_kernel::device::gemm_sm80 {

/// One kernel configuration: threadblock tile, warp tile (warps = tile / warp tile; a warp K
/// below the tile's splits K across warps) and pipeline stages.
template <int kTileM, int kTileN, int kTileK, int kWarpM, int kWarpN, int kWarpK, int kStages>
struct TileConfig {
  using TileShape = cutlass::gemm::GemmShape<kTileM, kTileN, kTileK>;
  using WarpShape = cutlass::gemm::GemmShape<kWarpM, kWarpN, kWarpK>;
  static constexpr int stages = kStages;
};

/// The CUTLASS GEMM of one configuration. ElementAB is int8_t (sm_80 MMAs) or
/// cutlass::float_e4m3_t (sm_89 MMAs), ElementD cutlass::half_t or cutlass::bfloat16_t.
template <class ElementAB, class ElementD, class Config>
struct GemmSm80 {
  static constexpr bool kFp8 = !std::is_same_v<ElementAB, std::int8_t>;
  using ElementAcc = std::conditional_t<kFp8, float, std::int32_t>;
  using ArchTag = std::conditional_t<kFp8, cutlass::arch::Sm89, cutlass::arch::Sm80>;
  using Operator = std::conditional_t<kFp8, cutlass::arch::OpMultiplyAdd, cutlass::arch::OpMultiplyAddSaturate>;
  using InstructionShape = cutlass::gemm::GemmShape<16, 8, 32>;
  using TileShape = typename Config::TileShape;
  using WarpShape = typename Config::WarpShape;
  static constexpr int kAlignAB = 16;  // 16 bytes of 8-bit elements: K a multiple of 16

  // The epilogue's threads visit 4 values at a time, as float (16-byte loads of the scales).
  // The GEMM's own epilogue is declared with the same element and width, so that its
  // accumulator fragments are laid out as this thread map walks them.
  using ElementEpilogue = float;
  static constexpr int kEpilogueWidth = 4;
  using ThreadMap = cutlass::epilogue::threadblock::OutputTileThreadLayout<TileShape, WarpShape, ElementEpilogue,
                                                                           kEpilogueWidth, 1>;
  using Acc = cutlass::epilogue::threadblock::VisitorAccFetch;
  using ScaleA = cutlass::epilogue::threadblock::VisitorColBroadcast<ThreadMap, float,
                                                                     cute::Stride<std::int64_t, cute::_0, cute::_0>>;
  using ScaleB = cutlass::epilogue::threadblock::VisitorRowBroadcast<ThreadMap, float,
                                                                     cute::Stride<cute::_0, cute::_1, cute::_0>>;
  using Bias = cutlass::epilogue::threadblock::VisitorRowBroadcast<ThreadMap, ElementD,
                                                                   cute::Stride<cute::_0, cute::_1, cute::_0>>;
  using Mul = cutlass::epilogue::threadblock::VisitorCompute<cutlass::multiplies, float, float,
                                                             cutlass::FloatRoundStyle::round_to_nearest>;
  using Fma = cutlass::epilogue::threadblock::VisitorCompute<cutlass::multiply_add, ElementD, float,
                                                             cutlass::FloatRoundStyle::round_to_nearest>;
  using Scaled = cutlass::epilogue::threadblock::Sm80EVT<Mul, ScaleB, Acc>;
  using Result = cutlass::epilogue::threadblock::Sm80EVT<Fma, ScaleA, Scaled, Bias>;
  using Store = cutlass::epilogue::threadblock::VisitorAuxStore<ThreadMap, ElementD,
                                                                cutlass::FloatRoundStyle::round_to_nearest,
                                                                cute::Stride<std::int64_t, cute::_1, cute::_0>>;
  using Tree = cutlass::epilogue::threadblock::Sm80EVT<Store, Result>;

  using Kernel = typename cutlass::gemm::kernel::DefaultGemmWithVisitor<
      ElementAB, cutlass::layout::RowMajor, cutlass::ComplexTransform::kNone, kAlignAB, ElementAB,
      cutlass::layout::ColumnMajor, cutlass::ComplexTransform::kNone, kAlignAB, ElementEpilogue,
      cutlass::layout::RowMajor, kEpilogueWidth, ElementAcc, float, cutlass::arch::OpClassTensorOp, ArchTag, TileShape, WarpShape, InstructionShape, Tree,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, Config::stages, Operator, 1>::GemmKernel;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  /// The tree's arguments: scale_a a vector of M values, or one value (a_is_vector false);
  /// scale_b N values; bias N values or null; d the output with row stride ldd.
  static typename Tree::Arguments arguments(const float* scale_a, bool a_is_vector, const float* scale_b,
                                            const ElementD* bias, ElementD* d, std::int64_t ldd) {
    return typename Tree::Arguments{
        {
            {scale_a, 0.0f, cute::make_stride(std::int64_t{a_is_vector ? 1 : 0}, cute::_0{}, cute::_0{})},
            {{scale_b, 0.0f, {}}, {}, {}},
            {bias, ElementD(0), {}},
            {},
        },
        {d, cute::make_stride(ldd, cute::_1{}, cute::_0{})},
    };
  }
};

}  // namespace mllm_kernel::device::gemm_sm80
