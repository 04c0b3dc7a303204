"""CUDA ``gdn_decode``: one gated DeltaNet decode step over a pool of recurrent states, the
upstream package's entry point (recurrence and layouts: ``mllm_kernel/include/mllm_kernel/gdn.hpp``;
kernel: ``mllm_kernel/cuda/csrc/gdn.cuh``). One module per dtype (float16, bfloat16).
"""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module, make_cpp_args
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import check_gdn_indices, resolve_pdl

_OP = "gdn_decode"
HALF_DTYPES = (torch.float16, torch.bfloat16)


def gdn_module(op: str, export: str, dtype: torch.dtype, *extra):
    """The module of one gated DeltaNet op (``gdn_decode`` or ``gdn_extend``) for one dtype and
    the op's other template arguments ``extra``."""
    args = make_cpp_args(dtype, *extra)
    return jit_module(op, args=args, device="cuda", cuda_files=["gdn.cuh"], cuda_wrappers=[(op, f"{export}<{args}>")])


_DECODE = KernelTable(_OP, {dtype: gdn_module(_OP, "gdn_decode", dtype) for dtype in HALF_DTYPES}, arg="q")


def precompile(*, wait: bool = True):
    """Builds (or loads) the modules now; see ``jit_utils.precompile``."""
    return jit_precompile(_DECODE, wait=wait)


def gdn_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    state_pool: torch.Tensor,
    cache_indices: torch.Tensor,
    *,
    validate: bool = True,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """One decode step of gated DeltaNet for ``bs`` sequences; returns ``o`` ``[bs, num_v_heads,
    head_v_dim]`` in v's dtype and updates ``state_pool`` in place at the rows ``cache_indices``.

    ``q``, ``k``: ``[bs, num_k_heads, head_k_dim]`` (head_k_dim 64 or 128), ``v``: ``[bs,
    num_v_heads, head_v_dim]`` (num_v_heads a multiple of num_k_heads; value head h reads key
    head ``h // (num_v_heads // num_k_heads)``), ``a``, ``b``: ``[bs, num_v_heads]``, all float16
    or bfloat16 with free token and head strides (slices of a fused projection work);
    ``A_log``, ``dt_bias``: ``[num_v_heads]`` float32; ``state_pool``: contiguous ``[pool_size,
    num_v_heads, head_v_dim, head_k_dim]`` float32; ``cache_indices``: ``[bs]`` int64, distinct,
    a negative index marking a padding entry (zero initial state, nothing written).

    Per token and value head: ``g = -exp(A_log) * softplus(a + dt_bias)``, ``beta =
    sigmoid(b)``, q and k L2-normalised (``x / (||x|| + 1e-6)``), q scaled by
    ``head_k_dim ** -0.5``; ``S = exp(g) S``, ``S += beta (v - S k) k^T``, ``o = S q``; float32.

    ``validate=True`` reads the largest cache index back to the host (one sync) and raises
    ValueError for one past the pool; with ``validate=False`` (or under CUDA graph capture)
    such an entry is treated as padding. One launch per call.
    """
    if validate and not torch.cuda.is_current_stream_capturing():
        check_gdn_indices(_OP, state_pool, cache_indices)
    out = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    _DECODE[q.dtype](q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, out, resolve_pdl(enable_pdl))
    return out
