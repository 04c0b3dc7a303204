// CUDA per-token-group quantization to float8_e4m3fn and int8, one module per input type T
// (fp32_t, fp16_t, bf16_t):
//   per_token_group_quant_fp8<T>(out, scales, input, group_size, eps, scale_ue8m0, enable_pdl)
//   per_token_group_quant_int8<T>(out, scales, input, group_size, eps, enable_pdl)
// Each group of group_size (32, 64 or 128) consecutive elements of a row has its own scale:
//   scale = max(amax, eps) / qmax                 qmax = 448 (e4m3) or 127 (int8)
//   scale = 2^ceil(log2(scale))                   only with scale_ue8m0
//   q     = x / scale                             IEEE division (not x * (1 / scale))
//   fp8:  e4m3 of q, round to nearest even, saturated to +-448 (NaN stays NaN)
//   int8: round_half_even(clamp(q, -128, 127))
// all in fp32, as the CPU kernels and the tests' PyTorch reference; a zero scale writes zeros.
// enable_pdl: launch with programmatic dependent launch (sm_90+; each kernel waits for the
// previous one before touching memory).
// Tensor layouts and checks: mllm_kernel/impl/quant.cuh. 16-byte vector kernels run when
// pointers and strides allow it, element-wise kernels otherwise.
#pragma once

#include <mllm_kernel/impl/quant.cuh>
#include <mllm_kernel/quantize.cuh>
#include <mllm_kernel/runtime.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/vec.cuh>
#include <mllm_kernel/warp.cuh>

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
using mllm_kernel::device::round_up_pow2;
using mllm_kernel::device::vec_amax;
using mllm_kernel::host::quant::can_vectorize;
using mllm_kernel::host::quant::check;
using mllm_kernel::host::quant::is_flat;

constexpr int kBlock = 256;

// ---------------------------------------------------------------------------------------------
// Per-token-group: kLanes consecutive lanes of a warp share one group of kGroup elements, each
// lane holding kItems vectors of kVec; the group's amax is a shuffle reduction over the lanes.
// Large inputs take kItemsPerLane = 2 (two 16-byte loads in flight per thread); inputs that fit
// in one wave of threads with one vector per lane take 1, which spreads a few tokens over more
// threads and SMs (H100, bf16 group 128: at one token 1.51 us with 1 against 1.71 us with 2; at
// 16384 tokens 2 is fastest).

/// Lanes that share one group of kGroupVecs vectors when each lane holds up to kItemsPerLane.
template <int kGroupVecs, int kItemsPerLane>
constexpr int group_lanes() {
  return kGroupVecs <= kItemsPerLane ? 1 : kGroupVecs / kItemsPerLane;
}

/// kFlat: contiguous rows and row-major scales (the usual layout), where group i of the whole
/// input (row-major) is at i * kGroup of the input and the output and at i of the scales. Other
/// layouts split i into (row, group of the row), a division, and address through the strides:
/// on the usual layout that generality executes a quarter more instructions (H100, bf16
/// [16384, 4096] group 128, INT8).
template <typename T, typename Out, int kVec, int kGroup, int kItemsPerLane, bool kUE8M0, bool kFlat>
__global__ void __launch_bounds__(kBlock) group_quant_kernel(const __grid_constant__ QuantParams<T, Out> p) {
  using namespace mllm_kernel::device;
  constexpr int kGroupVecs = kGroup / kVec;
  constexpr int kLanes = group_lanes<kGroupVecs, kItemsPerLane>();
  static_assert(kLanes <= kWarpThreads && kGroupVecs % kLanes == 0);
  constexpr int kItems = kGroupVecs / kLanes;
  using Vec = AlignedVector<T, kVec>;
  if (p.pdl) pdl_wait_and_release();
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  const std::int64_t group = tid / kLanes;
  const int lane = static_cast<int>(tid % kLanes);
  std::int64_t row = 0, g = group;
  if constexpr (!kFlat) {
    if (p.index32) {  // a 64-bit division costs more than the group's memory traffic
      const unsigned gi = static_cast<unsigned>(group), groups = static_cast<unsigned>(p.groups);
      const unsigned r = gi / groups;
      row = r;
      g = gi - r * groups;
    } else {
      row = group / p.groups;
      g = group - row * p.groups;
    }
  }
  // Lanes past the last group still take part in the shuffles (with amax 0).
  const bool valid = kFlat ? group < p.rows * p.groups : row < p.rows;
  const T* src = p.in + (kFlat ? group * kGroup : row * p.in_stride + g * kGroup);
  Vec v[kItems];
  float amax = 0.0f;
  if (valid) {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      v[j].load(src, lane + j * kLanes);
      amax = fmaxf(amax, vec_amax(v[j]));
    }
  }
  amax = warp::reduce_max<kLanes>(amax);
  if (!valid) return;
  float scale = fmaxf(amax, p.eps) / QuantFormat<Out>::kMax;
  if constexpr (kUE8M0) scale = round_up_pow2(scale);
  if (lane == 0) p.scales[kFlat ? group : row * p.scale_s0 + g * p.scale_s1] = scale;
  const ScaleDivisor divide(scale);
  // After the divisor: an address computed before it stays live across the reciprocal's
  // out-of-line slow path, which cost 8 registers a thread (40 against 32).
  Out* dst = p.out + (kFlat ? group * kGroup : row * p.out_stride + g * kGroup);
#pragma unroll
  for (int j = 0; j < kItems; ++j) quantize_store(v[j], divide, dst, lane + j * kLanes);
}

// ---------------------------------------------------------------------------------------------
// Host side.

template <typename T, typename Out, int kVec, int kGroup, int kItemsPerLane, bool kUE8M0>
void launch_group_items(const QuantParams<T, Out>& p, DLDevice device) {
  using namespace mllm_kernel::host;
  constexpr int kLanes = group_lanes<kGroup / kVec, kItemsPerLane>();
  const std::int64_t threads = p.rows * p.groups * kLanes;
  const std::int64_t blocks = div_ceil(threads, kBlock);
  RuntimeCheck(blocks <= 0x7fffffff, "input too large: ", p.rows, " rows of ", p.hidden);
  QuantParams<T, Out> q = p;
  // Padding groups of the last block included.
  q.index32 = div_ceil(blocks * kBlock, kLanes) <= 0xffffffffLL;
  // Only the vector kernels have a flat variant: the element-wise ones serve unaligned layouts.
  const bool flat = kVec > 1 && is_flat(p) && p.scale_s1 == 1 && (p.rows == 1 || p.scale_s0 == p.groups);
  LaunchKernel launch(static_cast<unsigned>(blocks), kBlock, device);
  launch.enable_pdl(p.pdl);
  if constexpr (kVec > 1) {
    if (flat) return launch(group_quant_kernel<T, Out, kVec, kGroup, kItemsPerLane, kUE8M0, true>, q);
  }
  launch(group_quant_kernel<T, Out, kVec, kGroup, kItemsPerLane, kUE8M0, false>, q);
}

template <typename T, typename Out, int kVec, int kGroup, bool kUE8M0>
void launch_group(const QuantParams<T, Out>& p, DLDevice device) {
  using namespace mllm_kernel::host;
  constexpr int kOneItemLanes = group_lanes<kGroup / kVec, 1>();
  if constexpr (kOneItemLanes <= mllm_kernel::device::kWarpThreads) {  // not for unvectorized groups of 64 or 128
    // Threads of one wave: every SM full (2048 threads each on sm_80/sm_90).
    const std::int64_t wave = static_cast<std::int64_t>(runtime::get_sm_count(device.device_id)) * 2048;
    if (p.rows * p.groups * kOneItemLanes <= wave) return launch_group_items<T, Out, kVec, kGroup, 1, kUE8M0>(p, device);
  }
  // Two vectors a lane (or as many as keep a group within a warp, unvectorized).
  constexpr int kItems = mllm_kernel::host::max_of(2, kGroup / kVec / mllm_kernel::device::kWarpThreads);
  launch_group_items<T, Out, kVec, kGroup, kItems, kUE8M0>(p, device);
}

template <typename T, typename Out, int kVec, bool kUE8M0>
void dispatch_group_size(const QuantParams<T, Out>& p, std::int64_t group_size, DLDevice device) {
  switch (group_size) {
    case 32: return launch_group<T, Out, kVec, 32, kUE8M0>(p, device);
    case 64: return launch_group<T, Out, kVec, 64, kUE8M0>(p, device);
    default: return launch_group<T, Out, kVec, 128, kUE8M0>(p, device);
  }
}

template <typename T, typename Out, bool kUE8M0>
void group_quant(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
                 std::int64_t group_size, double eps, bool enable_pdl) {
  using namespace mllm_kernel::host;
  RuntimeCheck(group_size == 32 || group_size == 64 || group_size == 128, "group_size must be 32, 64 or 128, got ",
               group_size);
  DLDevice device;
  auto p = check<T, Out>(out, scales, input, group_size, eps, &device);
  p.pdl = enable_pdl;
  constexpr int kVec = mllm_kernel::device::kVecElems<T>;
  if (can_vectorize(p, kVec)) {
    dispatch_group_size<T, Out, kVec, kUE8M0>(p, group_size, device);
  } else {
    dispatch_group_size<T, Out, 1, kUE8M0>(p, group_size, device);
  }
}
// ---------------------------------------------------------------------------------------------
// Entry points.

/// float8_e4m3fn quantization per group of `group_size` (32, 64, 128) elements of a row:
/// scales [rows, hidden / group_size] = max(amax, eps) / 448, rounded up to a power of two with
/// `scale_ue8m0`.
template <typename T>
void per_token_group_quant_fp8(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
                               std::int64_t group_size, double eps, bool scale_ue8m0, bool enable_pdl) {
  if (scale_ue8m0) {
    group_quant<T, fp8_e4m3_t, true>(out, scales, input, group_size, eps, enable_pdl);
  } else {
    group_quant<T, fp8_e4m3_t, false>(out, scales, input, group_size, eps, enable_pdl);
  }
}

/// int8 quantization per group of `group_size` (32, 64, 128) elements of a row: scales
/// [rows, hidden / group_size] = max(amax, eps) / 127.
template <typename T>
void per_token_group_quant_int8(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
                                std::int64_t group_size, double eps, bool enable_pdl) {
  group_quant<T, std::int8_t, false>(out, scales, input, group_size, eps, enable_pdl);
}

}  // namespace
