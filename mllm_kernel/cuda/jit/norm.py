"""CUDA RMSNorm family: ``rmsnorm``, ``fused_add_rmsnorm``, ``qknorm``, ``qknorm_across_heads``.

One compiled module per op and dtype (float32, float16, bfloat16), all from
``mllm_kernel/cuda/csrc/norm.cuh``. Every argument is checked in C++; errors are ValueErrors
that start with the op name and name the tensor, e.g.
``"rmsnorm: weight: dim 0 (hidden) must be 4096 as bound by input, got 4095"``.
``enable_pdl`` (every CUDA op has it): programmatic dependent launch, on by default (``None``);
see ``mllm_kernel.op_args.resolve_pdl``.
"""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module, make_cpp_args
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import FLOAT_DTYPES, resolve_pdl

_OPS = ("rmsnorm", "fused_add_rmsnorm", "qknorm", "qknorm_across_heads")


def _module(op: str, dtype: torch.dtype):
    args = make_cpp_args(dtype)
    return jit_module(op, args=args, device="cuda", cuda_files=["norm.cuh"], cuda_wrappers=[(op, f"{op}<{args}>")])


# One module per op and dtype: a first call compiles only the kernels it runs.
_RMSNORM, _FUSED_ADD_RMSNORM, _QKNORM, _QKNORM_ACROSS_HEADS = _TABLES = tuple(
    KernelTable(op, {dtype: _module(op, dtype) for dtype in FLOAT_DTYPES}, arg="q" if op.startswith("qknorm") else "input")
    for op in _OPS
)


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(*_TABLES, wait=wait)


def rmsnorm(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    *,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """``input * rsqrt(mean(input^2, -1) + eps) * weight`` over the last dim (fp32 inside).

    ``input`` is [..., hidden] (1 <= hidden <= 16384) on CUDA in float32/float16/bfloat16; its
    leading dims are flattened without a copy, and rows may be strided (e.g. a slice of a fused
    QKV output). ``weight`` is [hidden], same dtype. ``out`` (same shape and dtype; allocated
    when None) receives the result and is returned.
    """
    function = _RMSNORM[input.dtype]
    if out is None:
        # empty_like is several times cheaper than torch.empty(shape, dtype=, device=).
        out = torch.empty_like(input, memory_format=torch.contiguous_format)
    # N-D tensors go straight to C++, which views them as rows (verify_rows); eps and the flag
    # are converted by tvm-ffi (ints, numpy floats; other types raise TypeError).
    function(out, input, weight, eps, resolve_pdl(enable_pdl))
    return out


def fused_add_rmsnorm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    enable_pdl: bool | None = None,
) -> None:
    """In place: ``residual <- input + residual`` (summed in fp32, stored in the dtype), then
    ``input <- rmsnorm(residual) * weight`` computed from the stored (rounded) residual.

    ``input`` and ``residual`` are [..., hidden] of one dtype (rows may be strided); ``weight``
    is [hidden].
    """
    function = _FUSED_ADD_RMSNORM[input.dtype]
    function(input, residual, weight, eps, resolve_pdl(enable_pdl))


def qknorm(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    enable_pdl: bool | None = None,
) -> None:
    """In place, per head: ``q[t, h] <- rmsnorm(q[t, h]) * q_weight`` and likewise for k.

    ``q`` is [tokens, q_heads, head_dim], ``k`` is [tokens, k_heads, head_dim] (any token and
    head strides, unit stride in head_dim: slices of a fused QKV output work); the weights are
    [head_dim]. Both are normalised by one launch.
    """
    function = _QKNORM[q.dtype]
    function(q, k, q_weight, k_weight, eps, resolve_pdl(enable_pdl))


def qknorm_across_heads(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    enable_pdl: bool | None = None,
) -> None:
    """In place, per token over all heads together: ``q[t] <- rmsnorm(q[t].flatten()) *
    q_weight`` (q_weight is [q_heads * head_dim]) and likewise for k.

    Heads must be packed within a token (head stride == head_dim); the token stride is free.
    """
    function = _QKNORM_ACROSS_HEADS[q.dtype]
    function(q, k, q_weight, k_weight, eps, resolve_pdl(enable_pdl))
