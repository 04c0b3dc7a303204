"""CUDA RMSNorm family: ``rmsnorm``, ``fused_add_rmsnorm``, ``qknorm``, ``qknorm_across_heads``.

One compiled module per dtype (float32, float16, bfloat16) holds all four ops
(``mllm_kernel/cuda/csrc/norm.cuh``). Every argument is checked in C++; errors are ValueErrors
that start with the op name and name the tensor, e.g.
``"rmsnorm: weight: dim 0 (hidden) must be 4096 as bound by input, got 4095"``.
``enable_pdl`` (every CUDA op has it): programmatic dependent launch, on by default (``None``) as
in flashinfer and sglang; ``LaunchKernel`` leaves it off below sm_90. See docs/pdl.md.
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit._common import FunctionTable, per_dtype
from mllm_kernel.jit_utils import jit, make_cpp_args

_OPS = ("rmsnorm", "fused_add_rmsnorm", "qknorm", "qknorm_across_heads")


def _make_kernel(dtype: torch.dtype):
    args = make_cpp_args(dtype)

    @jit(
        args=args,
        device="cuda",
        cuda_files=["norm.cuh"],
        cuda_wrappers=[(op, f"{op}<{args}>") for op in _OPS],
        func_name="norm",
    )
    def _kernel(compiled_module):
        return compiled_module

    return _kernel


_KERNELS = per_dtype(_make_kernel)
_RMSNORM, _FUSED_ADD_RMSNORM, _QKNORM, _QKNORM_ACROSS_HEADS = (
    FunctionTable(_KERNELS, op, "q" if op.startswith("qknorm") else "input") for op in _OPS
)


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
    try:
        function = _RMSNORM[input.dtype]
    except (KeyError, AttributeError):
        function = _RMSNORM.lookup(input)
    if out is None:
        # empty_like is several times cheaper than torch.empty(shape, dtype=, device=).
        out = torch.empty_like(input, memory_format=torch.contiguous_format)
    # N-D tensors go straight to C++, which views them as rows (verify_rows); eps and the flag
    # are converted by tvm-ffi (ints, numpy floats; other types raise TypeError).
    function(out, input, weight, eps, True if enable_pdl is None else enable_pdl)
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
    try:
        function = _FUSED_ADD_RMSNORM[input.dtype]
    except (KeyError, AttributeError):
        function = _FUSED_ADD_RMSNORM.lookup(input)
    function(input, residual, weight, eps, True if enable_pdl is None else enable_pdl)


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
    try:
        function = _QKNORM[q.dtype]
    except (KeyError, AttributeError):
        function = _QKNORM.lookup(q)
    function(q, k, q_weight, k_weight, eps, True if enable_pdl is None else enable_pdl)


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
    try:
        function = _QKNORM_ACROSS_HEADS[q.dtype]
    except (KeyError, AttributeError):
        function = _QKNORM_ACROSS_HEADS.lookup(q)
    function(q, k, q_weight, k_weight, eps, True if enable_pdl is None else enable_pdl)
