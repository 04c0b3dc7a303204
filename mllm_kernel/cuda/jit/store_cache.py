"""CUDA ``store_cache``: scatter rows of k and v into KV caches of any dtype, the upstream
package's entry point (``k_cache[indices[i]] = k[i]``, ``v_cache[indices[i]] = v[i]``).

The rows are moved as bytes by ``store_kv_cache``'s copy kernel (one module for every dtype,
``mllm_kernel/cuda/csrc/kv_cache.cuh``), which picks the widest copy unit the row size and the
pointers allow.
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit.kv_cache import _STORE
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import resolve_pdl, can_use_store_cache_with, store_cache_views

_OP = "store_cache"


def precompile(*, wait: bool = True):
    """Builds (or loads) the module now; see ``jit_utils.precompile``."""
    return jit_precompile(_STORE, wait=wait)


def can_use_store_cache(row_bytes: int) -> bool:
    """Whether ``store_cache`` supports rows of ``row_bytes`` bytes (a positive multiple of 4) and
    its module builds here; never raises (False, with a logged warning, otherwise)."""
    return can_use_store_cache_with(row_bytes, precompile)


def store_cache(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
    *,
    row_bytes: int = 0,
    num_split: int = 0,
    validate: bool = True,
    enable_pdl: bool | None = None,
) -> None:
    """``k_cache[indices[i]] = k[i]`` and ``v_cache[indices[i]] = v[i]``.

    ``k``, ``v``: ``[batch, row]`` (row = heads x head_dim; dense rows, row stride free, e.g. a
    slice of a fused QKV output); ``k_cache``, ``v_cache``: contiguous ``[slots, row]``; all
    four of one dtype, any dtype, rows a multiple of 4 bytes (``can_use_store_cache``);
    ``indices``: ``[batch]`` int32 or int64. ``row_bytes``: 0, or the row size in bytes (checked
    against k). ``num_split``: accepted for compatibility (0 or more); the kernel sizes its grid
    itself (about one 16-byte unit a thread), so no split needs tuning.

    ``validate=True`` reads the smallest and largest index back to the host (one sync) and
    raises ValueError naming an index outside ``[0, slots)`` with nothing written; with
    ``validate=False``, and while a CUDA graph is captured, such an index is skipped. The kernel
    never writes outside the caches.
    """
    views = store_cache_views(_OP, k, v, k_cache, v_cache, indices, row_bytes, num_split, validate)
    if views is not None:
        _STORE[torch.uint8](*views, indices, resolve_pdl(enable_pdl))
