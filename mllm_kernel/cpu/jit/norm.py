"""CPU RMSNorm family: ``rmsnorm``, ``fused_add_rmsnorm``, ``qknorm``, ``qknorm_across_heads``.

float32, float16 and bfloat16, computed in float32; one module (compiled on first use) serves
every dtype. Bad arguments raise ValueError naming the op and the tensor.
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import jit
from mllm_kernel.rows import require_tensor

_NS = "mllm_kernel::cpu::"


@jit(
    device="cpu",
    cpp_files=["norm.cpp"],
    cpp_wrappers=[(n, _NS + n) for n in ("rmsnorm", "fused_add_rmsnorm", "qknorm", "qknorm_across_heads")],
    func_name="cpu_norm",
)
def _norm_module(compiled_module):
    return compiled_module


def _module():
    return _norm_module.module("cpu")


def rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None) -> torch.Tensor:
    """``input * rsqrt(mean(input**2, -1) + eps) * weight`` over the last dim.

    Leading dims are flattened (rows may be strided); ``weight`` is ``[hidden]`` of the same
    dtype. ``out`` (same shape, any row stride, may be ``input``) is written and returned.
    """
    if out is None:
        input = require_tensor(input, "rmsnorm", "input")
        out = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    _module().rmsnorm(out, input, weight, float(eps), num_threads())
    return out


def fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> None:
    """In place: ``residual = input + residual`` (float32 sum stored in the dtype), then
    ``input = rmsnorm(residual) * weight``."""
    _module().fused_add_rmsnorm(input, residual, weight, float(eps), num_threads())


def qknorm(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float = 1e-6) -> None:
    """In place RMSNorm of every head over head_dim: ``q [T, Hq, D]`` with ``q_weight [D]``,
    ``k [T, Hk, D]`` with ``k_weight [D]``."""
    _module().qknorm(q, k, q_weight, k_weight, float(eps), num_threads())


def qknorm_across_heads(
    q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float = 1e-6
) -> None:
    """In place RMSNorm of each token over all its heads: ``q [T, Hq, D]`` over ``Hq*D`` with
    ``q_weight [Hq*D]``, ``k`` likewise."""
    _module().qknorm_across_heads(q, k, q_weight, k_weight, float(eps), num_threads())
