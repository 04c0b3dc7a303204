"""CUDA ``store_kv_cache``: scatter each token's k/v heads into paged caches by slot, copying, or
quantizing into float8_e4m3fn caches with per-tensor scales.

One source (``mllm_kernel/cuda/csrc/kv_cache.cuh``) and two compiled modules, each serving every
dtype: the copy (it moves bytes) and the float8 store, so that a first call compiles only the
kernels it runs. ``enable_pdl``: programmatic dependent launch, on by
default (``None``; see ``mllm_kernel.op_args.resolve_pdl``).
"""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import out_of_range, resolve_pdl, wants_fp8_store

_OP = "store_kv_cache"

# Each module serves every dtype: the kernels check the tensors and pick the element type.
_STORE = KernelTable(_OP, jit_module("kv_cache", device="cuda", cuda_files=["kv_cache.cuh"],
                                     cuda_wrappers=[(_OP, "store_kv_cache")]), arg="k")
_STORE_FP8 = KernelTable(_OP, jit_module("kv_cache_fp8", device="cuda", cuda_files=["kv_cache.cuh"],
                                         cuda_wrappers=[("store_kv_cache__fp8", "store_kv_cache_fp8")]),
                         arg="k", export="store_kv_cache__fp8")


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_STORE, _STORE_FP8, wait=wait)


def _check_slots(slot_mapping: torch.Tensor, k_cache: torch.Tensor) -> None:
    """ValueError naming the first slot >= num_slots. Costs one device-to-host sync (the
    maximum), plus more only when a bad slot is found. Arguments the kernel's own checks will
    refuse anyway (wrong types, dtypes, shapes) are left to those checks."""
    if not (isinstance(slot_mapping, torch.Tensor) and isinstance(k_cache, torch.Tensor)):
        return
    if slot_mapping.dtype not in (torch.int32, torch.int64) or slot_mapping.numel() == 0 or k_cache.dim() < 1:
        return
    if slot_mapping.device != k_cache.device:
        return
    num_slots = k_cache.shape[0]
    if int(slot_mapping.max()) < num_slots:
        return
    raise out_of_range(_OP, "slot_mapping", slot_mapping, slot_mapping >= num_slots, f"a cache of {num_slots} slots")


def store_kv_cache(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    *,
    validate: bool = True,
    enable_pdl: bool | None = None,
) -> None:
    """``k_cache[slot_mapping[t]] = k[t]``, ``v_cache[slot_mapping[t]] = v[t]``.

    ``k``, ``v``: ``[T, Hkv, D]`` (token and head strides free, e.g. slices of a fused QKV
    output); caches: contiguous ``[num_slots, Hkv, D]`` of k's dtype (float32, float16, bfloat16
    or float8_e4m3fn); ``slot_mapping``: contiguous ``[T]`` int32/int64. A negative slot skips
    its token.

    With ``k_scale`` and ``v_scale`` (float32 ``[1]`` tensors on the device, read by the kernel,
    so a captured graph picks up new values) the caches are float8_e4m3fn and hold
    ``k / k_scale`` and ``v / v_scale`` (round to nearest even, saturated to +-448; a zero scale
    stores zeros), the per-tensor scaled FP8 KV cache of serving engines; k and v are then
    float32, float16 or bfloat16.

    Out-of-range slots: the kernel never writes outside the caches (it skips a slot >=
    num_slots). With ``validate=True`` (the default) the wrapper also reads
    ``slot_mapping.max()`` back to the host before launching -- one device-to-host sync -- and
    raises ValueError naming the first bad slot, with nothing written. Serving loops that
    guarantee their slots should pass ``validate=False`` to avoid the sync; validation is also
    skipped while a CUDA graph is being captured (a sync is not allowed there), where bad slots
    are only skipped.
    """
    quantize = wants_fp8_store(_OP, k, k_cache, k_scale, v_scale)
    if validate and not torch.cuda.is_current_stream_capturing():
        _check_slots(slot_mapping, k_cache)
    if quantize:
        _STORE_FP8[k.dtype](k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale, resolve_pdl(enable_pdl))
    else:
        _STORE[k.dtype](k, v, k_cache, v_cache, slot_mapping, resolve_pdl(enable_pdl))
