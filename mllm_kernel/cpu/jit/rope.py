"""CPU rotary position embedding: ``apply_rope`` (NeoX or GPT-J layout, partial rotary), in place."""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile

# One module for every dtype: the kernel checks the tensors and picks the element type.
_APPLY_ROPE = KernelTable("apply_rope", jit_module("cpu_rope", device="cpu", cpp_files=["rope.cpp"],
                                                   cpp_wrappers=[("apply_rope", "mllm_kernel::cpu::apply_rope")]),
                          arg="q")


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_APPLY_ROPE, wait=wait)


def apply_rope(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    is_neox: bool = True,
) -> None:
    """Rotates ``q [T, Hq, D]`` and ``k [T, Hk, D]`` in place.

    ``positions`` is ``[T]`` int32/int64; ``cos_sin_cache`` is float32 ``[max_pos, rotary_dim]``
    holding ``cat(cos, sin)`` per position; the first ``rotary_dim`` (even, <= D) dims of each
    head rotate, pairing ``(i, i + rotary_dim/2)`` (NeoX) or ``(2i, 2i+1)`` (GPT-J). A position
    outside ``[0, max_pos)`` raises ValueError before anything is written.
    """
    _APPLY_ROPE[q.dtype](positions, q, k, cos_sin_cache, bool(is_neox), num_threads())
