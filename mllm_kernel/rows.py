"""What the row ops' wrappers share (CPU and CUDA): an argument check, and allocating
per-row-group results in the layouts callers get back. The kernels view [..., last] tensors as
rows themselves (``TensorMatcher::verify_rows``, ``include/mllm_kernel/rows.hpp``)."""

from __future__ import annotations

import math

import torch


def require_tensor(value: object, op: str, name: str) -> torch.Tensor:
    """``value`` if it is a tensor, else a ValueError naming the op and the argument (for the
    wrappers that read a shape before the kernel checks the rest)."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{op}: {name}: must be a torch.Tensor, got {type(value).__name__}")
    return value


def row_shape(input: object, op: str) -> tuple[int, int]:
    """(rows, last dim) of ``input`` [..., last] as the kernels see it, leading dims merged; a
    ValueError for a non-tensor or a 0-dim tensor (the kernel checks the rest)."""
    shape = require_tensor(input, op, "input").shape
    if not shape:
        raise ValueError(f"{op}: input: must have at least 1 dim, got a 0-dim tensor")
    return math.prod(shape[:-1]), shape[-1]


def group_scales(input: torch.Tensor, rows: int, groups: int, column_major: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 scales for per-group quantization of ``input`` seen as ``[rows, hidden]``: (the
    tensor returned to the caller, its ``[rows, groups]`` view that the kernel writes).

    Row-major scales keep the input's leading dims, ``[..., groups]``; column-major ones are the
    transposed view of a ``[groups, rows]`` buffer, the layout FP8 block-scaled GEMMs read.
    """
    if column_major:
        scales = torch.empty((groups, rows), dtype=torch.float32, device=input.device).t()
        return scales, scales
    scales = torch.empty((*input.shape[:-1], groups), dtype=torch.float32, device=input.device)
    return scales, scales.view(-1, groups)
