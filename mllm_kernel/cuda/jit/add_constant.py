"""CUDA ``add_constant``: ``src + constant`` on int32 CUDA tensors, the constant compiled in."""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module, make_cpp_args
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import ADD_CONSTANTS, check_add_constant


def _module(constant: int):
    args = make_cpp_args(constant)
    return jit_module("add_constant", args=args, device="cuda", cuda_files=["add_constant.cuh"],
                      cuda_wrappers=[("add_constant", f"add_constant<{args}>")])


_ADD_CONSTANT = KernelTable("add_constant", {c: _module(c) for c in ADD_CONSTANTS}, arg="constant")


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_ADD_CONSTANT, wait=wait)


def add_constant(src: torch.Tensor, constant: int) -> torch.Tensor:
    """``src + constant`` for a contiguous, non-empty 1-D int32 CUDA tensor, on the current
    stream. ``constant`` must be one of 1, 2, 4, 8, 16; anything else, or a wrong dtype,
    device, shape, strides or an empty tensor, raises ValueError."""
    function = _ADD_CONSTANT[check_add_constant(constant)]
    dst = torch.empty_like(src)
    function(dst, src)
    return dst
