"""CPU ``rms_norm_gated``: gated DeltaNet's output norm, ``rmsnorm(x) * weight * silu(z)``.

One module for every dtype (``rms_norm_gated`` in ``mllm_kernel/cpu/csrc/norm.cpp``); without
``z`` it is ``rmsnorm``.
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.cpu.jit.norm import _RMSNORM
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile

_OP = "rms_norm_gated"
_GATED = KernelTable(_OP, jit_module(f"cpu_{_OP}", device="cpu", cpp_files=["norm.cpp"],
                                     cpp_wrappers=[(_OP, f"mllm_kernel::cpu::{_OP}")]), arg="input")


def precompile(*, wait: bool = True):
    """Builds (or loads) the module now; see ``jit_utils.precompile``."""
    return jit_precompile(_GATED, wait=wait)


def rms_norm_gated(
    x: torch.Tensor,
    weight: torch.Tensor,
    z: torch.Tensor | None = None,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``rmsnorm(x) * weight``, times ``silu(z)`` when ``z`` is given; the arguments of
    ``mllm_kernel.cuda.jit.rms_norm_gated.rms_norm_gated`` (no ``enable_pdl``)."""
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if z is None:
        _RMSNORM[x.dtype](out, x, weight, float(eps), num_threads())
    else:
        _GATED[x.dtype](out, x, z, weight, float(eps), num_threads())
    return out
