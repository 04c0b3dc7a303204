"""CPU ``store_cache``: scatter rows of k and v into KV caches of any dtype, the upstream
package's entry point (``k_cache[indices[i]] = k[i]``, ``v_cache[indices[i]] = v[i]``).

The rows are moved as bytes by ``store_kv_cache``'s copy (``mllm_kernel/cpu/csrc/kv_cache.cpp``),
rows split over the module's threads.
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.cpu.jit.kv_cache import _STORE
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import can_use_store_cache_with, store_cache_views

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
) -> None:
    """``k_cache[indices[i]] = k[i]`` and ``v_cache[indices[i]] = v[i]``; the arguments of
    ``mllm_kernel.cuda.jit.store_cache.store_cache`` (no ``enable_pdl``). Every index is checked
    to lie in ``[0, slots)`` before anything is written (ValueError naming the first that does
    not)."""
    views = store_cache_views(_OP, k, v, k_cache, v_cache, indices, row_bytes, num_split, validate=True)
    if views is not None:
        _STORE[torch.uint8](*views, indices, num_threads())
