"""CUDA ``rms_norm_gated``: gated DeltaNet's output norm, ``rmsnorm(x) * weight * silu(z)``, the
upstream package's entry point.

One module per dtype (``rms_norm_gated<T>`` in ``mllm_kernel/cuda/csrc/norm.cuh``: the RMSNorm
kernels with the gate fused into their last pass); without ``z`` it is ``rmsnorm``.
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit.norm import _RMSNORM, _module
from mllm_kernel.jit_utils import KernelTable
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import FLOAT_DTYPES, resolve_pdl

_OP = "rms_norm_gated"
_GATED = KernelTable(_OP, {dtype: _module(_OP, dtype) for dtype in FLOAT_DTYPES}, arg="input")


def precompile(*, wait: bool = True):
    """Builds (or loads) the modules now; see ``jit_utils.precompile``."""
    return jit_precompile(_GATED, wait=wait)


def rms_norm_gated(
    x: torch.Tensor,
    weight: torch.Tensor,
    z: torch.Tensor | None = None,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    *,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """``x * rsqrt(mean(x^2, -1) + eps) * weight``, times ``silu(z)`` when ``z`` is given, over
    the last dim, in float32 inside and rounded once.

    ``x`` and ``z`` are ``[..., N]`` (1 <= N <= 16384) of one dtype (float32, float16 or
    bfloat16; rows may be strided, each tensor its own row stride); ``weight`` is ``[N]`` of
    that dtype. ``out`` (same shape and dtype; allocated when None) is written and returned.
    """
    if out is None:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if z is None:
        _RMSNORM[x.dtype](out, x, weight, eps, resolve_pdl(enable_pdl))
    else:
        _GATED[x.dtype](out, x, z, weight, eps, resolve_pdl(enable_pdl))
    return out
