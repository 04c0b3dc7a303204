// CUDA per-token quantization to float8_e4m3fn and int8, one module per input type T
// (fp32_t, fp16_t, bf16_t):
//   per_token_quant_fp8<T>(out, scales, input, enable_pdl)
//   per_token_quant_int8<T>(out, scales, input, enable_pdl)
// Each row has its own scale:
// Formula (the same as the CPU kernels and the tests' PyTorch reference), all in fp32:
//   scale = max(amax, eps) / qmax                 qmax = 448 (e4m3) or 127 (int8)
//   q     = x / scale                             IEEE division (not x * (1 / scale))
//   fp8:  e4m3 of q, round to nearest even, saturated to +-448 (NaN stays NaN)
//   int8: round_half_even(clamp(q, -128, 127))
// A zero scale writes zeros.
// enable_pdl: launch with programmatic dependent launch (sm_90+; each kernel waits for the
// previous one before touching memory).
// Tensor layouts and checks: mllm_kernel/impl/quant.cuh. 16-byte vector kernels run when
// pointers and strides allow it, element-wise kernels otherwise.
#pragma once

#include <mllm_kernel/cta.cuh>
#include <mllm_kernel/impl/quant.cuh>
#include <mllm_kernel/quantize.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/vec.cuh>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp32_t;
using mllm_kernel::fp8_e4m3_t;
using mllm_kernel::ScaleDivisor;
using mllm_kernel::device::QuantFormat;
using mllm_kernel::device::quantize;
using mllm_kernel::device::quantize_store;
using mllm_kernel::device::quant::QuantParams;
using mllm_kernel::device::vec_amax;
using mllm_kernel::host::quant::can_vectorize;
using mllm_kernel::host::quant::check;

constexpr int kBlock = 256;

// ---------------------------------------------------------------------------------------------
// Per-token: one block per row. Rows of at most kBlock * kMaxRowItems vectors are held in
// registers between the amax (block reduction) and the quantization, kRowItems (1, 2 or 4)
// vectors a thread, the fewest that hold the row: spare register slots lower the occupancy
// (H100, [16384, 4096] bf16: 72 us with 2 items against 85 us with 4). Longer rows are read
// twice, the second loop mostly hitting L1/L2 (the row was just read).

constexpr int kMaxRowItems = 4;

/// The row's scale from each thread's partial amax: max(block amax, eps) / kMax, written to
/// scales[row] by thread 0 and returned as the divisor the row's elements use.
template <typename T, typename Out>
__device__ __forceinline__ ScaleDivisor row_divisor(float amax, const QuantParams<T, Out>& p, std::int64_t row,
                                                    float* scratch) {
  amax = mllm_kernel::device::cta::reduce_max(amax, scratch);
  const float scale = fmaxf(amax, p.eps) / QuantFormat<Out>::kMax;
  if (threadIdx.x == 0) p.scales[row * p.scale_s0] = scale;
  return ScaleDivisor(scale);
}

template <typename T, typename Out, int kVec, int kRowItems>
__global__ void __launch_bounds__(kBlock) row_quant_registers_kernel(const __grid_constant__ QuantParams<T, Out> p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<T, kVec>;
  __shared__ float scratch[cta::kScratchSize];
  if (p.pdl) pdl_wait_and_release();
  const std::int64_t row = blockIdx.x;
  const int num_vecs = static_cast<int>(p.hidden / kVec);
  const T* src = p.in + row * p.in_stride;
  Vec v[kRowItems];
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kRowItems; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < num_vecs) {
      v[j].load(src, i);
      amax = fmaxf(amax, vec_amax(v[j]));
    }
  }
  const ScaleDivisor divide = row_divisor(amax, p, row, scratch);
  Out* dst = p.out + row * p.out_stride;
#pragma unroll
  for (int j = 0; j < kRowItems; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < num_vecs) quantize_store(v[j], divide, dst, i);
  }
}

template <typename T, typename Out, int kVec>
__global__ void __launch_bounds__(kBlock) row_quant_kernel(const __grid_constant__ QuantParams<T, Out> p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<T, kVec>;
  __shared__ float scratch[cta::kScratchSize];
  if (p.pdl) pdl_wait_and_release();
  const std::int64_t row = blockIdx.x;
  const int num_vecs = static_cast<int>(p.hidden / kVec);
  const T* src = p.in + row * p.in_stride;
  float amax = 0.0f;
  for (int i = threadIdx.x; i < num_vecs; i += blockDim.x) {
    Vec v;
    v.load(src, i);
    amax = fmaxf(amax, vec_amax(v));
  }
  const ScaleDivisor divide = row_divisor(amax, p, row, scratch);
  Out* dst = p.out + row * p.out_stride;
  for (int i = threadIdx.x; i < num_vecs; i += blockDim.x) {
    Vec v;
    v.load(src, i);
    quantize_store(v, divide, dst, i);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

/// Launches the per-token kernel for rows of `num_vecs` vectors of kVec: in registers with the
/// fewest items per thread that hold the row, else the two-pass kernel.
template <typename T, typename Out, int kVec>
void launch_rows(const QuantParams<T, Out>& p, std::int64_t num_vecs, int threads, DLDevice device) {
  using namespace mllm_kernel::host;
  const dim3 grid(static_cast<unsigned>(p.rows));
  const std::int64_t items = div_ceil(num_vecs, threads);
  if (items > kMaxRowItems) {
    LaunchKernel(grid, threads, device).enable_pdl(p.pdl)(row_quant_kernel<T, Out, kVec>, p);
  } else if (items == 1) {
    LaunchKernel(grid, threads, device).enable_pdl(p.pdl)(row_quant_registers_kernel<T, Out, kVec, 1>, p);
  } else if (items == 2) {
    LaunchKernel(grid, threads, device).enable_pdl(p.pdl)(row_quant_registers_kernel<T, Out, kVec, 2>, p);
  } else {
    LaunchKernel(grid, threads, device).enable_pdl(p.pdl)(row_quant_registers_kernel<T, Out, kVec, 4>, p);
  }
}

template <typename T, typename Out>
void row_quant(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input, bool enable_pdl) {
  using namespace mllm_kernel::host;
  SymbolicSize H{"hidden"};
  (void)TensorMatcher({-1, H}).with_strides({-1, 1}).verify_rows(input, "input");  // only to read hidden
  DLDevice device;
  auto p = check<T, Out>(out, scales, input, mllm_kernel::host::max_of<std::int64_t>(H.unwrap(), 1), 0.0,
                         &device);
  p.pdl = enable_pdl;
  RuntimeCheck(p.rows <= 0x7fffffff, "too many rows: ", p.rows);
  RuntimeCheck(p.hidden <= 0x7fffffffLL, "row too long: ", p.hidden);
  constexpr int kVec = mllm_kernel::device::kVecElems<T>;
  const bool vec = can_vectorize(p, kVec);
  const std::int64_t num_vecs = vec ? p.hidden / kVec : p.hidden;
  const int threads =
      static_cast<int>(mllm_kernel::host::min_of<std::int64_t>(kBlock, div_ceil(num_vecs, 32) * 32));
  if (vec) {
    launch_rows<T, Out, kVec>(p, num_vecs, threads, device);
  } else {
    launch_rows<T, Out, 1>(p, num_vecs, threads, device);
  }
}
// ---------------------------------------------------------------------------------------------
// Entry points.

/// float8_e4m3fn quantization with one scale per row: scales [rows, 1] = amax / 448.
template <typename T>
void per_token_quant_fp8(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
                         bool enable_pdl) {
  row_quant<T, fp8_e4m3_t>(out, scales, input, enable_pdl);
}

/// int8 quantization with one scale per row: scales [rows, 1] = amax / 127.
template <typename T>
void per_token_quant_int8(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
                          bool enable_pdl) {
  row_quant<T, std::int8_t>(out, scales, input, enable_pdl);
}

}  // namespace
