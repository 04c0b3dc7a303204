// W8A8 scaled GEMMs on Ampere and Ada (sm_80, sm_86, sm_87, sm_89; FP8 from sm_89), one module
// per kernel configuration:
//   scaled_mm_sm80<AB, Out, TileM, TileN, TileK, WarpM, WarpN, WarpK, Stages>(
//       out, mat_a, mat_b, scales_a, scales_b, bias, has_bias, workspace)
// out [M, N] (Out: fp16_t or bf16_t, rows dense) = (mat_a @ mat_b) * scales_a[m] * scales_b[n]
// (+ bias[n]), with mat_a [M, K] row-major and mat_b [K, N] column-major, both AB (int8_t or
// fp8_e4m3_t). scales_a holds 1 or M float32 values, scales_b N (the caller expands one value),
// both 16-byte aligned, like the bias. K a multiple of 16, N of 8 (16-byte rows).
#pragma once

#include "scaled_mm_common.cuh"
#include "scaled_mm_sm80_gemm.cuh"
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

template <typename AB, typename Out, int kTileM, int kTileN, int kTileK, int kWarpM, int kWarpN, int kWarpK,
          int kStages>
void scaled_mm_sm80(mllm_kernel::TensorView out, mllm_kernel::TensorView mat_a, mllm_kernel::TensorView mat_b,
                    mllm_kernel::TensorView scales_a, mllm_kernel::TensorView scales_b, mllm_kernel::TensorView bias,
                    bool has_bias, mllm_kernel::TensorView workspace) {
  using namespace mllm_kernel::host;
  using namespace mllm_kernel::device::gemm_sm80;
  using namespace mllm_kernel::device::scaled_mm;
  using ElementAB = cutlass_t<AB>;
  using ElementD = cutlass_t<Out>;
  using Gemm = GemmSm80<ElementAB, ElementD, TileConfig<kTileM, kTileN, kTileK, kWarpM, kWarpN, kWarpK, kStages>>;
  using Adapter = typename Gemm::Gemm;

  SymbolicDevice device;
  const MmShape shape = check_mm_operands<AB, Out>(out, mat_a, mat_b, device);
  const std::int64_t m = shape.m, n = shape.n, k = shape.k;
  const bool a_vector = scales_are_vector(scales_a, device, m, "M", "mat_a", "scales_a");
  (void)TensorMatcher({n}).with_dtype<float>().with_device(device).verify(scales_b, "scales_b");
  if (has_bias) {
    (void)TensorMatcher({n}).template with_dtype<Out>().with_device(device).verify(bias, "bias");
  }
  RuntimeCheck(aligned16(scales_b.data_ptr()) && (!has_bias || aligned16(bias.data_ptr())),
               "scales_b and bias must start at 16-byte aligned addresses");
  const std::int64_t workspace_bytes = check_workspace(workspace, device);
  if (m == 0) return;

  auto* d = static_cast<ElementD*>(out.data_ptr());
  typename Adapter::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {static_cast<int>(m), static_cast<int>(n), static_cast<int>(k)},
      1,
      Gemm::arguments(static_cast<const float*>(scales_a.data_ptr()), a_vector,
                      static_cast<const float*>(scales_b.data_ptr()),
                      has_bias ? static_cast<const ElementD*>(bias.data_ptr()) : nullptr, d, shape.ldo),
      mat_a.data_ptr(),
      mat_b.data_ptr(),
      nullptr,
      nullptr,
      0,
      0,
      0,
      0,
      shape.lda,
      shape.ldb,
      shape.ldo,
      shape.ldo,
  };

  run_cutlass<Adapter>(args, workspace.data_ptr(), workspace_bytes, device.unwrap());
}

}  // namespace
