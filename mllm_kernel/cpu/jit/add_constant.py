"""CPU ``add_constant`` (a compile-time constant) and ``add_constant_runtime`` (any float)."""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import jit, make_cpp_args

SUPPORTED_CONSTANTS = (1, 2, 4, 8, 16)


def _make_kernel(constant: int):
    args = make_cpp_args(constant)

    @jit(
        args=args,
        device="cpu",
        cpp_files=["add_constant.cpp"],
        cpp_wrappers=[("add_constant", f"mllm_kernel::cpu::add_constant<{args}>")],
        func_name="add_constant",
    )
    def _kernel(compiled_module, dst: torch.Tensor, src: torch.Tensor) -> None:
        compiled_module.add_constant(dst, src)

    return _kernel


_KERNELS = {c: _make_kernel(c) for c in SUPPORTED_CONSTANTS}


@jit(
    device="cpu",
    cpp_files=["add_constant.cpp"],
    cpp_wrappers=[("add_constant_runtime", "mllm_kernel::cpu::add_constant_runtime")],
    func_name="add_constant_runtime",
)
def _runtime_kernel(compiled_module, dst: torch.Tensor, src: torch.Tensor, value: float) -> None:
    compiled_module.add_constant_runtime(dst, src, value)


def check_constant(constant: object) -> int:
    """The constant itself when it is one of SUPPORTED_CONSTANTS, else a ValueError."""
    if isinstance(constant, bool) or not isinstance(constant, int) or constant not in SUPPORTED_CONSTANTS:
        raise ValueError(f"add_constant: constant must be one of {SUPPORTED_CONSTANTS}, got {constant!r}")
    return constant


def add_constant(src: torch.Tensor, constant: int) -> torch.Tensor:
    """``src + constant`` for a contiguous, non-empty 1-D float32 CPU tensor.

    ``constant`` is compiled into the kernel and must be one of 1, 2, 4, 8, 16; each one is its
    own cached module. Wrong dtype, device, shape, strides or an empty tensor raise ValueError.
    """
    kernel = _KERNELS[check_constant(constant)]
    dst = torch.empty_like(src)
    kernel(dst, src)
    return dst


def add_constant_runtime(src: torch.Tensor, value: float) -> torch.Tensor:
    """``src + value`` (value rounded to float32) for a contiguous, non-empty 1-D float32 CPU tensor."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"add_constant_runtime: value must be a real number, got {value!r}")
    dst = torch.empty_like(src)
    _runtime_kernel(dst, src, float(value))
    return dst
