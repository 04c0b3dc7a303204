"""Plain PyTorch versions of ops whose math is more than a line, for tests and benchmarks to
compare against: written from the formulas, vectorised over heads, with no kernel of ours.

    from mllm_kernel.reference import gdn
    out = gdn(q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, cu_seqlens, dtype=torch.float64)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def gdn(q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, cu_seqlens=None, *,
        dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Gated DeltaNet (``mllm_kernel.cuda.jit.gdn_decode`` has the formulas) computed in
    ``dtype``, token by token; ``cu_seqlens=None`` is decode (token s is sequence s). Updates
    ``state_pool`` in place at the non-negative ``cache_indices`` (stored in its own dtype) and
    returns the output in v's dtype."""
    tokens, num_k_heads, head_k_dim = q.shape
    num_v_heads = v.shape[1]
    heads = torch.arange(num_v_heads, device=q.device) // (num_v_heads // num_k_heads)
    bounds = cu_seqlens.tolist() if cu_seqlens is not None else list(range(tokens + 1))
    out = torch.empty(v.shape, dtype=dtype, device=v.device)
    A = A_log.to(dtype).exp()
    for s, index in enumerate(cache_indices.tolist()):
        if index >= 0:
            state = state_pool[index].to(dtype)
        else:
            state = torch.zeros(state_pool.shape[1:], dtype=dtype, device=state_pool.device)
        for t in range(bounds[s], bounds[s + 1]):
            kt = k[t, heads].to(dtype)
            qt = q[t, heads].to(dtype)
            kt = kt / (kt.norm(dim=-1, keepdim=True) + 1e-6)
            qt = qt / (qt.norm(dim=-1, keepdim=True) + 1e-6) * head_k_dim ** -0.5
            g = -A * F.softplus(a[t].to(dtype) + dt_bias.to(dtype))
            beta = torch.sigmoid(b[t].to(dtype))
            state = state * g.exp()[:, None, None]
            delta = beta[:, None] * (v[t].to(dtype) - torch.einsum("hvk,hk->hv", state, kt))
            state = state + delta[:, :, None] * kt[:, None, :]
            out[t] = torch.einsum("hvk,hk->hv", state, qt)
        if index >= 0:
            state_pool[index] = state.to(state_pool.dtype)
    return out.to(v.dtype)


def quantize_gptq(w: torch.Tensor, num_bits: int, group_size: int, act_order: bool = False,
                  generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """Symmetric round-to-nearest GPTQ quantization of ``w`` ``[K, N]`` in a GPTQ checkpoint's
    format: ``qweight`` ``[K * bits / 32, N]`` int32 (packed along K, lowest bits first, stored
    value = q + 2^(bits-1)), ``scales`` ``[groups, N]`` in w's dtype, ``g_idx`` ``[K]`` int32
    (with act_order, row ``perm[i]`` joins group ``i // group_size`` for a random perm), and
    ``w_ref``: the dequantized weights in float64. group_size -1: one group."""
    from mllm_kernel.marlin import pack_columns

    k, n = w.shape
    group_size = k if group_size == -1 else group_size
    order = torch.randperm(k, generator=generator).to(w.device) if act_order else torch.arange(k, device=w.device)
    g_idx = torch.empty(k, dtype=torch.int32, device=w.device)
    g_idx[order] = (torch.arange(k, device=w.device) // group_size).to(torch.int32)
    groups = k // group_size
    bias = 1 << (num_bits - 1)
    wd = w.to(torch.float64)
    amax = torch.zeros(groups, n, dtype=torch.float64, device=w.device).scatter_reduce_(
        0, g_idx.long()[:, None].expand(k, n), wd.abs(), "amax")
    scales = (amax / (bias - 1)).clamp_min(1e-8).to(w.dtype)
    s_rows = scales.to(torch.float64)[g_idx.long()]
    q = torch.round(wd / s_rows).clamp(-bias, bias - 1)
    stored = (q + bias).to(torch.int64)
    qweight = pack_columns(stored.t(), num_bits).t().contiguous()  # packed along K
    return {"qweight": qweight, "scales": scales, "g_idx": g_idx, "w_ref": q * s_rows}


def quantize_fp8(w: torch.Tensor, group_size: int) -> dict[str, torch.Tensor]:
    """float8_e4m3fn quantization of ``w`` ``[K, N]`` as FP8 checkpoints store it: ``weight``
    ``[K, N]`` float8_e4m3fn and ``scales`` ``[groups, N]`` in w's dtype (each group's largest
    magnitude maps to 448, float8's largest), with ``w_ref = float(weight) * scale`` in float64.
    group_size -1: one group (channel-wise)."""
    k, n = w.shape
    group_size = k if group_size == -1 else group_size
    wd = w.to(torch.float64).reshape(k // group_size, group_size, n)
    scales = (wd.abs().amax(dim=1) / 448.0).clamp_min(1e-8).to(w.dtype)
    s_rows = scales.to(torch.float64)[:, None, :]
    weight = (wd / s_rows).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    w_ref = (weight.to(torch.float64) * s_rows).reshape(k, n)
    return {"weight": weight.reshape(k, n), "scales": scales, "w_ref": w_ref}


AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def quantize_awq(w: torch.Tensor, group_size: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """Asymmetric 4-bit AWQ quantization of ``w`` ``[K, N]`` in an AWQ checkpoint's format:
    ``qweight`` ``[K, N / 8]`` int32 and ``qzeros`` ``[groups, N / 8]`` int32, both packed along N
    with nibble i holding column ``AWQ_ORDER[i]`` of each run of 8; ``scales`` ``[groups, N]`` in
    w's dtype; ``w_ref = (q - zero) * scale`` in float64. Zero points are drawn at random in
    [1, 14] so that every nibble value occurs."""
    from mllm_kernel.marlin import pack_columns

    k, n = w.shape
    group_size = k if group_size == -1 else group_size
    groups = k // group_size
    wd = w.to(torch.float64).reshape(groups, group_size, n)
    zeros = torch.randint(1, 15, (groups, n), generator=generator).to(w.device)
    amax = wd.abs().amax(1)
    # q = round(w / s) + z must fit [0, 15]: the side with less room decides the scale.
    room = torch.minimum(zeros, 15 - zeros).to(torch.float64)
    scales = (amax / room).clamp_min(1e-8).to(w.dtype)
    s = scales.to(torch.float64)[:, None, :]
    q = (torch.round(wd / s) + zeros[:, None, :]).clamp(0, 15)
    w_ref = ((q - zeros[:, None, :]) * s).reshape(k, n)

    def pack(values: torch.Tensor) -> torch.Tensor:
        return pack_columns(values.reshape(values.shape[0], n // 8, 8)[..., list(AWQ_ORDER)].reshape(-1, n), 4)

    return {"qweight": pack(q.reshape(k, n)), "qzeros": pack(zeros), "scales": scales, "w_ref": w_ref}
