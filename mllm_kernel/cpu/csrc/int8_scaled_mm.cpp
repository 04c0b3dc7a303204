// CPU int8_scaled_mm: out = (mat_a @ mat_b) * scales_a[:, None] * scales_b[None, :] (+ bias) for
// int8 operands, summed exactly in int32, scaled in float32 and stored as float16, bfloat16 or
// float32. Highway SIMD (byte dot products where the CPU has them: VNNI, SDOT; int16
// multiply-adds elsewhere); output columns, or the rows of a narrow output, split over the
// module's thread pool.
// Body and formulas: mllm_kernel/cpu/int8_scaled_mm.hpp.
#include <mllm_kernel/integer.hpp>
#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/int8_scaled_mm.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/int8_scaled_mm.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/cpu/types.hpp>

#include <algorithm>
#include <cstdint>

namespace mllm_kernel::cpu {

namespace detail {

/// int8_scaled_mm's tensors: mat_a [M, K] int8 with contiguous rows (any row stride), mat_b
/// [K, N] int8 column-major (stride(0) == 1, any column stride: w.t() of a row-major [N, K]
/// weight), scales_a float32 [M] or [1], scales_b float32 [N] or [1] (contiguous; [1] is one
/// scale for all; the wrapper passes 2-D scales as these views), out [M, N] float16, bfloat16
/// or float32 with contiguous rows, bias [N] of out's dtype (contiguous); one CPU device;
/// M may be 0 (an empty result), K and N not. With K == 1 the operands' strides along K are
/// never read, so any layout passes.
struct Int8ScaledMmArgs {
  host::SymbolicSize m{"M"}, k{"K"}, n{"N"}, out_stride{"out_row_stride"};
  host::SymbolicDType dtype;
  host::SymbolicDevice device;
  std::int64_t a_stride = 0, w_stride = 0, sa_stride = 1, sb_stride = 1;

  void verify(mllm_kernel::TensorView out, mllm_kernel::TensorView mat_a, mllm_kernel::TensorView mat_b,
              mllm_kernel::TensorView scales_a, mllm_kernel::TensorView scales_b) {
    using namespace host;
    (void)TensorMatcher({m, k}).with_strides({-1, -1}).with_dtype<std::int8_t>().with_device<kDLCPU>(device).verify(
        mat_a, "mat_a");
    const std::int64_t* as = mat_a.strides().data();
    RuntimeCheck(as[1] == 1 || k.unwrap() == 1, "mat_a: rows must be contiguous (stride(1) == 1), got strides [", as[0],
                 ", ", as[1], "]");
    (void)TensorMatcher({k, n}).with_strides({-1, -1}).with_dtype<std::int8_t>().with_device(device).verify(mat_b,
                                                                                                         "mat_b");
    const std::int64_t* bs = mat_b.strides().data();
    RuntimeCheck(bs[0] == 1 || k.unwrap() == 1,
                 "mat_b: must be column-major (stride(0) == 1: w.t() of a row-major [N, K] weight w), got strides [",
                 bs[0], ", ", bs[1], "]");
    // No rows (an empty batch) is an empty product, as on CUDA; a weight must have both sizes.
    RuntimeCheck(k.unwrap() > 0 && n.unwrap() > 0, "mat_b must not be empty, got K = ", k.unwrap(), ", N = ",
                 n.unwrap());
    a_stride = as[0];
    w_stride = bs[1];
    sa_stride = host::verify_scale_vector(scales_a, m, device, "scales_a");
    sb_stride = host::verify_scale_vector(scales_b, n, device, "scales_b");
    (void)TensorMatcher({m, n})
        .with_strides({out_stride, 1})
        .with_dtype<fp16_t, bf16_t, float>(dtype)
        .with_device(device)
        .verify(out, "out");
  }

  void verify_bias(mllm_kernel::TensorView bias) {
    (void)host::TensorMatcher({n}).with_dtype(dtype).with_device(device).verify(bias, "bias");
  }
};

/// Runs the body for out dtype T over ranges of output columns (multiples of
/// kInt8MmColumnGrain: each thread reads its own rows of w once per block of a), or over ranges
/// of rows when the columns are too few for the threads and the rows are more.
template <typename T>
void run_int8_scaled_mm(const Int8ScaledMmParams& p, std::int64_t M, std::int64_t N, std::int64_t num_threads) {
  auto* fn = MLLM_KERNEL_CPU_DISPATCH(Int8ScaledMm<T>);
  // Traffic per unit of work, with the products counted as bytes too (a multiply-add costs
  // about an eighth of a streamed byte), so that compute-heavy calls get threads.
  const std::int64_t K = p.k, elem = sizeof(T);
  const std::int64_t grains = host::div_ceil(N, kInt8MmColumnGrain);
  if (grains >= num_threads || grains >= M) {
    parallel_for(grains, kInt8MmColumnGrain * (K + M * (elem + K / 8)), num_threads,
                 [&](std::int64_t begin, std::int64_t end) {
                   fn(p, 0, M, begin * kInt8MmColumnGrain, std::min(N, end * kInt8MmColumnGrain));
                 });
  } else {
    parallel_for(M, K + N * (elem + K / 8), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end, 0, N); });
  }
}

template <bool kBias>
void int8_scaled_mm(mllm_kernel::TensorView out, mllm_kernel::TensorView mat_a, mllm_kernel::TensorView mat_b,
                    mllm_kernel::TensorView scales_a, mllm_kernel::TensorView scales_b, const mllm_kernel::TensorView* bias,
                    std::int64_t num_threads) {
  Int8ScaledMmArgs args;
  args.verify(out, mat_a, mat_b, scales_a, scales_b);
  if constexpr (kBias) args.verify_bias(*bias);
  if (args.m.unwrap() == 0) return;
  const Int8ScaledMmParams p{static_cast<const std::int8_t*>(mat_a.data_ptr()),
                             args.a_stride,
                             static_cast<const std::int8_t*>(mat_b.data_ptr()),
                             args.w_stride,
                             static_cast<const float*>(scales_a.data_ptr()),
                             args.sa_stride,
                             static_cast<const float*>(scales_b.data_ptr()),
                             args.sb_stride,
                             kBias ? bias->data_ptr() : nullptr,
                             out.data_ptr(),
                             args.out_stride.unwrap(),
                             args.k.unwrap()};
  visit_float_dtype(args.dtype.unwrap(), [&](auto tag) {
    run_int8_scaled_mm<decltype(tag)>(p, args.m.unwrap(), args.n.unwrap(), num_threads);
  });
}

}  // namespace detail

/// out [M, N] = float(mat_a [M, K] @ mat_b [K, N]) * scales_a * scales_b, int8 operands summed
/// exactly in int32 (see Int8ScaledMmArgs for the layouts); out's dtype is the output type.
inline void int8_scaled_mm(mllm_kernel::TensorView out, mllm_kernel::TensorView mat_a, mllm_kernel::TensorView mat_b,
                           mllm_kernel::TensorView scales_a, mllm_kernel::TensorView scales_b, std::int64_t num_threads) {
  detail::int8_scaled_mm<false>(out, mat_a, mat_b, scales_a, scales_b, nullptr, num_threads);
}

/// As int8_scaled_mm, plus bias [N] (out's dtype) added in float32 before the one rounding.
inline void int8_scaled_mm_bias(mllm_kernel::TensorView out, mllm_kernel::TensorView mat_a, mllm_kernel::TensorView mat_b,
                                mllm_kernel::TensorView scales_a, mllm_kernel::TensorView scales_b,
                                mllm_kernel::TensorView bias, std::int64_t num_threads) {
  detail::int8_scaled_mm<true>(out, mat_a, mat_b, scales_a, scales_b, &bias, num_threads);
}

}  // namespace mllm_kernel::cpu
