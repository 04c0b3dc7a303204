"""CPU gated activations: ``silu_and_mul`` and ``gelu_and_mul`` (exact or tanh GELU).

``input [..., 2d]`` holds the gate then the up projection; the result is
``act(input[..., :d]) * input[..., d:]`` of shape ``[..., d]``, computed in float32 for float32,
float16 and bfloat16. One module serves every dtype.
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import jit
from mllm_kernel.rows import row_shape

_NS = "mllm_kernel::cpu::"


@jit(
    device="cpu",
    cpp_files=["activation.cpp"],
    cpp_wrappers=[(n, _NS + n) for n in ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")],
    func_name="cpu_activation",
)
def _activation_module(compiled_module):
    return compiled_module


def _run(op: str, kernel: str, input: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    if out is None:
        _, last = row_shape(input, op)
        out = torch.empty((*input.shape[:-1], last // 2), dtype=input.dtype, device=input.device)
    getattr(_activation_module.module("cpu"), kernel)(out, input, num_threads())
    return out


def silu_and_mul(input: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``silu(input[..., :d]) * input[..., d:]``; ``out`` (``[..., d]``, any row stride) is
    written and returned."""
    return _run("silu_and_mul", "silu_and_mul", input, out)


def gelu_and_mul(input: torch.Tensor, approximate: str = "none", out: torch.Tensor | None = None) -> torch.Tensor:
    """``gelu(input[..., :d]) * input[..., d:]`` with ``approximate`` "none" (erf) or "tanh"."""
    if approximate == "none":
        return _run("gelu_and_mul", "gelu_and_mul", input, out)
    if approximate == "tanh":
        return _run("gelu_and_mul", "gelu_tanh_and_mul", input, out)
    raise ValueError(f"gelu_and_mul: approximate must be 'none' or 'tanh', got {approximate!r}")
