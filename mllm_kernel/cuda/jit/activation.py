"""CUDA gated activations: ``silu_and_mul`` and ``gelu_and_mul``.

``input`` is [..., 2d]; the result is [..., d] = act(input[..., :d]) * input[..., d:], computed
in fp32 and rounded once. One compiled module per op and dtype (float32, float16, bfloat16), both
from ``mllm_kernel/cuda/csrc/activation.cuh``. ``enable_pdl``: programmatic dependent
launch, on by default (``None``; see ``mllm_kernel.op_args.resolve_pdl``).
"""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module, make_cpp_args
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import FLOAT_DTYPES, resolve_pdl

_OPS = ("silu_and_mul", "gelu_and_mul")
_GELU_APPROXIMATIONS = ("none", "tanh")


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_SILU_AND_MUL, _GELU_AND_MUL, wait=wait)


def _module(op: str, dtype: torch.dtype):
    args = make_cpp_args(dtype)
    return jit_module(op, args=args, device="cuda", cuda_files=["activation.cuh"],
                      cuda_wrappers=[(op, f"{op}<{args}>")])


# One module per op and dtype: a first call compiles only the kernels it runs.
_SILU_AND_MUL, _GELU_AND_MUL = (KernelTable(op, {dtype: _module(op, dtype) for dtype in FLOAT_DTYPES}) for op in _OPS)


def _run(table: KernelTable, input: torch.Tensor, out: torch.Tensor | None, *flags: bool) -> torch.Tensor:
    function = table[input.dtype]
    if out is None:
        shape = input.shape
        if shape[-1] % 2 != 0:
            raise ValueError(f"{table.op}: input: last dim must be even (gate and up halves), got {shape[-1]}")
        # new_empty skips torch.empty's dtype/device keyword parsing (a few µs per call).
        out = input.new_empty((*shape[:-1], shape[-1] // 2))
    # N-D tensors go straight to C++, which views them as rows (verify_rows).
    function(out, input, *flags)
    return out


def silu_and_mul(
    input: torch.Tensor, out: torch.Tensor | None = None, *, enable_pdl: bool | None = None
) -> torch.Tensor:
    """``silu(input[..., :d]) * input[..., d:]`` for ``input`` of shape [..., 2d] (rows may be
    strided). ``out`` ([..., d], same dtype; allocated when None) is returned."""
    return _run(_SILU_AND_MUL, input, out, resolve_pdl(enable_pdl))


def gelu_and_mul(
    input: torch.Tensor,
    approximate: str = "none",
    out: torch.Tensor | None = None,
    *,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """``gelu(input[..., :d], approximate) * input[..., d:]``; ``approximate`` is "none" (erf,
    like ``torch.nn.functional.gelu``) or "tanh". ``out`` ([..., d]) is returned."""
    if approximate not in _GELU_APPROXIMATIONS:
        raise ValueError(f"gelu_and_mul: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _run(_GELU_AND_MUL, input, out, approximate == "tanh", resolve_pdl(enable_pdl))
