// What the CUDA activation quantizers (cuda/csrc/quant_per_group.cuh, quant_per_token.cuh,
// quant_per_tensor.cuh) share: the kernels' parameters and the host checks that fill them.
//
// input is [..., hidden] seen as rows [rows, hidden] (verify_rows) with a free row stride (unit
// stride within a row), out the same with its own row stride, scales float32 [rows, groups] with
// free strides (so the column-major layout of block-scaled GEMMs is a transposed view).
#pragma once

#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/vec.cuh>

#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>

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

/// Verifies input and out [..., H] as rows [R, H] (dtypes T and Out), scales float32 [R, G] and
/// fills the parameters (G = H / group_size).
template <typename T, typename Out>
QuantParams<T, Out> check(tvm::ffi::TensorView out, tvm::ffi::TensorView scales, tvm::ffi::TensorView input,
                          std::int64_t group_size, double eps, DLDevice* device_out) {
  SymbolicSize R{"num_tokens"}, H{"hidden"}, G{"num_groups"};
  SymbolicSize Sin{"input_row_stride"}, Sout{"out_row_stride"}, Ss0{"scales_row_stride"}, Ss1{"scales_group_stride"};
  SymbolicDevice device;
  (void)TensorMatcher({R, H}).with_strides({Sin, 1}).with_device<kDLCUDA>(device).template with_dtype<T>().verify_rows(input,
                                                                                                          "input");
  (void)TensorMatcher({R, H}).with_strides({Sout, 1}).with_device(device).template with_dtype<Out>().verify_rows(out, "out");
  RuntimeCheck(R.unwrap() > 0 && H.unwrap() > 0, "input must not be empty, got shape [", R.unwrap(), ", ",
               H.unwrap(), "]");
  RuntimeCheck(H.unwrap() % group_size == 0, "hidden size ", H.unwrap(), " is not divisible by group_size ",
               group_size);
  RuntimeCheck(eps >= 0.0, "eps must be non-negative, got ", eps);
  G.bind(H.unwrap() / group_size, "hidden / group_size");
  (void)TensorMatcher({R, G}).with_strides({Ss0, Ss1}).with_dtype<float>().with_device(device).verify(scales,
                                                                                                      "scales");
  *device_out = device.unwrap();
  return QuantParams<T, Out>{static_cast<const T*>(input.data_ptr()),
                             static_cast<Out*>(out.data_ptr()),
                             static_cast<float*>(scales.data_ptr()),
                             R.unwrap(),
                             H.unwrap(),
                             Sin.unwrap(),
                             Sout.unwrap(),
                             Ss0.unwrap(),
                             Ss1.unwrap(),
                             G.unwrap(),
                             static_cast<float>(eps),
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
