// FP8 GEMMs with DeepSeek-V3 block scales on Hopper (sm_90a), one module per kernel
// configuration:
//   blockwise_scaled_mm_sm90<Out, TileM, TileN, TileK, ClusterM, ClusterN, kPingpong, kScaleAMajorM>(
//       out, mat_a, mat_b, scales_a, scales_b, workspace, swizzle, raster)
// out [M, N] (Out: fp16_t or bf16_t, rows dense) = sum over K blocks kb of
// scales_a[m, kb] * scales_b[n / 128, kb] * (mat_a @ mat_b over block kb), with mat_a [M, K]
// row-major and mat_b [K, N] column-major, both fp8_e4m3_t; float32 scales_a [M, ceil(K/128)]
// and scales_b [ceil(N/128), ceil(K/128)], both with K blocks contiguous (stride(1) == 1), any
// row stride; or, kScaleAMajorM, scales_a M-major (stride(0) == 1) with its K blocks a multiple
// of 4 floats apart from a 16-byte aligned start, rows up to M rounded up to 4 readable in each
// (the caller checks the storage). K a multiple of 16, N of 8 (16-byte rows). swizzle (1, 2, 4,
// 8) and raster (0: CUTLASS's heuristic, 1: along M, 2: along N) set the order in which the
// persistent scheduler hands out tiles, as for scaled_mm_sm90.
#pragma once

#include "scaled_mm_blockwise_sm90_gemm.cuh"
#include "scaled_mm_common.cuh"
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

template <typename Out, int kTileM, int kTileN, int kTileK, int kClusterM, int kClusterN, bool kPingpong,
          bool kScaleAMajorM>
void blockwise_scaled_mm_sm90(mllm_kernel::TensorView out, mllm_kernel::TensorView mat_a,
                              mllm_kernel::TensorView mat_b, mllm_kernel::TensorView scales_a,
                              mllm_kernel::TensorView scales_b, mllm_kernel::TensorView workspace,
                              std::int64_t swizzle, std::int64_t raster) {
  using namespace mllm_kernel::host;
  using namespace mllm_kernel::device::gemm_sm90;
  using namespace mllm_kernel::device::scaled_mm;
  using ElementD = cutlass_t<Out>;
  using Gemm =
      BlockwiseGemmSm90<ElementD, TileConfig<kTileM, kTileN, kTileK, kClusterM, kClusterN, kPingpong>, kScaleAMajorM>;
  using Adapter = typename Gemm::Gemm;
  constexpr int kBlock = Gemm::kScaleBlock;

  SymbolicDevice device;
  const MmShape shape = check_mm_operands<mllm_kernel::fp8_e4m3_t, Out>(out, mat_a, mat_b, device);
  const std::int64_t m = shape.m, n = shape.n, k = shape.k;
  const std::int64_t k_blocks = div_ceil(k, kBlock), n_blocks = div_ceil(n, kBlock);
  SymbolicSize sa_m{"scales_a row stride"}, sa_k{"scales_a column stride"};
  SymbolicSize sb_n{"scales_b row stride"}, sb_k{"scales_b column stride"};
  (void)TensorMatcher({m, k_blocks}).with_strides({sa_m, sa_k}).with_dtype<float>().with_device(device).verify(
      scales_a, "scales_a");
  (void)TensorMatcher({n_blocks, k_blocks}).with_strides({sb_n, sb_k}).with_dtype<float>().with_device(device).verify(
      scales_b, "scales_b");
  if constexpr (kScaleAMajorM) {
    RuntimeCheck(m == 1 || sa_m.unwrap() == 1, "scales_a must be column-major (stride(0) == 1), got strides [",
                 sa_m.unwrap(), ", ", sa_k.unwrap(), "]");
    RuntimeCheck(k_blocks == 1 || sa_k.unwrap() % 4 == 0,
                 "scales_a's columns must start 16 bytes apart (stride(1) a multiple of 4), got stride ",
                 sa_k.unwrap());
    RuntimeCheck(reinterpret_cast<std::uintptr_t>(scales_a.data_ptr()) % 16 == 0,
                 "column-major scales_a must start 16-byte aligned");
  } else {
    RuntimeCheck(k_blocks == 1 || sa_k.unwrap() == 1, "scales_a must be row-major (stride(1) == 1), got strides [",
                 sa_m.unwrap(), ", ", sa_k.unwrap(), "]");
  }
  RuntimeCheck(k_blocks == 1 || sb_k.unwrap() == 1, "scales_b must be row-major (stride(1) == 1), got strides [",
               sb_n.unwrap(), ", ", sb_k.unwrap(), "]");
  const std::int64_t workspace_bytes = check_workspace(workspace, device);
  check_tile_order(swizzle, raster);  // refused whatever M is
  if (m == 0) return;

  using StrideA = typename Adapter::GemmKernel::StrideA;
  using StrideB = typename Adapter::GemmKernel::StrideB;
  using StrideD = typename Adapter::GemmKernel::StrideD;
  StrideA stride_a{};
  StrideB stride_b{};
  StrideD stride_d{};
  cute::get<0>(stride_a) = shape.lda;
  cute::get<0>(stride_b) = shape.ldb;
  cute::get<0>(stride_d) = shape.ldo;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  // A stride is free where its dimension has one element: any value addresses nothing.
  const int sa_ld = kScaleAMajorM ? (k_blocks == 1 ? Gemm::scale_a_rows(mi) : static_cast<int>(sa_k.unwrap()))
                                  : (m == 1 ? static_cast<int>(k_blocks) : static_cast<int>(sa_m.unwrap()));
  const int sb_ld = n_blocks == 1 ? static_cast<int>(k_blocks) : static_cast<int>(sb_n.unwrap());
  typename Adapter::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {mi, ni, ki, 1},
      {static_cast<const cutlass::float_e4m3_t*>(mat_a.data_ptr()), stride_a,
       static_cast<const cutlass::float_e4m3_t*>(mat_b.data_ptr()), stride_b,
       static_cast<const float*>(scales_a.data_ptr()), Gemm::scale_a_layout(mi, ni, ki, sa_ld),
       static_cast<const float*>(scales_b.data_ptr()), Gemm::scale_b_layout(mi, ni, ki, sb_ld)},
      {{}, nullptr, stride_d, static_cast<ElementD*>(out.data_ptr()), stride_d},
  };

  // The persistent tile scheduler sizes its grid by the SM count.
  const DLDevice dl_device = device.unwrap();
  args.hw_info.device_id = dl_device.device_id;
  args.hw_info.sm_count = runtime::get_sm_count(dl_device.device_id);
  set_tile_order(args.scheduler, swizzle, raster);
  run_cutlass<Adapter>(args, workspace.data_ptr(), workspace_bytes, dl_device);
}

}  // namespace
