"""CUDA rotary position embedding: ``apply_rope`` (in place on q and k).

One compiled module per dtype of q/k (float32, float16, bfloat16); see
``mllm_kernel/cuda/csrc/rope.cuh`` for the layouts and the out-of-range position behaviour.
``enable_pdl``: programmatic dependent launch, on by default (``None``; see
``mllm_kernel.op_args.resolve_pdl``).
"""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module, make_cpp_args
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import FLOAT_DTYPES, resolve_pdl


def _module(dtype: torch.dtype):
    args = make_cpp_args(dtype)
    return jit_module("rope", args=args, device="cuda", cuda_files=["rope.cuh"],
                      cuda_wrappers=[("apply_rope", f"apply_rope<{args}>")])


_APPLY_ROPE = KernelTable("apply_rope", {dtype: _module(dtype) for dtype in FLOAT_DTYPES}, arg="q")


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_APPLY_ROPE, wait=wait)


def apply_rope(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    is_neox: bool = True,
    *,
    enable_pdl: bool | None = None,
) -> None:
    """Rotates the first ``rotary_dim`` features of every head of ``q`` [T, Hq, D] and ``k``
    [T, Hk, D] in place (any token/head strides, unit feature stride).

    ``positions`` is [T] int32/int64; ``cos_sin_cache`` is [max_position, rotary_dim] float32,
    ``cat(cos, sin, dim=-1)``, with rotary_dim even and <= D. ``is_neox`` selects the NeoX
    layout (pairs ``(i, i + rotary_dim/2)``) or GPT-J (interleaved pairs ``(2i, 2i+1)``).

    A position outside ``[0, max_position)`` never indexes the cache: that token's rotary
    features of q and k become NaN (checking on the host would need a device sync).
    """
    function = _APPLY_ROPE[q.dtype]
    function(positions, q, k, cos_sin_cache, bool(is_neox), resolve_pdl(enable_pdl))
