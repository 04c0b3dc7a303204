// Gated DeltaNet device helpers shared by the decode, recurrent extend and chunked extend
// kernels: reading one element of a head, a token's gates, the L2 normalisation of q and k, and
// the address of a state row. The recurrence itself is in mllm_kernel/gdn.hpp.
#pragma once

#include <mllm_kernel/gdn.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/warp.cuh>

#include <cstdint>

namespace mllm_kernel::device::gdn {

using host::GdnParams;

/// Element e of token t's head of a [T, H, D] tensor with token stride s0 and head stride s1.
template <typename T>
MLLM_DEVICE float head_element(const void* base, std::int64_t s0, std::int64_t s1, std::int64_t t, int head, int e) {
  return cast<float>(static_cast<const T*>(base)[t * s0 + head * s1 + e]);
}

/// a[t, h] and b[t, h] as float.
template <typename T>
MLLM_DEVICE void token_ab(const GdnParams& p, std::int64_t t, int h, float& a, float& b) {
  a = cast<float>(static_cast<const T*>(p.a)[t * p.a_s0 + h]);
  b = cast<float>(static_cast<const T*>(p.b)[t * p.b_s0 + h]);
}

/// exp(g) and beta of token t, value head h.
template <typename T>
MLLM_DEVICE void token_gates(const GdnParams& p, std::int64_t t, int h, float& decay, float& beta) {
  float a, b;
  token_ab<T>(p, t, h, a, b);
  host::gdn_gates(a, b, p.A_log[h], p.dt_bias[h], decay, beta);
}

/// The L2 normalisation factors of one head of k and q held by a group of kWidth lanes, kPer
/// elements a lane: 1 / (||k|| + eps) and scale / (||q|| + eps) (on every lane of the group).
template <int kWidth, int kPer>
MLLM_DEVICE void qk_norm_scales(const float (&k)[kPer], const float (&q)[kPer], float scale, float& k_scale,
                                float& q_scale) {
  float kk = 0.f, qq = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    kk = fmaf(k[i], k[i], kk);
    qq = fmaf(q[i], q[i], qq);
  }
  kk = warp::reduce_sum<kWidth>(kk);
  qq = warp::reduce_sum<kWidth>(qq);
  k_scale = 1.0f / (sqrtf(kk) + host::kGdnNormEps);
  q_scale = scale / (sqrtf(qq) + host::kGdnNormEps);
}

/// L2-normalises one head of k and q held by a group of kWidth lanes, kPer elements a lane, in
/// place: k / (||k|| + eps), q / (||q|| + eps) * scale. Returns k.q (on every lane of the group).
template <int kWidth, int kPer>
MLLM_DEVICE float normalise_qk(float (&k)[kPer], float (&q)[kPer], float scale) {
  float k_scale, q_scale;
  qk_norm_scales<kWidth>(k, q, scale, k_scale, q_scale);
  float kq = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    k[i] *= k_scale;
    q[i] *= q_scale;
    kq = fmaf(k[i], q[i], kq);
  }
  return warp::reduce_sum<kWidth>(kq);
}

/// The state row `row` of value head h at pool index `index`.
MLLM_DEVICE float* state_row(const GdnParams& p, std::int64_t index, int h, int row) {
  return p.state + ((index * p.num_v_heads + h) * p.head_v_dim + row) * static_cast<std::int64_t>(p.head_k_dim);
}

}  // namespace mllm_kernel::device::gdn
