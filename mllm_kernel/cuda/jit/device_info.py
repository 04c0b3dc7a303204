"""The CUDA device properties the wrappers read on every call to pick a kernel or a plan,
cached per device index (they do not change while a process runs)."""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=None)
def capability(index: int) -> tuple[int, int]:
    """The compute capability of CUDA device ``index``."""
    return torch.cuda.get_device_capability(index)


@functools.lru_cache(maxsize=None)
def sm_count(index: int) -> int:
    """The streaming multiprocessors of CUDA device ``index``."""
    return torch.cuda.get_device_properties(index).multi_processor_count


@functools.lru_cache(maxsize=None)
def block_smem(index: int) -> int | None:
    """The shared memory a block of CUDA device ``index`` may take (its opt-in limit), or None
    where this PyTorch does not say."""
    return getattr(torch.cuda.get_device_properties(index), "shared_memory_per_block_optin", None)
