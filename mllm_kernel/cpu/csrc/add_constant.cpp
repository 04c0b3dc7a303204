// CPU add_constant kernels: dst = src + constant (a template argument) or + value (run time),
// on contiguous 1-D float32 tensors, with Highway SIMD chosen at run time for this CPU.
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

// Compile the body once per SIMD target, then once more for the static target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/add_constant.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/add_constant.hpp>
#include <mllm_kernel/cpu/dispatch.hpp>

namespace mllm_kernel::cpu {

HWY_EXPORT(AddConstantRuntime);

namespace detail {
/// Checks dst and src (1-D, float32, CPU, same length, non-empty) and returns the length.
inline std::size_t check_add_constant_args(mllm_kernel::TensorView dst, mllm_kernel::TensorView src) {
  using namespace host;
  SymbolicSize n{"num_elements"};
  (void)TensorMatcher({n}).with_dtype<float>().with_device<kDLCPU>().verify(src, "src").verify(dst, "dst");
  RuntimeCheck(n.unwrap() > 0, "src must not be empty");
  return static_cast<std::size_t>(n.unwrap());
}
}  // namespace detail

/// dst = src + kConstant, for kConstant in {1, 2, 4, 8, 16}.
template <int kConstant>
void add_constant(mllm_kernel::TensorView dst, mllm_kernel::TensorView src) {
  static_assert(kConstant == 1 || kConstant == 2 || kConstant == 4 || kConstant == 8 || kConstant == 16,
                "add_constant supports the constants 1, 2, 4, 8 and 16");
  const std::size_t n = detail::check_add_constant_args(dst, src);
  MLLM_KERNEL_CPU_DISPATCH(AddConstant<kConstant>)(static_cast<float*>(dst.data_ptr()),
                                                   static_cast<const float*>(src.data_ptr()), n);
}

/// dst = src + value.
inline void add_constant_runtime(mllm_kernel::TensorView dst, mllm_kernel::TensorView src, double value) {
  const std::size_t n = detail::check_add_constant_args(dst, src);
  HWY_DYNAMIC_DISPATCH(AddConstantRuntime)(static_cast<float*>(dst.data_ptr()),
                                           static_cast<const float*>(src.data_ptr()), n, static_cast<float>(value));
}

}  // namespace mllm_kernel::cpu
