"""Viewing a tensor as rows for the kernels, without copies, and allocating per-row-group
results in the layouts callers get back (shared by the CPU and CUDA wrappers)."""

from __future__ import annotations

import torch


def as_rows(tensor: torch.Tensor, op: str, name: str) -> torch.Tensor:
    """``tensor`` as a 2-D ``[rows, last_dim]`` view: leading dims flattened, the row stride
    kept, a 1-D tensor as one row.

    Raises ValueError when ``tensor`` is not a tensor, has no dims, or its leading dims cannot
    be merged into one stride (a silent copy would cost a pass over memory and, for outputs and
    in-place ops, lose the writes).
    """
    try:
        dim = tensor.dim()
    except AttributeError:
        raise ValueError(f"{op}: {name}: must be a torch.Tensor, got {type(tensor).__name__}") from None
    if dim == 2:
        return tensor
    if dim == 1:
        return tensor.unsqueeze(0)
    if dim == 0:
        raise ValueError(f"{op}: {name}: must have at least 1 dim, got a 0-dim tensor")
    try:
        return tensor.view(-1, tensor.shape[-1])
    except RuntimeError:
        raise ValueError(
            f"{op}: {name}: leading dims of shape {list(tensor.shape)} with strides {list(tensor.stride())} "
            "cannot be flattened into rows without a copy"
        ) from None


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
