"""CPU ``store_kv_cache``: scatter each token's k/v heads into paged caches by slot."""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import jit


@jit(
    device="cpu",
    cpp_files=["kv_cache.cpp"],
    cpp_wrappers=[("store_kv_cache", "mllm_kernel::cpu::store_kv_cache")],
    func_name="cpu_kv_cache",
)
def _kv_cache_module(compiled_module):
    return compiled_module


def store_kv_cache(
    k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    """``k_cache[slot_mapping[t]] = k[t]``, ``v_cache[slot_mapping[t]] = v[t]``.

    ``k``, ``v``: ``[T, Hkv, D]`` (token/head strides free); caches: contiguous
    ``[num_slots, Hkv, D]`` of the same dtype (float32, float16, bfloat16); ``slot_mapping``:
    ``[T]`` int32/int64, a negative slot skips the token, one >= num_slots raises ValueError
    before anything is written.
    """
    _kv_cache_module.module("cpu").store_kv_cache(k, v, k_cache, v_cache, slot_mapping, num_threads())
