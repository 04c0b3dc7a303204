"""CPU ``add_constant`` (a compile-time constant) and ``add_constant_runtime`` (any float)."""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module, make_cpp_args
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import ADD_CONSTANTS, check_add_constant


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_ADD_CONSTANT, _ADD_CONSTANT_RUNTIME, wait=wait)


def _module(constant: int):
    args = make_cpp_args(constant)
    return jit_module("add_constant", args=args, device="cpu", cpp_files=["add_constant.cpp"],
                      cpp_wrappers=[("add_constant", f"mllm_kernel::cpu::add_constant<{args}>")])


_ADD_CONSTANT = KernelTable("add_constant", {c: _module(c) for c in ADD_CONSTANTS}, arg="constant")
_ADD_CONSTANT_RUNTIME = KernelTable(
    "add_constant_runtime",
    jit_module("add_constant_runtime", device="cpu", cpp_files=["add_constant.cpp"],
               cpp_wrappers=[("add_constant_runtime", "mllm_kernel::cpu::add_constant_runtime")]),
    arg="src",
)


def add_constant(src: torch.Tensor, constant: int) -> torch.Tensor:
    """``src + constant`` for a contiguous, non-empty 1-D float32 CPU tensor.

    ``constant`` is compiled into the kernel and must be one of 1, 2, 4, 8, 16; each one is its
    own cached module. Wrong dtype, device, shape, strides or an empty tensor raise ValueError.
    """
    function = _ADD_CONSTANT[check_add_constant(constant)]
    dst = torch.empty_like(src)
    function(dst, src)
    return dst


def add_constant_runtime(src: torch.Tensor, value: float) -> torch.Tensor:
    """``src + value`` (value rounded to float32) for a contiguous, non-empty 1-D float32 CPU tensor."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"add_constant_runtime: value must be a real number, got {value!r}")
    function = _ADD_CONSTANT_RUNTIME[src.dtype]
    dst = torch.empty_like(src)
    function(dst, src, float(value))
    return dst
