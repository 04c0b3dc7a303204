"""CPU gated activations: ``silu_and_mul`` and ``gelu_and_mul`` (exact or tanh GELU).

``input [..., 2d]`` holds the gate then the up projection; the result is
``act(input[..., :d]) * input[..., d:]`` of shape ``[..., d]``, computed in float32 for float32,
float16 and bfloat16. One module per op serves every dtype.
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import row_shape

# One module per op, for every dtype (the kernels check the tensors and pick the element type).
_SILU_MODULE = jit_module("cpu_silu_and_mul", device="cpu", cpp_files=["activation.cpp"],
                          cpp_wrappers=[("silu_and_mul", "mllm_kernel::cpu::silu_and_mul")])
_GELU_MODULE = jit_module("cpu_gelu_and_mul", device="cpu", cpp_files=["activation.cpp"],
                          cpp_wrappers=[(n, f"mllm_kernel::cpu::{n}") for n in ("gelu_and_mul", "gelu_tanh_and_mul")])
_SILU_AND_MUL = KernelTable("silu_and_mul", _SILU_MODULE)
_GELU_AND_MUL = KernelTable("gelu_and_mul", _GELU_MODULE)
_GELU_TANH_AND_MUL = KernelTable("gelu_and_mul", _GELU_MODULE, export="gelu_tanh_and_mul")


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_SILU_AND_MUL, _GELU_AND_MUL, wait=wait)


def _run(table: KernelTable, input: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    if out is None:
        _, last = row_shape(input, table.op)
        out = torch.empty((*input.shape[:-1], last // 2), dtype=input.dtype, device=input.device)
    table[input.dtype](out, input, num_threads())
    return out


def silu_and_mul(input: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``silu(input[..., :d]) * input[..., d:]``; ``out`` (``[..., d]``, any row stride) is
    written and returned."""
    return _run(_SILU_AND_MUL, input, out)


def gelu_and_mul(input: torch.Tensor, approximate: str = "none", out: torch.Tensor | None = None) -> torch.Tensor:
    """``gelu(input[..., :d]) * input[..., d:]`` with ``approximate`` "none" (erf) or "tanh"."""
    if approximate == "none":
        return _run(_GELU_AND_MUL, input, out)
    if approximate == "tanh":
        return _run(_GELU_TANH_AND_MUL, input, out)
    raise ValueError(f"gelu_and_mul: approximate must be 'none' or 'tanh', got {approximate!r}")
