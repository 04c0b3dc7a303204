// CPU per-token(-group) quantization: int8 and float8_e4m3fn from float32, float16 or bfloat16,
// Highway SIMD chosen at run time, rows split over the module's thread pool.
// Body and formulas: mllm_kernel/cpu/quant.hpp.
#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/quant.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/quant.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/cpu/types.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

namespace detail {

/// Checks input [..., hidden], out [..., hidden] of dtype Out and scales float32
/// [rows, hidden / group_size] (QuantRowsArgs); returns the parameters, the input dtype and the
/// row count.
template <typename Out>
QuantParams check_quant(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
                        std::int64_t group_size, double eps, bool scale_ue8m0, DLDataType* dtype_out,
                        std::int64_t* rows_out) {
  host::QuantRowsArgs a;
  a.verify<kDLCPU, Out, float, fp16_t, bf16_t>(out, scales, input, group_size, eps);
  *dtype_out = a.dtype.unwrap();
  *rows_out = a.tokens.unwrap();
  return QuantParams{input.data_ptr(), a.in_stride.unwrap(), out.data_ptr(), a.out_stride.unwrap(),
                     static_cast<float*>(scales.data_ptr()), a.scales_s0.unwrap(), a.scales_s1.unwrap(),
                     a.hidden.unwrap(), group_size, static_cast<float>(eps), scale_ue8m0};
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
inline void quant_int8(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
                       std::int64_t group_size, double eps, std::int64_t num_threads) {
  DLDataType dtype;
  std::int64_t rows;
  const QuantParams p = detail::check_quant<std::int8_t>(out, scales, input, group_size, eps, false, &dtype, &rows);
  detail::run_quant(p, dtype, rows, num_threads,
                    [](auto tag) { return MLLM_KERNEL_CPU_DISPATCH(QuantInt8Rows<decltype(tag)>); });
}

/// float8_e4m3fn quantization per group: scales[r, g] = max(amax, eps) / 448 (rounded up to a
/// power of two with scale_ue8m0), out = e4m3(clamp(x / scale, -448, 448)), nearest even.
inline void quant_fp8(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
                      std::int64_t group_size, double eps, bool scale_ue8m0, std::int64_t num_threads) {
  DLDataType dtype;
  std::int64_t rows;
  const QuantParams p =
      detail::check_quant<fp8_e4m3_storage>(out, scales, input, group_size, eps, scale_ue8m0, &dtype, &rows);
  detail::run_quant(p, dtype, rows, num_threads,
                    [](auto tag) { return MLLM_KERNEL_CPU_DISPATCH(QuantFp8Rows<decltype(tag)>); });
}

}  // namespace mllm_kernel::cpu
