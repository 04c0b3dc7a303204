// What the CUDA activation quantizers (cuda/csrc/quant_per_group.cuh, quant_per_token.cuh,
// quant_per_tensor.cuh) share: the kernels' parameters and the host checks that fill them.
//
// input is [..., hidden] seen as rows [rows, hidden] (verify_rows) with a free row stride (unit
// stride within a row), out the same with its own row stride, scales float32 [rows, groups] with
// free strides (so the column-major layout of block-scaled GEMMs is a transposed view).
#pragma once

#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/vec.cuh>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace mllm_kernel::device::quant {

/// Rows of `hidden` elements; scales[r * scale_s0 + g * scale_s1].
template <typename T, typename Out>
struct QuantParams {
  const T* in;
  Out* out;
  float* scales;
  std::int64_t rows;
  std::int64_t hidden;
  std::int64_t in_stride;
  std::int64_t out_stride;
  std::int64_t scale_s0;
  std::int64_t scale_s1;
  std::int64_t groups;  // groups per row
  float eps;
  bool index32;  // rows * groups < 2^32: the group kernel divides in 32 bits
  bool pdl;      // launched with programmatic dependent launch: run the PDL instructions
};

}  // namespace mllm_kernel::device::quant

namespace mllm_kernel::host::quant {

using device::quant::QuantParams;

/// Verifies input and out [..., H] as rows [R, H] (dtypes T and Out), scales float32 [R, G]
/// (G = H / group_size; QuantRowsArgs) and fills the parameters.
template <typename T, typename Out>
QuantParams<T, Out> check(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
                          std::int64_t group_size, double eps, DLDevice* device_out) {
  QuantRowsArgs a;
  a.verify<kDLCUDA, Out, T>(out, scales, input, group_size, eps);
  *device_out = a.device.unwrap();
  return QuantParams<T, Out>{static_cast<const T*>(input.data_ptr()),
                             static_cast<Out*>(out.data_ptr()),
                             static_cast<float*>(scales.data_ptr()),
                             a.tokens.unwrap(),
                             a.hidden.unwrap(),
                             a.in_stride.unwrap(),
                             a.out_stride.unwrap(),
                             a.scales_s0.unwrap(),
                             a.scales_s1.unwrap(),
                             a.groups.unwrap(),
                             static_cast<float>(eps),
                             false,
                             false};
}

/// Verifies input [..., H] (dtype T), out [..., H] (float8_e4m3fn) as rows [R, H] and the
/// float32 [1] scale of per-tensor quantization (QuantRowsArgs), and fills the parameters.
template <typename T>
QuantParams<T, fp8_e4m3_t> check_tensor(mllm_kernel::TensorView out, mllm_kernel::TensorView scale,
                                        mllm_kernel::TensorView input, DLDevice* device_out) {
  QuantRowsArgs a;
  a.verify_tensor<kDLCUDA, fp8_e4m3_t, T>(out, scale, input);
  *device_out = a.device.unwrap();
  return QuantParams<T, fp8_e4m3_t>{static_cast<const T*>(input.data_ptr()),
                                    static_cast<fp8_e4m3_t*>(out.data_ptr()),
                                    static_cast<float*>(scale.data_ptr()),
                                    a.tokens.unwrap(),
                                    a.hidden.unwrap(),
                                    a.in_stride.unwrap(),
                                    a.out_stride.unwrap(),
                                    0,
                                    0,
                                    1,
                                    0.0f,
                                    false,
                                    false};
}

/// Input and output contiguous (or one row): the kernels' kFlat addressing applies.
template <typename T, typename Out>
bool is_flat(const QuantParams<T, Out>& p) {
  return p.rows == 1 || (p.in_stride == p.hidden && p.out_stride == p.hidden);
}

/// Whether the vector kernels (`vec` elements of T, `vec` elements of Out) can run.
template <typename T, typename Out>
bool can_vectorize(const QuantParams<T, Out>& p, int vec) {
  VectorizeCheck in_check(vec, sizeof(T)), out_check(vec, sizeof(Out));
  in_check.pointer(p.in).stride(p.in_stride, p.rows).length(p.hidden);
  out_check.pointer(p.out).stride(p.out_stride, p.rows).length(p.hidden);
  return in_check.ok() && out_check.ok();
}

}  // namespace mllm_kernel::host::quant
