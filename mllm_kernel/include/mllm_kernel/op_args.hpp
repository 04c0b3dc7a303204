// Argument checks for the ops that have both a CPU and a CUDA kernel, so both backends accept
// the same layouts and say the same things about bad ones; only the device type and the dtypes
// differ, so those are template arguments:
//   RowsArgs        an op from rows to rows (softmax), the base of the two below
//   ActAndMulArgs   the gated activations' input [..., 2 * d] and out [..., d]
//   QuantRowsArgs   the quantizers' input, out and scales (per token group, per token, per tensor)
//   NormRowsArgs    the row norms' input, output or residual and weight
//   QKArgs          the q/k pair of qknorm
//   RopeArgs        apply_rope's q/k/positions/cache
//   KVStoreArgs     store_kv_cache's k, v, caches and slot mapping
//   verify_scale_vector  a scaled GEMM's per-row or per-column scales (int8_scaled_mm)
// The symbols stay bound after `verify`, for the kernel to read:
//
//   QKArgs a;
//   a.verify<kDLCUDA, bf16_t>(q, k);        // binds tokens, heads, head_dim, strides, dtype, device
//   a.verify_weights(q_weight, k_weight, /*across_heads=*/false);
//   a.tokens.unwrap(), a.q_s0.unwrap(), ...
#pragma once

#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace mllm_kernel::host {

/// An op from rows to rows: input [..., H] seen as rows [N, H] (leading dims merged,
/// verify_rows) with a free row stride and dense rows, and out [..., H_out] seen the same way
/// with its own row stride; one device, nothing empty. `verify` checks out [N, H] of the input's
/// dtype (softmax); the op structs below check other outputs with the pieces.
struct RowsArgs {
  SymbolicSize tokens{"num_tokens"}, hidden, in_stride{"input_row_stride"}, out_stride{"out_row_stride"};
  SymbolicDType dtype;
  SymbolicDevice device;

  /// `hidden_name` names the input's last dim in messages (a string literal).
  explicit RowsArgs(const char* hidden_name = "hidden") : hidden(hidden_name) {}

  /// Checks input and out [N, H], one dtype of Ts... (at least one), device type kDevice.
  template <DLDeviceType kDevice, typename... Ts>
  void verify(mllm_kernel::TensorView out, mllm_kernel::TensorView input) {
    verify_input<kDevice, Ts...>(input);
    verify_out(out, hidden);
    check_not_empty();
  }

  /// Checks input [N, H]: dtypes Ts... (at least one), device type kDevice.
  template <DLDeviceType kDevice, typename... Ts>
  void verify_input(mllm_kernel::TensorView input) {
    (void)TensorMatcher({tokens, hidden})
        .with_strides({in_stride, 1})
        .template with_dtype<Ts...>(dtype)
        .template with_device<kDevice>(device)
        .verify_rows(input, "input");
  }

  /// Checks out [N, cols] on the input's device, of dtype Out, or of the input's dtype when Out
  /// is not given.
  template <typename... Out>
  void verify_out(mllm_kernel::TensorView out, SymbolicSize& cols) {
    static_assert(sizeof...(Out) <= 1, "verify_out: at most one output dtype");
    if constexpr (sizeof...(Out) == 0) {
      (void)TensorMatcher({tokens, cols}).with_strides({out_stride, 1}).with_dtype(dtype).with_device(device).verify_rows(
          out, "out");
    } else {
      (void)TensorMatcher({tokens, cols})
          .with_strides({out_stride, 1})
          .template with_dtype<Out...>()
          .with_device(device)
          .verify_rows(out, "out");
    }
  }

  /// After verify_input: rejects an empty input.
  void check_not_empty() const {
    RuntimeCheck(tokens.unwrap() > 0 && hidden.unwrap() > 0, "input must not be empty, got shape [", tokens.unwrap(),
                 ", ", hidden.unwrap(), "]");
  }
};

/// A gated activation's arguments: input [..., 2 * d] (the gate half, then the up half) and out
/// [..., d] as RowsArgs; one dtype.
struct ActAndMulArgs : RowsArgs {
  SymbolicSize d{"d"};

  ActAndMulArgs() : RowsArgs("2 * d") {}

  /// Checks input and out; dtypes Ts... (at least one), device type kDevice.
  template <DLDeviceType kDevice, typename... Ts>
  void verify(mllm_kernel::TensorView out, mllm_kernel::TensorView input) {
    verify_input<kDevice, Ts...>(input);
    RuntimeCheck(hidden.unwrap() % 2 == 0, "input: last dim must be even (gate and up halves), got ", hidden.unwrap());
    d.bind(hidden.unwrap() / 2, "input (half its last dim)");
    verify_out(out, d);
    check_not_empty();
  }
};

/// A quantizer's arguments: input [..., H] and out [..., H] of dtype Out as RowsArgs, and either
/// scales float32 [N, H / group_size] with free strides (`verify`: one scale per group of a row;
/// group_size = H for one per row) or scale float32 [1] (`verify_tensor`).
struct QuantRowsArgs : RowsArgs {
  SymbolicSize groups{"num_groups"}, scales_s0{"scales_row_stride"}, scales_s1{"scales_group_stride"};

  /// Checks the arguments of quantization per group of `group_size` elements; input dtypes Ts...
  /// (at least one), device type kDevice.
  template <DLDeviceType kDevice, typename Out, typename... Ts>
  void verify(mllm_kernel::TensorView out, mllm_kernel::TensorView scales, mllm_kernel::TensorView input,
              std::int64_t group_size, double eps) {
    verify_input<kDevice, Ts...>(input);
    verify_out<Out>(out, hidden);
    check_not_empty();
    RuntimeCheck(group_size > 0, "group_size must be positive, got ", group_size);
    RuntimeCheck(hidden.unwrap() % group_size == 0, "hidden size ", hidden.unwrap(), " is not divisible by group_size ",
                 group_size);
    RuntimeCheck(eps >= 0.0, "eps must be non-negative, got ", eps);
    groups.bind(hidden.unwrap() / group_size, "hidden / group_size");
    (void)TensorMatcher({tokens, groups})
        .with_strides({scales_s0, scales_s1})
        .with_dtype<float>()
        .with_device(device)
        .verify(scales, "scales");
  }

  /// Checks the arguments of quantization with one scale for the whole tensor.
  template <DLDeviceType kDevice, typename Out, typename... Ts>
  void verify_tensor(mllm_kernel::TensorView out, mllm_kernel::TensorView scale, mllm_kernel::TensorView input) {
    verify_input<kDevice, Ts...>(input);
    verify_out<Out>(out, hidden);
    (void)TensorMatcher({1}).with_dtype<float>().with_device(device).verify(scale, "scale");
    check_not_empty();
  }
};

/// A row norm's arguments: input [..., D] and a second tensor of that shape (the output, or the
/// residual: `second_name`), each seen as rows [N, D] (leading dims merged, verify_rows) with a
/// free row stride and dense rows, and weight [D]; one dtype, one device; nothing empty.
struct NormRowsArgs {
  SymbolicSize tokens{"num_tokens"}, hidden{"hidden"}, in_stride{"input_row_stride"}, second_stride;
  SymbolicDType dtype;
  SymbolicDevice device;

  /// `second_stride_name` names the second tensor's row stride in messages (a string literal).
  explicit NormRowsArgs(const char* second_stride_name) : second_stride(second_stride_name) {}

  /// Checks the three tensors; dtypes Ts... (at least one), device type kDevice. `second_name`
  /// must be a string literal.
  template <DLDeviceType kDevice, typename... Ts>
  void verify(mllm_kernel::TensorView input, mllm_kernel::TensorView second, const char* second_name,
              mllm_kernel::TensorView weight) {
    (void)TensorMatcher({tokens, hidden})
        .with_strides({in_stride, 1})
        .template with_dtype<Ts...>(dtype)
        .template with_device<kDevice>(device)
        .verify_rows(input, "input");
    (void)TensorMatcher({tokens, hidden})
        .with_strides({second_stride, 1})
        .with_dtype(dtype)
        .with_device(device)
        .verify_rows(second, second_name);
    (void)TensorMatcher({hidden}).with_dtype(dtype).with_device(device).verify(weight, "weight");
    RuntimeCheck(tokens.unwrap() > 0 && hidden.unwrap() > 0, "input must not be empty, got shape [", tokens.unwrap(),
                 ", ", hidden.unwrap(), "]");
  }
};

/// rms_norm_gated's rows: input and z [..., hidden] as in NormRowsArgs (z is the second tensor),
/// and out [..., hidden] as rows with its own row stride.
struct GatedNormArgs : NormRowsArgs {
  SymbolicSize out_stride{"out_row_stride"};

  GatedNormArgs() : NormRowsArgs("z_row_stride") {}

  /// Checks the four tensors; dtypes Ts... (at least one), device type kDevice.
  template <DLDeviceType kDevice, typename... Ts>
  void verify(mllm_kernel::TensorView out, mllm_kernel::TensorView input, mllm_kernel::TensorView z,
              mllm_kernel::TensorView weight) {
    NormRowsArgs::verify<kDevice, Ts...>(input, z, "z", weight);
    (void)TensorMatcher({tokens, hidden})
        .with_strides({out_stride, 1})
        .with_dtype(dtype)
        .with_device(device)
        .verify_rows(out, "out");
  }
};

/// q [T, Hq, D] and k [T, Hk, D]: one dtype, one device, dense along head_dim, free token and
/// head strides (or, `heads_packed`, heads dense within a token), nothing empty.
struct QKArgs {
  SymbolicSize tokens{"num_tokens"}, q_heads{"num_q_heads"}, k_heads{"num_k_heads"}, head_dim{"head_dim"};
  SymbolicSize q_s0{"q_token_stride"}, q_s1{"q_head_stride"}, k_s0{"k_token_stride"}, k_s1{"k_head_stride"};
  // Bound by verify_weights(across_heads = true): the length each token is normalised over.
  SymbolicSize q_hidden{"num_q_heads * head_dim"}, k_hidden{"num_k_heads * head_dim"};
  SymbolicDType dtype;
  SymbolicDevice device;

  /// Checks q and k; dtypes Ts... (at least one), device type kDevice.
  template <DLDeviceType kDevice, typename... Ts>
  void verify(mllm_kernel::TensorView q, mllm_kernel::TensorView k, bool heads_packed = false) {
    (void)TensorMatcher({tokens, q_heads, head_dim})
        .with_strides({q_s0, heads_packed ? head_dim : q_s1, 1})
        .template with_dtype<Ts...>(dtype)
        .template with_device<kDevice>(device)
        .verify(q, "q");
    (void)TensorMatcher({tokens, k_heads, head_dim})
        .with_strides({k_s0, heads_packed ? head_dim : k_s1, 1})
        .with_dtype(dtype)
        .with_device(device)
        .verify(k, "k");
    RuntimeCheck(tokens.unwrap() > 0 && q_heads.unwrap() > 0 && k_heads.unwrap() > 0 && head_dim.unwrap() > 0,
                 "q and k must not be empty, got q [", tokens.unwrap(), ", ", q_heads.unwrap(), ", ",
                 head_dim.unwrap(), "] and k [", tokens.unwrap(), ", ", k_heads.unwrap(), ", ", head_dim.unwrap(),
                 "]");
  }

  /// Checks the norm weights after verify(): [head_dim] each for a per-head norm, or
  /// [num_q_heads * head_dim] and [num_k_heads * head_dim] for a norm across a token's heads.
  void verify_weights(mllm_kernel::TensorView q_weight, mllm_kernel::TensorView k_weight, bool across_heads) {
    if (!across_heads) {
      (void)TensorMatcher({head_dim}).with_dtype(dtype).with_device(device).verify(q_weight, "q_weight");
      (void)TensorMatcher({head_dim}).with_dtype(dtype).with_device(device).verify(k_weight, "k_weight");
      return;
    }
    q_hidden.bind(q_heads.unwrap() * head_dim.unwrap(), "q");
    k_hidden.bind(k_heads.unwrap() * head_dim.unwrap(), "k");
    (void)TensorMatcher({q_hidden}).with_dtype(dtype).with_device(device).verify(q_weight, "q_weight");
    (void)TensorMatcher({k_hidden}).with_dtype(dtype).with_device(device).verify(k_weight, "k_weight");
  }
};

/// apply_rope's arguments: q and k as in QKArgs (free strides), positions [T] int32 or int64 and
/// cos_sin_cache [max_position, rotary_dim] float32 on the same device, rotary_dim even and at
/// most head_dim.
struct RopeArgs : QKArgs {
  SymbolicSize max_position{"max_position"}, rotary_dim{"rotary_dim"};
  SymbolicDType pos_dtype;

  /// Checks every argument; q/k dtypes Ts... (at least one), device type kDevice.
  template <DLDeviceType kDevice, typename... Ts>
  void verify(mllm_kernel::TensorView positions, mllm_kernel::TensorView q, mllm_kernel::TensorView k,
              mllm_kernel::TensorView cos_sin_cache) {
    QKArgs::verify<kDevice, Ts...>(q, k);
    (void)TensorMatcher({tokens})
        .with_dtype<std::int32_t, std::int64_t>(pos_dtype)
        .with_device(device)
        .verify(positions, "positions");
    (void)TensorMatcher({max_position, rotary_dim})
        .with_dtype<float>()
        .with_device(device)
        .verify(cos_sin_cache, "cos_sin_cache");
    RuntimeCheck(max_position.unwrap() > 0, "cos_sin_cache must not be empty, got shape [", max_position.unwrap(),
                 ", ", rotary_dim.unwrap(), "]");
    const std::int64_t rot = rotary_dim.unwrap();
    RuntimeCheck(rot >= 2 && rot % 2 == 0 && rot <= head_dim.unwrap(),
                 "cos_sin_cache: rotary_dim (dim 1) must be even and in [2, head_dim = ", head_dim.unwrap(), "], got ",
                 rot);
  }
};

/// store_kv_cache's arguments: k and v [T, H, D] (free token and head strides, dense along
/// head_dim), k_cache and v_cache [num_slots, H, D] contiguous, slot_mapping [T] int32 or int64,
/// all on one device; nothing empty. The caches hold k's dtype (`verify`), or Cache with a
/// float32 [1] scale each for k and v (`verify_quantized`: a float8 cache of a wider k).
struct KVStoreArgs {
  SymbolicSize tokens{"num_tokens"}, heads{"num_kv_heads"}, head_dim{"head_dim"}, num_slots{"num_slots"};
  SymbolicSize k_s0{"k_token_stride"}, k_s1{"k_head_stride"}, v_s0{"v_token_stride"}, v_s1{"v_head_stride"};
  SymbolicDType dtype, index_dtype;
  SymbolicDevice device;

  /// Checks every argument; dtypes Ts... (at least one) for k, v and the caches, device type
  /// kDevice.
  template <DLDeviceType kDevice, typename... Ts>
  void verify(mllm_kernel::TensorView k, mllm_kernel::TensorView v, mllm_kernel::TensorView k_cache,
              mllm_kernel::TensorView v_cache, mllm_kernel::TensorView slot_mapping) {
    verify_sources<kDevice, Ts...>(k, v);
    (void)TensorMatcher({num_slots, heads, head_dim})
        .with_dtype(dtype)
        .with_device(device)
        .verify(k_cache, "k_cache")
        .verify(v_cache, "v_cache");
    verify_slots(slot_mapping);
  }

  /// As verify, for caches of dtype Cache written as k / k_scale and v / v_scale.
  template <DLDeviceType kDevice, typename Cache, typename... Ts>
  void verify_quantized(mllm_kernel::TensorView k, mllm_kernel::TensorView v, mllm_kernel::TensorView k_cache,
                        mllm_kernel::TensorView v_cache, mllm_kernel::TensorView slot_mapping, mllm_kernel::TensorView k_scale,
                        mllm_kernel::TensorView v_scale) {
    verify_sources<kDevice, Ts...>(k, v);
    (void)TensorMatcher({num_slots, heads, head_dim})
        .template with_dtype<Cache>()
        .with_device(device)
        .verify(k_cache, "k_cache")
        .verify(v_cache, "v_cache");
    verify_slots(slot_mapping);
    (void)TensorMatcher({1}).with_dtype<float>().with_device(device).verify(k_scale, "k_scale").verify(v_scale,
                                                                                                     "v_scale");
  }

 private:
  template <DLDeviceType kDevice, typename... Ts>
  void verify_sources(mllm_kernel::TensorView k, mllm_kernel::TensorView v) {
    (void)TensorMatcher({tokens, heads, head_dim})
        .with_strides({k_s0, k_s1, 1})
        .template with_dtype<Ts...>(dtype)
        .template with_device<kDevice>(device)
        .verify(k, "k");
    (void)TensorMatcher({tokens, heads, head_dim})
        .with_strides({v_s0, v_s1, 1})
        .with_dtype(dtype)
        .with_device(device)
        .verify(v, "v");
  }
  void verify_slots(mllm_kernel::TensorView slot_mapping) {
    (void)TensorMatcher({tokens})
        .with_dtype<std::int32_t, std::int64_t>(index_dtype)
        .with_device(device)
        .verify(slot_mapping, "slot_mapping");
    RuntimeCheck(tokens.unwrap() > 0 && heads.unwrap() > 0 && head_dim.unwrap() > 0, "k and v must not be empty");
  }
};

/// A scaled GEMM's scale vector: float32, dense, on `device`, with `len` values (one per row or
/// column), or one value shared by all. Returns its stride: 1, or 0 for a shared value.
inline std::int64_t verify_scale_vector(TensorView scales, SymbolicSize& len, SymbolicDevice& device,
                                        const char* name) {
  if (scales.ndim() == 1 && scales.shape()[0] == 1 && len.unwrap() != 1) {
    (void)TensorMatcher({1}).with_dtype<float>().with_device(device).verify(scales, name);
    return 0;
  }
  (void)TensorMatcher({len}).with_dtype<float>().with_device(device).verify(scales, name);
  return 1;
}

}  // namespace mllm_kernel::host
