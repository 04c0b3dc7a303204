// W8A8 scaled GEMMs on Hopper (sm_90a), one module per kernel configuration:
//   scaled_mm_sm90<AB, Out, TileM, TileN, TileK, ClusterM, ClusterN, kPingpong, kSwapAB>(
//       out, mat_a, mat_b, scales_a, scales_b, bias, has_bias, workspace, swizzle, raster)
// out [M, N] (Out: fp16_t or bf16_t, rows dense) = (mat_a @ mat_b) * scales_a[m] * scales_b[n]
// (+ bias[n]), with mat_a [M, K] row-major and mat_b [K, N] column-major, both AB (int8_t or
// fp8_e4m3_t). scales_a holds 1 or M float32 values, scales_b 1 or N (per tensor, per token,
// per channel). kSwapAB runs the transposed problem, for small M (scaled_mm_sm90_gemm.cuh).
// TMA needs 16-byte aligned rows: K a multiple of 16, N of 8, the strides likewise.
// swizzle (1, 2, 4 or 8) and raster (0: CUTLASS's choice, 1: along M, 2: along N) set the order
// in which the persistent scheduler hands out tiles (L2 reuse of the operand panels).
#pragma once

#include "scaled_mm_common.cuh"
#include "scaled_mm_sm90_gemm.cuh"
#include <mllm_kernel/runtime.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/tensor_view.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>

#include <cstdint>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp8_e4m3_t;

template <typename AB, typename Out, int kTileM, int kTileN, int kTileK, int kClusterM, int kClusterN, bool kPingpong,
          bool kSwapAB>
void scaled_mm_sm90(mllm_kernel::TensorView out, mllm_kernel::TensorView mat_a, mllm_kernel::TensorView mat_b,
                    mllm_kernel::TensorView scales_a, mllm_kernel::TensorView scales_b, mllm_kernel::TensorView bias,
                    bool has_bias, mllm_kernel::TensorView workspace, std::int64_t swizzle, std::int64_t raster) {
  using namespace mllm_kernel::host;
  using namespace mllm_kernel::device::gemm_sm90;
  using namespace mllm_kernel::device::scaled_mm;
  using ElementAB = cutlass_t<AB>;
  using ElementD = cutlass_t<Out>;
  using Config = TileConfig<kTileM, kTileN, kTileK, kClusterM, kClusterN, kPingpong>;
  using Gemm = GemmSm90<ElementAB, ElementD, Config, kSwapAB>;
  using Adapter = typename Gemm::Gemm;

  SymbolicDevice device;
  const MmShape shape = check_mm_operands<AB, Out>(out, mat_a, mat_b, device);
  const std::int64_t m = shape.m, n = shape.n, k = shape.k;
  const bool a_vector = scales_are_vector(scales_a, device, m, "M", "mat_a", "scales_a");
  const bool b_vector = scales_are_vector(scales_b, device, n, "N", "mat_b", "scales_b");
  if (has_bias) {
    (void)TensorMatcher({n}).template with_dtype<Out>().with_device(device).verify(bias, "bias");
  }
  const std::int64_t workspace_bytes = check_workspace(workspace, device);
  check_tile_order(swizzle, raster);  // refused whatever M is
  if (m == 0) return;

  const auto* a = static_cast<const ElementAB*>(mat_a.data_ptr());
  const auto* b = static_cast<const ElementAB*>(mat_b.data_ptr());
  const auto* sa = static_cast<const float*>(scales_a.data_ptr());
  const auto* sb = static_cast<const float*>(scales_b.data_ptr());
  const auto* bias_ptr = has_bias ? static_cast<const ElementD*>(bias.data_ptr()) : nullptr;
  auto* d = static_cast<ElementD*>(out.data_ptr());

  // GEMM operands: (A, B, rows, cols) = (a, b, M, N), or (b, a, N, M) transposed.
  using StrideA = typename Adapter::GemmKernel::StrideA;
  using StrideB = typename Adapter::GemmKernel::StrideB;
  using StrideD = typename Adapter::GemmKernel::StrideD;
  const std::int64_t rows = kSwapAB ? n : m, cols = kSwapAB ? m : n;
  StrideA stride_a{};
  StrideB stride_b{};
  StrideD stride_d{};
  cute::get<0>(stride_a) = kSwapAB ? shape.ldb : shape.lda;
  cute::get<0>(stride_b) = kSwapAB ? shape.lda : shape.ldb;
  if constexpr (kSwapAB) {
    cute::get<1>(stride_d) = shape.ldo;  // Dᵀ column-major
  } else {
    cute::get<0>(stride_d) = shape.ldo;
  }
  // The outer scale is per original row (scales_a), the inner per original column.
  typename Adapter::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(k), 1},
      {kSwapAB ? b : a, stride_a, kSwapAB ? a : b, stride_b},
      {Gemm::Epilogue::arguments(sa, a_vector, sb, b_vector, bias_ptr), nullptr, stride_d, d, stride_d},
  };

  // The persistent tile scheduler sizes its grid by the SM count.
  const DLDevice dl_device = device.unwrap();
  args.hw_info.device_id = dl_device.device_id;
  args.hw_info.sm_count = runtime::get_sm_count(dl_device.device_id);
  set_tile_order(args.scheduler, swizzle, raster);

  run_cutlass<Adapter>(args, workspace.data_ptr(), workspace_bytes, dl_device);
}

}  // namespace
