"""Helpers shared by the CUDA wrappers: dtype dispatch."""

from __future__ import annotations

from typing import Callable, TypeVar

import torch

K = TypeVar("K")

#: The element types the LLM kernels are built for, in the order messages list them.
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def dtype_names(dtypes=FLOAT_DTYPES) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def per_dtype(factory: Callable[[torch.dtype], K]) -> dict[torch.dtype, K]:
    """One kernel object per supported dtype (modules compile lazily, on first call)."""
    return {d: factory(d) for d in FLOAT_DTYPES}


def pick(kernels: dict[torch.dtype, K], op: str, name: str, tensor: object) -> K:
    """The kernel for ``tensor``'s dtype, or a ValueError worded like the C++ checks."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{op}: {name}: expected a torch.Tensor, got {type(tensor).__name__}")
    kernel = kernels.get(tensor.dtype)
    if kernel is None:
        raise ValueError(
            f"{op}: {name}: dtype must be one of {dtype_names()}, got {str(tensor.dtype).removeprefix('torch.')}"
        )
    return kernel


class FunctionCache:
    """The compiled function for (op, dtype), looked up once: the hot path of every wrapper is
    then one dict lookup instead of pick() + JitKernel.__call__ + a module attribute."""

    def __init__(self, kernels: dict[torch.dtype, object]) -> None:
        self._kernels = kernels
        self._functions: dict[tuple[str, torch.dtype], Callable] = {}

    def get(self, op: str, name: str, tensor: object) -> Callable:
        """``op`` of the module for ``tensor``'s dtype (built on first use); ValueError like
        :func:`pick` for a non-tensor or an unsupported dtype."""
        try:
            return self._functions[op, tensor.dtype]  # type: ignore[union-attr]
        except (KeyError, AttributeError, TypeError):
            pass
        function = getattr(pick(self._kernels, op, name, tensor)(), op)
        self._functions[op, tensor.dtype] = function  # type: ignore[union-attr]
        return function
