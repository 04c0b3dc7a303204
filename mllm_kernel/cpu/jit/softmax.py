"""CPU row softmax over the last dim (float32, float16, bfloat16; computed in float32)."""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import jit
from mllm_kernel.rows import require_tensor


@jit(
    device="cpu",
    cpp_files=["softmax.cpp"],
    cpp_wrappers=[("softmax", "mllm_kernel::cpu::softmax")],
    func_name="cpu_softmax",
)
def _softmax_module(compiled_module):
    return compiled_module


def softmax(input: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None) -> torch.Tensor:
    """``softmax(input, dim)`` for ``dim`` the last dim only (-1 or ``input.dim() - 1``); rows
    may be strided; ``out`` (same shape, any row stride, may be ``input``) is written and returned."""
    if isinstance(input, torch.Tensor) and input.dim() > 0 and dim not in (-1, input.dim() - 1):
        raise ValueError(f"softmax: only the last dim is supported (dim=-1 or {input.dim() - 1}), got dim={dim!r}")
    if out is None:
        input = require_tensor(input, "softmax", "input")
        out = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    _softmax_module.module("cpu").softmax(out, input, num_threads())
    return out
