"""Helpers shared by the CUDA wrappers: dtype dispatch."""

from __future__ import annotations

from typing import Callable, TypeVar

import torch

from mllm_kernel.rows import require_tensor

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
    kernel = kernels.get(require_tensor(tensor, op, name).dtype)
    if kernel is None:
        raise ValueError(
            f"{op}: {name}: dtype must be one of {dtype_names()}, got {str(tensor.dtype).removeprefix('torch.')}"
        )
    return kernel


class FunctionTable(dict):
    """``op``'s compiled function per dtype. A wrapper's hot path is one dict lookup, no Python
    call (about 50 ns less per call than a lookup method)::

        try:
            function = TABLE[input.dtype]
        except (KeyError, AttributeError):  # first call for this dtype, or not a supported tensor
            function = TABLE.lookup(input)

    :meth:`lookup` builds the dtype's module (first use) and stores its function, or raises
    :func:`pick`'s ValueError for a non-tensor or an unsupported dtype."""

    def __init__(self, kernels: dict[torch.dtype, object], op: str, name: str) -> None:
        super().__init__()
        self._kernels = kernels
        self.op = op
        self.name = name  # the argument named in messages

    def lookup(self, tensor: object) -> Callable:
        function = getattr(pick(self._kernels, self.op, self.name, tensor)(), self.op)
        self[tensor.dtype] = function  # type: ignore[union-attr]
        return function
