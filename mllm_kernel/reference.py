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
