// CPU per-token(-group) quantization: int8 and float8_e4m3fn from float32, float16 or bfloat16,
// Highway SIMD chosen at run time, rows split over the module's thread pool.
// Body and formulas: mllm_kernel/cpu/quant.hpp.
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <tvm/ffi/container/tensor.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/quant.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/float_dtype.hpp>
#include <mllm_kernel/cpu/quant.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

namespace detail {

/// Checks input [..., hidden] and out [..., hidden] of dtype Out as rows (row strides free) and
/// scales float32 [rows, hidden / group_size] (any strides); returns the parameters, the input
/// dtype and the row count.
template <typename Out>
QuantParams check_quant(tvm::ffi::TensorView out, tvm::ffi::TensorView scales, tvm::ffi::TensorView input,
                        std::int64_t group_size, double eps, bool scale_ue8m0, DLDataType* dtype_out,
                        std::int64_t* rows_out) {
  using namespace host;
  SymbolicSize R{"num_rows"}, H{"hidden"}, S_in{"input_row_stride"}, S_out{"out_row_stride"};
  SymbolicSize G{"num_groups"}, Sst{"scales_row_stride"}, Ssg{"scales_group_stride"};
  SymbolicDType dtype;
  SymbolicDevice device;
  (void)TensorMatcher({R, H})
      .with_strides({S_in, 1})
      .with_dtype<float, fp16_t, bf16_t>(dtype)
      .with_device<kDLCPU>(device)
      .verify_rows(input, "input");
  RuntimeCheck(R.unwrap() > 0 && H.unwrap() > 0, "input must not be empty");
  RuntimeCheck(group_size > 0, "group_size must be positive, got ", group_size);
  RuntimeCheck(H.unwrap() % group_size == 0, "input: hidden (dim 1) = ", H.unwrap(),
               " must be a multiple of group_size = ", group_size);
  RuntimeCheck(eps >= 0.0, "eps must be non-negative, got ", eps);
  (void)TensorMatcher({R, H}).with_strides({S_out, 1}).with_dtype<Out>().with_device(device).verify_rows(out, "out");
  G.bind(H.unwrap() / group_size, "input and group_size");
  (void)TensorMatcher({R, G}).with_strides({Sst, Ssg}).with_dtype<float>().with_device(device).verify(scales,
                                                                                                      "scales");
  *dtype_out = dtype.unwrap();
  *rows_out = R.unwrap();
  return QuantParams{input.data_ptr(), S_in.unwrap(),  out.data_ptr(),        S_out.unwrap(),
                     static_cast<float*>(scales.data_ptr()), Sst.unwrap(), Ssg.unwrap(), H.unwrap(),
                     group_size,        static_cast<float>(eps), scale_ue8m0};
}

/// Runs the body `pick(tag)` chooses for the input dtype over all rows.
template <typename Pick>
void run_quant(const QuantParams& p, DLDataType dtype, std::int64_t rows, std::int64_t num_threads, Pick pick) {
  visit_float_dtype(dtype, [&](auto tag) {
    auto* fn = pick(tag);
    parallel_for(rows, p.hidden * static_cast<std::int64_t>(sizeof(tag) + 1), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

}  // namespace detail

/// int8 quantization per group of `group_size` elements of each row (group_size = hidden for
/// per-token): scales[r, g] = max(amax, eps) / 127, out = round_half_even(x / scale) saturated.
inline void quant_int8(tvm::ffi::TensorView out, tvm::ffi::TensorView scales, tvm::ffi::TensorView input,
                       std::int64_t group_size, double eps, std::int64_t num_threads) {
  DLDataType dtype;
  std::int64_t rows;
  const QuantParams p = detail::check_quant<std::int8_t>(out, scales, input, group_size, eps, false, &dtype, &rows);
  detail::run_quant(p, dtype, rows, num_threads,
                    [](auto tag) { return MLLM_KERNEL_CPU_DISPATCH(QuantInt8Rows<decltype(tag)>); });
}

/// float8_e4m3fn quantization per group: scales[r, g] = max(amax, eps) / 448 (rounded up to a
/// power of two with scale_ue8m0), out = e4m3(clamp(x / scale, -448, 448)), nearest even.
inline void quant_fp8(tvm::ffi::TensorView out, tvm::ffi::TensorView scales, tvm::ffi::TensorView input,
                      std::int64_t group_size, double eps, bool scale_ue8m0, std::int64_t num_threads) {
  DLDataType dtype;
  std::int64_t rows;
  const QuantParams p =
      detail::check_quant<fp8_e4m3_storage>(out, scales, input, group_size, eps, scale_ue8m0, &dtype, &rows);
  detail::run_quant(p, dtype, rows, num_threads,
                    [](auto tag) { return MLLM_KERNEL_CPU_DISPATCH(QuantFp8Rows<decltype(tag)>); });
}

}  // namespace mllm_kernel::cpu
