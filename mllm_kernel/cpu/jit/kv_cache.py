"""CPU ``store_kv_cache``: scatter each token's k/v heads into paged caches by slot, copying, or
quantizing into float8_e4m3fn caches with per-tensor scales."""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import wants_fp8_store

_OP = "store_kv_cache"
# One module for every dtype: the kernels check the tensors and pick the element type.
_MODULE = jit_module("cpu_kv_cache", device="cpu", cpp_files=["kv_cache.cpp"],
                     cpp_wrappers=[(_OP, "mllm_kernel::cpu::store_kv_cache"),
                                   ("store_kv_cache__fp8", "mllm_kernel::cpu::store_kv_cache_fp8")])
_STORE = KernelTable(_OP, _MODULE, arg="k")
_STORE_FP8 = KernelTable(_OP, _MODULE, arg="k", export="store_kv_cache__fp8")


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_STORE, _STORE_FP8, wait=wait)


def store_kv_cache(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> None:
    """``k_cache[slot_mapping[t]] = k[t]``, ``v_cache[slot_mapping[t]] = v[t]``.

    ``k``, ``v``: ``[T, Hkv, D]`` (token/head strides free); caches: contiguous
    ``[num_slots, Hkv, D]`` of the same dtype (float32, float16, bfloat16); ``slot_mapping``:
    ``[T]`` int32/int64, a negative slot skips the token, one >= num_slots raises ValueError
    before anything is written.

    With ``k_scale`` and ``v_scale`` (float32 ``[1]`` tensors) the caches are float8_e4m3fn and
    hold ``k / k_scale`` and ``v / v_scale`` (round to nearest even, saturated to +-448; a zero
    scale stores zeros), the per-tensor scaled FP8 KV cache of serving engines.
    """
    if wants_fp8_store(_OP, k, k_cache, k_scale, v_scale):
        _STORE_FP8[k.dtype](k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale, num_threads())
    else:
        _STORE[k.dtype](k, v, k_cache, v_cache, slot_mapping, num_threads())
