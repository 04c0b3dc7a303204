// CPU RMSNorm family: rmsnorm, fused_add_rmsnorm, qknorm, qknorm_across_heads and
// rms_norm_gated for float32,
// float16 and bfloat16 (computed in float32), Highway SIMD chosen at run time, rows split over
// the module's thread pool. Bodies: mllm_kernel/cpu/norm.hpp.
#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <mllm_kernel/tensor_view.hpp>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "mllm_kernel/cpu/norm.hpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <mllm_kernel/cpu/dispatch.hpp>
#include <mllm_kernel/cpu/norm.hpp>
#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/cpu/types.hpp>

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

/// out = input * rsqrt(mean(input^2, -1) + eps) * weight. input and out are [..., hidden] as rows
/// with any row stride (out may alias input); weight is [hidden]; one dtype throughout.
inline void rmsnorm(mllm_kernel::TensorView out, mllm_kernel::TensorView input, mllm_kernel::TensorView weight, double eps,
                    std::int64_t num_threads) {
  using namespace host;
  NormRowsArgs a("out_row_stride");
  a.verify<kDLCPU, float, fp16_t, bf16_t>(input, out, "out", weight);
  const std::int64_t R = a.tokens.unwrap(), H = a.hidden.unwrap();

  const RmsNormParams p{{input.data_ptr(), a.in_stride.unwrap(), 0, 1},
                        {out.data_ptr(), a.second_stride.unwrap(), 0, 1},
                        weight.data_ptr(),
                        H,
                        static_cast<float>(eps)};
  visit_float_dtype(a.dtype.unwrap(), [&](auto tag) {
    using T = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(RmsNormRows<T>);
    parallel_for(R, 2 * H * static_cast<std::int64_t>(sizeof(T)), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

/// out = rmsnorm(input) * weight * silu(z). input, z and out are [..., hidden] as rows, each with
/// its own row stride (out may alias input); weight is [hidden]; one dtype throughout.
inline void rms_norm_gated(mllm_kernel::TensorView out, mllm_kernel::TensorView input, mllm_kernel::TensorView z,
                           mllm_kernel::TensorView weight, double eps, std::int64_t num_threads) {
  using namespace host;
  GatedNormArgs a;
  a.verify<kDLCPU, float, fp16_t, bf16_t>(out, input, z, weight);
  const std::int64_t R = a.tokens.unwrap(), H = a.hidden.unwrap();
  const RmsNormGatedParams p{{input.data_ptr(), a.in_stride.unwrap(), 0, 1},
                             {z.data_ptr(), a.second_stride.unwrap(), 0, 1},
                             {out.data_ptr(), a.out_stride.unwrap(), 0, 1},
                             weight.data_ptr(),
                             H,
                             static_cast<float>(eps)};
  visit_float_dtype(a.dtype.unwrap(), [&](auto tag) {
    using T = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(RmsNormGatedRows<T>);
    parallel_for(R, 3 * H * static_cast<std::int64_t>(sizeof(T)), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

/// In place: residual <- input + residual (in float32, stored in the dtype), then
/// input <- rmsnorm(residual) * weight. input and residual are [..., hidden] as rows,
/// any row stride.
inline void fused_add_rmsnorm(mllm_kernel::TensorView input, mllm_kernel::TensorView residual, mllm_kernel::TensorView weight,
                              double eps, std::int64_t num_threads) {
  using namespace host;
  NormRowsArgs a("residual_row_stride");
  a.verify<kDLCPU, float, fp16_t, bf16_t>(input, residual, "residual", weight);
  const std::int64_t R = a.tokens.unwrap(), H = a.hidden.unwrap();

  const FusedAddRmsNormParams p{{input.data_ptr(), a.in_stride.unwrap(), 0, 1},
                                {residual.data_ptr(), a.second_stride.unwrap(), 0, 1},
                                weight.data_ptr(), H, static_cast<float>(eps)};
  visit_float_dtype(a.dtype.unwrap(), [&](auto tag) {
    using T = decltype(tag);
    auto* fn = MLLM_KERNEL_CPU_DISPATCH(FusedAddRmsNormRows<T>);
    parallel_for(R, 4 * H * static_cast<std::int64_t>(sizeof(T)), num_threads,
                 [&](std::int64_t begin, std::int64_t end) { fn(p, begin, end); });
  });
}

/// In place RMSNorm of every head over head_dim: q [T, Hq, D] *= rsqrt(...) * q_weight [D],
/// k [T, Hk, D] likewise with k_weight. Token and head strides are free; the last dim is dense.
inline void qknorm(mllm_kernel::TensorView q, mllm_kernel::TensorView k, mllm_kernel::TensorView q_weight,
                   mllm_kernel::TensorView k_weight, double eps, std::int64_t num_threads) {
  using namespace host;
  QKArgs a;
  a.verify<kDLCPU, float, fp16_t, bf16_t>(q, k);
  a.verify_weights(q_weight, k_weight, /*across_heads=*/false);
  const std::int64_t Sq = a.q_s0.unwrap(), Shq = a.q_s1.unwrap(), Hq = a.q_heads.unwrap();
  const std::int64_t Sk = a.k_s0.unwrap(), Shk = a.k_s1.unwrap(), Hk = a.k_heads.unwrap();
  const auto e = static_cast<float>(eps);
  const RmsNormParams pq{{q.data_ptr(), Sq, Shq, Hq}, {q.data_ptr(), Sq, Shq, Hq}, q_weight.data_ptr(),
                         a.head_dim.unwrap(), e};
  const RmsNormParams pk{{k.data_ptr(), Sk, Shk, Hk}, {k.data_ptr(), Sk, Shk, Hk}, k_weight.data_ptr(),
                         a.head_dim.unwrap(), e};
  visit_float_dtype(a.dtype.unwrap(),
                    [&](auto tag) { detail::norm_qk_tokens<decltype(tag)>(pq, pk, a.tokens.unwrap(), num_threads); });
}

/// In place RMSNorm of each token over all its heads: q [T, Hq, D] (heads dense within a token)
/// normalized over Hq*D with q_weight [Hq*D]; k [T, Hk, D] likewise with k_weight [Hk*D].
inline void qknorm_across_heads(mllm_kernel::TensorView q, mllm_kernel::TensorView k, mllm_kernel::TensorView q_weight,
                                mllm_kernel::TensorView k_weight, double eps, std::int64_t num_threads) {
  using namespace host;
  QKArgs a;
  a.verify<kDLCPU, float, fp16_t, bf16_t>(q, k, /*heads_packed=*/true);
  a.verify_weights(q_weight, k_weight, /*across_heads=*/true);
  const std::int64_t Sq = a.q_s0.unwrap(), Sk = a.k_s0.unwrap();
  const auto e = static_cast<float>(eps);
  const RmsNormParams pq{{q.data_ptr(), Sq, 0, 1}, {q.data_ptr(), Sq, 0, 1}, q_weight.data_ptr(),
                         a.q_hidden.unwrap(), e};
  const RmsNormParams pk{{k.data_ptr(), Sk, 0, 1}, {k.data_ptr(), Sk, 0, 1}, k_weight.data_ptr(),
                         a.k_hidden.unwrap(), e};
  visit_float_dtype(a.dtype.unwrap(),
                    [&](auto tag) { detail::norm_qk_tokens<decltype(tag)>(pq, pk, a.tokens.unwrap(), num_threads); });
}

}  // namespace mllm_kernel::cpu
