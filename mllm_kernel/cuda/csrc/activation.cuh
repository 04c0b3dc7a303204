// CUDA gated activations, one module per element type T (fp32_t, fp16_t, bf16_t):
//   silu_and_mul<T>(out, input, enable_pdl)       out = silu(input[:, :d]) * input[:, d:]
//   gelu_and_mul<T>(out, input, approximate_tanh, enable_pdl)
//                                                 exact (erf) or tanh-approximated GELU gate
// input is [..., 2d] seen as rows [N, 2d] (verify_rows; any row stride, unit stride within a
// row), out is [..., d] as rows [N, d] (any row stride).
// The gate and the product are computed in fp32 and rounded once. Each thread handles one
// 8-byte vector of the gate half and the matching vector of the up half when pointers, strides
// and d allow it, one element otherwise.
#pragma once

#include <mllm_kernel/math.cuh>
#include <mllm_kernel/op_args.hpp>
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

/// The gate functions (fp32 in, fp32 out).
/// x / (1 + exp(-x)) with the hardware exp2 and reciprocal (a few ulp, like Triton's
/// sigmoid): the IEEE expf and division cost ~0.5 us of latency at 1-64 tokens (H100, CUDA
/// graph). Very negative x gives -0 (1 + exp(-x) overflows), as it should.
struct SiLU {
  static __device__ __forceinline__ float apply(float x) { return __fdividef(x, 1.0f + __expf(-x)); }
};
struct GeLU {
  static __device__ __forceinline__ float apply(float x) { return mllm_kernel::device::math::gelu(x); }
};
struct GeLUTanh {
  static __device__ __forceinline__ float apply(float x) { return mllm_kernel::device::math::gelu_tanh(x); }
};

template <typename T>
struct ActParams {
  T* out;
  const T* in;
  std::int64_t rows;
  std::int64_t d_vecs;  // vectors per half row
  std::int64_t in_stride;
  std::int64_t out_stride;
  std::int64_t d;  // elements per half row
  bool pdl;        // launched with programmatic dependent launch: run the PDL instructions
};

/// Grid: blockIdx.x over the vectors of a half row, blockIdx.y over rows (striding by gridDim.y
/// past 65535 rows). Thread (x, y) handles vector blockIdx.x * kThreads + threadIdx.x of its rows:
/// no index division, which costs more than the element work at a few tokens.
template <typename T, int kVec, int kThreads, typename Act>
__global__ void __launch_bounds__(kThreads) act_and_mul_kernel(const __grid_constant__ ActParams<T> p) {
  using namespace mllm_kernel::device;
  using Vec = AlignedVector<T, kVec>;
  if (p.pdl) pdl_wait_and_release();
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= p.d_vecs) return;
  for (std::int64_t row = blockIdx.y; row < p.rows; row += gridDim.y) {
    const T* in_row = p.in + row * p.in_stride;
    Vec gate, up, out;
    gate.load(in_row, col);
    up.load(in_row + p.d, col);
#pragma unroll
    for (int j = 0; j < kVec; ++j) out[j] = cast<T>(Act::apply(cast<float>(gate[j])) * cast<float>(up[j]));
    out.store(p.out + row * p.out_stride, col);
  }
}

/// Launches act_and_mul_kernel<T, kVec, kThreads, Act> over all rows; `p.d` must be a multiple
/// of kVec with pointers and strides aligned to kVec elements.
template <typename T, int kVec, int kThreads, typename Act>
void launch_act(ActParams<T> p, DLDevice device, bool enable_pdl) {
  using namespace mllm_kernel::host;
  p.d_vecs = p.d / kVec;
  p.pdl = enable_pdl;
  const dim3 grid(static_cast<unsigned>(div_ceil(p.d_vecs, kThreads)),
                  static_cast<unsigned>(mllm_kernel::host::min_of<std::int64_t>(p.rows, 65535)));
  LaunchKernel(grid, kThreads, device).enable_pdl(enable_pdl)(act_and_mul_kernel<T, kVec, kThreads, Act>, p);
}

/// Threads a block. With 8-byte vectors this is the fastest shape at 1024 and 16384 tokens; at 1
/// to 64 tokens every shape from 2 to 8 elements a thread and 64 to 256 threads a block takes the
/// same time (H100, bf16).
constexpr int kActThreads = 256;

/// Checks the tensors and launches with the widest usable vector.
template <typename T, typename Act>
void act_and_mul(mllm_kernel::TensorView out, mllm_kernel::TensorView input, bool enable_pdl) {
  using namespace mllm_kernel::host;
  ActAndMulArgs a;
  a.verify<kDLCUDA, T>(out, input);
  ActParams<T> p{static_cast<T*>(out.data_ptr()), static_cast<const T*>(input.data_ptr()), a.tokens.unwrap(), 0,
                 a.in_stride.unwrap(), a.out_stride.unwrap(), a.d.unwrap(), false};
  // 8-byte vectors: half the widest access, faster here than 16 bytes (see kActThreads).
  constexpr int kVec = mllm_kernel::device::kVecElems<T> / 2;
  VectorizeCheck check(kVec, sizeof(T));
  check.pointer(p.in).pointer(p.out).length(p.d).stride(p.in_stride, p.rows).stride(p.out_stride, p.rows);
  if (check.ok()) {
    launch_act<T, kVec, kActThreads, Act>(p, a.device.unwrap(), enable_pdl);
  } else {
    launch_act<T, 1, kActThreads, Act>(p, a.device.unwrap(), enable_pdl);
  }
}

template <typename T>
void silu_and_mul(mllm_kernel::TensorView out, mllm_kernel::TensorView input, bool enable_pdl) {
  act_and_mul<T, SiLU>(out, input, enable_pdl);
}
/// Exact (erf) GELU gate, or the tanh approximation when `approximate_tanh`.
template <typename T>
void gelu_and_mul(mllm_kernel::TensorView out, mllm_kernel::TensorView input, bool approximate_tanh, bool enable_pdl) {
  if (approximate_tanh) {
    act_and_mul<T, GeLUTanh>(out, input, enable_pdl);
  } else {
    act_and_mul<T, GeLU>(out, input, enable_pdl);
  }
}

}  // namespace
