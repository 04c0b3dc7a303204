// CPU RMSNorm family: rmsnorm, fused_add_rmsnorm, qknorm and qknorm_across_heads for float32,
// float16 and bfloat16 (computed in float32), Highway SIMD chosen at run time, rows split over
// the module's thread pool. Bodies: mllm_kernel/cpu/norm.hpp.
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <tvm/ffi/container/tensor.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/norm.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/float_dtype.hpp>
#include <mllm_kernel/cpu/norm.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>

#include <cstdint>

namespace mllm_kernel::cpu {

namespace detail {

/// Normalizes the q and k heads of tokens [begin, end) in place, one RMSNorm row per head
/// (per_head) or per token (across heads: the layouts then have one "head" per token).
template <typename T>
void norm_qk_tokens(const RmsNormParams& q, const RmsNormParams& k, std::int64_t num_tokens,
                    std::int64_t num_threads) {
  auto* norm = MLLM_KERNEL_CPU_DISPATCH(RmsNormRows<T>);
  const std::int64_t bytes = 2 * static_cast<std::int64_t>(sizeof(T)) *
                             (q.hidden * q.input.heads + k.hidden * k.input.heads);
  parallel_for(num_tokens, bytes, num_threads, [&](std::int64_t begin, std::int64_t end) {
    norm(q, begin * q.input.heads, end * q.input.heads);
    norm(k, begin * k.input.heads, end * k.input.heads);
  });
}

}  // namespace detail

/// out = input * rsqrt(mean(input^2, -1) + eps) * weight. input and out are [rows, hidden]
/// with any row stride (out may alias input); weight is [hidden]; one dtype throughout.
inline void rmsnorm(tvm::ffi::TensorView out, tvm::ffi::TensorView input, tvm::ffi::TensorView weight, double eps,
                    std::int64_t num_threads) {
  using namespace host;
  SymbolicSize R{"num_rows"}, H{"hidden"}, S_in{"input_row_stride"}, S_out{"out_row_stride"};
  SymbolicDType dtype;
  SymbolicDevice device;
  (void)TensorMatcher({R, H})
      .with_strides({S_in, 1})
      .with_dtype<float, fp16_t, bf16_t>(dtype)
      .with_device<kDLCPU>(device)
      .verify(input, "input");
  (void)TensorMatcher({R, H}).with_strides({S_out, 1}).with_dtype(dtype).with_device(device).verify(out, "out");
  (void)TensorMatcher({H}).with_dtype(dtype).with_device(device).verify(weight, "weight");
  RuntimeCheck(R.unwrap() > 0 && H.unwrap() > 0, "input must not be empty");

  const RmsNormParams p{{input.data_ptr(), S_in.unwrap(), 0, 1}, {out.data_ptr(), S_out.unwrap(), 0, 1},
                        weight.data_ptr(), H.unwrap(), static_cast<float>(eps)};
  visit_float_dtype(dtype.unwrap(), [&](auto tag) {
    using T = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(RmsNormRows<T>);
    parallel_for(R.unwrap(), 2 * H.unwrap() * static_cast<std::int64_t>(sizeof(T)), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

/// In place: residual <- input + residual (in float32, stored in the dtype), then
/// input <- rmsnorm(residual) * weight. input and residual are [rows, hidden], any row stride.
inline void fused_add_rmsnorm(tvm::ffi::TensorView input, tvm::ffi::TensorView residual, tvm::ffi::TensorView weight,
                              double eps, std::int64_t num_threads) {
  using namespace host;
  SymbolicSize R{"num_rows"}, H{"hidden"}, S_in{"input_row_stride"}, S_res{"residual_row_stride"};
  SymbolicDType dtype;
  SymbolicDevice device;
  (void)TensorMatcher({R, H})
      .with_strides({S_in, 1})
      .with_dtype<float, fp16_t, bf16_t>(dtype)
      .with_device<kDLCPU>(device)
      .verify(input, "input");
  (void)TensorMatcher({R, H})
      .with_strides({S_res, 1})
      .with_dtype(dtype)
      .with_device(device)
      .verify(residual, "residual");
  (void)TensorMatcher({H}).with_dtype(dtype).with_device(device).verify(weight, "weight");
  RuntimeCheck(R.unwrap() > 0 && H.unwrap() > 0, "input must not be empty");

  const FusedAddRmsNormParams p{{input.data_ptr(), S_in.unwrap(), 0, 1},
                                {residual.data_ptr(), S_res.unwrap(), 0, 1},
                                weight.data_ptr(), H.unwrap(), static_cast<float>(eps)};
  visit_float_dtype(dtype.unwrap(), [&](auto tag) {
    using T = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(FusedAddRmsNormRows<T>);
    parallel_for(R.unwrap(), 4 * H.unwrap() * static_cast<std::int64_t>(sizeof(T)), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

/// In place RMSNorm of every head over head_dim: q [T, Hq, D] *= rsqrt(...) * q_weight [D],
/// k [T, Hk, D] likewise with k_weight. Token and head strides are free; the last dim is dense.
inline void qknorm(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView q_weight,
                   tvm::ffi::TensorView k_weight, double eps, std::int64_t num_threads) {
  using namespace host;
  SymbolicSize T{"num_tokens"}, Hq{"num_q_heads"}, Hk{"num_k_heads"}, D{"head_dim"};
  SymbolicSize Sq{"q_token_stride"}, Shq{"q_head_stride"}, Sk{"k_token_stride"}, Shk{"k_head_stride"};
  SymbolicDType dtype;
  SymbolicDevice device;
  (void)TensorMatcher({T, Hq, D})
      .with_strides({Sq, Shq, 1})
      .with_dtype<float, fp16_t, bf16_t>(dtype)
      .with_device<kDLCPU>(device)
      .verify(q, "q");
  (void)TensorMatcher({T, Hk, D}).with_strides({Sk, Shk, 1}).with_dtype(dtype).with_device(device).verify(k, "k");
  (void)TensorMatcher({D}).with_dtype(dtype).with_device(device).verify(q_weight, "q_weight").verify(k_weight,
                                                                                                    "k_weight");
  RuntimeCheck(T.unwrap() > 0 && Hq.unwrap() > 0 && Hk.unwrap() > 0 && D.unwrap() > 0, "q and k must not be empty");

  const auto e = static_cast<float>(eps);
  const RmsNormParams pq{{q.data_ptr(), Sq.unwrap(), Shq.unwrap(), Hq.unwrap()},
                         {q.data_ptr(), Sq.unwrap(), Shq.unwrap(), Hq.unwrap()}, q_weight.data_ptr(), D.unwrap(), e};
  const RmsNormParams pk{{k.data_ptr(), Sk.unwrap(), Shk.unwrap(), Hk.unwrap()},
                         {k.data_ptr(), Sk.unwrap(), Shk.unwrap(), Hk.unwrap()}, k_weight.data_ptr(), D.unwrap(), e};
  visit_float_dtype(dtype.unwrap(),
                    [&](auto tag) { detail::norm_qk_tokens<decltype(tag)>(pq, pk, T.unwrap(), num_threads); });
}

/// In place RMSNorm of each token over all its heads: q [T, Hq, D] (heads dense within a token)
/// normalized over Hq*D with q_weight [Hq*D]; k [T, Hk, D] likewise with k_weight [Hk*D].
inline void qknorm_across_heads(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView q_weight,
                                tvm::ffi::TensorView k_weight, double eps, std::int64_t num_threads) {
  using namespace host;
  SymbolicSize T{"num_tokens"}, Hq{"num_q_heads"}, Hk{"num_k_heads"}, D{"head_dim"};
  SymbolicSize Sq{"q_token_stride"}, Sk{"k_token_stride"};
  SymbolicDType dtype;
  SymbolicDevice device;
  (void)TensorMatcher({T, Hq, D})
      .with_strides({Sq, D, 1})
      .with_dtype<float, fp16_t, bf16_t>(dtype)
      .with_device<kDLCPU>(device)
      .verify(q, "q");
  (void)TensorMatcher({T, Hk, D}).with_strides({Sk, D, 1}).with_dtype(dtype).with_device(device).verify(k, "k");
  SymbolicSize QW{"num_q_heads*head_dim"}, KW{"num_k_heads*head_dim"};
  QW.bind(Hq.unwrap() * D.unwrap(), "q");
  KW.bind(Hk.unwrap() * D.unwrap(), "k");
  (void)TensorMatcher({QW}).with_dtype(dtype).with_device(device).verify(q_weight, "q_weight");
  (void)TensorMatcher({KW}).with_dtype(dtype).with_device(device).verify(k_weight, "k_weight");
  RuntimeCheck(T.unwrap() > 0 && Hq.unwrap() > 0 && Hk.unwrap() > 0 && D.unwrap() > 0, "q and k must not be empty");

  const auto e = static_cast<float>(eps);
  const RmsNormParams pq{{q.data_ptr(), Sq.unwrap(), 0, 1}, {q.data_ptr(), Sq.unwrap(), 0, 1}, q_weight.data_ptr(),
                         QW.unwrap(), e};
  const RmsNormParams pk{{k.data_ptr(), Sk.unwrap(), 0, 1}, {k.data_ptr(), Sk.unwrap(), 0, 1}, k_weight.data_ptr(),
                         KW.unwrap(), e};
  visit_float_dtype(dtype.unwrap(),
                    [&](auto tag) { detail::norm_qk_tokens<decltype(tag)>(pq, pk, T.unwrap(), num_threads); });
}

}  // namespace mllm_kernel::cpu
