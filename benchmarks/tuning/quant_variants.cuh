// Variants of the FP8 quantizers for bf16 rows of 4096 (benchmarks/tuning/tune_quant.py), to
// find what sets their time at a few tokens, where they trail torch.compile's kernels:
//   kDiv      how x / scale is computed: 0 IEEE division per element (what the library did
//             first), 1 x * (1 / scale) (not exact: a speed bound only), 2 ScaleDivisor
//             (what the library does now)
//   kThreads  the block size, kLanes the lanes that share one group
// Group 128 into fp8 or int8 (group_out_kernel): the library's ScaleDivisor and conversion, with
// kLanes lanes a group and __launch_bounds__(256, kMinBlocks) (8 caps registers at 32, so every
// thread slot of an SM can be occupied): is group INT8's gap to group FP8 the launch shape?
// Static per-tensor: one 16-byte vector per thread. Per-token: one block per row, the row in
// registers. Group 128: kLanes lanes a group, 16 / kLanes vectors each.
#pragma once

#include <mllm_kernel/cta.cuh>
#include <mllm_kernel/quantize.cuh>
#include <mllm_kernel/scale_divisor.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/vec.cuh>
#include <mllm_kernel/warp.cuh>

#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>

#include <cstdint>
#include <type_traits>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp8_e4m3_t;
constexpr int kVec = 8;
constexpr int kHidden = 4096;
using Vec = mllm_kernel::device::AlignedVector<bf16_t, kVec>;

template <int kDiv>
struct Divide {
  mllm_kernel::ScaleDivisor refined;
  float scale, inv;
  __device__ explicit Divide(float s) : refined(s), scale(s), inv(1.0f / s) {}
  __device__ float operator()(float x) const {
    if constexpr (kDiv == 0) return scale == 0.0f ? 0.0f : x / scale;
    if constexpr (kDiv == 1) return x * inv;
    return refined(x);
  }
};

template <int kDiv>
__device__ __forceinline__ void quantize_vec(const Vec& v, const Divide<kDiv>& divide, fp8_e4m3_t* dst, std::int64_t i) {
  using namespace mllm_kernel::device;
  AlignedVector<fp8_e4m3_t, kVec> q;
#pragma unroll
  for (int j = 0; j < kVec; ++j) q[j] = QuantFormat<fp8_e4m3_t>::convert(divide(cast<float>(v[j])));
  q.store(dst, i);
}

__device__ __forceinline__ float amax_of(const Vec& v) {
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < kVec; ++j) m = fmaxf(m, fabsf(mllm_kernel::device::cast<float>(v[j])));
  return m;
}

template <int kThreads, int kDiv>
__global__ void __launch_bounds__(kThreads) static_kernel(fp8_e4m3_t* out, const bf16_t* in, const float* scale,
                                                          std::int64_t vecs) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  Vec v;
  if (i < vecs) v.load(in, i);
  const Divide<kDiv> divide(*scale);
  if (i < vecs) quantize_vec(v, divide, out, i);
}

template <int kThreads, int kDiv>
__global__ void __launch_bounds__(kThreads) token_kernel(fp8_e4m3_t* out, float* scales, const bf16_t* in) {
  using namespace mllm_kernel::device;
  constexpr int kItems = kHidden / kVec / kThreads;
  __shared__ float scratch[cta::kScratchSize];
  const std::int64_t row = blockIdx.x;
  Vec v[kItems];
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    v[j].load(in + row * kHidden, threadIdx.x + j * kThreads);
    amax = fmaxf(amax, amax_of(v[j]));
  }
  amax = cta::reduce_max(amax, scratch);
  const float scale = fmaxf(amax, 1e-10f) / QuantFormat<fp8_e4m3_t>::kMax;
  if (threadIdx.x == 0) scales[row] = scale;
  const Divide<kDiv> divide(scale);
#pragma unroll
  for (int j = 0; j < kItems; ++j) quantize_vec(v[j], divide, out + row * kHidden, threadIdx.x + j * kThreads);
}

template <int kLanes, int kDiv>
__global__ void __launch_bounds__(256) group_kernel(fp8_e4m3_t* out, float* scales, const bf16_t* in,
                                                    std::int64_t groups) {
  using namespace mllm_kernel::device;
  constexpr int kItems = 128 / kVec / kLanes;
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * 256 + threadIdx.x;
  const std::int64_t g = tid / kLanes;
  const int lane = static_cast<int>(tid % kLanes);
  const bool valid = g < groups;
  Vec v[kItems];
  float amax = 0.0f;
  if (valid) {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      v[j].load(in + g * 128, lane + j * kLanes);
      amax = fmaxf(amax, amax_of(v[j]));
    }
  }
  amax = warp::reduce_max<kLanes>(amax);
  if (!valid) return;
  const float scale = fmaxf(amax, 1e-10f) / QuantFormat<fp8_e4m3_t>::kMax;
  if (lane == 0) scales[g] = scale;
  const Divide<kDiv> divide(scale);
#pragma unroll
  for (int j = 0; j < kItems; ++j) quantize_vec(v[j], divide, out + g * 128, lane + j * kLanes);
}

template <typename Out, int kLanes, int kMinBlocks>
__global__ void __launch_bounds__(256, kMinBlocks) group_out_kernel(Out* out, float* scales, const bf16_t* in,
                                                                    std::int64_t groups) {
  using namespace mllm_kernel::device;
  constexpr int kItems = 128 / kVec / kLanes;
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * 256 + threadIdx.x;
  const std::int64_t g = tid / kLanes;
  const int lane = static_cast<int>(tid % kLanes);
  const bool valid = g < groups;
  Vec v[kItems];
  float amax = 0.0f;
  if (valid) {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      v[j].load(in + g * 128, lane + j * kLanes);
      amax = fmaxf(amax, amax_of(v[j]));
    }
  }
  amax = warp::reduce_max<kLanes>(amax);
  if (!valid) return;
  const float scale = fmaxf(amax, 1e-10f) / QuantFormat<Out>::kMax;
  if (lane == 0) scales[g] = scale;
  const mllm_kernel::ScaleDivisor divide(scale);
#pragma unroll
  for (int j = 0; j < kItems; ++j) quantize_store(v[j], divide, out + g * 128, lane + j * kLanes);
}

/// Checks input bf16 [N, 4096], out Out [N, 4096], scales float32 [M] (M = `scales_per_row` * N)
/// and returns N.
template <typename Out = fp8_e4m3_t>
inline std::int64_t check(tvm::ffi::TensorView out, tvm::ffi::TensorView scales, tvm::ffi::TensorView input,
                          std::int64_t scales_per_row, DLDevice* device) {
  using namespace mllm_kernel::host;
  SymbolicSize N{"num_tokens"}, M{"num_scales"};
  SymbolicDevice dev;
  (void)TensorMatcher({N, kHidden}).with_dtype<bf16_t>().with_device<kDLCUDA>(dev).verify(input, "input");
  (void)TensorMatcher({N, kHidden}).with_dtype<Out>().with_device(dev).verify(out, "out");
  (void)TensorMatcher({M}).with_dtype<float>().with_device(dev).verify(scales, "scales");
  RuntimeCheck(M.unwrap() == (scales_per_row ? scales_per_row * N.unwrap() : 1), "scales has ", M.unwrap(),
               " elements, expected ", scales_per_row ? scales_per_row * N.unwrap() : 1);
  *device = dev.unwrap();
  return N.unwrap();
}

/// Static per-tensor quantization with the given scale (float32 [1]).
template <int kThreads, int kDiv>
void run_static(tvm::ffi::TensorView out, tvm::ffi::TensorView scale, tvm::ffi::TensorView input) {
  DLDevice device;
  const std::int64_t vecs = check(out, scale, input, 0, &device) * kHidden / kVec;
  mllm_kernel::host::LaunchKernel(dim3(static_cast<unsigned>((vecs + kThreads - 1) / kThreads)), dim3(kThreads), device)(
      static_kernel<kThreads, kDiv>, static_cast<fp8_e4m3_t*>(out.data_ptr()),
      static_cast<const bf16_t*>(input.data_ptr()), static_cast<const float*>(scale.data_ptr()), vecs);
}

/// Per-token quantization; scales float32 [N].
template <int kThreads, int kDiv>
void run_token(tvm::ffi::TensorView out, tvm::ffi::TensorView scales, tvm::ffi::TensorView input) {
  DLDevice device;
  const std::int64_t rows = check(out, scales, input, 1, &device);
  mllm_kernel::host::LaunchKernel(dim3(static_cast<unsigned>(rows)), dim3(kThreads), device)(
      token_kernel<kThreads, kDiv>, static_cast<fp8_e4m3_t*>(out.data_ptr()), static_cast<float*>(scales.data_ptr()),
      static_cast<const bf16_t*>(input.data_ptr()));
}

/// Group-128 quantization; scales float32 [N * 32], row-major.
template <int kLanes, int kDiv>
void run_group(tvm::ffi::TensorView out, tvm::ffi::TensorView scales, tvm::ffi::TensorView input) {
  DLDevice device;
  const std::int64_t groups = check(out, scales, input, kHidden / 128, &device) * (kHidden / 128);
  const std::int64_t threads = groups * kLanes;
  mllm_kernel::host::LaunchKernel(dim3(static_cast<unsigned>((threads + 255) / 256)), dim3(256), device)(
      group_kernel<kLanes, kDiv>, static_cast<fp8_e4m3_t*>(out.data_ptr()), static_cast<float*>(scales.data_ptr()),
      static_cast<const bf16_t*>(input.data_ptr()), groups);
}

/// Group-128 quantization into fp8 or int8 (kInt8); scales float32 [N * 32], row-major.
template <bool kInt8, int kLanes, int kMinBlocks>
void run_group_out(tvm::ffi::TensorView out, tvm::ffi::TensorView scales, tvm::ffi::TensorView input) {
  using Out = std::conditional_t<kInt8, std::int8_t, fp8_e4m3_t>;
  DLDevice device;
  const std::int64_t groups = check<Out>(out, scales, input, kHidden / 128, &device) * (kHidden / 128);
  const std::int64_t threads = groups * kLanes;
  mllm_kernel::host::LaunchKernel(dim3(static_cast<unsigned>((threads + 255) / 256)), dim3(256), device)(
      group_out_kernel<Out, kLanes, kMinBlocks>, static_cast<Out*>(out.data_ptr()),
      static_cast<float*>(scales.data_ptr()), static_cast<const bf16_t*>(input.data_ptr()), groups);
}

}  // namespace
