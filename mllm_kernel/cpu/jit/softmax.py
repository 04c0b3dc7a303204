"""CPU row softmax over the last dim (float32, float16, bfloat16; computed in float32)."""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile

# One module for every dtype: the kernel checks the tensors and picks the element type.
_SOFTMAX = KernelTable("softmax", jit_module("cpu_softmax", device="cpu", cpp_files=["softmax.cpp"],
                                             cpp_wrappers=[("softmax", "mllm_kernel::cpu::softmax")]))


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_SOFTMAX, wait=wait)


def softmax(input: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None) -> torch.Tensor:
    """``softmax(input, dim)`` for ``dim`` the last dim only (-1 or ``input.dim() - 1``); rows
    may be strided; ``out`` (same shape, any row stride, may be ``input``) is written and returned."""
    if isinstance(input, torch.Tensor) and input.dim() > 0 and dim not in (-1, input.dim() - 1):
        raise ValueError(f"softmax: only the last dim is supported (dim=-1 or {input.dim() - 1}), got dim={dim!r}")
    function = _SOFTMAX[input.dtype]
    if out is None:
        out = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    function(out, input, num_threads())
    return out
