"""CUDA ``add_constant``: ``src + constant`` on int32 CUDA tensors, the constant compiled in."""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit.add_constant import SUPPORTED_CONSTANTS, check_constant
from mllm_kernel.jit_utils import jit, make_cpp_args


def _make_kernel(constant: int):
    args = make_cpp_args(constant)

    @jit(
        args=args,
        device="cuda",
        cuda_files=["add_constant.cuh"],
        cuda_wrappers=[("add_constant", f"add_constant<{args}>")],
        func_name="add_constant",
    )
    def _kernel(compiled_module, dst: torch.Tensor, src: torch.Tensor) -> None:
        compiled_module.add_constant(dst, src)

    return _kernel


_KERNELS = {c: _make_kernel(c) for c in SUPPORTED_CONSTANTS}


def add_constant(src: torch.Tensor, constant: int) -> torch.Tensor:
    """``src + constant`` for a contiguous, non-empty 1-D int32 CUDA tensor, on the current
    stream. ``constant`` must be one of 1, 2, 4, 8, 16; anything else, or a wrong dtype,
    device, shape, strides or an empty tensor, raises ValueError."""
    kernel = _KERNELS[check_constant(constant)]
    dst = torch.empty_like(src)
    kernel(dst, src)
    return dst
