// Per-target body of the CPU gated DeltaNet (decode and extend; the recurrence is in
// mllm_kernel/gdn.hpp). Highway's foreach_target includes this file once per SIMD target, so
// it has no include guard; the parameters come from gdn.hpp (included once).
//
// One task is one sequence and value head: its state [head_v_dim, head_k_dim] is updated in
// place in the pool, token by token; per token each state row takes two passes over head_k_dim
// floats (S k and S q, then S = decay S + delta k), the row staying in L1 between them.
#include <mllm_kernel/cpu/simd_io-inl.hpp>
#include <mllm_kernel/gdn.hpp>

#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace mllm_kernel::cpu::HWY_NAMESPACE {

/// One element of T as float.
template <typename T>
HWY_INLINE float LoadScalar(DF df, const T* p) {
  return hn::GetLane(Load(df, p, 1));
}

/// The (sequence, value head) tasks [begin, end) of a call.
template <typename T>
HWY_NOINLINE void GdnTasks(const host::GdnParams& p, std::int64_t begin, std::int64_t end) {
  const DF df;
  const auto dk = static_cast<std::size_t>(p.head_k_dim), dv = static_cast<std::size_t>(p.head_v_dim);
  const int group = p.num_v_heads / p.num_k_heads;
  alignas(64) float k[128], q[128];  // head_k_dim <= 128 (gdn_head_k_dim_supported)
  std::vector<float> v(dv), o(dv), padding_state;
  for (std::int64_t task = begin; task < end; ++task) {
    const std::int64_t s = task / p.num_v_heads;
    const int h = static_cast<int>(task % p.num_v_heads), hk = h / group;
    const std::int64_t bos = p.cu_seqlens ? p.cu_seqlens[s] : s, eos = p.cu_seqlens ? p.cu_seqlens[s + 1] : s + 1;
    const std::int64_t index = p.cache_indices[s];
    float* state;
    if (index >= 0) {
      state = p.state + (index * p.num_v_heads + h) * static_cast<std::int64_t>(dv * dk);
    } else {  // padding: a zero state, not written back
      padding_state.assign(dv * dk, 0.0f);
      state = padding_state.data();
    }
    for (std::int64_t t = bos; t < eos; ++t) {
      const float kk = StageRow(df, static_cast<const T*>(p.k) + t * p.k_s0 + hk * p.k_s1, k, dk);
      const float qq = StageRow(df, static_cast<const T*>(p.q) + t * p.q_s0 + hk * p.q_s1, q, dk);
      (void)StageRow(df, static_cast<const T*>(p.v) + t * p.v_s0 + h * p.v_s1, v.data(), dv);
      const VF k_scale = hn::Set(df, 1.0f / (std::sqrt(kk) + host::kGdnNormEps));
      const VF q_scale = hn::Set(df, p.scale / (std::sqrt(qq) + host::kGdnNormEps));
      VF kq_acc = hn::Zero(df);
      ForEachChunk(df, dk, [&](std::size_t i, std::size_t n) {
        const VF kn = hn::Mul(Load(df, k + i, n), k_scale), qn = hn::Mul(Load(df, q + i, n), q_scale);
        Store(df, kn, k + i, n);
        Store(df, qn, q + i, n);
        kq_acc = hn::MulAdd(kn, qn, kq_acc);
      });
      const float kq = SumLanes(df, kq_acc);
      float decay, beta;
      host::gdn_gates(LoadScalar(df, static_cast<const T*>(p.a) + t * p.a_s0 + h),
                      LoadScalar(df, static_cast<const T*>(p.b) + t * p.b_s0 + h), p.A_log[h], p.dt_bias[h], decay,
                      beta);
      const VF v_decay = hn::Set(df, decay);
      for (std::size_t r = 0; r < dv; ++r) {
        float* row = state + r * dk;
        VF sk_acc = hn::Zero(df), sq_acc = hn::Zero(df);
        ForEachChunk(df, dk, [&](std::size_t i, std::size_t n) {
          const VF x = Load(df, row + i, n);
          sk_acc = hn::MulAdd(x, Load(df, k + i, n), sk_acc);
          sq_acc = hn::MulAdd(x, Load(df, q + i, n), sq_acc);
        });
        const float sk = SumLanes(df, sk_acc), sq = SumLanes(df, sq_acc);
        const float delta = beta * (v[r] - decay * sk);
        const VF v_delta = hn::Set(df, delta);
        ForEachChunk(df, dk, [&](std::size_t i, std::size_t n) {
          Store(df, hn::MulAdd(v_decay, Load(df, row + i, n), hn::Mul(v_delta, Load(df, k + i, n))), row + i, n);
        });
        o[r] = decay * sq + delta * kq;
      }
      T* out = static_cast<T*>(p.out) + (t * p.num_v_heads + h) * static_cast<std::int64_t>(dv);
      ForEachChunk(df, dv, [&](std::size_t i, std::size_t n) { Store(df, Load(df, o.data() + i, n), out + i, n); });
    }
  }
}

}  // namespace mllm_kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
