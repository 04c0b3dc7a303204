"""Viewing a tensor as rows for the CPU kernels, without copies."""

from __future__ import annotations

import torch


def as_rows(tensor: torch.Tensor, op: str, name: str) -> torch.Tensor:
    """``tensor`` as a 2-D ``[rows, last_dim]`` view (leading dims flattened, row stride kept).

    Raises ValueError when ``tensor`` is not a tensor, has no dims, or its leading dims cannot
    be flattened without a copy (a copy would break in-place ops and cost a pass over memory).
    """
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{op}: {name}: must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() == 0:
        raise ValueError(f"{op}: {name}: must have at least 1 dim, got a 0-dim tensor")
    if tensor.dim() == 2:
        return tensor
    try:
        return tensor.view(-1, tensor.shape[-1])
    except RuntimeError:
        raise ValueError(
            f"{op}: {name}: leading dims of shape {list(tensor.shape)} with strides {list(tensor.stride())} "
            "cannot be flattened into rows without a copy"
        ) from None
