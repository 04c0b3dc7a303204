// Gated DeltaNet (linear attention) recurrence, shared by the CPU and CUDA kernels: the
// parameters, the argument checks, and the per-token gates.
//
// Per token t of a sequence and value head h (key head h / (num_v_heads / num_k_heads)):
//   g = -exp(A_log[h]) * softplus(a[t, h] + dt_bias[h]),  beta = sigmoid(b[t, h])
//   k <- k / (||k|| + 1e-6),  q <- q / (||q|| + 1e-6) * head_k_dim^-0.5
//   S <- exp(g) * S;  S <- S + beta * (v - S k) k^T;  o = S q
// with S [head_v_dim, head_k_dim] float32, all arithmetic in float32. A sequence starts from
// state_pool[cache_indices[s], h] and writes its final state back there; a negative index is a
// padding entry: it starts from zeros and its state is not written. Rows of S are independent
// given k, q, g and beta: the kernels split a head's rows over threads.
//
// Decode: one token per sequence (q, k [bs, Hk, Dk]); extend: sequences of cu_seqlens
// ([num_seqs + 1] int64) over q, k [total_tokens, Hk, Dk].
#pragma once

#include <mllm_kernel/host_device.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cmath>
#include <cstdint>

namespace mllm_kernel::host {

/// The arguments of one call. Strides in elements; q, k, v dense along their last dim, a and b
/// along heads; state_pool, out, A_log and dt_bias contiguous.
struct GdnParams {
  const void* q;
  const void* k;
  const void* v;
  const void* a;
  const void* b;
  const float* A_log;
  const float* dt_bias;
  float* state;
  const std::int64_t* cache_indices;
  const std::int64_t* cu_seqlens;  // nullptr: decode, sequence s is token s
  void* out;
  std::int64_t q_s0, q_s1, k_s0, k_s1, v_s0, v_s1, a_s0, b_s0;
  std::int64_t tokens, num_seqs, pool_size;
  int num_k_heads, num_v_heads, head_k_dim, head_v_dim;
  float scale;  // head_k_dim^-0.5
};

/// The epsilon of the L2 normalisation of q and k: x / (||x|| + kGdnNormEps).
constexpr float kGdnNormEps = 1e-6f;

/// Head dims of k (and q) the kernels are built for.
constexpr bool gdn_head_k_dim_supported(std::int64_t d) { return d == 64 || d == 128; }

/// softplus(x) = log(1 + exp(x)), x itself above 20 (as torch.nn.functional.softplus).
MLLM_HOST_DEVICE float gdn_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/// g = -exp(A_log) * softplus(a + dt_bias): the log of a token's decay.
MLLM_HOST_DEVICE float gdn_log_decay(float a, float A_log, float dt_bias) {
  return -expf(A_log) * gdn_softplus(a + dt_bias);
}

/// beta = sigmoid(b).
MLLM_HOST_DEVICE float gdn_beta(float b) { return 1.0f / (1.0f + expf(-b)); }

/// exp(g) and beta of token t, head h.
MLLM_HOST_DEVICE void gdn_gates(float a, float b, float A_log, float dt_bias, float& decay, float& beta) {
  decay = expf(gdn_log_decay(a, A_log, dt_bias));
  beta = gdn_beta(b);
}

/// Checks the tensors of a call (dtypes Ts... for q, k, v, a, b and out; device type kDevice)
/// and returns its parameters. `cu_seqlens` is null for decode (one token per cache index).
template <DLDeviceType kDevice, typename... Ts>
GdnParams check_gdn(mllm_kernel::TensorView q, mllm_kernel::TensorView k, mllm_kernel::TensorView v, mllm_kernel::TensorView a,
                    mllm_kernel::TensorView b, mllm_kernel::TensorView A_log, mllm_kernel::TensorView dt_bias,
                    mllm_kernel::TensorView state_pool, mllm_kernel::TensorView cache_indices,
                    const mllm_kernel::TensorView* cu_seqlens, mllm_kernel::TensorView out, DLDataType& dtype_out,
                    DLDevice& device_out) {
  SymbolicSize T{"tokens"}, Hk{"num_k_heads"}, Dk{"head_k_dim"}, Hv{"num_v_heads"}, Dv{"head_v_dim"};
  SymbolicSize P{"pool_size"}, N{"num_seqs"}, N1{"num_seqs + 1"};
  SymbolicSize q_s0{"q_token_stride"}, q_s1{"q_head_stride"}, k_s0{"k_token_stride"}, k_s1{"k_head_stride"};
  SymbolicSize v_s0{"v_token_stride"}, v_s1{"v_head_stride"}, a_s0{"a_token_stride"}, b_s0{"b_token_stride"};
  SymbolicDType dtype;
  SymbolicDevice device;
  (void)TensorMatcher({T, Hk, Dk})
      .with_strides({q_s0, q_s1, 1})
      .template with_dtype<Ts...>(dtype)
      .template with_device<kDevice>(device)
      .verify(q, "q");
  (void)TensorMatcher({T, Hk, Dk}).with_strides({k_s0, k_s1, 1}).with_dtype(dtype).with_device(device).verify(k, "k");
  (void)TensorMatcher({T, Hv, Dv}).with_strides({v_s0, v_s1, 1}).with_dtype(dtype).with_device(device).verify(v, "v");
  (void)TensorMatcher({T, Hv}).with_strides({a_s0, 1}).with_dtype(dtype).with_device(device).verify(a, "a");
  (void)TensorMatcher({T, Hv}).with_strides({b_s0, 1}).with_dtype(dtype).with_device(device).verify(b, "b");
  (void)TensorMatcher({Hv}).with_dtype<float>().with_device(device).verify(A_log, "A_log").verify(dt_bias, "dt_bias");
  (void)TensorMatcher({P, Hv, Dv, Dk}).with_dtype<float>().with_device(device).verify(state_pool, "state_pool");
  (void)TensorMatcher({T, Hv, Dv}).with_dtype(dtype).with_device(device).verify(out, "out");
  if (cu_seqlens) {
    (void)TensorMatcher({N}).with_dtype<std::int64_t>().with_device(device).verify(cache_indices, "cache_indices");
    (void)TensorMatcher({N1}).with_dtype<std::int64_t>().with_device(device).verify(*cu_seqlens, "cu_seqlens");
    RuntimeCheck(N1.unwrap() == N.unwrap() + 1, "cu_seqlens must have num_seqs + 1 = ", N.unwrap() + 1,
                 " entries (one more than cache_indices), got ", N1.unwrap());
  } else {  // one token per sequence
    (void)TensorMatcher({T}).with_dtype<std::int64_t>().with_device(device).verify(cache_indices, "cache_indices");
  }
  const std::int64_t num_seqs = cu_seqlens ? N.unwrap() : T.unwrap();
  RuntimeCheck(Hv.unwrap() % Hk.unwrap() == 0, "num_v_heads (", Hv.unwrap(), ") must be a multiple of num_k_heads (",
               Hk.unwrap(), ")");
  RuntimeCheck(gdn_head_k_dim_supported(Dk.unwrap()), "head_k_dim must be 64 or 128, got ", Dk.unwrap());
  RuntimeCheck(Dv.unwrap() > 0, "head_v_dim must be positive");
  RuntimeCheck(T.unwrap() <= 0x7fffffff && num_seqs <= 0x7fffffff, "too many tokens or sequences");
  dtype_out = dtype.unwrap();
  device_out = device.unwrap();
  return GdnParams{q.data_ptr(),
                   k.data_ptr(),
                   v.data_ptr(),
                   a.data_ptr(),
                   b.data_ptr(),
                   static_cast<const float*>(A_log.data_ptr()),
                   static_cast<const float*>(dt_bias.data_ptr()),
                   static_cast<float*>(state_pool.data_ptr()),
                   static_cast<const std::int64_t*>(cache_indices.data_ptr()),
                   cu_seqlens ? static_cast<const std::int64_t*>(cu_seqlens->data_ptr()) : nullptr,
                   out.data_ptr(),
                   q_s0.unwrap(),
                   q_s1.unwrap(),
                   k_s0.unwrap(),
                   k_s1.unwrap(),
                   v_s0.unwrap(),
                   v_s1.unwrap(),
                   a_s0.unwrap(),
                   b_s0.unwrap(),
                   T.unwrap(),
                   num_seqs,
                   P.unwrap(),
                   static_cast<int>(Hk.unwrap()),
                   static_cast<int>(Hv.unwrap()),
                   static_cast<int>(Dk.unwrap()),
                   static_cast<int>(Dv.unwrap()),
                   1.0f / std::sqrt(static_cast<float>(Dk.unwrap()))};
}

}  // namespace mllm_kernel::host
