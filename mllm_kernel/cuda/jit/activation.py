"""CUDA gated activations: ``silu_and_mul`` and ``gelu_and_mul``.

``input`` is [..., 2d]; the result is [..., d] = act(input[..., :d]) * input[..., d:], computed
in fp32 and rounded once. One compiled module per dtype (float32, float16, bfloat16) holds all
variants (``mllm_kernel/cuda/csrc/activation.cuh``). ``enable_pdl``: programmatic dependent
launch, on by default (``None``) where the GPU has it (sm_90+; docs/pdl.md).
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit._common import FunctionTable, per_dtype
from mllm_kernel.jit_utils import jit, make_cpp_args

_OPS = ("silu_and_mul", "gelu_and_mul")
_GELU_APPROXIMATIONS = ("none", "tanh")


def _make_kernel(dtype: torch.dtype):
    args = make_cpp_args(dtype)

    @jit(
        args=args,
        device="cuda",
        cuda_files=["activation.cuh"],
        cuda_wrappers=[(op, f"{op}<{args}>") for op in _OPS],
        func_name="activation",
    )
    def _kernel(compiled_module):
        return compiled_module

    return _kernel


_KERNELS = per_dtype(_make_kernel)
_SILU_AND_MUL = FunctionTable(_KERNELS, "silu_and_mul", "input")
_GELU_AND_MUL = FunctionTable(_KERNELS, "gelu_and_mul", "input")


def _run(table: FunctionTable, input: torch.Tensor, out: torch.Tensor | None, *flags: bool) -> torch.Tensor:
    op = table.op
    try:
        function = table[input.dtype]
    except (KeyError, AttributeError):
        function = table.lookup(input)
    if out is None:
        shape = input.shape
        if shape[-1] % 2 != 0:
            raise ValueError(f"{op}: input: last dim must be even (gate and up halves), got {shape[-1]}")
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
    return _run(_SILU_AND_MUL, input, out, True if enable_pdl is None else enable_pdl)


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
    return _run(_GELU_AND_MUL, input, out, approximate == "tanh", True if enable_pdl is None else enable_pdl)
