"""CPU RMSNorm family: ``rmsnorm``, ``fused_add_rmsnorm``, ``qknorm``, ``qknorm_across_heads``.

float32, float16 and bfloat16, computed in float32; one module per op (compiled on first use)
serves every dtype. Bad arguments raise ValueError naming the op and the tensor.
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile

_OPS = ("rmsnorm", "fused_add_rmsnorm", "qknorm", "qknorm_across_heads")
# One module per op, for every dtype (the kernel checks the tensors and picks the element
# type): a first call compiles only its op.
_RMSNORM, _FUSED_ADD_RMSNORM, _QKNORM, _QKNORM_ACROSS_HEADS = _TABLES = tuple(
    KernelTable(op, jit_module(f"cpu_{op}", device="cpu", cpp_files=["norm.cpp"],
                               cpp_wrappers=[(op, f"mllm_kernel::cpu::{op}")]))
    for op in _OPS
)


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(*_TABLES, wait=wait)


def rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None) -> torch.Tensor:
    """``input * rsqrt(mean(input**2, -1) + eps) * weight`` over the last dim.

    Leading dims are flattened (rows may be strided); ``weight`` is ``[hidden]`` of the same
    dtype. ``out`` (same shape, any row stride, may be ``input``) is written and returned.
    """
    function = _RMSNORM[input.dtype]
    if out is None:
        out = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    function(out, input, weight, float(eps), num_threads())
    return out


def fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> None:
    """In place: ``residual = input + residual`` (float32 sum stored in the dtype), then
    ``input = rmsnorm(residual) * weight``."""
    _FUSED_ADD_RMSNORM[input.dtype](input, residual, weight, float(eps), num_threads())


def qknorm(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float = 1e-6) -> None:
    """In place RMSNorm of every head over head_dim: ``q [T, Hq, D]`` with ``q_weight [D]``,
    ``k [T, Hk, D]`` with ``k_weight [D]``."""
    _QKNORM[q.dtype](q, k, q_weight, k_weight, float(eps), num_threads())


def qknorm_across_heads(
    q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float = 1e-6
) -> None:
    """In place RMSNorm of each token over all its heads: ``q [T, Hq, D]`` over ``Hq*D`` with
    ``q_weight [Hq*D]``, ``k`` likewise."""
    _QKNORM_ACROSS_HEADS[q.dtype](q, k, q_weight, k_weight, float(eps), num_threads())
